#!/usr/bin/env bash
# The built-in example, end to end, in a network namespace of its own (see scripts/demo.sh):
#   - a "node" address (node0, 192.168.50.10) and a pod bridge (cni0, 10.244.1.1/24)
#   - three pods: network namespaces pod-a/b/c (10.244.1.2-4) serving HTTP on 8080
#   - `ipvsync sync -f examples/demo`: `nftables` (the argument): the nftables data plane, one
#     table per family; `ipvs` (in a VM): IPVS virtual servers, VIPs on kube-ipvs0, the glue
#   - real requests through the ClusterIP, the NodePort and the ClientIP-affinity service
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-ipvs}
flags=(--proxy-mode "$mode")
[ "${IPVSYNC_VM:-}" = uml ] && flags+=(--no-glue)   # UML has no nftables ip tables

if [ "$mode" = nftables ]; then
  # no dummy links on every kernel: a bridge holds the node address; the service range is
  # routed (a node has a default route), so the node's own requests reach the output hook
  ip link add node0 type bridge && ip addr add 192.168.50.10/24 dev node0 && ip link set node0 up
  ip route add 10.96.0.0/12 dev node0
  sysctl -qw net.ipv4.ip_forward=1
else
  ip link add node0 type dummy && ip addr add 192.168.50.10/24 dev node0 && ip link set node0 up
fi
ip link add cni0 type bridge && ip addr add 10.244.1.1/24 dev cni0 && ip link set cni0 up
i=2
for pod in pod-a pod-b pod-c; do
  ip netns add $pod
  ip link add v-$pod type veth peer name eth0 netns $pod
  ip link set v-$pod master cni0 up
  ip -n $pod addr add 10.244.1.$i/24 dev eth0
  ip -n $pod link set eth0 up && ip -n $pod link set lo up
  ip -n $pod route add default via 10.244.1.1
  ip netns exec $pod node examples/demo/pod-server.mjs $pod &
  i=$((i + 1))
done
for n in 2 3 4; do   # wait for the servers (bounded)
  for _ in $(seq 50); do (exec 3<>/dev/tcp/10.244.1.$n/8080) 2>/dev/null && break; sleep 0.1; done
done

echo "# ipvsync sync -f examples/demo --dry-run   (what it would do)"
node dist/src/cli/main.js sync -f examples/demo --node-name demo-node --node-ip 192.168.50.10 \
  --cluster-cidr 10.244.0.0/16 "${flags[@]}" --dry-run | tail -n 4
echo
echo "# ipvsync sync -f examples/demo"
node dist/src/cli/main.js sync -f examples/demo --node-name demo-node --node-ip 192.168.50.10 \
  --cluster-cidr 10.244.0.0/16 "${flags[@]}"
echo
if [ "$mode" = nftables ]; then
  # the 3-endpoint map of 10.96.0.10:80's shard (endpoints-3-S: frontend . endpoint index : endpoint)
  map=$(nft list table ip ipvsync | awk '$1 == "map" && $2 ~ /^endpoints-3-/ { m = $2 } /10\.96\.0\.10 \. tcp \. 80 / && !found { print m; found = 1 }')
  echo "# nft list map ip ipvsync $map   (a shard of the 3-endpoint maps: frontend . endpoint index : endpoint)"
  nft list map ip ipvsync "$map" | sed -n '/elements/,/}/p'
else
  echo "# ipvsync ipvs list"
  node dist/src/cli/main.js ipvs list
fi
echo
echo "# 30 requests each, a new connection per request"
node examples/demo/client.mjs http://10.96.0.10/ 30        # ClusterIP: round robin (IPVS), at random (nftables)
node examples/demo/client.mjs http://192.168.50.10:30080/ 30 # NodePort on the node address
node examples/demo/client.mjs http://10.96.0.30/ 30        # ClientIP affinity: one pod
echo
echo "# a second sync of the same manifests changes nothing"
node dist/src/cli/main.js sync -f examples/demo --node-name demo-node --node-ip 192.168.50.10 \
  --cluster-cidr 10.244.0.0/16 "${flags[@]}" --dry-run --json | node -e \
  'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(`"ops": ${JSON.stringify(JSON.parse(s).ops)}`))'
kill $(jobs -p) 2>/dev/null || true
