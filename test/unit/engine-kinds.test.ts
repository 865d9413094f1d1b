// The engine's other object kinds against the in-memory kernel: VIP addresses on its link,
// owned ipsets, its nftables table; plan() as a dry run; the order of writes across kinds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { changesOf, Engine, NFT_ELEMENTS_PIECE, planWrites, type DesiredState } from '../../src/engine/engine.js';
import { NetlinkError } from '../../src/errors.js';
import { type SetElement, elementList, NftCommitResult, NftTransaction } from '../../src/kernel/nftables.js';
import type { DesiredService } from '../../src/engine/ipvs-model.js';
import { elementChanges, type DesiredNftTable } from '../../src/engine/nft-diff.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import { IPVSYNC_ADDRESS_PROTOCOL } from '../../src/kernel/links.js';
import * as R from '../../src/kernel/nft-rules.js';

function svc(address: string, port: number, dests: string[]): DesiredService {
  return { protocol: 'tcp', address, port, scheduler: 'rr', destinations: dests.map((d) => ({ address: d, port: 80, forward: 'masq' as const, weight: 1 })) };
}

function table(vips: Array<[string, number]>): DesiredNftTable {
  const spec = { name: 'services', key: ['ipv4_addr' as const, 'inet_proto' as const, 'inet_service' as const] };
  return {
    family: 'ip',
    name: 'ipvsync',
    chains: [{ name: 'prerouting', hook: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } }, { name: 'mark' }],
    sets: [
      { ...spec, elements: vips.map(([a, p]) => ({ key: [a, 'tcp', p] })) },
      { name: 'cluster', key: ['ipv4_addr'], interval: true, elements: [{ key: ['10.244.0.0/16'] }] },
    ],
    rules: [
      { chain: 'prerouting', exprs: [...R.inSet([R.F.ipDaddr, R.F.l4proto, R.F.thDport], 'services'), R.jump('mark')] },
      { chain: 'mark', exprs: [...R.setMarkBits(0x4000)] },
    ],
  };
}

function state(n: number): DesiredState & { nft: DesiredNftTable } {
  const vips = Array.from({ length: n }, (_, i) => `10.96.0.${i + 1}`);
  return {
    services: vips.map((v) => svc(v, 80, ['10.244.1.1', '10.244.1.2'])),
    vips: { link: 'kube-ipvs0', addresses: vips },
    ipsets: [{ name: 'IPVSYNC-CLUSTER-IP', type: 'hash:ip,port', family: 'inet', members: vips.map((ip) => ({ ip, proto: 'tcp' as const, port: 80 })) }],
    nft: table(vips.map((v) => [v, 80])),
  };
}

test('a first sync creates the link, the addresses, the sets, the table and IPVS; a resync writes nothing', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  const r1 = await e.sync(state(20));
  assert.deepEqual(r1.errors, []);
  assert.deepEqual(r1.addresses.ops, { addLink: 1, setLink: 1, addAddr: 20 });
  // the owned set, and the ownership record (ipvsync-ipvs) of the 20 virtual servers
  assert.deepEqual(r1.ipsets.ops, { create: 2, add: 2 });
  assert.equal(r1.nft.writes, 1 + 2 + 2 + 2 + 2, 'table, 2 chains, 2 sets, 2 element batches, 2 rules');
  assert.equal(r1.ipvs.writes, 60);
  const w = [k.ipvs.writes, k.links.writes, k.ipsets.writes, k.nft.writes];
  const r2 = await e.sync(state(20));
  assert.deepEqual(
    [r2.ipvs.writes, r2.addresses.writes, r2.ipsets.writes, r2.nft.writes],
    [0, 0, 0, 0],
  );
  assert.deepEqual([k.ipvs.writes, k.links.writes, k.ipsets.writes, k.nft.writes], w, 'zero write messages of any kind');
  assert.equal(k.nft.log.length, 1, 'no empty nftables transaction either');
});

test('one service more: one address, one ipset member, one nft element, its IPVS objects — nothing else', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  await e.sync(state(20));
  const plan = await e.plan(state(21));
  const writes = planWrites(plan);
  assert.deepEqual(
    writes.map((w) => `${w.kind}:${'op' in w.op ? w.op.op : `${w.op.verb}-${w.op.kind}`}`),
    // the record of the new virtual server first, then the owned set's member
    ['link:addAddr', 'ipset:add', 'ipset:add', 'nft:add-elements', 'ipvs:addService', 'ipvs:addDestination', 'ipvs:addDestination'],
  );
  assert.deepEqual(plan.ipsets!.early[0], { op: 'add', name: 'ipvsync-ipvs', type: 'hash:ip,port', family: 'inet', members: [{ ip: '10.96.0.21', proto: 'tcp', port: 80 }], exist: true });
  const r = await e.apply(plan);
  assert.deepEqual(r.errors, []);
  assert.equal((await e.plan(state(21))).ipvs.ops.length, 0);
  assert.equal(planWrites(await e.plan(state(21))).length, 0);
});

