#!/usr/bin/env bash
# Runs inside the VM (see scripts/demo.sh): the built-in example, end to end.
#   - a "node" address (node0, 192.168.50.10) and a pod bridge (cni0, 10.244.1.1/24)
#   - three pods: network namespaces pod-a/b/c (10.244.1.2-4) serving HTTP on 8080
#   - `ipvsync sync -f examples/demo`: IPVS virtual servers, VIPs on kube-ipvs0, nftables glue
#   - real requests through the ClusterIP, the NodePort and the ClientIP-affinity service
set -euo pipefail
cd "$(dirname "$0")/.."
glue=(); [ "${IPVSYNC_VM:-}" = uml ] && glue=(--no-glue)   # UML has no nftables ip tables

ip link add node0 type dummy && ip addr add 192.168.50.10/24 dev node0 && ip link set node0 up
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
  --cluster-cidr 10.244.0.0/16 "${glue[@]}" --dry-run | tail -n 4
echo
echo "# ipvsync sync -f examples/demo"
node dist/src/cli/main.js sync -f examples/demo --node-name demo-node --node-ip 192.168.50.10 \
  --cluster-cidr 10.244.0.0/16 "${glue[@]}"
echo
echo "# ipvsync ipvs list"
node dist/src/cli/main.js ipvs list
echo
echo "# 30 requests each, a new connection per request"
node examples/demo/client.mjs http://10.96.0.10/ 30        # ClusterIP, round robin
node examples/demo/client.mjs http://192.168.50.10:30080/ 30 # NodePort on the node address
node examples/demo/client.mjs http://10.96.0.30/ 30        # ClientIP affinity: one pod
echo
echo "# a second sync of the same manifests changes nothing"
node dist/src/cli/main.js sync -f examples/demo --node-name demo-node --node-ip 192.168.50.10 \
  --cluster-cidr 10.244.0.0/16 "${glue[@]}" --dry-run --json | node -e \
  'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(`"ops": ${JSON.stringify(JSON.parse(s).ops)}`))'
kill $(jobs -p) 2>/dev/null || true
