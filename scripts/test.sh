#!/usr/bin/env bash
# The README's test command (`npm test`) and what CI runs: installs and builds everything, then
# runs every suite — unit (no root), bounded fuzzing, host kernel (private namespaces) and the
# real-kernel suite inside an IPVS-capable VM. Every suite runs even if an earlier one failed;
# the exit code is non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || { echo "test: setup failed" >&2; exit 1; }

failed=()
passed_total=0
failed_total=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() {
  local name=$1
  shift
  echo
  echo "=== $name: $*"
  local t0=$SECONDS
  local rc=0
  "$@" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}
  # Sum node:test's own counts ("ℹ pass N" with the spec reporter, "# pass N" with TAP).
  local p f
  p=$(grep -aE '^(ℹ|#) pass [0-9]+$' "$log" | awk '{s+=$3} END {print s+0}')
  f=$(grep -aE '^(ℹ|#) fail [0-9]+$' "$log" | awk '{s+=$3} END {print s+0}')
  passed_total=$((passed_total + p))
  failed_total=$((failed_total + f))
  if [ "$rc" = 0 ]; then
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
# The proxy end to end needs IPVS and nftables together: Debian's kernel under qemu.
run e2e node dist/test/vm/cli.js --kernel qemu --suite e2e

echo
echo "tests: $passed_total passed, $failed_total failed"
if [ ${#failed[@]} -gt 0 ]; then
  echo "test: FAILED suites: ${failed[*]}"
  exit 1
fi
echo "test: all suites passed (unit, cmake, fuzz, host kernel, real kernel in user-mode-linux, proxy end to end in qemu)"