test('removing services: IPVS goes first, then the addresses and members it used', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  await e.sync(state(5));
  const writes = planWrites(await e.plan(state(3)));
  assert.deepEqual(
    writes.map((w) => `${w.kind}:${'op' in w.op ? w.op.op : `${w.op.verb}-${w.op.kind}`}`),
    // the deleted virtual servers are forgotten by the record after IPVS
    ['ipset:del', 'nft:delete-elements', 'ipvs:deleteService', 'ipvs:deleteService', 'ipset:del', 'link:delAddr', 'link:delAddr'],
  );
  await e.sync(state(3));
  assert.deepEqual((await k.links.addresses({ link: 'kube-ipvs0' })).map((a) => a.address).sort(), ['10.96.0.1', '10.96.0.2', '10.96.0.3']);
  assert.equal((await k.ipsets.list('IPVSYNC-CLUSTER-IP'))[0]!.members!.length, 3);
});

test('plan() is a dry run: it writes nothing', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-' });
  const plan = await e.plan(state(4));
  assert.ok(planWrites(plan).length > 0);
  assert.deepEqual([k.ipvs.writes, k.links.writes, k.ipsets.writes, k.nft.writes], [0, 0, 0, 0]);
});

test('foreign sets, tables, addresses elsewhere and on our link survive; its own stray address goes', async () => {
  const k = fakeKernel();
  await k.ipsets.apply([{ op: 'create', name: 'KUBE-CLUSTER-IP', type: 'hash:ip,port', family: 'inet' }, { op: 'create', name: 'IPVSYNC-OLD', type: 'hash:ip', family: 'inet' }]);
  await k.nft.commit(new NftTransaction().addTable({ family: 'inet', name: 'firewalld' }));
  await k.links.apply([{ op: 'addLink', name: 'eth0', kind: 'dummy' }, { op: 'addAddr', link: 'eth0', address: '192.168.1.5/24' }]);
  await k.links.apply([
    { op: 'addLink', name: 'kube-ipvs0', kind: 'dummy' },
    { op: 'addAddr', link: 'kube-ipvs0', address: '10.96.9.9/24' },
    // the kernel's own IPv6 link-local (IFAPROT_KERNEL_LL)
    { op: 'addAddr', link: 'kube-ipvs0', address: 'fe80::1/64', protocol: 3 },
    // the engine's, no longer wanted
    { op: 'addAddr', link: 'kube-ipvs0', address: '10.96.8.8/24', protocol: IPVSYNC_ADDRESS_PROTOCOL },
  ]);
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-' });
  const r = await e.sync(state(2));
  assert.deepEqual(r.errors, []);
  assert.deepEqual((await k.ipsets.headers()).map((s) => s.name).sort(), ['IPVSYNC-CLUSTER-IP', 'KUBE-CLUSTER-IP', 'ipvsync-ipvs'], 'stale owned set destroyed, foreign kept, the record made');
  assert.deepEqual((await k.nft.list()).tables.map((t) => t.name).sort(), ['firewalld', 'ipvsync']);
  assert.deepEqual((await k.links.addresses({ link: 'eth0' })).map((a) => a.address), ['192.168.1.5']);
  assert.deepEqual(
    (await k.links.addresses({ link: 'kube-ipvs0' })).map((a) => `${a.address}/${a.prefixlen} proto ${a.protocol ?? 0}`).sort(),
    ['10.96.0.1/32 proto 249', '10.96.0.2/32 proto 249', '10.96.9.9/24 proto 0', 'fe80::1/64 proto 3'],
  );
});

test('a changed nftables rule rebuilds only that chain; a changed set declaration rebuilds the table atomically', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-' });
  const s = state(3);
  await e.sync(s);
  const s2 = state(3);
  s2.nft!.rules[1] = { chain: 'mark', exprs: [...R.setMarkBits(0x8000)] };
  const p = await e.plan(s2);
  assert.deepEqual(p.nft!.ops.map((o) => `${o.verb}-${o.kind}`), ['flush-chain', 'add-rule']);
  await e.apply(p);
  const s3 = state(3);
  s3.nft!.rules[1] = s2.nft!.rules[1]!;
  s3.nft!.sets[1]!.key = ['ipv4_addr'];
  s3.nft!.sets[1]!.interval = false;
  s3.nft!.sets[1]!.elements = [{ key: ['10.244.0.1'] }];
  const p3 = await e.plan(s3);
  assert.match(p3.nft!.rebuilt ?? '', /set cluster differs/);
  assert.equal(p3.nft!.ops[0]!.verb, 'delete');
  const r = await e.apply(p3);
  assert.deepEqual(r.nft.errors, []);
  assert.equal(k.nft.log.at(-1)!.length, p3.nft!.ops.length, 'one transaction');
  assert.equal(planWrites(await e.plan(s3)).length, 0);
});

test('an nftables failure rolls back that transaction only; IPVS still converges; the next sync retries', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-' });
  const s = state(2);
  s.nft!.rules.push({ chain: 'no-such-chain', exprs: [R.accept()] });
  const r = await e.sync(s);
  assert.equal(r.nft.writes, 0, 'rolled back');
  assert.equal(r.nft.errors[0]?.code, 'ENOENT');
  assert.ok(r.errors.includes(r.nft.errors[0]!));
  assert.equal(r.ipvs.writes, 6, 'IPVS applied all the same');
  assert.deepEqual((await k.nft.list()).tables, []);
  const fixed = await e.sync(state(2));
  assert.deepEqual(fixed.errors, []);
  assert.ok(fixed.nft.writes > 0);
});

