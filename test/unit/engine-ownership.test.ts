// Ownership (issue 43) against the in-memory kernel: one rule per kind, the same for a sync, a
// resync, a switch of bind mode, a restart and cleanup. Someone else's objects of every kind
// are planted first — IPVS services on a VIP (another port), on the node's address in and out
// of the NodePort range, on an address someone bound on the VIP link; that address and the
// kernel's link-local; ipsets and nftables tables with names like the engine's — and every one
// of them must survive everything, while the engine's own go when no longer wanted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine, type DesiredState } from '../../src/engine/engine.js';
import { serviceKey, type DesiredService } from '../../src/engine/ipvs-model.js';
import { IPVS_RECORD } from '../../src/engine/ownership.js';
import { removeOwned } from '../../src/proxy/cleanup.js';
import { IPVSYNC_LINK_ALIAS } from '../../src/kernel/links.js';
import { Proxier, type ProxierOptions } from '../../src/proxy/proxier.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { slice, svc } from '../fixtures/kube/builders.js';
import { NftTransaction } from '../../src/kernel/nftables.js';

const NODE = '192.168.77.1';
type Kernel = ReturnType<typeof fakeKernel>;

const FOREIGN_SERVICES = [
  'TCP 10.96.0.10:8080', // a VIP of the proxy's, another port
  `TCP ${NODE}:9000`, // the node's address, outside the NodePort range (issue 43's daemon)
  `TCP ${NODE}:30999`, // the node's address, inside the NodePort range
  'TCP 10.96.5.5:80', // an address someone bound on kube-ipvs0
  'UDP 10.96.0.10:53',
];
const FOREIGN_ADDRESSES = ['10.96.5.5/32 proto 0', 'fe80::1/64 proto 3'];
const FOREIGN_SETS = ['ipvsync-ipvs-old', 'ipvsync-ipvs6x', 'ipvsync'];
const FOREIGN_TABLES = ['inet ipvsync', 'ip ipvsync-old', 'ip6 ipvsyncx'];

async function plant(k: Kernel): Promise<void> {
  const ops = FOREIGN_SERVICES.map((t) => {
    const [proto, hp] = t.split(' ') as [string, string];
    const [address, port] = hp.split(':') as [string, string];
    return { op: 'addService' as const, service: { protocol: proto.toLowerCase() as 'tcp' | 'udp', address, port: Number(port), scheduler: 'wlc' } };
  });
  assert.ok((await k.ipvs.apply([...ops, { op: 'addService', service: { fwmark: 77, scheduler: 'rr' } }])).ok);
  assert.ok(
    (await k.links.apply([
      { op: 'addLink', name: 'kube-ipvs0', kind: 'dummy' },
      { op: 'addAddr', link: 'kube-ipvs0', address: '10.96.5.5/32' },
      { op: 'addAddr', link: 'kube-ipvs0', address: 'fe80::1/64', protocol: 3 },
    ])).ok,
  );
  assert.ok(
    (await k.ipsets.apply([
      // a look-alike holding a foreign service's key: the record is its own two sets, by name
      { op: 'create', name: 'ipvsync-ipvs-old', type: 'hash:ip,port', family: 'inet' },
      { op: 'add', name: 'ipvsync-ipvs-old', members: [{ ip: NODE, proto: 'tcp', port: 9000 }] },
      { op: 'create', name: 'ipvsync-ipvs6x', type: 'hash:ip,port', family: 'inet6' },
      { op: 'create', name: 'ipvsync', type: 'hash:ip', family: 'inet' },
    ])).ok,
  );
  (await k.nft.commit(new NftTransaction()
    .addTable({ family: 'inet', name: 'ipvsync' })
    .addTable({ family: 'ip', name: 'ipvsync-old' })
    .addTable({ family: 'ip6', name: 'ipvsyncx' }))).orThrow();
}

async function ipvsKeys(k: Kernel): Promise<string[]> {
  return (await k.ipvs.services()).map((s) => (s.fwmark !== undefined ? `FWM ${s.fwmark}` : `${s.protocol!.toUpperCase()} ${s.address}:${s.port}`)).sort();
}
async function vipAddresses(k: Kernel): Promise<string[]> {
  return (await k.links.addresses({ link: 'kube-ipvs0' })).map((a) => `${a.address}/${a.prefixlen} proto ${a.protocol ?? 0}`).sort();
}
async function recorded(k: Kernel): Promise<string[]> {
  return (await k.ipsets.list()).filter((s) => s.name === IPVS_RECORD.inet || s.name === IPVS_RECORD.inet6).flatMap((s) => s.members!.map((m) => `${m.proto} ${m.ip}:${m.port}`)).sort();
}

