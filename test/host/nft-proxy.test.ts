// The nftables data plane on the machine's own kernel, with real connections: three "pods"
// (network namespaces on a bridge, HTTP on 8080) and an outside client, this namespace the
// node. Services and EndpointSlices go through the service model and the nftables plane into the
// engine; requests then go through the cluster IP and the NodePort (spread over every pod,
// masqueraded from outside the cluster CIDR), from a pod (not masqueraded) and to itself
// (hairpin: masqueraded), to a service without endpoints and to a port that is no service (refused at once), to an
// externalTrafficPolicy Local NodePort without a local endpoint (dropped). Cross-checked with
// `nft -j list ruleset` and `conntrack -L`, and the engine's writes: a resync writes nothing,
// one endpoint replaced is element changes only. The daemon on a manifests folder (source
// ranges, stale UDP flows, its /metrics as kube-proxy's nftables mode serves them), and ClientIP
// session affinity through the proxier.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { Engine } from '../../src/engine/engine.js';
import { Nftables } from '../../src/kernel/nftables.js';
import { groupSlices, modelContext, serviceModel } from '../../src/kube/service-model.js';
import { objectKey } from '../../src/kube/change-tracker.js';
import { NftablesPlane } from '../../src/proxy/nftables/plane.js';
import { frontendShard } from '../../src/proxy/nftables/table.js';
import { nftJsonElements } from '../helpers/nft-shards.js';
import { openKernel } from '../../src/proxy/kernel.js';
import { Proxier } from '../../src/proxy/proxier.js';
import { slice, svc } from '../fixtures/kube/builders.js';
import { waitFor } from '../e2e/helpers/kernel.js';

const ip = (...a: string[]) => execFileSync('ip', a, { encoding: 'utf8' });
const PODS = [
  { ns: 'np-pa', ip: '10.244.1.2', ip6: 'fd00:244:1::2', node: 'node-a' },
  { ns: 'np-pb', ip: '10.244.1.3', ip6: 'fd00:244:1::3', node: 'node-b' },
  { ns: 'np-pc', ip: '10.244.1.4', ip6: 'fd00:244:1::4', node: 'node-c' },
  { ns: 'np-pd', ip: '10.244.1.5', ip6: 'fd00:244:1::5', node: 'node-c' },
];
const NODE_IP6 = 'fd00:9::1';
const NODE_IP = '10.9.0.1';
const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'main.js');
const CLIENT = 'np-client';

const SERVER = (name: string, addr: string, addr6: string) => `
require('node:dgram').createSocket('udp4').on('message', function (m, r) { this.send('${name}', r.port, r.address); }).bind(5353, '${addr}');
const answer = (q, r) => r.end('${name} ' + q.socket.remoteAddress.replace('::ffff:', ''));
require('node:http').createServer(answer).listen(8080, '${addr6}');
require('node:http').createServer(answer).listen(8080, '${addr}', () => console.log('ready'));
`;

/** UDP datagrams from one source port, one after the other: each answer (a pod name) or
 *  'timeout' after `wait` ms. */
const UDP_CLIENT = `
const [host, port, count, sport, wait] = process.argv.slice(1);
const s = require('node:dgram').createSocket('udp4');
const out = [];
s.bind(+sport, () => {
  const one = (i) => {
    if (i >= +count) return (console.log(JSON.stringify(out)), s.close());
    const t = setTimeout(() => (s.removeAllListeners('message'), out.push('timeout'), one(i + 1)), +wait);
    s.once('message', (m) => (clearTimeout(t), out.push(String(m)), one(i + 1)));
    s.send('q', +port, host);
  };
  one(0);
});
`;

/** Where an answer is expected the wait only bounds a hang (1 s made a slow answer a 'timeout' on
 *  a loaded machine); a caller expecting a drop passes a short one (a longer wait can only
 *  confirm the drop). */
const ANSWER_WAIT_MS = 20_000;

function datagrams(ns: string, host: string, port: number, count: number, sport: number, waitMs = ANSWER_WAIT_MS): string[] {
  const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', UDP_CLIENT, host, String(port), String(count), String(sport), String(waitMs)], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as string[];
}

/** `count` new connections, one after the other, each answer or error code in order. */
const CLIENT_SCRIPT = `
const [host, port, count, timeout] = process.argv.slice(1);
const http = require('node:http');
const out = [];
const one = (i) => {
  if (i >= +count) return console.log(JSON.stringify(out));
  const q = http.get({ host, port: +port, path: '/', agent: false, timeout: +timeout }, (r) => {
    let s = '';
    r.on('data', (d) => (s += d)).on('end', () => (out.push(s), one(i + 1)));
  });
  q.on('timeout', () => q.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
  q.on('error', (e) => (out.push('error ' + e.code), one(i + 1)));
};
one(0);
`;

function requests(ns: string, host: string, port: number, count: number, timeoutMs = ANSWER_WAIT_MS): string[] {
  const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', CLIENT_SCRIPT, host, String(port), String(count), String(timeoutMs)], { encoding: 'utf8', timeout: 300_000 });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout) as string[];
}

/** Answers by pod name, and the client addresses the pods saw. */
/** `ipvsync sync -f DIR --proxy-mode nftables` for node-a, as a user runs it. */
function syncNft(dir: string, ...args: string[]) {
  return spawnSync(process.execPath, [CLI, 'sync', '-f', dir, '--proxy-mode', 'nftables', '--hostname-override', 'node-a', '--node-ip', NODE_IP, '--cluster-cidr', '10.244.0.0/16', '--no-sysctl', ...args], { encoding: 'utf8', timeout: 60_000 });
}

