#!/usr/bin/env bash
# The end-to-end suite as three processes at once, each with its own mesh of nine services
# and its own database (tests/e2e/shard_test.go): the tests that need the mesh to themselves
# (they stop services, or count what the whole mesh did) one after the other, split in two
# halves ("serial-1" and "serial-2", the GetTask benchmark after the second); the rest side
# by side in the "parallel" shard. The serial tests mostly wait for leases to expire and
# services to come back, so running them beside the parallel ones costs those little. Each
# line of output is prefixed with its shard; the run fails if any shard fails. The
# docker-compose stack's test (tests/e2e/compose) runs beside them from the start.
set -uo pipefail
cd "$(dirname "$0")/../tests/e2e"

# -timeout 50m: the tests' liveness bounds stretch by THEFOLD_E2E_SLACK (4 under CI,
# tests/e2e/main_test.go), the longest to 40 minutes; the binary's timeout stays above them
# so a hang fails by its test's own message, not by a panic that loses the others' output.
run() {
  local shard=$1
  shift
  THEFOLD_E2E_SHARD=$shard go run ../../pkg/testenv/cmd/testreport -slowest 10 -- \
    -count=1 -trimpath -timeout 50m "$@" ./... 2>&1 | sed -u "s/^/[$shard] /"
  return "${PIPESTATUS[0]}"
}

# The shards' meshes sandbox with bwrap unless THEFOLD_E2E_SANDBOX_BACKEND says otherwise
# ("auto" is the product's default: docker where an engine answers). The scenarios are about
# the task loop, not the backend; on a docker engine that stores images with fuse-overlayfs
# every file a sandbox's toolchain reads goes through user space, and the e2e phase took
# 1,430 s with docker against about 620 s with bwrap. Docker stays covered: the docker
# backend's own tests (services/sandbox, make test-unit), the e2e tests about docker (they
# ask for it), and the compose stack's test, which takes the demo task through a docker
# sandbox to its pull request.
export THEFOLD_E2E_SANDBOX_BACKEND=${THEFOLD_E2E_SANDBOX_BACKEND:-bwrap}

# The test binary and the report tool are built once, before the shards start.
go test -c -trimpath -o /dev/null . || exit 1
go build -o /dev/null ../../pkg/testenv/cmd/testreport || exit 1

run serial-1 &
serial1=$!
run serial-2 -bench GetTask -benchtime 1000x &
serial2=$!
# Five at a time: the shard keeps both cores busy with five, and more only stretch every test
# toward its bounds (seen: a 40 s agent scenario taking 440 s among eight, on a slow machine).
run parallel -parallel 5 &
par=$!
# The docker-compose stack (tests/e2e/compose, make compose-test) from the start too: with
# the shards' sandboxes in bwrap the machine's two cores were busy only 64% of the e2e phase
# (2026-11-30), and the compose test (images, ten containers, the demo task in a docker
# sandbox; 99 s) waiting for both serial halves made the phase 287 s where its longest shard
# took 198 s. Its service images link the same packages the shards' meshes do (go build
# -trimpath: one compile in the build cache serves both). It skips, saying so, without
# docker-compose or an engine; the shards skip it.
# -timeout 45m: its bounds stretch by THEFOLD_E2E_SLACK like the shards' (testenv.Liveness),
# and `make images` alone took 12 minutes beside the shards on a fuse-overlayfs engine.
# Through testreport (-stream: its progress as it happens) so that a failure is also listed
# at the end of the run with its reason, as the shards' are.
(THEFOLD_E2E_SHARD=compose go run ../../pkg/testenv/cmd/testreport -stream -slowest 0 -- \
  -count=1 -trimpath -timeout 45m -run '^TestCompose' ./compose/ 2>&1 |
  sed -u "s/^/[compose] /"
  exit "${PIPESTATUS[0]}") &
comp=$!
wait "$serial1"
rs1=$?
wait "$serial2"
rs2=$?
wait "$par"
rp=$?
wait "$comp"
rc=$?
if [ "$rs1" -ne 0 ] || [ "$rs2" -ne 0 ] || [ "$rp" -ne 0 ] || [ "$rc" -ne 0 ]; then
  echo "e2e: the serial shards exited $rs1 and $rs2, the parallel shard $rp, the compose test $rc" >&2
  exit 1
fi