test('an ipset declaration change refills through a temporary set and a swap', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-' });
  await e.sync(state(2));
  const s = state(2);
  s.ipsets![0]!.maxelem = 131072;
  const p = await e.plan(s);
  assert.deepEqual(p.ipsets!.early.map((o) => o.op), ['create', 'add', 'swap', 'destroy']);
  await e.apply(p);
  const [set] = await k.ipsets.list('IPVSYNC-CLUSTER-IP');
  assert.equal(set!.maxelem, 131072);
  assert.equal(set!.members!.length, 2);
  assert.deepEqual((await k.ipsets.headers()).map((x) => x.name), ['ipvsync-ipvs', 'IPVSYNC-CLUSTER-IP']);
});

test('several owned nftables tables (ip and ip6) change in one transaction', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-' });
  const v4 = table([['10.96.0.1', 80]]);
  const v6: DesiredNftTable = {
    family: 'ip6',
    name: 'ipvsync',
    chains: [{ name: 'mark' }],
    sets: [{ name: 'services', key: ['ipv6_addr', 'inet_proto', 'inet_service'], elements: [{ key: ['fd00::1', 'tcp', 80] }] }],
    rules: [{ chain: 'mark', exprs: [...R.setMarkBits(0x4000)] }],
  };
  await e.sync({ services: [], nft: [v4, v6] });
  assert.deepEqual((await k.nft.list()).tables.map((t) => `${t.family} ${t.name}`).sort(), ['ip ipvsync', 'ip6 ipvsync']);
  (v6.sets[0]!.elements as SetElement[]).push({ key: ['fd00::2', 'tcp', 80] });
  (v4.sets[0]!.elements as SetElement[]).push({ key: ['10.96.0.2', 'tcp', 80] });
  const before = k.nft.log.length;
  const p = await e.plan({ services: [], nft: [v4, v6] });
  assert.deepEqual(p.nft!.ops.map((o) => `${o.verb}-${o.kind} ${'set' in o ? o.set.family : ''}`), ['add-elements ip', 'add-elements ip6']);
  await e.apply(p);
  assert.equal(k.nft.log.length - before, 1, 'one transaction for both tables');
  assert.equal(planWrites(await e.plan({ services: [], nft: [v4, v6] })).length, 0);
});

test('after a restart, the services it recorded are owned (and cleaned up)', async () => {
  const k = fakeKernel();
  await new Engine(k, { ipsetPrefix: 'IPVSYNC-' }).sync(state(3));
  // a new process, no managed CIDRs, and service 3 is gone from the desired state: the record
  // in the kernel (ipvsync-ipvs) still names it
  const fresh = new Engine(k, { ipsetPrefix: 'IPVSYNC-' });
  const r = await fresh.sync(state(2));
  assert.deepEqual(r.ipvs.ops, { deleteService: 1 });
  assert.deepEqual((await k.ipvs.services()).map((s) => s.address).sort(), ['10.96.0.1', '10.96.0.2']);
});

test('incremental plans skip dumping and diffing VIPs and nftables that equal what was last applied cleanly', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  const s = state(10);
  assert.deepEqual((await e.sync(s)).errors, []);
  const dumps = () => [k.links.dumps, k.nft.dumps];
  const before = dumps();

  // One endpoint changed: same VIPs, same glue (no element change) → only the changed IPVS
  // service is looked at.
  const s2 = state(10);
  s2.services[3]!.destinations[1]!.address = '10.244.1.9';
  const changed = new Set(['inet|tcp|10.96.0.4|80']);
  const p = await e.plan(s2, { ...changesOf(s2.services, changed), nft: [] });
  assert.deepEqual(p.unchanged, ['addresses', 'nft']);
  assert.equal(p.addresses, undefined);
  assert.equal(p.nft, undefined);
  assert.deepEqual(dumps(), before, 'no address or nftables dump');
  const r = await e.apply(p);
  assert.deepEqual(r.errors, []);
  assert.deepEqual(r.ipvs.ops, { addDestination: 1, deleteDestination: 1 });
  const four = (await k.ipvs.services({ withDestinations: true })).find((x) => 'address' in x && x.address === '10.96.0.4')!;
  assert.deepEqual(four.destinations!.map((d) => d.address).sort(), ['10.244.1.1', '10.244.1.9']);

  // The caller changing its desired objects in place is seen (the engine keeps a copy).
  s2.vips!.addresses.push('10.96.0.99');
  const p2 = await e.plan(s2, { services: new Map(), nft: [] });
  assert.deepEqual(p2.unchanged, ['nft']);
  assert.deepEqual(p2.addresses?.early.map((o) => ('address' in o ? o.address : '')), ['10.96.0.99/32']);
  assert.ok(k.links.dumps > before[0]!, 'changed VIPs are dumped and diffed');
  await e.apply(p2);

  // A full plan always observes every kind, and so repairs what another tool changed.
  await k.links.apply([{ op: 'delAddr', link: 'kube-ipvs0', address: '10.96.0.1' }]);
  const quiet = await e.plan(s2, { services: new Map(), nft: [] });
  assert.equal(quiet.addresses, undefined, 'incremental: trusts the last clean apply (the periodic full sync repairs)');
  const full = await e.plan(s2);
  assert.equal(full.unchanged, undefined);
  assert.deepEqual(full.addresses?.early.map((o) => ('address' in o ? o.address : '')), ['10.96.0.1/32']);

  // Without element changes the engine has nothing to compare the tables with (it keeps no
  // element of them): even an incremental plan lists them, and finds nothing to write.
  const d = k.nft.dumps;
  const listed = await e.plan(s2, new Set());
  assert.ok(k.nft.dumps > d, 'listed');
  assert.deepEqual(listed.nft?.ops, []);
});

