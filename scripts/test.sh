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
# Sums node:test's counts in a suite's log ("ℹ pass N" with the spec reporter, "# pass N" with
# TAP) and reports the suite: `tally NAME LOG RC SECONDS`.
tally() {
  local name=$1 log=$2 rc=$3 secs=$4
  local p f
  p=$(grep -aE '^(ℹ|#) pass [0-9]+$' "$log" | awk '{s+=$3} END {print s+0}')
  f=$(grep -aE '^(ℹ|#) fail [0-9]+$' "$log" | awk '{s+=$3} END {print s+0}')
  passed_total=$((passed_total + p))
  failed_total=$((failed_total + f))
  # The VM's summary line names the kernel it ran on.
  local on
  on=$(grep -aoE '^vm: kernel=[a-z]+ [^ ]+' "$log" | tail -n 1 | sed 's/^vm: kernel=/ under /')
  if [ "$rc" = 0 ]; then
    echo "=== $name: ok$on ($secs s)"
  else
    echo "=== $name: FAILED$on ($secs s)"
    failed+=("$name")
  fi
}
run() {
  local name=$1
  shift
  echo
  echo "=== $name: $*"
  local t0=$SECONDS
  local rc=0
  "$@" 2>&1 | tee "$log" || rc=${PIPESTATUS[0]}
  tally "$name" "$log" "$rc" $((SECONDS - t0))
}
# Suites side by side, each to its own log, shown whole and tallied in order once all have
# ended: `together NAME1 'CMD1' NAME2 'CMD2' …` (each CMD one shell command line).
together() {
  local names=() pids=() t0=$SECONDS i
  local dir
  dir=$(mktemp -d)
  while [ $# -gt 0 ]; do
    names+=("$1")
    echo
    echo "=== $1 (side by side): $2"
    bash -c "$2" >"$dir/$1.log" 2>&1 &
    pids+=($!)
    shift 2
  done
  # (in the order they end: each one's time is its own)
  local running=("${pids[@]}") rc done_pid
  while [ ${#running[@]} -gt 0 ]; do
    rc=0
    wait -n -p done_pid "${running[@]}" || rc=$?
    for i in "${!pids[@]}"; do
      [ "${pids[$i]}" = "$done_pid" ] && echo "$rc $((SECONDS - t0))" >"$dir/${names[$i]}.rc"
    done
    local still=()
    for i in "${running[@]}"; do [ "$i" != "$done_pid" ] && still+=("$i"); done
    running=("${still[@]}")
  done
  : >"$log"
  for i in "${!names[@]}"; do
    echo
    echo "=== ${names[$i]}: output"
    cat "$dir/${names[$i]}.log"
    cat "$dir/${names[$i]}.log" >>"$log"
    read -r rc secs <"$dir/${names[$i]}.rc"
    tally "${names[$i]}" "$dir/${names[$i]}.log" "$rc" "$secs"
  done
  rm -rf "$dir"
}

run unit node --test --test-reporter=spec dist/test/unit/
# The same sources built by cmake-js must load and pass the unit suite too.
run cmake bash -c 'npx --no-install cmake-js rebuild --out build-cmake --log-level error >/dev/null &&
  IPVSYNC_ADDON=build-cmake/Release/ipvsync.node node --test dist/test/unit/'
run fuzz bash scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
run host bash scripts/host-tests.sh
# The real-kernel suite (user-mode-linux where it boots, else qemu) and the proxy end to end
# (IPVS and nftables together: Debian's kernel under qemu) keep one CPU each: side by side.
together kernel 'node dist/test/vm/cli.js --suite kernel' e2e 'node dist/test/vm/cli.js --kernel qemu --suite e2e'
kernel_on=$(grep -aoE '^vm: kernel=[a-z]+' "$log" | head -n 1 | sed 's/^vm: kernel=//')
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
