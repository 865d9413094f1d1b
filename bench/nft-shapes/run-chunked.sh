#!/bin/bash
# run-chunked.sh SHAPE NSVC CHUNKLINES: like run.sh but loads full.nft in several transactions (to fit the 2-min budget)
SHAPE=$1 N=$2 CL=${3:-20000}
D=/tmp/nftshape/$SHAPE-$N-10
python3 /work/research/nft-shape/gen.py $SHAPE $N 10 $D
rm -f $D/part-*; split -l $CL -d -a 3 $D/full.nft $D/part-
unshare -n bash -s $D <<'IN'
D=$1
t0=$(date +%s.%N)
for p in $D/part-*; do timeout 150 nft -f $p || { echo "part $p failed"; exit 1; }; done
t1=$(date +%s.%N); echo "chunked load_s=$(echo "$t1 - $t0" | bc)"
ks() { strace -f -T -e trace=sendmsg nft -f "$1" 2>&1 >/dev/null | awk -F'<' '/sendmsg/{gsub(/>/,"",$NF); if ($NF+0>m) m=$NF+0} END{printf "%.3f", m*1000}'; }
L=""; for i in 1 2 3 4 5; do L="$L $(ks $D/fwd.nft) $(ks $D/back.nft)"; done; echo "fwdback_ms [$L ]"
L=""; for i in 1 2 3 4 5; do L="$L $(ks $D/addsvc.nft)"; nft -f $D/delsvc.nft; done; echo "addsvc_ms [$L ]"
IN
