#!/usr/bin/env bash
# The README's demo command (`npm run demo`): builds everything, boots an IPVS-capable kernel and
# runs the built-in example in it (scripts/demo-guest.sh). Default: Debian's kernel under qemu,
# which has IPVS and nftables, so the whole data plane (including the nftables glue) runs;
# IPVSYNC_VM_KERNEL=uml is faster but has no nftables ip tables (the glue is skipped there); where
# user-mode-linux cannot boot (it panics on CPUs with AMX) the VM harness's probe says so and the
# demo runs under qemu all the same.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec node dist/test/vm/cli.js --kernel "${IPVSYNC_VM_KERNEL:-qemu}" -- bash scripts/demo-guest.sh