test('incremental plans with element changes write them on the last clean apply, without listing the tables', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  const s0 = state(10);
  assert.deepEqual((await e.sync(s0)).errors, []);
  let nftDumps = k.nft.dumps;
  const changes = (before: DesiredState & { nft: DesiredNftTable }, after: DesiredState & { nft: DesiredNftTable }) => ({ services: new Map(), nft: elementChanges([before.nft], [after.nft]) });

  // One element in, one out (a service replaced by another in the glue's set).
  const s = state(10);
  s.nft.sets[0]!.elements = (s.nft.sets[0]!.elements as SetElement[]).filter((x) => x.key[0] !== '10.96.0.2').concat([{ key: ['10.96.0.77', 'tcp', 80] }]);
  const p = await e.plan(s, changes(s0, s));
  assert.equal(p.nft?.fromLast, true);
  assert.equal(k.nft.dumps, nftDumps, 'no nftables listing');
  assert.deepEqual(
    p.nft!.ops.map((o) => (o.kind === 'elements' ? `${o.verb} ${elementList(o.elements).map((x) => x.key[0]).join(',')}` : o.kind)),
    ['delete 10.96.0.2', 'add 10.96.0.77'],
  );
  assert.deepEqual((await e.apply(p)).errors, []);
  const check = await e.plan(s);
  assert.deepEqual(check.nft?.ops, [], 'the kernel now holds exactly the desired table (a full plan lists it and finds nothing to do)');
  nftDumps = k.nft.dumps;

  // A rule change is a static change the last clean apply says enough about: its chain is
  // flushed and refilled (no rule handle needed), still without a listing.
  const s2 = state(10);
  s2.nft.sets[0]!.elements = s.nft.sets[0]!.elements;
  s2.nft.rules[1] = { chain: 'mark', exprs: [...R.setMarkBits(0x8000)] };
  const p2 = await e.plan(s2, changes(s, s2));
  assert.equal(p2.nft?.fromLast, true);
  assert.equal(k.nft.dumps, nftDumps, 'no nftables listing');
  assert.deepEqual(p2.nft!.ops.map((o) => `${o.verb} ${o.kind}`), ['flush chain', ...s2.nft.rules.filter((r) => r.chain === 'mark').map(() => 'add rule')]);
  assert.deepEqual((await e.apply(p2)).errors, []);
  assert.deepEqual((await e.plan(s2)).nft?.ops, [], 'the kernel holds the new rules (a listing finds nothing to do)');
  // A set's declaration change is not: listed, and the table rebuilt.
  const s2b = state(10);
  s2b.nft.sets[0]!.elements = s.nft.sets[0]!.elements;
  s2b.nft.rules = s2.nft.rules;
  s2b.nft.sets[0]!.timeout = 60_000;
  const p2b = await e.plan(s2b, changes(s2, s2b));
  assert.equal(p2b.nft?.fromLast, undefined);
  assert.ok(k.nft.dumps > nftDumps, 'listed');

  // Someone deletes the table between syncs: the element delta fails (rolled back), and the
  // next incremental plan lists the kernel again and rebuilds.
  const e2 = new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  assert.deepEqual((await e2.sync(s)).errors, []);
  await k.nft.commit(new NftTransaction().deleteTable({ family: 'ip', name: 'ipvsync' }));
  const s3 = state(10);
  s3.nft.sets[0]!.elements = (s.nft.sets[0]!.elements as SetElement[]).concat([{ key: ['10.96.0.88', 'tcp', 80] }]);
  const r3 = await e2.sync(s3, changes(s, s3));
  assert.equal(r3.nft.errors[0]?.code, 'ENOENT');
  const d = k.nft.dumps;
  const r4 = await e2.sync(s3, changes(s, s3));
  assert.ok(k.nft.dumps > d, 'a kind that failed is listed again');
  assert.deepEqual(r4.errors, []);
  assert.equal((await e2.plan(s3)).nft?.ops.length, 0, 'rebuilt: the kernel holds the desired table');
});

