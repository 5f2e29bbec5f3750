#!/usr/bin/env bash
# Checks that `make check-generate` and `make lint` fail, with a clear message, in a copy of
# the tree that is not a git checkout (before, both compared with nothing and passed).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$root/Makefile" "$tmp/"
mkdir -p "$tmp/scripts" && cp "$root"/scripts/*.sh "$tmp/scripts/"
: >"$tmp/go.work"
fail=0
for target in check-generate lint; do
  if out=$(cd "$tmp" && GIT_CEILING_DIRECTORIES="$tmp/.." make --no-print-directory "$target" 2>&1); then
    echo "test-make: make $target passed outside a git checkout:"; echo "$out"; fail=1
  elif ! grep -q "needs a git checkout" <<<"$out"; then
    echo "test-make: make $target failed outside a git checkout without saying why:"; echo "$out"; fail=1
  fi
done
[ $fail -eq 0 ] && echo "test-make: check-generate and lint refuse to run outside a git checkout"
exit $fail