function tally(answers: readonly string[]): { pods: Record<string, number>; saw: Set<string>; errors: string[] } {
  const pods: Record<string, number> = {};
  const saw = new Set<string>();
  const errors: string[] = [];
  for (const a of answers) {
    if (a.startsWith('error ')) errors.push(a);
    else {
      const [name, from] = a.split(' ');
      pods[name!] = (pods[name!] ?? 0) + 1;
      saw.add(from!);
    }
  }
  return { pods, saw, errors };
}

function services(sliceEndpoints: typeof PODS): { services: V1Service[]; slices: V1EndpointSlice[] } {
  const eps = sliceEndpoints.map((p) => ({ ip: p.ip, node: p.node }));
  return {
    services: [
      svc('web', { type: 'NodePort', clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80, nodePort: 30080 }] }),
      svc('empty', { clusterIP: '10.96.0.20', ports: [{ port: 80 }] }),
      svc('local', { type: 'NodePort', clusterIP: '10.96.0.30', ports: [{ port: 80, nodePort: 30090 }], externalTrafficPolicy: 'Local' }),
    ],
    slices: [
      slice('web', 'web-1', [{ name: 'http', port: 8080 }], eps),
      slice('local', 'local-1', [{ port: 8080 }], [{ ip: PODS[1]!.ip, node: 'node-b' }]),
    ],
  };
}

function desired(objs: ReturnType<typeof services>) {
  const ctx = modelContext({ name: 'node-a', addresses: [NODE_IP, '10.244.1.1', '127.0.0.1'] }, { clusterCIDRs: ['10.244.0.0/16'] });
  const bySvc = groupSlices(objs.slices);
  const models = objs.services.map((s) => serviceModel(s, bySvc.get(objectKey(s)) ?? [], ctx));
  const plane = new NftablesPlane();
  plane.rebuild(models.map((m) => m.name), (n) => models.find((m) => m.name === n)!, ctx, '');
  assert.deepEqual(plane.summary().warnings, []);
  return { services: [], nft: plane.tables() };
}

