#!/usr/bin/env bash
# Every benchmark, each against its peer tool in the same run (`npm run bench`). Results go to
# bench/results/*.json. Host-kernel benches run in private network namespaces; IPVS benches run
# inside the VM kernel (this machine's may lack IPVS), where timings are distorted: read ratios.
# Usage: scripts/bench.sh [NAME…]   (names: ipset addresses binding nftables ipvs; default all)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p bench/results
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(ipset addresses binding nftables ipvs)
for b in "${want[@]}"; do
  echo "=== bench: $b"
  case "$b" in
    # The guest sees the checkout read-only: results go through the VM's output window.
    ipvs|engine) node dist/test/vm/cli.js --out bench/results -- \
      'IPVSYNC_RESULTS_DIR=$IPVSYNC_VM_OUT node dist/bench/'"$b"'.js' ;;
    *) node "dist/bench/$b.js" ;;
  esac
done
