#!/usr/bin/env bash
# The README's test command (`npm test`) and what CI runs: installs and builds everything, then
# runs every suite — unit (no root), bounded fuzzing, host kernel (private namespaces) and the
# real-kernel suite inside an IPVS-capable VM. Every suite runs even if an earlier one failed;
# the exit code is non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || { echo "test: setup failed" >&2; exit 1; }

failed=()
run() {
  local name=$1
  shift
  echo
  echo "=== $name: $*"
  local t0=$SECONDS
  if "$@"; then
    echo "=== $name: ok ($((SECONDS - t0)) s)"
  else
    echo "=== $name: FAILED ($((SECONDS - t0)) s)"
    failed+=("$name")
  fi
}

run unit node --test --test-reporter=spec dist/test/unit/
# The same sources built by cmake-js must load and pass the unit suite too.
run cmake bash -c 'npx --no-install cmake-js rebuild --out build-cmake --log-level error >/dev/null &&
  IPVSYNC_ADDON=build-cmake/Release/ipvsync.node node --test dist/test/unit/'
run fuzz bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
run host bash scripts/host-tests.sh
run kernel node dist/test/vm/cli.js --suite kernel

echo
if [ ${#failed[@]} -gt 0 ]; then
  echo "test: FAILED suites: ${failed[*]}"
  exit 1
fi
echo "test: all suites passed (unit, fuzz, host kernel, real kernel in VM)"