test('chains and sets added and gone since the last clean apply are written from it without a listing, with the element changes given', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  const s = state(3);
  assert.deepEqual((await e.sync(s)).errors, []);
  const dumps = k.nft.dumps;
  // A verdict map and the chain its element jumps to appear, the 'cluster' set goes; the
  // base's own element array changes in place by exactly the changes given.
  const t = s.nft;
  const next: DesiredNftTable = {
    ...t,
    chains: [...t.chains, { name: 'fw-1' }],
    sets: [t.sets[0]!, { name: 'firewall', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict', elements: [] }],
    rules: [...t.rules, { chain: 'prerouting', exprs: [...R.vmap([R.F.ipDaddr, R.F.l4proto, R.F.thDport], 'firewall')] }, { chain: 'fw-1', exprs: [R.drop()] }],
  };
  (t.sets[0]!.elements as SetElement[]).push({ key: ['10.96.0.9', 'tcp', 80] });
  const jump = { key: ['10.96.0.9', 'tcp', 80], verdict: { code: 'jump' as const, chain: 'fw-1' } };
  (next.sets[1]!.elements as SetElement[]).push(jump);
  const nft = [
    { family: 'ip' as const, table: 'ipvsync', set: 'services', add: [{ key: ['10.96.0.9', 'tcp', 80] }], delete: [] },
    { family: 'ip' as const, table: 'ipvsync', set: 'firewall', add: [jump], delete: [] },
  ];
  const p = await e.plan({ ...s, nft: next }, { services: new Map(), nft });
  assert.equal(k.nft.dumps, dumps, 'no nftables listing');
  assert.deepEqual(
    p.nft!.ops.map((o) => `${o.verb} ${o.kind}${o.kind === 'chain' ? ` ${o.chain.name}` : o.kind === 'set' || o.kind === 'elements' ? ` ${o.set.name}` : ''}`),
    ['add set firewall', 'add chain fw-1', 'flush chain prerouting', 'add rule', 'add rule', 'add rule', 'add elements services', 'add elements firewall', 'delete set cluster'],
  );
  assert.deepEqual((await e.apply(p)).errors, []);
  // A new engine knows nothing and lists the kernel: it holds exactly the new table.
  const fresh = new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  assert.deepEqual((await fresh.plan({ ...s, nft: next })).nft?.ops, [], 'the kernel holds the new table');
  assert.ok(k.nft.dumps > dumps, 'listed');

  // And back: the chain goes after the element that jumped to it.
  next.sets[1]!.elements = [];
  const back = await e.plan({ ...s, nft: { ...t, chains: t.chains, sets: [t.sets[0]!, next.sets[1]!], rules: t.rules } }, { services: new Map(), nft: [{ family: 'ip', table: 'ipvsync', set: 'firewall', add: [], delete: [jump] }] });
  assert.deepEqual(back.nft!.ops.map((o) => `${o.verb} ${o.kind}`), ['flush chain', 'add rule', 'delete elements', 'flush chain', 'delete chain']);
  assert.deepEqual((await e.apply(back)).errors, []);
  assert.deepEqual((await new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] }).plan({ ...s, nft: { ...t, sets: [t.sets[0]!, next.sets[1]!] } })).nft?.ops, []);
});

