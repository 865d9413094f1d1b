#!/bin/bash
# topo.sh up NPODS | down NPODS : lb netns "nfs-lb" (router running nft), client "nfs-cl", pods "nfs-p<j>"
P=${2:-8}
if [ "$1" = up ]; then
  ip netns add nfs-lb; ip netns add nfs-cl
  ip -n nfs-lb link set lo up; ip -n nfs-cl link set lo up
  ip netns exec nfs-lb sysctl -qw net.ipv4.ip_forward=1
  ip -n nfs-lb link add br0 type bridge; ip -n nfs-lb addr add 10.128.0.254/24 dev br0; ip -n nfs-lb link set br0 up
  ip link add nfs-c0 netns nfs-lb type veth peer name eth0 netns nfs-cl
  ip -n nfs-lb addr add 192.168.77.1/24 dev nfs-c0; ip -n nfs-lb link set nfs-c0 up
  ip -n nfs-cl addr add 192.168.77.2/24 dev eth0; ip -n nfs-cl link set eth0 up; ip -n nfs-cl route add default via 192.168.77.1
  for j in $(seq 1 $P); do
    ip netns add nfs-p$j; ip -n nfs-p$j link set lo up
    ip link add nfs-v$j netns nfs-lb type veth peer name eth0 netns nfs-p$j
    ip -n nfs-lb link set nfs-v$j master br0; ip -n nfs-lb link set nfs-v$j up
    ip -n nfs-p$j addr add 10.128.0.$j/24 dev eth0; ip -n nfs-p$j link set eth0 up; ip -n nfs-p$j route add default via 10.128.0.254
    ip netns exec nfs-p$j python3 /work/research/nft-shape/responder.py pod$j > /dev/null 2>&1 &
    echo $! >> /tmp/nfs-responders.pids
  done
  sleep 1
else
  [ -f /tmp/nfs-responders.pids ] && kill $(cat /tmp/nfs-responders.pids) 2>/dev/null; rm -f /tmp/nfs-responders.pids
  for j in $(seq 1 $P); do ip netns del nfs-p$j 2>/dev/null; done
  ip netns del nfs-cl 2>/dev/null; ip netns del nfs-lb 2>/dev/null
fi
