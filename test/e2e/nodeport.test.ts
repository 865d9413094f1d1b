// End to end on a real kernel: NodePort services on the node's addresses, narrowed by
// --nodeport-addresses and --node-ip, and externalTrafficPolicy Local (only this node's
// endpoints, the client's address kept), reached from a host outside the node.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { destsOf, ipvsadmKeys, ipvsadmList, ipvsyncOk, nftSetElements, resetDataPlane, sh, waitFor } from './helpers/kernel.js';
import { fixture, manifestDir, syncArgs, writeManifests } from './helpers/manifests.js';
import { BRIDGE_IP, connectFrom, EXT_GW, EXT_IP, httpFrom, NODE_IP, PODS, statusFrom, withPodNetwork } from './helpers/podnet.js';
import { startProxy } from './helpers/proxy.js';
import { clientsByPod, tally } from './helpers/traffic.js';

const skip = process.env.IPVSYNC_VM !== 'qemu' ? 'needs IPVS and nftables: run in qemu (node dist/test/vm/cli.js --kernel qemu --suite e2e)' : false;
const POD_DESTS = PODS.map((p) => `${p.ip}:8080`).sort();
const nodePortKeys = (keys: string[]) => keys.filter((k) => /:3008\d$/.test(k));

describe('NodePort services end to end', { skip }, () => {
  let dir: string;

  withPodNetwork({
    setup: async () => {
      dir = await manifestDir('nodeport');
      await writeManifests(dir, 'services.yaml', await fixture('nodeport.yaml'));
    },
  });

  test('a NodePort listens on every local address; an outside client reaches it on the node address, masqueraded', async () => {
    await ipvsyncOk(...syncArgs(dir));
    const keys = await ipvsadmKeys();
    for (const addr of [NODE_IP, BRIDGE_IP, EXT_GW]) {
      assert.ok(keys.includes(`TCP ${addr}:30080`), `no NodePort on ${addr}: ${keys.join(', ')}`);
      assert.deepEqual(await destsOf(`TCP ${addr}:30080`), POD_DESTS);
    }
    // None on loopback (the kernel would not forward loopback-sourced traffic to a pod).
    assert.ok(!keys.some((k) => k.startsWith('TCP 127.') || k.startsWith('TCP [::1]')), keys.join(', '));
    // No NodePort on the VIPs themselves.
    assert.ok(!keys.some((k) => k.startsWith('TCP 10.96.') && /:3008\d$/.test(k)), keys.join(', '));
    const answers = await httpFrom('ext', `http://${NODE_IP}:30080/`, 9);
    assert.deepEqual(tally(answers), { 'pod-a': 3, 'pod-b': 3, 'pod-c': 3 });
    // externalTrafficPolicy Cluster: SNAT to the node, so replies come back through it.
    assert.deepEqual([...new Set(answers.map((a) => a.client))], [BRIDGE_IP]);
    // The glue masquerades Cluster NodePorts only; Local ones keep the source.
    assert.deepEqual(await nftSetElements('nodeports'), ['tcp . 30080']);
  });

  test('--nodeport-addresses narrows NodePorts: no virtual server and no connection outside the CIDRs', async () => {
    await ipvsyncOk(...syncArgs(dir, '--nodeport-addresses', '192.168.50.0/24'));
    assert.deepEqual(nodePortKeys(await ipvsadmKeys()), [`TCP ${NODE_IP}:30080`, `TCP ${NODE_IP}:30081`, `TCP ${NODE_IP}:30082`]);
    // The stale NodePorts on the other addresses are gone, and nothing answers there.
    // expected drops: a short wait can only confirm them (a late answer would be 'connected')
    assert.notEqual(await connectFrom('ext', EXT_GW, 30080, 3000), 'connected');
    assert.notEqual(await connectFrom('ext', BRIDGE_IP, 30080, 3000), 'connected');
    assert.deepEqual(tally(await httpFrom('ext', `http://${NODE_IP}:30080/`, 3)), { 'pod-a': 1, 'pod-b': 1, 'pod-c': 1 });
  });

  test('--node-ip: NodePorts only on the given node address', async () => {
    await resetDataPlane();
    await ipvsyncOk(...syncArgs(dir, '--node-ip', NODE_IP));
    assert.deepEqual(nodePortKeys(await ipvsadmKeys()), [`TCP ${NODE_IP}:30080`, `TCP ${NODE_IP}:30081`, `TCP ${NODE_IP}:30082`]);
    assert.equal(await connectFrom('ext', EXT_GW, 30080), 'ECONNREFUSED');
    assert.equal(await connectFrom('ext', NODE_IP, 30080), 'connected');
  });

  test('externalTrafficPolicy Local: only this node\'s endpoints serve the NodePort, and they see the client\'s own address', async () => {
    const ipvs = await ipvsadmList();
    // Only pod-a runs on e2e-node.
    assert.deepEqual(ipvs.get(`TCP ${NODE_IP}:30081`)?.dests.map((d) => d.address), ['10.244.1.2:8080']);
    // Internal traffic keeps every endpoint (internalTrafficPolicy Cluster).
    assert.deepEqual(await destsOf('TCP 10.96.0.21:80'), POD_DESTS);
    const answers = await httpFrom('ext', `http://${NODE_IP}:30081/`, 6);
    assert.deepEqual(clientsByPod(answers), { 'pod-a': [EXT_IP] });
    // Through the cluster IP the same client is spread and masqueraded.
    const viaVip = await httpFrom('ext', 'http://10.96.0.21/', 3);
    assert.deepEqual(clientsByPod(viaVip), { 'pod-a': [BRIDGE_IP], 'pod-b': [BRIDGE_IP], 'pod-c': [BRIDGE_IP] });
  });

  test("externalTrafficPolicy Local without a local endpoint: the virtual server gets every endpoint, unmasqueraded (kube-proxy's IPVS mode, kubernetes#97081)", async () => {
    assert.deepEqual(await destsOf(`TCP ${NODE_IP}:30082`), ['10.244.1.3:8080', '10.244.1.4:8080']);
    assert.deepEqual(await destsOf('TCP 10.96.0.22:80'), ['10.244.1.3:8080', '10.244.1.4:8080']);
    // The endpoints see the client's own address. (Here their replies come back through this
    // node, as a pod of this node's would; an outside client's through another node are lost.)
    assert.deepEqual(clientsByPod(await httpFrom('ext', `http://${NODE_IP}:30082/`, 4)), { 'pod-b': [EXT_IP], 'pod-c': [EXT_IP] });
    assert.deepEqual(Object.keys(tally(await httpFrom('ext', 'http://10.96.0.22/', 2))), ['pod-b', 'pod-c']);
  });

  test('healthCheckNodePort servers of the daemon: on the node addresses in --nodeport-addresses only; 200 with a local endpoint, 503 without', async (t) => {
    await resetDataPlane();
    const { child, log, stderr, exited } = startProxy(['--manifests', dir], '--nodeport-addresses', '192.168.50.0/24', '--metrics-bind-address', '127.0.0.1:0');
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    const output = () => `proxy log:\n${log.join('\n')}\n${stderr()}`;
    await waitFor('the first sync', async () => (log.some((l) => JSON.parse(l).msg === 'sync') ? true : undefined), { timeoutMs: 60_000, last: async () => output() });
    const listening = (await sh('ss', '-Hltn')).split('\n').map((l) => l.trim().split(/\s+/)[3]).filter((a) => a?.endsWith(':32001') || a?.endsWith(':32002'));
    assert.deepEqual(listening.sort(), [`${NODE_IP}:32001`, `${NODE_IP}:32002`], output());
    const local = await statusFrom('ext', `http://${NODE_IP}:32001/`);
    assert.equal(local.status, 200);
    assert.deepEqual(JSON.parse(local.body), { service: { namespace: 'default', name: 'web-local' }, localEndpoints: 1, serviceProxyHealthy: true });
    const remote = await statusFrom('ext', `http://${NODE_IP}:32002/`);
    assert.equal(remote.status, 503);
    assert.equal(JSON.parse(remote.body).localEndpoints, 0);
    // not on the node's other addresses
    assert.equal(await connectFrom('ext', EXT_GW, 32001), 'ECONNREFUSED');
    child.kill('SIGTERM');
    assert.equal((await exited).code, 0, output());
  });
});
