#!/usr/bin/env bash
# The README's test command (`npm test`) and what CI runs: installs and builds everything, then
# runs every suite — unit (no root), bounded fuzzing, host kernel (private namespaces), the
# real-kernel suite inside an IPVS-capable VM (user-mode-linux where it boots, else qemu: the VM
# harness probes it), the e2e suite under qemu, and the node image built and run
# (scripts/image.sh, image-test.sh). Every suite runs even if an earlier one failed; the exit
# code is non-zero if any failed.
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
  # The VM's summary line names the kernel it ran on.
  local on
  on=$(grep -aoE '^vm: kernel=[a-z]+ [^ ]+' "$log" | tail -n 1 | sed 's/^vm: kernel=/ under /')
  if [ "$rc" = 0 ]; then
    echo "=== $name: ok$on ($((SECONDS - t0)) s)"
  else
    echo "=== $name: FAILED$on ($((SECONDS - t0)) s)"
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
kernel_on=$(grep -aoE '^vm: kernel=[a-z]+' "$log" | tail -n 1 | sed 's/^vm: kernel=//')
# Where user-mode-linux boots, its fallback (qemu, for CPUs where it panics) would go untried:
# force it for the VM's own checks and one IPVS file, in one qemu boot. Where the suite above
# already fell back, it was that run.
if grep -aq '^vm: kernel suite: user-mode-linux cannot boot' "$log"; then
  echo
  echo "=== kernel-fallback: the kernel suite ran under qemu already"
else
  run kernel-fallback env IPVSYNC_UML_PROBE=fail node dist/test/vm/cli.js -- \
    node --test --test-reporter=spec --test-concurrency=1 dist/test/kernel/vm-environment.test.js dist/test/kernel/ipvs-api.test.js
fi
# The proxy end to end needs IPVS and nftables together: Debian's kernel under qemu.
run e2e node dist/test/vm/cli.js --kernel qemu --suite e2e
# The node image, built here (base included) and run as deploy/daemonset.yaml runs it.
run image bash scripts/image.sh
run image-test bash scripts/image-test.sh

echo
echo "tests: $passed_total passed, $failed_total failed"
if [ ${#failed[@]} -gt 0 ]; then
  echo "test: FAILED suites: ${failed[*]}"
  exit 1
fi
case $kernel_on in
  uml) kernel_on=user-mode-linux ;;
  '') kernel_on='a VM' ;;
esac
echo "test: all suites passed (unit, cmake, fuzz, host kernel, real kernel in $kernel_on, proxy end to end in qemu, the node image)"
