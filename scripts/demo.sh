#!/usr/bin/env bash
# The README's demo command (`npm run demo`): builds everything and runs the built-in example
# (scripts/demo-guest.sh) in the nftables data plane on this machine's own kernel, as root in
# private network and mount namespaces (no VM, nothing of the machine's networking touched).
#
# `npm run demo -- --ipvs`: the IPVS data plane instead, in a kernel that has IPVS: Debian's
# under qemu (IPVSYNC_VM_KERNEL=uml is faster, but has no nftables ip tables, so the glue is
# skipped; where user-mode-linux cannot boot, on CPUs with AMX, the VM harness says so and
# uses qemu).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${1:-}" = --ipvs ]; then
  exec node dist/test/vm/cli.js --kernel "${IPVSYNC_VM_KERNEL:-qemu}" -- bash scripts/demo-guest.sh ipvs
fi
exec unshare --mount --net --propagation private -- bash -c '
  set -e
  ip link set lo up
  mkdir -p /run/netns && mount -t tmpfs ipvsync-demo /run/netns
  exec bash scripts/demo-guest.sh nftables
'