test('a full plan takes the element changes on the last clean apply while the nftables generation has not moved; any commit by anyone makes it list the tables again', async () => {
  const k = fakeKernel();
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  assert.deepEqual((await e.sync(state(10))).errors, []);
  const gen = () => k.nft.genId();
  // element changes without IPVS services named: a full plan
  const none = { nft: [] };
  // The table was not there (found so twice, at one generation): the engine's commit built
  // it from that generation, so it knows it. Nothing committed since: no listing, nothing to write.
  let d = k.nft.dumps;
  const p1 = await e.plan(state(10), none);
  assert.equal(p1.mode, 'full');
  assert.equal(k.nft.dumps, d, 'no nftables listing');
  assert.deepEqual(p1.nft, { ops: [], fromLast: true });
  assert.equal((await e.apply(p1)).nft.writes, 0);

  // Elements changed in a full plan, generation unchanged: the element changes on the last
  // clean apply, still without a listing; after it commits the engine knows the new generation.
  const s2 = state(11);
  const p2 = await e.plan(s2, { nft: elementChanges([state(10).nft], [s2.nft]) });
  assert.equal(k.nft.dumps, d);
  assert.equal(p2.nft?.fromLast, true);
  assert.deepEqual(p2.nft!.ops.map((o) => (o.kind === 'elements' ? `${o.verb} ${elementList(o.elements).map((x) => x.key[0]).join(',')}` : o.kind)), ['add 10.96.0.11']);
  assert.deepEqual((await e.apply(p2)).errors, []);
  assert.deepEqual((await e.plan(s2, none)).nft, { ops: [], fromLast: true });
  assert.equal(k.nft.dumps, d);
  // without element changes a full plan lists (and finds nothing to write)
  assert.deepEqual((await e.plan(s2)).nft?.ops, []);
  assert.equal(k.nft.dumps, d + 1, 'listed');
  d = k.nft.dumps;

  // Another tool deletes one of the engine's elements (a commit: the generation moves). The
  // next full plan lists the table and puts it back; then it trusts the generation again.
  await k.nft.commit(new NftTransaction().deleteElements({ family: 'ip', table: 'ipvsync', name: 'services', key: ['ipv4_addr', 'inet_proto', 'inet_service'] }, [{ key: ['10.96.0.3', 'tcp', 80] }]));
  const p3 = await e.plan(s2, none);
  assert.equal(k.nft.dumps, d + 1, 'listed');
  assert.equal(p3.nft?.fromLast, undefined);
  assert.deepEqual(p3.nft!.ops.map((o) => (o.kind === 'elements' ? `${o.verb} ${elementList(o.elements).map((x) => x.key[0]).join(',')}` : o.kind)), ['add 10.96.0.3']);
  assert.deepEqual((await e.apply(p3)).errors, []);
  d = k.nft.dumps;
  assert.deepEqual((await e.plan(s2, none)).nft, { ops: [], fromLast: true });
  assert.equal(k.nft.dumps, d);

  // A commit to a table the engine does not own moves the generation too: listed once (found
  // as wanted, nothing to write), then trusted at the listing's generation.
  await k.nft.commit(new NftTransaction().addTable({ family: 'ip', name: 'foreign' }));
  const p4 = await e.plan(s2, none);
  assert.equal(k.nft.dumps, d + 1);
  assert.deepEqual(p4.nft?.ops, []);
  assert.equal(p4.nft?.fromLast, undefined);
  await e.apply(p4);
  await e.plan(s2, none);
  assert.equal(k.nft.dumps, d + 1, 'trusted again');

  // A commit between a plan and its apply: the plan's view was not exact when it committed, so
  // the generation is not trusted and the next full plan lists.
  await k.nft.commit(new NftTransaction().deleteElements({ family: 'ip', table: 'ipvsync', name: 'services', key: ['ipv4_addr', 'inet_proto', 'inet_service'] }, [{ key: ['10.96.0.4', 'tcp', 80] }]));
  const p5 = await e.plan(s2, none);
  assert.equal(p5.nft!.ops.length, 1);
  const g = await gen();
  await k.nft.commit(new NftTransaction().deleteTable({ family: 'ip', name: 'foreign' }));
  assert.deepEqual((await e.apply(p5)).errors, []);
  assert.equal(await gen(), g + 2);
  d = k.nft.dumps;
  assert.deepEqual((await e.plan(s2, none)).nft?.ops, []);
  assert.equal(k.nft.dumps, d + 1, 'listed again');

  // A table found absent while another commit went in between its two listings: the
  // generation is not known, so the next full plan lists.
  const k2 = fakeKernel();
  const e3 = new Engine(k2, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  const list = k2.nft.list.bind(k2.nft);
  let calls = 0;
  k2.nft.list = async (o) => {
    if (++calls === 1) await k2.nft.commit(new NftTransaction().addTable({ family: 'ip', name: 'foreign' })).then(() => undefined);
    return list(o);
  };
  const gen2 = k2.nft.genId.bind(k2.nft);
  let reads = 0;
  k2.nft.genId = async () => {
    const g = await gen2();
    // a commit lands right after the first generation read
    if (++reads === 1) await k2.nft.commit(new NftTransaction().deleteTable({ family: 'ip', name: 'foreign' }));
    return g;
  };
  assert.deepEqual((await e3.sync(state(10))).errors, []);
  const d2 = k2.nft.dumps;
  await e3.plan(state(10), none);
  assert.ok(k2.nft.dumps > d2, 'not known: listed');

  // A failed commit forgets the generation (and the clean state) as well.
  await k.nft.commit(new NftTransaction().deleteTable({ family: 'ip', name: 'ipvsync' }));
  const r6 = await e.sync(state(12), { services: new Map(), nft: elementChanges([s2.nft], [state(12).nft]) });
  assert.equal(r6.nft.errors[0]?.code, 'ENOENT');
  d = k.nft.dumps;
  const p7 = await e.plan(state(12), none);
  assert.ok(k.nft.dumps > d, 'listed');
  assert.ok(p7.nft!.ops.some((o) => o.kind === 'table'), 'rebuilt');
});

test('the link is created first; its address adds run while nftables and IPVS apply, and their errors index the plan', async () => {
  const k = fakeKernel();
  const events: string[] = [];
  const links = k.links;
  const origLinks = links.apply.bind(links);
  let releaseAdds!: () => void;
  const addsHeld = new Promise<void>((r) => (releaseAdds = r));
  links.apply = async (ops, opts) => {
    const what = ops.map((o) => o.op).join(',');
    events.push(`links start ${what}`);
    // The address adds finish only once IPVS has been written: sequential apply would deadlock.
    if (ops.some((o) => o.op === 'addAddr')) {
      await addsHeld;
      // someone else bound 10.96.0.2 meanwhile: that add fails (EEXIST)
      await origLinks([{ op: 'addAddr', link: 'kube-ipvs0', address: '10.96.0.2/32' }]);
    }
    const r = await origLinks(ops, opts);
    events.push(`links end ${ops[0]!.op}`);
    return r;
  };
  const origIpvs = k.ipvs.apply.bind(k.ipvs);
  k.ipvs.apply = async (ops, opts) => {
    events.push('ipvs');
    const r = await origIpvs(ops, opts);
    releaseAdds();
    return r;
  };
  const desired = state(3);
  const r = await Promise.race([
    new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] }).sync(desired),
    // only a bound for the deadlock (a sequential apply never ends), not a speed: 2 s was a race
    // with a loaded machine
    new Promise<never>((_, rej) => setTimeout(() => rej(new Error('address adds did not overlap IPVS: deadlock')), 60_000).unref()),
  ]);
  assert.equal(events[0], 'links start addLink,setLink', 'the link alone (made and marked), first');
  assert.equal(events[1], 'links end addLink');
  assert.equal(events[2], 'links start addAddr,addAddr,addAddr');
  assert.ok(events.indexOf('ipvs') < events.indexOf('links end addAddr'), events.join(' | '));
  assert.equal(r.addresses.ops.addAddr, 2);
  assert.equal(r.addresses.errors.length, 1);
  assert.equal(r.addresses.errors[0]!.code, 'EEXIST');
  const plan = await new Engine(fakeKernel(), { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] }).plan(desired);
  const bad = plan.addresses!.early[r.addresses.errors[0]!.index!]!;
  assert.ok('address' in bad && bad.address === '10.96.0.2/32', `error index ${r.addresses.errors[0]!.index} names the failed op in the plan`);
  assert.equal(r.ipvs.writes, 9);
});

