#!/bin/bash
# pktcost.sh SHAPE K NSVC -> median us/pkt of 3 runs, each in a fresh netns (every packet = new conntrack + nat lookup)
SHAPE=$1 K=$2 N=$3
python3 /work/research/nft-shape/pktgen.py $SHAPE $K $N > /tmp/pkt-$SHAPE-$K.nft
for r in 1 2 3; do
unshare -n bash -s $SHAPE $K $N <<'IN'
ip link set lo up; ip link add v0 type veth peer name v1; ip link set v0 up; ip link set v1 up; ip addr add 10.255.0.1/24 dev v0; ip neigh add 10.255.0.2 lladdr 02:00:00:00:00:02 dev v0 nud permanent; ip route add 10.0.0.0/8 via 10.255.0.2 dev v0
nft -f /tmp/pkt-$1-$2.nft
[ $1 = E ] && python3 /work/research/nft-shape/nlrule.py kp out svc2n nv > /dev/null
/work/research/nft-shape/sender $3
IN
done | sort -n | sed -n 2p
