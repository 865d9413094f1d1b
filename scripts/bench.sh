#!/usr/bin/env bash
# Every benchmark, each against its peer tool in the same run (`npm run bench`). Results go to
# bench/results/*.json. Host-kernel benches run in private network namespaces; IPVS benches run
# inside the VM kernel (this machine's may lack IPVS), where timings are distorted: read ratios.
# Usage: scripts/bench.sh [NAME…]   (names: ipset addresses binding nftables nftables-mode ipvs event-loop; default all)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p bench/results
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(ipset addresses binding nftables nftables-mode ipvs event-loop)
for b in "${want[@]}"; do
  echo "=== bench: $b"
  case "$b" in
    # The guest sees the checkout read-only: results go through the VM's output window.
    ipvs|engine) node dist/test/vm/cli.js --out bench/results -- \
      'IPVSYNC_RESULTS_DIR=$IPVSYNC_VM_OUT node dist/bench/'"$b"'.js' ;;
    # the daemon's event loop with the proxier in process and on its sync thread: the host
    # (IPVS in memory) at 1k-50k, then the VM's kernel at 10k and 20k, there also the thread
    # with IPVS's rate estimation off (net.ipv4.vs.run_estimation=0)
    event-loop)
      node dist/bench/event-loop.js --env host --sizes 1000,10000,20000,50000
      node dist/test/vm/cli.js --kernel qemu --mem 3072 --timeout 3600 --out bench/results -- \
        'IPVSYNC_RESULTS_DIR=$IPVSYNC_VM_OUT node dist/bench/event-loop.js --env qemu --sizes 10000,20000 --modes address --no-estimation' ;;
    *) node "dist/bench/$b.js" ;;
  esac
done