/** Every planted object is there as planted. */
async function foreignSurvive(k: Kernel, when: string): Promise<void> {
  const keys = await ipvsKeys(k);
  for (const f of [...FOREIGN_SERVICES, 'FWM 77']) assert.ok(keys.includes(f), `${when}: ${f} gone (${keys.join(', ')})`);
  for (const f of FOREIGN_SERVICES) {
    const [proto, hp] = f.split(' ') as [string, string];
    const [address, port] = hp.split(':') as [string, string];
    const s = await k.ipvs.service({ protocol: proto.toLowerCase() as 'tcp', address, port: Number(port) });
    assert.equal(s!.scheduler, 'wlc', `${when}: ${f} changed`);
  }
  const addrs = await vipAddresses(k);
  for (const a of FOREIGN_ADDRESSES) assert.ok(addrs.includes(a), `${when}: ${a} gone (${addrs.join(', ')})`);
  const sets = (await k.ipsets.headers()).map((s) => s.name);
  for (const s of FOREIGN_SETS) assert.ok(sets.includes(s), `${when}: set ${s} gone`);
  assert.deepEqual((await k.ipsets.list('ipvsync-ipvs-old'))[0]!.members, [{ ip: NODE, proto: 'tcp', port: 9000 }], when);
  const tables = (await k.nft.list()).tables.map((t) => `${t.family} ${t.name}`);
  for (const t of FOREIGN_TABLES) assert.ok(tables.includes(t), `${when}: table ${t} gone`);
}

const web = svc('web', { type: 'NodePort', clusterIP: '10.96.0.10', ports: [{ port: 80, targetPort: 8080, nodePort: 30080 }] });
const webSlice = slice('web', 'web-1', [{ port: 8080 }], [{ ip: '10.244.1.2' }, { ip: '10.244.1.3' }]);
const api = svc('api', { clusterIP: '10.96.0.20', ports: [{ port: 443, targetPort: 6443 }] });
const apiSlice = slice('api', 'api-1', [{ port: 6443 }], [{ ip: '10.244.2.2' }]);

function proxier(k: Kernel, o: Partial<ProxierOptions> = {}): Proxier {
  const p = new Proxier(k, { node: { name: 'node-a', addresses: [NODE] }, config: { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] }, vipLink: 'kube-ipvs0', glue: true, ...o });
  for (const s of [web, api]) p.onServiceUpdate(s);
  for (const s of [webSlice, apiSlice]) p.onSliceUpdate(s);
  return p;
}

const OURS = ['TCP 10.96.0.10:80', 'TCP 10.96.0.20:443', `TCP ${NODE}:30080`];