test('a thrown address-add failure still fails the sync (after IPVS applied)', async () => {
  const k = fakeKernel();
  const orig = k.links.apply.bind(k.links);
  k.links.apply = async (ops, opts) => {
    if (ops.some((o) => o.op === 'addAddr')) throw new Error('socket gone');
    return orig(ops, opts);
  };
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  await assert.rejects(e.sync(state(2)), /socket gone/);
  assert.equal((await k.ipvs.services()).length, 2, 'IPVS was applied meanwhile');
});

test('a thrown nftables commit failure still fails the sync (after IPVS applied)', async () => {
  const k = fakeKernel();
  k.nft.commit = async () => {
    throw new Error('commit socket gone');
  };
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-', managedCidrs: ['10.96.0.0/12'] });
  await assert.rejects(e.sync(state(2)), /commit socket gone/);
  assert.equal((await k.ipvs.services()).length, 2, 'IPVS was applied meanwhile');
});

/** n services on VIPs beyond one /24 (state() stops at 254). */
function bigState(n: number): DesiredState & { nft: DesiredNftTable } {
  const vips = Array.from({ length: n }, (_, i) => `10.96.${(i >> 8) + 1}.${i & 255}`);
  return {
    services: vips.map((v) => svc(v, 80, ['10.244.1.1'])),
    vips: { link: 'kube-ipvs0', addresses: vips },
    nft: table(vips.map((v) => [v, 80])),
  };
}

test('a large element op of a plain set is queued in pieces of one transaction; statuses and errors index the plan', async () => {
  const n = NFT_ELEMENTS_PIECE + 52;
  const desired = bigState(n);
  const plan = await new Engine(fakeKernel(), { managedCidrs: ['10.96.0.0/12'] }).plan(desired);
  const planOps = plan.nft!.ops;
  const big = planOps.findIndex((o) => o.kind === 'elements' && o.set.name === 'services');
  assert.ok(big >= 0 && planOps[big]!.kind === 'elements' && planOps[big]!.elements.length === n);

  const k = fakeKernel();
  const r = await new Engine(k, { managedCidrs: ['10.96.0.0/12'] }).sync(desired);
  assert.deepEqual(r.errors, []);
  assert.equal(k.nft.log.length, 1, 'one commit');
  const pieces = k.nft.log[0]!.filter((o) => o.kind === 'elements' && o.set.name === 'services');
  assert.deepEqual(pieces.map((o) => (o.kind === 'elements' ? o.elements.length : 0)), [NFT_ELEMENTS_PIECE, 52]);
  assert.equal(k.nft.log[0]!.length, planOps.length + 1, 'every other op as it is');
  assert.equal(r.nft.writes, planOps.length, 'the report counts the plan\'s ops');
  const listed = await k.nft.list({ family: 'ip', table: 'ipvsync' });
  assert.equal(listed.sets.find((x) => x.name === 'services')!.elements.length, n);

  // The second piece fails: the error names the plan's op, which is not counted as written.
  const k2 = fakeKernel();
  const orig = k2.nft.commit.bind(k2.nft);
  k2.nft.commit = async (tx, opts) => {
    const res = await orig(tx, opts);
    const statuses = Uint8Array.from({ length: res.size }, (_, j) => (j === big + 1 ? 2 : 4));
    const e = new NetlinkError({ message: 'ENOSPC', code: 'ENOSPC', errno: 28, kind: 'kernel', op: 'NFT_MSG_NEWSETELEM', index: big + 1 });
    return new NftCommitResult({ statuses, errors: [e], transactions: [{ firstOp: 0, endOp: res.size, sent: true, committed: false }], sendmsgCalls: 1 });
  };
  const r2 = await new Engine(k2, { managedCidrs: ['10.96.0.0/12'] }).sync(desired);
  assert.equal(r2.nft.errors.length, 1);
  assert.equal(r2.nft.errors[0]!.index, big, 'the error indexes the plan\'s op');
  assert.equal(r2.nft.errors[0]!.code, 'ENOSPC');
  assert.equal(r2.nft.writes, 0, 'a rolled-back transaction writes nothing');
});

