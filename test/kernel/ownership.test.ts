// Runs inside the test VM (node dist/test/vm/cli.js --suite kernel): ownership (issue 43) with the
// real `ipvsync` command line on a real IPVS, in a network namespace of its own. Someone else's
// objects are planted with ipvsadm, ip and ipset — virtual servers on a VIP (another port), on the
// node's address out of and in the NodePort range, on an address bound by hand on kube-ipvs0, a
// firewall-mark one; that address and the kernel's link-local on kube-ipvs0; ipsets named like
// the engine's record — and each must survive `sync`, a resync, a removal, a switch of bind mode
// (address -> route -> address) and `cleanup`, read back with ipvsadm -Sn, ip -j addr, ipset list
// and a reader of addresses' protocol. user-mode-linux has no nftables ip tables: --no-glue.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { protoAddresses } from '../helpers/ifa-proto.js';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'main.js');
const NS = 'ipvsync-own';
const NODE = '192.168.77.1';
const inNs = (cmd: string, ...args: string[]) => execFileSync('ip', ['netns', 'exec', NS, cmd, ...args], { encoding: 'utf8' });

function ipvsync(...args: string[]): string {
  const r = spawnSync(process.execPath, [CLI, '--netns', `/run/netns/${NS}`, ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, `ipvsync ${args.join(' ')}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

/** ipvsadm -Sn's service lines, with their destinations: "-A -t 10.96.0.10:80 -s rr | -a …". */
function table(): Map<string, string> {
  const out = new Map<string, string>();
  let key = '';
  for (const l of inNs('ipvsadm', '-Sn').split('\n').filter(Boolean)) {
    if (l.startsWith('-A')) {
      key = l.split(' ').slice(1, 3).join(' ');
      out.set(key, l);
    } else out.set(key, `${out.get(key)} | ${l}`);
  }
  return out;
}

interface IpAddr { ifindex: number; addr_info: Array<{ local: string; prefixlen: number }> }
function vipAddresses(): string[] {
  const [link] = JSON.parse(inNs('ip', '-j', 'addr', 'show', 'dev', 'kube-ipvs0')) as IpAddr[];
  const proto = new Map(protoAddresses(NS).filter((a) => a.index === link!.ifindex).map((a) => [`${a.address}/${a.prefixlen}`, a.protocol]));
  return link!.addr_info.map((a) => `${a.local}/${a.prefixlen}`).map((a) => `${a.replace(/^fe80:.*\//, 'fe80::LL/')} proto ${proto.get(a)}`).sort();
}

function setMembers(name: string): string[] {
  const r = spawnSync('ip', ['netns', 'exec', NS, 'ipset', 'list', name], { encoding: 'utf8' });
  if (r.status !== 0) return ['(none)'];
  return r.stdout.split('Members:\n')[1]!.split('\n').filter(Boolean).sort();
}
const sets = () => inNs('ipset', 'list', '-n').split('\n').filter(Boolean).sort();

const FOREIGN = ['-t 10.96.0.10:8080', `-t ${NODE}:9000`, `-t ${NODE}:30999`, '-t 10.96.5.5:80', '-u 10.96.0.10:53', '-f 77'];
const FOREIGN_ADDRESSES = ['10.96.5.5/32 proto 0', 'fe80::LL/64 proto 3'];
const FOREIGN_SETS = ['ipvsync-ipvs-old', 'ipvsync-ipvs6x'];
let planted: Map<string, string>;

function foreignSurvive(when: string): void {
  const t = table();
  for (const k of FOREIGN) assert.equal(t.get(k), planted.get(k), `${when}: ${k}`);
  const addrs = vipAddresses();
  for (const a of FOREIGN_ADDRESSES) assert.ok(addrs.includes(a), `${when}: ${a} (${addrs.join(', ')})`);
  for (const s of FOREIGN_SETS) assert.ok(sets().includes(s), `${when}: set ${s}`);
  assert.deepEqual(setMembers('ipvsync-ipvs-old'), [`${NODE},tcp:9000`], when);
}
const ours = () => [...table().keys()].filter((k) => !FOREIGN.includes(k)).sort();

const WEB = `
apiVersion: v1
kind: Service
metadata: { name: web, namespace: default }
spec:
  type: NodePort
  clusterIP: 10.96.0.10
  ports: [{ port: 80, targetPort: 8080, nodePort: 30080 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-1, namespace: default, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ port: 8080, protocol: TCP }]
endpoints: [{ addresses: [10.244.1.2], conditions: { ready: true } }]
`;
const API = `
apiVersion: v1
kind: Service
metadata: { name: api, namespace: default }
spec:
  clusterIP: 10.96.0.20
  ports: [{ port: 443, targetPort: 6443 }]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: api-1, namespace: default, labels: { kubernetes.io/service-name: api } }
addressType: IPv4
ports: [{ port: 6443, protocol: TCP }]
endpoints: [{ addresses: [10.244.2.2], conditions: { ready: true } }]
`;

let dir: string;
before(() => {
  spawnSync('ip', ['netns', 'del', NS]);
  execFileSync('ip', ['netns', 'add', NS]);
  inNs('ip', 'link', 'set', 'lo', 'up');
  inNs('ip', 'link', 'add', 'node0', 'type', 'dummy');
  inNs('ip', 'addr', 'add', `${NODE}/24`, 'dev', 'node0');
  inNs('ip', 'link', 'set', 'node0', 'up');
  dir = mkdtempSync(join(tmpdir(), 'ipvsync-own-'));
});
after(() => {
  spawnSync('ip', ['netns', 'del', NS]);
  rmSync(dir, { recursive: true, force: true });
});

test('ipvsync sync -f, a resync, a removal, address -> route -> address and cleanup touch only what ipvsync recorded or marked', () => {
  // Someone else's objects, before ipvsync ever ran here.
  inNs('ip', 'link', 'add', 'kube-ipvs0', 'type', 'dummy');
  inNs('ip', 'addr', 'add', '10.96.5.5/32', 'dev', 'kube-ipvs0');
  // up: the kernel gives it its IPv6 link-local (issue 43: that one was deleted)
  inNs('ip', 'link', 'set', 'kube-ipvs0', 'up');
  for (const s of FOREIGN) inNs('ipvsadm', '-A', ...s.split(' '), '-s', 'wlc');
  inNs('ipvsadm', '-a', '-t', `${NODE}:9000`, '-r', '10.244.9.9:9000', '-m', '-w', '3');
  inNs('ipset', 'create', 'ipvsync-ipvs-old', 'hash:ip,port');
  inNs('ipset', 'add', 'ipvsync-ipvs-old', `${NODE},tcp:9000`);
  inNs('ipset', 'create', 'ipvsync-ipvs6x', 'hash:ip,port', 'family', 'inet6');
  // until the link-local is listed (DAD); the deadline only bounds a hang — 100 tries of 50 ms
  // were a few seconds of qemu TCG, ~10x slower
  for (const deadline = Date.now() + 120_000; !vipAddresses().some((a) => a.startsWith('fe80::LL')) && Date.now() < deadline; ) execFileSync('sleep', ['0.05']);
  planted = table();
  const sync = (...extra: string[]) => ipvsync('sync', '-f', dir, '--no-glue', '--node-ip', NODE, ...extra);

  writeFileSync(join(dir, 'web.yaml'), WEB);
  writeFileSync(join(dir, 'api.yaml'), API);
  sync();
  foreignSurvive('sync');
  assert.deepEqual(ours(), ['-t 10.96.0.10:80', '-t 10.96.0.20:443', `-t ${NODE}:30080`]);
  assert.deepEqual(setMembers('ipvsync-ipvs'), ['10.96.0.10,tcp:80', '10.96.0.20,tcp:443', `${NODE},tcp:30080`]);
  assert.deepEqual(vipAddresses(), ['10.96.0.10/32 proto 249', '10.96.0.20/32 proto 249', ...FOREIGN_ADDRESSES].sort());

  assert.match(sync(), /nothing to change/);
  foreignSurvive('resync');

  rmSync(join(dir, 'api.yaml'));
  sync();
  foreignSurvive('removal');
  assert.deepEqual(ours(), ['-t 10.96.0.10:80', `-t ${NODE}:30080`]);
  assert.deepEqual(setMembers('ipvsync-ipvs'), ['10.96.0.10,tcp:80', `${NODE},tcp:30080`]);
  assert.ok(!vipAddresses().includes('10.96.0.20/32 proto 249'));

  sync('--bind-mode', 'route', '--service-cidrs', '10.96.0.0/16');
  foreignSurvive('route mode');
  assert.deepEqual(vipAddresses(), FOREIGN_ADDRESSES);
  assert.deepEqual(ours(), ['-t 10.96.0.10:80', `-t ${NODE}:30080`]);
  sync();
  foreignSurvive('address mode again');
  assert.deepEqual(vipAddresses(), ['10.96.0.10/32 proto 249', ...FOREIGN_ADDRESSES].sort());

  // kube-proxy's ipsets too: made by --kube-proxy-ipsets, removed by cleanup's
  sync('--kube-proxy-ipsets');
  foreignSurvive('kube-proxy ipsets');
  const kubeSets = sets().filter((n) => n.startsWith('KUBE-'));
  assert.ok(kubeSets.length >= 20, kubeSets.join(', '));

  assert.match(ipvsync('cleanup', '--kube-proxy-ipsets'), new RegExp(`^removed 2 virtual services, 0 nftables tables, no link, 1 addresses, 0 routes, ${kubeSets.length} ipsets$`, 'm'));
  foreignSurvive('cleanup');
  assert.deepEqual(ours(), []);
  assert.deepEqual(vipAddresses(), FOREIGN_ADDRESSES, 'the link stays with its foreign addresses');
  assert.deepEqual(sets(), FOREIGN_SETS, 'the record and the KUBE-* sets are gone, the look-alikes stay');
  assert.match(ipvsync('cleanup'), /^removed 0 virtual services, 0 nftables tables, no link, 0 addresses, 0 routes, 0 ipsets$/m);
  foreignSurvive('second cleanup');
});

test('cleanup leaves a kube-ipvs0 that was there before ipvsync, even empty; the one ipvsync creates carries its alias (ip -d link) and goes', () => {
  spawnSync('ip', ['netns', 'exec', NS, 'ip', 'link', 'del', 'kube-ipvs0']);
  inNs('ip', 'link', 'add', 'kube-ipvs0', 'type', 'dummy');
  writeFileSync(join(dir, 'web.yaml'), WEB);
  const sync = () => ipvsync('sync', '-f', dir, '--no-glue', '--node-ip', NODE);
  const alias = () => (JSON.parse(inNs('ip', '-j', '-d', 'link', 'show', 'kube-ipvs0')) as Array<{ ifalias?: string }>)[0]!.ifalias;
  sync();
  assert.equal(alias(), undefined);
  assert.match(ipvsync('cleanup'), /^removed 2 virtual services, 0 nftables tables, no link, 1 addresses, 0 routes, 0 ipsets$/m);
  assert.equal(spawnSync('ip', ['netns', 'exec', NS, 'ip', 'link', 'show', 'kube-ipvs0']).status, 0, 'the link stays');
  inNs('ip', 'link', 'del', 'kube-ipvs0');
  sync();
  assert.equal(alias(), 'ipvsync');
  assert.match(ipvsync('cleanup'), /^removed 2 virtual services, 0 nftables tables, link kube-ipvs0, 1 addresses, 0 routes, 0 ipsets$/m);
  assert.notEqual(spawnSync('ip', ['netns', 'exec', NS, 'ip', 'link', 'show', 'kube-ipvs0']).status, 0, 'the link is gone');
});