test('foreign objects of every kind survive sync, resync, a removal, address -> route -> address, a restart and cleanup; the engine\'s own go', async () => {
  const k = fakeKernel();
  await plant(k);
  const p = proxier(k);
  const r1 = await p.sync(true);
  assert.deepEqual(r1.report.errors, []);
  await foreignSurvive(k, 'sync');
  assert.deepEqual((await ipvsKeys(k)).filter((x) => !FOREIGN_SERVICES.includes(x) && x !== 'FWM 77'), OURS);
  assert.deepEqual(await recorded(k), ['tcp 10.96.0.10:80', 'tcp 10.96.0.20:443', `tcp ${NODE}:30080`]);
  assert.deepEqual(await vipAddresses(k), ['10.96.0.10/32 proto 249', '10.96.0.20/32 proto 249', ...FOREIGN_ADDRESSES].sort());

  const r2 = await p.sync(true);
  assert.deepEqual([r2.report.ipvs.writes, r2.report.addresses.writes, r2.report.ipsets.writes], [0, 0, 0], 'a resync writes nothing');
  await foreignSurvive(k, 'resync');

  // the api Service goes: its virtual server, its record and its address go, nothing else
  p.onServiceDelete('default/api');
  const r3 = await p.sync(false);
  assert.deepEqual(r3.report.ipvs.ops, { deleteService: 1 });
  assert.deepEqual(await recorded(k), ['tcp 10.96.0.10:80', `tcp ${NODE}:30080`]);
  assert.ok(!(await vipAddresses(k)).includes('10.96.0.20/32 proto 249'));
  await foreignSurvive(k, 'removal');
  p.onServiceUpdate(api);
  assert.deepEqual((await p.sync(true)).report.errors, []);

  // bind mode route, by a new proxier (a restart): its addresses go, the foreign one stays
  const route = proxier(k, { bindMode: 'route', config: { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] } });
  const r4 = await route.sync(true);
  assert.deepEqual(r4.report.errors, []);
  assert.deepEqual(r4.report.ipvs.writes, 0, 'the restarted proxy knows its virtual servers');
  assert.deepEqual(await vipAddresses(k), FOREIGN_ADDRESSES);
  await foreignSurvive(k, 'route mode');
  // and back
  const back = proxier(k);
  const r5 = await back.sync(true);
  assert.deepEqual(r5.report.errors, []);
  assert.deepEqual(r5.report.addresses.ops, { addAddr: 2 });
  assert.deepEqual(r5.report.ipvs.writes, 0);
  await foreignSurvive(k, 'address mode again');

  // a restart still deletes what it made (the record), and only that
  back.onServiceDelete('default/web');
  const r6 = await back.sync(true);
  assert.deepEqual(r6.report.ipvs.ops, { deleteService: 2 });
  assert.deepEqual(await recorded(k), ['tcp 10.96.0.20:443']);
  await foreignSurvive(k, 'restart');

  const c = await removeOwned(k, 'kube-ipvs0');
  assert.deepEqual(c, { services: 1, ipsets: 0, addresses: 1, routes: 0, tables: 2, link: false });
  await foreignSurvive(k, 'cleanup');
  assert.deepEqual(await ipvsKeys(k), [...FOREIGN_SERVICES, 'FWM 77'].sort());
  assert.deepEqual(await vipAddresses(k), FOREIGN_ADDRESSES, 'the link stays: someone else has an address on it');
  assert.deepEqual((await k.ipsets.headers()).map((s) => s.name).sort(), [...FOREIGN_SETS].sort(), 'the record is gone');
  assert.deepEqual((await k.nft.list()).tables.map((t) => `${t.family} ${t.name}`).sort(), [...FOREIGN_TABLES].sort());
  // a second cleanup finds nothing
  assert.deepEqual(await removeOwned(k, 'kube-ipvs0'), { services: 0, ipsets: 0, addresses: 0, routes: 0, tables: 0, link: false });
  await foreignSurvive(k, 'second cleanup');
});

test('cleanup of a node with nothing foreign removes the link, the routes, the glue and the record', async () => {
  const k = fakeKernel();
  const p = proxier(k, { bindMode: 'route', config: { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] } });
  assert.deepEqual((await p.sync(true)).report.errors, []);
  // the kernel's own link-local does not keep the link
  await k.links.apply([{ op: 'addAddr', link: 'kube-ipvs0', address: 'fe80::1/64', protocol: 3 }]);
  const c = await removeOwned(k, 'kube-ipvs0');
  assert.deepEqual(c, { services: 3, ipsets: 0, addresses: 0, routes: 1, tables: 2, link: true });
  assert.deepEqual([await ipvsKeys(k), (await k.ipsets.headers()).map((s) => s.name), (await k.nft.list()).tables, await k.links.get('kube-ipvs0')], [[], [], [], null]);
});

test('cleanup leaves a VIP link that was there before ipvsync (no ipvsync alias), even with nothing on it; the one the engine creates carries the alias', async () => {
  const k = fakeKernel();
  await k.links.apply([{ op: 'addLink', name: 'kube-ipvs0', kind: 'dummy' }]);
  const p = proxier(k);
  assert.deepEqual((await p.sync(true)).report.errors, []);
  assert.equal((await k.links.get('kube-ipvs0'))?.alias, undefined, 'the engine found it and left it as it was');
  const c = await removeOwned(k, 'kube-ipvs0');
  assert.equal(c.link, false);
  assert.ok(c.addresses > 0, 'the VIPs went');
  assert.deepEqual(await k.links.addresses({ link: 'kube-ipvs0' }), []);
  assert.ok(await k.links.get('kube-ipvs0'), 'the link stays');
  await k.links.apply([{ op: 'delLink', name: 'kube-ipvs0' }]);
  assert.deepEqual((await proxier(k).sync(true)).report.errors, []);
  assert.equal((await k.links.get('kube-ipvs0'))?.alias, IPVSYNC_LINK_ALIAS);
  assert.equal((await removeOwned(k, 'kube-ipvs0')).link, true);
});

