#!/bin/bash
# usage: run.sh SHAPE NSVC NEP [REPS] [OPS...]  -- run inside a fresh netns; prints results
SHAPE=$1 N=$2 E=$3 REPS=${4:-5}; shift 4; OPS=${@:-"fwdback addsvc"}
D=/tmp/nftshape/$SHAPE-$N-$E
python3 /work/research/nft-shape/gen.py $SHAPE $N $E $D
unshare -n bash -s "$SHAPE" "$N" "$E" "$REPS" "$D" "$OPS" <<'IN'
SHAPE=$1 N=$2 E=$3 REPS=$4 D=$5 OPS=$6
ip link set lo up
t0=$(date +%s.%N); timeout 150 nft -f $D/full.nft || { echo "LOAD FAILED"; exit 1; }; t1=$(date +%s.%N)
[ -f $D/post.sh ] && bash $D/post.sh; t1=$(date +%s.%N)
LOAD=$(echo "$t1 - $t0" | bc)
ks() { # kernel time of the batch sendmsg (ms), max sendmsg duration
  strace -f -T -e trace=sendmsg nft -f "$1" 2>&1 >/dev/null | awk -F'<' '/sendmsg/{gsub(/>/,"",$NF); if ($NF+0>m) m=$NF+0} END{printf "%.3f", m*1000}'; }
med() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
RES="shape=$SHAPE nsvc=$N nep=$E load_s=$LOAD"
for op in $OPS; do
  L=""
  for i in $(seq $REPS); do
    case $op in
      fwdback) L="$L $(ks $D/fwd.nft) $(ks $D/back.nft)";;
      addsvc) L="$L $(ks $D/addsvc.nft)"; nft -f $D/delsvc.nft;;
      delsvc) nft -f $D/addsvc.nft; L="$L $(ks $D/delsvc.nft)";;
      updown) L="$L $(ks $D/up.nft) $(ks $D/down.nft)";;
      newn) L="$L $(ks $D/newn.nft)"; nft -f $D/delnewn.nft;;
    esac
  done
  RES="$RES ${op}_ms=$(echo $L | med) [${L# }]"
done
echo "$RES"
IN