/** The node (this namespace), four pods on a bridge and a client, the pods serving HTTP. */
async function topology(t: { after(fn: () => void): void }): Promise<void> {
  const servers: ChildProcess[] = [];
  t.after(() => {
    for (const s of servers) if (s.pid) process.kill(s.pid);
    // the host ends of the veths first: deleting one end deletes the pair at once, while a
    // netns deleted with its end in it goes in the kernel's own time, after the next test
    // may already want the name
    PODS.forEach((_, i) => spawnSync('ip', ['link', 'del', `npv${i}`]));
    for (const p of PODS) spawnSync('ip', ['netns', 'del', p.ns]);
    spawnSync('ip', ['netns', 'del', CLIENT]);
    spawnSync('ip', ['link', 'del', 'cbr0']);
    spawnSync('ip', ['link', 'del', 'npc0']);
    spawnSync('nft', ['flush', 'ruleset']);
  });
  ip('link', 'add', 'cbr0', 'type', 'bridge');
  ip('addr', 'add', '10.244.1.1/24', 'dev', 'cbr0');
  ip('link', 'set', 'cbr0', 'up');
  for (const [i, p] of PODS.entries()) {
    ip('netns', 'add', p.ns);
    ip('link', 'add', `npv${i}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', p.ns);
    ip('link', 'set', `npv${i}`, 'master', 'cbr0', 'up');
    // hairpin mode, as kubelet and the CNI bridge plugin set it: a pod's packet DNATed to
    // itself goes back out of the port it came in on
    ip('link', 'set', `npv${i}`, 'type', 'bridge_slave', 'hairpin', 'on');
    ip('-n', p.ns, 'addr', 'add', `${p.ip}/24`, 'dev', 'eth0');
    ip('-n', p.ns, 'addr', 'add', `${p.ip6}/64`, 'dev', 'eth0', 'nodad');
    ip('-n', p.ns, 'link', 'set', 'eth0', 'up');
    ip('-n', p.ns, 'link', 'set', 'lo', 'up');
    ip('-n', p.ns, 'route', 'add', 'default', 'via', '10.244.1.1');
    ip('-n', p.ns, '-6', 'route', 'add', 'default', 'via', 'fd00:244:1::1');
  }
  ip('addr', 'add', 'fd00:244:1::1/64', 'dev', 'cbr0', 'nodad');
  ip('netns', 'add', CLIENT);
  ip('link', 'add', 'npc0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', CLIENT);
  ip('addr', 'add', `${NODE_IP}/24`, 'dev', 'npc0');
  ip('link', 'set', 'npc0', 'up');
  ip('-n', CLIENT, 'addr', 'add', '10.9.0.2/24', 'dev', 'eth0');
  ip('-n', CLIENT, 'link', 'set', 'eth0', 'up');
  ip('-n', CLIENT, 'route', 'add', 'default', 'via', NODE_IP);
  ip('addr', 'add', `${NODE_IP6}/64`, 'dev', 'npc0', 'nodad');
  ip('-n', CLIENT, 'addr', 'add', 'fd00:9::2/64', 'dev', 'eth0', 'nodad');
  ip('-n', CLIENT, '-6', 'route', 'add', 'default', 'via', NODE_IP6);
  // A node has a default route (here through the client): traffic to a service IP nothing
  // DNATs is forwarded, and the forward hook's reject answers it, not the routing.
  ip('route', 'add', 'default', 'via', '10.9.0.2');
  ip('-6', 'route', 'add', 'default', 'via', 'fd00:9::2');
  execFileSync('sysctl', ['-qw', 'net.ipv4.ip_forward=1', 'net.ipv6.conf.all.forwarding=1']);
  for (const p of PODS) {
    const s = spawn('ip', ['netns', 'exec', p.ns, process.execPath, '-e', SERVER(p.ns.slice(3), p.ip, p.ip6)], { stdio: ['ignore', 'pipe', 'inherit'] });
    servers.push(s);
    await new Promise<void>((resolve, reject) => {
      s.stdout!.once('data', () => resolve());
      s.once('exit', (c) => reject(new Error(`server ${p.ns} exited ${c}`)));
    });
  }

}

test('nftables data plane: spread, NodePort, masquerade, reject and drop on real connections; minimal writes', async (t) => {
  await topology(t);
  const nft = await Nftables.open();
  // No IPVS handle: this kernel has none, and the nftables data plane needs none.
  const engine = new Engine({ nft }, {});
  const three = PODS.slice(0, 3);
  const first = await engine.sync(desired(services(three)));
  assert.deepEqual(first.errors, []);
  assert.ok(first.nft.writes > 0);

  // Spread over every pod, masqueraded (the client is outside the cluster CIDR): each pod saw
  // the node's bridge address.
  const viaClusterIp = tally(requests(CLIENT, '10.96.0.10', 80, 90));
  assert.deepEqual(viaClusterIp.errors, []);
  assert.deepEqual(Object.keys(viaClusterIp.pods).sort(), ['pa', 'pb', 'pc']);
  for (const [pod, n] of Object.entries(viaClusterIp.pods)) assert.ok(n >= 10, `${pod} got ${n} of 90: ${JSON.stringify(viaClusterIp.pods)}`);
  assert.deepEqual([...viaClusterIp.saw], ['10.244.1.1']);
  const viaNodePort = tally(requests(CLIENT, NODE_IP, 30080, 30));
  assert.deepEqual(viaNodePort.errors, []);
  assert.equal(Object.keys(viaNodePort.pods).length, 3, JSON.stringify(viaNodePort.pods));
  assert.deepEqual([...viaNodePort.saw], ['10.244.1.1']);

  // From a pod (inside the cluster CIDR): no SNAT, except to itself (hairpin: pa is node-local).
  const fromPod = requests('np-pa', '10.96.0.10', 80, 45);
  assert.deepEqual(tally(fromPod).errors, []);
  assert.deepEqual(Object.keys(tally(fromPod).pods).sort(), ['pa', 'pb', 'pc']);
  for (const [pod, from] of fromPod.map((a) => a.split(' '))) assert.equal(from, pod === 'pa' ? '10.244.1.1' : '10.244.1.2', `${pod} saw ${from}`);

  // No endpoints: refused at once; a port that is no service: refused; Local with none here: dropped.
  assert.deepEqual(requests(CLIENT, '10.96.0.20', 80, 2), ['error ECONNREFUSED', 'error ECONNREFUSED']);
  assert.deepEqual(requests(CLIENT, '10.96.0.10', 81, 1), ['error ECONNREFUSED']);
  assert.deepEqual(requests(CLIENT, NODE_IP, 30090, 1, 1000), ['error TIMEOUT']);
  assert.equal(tally(requests(CLIENT, '10.96.0.30', 80, 6)).errors.length, 0, 'the cluster IP of a Local service uses every endpoint');

  // Cross-checks: the kernel's table as nft lists it, the flows as conntrack lists them.
  const ruleset = JSON.parse(execFileSync('nft', ['-j', 'list', 'table', 'ip', 'ipvsync'], { encoding: 'utf8' })) as { nftables: Array<Record<string, any>> };
  const count = (name: string) => nftJsonElements(ruleset, name);
  assert.equal(count('endpoints-3'), 3 * 3, 'web: its cluster IP and two NodePort addresses (10.9.0.1, 10.244.1.1), three endpoints each');
  assert.equal(
    count('endpoints-1'),
    3,
    'local: its cluster IP, and its two NodePorts for pods and the node only (short-circuit blocks: from elsewhere they drop, no endpoint here); empty: none',
  );
  const mods = ruleset.nftables.filter((o) => o.rule?.chain === 'services-0').map((o) => JSON.stringify(o.rule.expr).match(/"mod":(\d+)(,"offset":(-?\d+))?/)).filter(Boolean).map((m) => (m![3] && m![3] !== '0' ? `${m![1]} offset ${m![3]}` : m![1]));
  assert.deepEqual(mods.sort(), ['1', '1 offset 1073741824', '1 offset 1073741824', '3'], "one dnat rule per endpoint count, two per short-circuit block size (each shard's chain)");
  const flows = execFileSync('conntrack', ['-L', '-d', '10.96.0.10', '-p', 'tcp'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  for (const p of three) assert.match(flows, new RegExp(`dst=10\\.96\\.0\\.10 .*src=${p.ip.replace(/\./g, '\\.')} `), `a flow DNATed to ${p.ip}`);

  // A resync of the same state writes nothing; one endpoint replaced (pc -> pd) is element
  // changes only, and its traffic moves.
  const again = await engine.sync(desired(services(three)));
  assert.equal(again.nft.writes, 0, JSON.stringify(again.nft));
  // A fresh engine reads the tables back (maps with concatenated data included) and finds
  // nothing to write either.
  const fresh = await new Engine({ nft }, {}).sync(desired(services(three)));
  assert.deepEqual(fresh.errors, []);
  assert.equal(fresh.nft.writes, 0, JSON.stringify(fresh.nft));
  const moved = [PODS[0]!, PODS[1]!, PODS[3]!];
  const change = await engine.sync(desired(services(moved)));
  assert.deepEqual(change.errors, []);
  assert.deepEqual(Object.keys(change.nft.ops).sort(), ['add-elements', 'delete-elements'], JSON.stringify(change.nft.ops));
  const after = tally(requests(CLIENT, '10.96.0.10', 80, 30));
  assert.deepEqual(Object.keys(after.pods).sort(), ['pa', 'pb', 'pd'], JSON.stringify(after.pods));
});

test('ipvsync sync -f --proxy-mode nftables: the same data plane from manifests, by the command, on a kernel without IPVS', async (t) => {
  await topology(t);
  const dir = mkdtempSync(join(tmpdir(), 'nft-mode-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const objs = services(PODS.slice(0, 3));
  writeFileSync(join(dir, 'objects.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [...objs.services, ...objs.slices] }));
  const cli = (...args: string[]) => syncNft(dir, ...args);
  const first = cli();
  assert.equal(first.status, 0, first.stderr);
  assert.match(first.stdout, /^synced 3 services \(nftables data plane\): nft \{/m);
  const via = tally(requests(CLIENT, '10.96.0.10', 80, 30));
  assert.deepEqual(via.errors, []);
  assert.equal(Object.keys(via.pods).length, 3, JSON.stringify(via.pods));
  assert.deepEqual([...via.saw], ['10.244.1.1']);
  assert.deepEqual(tally(requests(CLIENT, NODE_IP, 30080, 6)).errors, []);
  assert.deepEqual(requests(CLIENT, '10.96.0.20', 80, 1), ['error ECONNREFUSED']);
  // A second run plans nothing and writes nothing; the table lists with nft.
  const dry = cli('--dry-run', '--json');
  assert.equal(dry.status, 0, dry.stderr);
  assert.deepEqual((JSON.parse(dry.stdout) as { ops: unknown[] }).ops, []);
  const again = cli();
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stdout, /nothing to change/);
  assert.match(execFileSync('nft', ['list', 'table', 'ip', 'ipvsync'], { encoding: 'utf8' }), /numgen random mod 3 map @endpoints-3-0/);
});

test('elements changed by hand with nft are repaired by the next sync -f, with exactly those writes: the listing is diffed as the kernel sent it', async (t) => {
  await topology(t);
  const dir = mkdtempSync(join(tmpdir(), 'nft-repair-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const objs = services(PODS.slice(0, 3));
  writeFileSync(join(dir, 'objects.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [...objs.services, ...objs.slices] }));
  assert.equal(syncNft(dir).status, 0);
  const table = () => execFileSync('nft', ['list', 'table', 'ip', 'ipvsync'], { encoding: 'utf8' });
  const programmed = table();
  // endpoint 1 of the web service gone, endpoint 2 pointed at a pod that is no endpoint, a
  // cluster IP that is no service's
  const nft = (...a: string[]) => execFileSync('nft', a);
  const web = `endpoints-3-${frontendShard('10.96.0.10', 80)}`;
  nft('delete', 'element', 'ip', 'ipvsync', web, '{ 10.96.0.10 . tcp . 80 . 1 }');
  nft('delete', 'element', 'ip', 'ipvsync', web, '{ 10.96.0.10 . tcp . 80 . 2 }');
  nft('add', 'element', 'ip', 'ipvsync', web, `{ 10.96.0.10 . tcp . 80 . 2 : ${PODS[3]!.ip} . 8080 }`);
  nft('add', 'element', 'ip', 'ipvsync', 'cluster-ips', '{ 10.96.0.99 . tcp . 80 }');
  const broken = tally(requests(CLIENT, '10.96.0.10', 80, 30));
  assert.ok(broken.pods['pd'] && broken.errors.length && !broken.pods['pb'], 'the hand-made changes are in the data plane');
  const dry = syncNft(dir, '--dry-run', '--json');
  assert.equal(dry.status, 0, dry.stderr);
  type Op = { op: { verb: string; set: { name: string }; elements: Array<{ key: unknown[]; data?: unknown[] }> } };
  const writes = (JSON.parse(dry.stdout) as { ops: Op[] }).ops.flatMap(({ op }) => op.elements.map((e) => `${op.verb} ${op.set.name} ${e.key.join(' ')}${e.data ? ` : ${e.data.join(' ')}` : ''}`));
  assert.deepEqual(writes.sort(), [
    `add ${web} 10.96.0.10 tcp 80 1 : ${PODS[1]!.ip} 8080`,
    `add ${web} 10.96.0.10 tcp 80 2 : ${PODS[2]!.ip} 8080`,
    'delete cluster-ips 10.96.0.99 tcp 80',
    `delete ${web} 10.96.0.10 tcp 80 2`,
  ]);
  const repaired = syncNft(dir);
  assert.equal(repaired.status, 0, repaired.stderr);
  assert.equal(table(), programmed);
  const via = tally(requests(CLIENT, '10.96.0.10', 80, 30));
  assert.deepEqual(via.errors, []);
  assert.deepEqual(Object.keys(via.pods).sort(), ['pa', 'pb', 'pc']);
  assert.match(syncNft(dir).stdout, /nothing to change/);
});

test('loadBalancerSourceRanges filter new connections, as kube-proxy: narrowing them drops a new flow from the client, not the one it already has', async (t) => {
  await topology(t);
  const dir = mkdtempSync(join(tmpdir(), 'nft-ranges-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const write = (ranges: string[]) =>
    writeFileSync(
      join(dir, 'objects.json'),
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          svc('udp-lb', { type: 'LoadBalancer', clusterIP: '10.96.0.45', ports: [{ name: 'dns', port: 53, protocol: 'UDP', nodePort: 30045 }], loadBalancerSourceRanges: ranges }, { ingress: [{ ip: '192.0.2.45' }] }),
          slice('udp-lb', 'udp-lb-1', [{ name: 'dns', port: 5353, protocol: 'UDP' }], [{ ip: PODS[0]!.ip, node: PODS[0]!.node }]),
        ],
      }),
    );
  write(['10.9.0.0/24']);
  assert.equal(syncNft(dir).status, 0);
  assert.deepEqual(datagrams(CLIENT, '192.0.2.45', 53, 1, 40045), ['pa'], 'the client is in the range: its flow is made');
  write(['203.0.113.0/24']);
  const narrowed = syncNft(dir);
  assert.equal(narrowed.status, 0, narrowed.stderr);
  assert.deepEqual(datagrams(CLIENT, '192.0.2.45', 53, 2, 40045), ['pa', 'pa'], 'the flow it has goes on');
  assert.deepEqual(datagrams(CLIENT, '192.0.2.45', 53, 1, 40046, 1000), ['timeout'], 'a new flow from it is dropped');
});

test("someone else's chain and set in a pre-existing ip ipvsync survive sync -f, a resync and a rebuild of the static part; traffic flows throughout", async (t) => {
  await topology(t);
  const dir = mkdtempSync(join(tmpdir(), 'nft-foreign-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  execFileSync('nft', ['-f', '-'], { input: 'table ip ipvsync {\n set their-set { type ipv4_addr; elements = { 192.0.2.7 } }\n chain theirs { ip saddr @their-set counter drop; }\n}\n' });
  const theirs = () => execFileSync('nft', ['list', 'chain', 'ip', 'ipvsync', 'theirs'], { encoding: 'utf8' }) + execFileSync('nft', ['list', 'set', 'ip', 'ipvsync', 'their-set'], { encoding: 'utf8' });
  const before = theirs();
  const write = (extra: V1Service[] = [], extraSlices: V1EndpointSlice[] = []) => {
    const objs = services(PODS.slice(0, 3));
    writeFileSync(join(dir, 'objects.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [...objs.services, ...extra, ...objs.slices, ...extraSlices] }));
  };
  const cli = () => syncNft(dir);
  const works = () => {
    const via = tally(requests(CLIENT, '10.96.0.10', 80, 30));
    assert.deepEqual(via.errors, []);
    assert.equal(Object.keys(via.pods).length, 3, JSON.stringify(via.pods));
  };
  write();
  const first = cli();
  assert.equal(first.status, 0, first.stderr);
  works();
  assert.equal(theirs(), before, 'the first sync into their table');
  const again = cli();
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stdout, /nothing to change/);
  assert.equal(theirs(), before, 'a resync');
  // A LoadBalancer with source ranges adds a firewall chain: the table's static part changes.
  write(
    [svc('lb', { type: 'LoadBalancer', clusterIP: '10.96.0.40', ports: [{ port: 80, nodePort: 30040 }], loadBalancerSourceRanges: ['203.0.113.0/24'] }, { ingress: [{ ip: '192.0.2.10' }] })],
    [slice('lb', 'lb-1', [{ port: 8080 }], [{ ip: PODS[0]!.ip, node: PODS[0]!.node }])],
  );
  const rebuilt = cli();
  assert.equal(rebuilt.status, 0, rebuilt.stderr);
  assert.match(execFileSync('nft', ['list', 'table', 'ip', 'ipvsync'], { encoding: 'utf8' }), /chain fw-[0-9a-f]+ \{/);
  assert.equal(theirs(), before, 'a rebuild of the static part');
  works();
});

test('topology hints by the command: the zone of the Node in the manifests picks the endpoints traffic reaches; --node-labels overrides it', async (t) => {
  await topology(t);
  const dir = mkdtempSync(join(tmpdir(), 'nft-zone-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const zones = ['z1', 'z2', 'z1', 'z3'];
  const eps = PODS.map((p, i) => ({ ip: p.ip, node: p.node, zones: [zones[i]!] }));
  const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { 'topology.kubernetes.io/zone': 'z1' } } };
  const items = [node, svc('web', { clusterIP: '10.96.0.10', ports: [{ port: 80 }] }), slice('web', 'web-1', [{ port: 8080 }], eps)];
  writeFileSync(join(dir, 'objects.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  const cli = (...args: string[]) => syncNft(dir, ...args);
  const reached = () => {
    const via = tally(requests(CLIENT, '10.96.0.10', 80, 24));
    assert.deepEqual(via.errors, []);
    return Object.keys(via.pods).sort();
  };
  const z1 = cli();
  assert.equal(z1.status, 0, z1.stderr);
  assert.deepEqual(reached(), ['pa', 'pc'], 'the node is in z1');
  const z2 = cli('--node-labels', 'topology.kubernetes.io/zone=z2');
  assert.equal(z2.status, 0, z2.stderr);
  assert.deepEqual(reached(), ['pb'], 'the flag puts the node in z2');
  // A zone no endpoint is hinted for: every endpoint, as kube-proxy.
  const z9 = cli('--node-labels', 'topology.kubernetes.io/zone=z9');
  assert.equal(z9.status, 0, z9.stderr);
  assert.deepEqual(reached(), ['pa', 'pb', 'pc', 'pd']);
});

/** One scrape of the daemon's /metrics: the families (TYPE lines) and every sample by its
 *  series (`name{labels}` as exposed). */
async function scrape(): Promise<{ types: string[]; samples: Map<string, number> }> {
  const r = await fetch('http://127.0.0.1:10249/metrics');
  const text = await r.text();
  assert.equal(r.status, 200, text);
  const types: string[] = [];
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) types.push(line.split(' ')[2]!);
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return { types, samples };
}

function metric(m: { samples: Map<string, number> }, series: string): number {
  const v = m.samples.get(series);
  assert.ok(v !== undefined, `no ${series} in the scrape:\n${[...m.samples.keys()].filter((k) => k.startsWith(series.split('{')[0]!)).join('\n')}`);
  return v;
}

test('ipvsync proxy --proxy-mode nftables: the daemon on a manifests folder; a change is a few element writes; source ranges, a healthCheckNodePort, UDP flows of a removed endpoint flushed', async (t) => {
  await topology(t);
  const dir = mkdtempSync(join(tmpdir(), 'nft-daemon-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const lb = (ranges: string[]) =>
    svc('lb', { type: 'LoadBalancer', clusterIP: '10.96.0.40', ports: [{ port: 80, nodePort: 30040 }], loadBalancerSourceRanges: ranges }, { ingress: [{ ip: '192.0.2.10' }] });
  const dns = svc('dns', { clusterIP: '10.96.0.53', ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] });
  const dnsSlice = (pods: typeof PODS) => slice('dns', 'dns-1', [{ name: 'dns', port: 5353, protocol: 'UDP' }], pods.map((p) => ({ ip: p.ip, node: p.node })));
  const lbSlice = slice('lb', 'lb-1', [{ port: 8080 }], [{ ip: PODS[1]!.ip, node: 'node-b' }]);
  // externalTrafficPolicy Local with a healthCheckNodePort: pa is this node's
  const local = svc('lbl', { type: 'LoadBalancer', clusterIP: '10.96.0.41', ports: [{ port: 80, nodePort: 30041 }], externalTrafficPolicy: 'Local', healthCheckNodePort: 32041 }, { ingress: [{ ip: '192.0.2.11' }] });
  const localSlice = slice('lbl', 'lbl-1', [{ port: 8080 }], [{ ip: PODS[0]!.ip, node: 'node-a' }, { ip: PODS[1]!.ip, node: 'node-b' }]);
  const write = (web: typeof PODS, ranges: string[], dnsPods: typeof PODS) => {
    const objs = services(web);
    const items = [...objs.services, ...objs.slices, lb(ranges), lbSlice, dns, dnsSlice(dnsPods), local, localSlice];
    // atomically, as a deploy tool would: the daemon reads either version, never half of one
    writeFileSync(join(dir, '.objects.tmp'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
    renameSync(join(dir, '.objects.tmp'), join(dir, 'objects.json'));
  };
  write(PODS.slice(0, 3), ['10.9.0.0/24'], PODS.slice(0, 3));
  const daemon = spawn(
    process.execPath,
    [CLI, 'proxy', '--proxy-mode', 'nftables', '--manifests', dir, '--hostname-override', 'node-a', '--node-ip', NODE_IP, '--cluster-cidr', '10.244.0.0/16', '--metrics-bind-address', '127.0.0.1:10249', '--healthz-bind-address', '127.0.0.1:10256', '--logging-format', 'json'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const exited = new Promise<number | null>((resolve) => daemon.once('exit', (c) => resolve(c)));
  t.after(() => daemon.kill('SIGKILL'));
  const log: Array<Record<string, any>> = [];
  let text = '';
  createInterface({ input: daemon.stderr! }).on('line', (l) => {
    text += `${l}\n`;
    if (l.startsWith('{')) log.push(JSON.parse(l) as Record<string, any>);
  });
  const syncs = () => log.filter((l) => l.msg === 'sync');
  const last = async () => `daemon log:\n${text}`;
  await waitFor('the first sync', async () => (syncs().length ? true : undefined), { timeoutMs: 30_000, last });
  assert.equal(syncs()[0]!.errors, 0, text);
  assert.equal(await (await fetch('http://127.0.0.1:10249/proxyMode')).text(), 'nftables');
  assert.equal((await fetch('http://127.0.0.1:10256/healthz')).status, 200);

  // /metrics as kube-proxy's nftables mode serves it (the node is IPv4 only: --node-ip), with
  // the data plane's writes counted and no IPVS family
  const first = await scrape();
  assert.deepEqual(first.types.filter((n) => /^ipvsync_(ipvs|virtual|real)_/.test(n)), [], 'no IPVS family in nftables mode');
  assert.ok(first.types.includes('kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total'));
  const nftWrites = [...first.samples].filter(([k]) => k.startsWith('ipvsync_nft_writes_total{'));
  assert.ok(nftWrites.length > 0 && nftWrites.every(([k, v]) => /^ipvsync_nft_writes_total\{op="[a-z]+-(table|chain|set|rule|elements)"\}$/.test(k) && v > 0), JSON.stringify(nftWrites));
  assert.ok(metric(first, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"}') >= 1, 'the first sync is full');
  assert.ok(metric(first, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}') > 0);
  assert.ok(metric(first, 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"}') > 0);
  assert.equal(metric(first, 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"}'), 0);
  assert.equal(metric(first, 'kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{ip_family="IPv4"}'), 0);
  assert.ok(![...first.samples.keys()].some((k) => k.includes('ip_family="IPv6"')), 'an IPv4 node: no IPv6 series');
  const build = [...first.samples].filter(([k]) => k.startsWith('kubernetes_build_info{'));
  assert.equal(build.length, 1, JSON.stringify(build));
  assert.match(build[0]![0], /compiler="node",.*git_version="v\d+\.\d+\.\d+[^"]*",go_version="v\d+.*platform="linux\/[a-z0-9]+"/);
  assert.equal(build[0]![1], 1);

  const via = tally(requests(CLIENT, '10.96.0.10', 80, 30));
  assert.deepEqual(via.errors, []);
  assert.deepEqual(Object.keys(via.pods).sort(), ['pa', 'pb', 'pc']);
  // The healthCheckNodePort answers as kube-proxy's: one local endpoint; the LB IP reaches
  // only it, with the client's own address
  const hc = await fetch(`http://${NODE_IP}:32041/`);
  assert.equal(hc.status, 200);
  assert.equal(((await hc.json()) as { localEndpoints: number }).localEndpoints, 1);
  assert.deepEqual(requests(CLIENT, '192.0.2.11', 80, 3), ['pa 10.9.0.2', 'pa 10.9.0.2', 'pa 10.9.0.2']);
  assert.deepEqual(requests(CLIENT, '192.0.2.10', 80, 2), ['pb 10.244.1.1', 'pb 10.244.1.1'], 'the client is in the source range');
  const firstAnswer = datagrams(CLIENT, '10.96.0.53', 53, 1, 40053)[0]!;
  const udpPod = PODS.find((p) => p.ns === `np-${firstAnswer}`)!;
  assert.ok(udpPod, `a UDP answer from a pod: ${firstAnswer}`);
  assert.deepEqual(datagrams(CLIENT, '10.96.0.53', 53, 3, 40053), [firstAnswer, firstAnswer, firstAnswer], 'one flow, one pod');

  // One endpoint replaced (pc -> pd): one incremental sync of element writes only: pc's
  // endpoint map elements out and pd's in (a delete and an add in the endpoint map of each
  // shard web's frontends are in), and pd's hairpin element in (pc's stays: pc is a dns
  // endpoint too).
  const webMaps = new Set([frontendShard('10.96.0.10', 80), frontendShard(NODE_IP, 30080)]).size;
  const before = syncs().length;
  write([PODS[0]!, PODS[1]!, PODS[3]!], ['10.9.0.0/24'], PODS.slice(0, 3));
  await waitFor('the change synced', async () => (syncs().slice(before).some((l) => l.writes > 0) ? true : undefined), { timeoutMs: 30_000, last });
  // (a folder event that changed nothing syncs too, writing nothing)
  const change = syncs().slice(before);
  assert.ok(change.every((l) => l.mode === 'incremental' && l.errors === 0), text);
  assert.deepEqual(change.map((l) => l.writes).filter((w) => w > 0), [2 * webMaps + 1], text);
  // a sync for a change is partial; the element writes counted
  const changed = await scrape();
  assert.ok(metric(changed, 'kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family="IPv4"}') >= 1, [...changed.samples.keys()].filter((k) => k.includes('_partial_')).join('\n'));
  const elementWrites = (m: typeof first) => metric(m, 'ipvsync_nft_writes_total{op="add-elements"}') + (m.samples.get('ipvsync_nft_writes_total{op="delete-elements"}') ?? 0);
  assert.ok(elementWrites(changed) >= elementWrites(first) + 3);
  const moved = tally(requests(CLIENT, '10.96.0.10', 80, 30));
  assert.deepEqual(Object.keys(moved.pods).sort(), ['pa', 'pb', 'pd']);

  // The client leaves the source range (dropped before the dnat); the UDP pod that answered
  // leaves the dns endpoints: its flow is deleted, and the same client port reaches another.
  const before2 = syncs().length;
  write([PODS[0]!, PODS[1]!, PODS[3]!], ['198.51.100.0/24'], PODS.slice(0, 3).filter((p) => p !== udpPod));
  await waitFor('the second change synced', async () => (syncs().slice(before2).some((l) => l.writes > 0) ? true : undefined), { timeoutMs: 30_000, last });
  assert.ok(syncs().slice(before2).every((l) => l.mode === 'incremental' && l.errors === 0), text);
  assert.deepEqual(requests(CLIENT, '192.0.2.10', 80, 1, 1000), ['error TIMEOUT'], 'outside the source ranges: dropped');
  assert.deepEqual(tally(requests(CLIENT, '10.96.0.40', 80, 1)).errors, [], 'the cluster IP has no source ranges');
  const flows = execFileSync('conntrack', ['-L', '-p', 'udp', '-d', '10.96.0.53'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  assert.doesNotMatch(flows, new RegExp(`src=${udpPod.ip.replace(/\./g, '\\.')} `), `the flow to ${udpPod.ip} is gone:\n${flows}`);
  const next = datagrams(CLIENT, '10.96.0.53', 53, 1, 40053)[0]!;
  assert.notEqual(next, firstAnswer);
  assert.ok(['pa', 'pb', 'pc'].includes(next), next);

  // Stopped: the data plane stays in place.
  daemon.kill('SIGTERM');
  assert.equal(await exited, 0, text);
  assert.match(execFileSync('nft', ['list', 'table', 'ip', 'ipvsync'], { encoding: 'utf8' }), /numgen random mod 3 map @endpoints-3-0/);
  assert.deepEqual(tally(requests(CLIENT, '10.96.0.10', 80, 3)).errors, []);
});

test('sessionAffinity ClientIP: a client keeps its endpoint; when that endpoint goes, its next connection is spread anew and kept again; nft lists both tables', async (t) => {
  await topology(t);
  const k = await openKernel({}, { glue: true, mode: 'nftables' });
  const p = new Proxier(k, { mode: 'nftables', node: { name: 'node-a', addresses: [NODE_IP, '10.244.1.1'] }, config: { clusterCIDRs: ['10.244.0.0/16'] } });
  const sticky = svc('sticky', { clusterIP: '10.96.0.60', ports: [{ port: 80 }], sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } } });
  const endpoints = (pods: typeof PODS) => slice('sticky', 'sticky-1', [{ port: 8080 }], pods.map((x) => ({ ip: x.ip, node: x.node })));
  p.onServiceUpdate(sticky);
  p.onSliceUpdate(endpoints(PODS.slice(0, 3)));
  // and an IPv6 one, for its table's rules (no IPv6 traffic here)
  p.onServiceUpdate(svc('sticky6', { clusterIP: 'fd00::60', ipFamilies: ['IPv6'], ports: [{ port: 80 }], sessionAffinity: 'ClientIP' }));
  p.onSliceUpdate({ ...slice('sticky6', 'sticky6-1', [{ port: 8080 }], [{ ip: 'fd00:244::2', node: 'node-b' }]), addressType: 'IPv6' });
  assert.deepEqual((await p.sync(true)).report.errors, []);

  const first = tally(requests(CLIENT, '10.96.0.60', 80, 20));
  assert.deepEqual(first.errors, []);
  assert.equal(Object.keys(first.pods).length, 1, `one pod for one client: ${JSON.stringify(first.pods)}`);
  const kept = Object.keys(first.pods)[0]!;
  // The kernel remembers the client (its address, the frontend) -> the endpoint, with the timeout.
  const listed = JSON.parse(execFileSync('nft', ['-j', 'list', 'map', 'ip', 'ipvsync', 'affinity'], { encoding: 'utf8' })) as { nftables: Array<Record<string, any>> };
  const elem = listed.nftables.find((o) => o.map)!.map.elem as unknown[];
  assert.equal(elem.length, 1, JSON.stringify(elem));
  assert.match(JSON.stringify(elem[0]), /"10\.244\.1\.1"|"10\.9\.0\.2"/);
  assert.match(JSON.stringify(elem[0]), /"timeout":600/);
  // nft lists every rule of both tables (the ip6 one's affinity rules use 15 of the 16 registers)
  const all = spawnSync('nft', ['list', 'ruleset'], { encoding: 'utf8' });
  assert.equal(all.status, 0, all.stderr);
  assert.match(all.stdout, /update @affinity \{ ip6 saddr \. ct original ip6 daddr/);
  // a new process reads the tables back (the dynamic map's entries are the kernel's) and
  // plans nothing
  const fresh = new Proxier(k, { mode: 'nftables', node: { name: 'node-a', addresses: [NODE_IP, '10.244.1.1'] }, config: { clusterCIDRs: ['10.244.0.0/16'] } });
  for (const s of [sticky, svc('sticky6', { clusterIP: 'fd00::60', ipFamilies: ['IPv6'], ports: [{ port: 80 }], sessionAffinity: 'ClientIP' })]) fresh.onServiceUpdate(s);
  fresh.onSliceUpdate(endpoints(PODS.slice(0, 3)));
  fresh.onSliceUpdate({ ...slice('sticky6', 'sticky6-1', [{ port: 8080 }], [{ ip: 'fd00:244::2', node: 'node-b' }]), addressType: 'IPv6' });
  assert.deepEqual((await fresh.plan(true)).plan.nft?.ops, []);

  // The kept endpoint goes: the first connection after it finds its endpoint stale, forgets it
  // and is dropped (the SYN's retransmission, a second later, picks a live one); then the
  // client keeps that one.
  const rest = PODS.slice(0, 3).filter((x) => x.ns !== `np-${kept}`);
  p.onSliceUpdate(endpoints(rest));
  assert.deepEqual((await p.sync(false)).report.errors, []);
  const after = tally(requests(CLIENT, '10.96.0.60', 80, 20));
  assert.deepEqual(after.errors, []);
  assert.equal(Object.keys(after.pods).length, 1, JSON.stringify(after.pods));
  assert.notEqual(Object.keys(after.pods)[0], kept);
  assert.ok(rest.some((x) => x.ns === `np-${Object.keys(after.pods)[0]}`));

  // Affinity off: spread again (the remembered endpoint is not used).
  p.onServiceUpdate(svc('sticky', { clusterIP: '10.96.0.60', ports: [{ port: 80 }] }));
  assert.deepEqual((await p.sync(false)).report.errors, []);
  assert.equal(Object.keys(tally(requests(CLIENT, '10.96.0.60', 80, 30)).pods).length, 2);
});

test('IPv6 and dual-stack: a RequireDualStack service answers on both cluster IPs and the v6 NodePort, spread and masqueraded per family', async (t) => {
  await topology(t);
  const k = await openKernel({}, { glue: true, mode: 'nftables' });
  const p = new Proxier(k, { mode: 'nftables', node: { name: 'node-a', addresses: [NODE_IP, NODE_IP6] }, config: { clusterCIDRs: ['10.244.0.0/16', 'fd00:244::/48'] } });
  p.onServiceUpdate(svc('dual', { type: 'NodePort', clusterIP: '10.96.0.70', clusterIPs: ['10.96.0.70', 'fd00:96::70'], ipFamilies: ['IPv4', 'IPv6'], ipFamilyPolicy: 'RequireDualStack', ports: [{ port: 80, nodePort: 30070 }] }));
  const three = PODS.slice(0, 3);
  p.onSliceUpdate(slice('dual', 'dual-v4', [{ port: 8080 }], three.map((x) => ({ ip: x.ip, node: x.node }))));
  p.onSliceUpdate({ ...slice('dual', 'dual-v6', [{ port: 8080 }], three.map((x) => ({ ip: x.ip6, node: x.node }))), addressType: 'IPv6' });
  const r = await p.sync(true);
  assert.deepEqual(r.report.errors, []);
  assert.deepEqual(r.summary.warnings, []);
  for (const [host, port, saw] of [['10.96.0.70', 80, '10.244.1.1'], ['fd00:96::70', 80, 'fd00:244:1::1'], [NODE_IP6, 30070, 'fd00:244:1::1']] as const) {
    const got = tally(requests(CLIENT, host, port, 30));
    assert.deepEqual(got.errors, [], `${host}:${port}`);
    assert.deepEqual(Object.keys(got.pods).sort(), ['pa', 'pb', 'pc'], `${host}:${port}: ${JSON.stringify(got.pods)}`);
    assert.deepEqual([...got.saw], [saw], `${host}:${port}: masqueraded to the node's address of its family`);
  }
  // The ip6 table as nft lists it: the v6 frontends, three endpoints each
  const ruleset = JSON.parse(execFileSync('nft', ['-j', 'list', 'table', 'ip6', 'ipvsync'], { encoding: 'utf8' })) as { nftables: Array<Record<string, any>> };
  assert.equal(nftJsonElements(ruleset, 'endpoints-3'), 3 * 2, 'the v6 cluster IP and the v6 NodePort address');
  // one v6 endpoint goes: the v6 side leaves it, the v4 side keeps all three
  p.onSliceUpdate({ ...slice('dual', 'dual-v6', [{ port: 8080 }], PODS.slice(0, 2).map((x) => ({ ip: x.ip6, node: x.node }))), addressType: 'IPv6' });
  const change = await p.sync(false);
  assert.deepEqual(change.report.errors, []);
  assert.deepEqual(Object.keys(tally(requests(CLIENT, 'fd00:96::70', 80, 20)).pods).sort(), ['pa', 'pb']);
  assert.deepEqual(Object.keys(tally(requests(CLIENT, '10.96.0.70', 80, 30)).pods).sort(), ['pa', 'pb', 'pc']);
});