test("cleanup with the proxy's ipset prefix removes the KUBE-* sets --kube-proxy-ipsets made; without it they stay; foreign sets stay either way", async () => {
  const k = fakeKernel();
  await plant(k);
  const p = proxier(k, { kubeIpsets: true });
  assert.deepEqual((await p.sync(true)).report.errors, []);
  const kube = (await k.ipsets.headers()).map((s) => s.name).filter((n) => n.startsWith('KUBE-'));
  assert.ok(kube.length >= 20, kube.join(', '));
  const first = await removeOwned(k, 'kube-ipvs0');
  assert.equal(first.ipsets, 0);
  assert.deepEqual((await k.ipsets.headers()).map((s) => s.name).filter((n) => n.startsWith('KUBE-')), kube, 'not claimed: kept');
  const second = await removeOwned(k, 'kube-ipvs0', { ipsetPrefix: 'KUBE-' });
  assert.equal(second.ipsets, kube.length);
  assert.deepEqual((await k.ipsets.headers()).map((s) => s.name).sort(), [...FOREIGN_SETS].sort());
  await foreignSurvive(k, 'cleanup --kube-proxy-ipsets');
});

const S = (address: string, port = 80): DesiredService => ({ protocol: 'tcp', address, port, scheduler: 'rr', destinations: [{ address: '10.244.1.1', port: 8080, forward: 'masq', weight: 1 }] });

test('a desired virtual server someone else made is adopted: recorded, converged, and deleted once no longer desired', async () => {
  const k = fakeKernel();
  await k.ipvs.apply([{ op: 'addService', service: { protocol: 'tcp', address: '10.96.0.30', port: 80, scheduler: 'wlc' } }]);
  const e = new Engine(k);
  const r = await e.sync({ services: [S('10.96.0.30')] });
  assert.deepEqual(r.ipvs.ops, { updateService: 1, addDestination: 1 });
  assert.deepEqual(await recorded(k), ['tcp 10.96.0.30:80']);
  assert.deepEqual((await new Engine(k).sync({ services: [] })).ipvs.ops, { deleteService: 1 });
  assert.deepEqual([await ipvsKeys(k), await recorded(k)], [[], []]);
});

test('the record is written before IPVS creates and forgotten after it deletes; incremental plans keep it in memory', async () => {
  const k = fakeKernel();
  const e = new Engine(k);
  const state = (...vips: string[]): DesiredState => ({ services: vips.map((v) => S(v)) });
  await e.sync(state('10.96.0.1', 'fd00::1'));
  assert.deepEqual(
    k.ipsets.log.flat().map((o) => `${o.op} ${o.name}`),
    ['create ipvsync-ipvs', 'add ipvsync-ipvs', 'create ipvsync-ipvs6', 'add ipvsync-ipvs6'],
  );
  // the one GET per changed service, no dump of the record
  const dumps = k.ipsets.dumps;
  const plan = await e.plan(state('10.96.0.2'), new Set([serviceKey(S('10.96.0.1')), serviceKey(S('10.96.0.2')), serviceKey(S('fd00::1'))]));
  assert.equal(k.ipsets.dumps, dumps, 'incremental: the record from memory');
  assert.deepEqual(plan.ipsets!.early.map((o) => `${o.op} ${o.name}`), ['add ipvsync-ipvs']);
  assert.deepEqual(plan.ipsets!.late.map((o) => `${o.op} ${o.name} ${'members' in o ? o.members.map((m) => m.ip).join(',') : ''}`), ['del ipvsync-ipvs 10.96.0.1', 'del ipvsync-ipvs6 fd00::1']);
  assert.deepEqual((await e.apply(plan)).errors, []);
  assert.deepEqual(await recorded(k), ['tcp 10.96.0.2:80']);
});