test('an interval set\'s element op is never split (its ranges are lowered together)', async () => {
  const n = NFT_ELEMENTS_PIECE + 10;
  const desired = bigState(3);
  desired.nft.sets[1]!.elements = Array.from({ length: n }, (_, i) => ({ key: [`10.${(i >> 8) + 1}.${i & 255}.0/24`] }));
  const k = fakeKernel();
  const r = await new Engine(k, { managedCidrs: ['10.96.0.0/12'] }).sync(desired);
  assert.deepEqual(r.errors, []);
  const ops = k.nft.log[0]!.filter((o) => o.kind === 'elements' && o.set.name === 'cluster');
  assert.deepEqual(ops.map((o) => (o.kind === 'elements' ? o.elements.length : 0)), [n]);
});

test('VIP address adds go in one batch; an error far in it indexes the plan', async () => {
  const n = 612;
  const desired = bigState(n);
  const taken = desired.vips!.addresses[263]!;
  const k = fakeKernel();
  const orig = k.links.apply.bind(k.links);
  const sizes: number[] = [];
  k.links.apply = async (ops, opts) => {
    if (ops[0]!.op !== 'addAddr') return orig(ops, opts);
    sizes.push(ops.length);
    // someone else binds one of the VIPs first: that add fails (EEXIST)
    await orig([{ op: 'addAddr', link: 'kube-ipvs0', address: `${taken}/32` }]);
    return orig(ops, opts);
  };
  const r = await new Engine(k, { managedCidrs: ['10.96.0.0/12'] }).sync(desired);
  assert.deepEqual(sizes, [n]);
  assert.equal(r.addresses.ops.addAddr, n - 1);
  assert.equal(r.addresses.errors.length, 1);
  const plan = await new Engine(fakeKernel(), { managedCidrs: ['10.96.0.0/12'] }).plan(desired);
  const bad = plan.addresses!.early[r.addresses.errors[0]!.index!]!;
  assert.ok('address' in bad && bad.address === `${taken}/32`, `error index ${r.addresses.errors[0]!.index} names the failed op in the plan`);
  assert.equal((await k.links.addresses()).filter((a) => a.link === 'kube-ipvs0').length, n);
});

test("a wanted VIP already bound by someone else counts as bound (no EEXIST add) and stays when no longer wanted; the kernel's link-local survives", async () => {
  const k = fakeKernel();
  await k.links.apply([
    { op: 'addLink', name: 'kube-ipvs0', kind: 'dummy' },
    { op: 'addAddr', link: 'kube-ipvs0', address: '10.96.0.1/32' },
    { op: 'addAddr', link: 'kube-ipvs0', address: 'fe80::8c1f:64ff:fe2a:1/64', protocol: 3 },
  ]);
  const e = new Engine(k, { ipsetPrefix: 'IPVSYNC-' });
  const p = await e.plan(state(2));
  assert.deepEqual(p.addresses!.early, [{ op: 'addAddr', link: 'kube-ipvs0', address: '10.96.0.2/32', protocol: IPVSYNC_ADDRESS_PROTOCOL }]);
  assert.deepEqual((await e.apply(p)).errors, []);
  const r = await e.sync(state(0));
  assert.deepEqual(r.addresses.ops, { delAddr: 1 }, 'only its own');
  assert.deepEqual(
    (await k.links.addresses({ link: 'kube-ipvs0' })).map((a) => `${a.address}/${a.prefixlen} proto ${a.protocol ?? 0}`).sort(),
    ['10.96.0.1/32 proto 0', 'fe80::8c1f:64ff:fe2a:1/64 proto 3'],
  );
});

test('without an IPVS handle (an nftables data plane): the other kinds are programmed, no record is kept, a desired virtual server is refused', async () => {
  const { ipvs: _ipvs, ...k } = fakeKernel();
  const engine = new Engine(k, { ipsetPrefix: 'IPVSYNC-' });
  const desired: DesiredState = { services: [], nft: table([['10.96.0.10', 80]]) };
  const first = await engine.sync(desired);
  assert.deepEqual(first.errors, []);
  assert.deepEqual(first.invalid, []);
  assert.ok(first.nft.writes > 0);
  assert.equal(first.ipvs.writes, 0);
  assert.deepEqual(k.ipsets.log, [], 'no ownership record: there is no virtual server to record');
  assert.equal((await engine.sync(desired)).nft.writes, 0);
  const withService = await engine.sync({ ...desired, services: [svc('10.96.0.20', 80, ['10.244.1.2'])] });
  assert.deepEqual(withService.errors, []);
  assert.deepEqual(
    withService.invalid.map((i) => [i.kind, i.object, i.field]),
    [['ipvs', 'inet|tcp|10.96.0.20|80', 'service']],
  );
  assert.match(withService.invalid[0]!.message, /no IPVS/);
  assert.equal(withService.nft.writes, 0, 'the rest as if the service had not been there');
});
