// SCTP services end to end, in both data planes (Debian's kernel under qemu: the host's has no
// SCTP). Each pod answers SCTP associations on 9132 with its name (python3's socket module: Node
// has no SCTP sockets); a ClusterIP service of protocol SCTP is programmed by `ipvsync sync -f`
// in nftables mode, then switched to IPVS mode, and new associations from the node through the
// cluster IP reach every pod in each, masqueraded (the node is outside the cluster CIDR).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { ipvsadmList, ipvsyncOk, nftSetElements, sh } from './helpers/kernel.js';
import { manifestDir, syncArgs, writeManifests, type Doc } from './helpers/manifests.js';
import { BRIDGE_IP, NODE_NAME, PODS, withPodNetwork } from './helpers/podnet.js';

const skip = process.env.IPVSYNC_VM !== 'qemu' ? 'needs SCTP, IPVS and nftables: run in qemu (node dist/test/vm/cli.js --kernel qemu --suite e2e)' : false;
const VIP = '10.96.0.132';
const PORT = 9132;

/** A one-to-one SCTP server answering each association with "NAME CLIENT-ADDRESS". */
const SERVER = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('0.0.0.0', ${PORT}))
s.listen(64)
print('listening', flush=True)
while True:
    c, peer = s.accept()
    c.sendall(('%s %s' % (sys.argv[1], peer[0])).encode())
    c.close()
`;

/** n associations from the node to the cluster IP, one after the other: each answer. The socket
 *  timeout only bounds a hang (5 s was a few seconds of qemu TCG, ~10x slower). */
const CLIENT = `
import socket, sys, json
out = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP)
    s.settimeout(30)
    s.connect(('${VIP}', ${PORT}))
    out.append(s.recv(100).decode())
    s.close()
print(json.dumps(out))
`;

function manifests(): Doc[] {
  return [
    { apiVersion: 'v1', kind: 'Service', metadata: { name: 'assoc', namespace: 'default' }, spec: { type: 'ClusterIP', clusterIP: VIP, clusterIPs: [VIP], ports: [{ name: 'assoc', protocol: 'SCTP', port: PORT, targetPort: PORT }] } },
    {
      apiVersion: 'discovery.k8s.io/v1', kind: 'EndpointSlice', addressType: 'IPv4',
      metadata: { name: 'assoc-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'assoc' } },
      ports: [{ name: 'assoc', protocol: 'SCTP', port: PORT }],
      endpoints: PODS.map((p) => ({ addresses: [p.ip], conditions: { ready: true }, nodeName: NODE_NAME })),
    },
  ];
}

/** n associations through the service: "pod-x → how many", and the client address each pod saw. */
async function associate(n: number): Promise<{ tally: Record<string, number>; clients: string[] }> {
  const answers = JSON.parse(await sh('python3', '-c', CLIENT, String(n))) as string[];
  const tally: Record<string, number> = {};
  const clients = new Set<string>();
  for (const a of answers) {
    const [pod, client] = a.split(' ');
    tally[pod!] = (tally[pod!] ?? 0) + 1;
    clients.add(client!);
  }
  return { tally, clients: [...clients] };
}

describe('SCTP services end to end', { skip }, () => {
  let dir: string;
  const servers: ChildProcess[] = [];

  withPodNetwork({
    setup: async () => {
      // nftables mode binds no address: the node reaches a cluster IP along its routes (a
      // default route on a real node; here the service CIDR on the node's link), and the
      // output hook's dnat re-routes it to the pod
      await sh('ip', 'route', 'replace', '10.96.0.0/12', 'dev', 'node0');
      dir = await manifestDir('sctp');
      await writeManifests(dir, 'sctp.yaml', manifests());
      for (const p of PODS) {
        const child = spawn('ip', ['netns', 'exec', p.name, 'python3', '-c', SERVER, p.name], { stdio: ['ignore', 'pipe', 'inherit'] });
        servers.push(child);
        await new Promise<void>((resolve, reject) => {
          child.stdout!.once('data', () => resolve());
          child.once('exit', (code) => reject(new Error(`the SCTP server in ${p.name} exited ${code}`)));
        });
      }
    },
    teardown: async () => {
      for (const s of servers) s.kill('SIGKILL');
    },
  });

  test('nftables mode: the SCTP frontend is in the table, and associations reach every pod, masqueraded', async () => {
    await ipvsyncOk(...syncArgs(dir, '--proxy-mode', 'nftables'));
    assert.deepEqual(await nftSetElements('cluster-ips'), [`${VIP} . sctp . ${PORT}`]);
    // spread at random over three pods: 30 associations miss one with probability ~2e-5
    const { tally, clients } = await associate(30);
    assert.deepEqual(Object.keys(tally).sort(), PODS.map((p) => p.name), JSON.stringify(tally));
    assert.deepEqual(clients, [BRIDGE_IP]);
  });

  test('IPVS mode: an SCTP virtual server with the three pods, round robin over them', async () => {
    await ipvsyncOk(...syncArgs(dir));
    const svc = (await ipvsadmList()).get(`SCTP ${VIP}:${PORT}`);
    assert.ok(svc, 'ipvsadm -Ln shows the SCTP virtual server');
    assert.deepEqual(svc.dests.map((d) => d.address).sort(), PODS.map((p) => `${p.ip}:${PORT}`).sort());
    const { tally, clients } = await associate(9);
    assert.deepEqual(tally, { 'pod-a': 3, 'pod-b': 3, 'pod-c': 3 });
    assert.deepEqual(clients, [BRIDGE_IP]);
  });
});