test('a failed delete keeps the record (the next sync retries it); a record that could not be written creates nothing', async () => {
  const k = fakeKernel();
  const e = new Engine(k);
  await e.sync({ services: [S('10.96.0.1')] });
  k.ipvs.failNext = { index: 0, code: 'EINVAL' };
  const r = await e.sync({ services: [] });
  assert.equal(r.ipvs.errors[0]?.code, 'EINVAL');
  assert.deepEqual(await recorded(k), ['tcp 10.96.0.1:80'], 'still recorded: still the engine\'s');
  assert.deepEqual((await new Engine(k).sync({ services: [] })).ipvs.ops, { deleteService: 1 });
  assert.deepEqual(await recorded(k), []);

  k.ipsets.failNext = { index: 0, code: 'IPSET_ERR_PROTOCOL' };
  const f = await e.sync({ services: [S('10.96.0.2')] });
  assert.equal(f.ipsets.errors[0]?.code, 'IPSET_ERR_PROTOCOL');
  assert.deepEqual(await ipvsKeys(k), [], 'not recorded: not created');
  const ok = await e.sync({ services: [S('10.96.0.2')] });
  assert.deepEqual(ok.errors, []);
  assert.deepEqual([await ipvsKeys(k), await recorded(k)], [['TCP 10.96.0.2:80'], ['tcp 10.96.0.2:80']]);
});

test('a crash between recording and creating leaves a record without a service, dropped by the next full sync', async () => {
  const k = fakeKernel();
  k.ipvs.crashAfter = 0;
  await assert.rejects(new Engine(k).sync({ services: [S('10.96.0.1')] }), /simulated crash/);
  assert.deepEqual([await ipvsKeys(k), await recorded(k)], [[], ['tcp 10.96.0.1:80']]);
  const r = await new Engine(k).sync({ services: [] });
  assert.deepEqual([r.errors, r.ipvs.writes, r.ipsets.ops], [[], 0, { del: 1 }]);
  assert.deepEqual(await recorded(k), []);
});

test('excludeCidrs wins over the record; without an ipset handle the record is the process\'s memory (plus managedCidrs)', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { excludeCidrs: ['10.96.100.0/24'] });
  await e.sync({ services: [S('10.96.100.1'), S('10.96.0.1')] });
  assert.deepEqual((await e.sync({ services: [] })).ipvs.ops, { deleteService: 1 });
  assert.deepEqual(await ipvsKeys(k), ['TCP 10.96.100.1:80']);

  const ipvs = new FakeIpvs();
  const mem = new Engine({ ipvs });
  await mem.sync({ services: [S('10.96.0.1'), S('10.96.0.2')] });
  assert.deepEqual((await mem.sync({ services: [S('10.96.0.1')] })).ipvs.ops, { deleteService: 1 });
  // a new process has no memory of 10.96.0.1: someone else's unless claimed
  assert.equal((await new Engine({ ipvs }).sync({ services: [] })).ipvs.writes, 0);
  assert.deepEqual((await new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/16'] }).sync({ services: [] })).ipvs.ops, { deleteService: 1 });
});

test('firewall-mark services: recorded in memory, also with an ipset handle; managedFwmarks claims more', async () => {
  const k = fakeKernel();
  const fw = (fwmark: number): DesiredService => ({ fwmark, scheduler: 'rr', destinations: [] });
  await k.ipvs.apply([{ op: 'addService', service: { fwmark: 9, scheduler: 'rr' } }]);
  const e = new Engine(k);
  await e.sync({ services: [fw(5)] });
  assert.deepEqual((await e.sync({ services: [fw(6)] })).ipvs.ops, { addService: 1, deleteService: 1 });
  assert.deepEqual(await ipvsKeys(k), ['FWM 6', 'FWM 9']);
  assert.deepEqual((await new Engine(k, { managedFwmarks: { min: 1, max: 8 } }).sync({ services: [] })).ipvs.ops, { deleteService: 1 });
  assert.deepEqual(await ipvsKeys(k), ['FWM 9']);
});

test('the record is never the ipset diff\'s, whatever the owned prefix', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'ipvsync-' });
  await e.sync({ services: [S('10.96.0.1')], ipsets: [{ name: 'ipvsync-x', type: 'hash:ip', family: 'inet', members: [] }] });
  const r = await e.sync({ services: [S('10.96.0.1')], ipsets: [] });
  assert.deepEqual(r.ipsets.ops, { destroy: 1 });
  assert.deepEqual(await recorded(k), ['tcp 10.96.0.1:80']);
});
