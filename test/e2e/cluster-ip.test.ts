// End to end on a real kernel (qemu, Debian's kernel: IPVS + nftables): ClusterIP services
// programmed by `ipvsync sync -f`, reached over real TCP connections from outside the cluster
// CIDR, from a pod, from a pod to itself; session affinity; the glue's VIP port filter.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import { destsOf, ipvsadmList, ipvsyncOk, linkAddresses, nftSetElements, nftTables, sh, sysctl } from './helpers/kernel.js';
import { fixture, manifestDir, syncArgs, writeManifests } from './helpers/manifests.js';
import { BRIDGE_IP, BRIDGE_IP6, EXT_IP, EXT_IP6, httpFrom, PODS, withPodNetwork } from './helpers/podnet.js';
import { clientsByPod, connectOutcome, httpMany, tally } from './helpers/traffic.js';

const skip = process.env.IPVSYNC_VM !== 'qemu' ? 'needs IPVS and nftables: run in qemu (node dist/test/vm/cli.js --kernel qemu --suite e2e)' : false;
const POD_DESTS = PODS.map((p) => `${p.ip}:8080`).sort();

describe('ClusterIP services end to end', { skip }, () => {
  let dir: string;

  withPodNetwork({
    setup: async () => {
      dir = await manifestDir('cluster-ip');
      await writeManifests(dir, 'services.yaml', await fixture('cluster-ip.yaml'));
      await ipvsyncOk(...syncArgs(dir));
    },
  });

  test('sync programs the virtual servers, the VIPs on kube-ipvs0, the glue sets and the sysctls', async () => {
    const ipvs = await ipvsadmList();
    const web = ipvs.get('TCP 10.96.0.10:80');
    assert.ok(web, `no TCP 10.96.0.10:80 in ipvsadm -Ln: ${[...ipvs.keys()].join(', ')}`);
    assert.equal(web.scheduler, 'rr');
    assert.equal(web.persistent, undefined);
    assert.deepEqual(web.dests.map((d) => [d.address, d.forward, d.weight]).sort(), POD_DESTS.map((a) => [a, 'Masq', 1]));
    assert.deepEqual(await linkAddresses('kube-ipvs0'), ['10.96.0.10/32', '10.96.0.30/32', 'fd00:96::10/128']);
    assert.ok((await nftTables()).includes('ip ipvsync'));
    assert.deepEqual(await nftSetElements('cluster-ips'), ['10.96.0.10 . tcp . 80', '10.96.0.30 . tcp . 80']);
    assert.deepEqual(await nftSetElements('cluster-cidrs'), ['10.244.0.0/16']);
    // Hairpin: each node-local endpoint reaching itself (daddr . proto . port . saddr).
    assert.deepEqual(await nftSetElements('hairpin'), PODS.map((p) => `${p.ip} . tcp . 8080 . ${p.ip}`).sort());
    assert.equal(await sysctl('net.ipv4.vs.conntrack'), '1');
    assert.equal(await sysctl('net.ipv4.ip_forward'), '1');
  });

  test('round robin: every pod gets an equal share of new connections from outside the cluster CIDR, masqueraded', async () => {
    // From the node itself (its source is a local address outside 10.244.0.0/16) …
    const local = await httpMany('http://10.96.0.10/', 12);
    assert.deepEqual(tally(local), { 'pod-a': 4, 'pod-b': 4, 'pod-c': 4 });
    // … and from a host outside the node with its own address: the pods see the node's
    // address on the pod bridge, not the client.
    const ext = await httpFrom('ext', 'http://10.96.0.10/', 12);
    assert.deepEqual(tally(ext), { 'pod-a': 4, 'pod-b': 4, 'pod-c': 4 });
    for (const a of [...local, ...ext]) assert.equal(a.client, BRIDGE_IP, `${a.pod} saw ${a.client}`);
    assert.ok(!ext.some((a) => a.client === EXT_IP));
    // ipvsadm counted the connections on every real server.
    const web = (await ipvsadmList()).get('TCP 10.96.0.10:80')!;
    for (const d of web.dests) assert.ok(d.active + d.inactive > 0, `no connection counted on ${d.address}`);
  });

  test('a pod reaching other pods through the VIP keeps its address (no SNAT); reaching itself (hairpin) is masqueraded', async () => {
    const answers = await httpFrom('pod-a', 'http://10.96.0.10/', 9);
    assert.deepEqual(tally(answers), { 'pod-a': 3, 'pod-b': 3, 'pod-c': 3 });
    assert.deepEqual(clientsByPod(answers), {
      'pod-a': [BRIDGE_IP], // hairpin: masqueraded so the reply comes back through IPVS
      'pod-b': ['10.244.1.2'],
      'pod-c': ['10.244.1.2'],
    });
  });

  test('IPv6: a ClusterIP round robins, masquerades sources outside the cluster CIDR (ip6 glue), keeps pod sources, hairpins', async () => {
    const web6 = (await ipvsadmList()).get('TCP [fd00:96::10]:80');
    assert.ok(web6, 'no TCP [fd00:96::10]:80 in ipvsadm -Ln');
    assert.deepEqual(web6.dests.map((d) => [d.address, d.forward, d.weight]).sort(), PODS.map((p) => [`[${p.ip6}]:8080`, 'Masq', 1]).sort());
    assert.deepEqual(await nftSetElements('cluster-ips', 'ip6'), ['fd00:96::10 . tcp . 80']);
    assert.deepEqual(await nftSetElements('cluster-cidrs', 'ip6'), ['fd00:10:244::/56']);
    assert.deepEqual(await nftSetElements('hairpin', 'ip6'), PODS.map((p) => `${p.ip6} . tcp . 8080 . ${p.ip6}`).sort());
    const local = await httpMany('http://[fd00:96::10]/', 6);
    const ext = await httpFrom('ext', 'http://[fd00:96::10]/', 6);
    assert.deepEqual(tally(local), { 'pod-a': 2, 'pod-b': 2, 'pod-c': 2 });
    assert.deepEqual(tally(ext), { 'pod-a': 2, 'pod-b': 2, 'pod-c': 2 });
    for (const a of [...local, ...ext]) assert.equal(a.client, BRIDGE_IP6, `${a.pod} saw ${a.client}`);
    assert.ok(!ext.some((a) => a.client === EXT_IP6));
    const fromPod = await httpFrom('pod-a', 'http://[fd00:96::10]/', 6);
    assert.deepEqual(clientsByPod(fromPod), { 'pod-a': [BRIDGE_IP6], 'pod-b': [PODS[0]!.ip6], 'pod-c': [PODS[0]!.ip6] });
  });

  test('sessionAffinity ClientIP: persistent in ipvsadm, every connection of a client lands on one pod', async () => {
    const sticky = (await ipvsadmList()).get('TCP 10.96.0.30:80');
    assert.ok(sticky);
    assert.equal(sticky.scheduler, 'rr');
    assert.equal(sticky.persistent, 600);
    assert.deepEqual(sticky.dests.map((d) => d.address).sort(), POD_DESTS);
    const fromNode = await httpMany('http://10.96.0.30/', 12);
    assert.equal(Object.keys(tally(fromNode)).length, 1, `node client spread: ${JSON.stringify(tally(fromNode))}`);
    const fromPod = await httpFrom('pod-b', 'http://10.96.0.30/', 12);
    assert.equal(Object.keys(tally(fromPod)).length, 1, `pod-b client spread: ${JSON.stringify(tally(fromPod))}`);
    // The same service without affinity spreads the same client (control).
    assert.equal(Object.keys(tally(await httpMany('http://10.96.0.10/', 3))).length, 3);
    // The kernel's persistence templates (client:0 -> VIP:port -> the chosen pod), one per
    // client, pointing at the pod that client stuck to.
    const conns = await sh('ipvsadm', '-Lnc');
    const templates = [...conns.matchAll(/^\s*TCP\s+\S+\s+\S+\s+(\S+):0\s+10\.96\.0\.30:80\s+(\S+):8080\s*$/gm)].map((m) => [m[1], m[2]]);
    const ipOf = (pod: string) => PODS.find((p) => p.name === pod)!.ip;
    assert.equal(templates.length, 2, `expected two persistence templates for 10.96.0.30:80 in ipvsadm -Lnc:\n${conns}`);
    assert.deepEqual(templates.find(([client]) => client === '10.244.1.3')?.[1], ipOf(fromPod[0]!.pod));
    assert.deepEqual(templates.map(([, dest]) => dest).sort(), [ipOf(fromNode[0]!.pod), ipOf(fromPod[0]!.pod)].sort());
  });

  test('a VIP port that is no service refuses new connections (glue), while the same port elsewhere on the node answers', async (t) => {
    const server: Server = createServer((s) => s.end());
    await new Promise<void>((resolve) => server.listen(8081, '0.0.0.0', resolve));
    t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
    assert.equal(await connectOutcome('127.0.0.1', 8081), 'connected');
    // Without the glue the local stack would accept this one (10.96.0.10 is a local address).
    assert.equal(await connectOutcome('10.96.0.10', 8081), 'ECONNREFUSED');
    assert.ok(!(await nftSetElements('vip-ports')).includes('10.96.0.10 . tcp . 8081'));
    assert.ok((await nftSetElements('vip-ports')).includes('10.96.0.10 . tcp . 80'));
  });

  test('a second sync of the same manifests plans no write', async () => {
    const plan = JSON.parse(await ipvsyncOk(...syncArgs(dir, '--dry-run', '--json'))) as { ops: unknown[] };
    assert.deepEqual(plan.ops, []);
    assert.deepEqual(await destsOf('TCP 10.96.0.10:80'), POD_DESTS);
  });
});
