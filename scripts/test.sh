#!/usr/bin/env bash
# make test: every phase CI runs, one after the other, each timed; the times are printed at
# the end (and when a phase fails, up to it), so a slow CI run says where its time went.
set -uo pipefail
cd "$(dirname "$0")/.."
phases=(setup test-make check-generate lint test-unit test-e2e)
times=()
# Every failed test of every phase and e2e shard, one line each (pkg/testenv/cmd/testreport),
# printed last: a failed run's tail then says what broke, not only which phase.
THEFOLD_TEST_FAILURES=$(mktemp)
export THEFOLD_TEST_FAILURES
trap 'rm -f "$THEFOLD_TEST_FAILURES"' EXIT
report() {
  local total=0 line="" i
  for i in "${!times[@]}"; do
    line+="${phases[$i]} ${times[$i]}s · "
    total=$((total + times[i]))
  done
  echo "== make test phases: ${line}total ${total}s"
}
for p in "${phases[@]}"; do
  start=$(date +%s)
  make --no-print-directory "$p"
  rc=$?
  times+=($(($(date +%s) - start)))
  if [ $rc -ne 0 ]; then
    report
    echo "== make test: $p failed"
    if [ -s "$THEFOLD_TEST_FAILURES" ]; then
      echo "== the tests that failed:"
      cat "$THEFOLD_TEST_FAILURES"
    fi
    exit $rc
  fi
done
report
