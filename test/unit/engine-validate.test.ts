// One invalid desired object no longer costs the whole sync: the engine leaves it out, reports
// it (kind, object, field), leaves what the kernel has under its key as it is, and applies the
// rest exactly as if the object had not been there. Engine.plan() lists the same. The
// kernel layer's checks ported to TypeScript (src/kernel/op-checks.ts) agree with the addon's.
import { test } from 'node:test';
import type { SetElement } from '../../src/kernel/nftables.js';
import assert from 'node:assert/strict';
import { Engine, type DesiredState, type InvalidObject } from '../../src/engine/engine.js';
import { serviceKey, type DesiredService } from '../../src/engine/ipvs-model.js';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import type { DestinationConfig, IpvsOp, ServiceConfig } from '../../src/kernel/ipvs.js';
import type { IpSetMember, IpSetOp } from '../../src/kernel/ipsets.js';
import { addressProblem, ipsetMemberProblem, ipvsDestinationProblem, ipvsServiceProblem, ipvsServiceV6 } from '../../src/kernel/op-checks.js';
import { packIpvsOps } from '../../src/kernel/ipvs-pack.js';
import { native } from '../../src/native.js';
import { prng } from '../helpers/bytes.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import * as R from '../../src/kernel/nft-rules.js';

type Kernel = ReturnType<typeof fakeKernel>;

/** A kernel whose IPVS handle refuses every op the addon refuses, as the real one does (the
 *  sync rejects if anything invalid reaches it). */
function kernel(): Kernel {
  return { ...fakeKernel(), ipvs: new FakeIpvs({ convert: true }) };
}

const OPTS = { managedCidrs: ['10.96.0.0/12'], ipsetPrefix: 'IPVSYNC-' };

/** Every link and ipset op the engine sent the fakes is one the addon takes (its checks run on
 *  them, as on the real handles'): nothing invalid reached those façades either. */
function addonTookAll(k: Kernel, since = { ipsets: 0, links: 0 }): void {
  for (const ops of k.ipsets.log.slice(since.ipsets)) native().codec.ipset.encodeOps(ops as never);
  for (const ops of k.links.log.slice(since.links))
    native().codec.rtnl.encodeOps(ops.map((o) => (o.op === 'addAddr' || o.op === 'delAddr' ? { op: o.op, address: o.address, index: 2 } : o)) as never);
}

function svc(address: string, dests: Array<Partial<DestinationConfig> & { address: string }>, more: Partial<ServiceConfig> = {}): DesiredService {
  return { protocol: 'tcp', address, port: 80, scheduler: 'rr', ...more, destinations: dests.map((d) => ({ port: 8080, forward: 'masq', weight: 1, ...d })) } as DesiredService;
}

function services(n: number): DesiredService[] {
  return Array.from({ length: n }, (_, i) => svc(`10.96.0.${i + 1}`, [{ address: `10.244.1.${i + 1}` }, { address: `10.244.2.${i + 1}` }]));
}

async function ipvsState(k: Kernel) {
  return (await k.ipvs.services({ withDestinations: true }))
    .map((s) => ({ key: serviceKey(s), scheduler: s.scheduler, dests: (s.destinations ?? []).map((d) => `${d.address}:${d.port} ${d.forward} w${d.weight}`).sort() }))
    .sort((a, b) => (a.key < b.key ? -1 : 1));
}

function sortInvalid(l: readonly InvalidObject[]): InvalidObject[] {
  return [...l].sort((a, b) => (a.object < b.object ? -1 : a.object > b.object ? 1 : 0));
}

/** What a plan of the desired state on a fresh kernel finds invalid (plan() writes nothing). */
async function planInvalid(desired: DesiredState): Promise<InvalidObject[]> {
  return (await new Engine(kernel(), OPTS).plan(desired)).invalid ?? [];
}

/** What a report says of an invalid object, without its (free-text) message. */
const named = (l: readonly InvalidObject[]) => sortInvalid(l).map(({ kind, object, field }) => ({ kind, object, field }));

interface IpvsCase {
  name: string;
  /** The desired services with the bad object, and without it. */
  withBad: DesiredService[];
  without: DesiredService[];
  /** What the kernel has before the sync under the bad object's key (left as it is), and what
   *  of it the kernel synced without the bad object lacks. */
  seed?: IpvsOp[];
  seedBase?: IpvsOp[];
  expect: Array<Pick<InvalidObject, 'kind' | 'object' | 'field'>>;
  /** The key to sync incrementally after. */
  key: string;
}

function ipvsCases(): IpvsCase[] {
  const good = services(30);
  const at = (i: number, s: DesiredService) => [...good.slice(0, i), s, ...good.slice(i)];
  const replace = (i: number, s: DesiredService) => good.map((x, j) => (j === i ? s : x));
  const keyOf = (a: string) => `inet|tcp|${a}|80`;
  return [
    {
      name: 'a service with a bad address',
      withBad: at(10, svc('10.96.0.300', [{ address: '10.244.3.1' }])),
      without: good,
      expect: [{ kind: 'ipvs', object: 'TCP 10.96.0.300:80', field: 'address' }],
      key: keyOf('10.96.0.300'),
    },
    {
      name: 'a service with an IPv6 address with a zone (inet_pton takes none)',
      withBad: at(0, svc('fe80::1%eth0', [{ address: 'fe80::2' }])),
      without: good,
      expect: [{ kind: 'ipvs', object: 'TCP [fe80::1%eth0]:80', field: 'address' }],
      key: keyOf('10.96.0.1'),
    },
    {
      name: 'a service with a bad port',
      withBad: at(3, svc('10.96.1.1', [{ address: '10.244.3.1' }], { port: 70000 })),
      without: good,
      expect: [{ kind: 'ipvs', object: 'TCP 10.96.1.1:70000', field: 'port' }],
      key: 'inet|tcp|10.96.1.1|70000',
    },
    {
      name: 'a service with a bad scheduler (the kernel has the service: left as it is)',
      withBad: replace(4, svc('10.96.0.5', [{ address: '10.244.1.5' }], { scheduler: 'a-scheduler-name-too-long' })),
      without: good.filter((_, j) => j !== 4),
      seed: [
        { op: 'addService', service: { protocol: 'tcp', address: '10.96.0.5', port: 80, scheduler: 'wlc' } },
        { op: 'addDestination', service: { protocol: 'tcp', address: '10.96.0.5', port: 80 }, dest: { address: '10.244.9.9', port: 8080, weight: 5 } },
      ],
      expect: [{ kind: 'ipvs', object: 'TCP 10.96.0.5:80', field: 'scheduler' }],
      key: keyOf('10.96.0.5'),
    },
    {
      name: 'a destination with a negative weight (the kernel has it: left as it is)',
      withBad: replace(6, svc('10.96.0.7', [{ address: '10.244.1.7' }, { address: '10.244.2.7', weight: -1 }])),
      without: replace(6, svc('10.96.0.7', [{ address: '10.244.1.7' }])),
      seed: [
        { op: 'addService', service: { protocol: 'tcp', address: '10.96.0.7', port: 80, scheduler: 'rr' } },
        { op: 'addDestination', service: { protocol: 'tcp', address: '10.96.0.7', port: 80 }, dest: { address: '10.244.2.7', port: 8080, forward: 'masq', weight: 3 } },
      ],
      seedBase: [
        { op: 'addDestination', service: { protocol: 'tcp', address: '10.96.0.7', port: 80 }, dest: { address: '10.244.2.7', port: 8080, forward: 'masq', weight: 3 } },
      ],
      expect: [{ kind: 'ipvs', object: 'TCP 10.96.0.7:80 -> 10.244.2.7:8080', field: 'weight' }],
      key: keyOf('10.96.0.7'),
    },
    {
      name: 'a destination with a bad address',
      withBad: replace(8, svc('10.96.0.9', [{ address: '10.244.1.9' }, { address: '10.244.2.300' }])),
      without: replace(8, svc('10.96.0.9', [{ address: '10.244.1.9' }])),
      expect: [{ kind: 'ipvs', object: 'TCP 10.96.0.9:80 -> 10.244.2.300:8080', field: 'address' }],
      key: keyOf('10.96.0.9'),
    },
  ];
}

{
  for (const c of ipvsCases()) {
    test(`ipvs, ${c.name}: the rest applied as without it, it reported`, async () => {
      // as without the bad object, then what the kernel had under its key put back beside it
      const base = kernel();
      const rb = await new Engine(base, OPTS).sync({ services: c.without });
      assert.deepEqual(rb.errors, []);
      assert.deepEqual(rb.invalid, []);
      if (c.seed) assert.deepEqual((await base.ipvs.apply(c.seedBase ?? c.seed)).errors, []);

      const k = kernel();
      if (c.seed) assert.deepEqual((await k.ipvs.apply(c.seed)).errors, []);
      const e = new Engine(k, OPTS);
      const desired = { services: c.withBad };
      const plan = await e.plan(desired);
      assert.deepEqual(named(plan.invalid ?? []), c.expect);
      const r = await e.apply(plan);
      assert.deepEqual(r.errors, []);
      assert.deepEqual(named(r.invalid), c.expect);
      for (const x of r.invalid) assert.ok(x.message.length > 0);
      assert.deepEqual(sortInvalid(plan.invalid ?? []), sortInvalid(r.invalid), 'the plan says the same');
      assert.deepEqual(await ipvsState(k), await ipvsState(base));

      // a full resync and an incremental one of the bad object's key: nothing to write, the
      // kernel's object still as it was, the bad one still reported
      const writes = k.ipvs.writes;
      const r2 = await e.sync(desired);
      const r3 = await e.sync(desired, new Set([c.key]));
      assert.deepEqual([r2.errors, r3.errors], [[], []]);
      assert.deepEqual(named(r2.invalid), c.expect);
      assert.deepEqual(named(r3.invalid), c.expect, 'the incremental sync reports the verdicts of the full one');
      assert.equal(k.ipvs.writes, writes, 'no write');
      assert.deepEqual(await ipvsState(k), await ipvsState(base));
    });
  }
}

test('ipvs: the bad object fixed, it is applied; a bad one among many changes of a patched list is found alone', async () => {
  const k = kernel();
  const e = new Engine(k, OPTS);
  const list = services(40);
  await e.sync({ services: list });
  const bad = svc('10.96.0.12', [{ address: '10.244.1.12' }, { address: '10.244.2.12', weight: 2.5 }]);
  const next = list.map((s, i) => (i === 11 ? bad : s));
  const r = await e.sync({ services: next }, new Set(['inet|tcp|10.96.0.12|80']));
  assert.deepEqual(named(r.invalid), [{ kind: 'ipvs', object: 'TCP 10.96.0.12:80 -> 10.244.2.12:8080', field: 'weight' }]);
  assert.deepEqual(r.ipvs.ops, {}, 'the kernel keeps 10.244.2.12 at weight 1');
  const fixed = next.map((s, i) => (i === 11 ? svc('10.96.0.12', [{ address: '10.244.1.12' }, { address: '10.244.2.12', weight: 2 }]) : s));
  const r2 = await e.sync({ services: fixed }, new Set(['inet|tcp|10.96.0.12|80']));
  assert.deepEqual(r2.invalid, []);
  assert.deepEqual(r2.ipvs.ops, { updateDestination: 1 });
  // a new list, the same objects but one: only that one is new, and it alone is reported
  const r3 = await e.sync({ services: [...fixed.slice(0, 20), svc('10.96.0.21', [], { protocol: 'icmp' as 'tcp' }), ...fixed.slice(21)] });
  assert.deepEqual(named(r3.invalid), [{ kind: 'ipvs', object: 'ICMP 10.96.0.21:80', field: 'protocol' }]);
  assert.deepEqual(r3.errors, []);
});

test('vips: a bad entry is left out and reported, the others are bound', async () => {
  const good = ['10.96.0.1', '10.96.0.2', 'fd00:96::3', '10.96.0.4'];
  const withBad = [good[0]!, '10.96.0.300', good[1]!, good[2]!, '10.96.0.0/24', 'fe80::1%eth0', good[3]!];
  const state = (addresses: string[]): DesiredState => ({ services: [], vips: { link: 'kube-ipvs0', addresses } });
  const base = kernel();
  await new Engine(base, OPTS).sync(state(good));
  {
    const k = kernel();
    const e = new Engine(k, OPTS);
    const desired = state(withBad);
    const r = await e.sync(desired);
    assert.deepEqual(r.errors, []);
    const expect = [
      { kind: 'vip', object: 'vip 10.96.0.0/24 on kube-ipvs0', field: 'address' },
      { kind: 'vip', object: 'vip 10.96.0.300 on kube-ipvs0', field: 'address' },
      { kind: 'vip', object: 'vip fe80::1%eth0 on kube-ipvs0', field: 'address' },
    ];
    assert.deepEqual(named(r.invalid), expect);
    assert.deepEqual(sortInvalid(await planInvalid(desired)), sortInvalid(r.invalid));
    assert.deepEqual(await k.links.addresses({ link: 'kube-ipvs0' }), await base.links.addresses({ link: 'kube-ipvs0' }));
    addonTookAll(k);
    const again = await e.sync(desired, new Set());
    assert.deepEqual([again.addresses.writes, named(again.invalid)], [0, expect]);
  }
  // the link itself refused: nothing of the VIPs is touched
  const k = kernel();
  const r = await new Engine(k, OPTS).sync({ services: [], vips: { link: 'kube-ipvs0-is-too-long', addresses: good } });
  assert.deepEqual(named(r.invalid), [{ kind: 'vip', object: 'vip link kube-ipvs0-is-too-long', field: 'link' }]);
  assert.equal(k.links.writes, 0);
});

test('routes: a route with a bad destination or link is left out; the kernel keeps the owned route of its destination', async () => {
  const good = [{ dst: '10.96.0.0/12', type: 'local' as const, dev: 'lo' }];
  const bad = [
    { dst: 'fd00:96::/200', type: 'local' as const, dev: 'lo' },
    { dst: '10.100.0.0/16', type: 'local' as const, dev: 'a-link-name-too-long' },
  ];
  const owned = { family: 'inet' as const, dst: '10.100.0.0/16', type: 'local' as const, table: 255, protocol: 249, scope: 'host' as const, dev: 'lo', index: 1 };
  const base = kernel();
  await new Engine(base, OPTS).sync({ services: [], routes: { routes: good } });
  base.routes.seed(owned);
  const k = kernel();
  k.routes.seed(owned);
  const desired: DesiredState = { services: [], routes: { routes: [bad[0]!, ...good, bad[1]!] } };
  const r = await new Engine(k, OPTS).sync(desired);
  assert.deepEqual(r.errors, []);
  assert.deepEqual(named(r.invalid), [
    { kind: 'route', object: 'route local 10.100.0.0/16', field: 'dev' },
    { kind: 'route', object: 'route local fd00:96::/200', field: 'dst' },
  ]);
  assert.deepEqual(sortInvalid(await planInvalid(desired)), sortInvalid(r.invalid));
  const routes = async (x: Kernel) => (await x.routes.list()).map((o) => `${o.dst} ${o.table} ${o.protocol}`).sort();
  assert.deepEqual(await routes(k), await routes(base));
  assert.ok((await routes(k)).includes('10.100.0.0/16 255 249'));
});

test('ipsets: members that do not fit the set type are left out, the kernel keeps its member of a left-out key, a bad set is not destroyed', async () => {
  const good: IpSetMember[] = Array.from({ length: 20 }, (_, i) => ({ ip: `10.96.0.${i + 10}`, proto: 'tcp', port: 80 }));
  const bad: IpSetMember[] = [
    { ip: '10.96.0.2' }, // hash:ip,port needs a port
    { ip: '10.96.0.3', proto: 'tcp', port: 80, ip2: '10.0.0.1' }, // and takes no second address
    { ip: 'fd00::3', proto: 'tcp', port: 80 }, // an IPv6 address in an inet set
    { ip: '10.96.0.4', proto: 'tcp', port: 80, comment: 'say "hi"' }, // a valid member key, a bad comment
  ];
  const seed: IpSetOp[] = [
    { op: 'create', name: 'IPVSYNC-SVC', type: 'hash:ip,port', family: 'inet' },
    { op: 'add', name: 'IPVSYNC-SVC', members: [{ ip: '10.96.0.4', proto: 'tcp', port: 80 }] },
    { op: 'create', name: 'IPVSYNC-BAD', type: 'hash:ip', family: 'inet' },
    { op: 'add', name: 'IPVSYNC-BAD', members: [{ ip: '10.0.0.9' }] },
  ];
  const base = kernel();
  await new Engine(base, OPTS).sync({ services: [], ipsets: [{ name: 'IPVSYNC-SVC', type: 'hash:ip,port', family: 'inet', members: good }] });
  await base.ipsets.apply(seed.filter((o) => o.op !== 'create' || o.name !== 'IPVSYNC-SVC'));
  const k = kernel();
  await k.ipsets.apply(seed);
  const desired: DesiredState = {
    services: [],
    ipsets: [
      { name: 'IPVSYNC-SVC', type: 'hash:ip,port', family: 'inet', members: [bad[0]!, ...good.slice(0, 10), bad[1]!, bad[2]!, ...good.slice(10), bad[3]!] },
      { name: 'IPVSYNC-BAD', type: 'hash:foo' as 'hash:ip', family: 'inet', members: [{ ip: '10.0.0.9' }] },
      { name: 'NOT-OURS', type: 'hash:ip', family: 'inet', members: [] },
    ],
  };
  const seeded = { ipsets: k.ipsets.log.length, links: 0 };
  const r = await new Engine(k, OPTS).sync(desired);
  assert.deepEqual(r.errors, []);
  assert.deepEqual(named(r.invalid), [
    { kind: 'ipset', object: 'ipset IPVSYNC-BAD', field: 'type' },
    { kind: 'ipset', object: 'ipset IPVSYNC-SVC member 10.96.0.2', field: 'port' },
    { kind: 'ipset', object: 'ipset IPVSYNC-SVC member 10.96.0.3,tcp:80,10.0.0.1', field: 'ip2' },
    { kind: 'ipset', object: 'ipset IPVSYNC-SVC member 10.96.0.4,tcp:80', field: 'comment' },
    { kind: 'ipset', object: 'ipset IPVSYNC-SVC member fd00::3,tcp:80', field: 'ip' },
    { kind: 'ipset', object: 'ipset NOT-OURS', field: 'name' },
  ]);
  assert.deepEqual(sortInvalid(await planInvalid(desired)), sortInvalid(r.invalid));
  const sets = async (x: Kernel) =>
    (await x.ipsets.list()).map((s) => ({ name: s.name, type: s.type, members: (s.members ?? []).map((m) => `${m.ip},${m.proto ?? ''}:${m.port ?? ''}`).sort() })).sort((a, b) => (a.name < b.name ? -1 : 1));
  assert.deepEqual(await sets(k), await sets(base));
  addonTookAll(k, seeded);
  assert.ok((await sets(k)).find((s) => s.name === 'IPVSYNC-SVC')!.members.includes('10.96.0.4,tcp:80'));
});

function table(elements: { services: Array<[string, number]>; cluster: string[]; dispatch: Array<[string, string]> }, extra: Partial<DesiredNftTable> = {}): DesiredNftTable {
  return {
    family: 'ip',
    name: 'ipvsync',
    chains: [{ name: 'prerouting', hook: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } }, { name: 'mark' }, ...(extra.chains ?? [])],
    sets: [
      { name: 'services', key: ['ipv4_addr', 'inet_proto', 'inet_service'], elements: elements.services.map(([a, p]) => ({ key: [a, 'tcp', p] })) },
      { name: 'cluster', key: ['ipv4_addr'], interval: true, elements: elements.cluster.map((c) => ({ key: [c] })) },
      { name: 'dispatch', key: ['ipv4_addr'], map: 'verdict', elements: elements.dispatch.map(([a, v]) => ({ key: [a], verdict: (v.startsWith('jump ') ? { code: 'jump', chain: v.slice(5) } : v === 'mark' ? { code: 'jump', chain: 'mark' } : { code: v }) as never })) },
      ...(extra.sets ?? []),
    ],
    rules: [
      { chain: 'prerouting', exprs: [...R.inSet([R.F.ipDaddr, R.F.l4proto, R.F.thDport], 'services'), R.jump('mark')] },
      { chain: 'prerouting', exprs: [...R.vmap([R.F.ipDaddr], 'dispatch')] },
      { chain: 'mark', exprs: [...R.setMarkBits(0x4000)] },
      ...(extra.rules ?? []),
    ],
  };
}

async function nftState(k: Kernel) {
  const rs = await k.nft.list({ elements: true });
  return {
    tables: rs.tables.map((t) => `${t.family} ${t.name}`),
    chains: rs.chains.map((c) => c.name).sort(),
    sets: rs.sets.map((s) => ({ name: s.name, elements: s.elements.map((e) => JSON.stringify([e.key, e.verdict ?? null])).sort() })).sort((a, b) => (a.name < b.name ? -1 : 1)),
    rules: rs.rules.map((r) => `${r.chain} ${JSON.stringify(r.exprs)}`),
  };
}

test('nft: an element with host bits or a key of the wrong length is left out and reported; the rest of the table is committed', async () => {
  // more elements than one block the check takes at a time, bad ones in the first and the last
  const good = { services: Array.from({ length: 600 }, (_, i): [string, number] => [`10.96.${i >> 8}.${i & 255}`, 80]), cluster: ['10.244.0.0/16', '10.245.0.0/16'], dispatch: [['10.96.0.1', 'accept'], ['10.96.0.2', 'mark']] as Array<[string, string]> };
  const withBad = table(good);
  (withBad.sets[0]!.elements as SetElement[]).splice(7, 0, { key: ['10.96.1.1', 'tcp'] });
  (withBad.sets[0]!.elements as SetElement[]).splice(555, 0, { key: ['10.96.9.300', 'tcp', 80] });
  (withBad.sets[1]!.elements as SetElement[]).push({ key: ['10.246.1.5/24'] });
  (withBad.sets[0]!.elements as SetElement[]).push({ key: ['10.96.1.2', 'tcp', 70000] });
  const base = kernel();
  await new Engine(base, OPTS).sync({ services: [], nft: table(good) });
  {
    const k = kernel();
    const e = new Engine(k, OPTS);
    const desired = { services: [], nft: withBad };
    const r = await e.sync(desired);
    assert.deepEqual(r.errors, []);
    assert.deepEqual(named(r.invalid), [
      { kind: 'nft', object: 'nft ip ipvsync set cluster element 10.246.1.5/24', field: 'key' },
      { kind: 'nft', object: 'nft ip ipvsync set services element 10.96.1.1 . tcp', field: 'key' },
      { kind: 'nft', object: 'nft ip ipvsync set services element 10.96.1.2 . tcp . 70000', field: 'key' },
      { kind: 'nft', object: 'nft ip ipvsync set services element 10.96.9.300 . tcp . 80', field: 'key' },
    ]);
    assert.match(r.invalid.find((x) => x.object.endsWith('10.246.1.5/24'))!.message, /host bits/);
    assert.deepEqual(sortInvalid(await planInvalid(desired)), sortInvalid(r.invalid));
    assert.deepEqual(await nftState(k), await nftState(base));
    const again = await e.sync(desired);
    assert.deepEqual([again.errors, again.nft.writes], [[], 0]);
  }
});

test('nft: a map element whose verdict is refused keeps the kernel element of its key; a bad chain or set is left out with the rules that need it', async () => {
  const elems = { services: [['10.96.0.1', 80]] as Array<[string, number]>, cluster: ['10.244.0.0/16'], dispatch: [['10.96.0.1', 'accept'], ['10.96.0.2', 'mark'], ['10.96.0.3', 'drop']] as Array<[string, string]> };
  const k = kernel();
  const e = new Engine(k, OPTS);
  const r1 = await e.sync({ services: [], nft: table(elems) });
  assert.deepEqual([r1.errors, r1.invalid], [[], []]);
  const before = await nftState(k);
  // 10.96.0.2's verdict is now one the façade refuses: its element stays as the kernel has it
  const changed = table({ ...elems, dispatch: [['10.96.0.1', 'accept'], ['10.96.0.2', 'bogus'], ['10.96.0.3', 'drop']] });
  const r2 = await e.sync({ services: [], nft: changed });
  assert.deepEqual(r2.errors, []);
  assert.deepEqual(named(r2.invalid), [{ kind: 'nft', object: 'nft ip ipvsync set dispatch element 10.96.0.2', field: 'verdict' }]);
  assert.deepEqual(await nftState(k), before);

  // a chain with an unknown hook, a set of an unknown type: left out, and the rules in that
  // chain, jumping to it or looking the set up, and a map element jumping to it, with them; the
  // rest as without them
  const broken = table({ ...elems, dispatch: [...elems.dispatch, ['10.96.0.4', 'jump broken']] }, {
    chains: [{ name: 'broken', hook: { type: 'filter', hook: 'nowhere' as 'input', priority: 0 } }],
    sets: [{ name: 'weird', key: ['no_such_type' as 'ipv4_addr'], elements: [] }],
    rules: [
      { chain: 'broken', exprs: [R.accept()] },
      { chain: 'mark', exprs: [R.jump('broken')] },
      { chain: 'mark', exprs: [...R.inSet([R.F.ipDaddr], 'weird'), R.drop()] },
    ],
  });
  const k2 = kernel();
  const r3 = await new Engine(k2, OPTS).sync({ services: [], nft: broken });
  assert.deepEqual(r3.errors, []);
  assert.deepEqual(named(r3.invalid), [
    { kind: 'nft', object: 'nft ip ipvsync chain broken', field: 'hook' },
    { kind: 'nft', object: 'nft ip ipvsync chain broken rule 0', field: 'chain' },
    { kind: 'nft', object: 'nft ip ipvsync chain mark rule 1', field: 'exprs' },
    { kind: 'nft', object: 'nft ip ipvsync chain mark rule 2', field: 'exprs' },
    { kind: 'nft', object: 'nft ip ipvsync set dispatch element 10.96.0.4', field: 'verdict' },
    { kind: 'nft', object: 'nft ip ipvsync set weird', field: 'key' },
  ]);
  assert.deepEqual(sortInvalid(await planInvalid({ services: [], nft: broken })), sortInvalid(r3.invalid));
  const k3 = kernel();
  await new Engine(k3, OPTS).sync({ services: [], nft: table(elems) });
  assert.deepEqual(await nftState(k2), await nftState(k3));
});

test('plan: a valid desired state has nothing to report; every kind at once', async () => {
  const ok: DesiredState = {
    services: services(5),
    vips: { link: 'kube-ipvs0', addresses: ['10.96.0.1'] },
    routes: { routes: [{ dst: '10.96.0.0/12', type: 'local', dev: 'lo' }] },
    ipsets: [{ name: 'IPVSYNC-X', type: 'hash:ip', members: [{ ip: '10.0.0.1' }] }],
    nft: table({ services: [['10.96.0.1', 80]], cluster: ['10.244.0.0/16'], dispatch: [] }),
  };
  assert.deepEqual(await planInvalid(ok), []);
  const bad: DesiredState = {
    services: [svc('10.96.0.1', [{ address: '10.244.0.1', forward: 'nat' as 'masq' }])],
    vips: { link: 'kube-ipvs0', addresses: ['10.96.0.x'] },
    routes: { routes: [{ dst: '10.96.0.0/12', type: 'unicast' }] },
    ipsets: [{ name: 'IPVSYNC-X', type: 'hash:ip', members: [{ ip: '10.0.0.1', port: 80 }] }],
    nft: table({ services: [['10.96.0.1', -1]], cluster: [], dispatch: [] }),
  };
  assert.deepEqual(named(await planInvalid(bad)), [
    { kind: 'ipvs', object: 'TCP 10.96.0.1:80 -> 10.244.0.1:8080', field: 'forward' },
    { kind: 'ipset', object: 'ipset IPVSYNC-X member 10.0.0.1,80', field: 'port' },
    { kind: 'nft', object: 'nft ip ipvsync set services element 10.96.0.1 . tcp . -1', field: 'key' },
    { kind: 'route', object: 'route unicast 10.96.0.0/12', field: 'dev' },
    { kind: 'vip', object: 'vip 10.96.0.x on kube-ipvs0', field: 'address' },
  ]);
});

test('plan: an nftables table whose owned names are not names is refused whole, naming the field', async () => {
  const t = table({ services: [['10.96.0.1', 80]], cluster: [], dispatch: [] });
  assert.deepEqual(await planInvalid({ services: [], nft: { ...t, owned: { names: ['services'], prefixes: ['fw-'] } } }), []);
  for (const owned of [{ names: 'services', prefixes: [] }, { names: [], prefixes: [''] }, { names: [7], prefixes: [] }, null, 'all'])
    assert.deepEqual(named(await planInvalid({ services: [], nft: { ...t, owned: owned as never } })), [{ kind: 'nft', object: 'nft ip ipvsync', field: 'owned' }], JSON.stringify(owned));
});

// ---- the ported checks agree with the addon's ---------------------------------------------------

function addonRefuses(f: () => unknown): boolean {
  try {
    f();
    return false;
  } catch {
    return true;
  }
}

test('op-checks: IPVS services and destinations are refused exactly when the addon refuses them', () => {
  const services: ServiceConfig[] = [
    { protocol: 'tcp', address: '10.0.0.1', port: 80 },
    { protocol: 'tcp', address: '10.0.0.1', port: 80, scheduler: 'rr', flags: ['persistent'], timeout: 10, netmask: '255.255.255.0' },
    { protocol: 'udp', address: 'fd00::1', port: 53, netmask: 64, pe: 'sip' },
    { fwmark: 7 },
    { fwmark: 7, family: 'inet6' },
    { protocol: 'tcp', address: '10.0.0.300', port: 80 },
    { protocol: 'tcp', address: '010.0.0.1', port: 80 },
    { protocol: 'tcp', address: 'fe80::1%eth0', port: 80 },
    { protocol: 'tcp', address: '10.0.0.1', port: 65536 },
    { protocol: 'tcp', address: '10.0.0.1', port: 1.5 },
    { protocol: 'icmp' as 'tcp', address: '10.0.0.1', port: 80 },
    { protocol: 'tcp', address: '10.0.0.1', port: 80, family: 'inet6' },
    { protocol: 'tcp', address: '10.0.0.1', port: 80, scheduler: '' },
    { protocol: 'tcp', address: '10.0.0.1', port: 80, scheduler: 'sixteen-chars-xx' },
    { protocol: 'tcp', address: '10.0.0.1', port: 80, scheduler: 'fifteen-chars-x' },
    { protocol: 'tcp', address: '10.0.0.1', port: 80, flags: ['sh-port'] },
    { protocol: 'tcp', address: '10.0.0.1', port: 80, scheduler: 'sh', flags: ['sh-port'] },
    { protocol: 'tcp', address: '10.0.0.1', port: 80, flags: ['bogus' as 'persistent'] },
    { protocol: 'tcp', address: '10.0.0.1', port: 80, timeout: -1 },
    { protocol: 'tcp', address: '10.0.0.1', port: 80, netmask: 24 },
    { protocol: 'tcp', address: 'fd00::1', port: 80, netmask: '255.0.0.0' },
    { protocol: 'tcp', address: 'fd00::1', port: 80, netmask: 129 },
    { protocol: 'tcp', address: '10.0.0.1', port: 80, pe: '' },
    { fwmark: 0 },
    { fwmark: 7, address: '10.0.0.1' } as ServiceConfig,
  ];
  for (const s of services) {
    const ts = ipvsServiceProblem(s) !== undefined;
    const addon = addonRefuses(() => native().codec.ipvs.convertOps(packIpvsOps([{ op: 'addService', service: s }]), 0));
    assert.equal(ts, addon, `${JSON.stringify(s)}: TypeScript ${ts ? 'refuses' : 'takes'} it, the addon ${addon ? 'refuses' : 'takes'} it`);
  }
  const v4: ServiceConfig = { protocol: 'tcp', address: '10.0.0.1', port: 80 };
  const v6: ServiceConfig = { protocol: 'tcp', address: 'fd00::1', port: 80 };
  const dests: Array<[ServiceConfig, DestinationConfig]> = [
    [v4, { address: '10.1.0.1', port: 8080 }],
    [v4, { address: '10.1.0.1', port: 8080, forward: 'masq', weight: 0, upperThreshold: 5, lowerThreshold: 1 }],
    [v4, { address: '10.1.0.1', port: 8080, weight: 2147483647 }],
    [v4, { address: '10.1.0.1', port: 8080, weight: 2147483648 }],
    [v4, { address: '10.1.0.1', port: 8080, weight: -1 }],
    [v4, { address: '10.1.0.1', port: 8080, weight: 0.5 }],
    [v4, { address: '10.1.0.256', port: 8080 }],
    [v4, { address: '10.1.0.1', port: -1 }],
    [v4, { address: 'fd00::5', port: 8080 }],
    [v4, { address: 'fd00::5', port: 8080, forward: 'tunnel' }],
    [v6, { address: 'fd00::5', port: 8080, family: 'inet' }],
    [v4, { address: '10.1.0.1', port: 8080, forward: 'nat' as 'masq' }],
    [v4, { address: '10.1.0.1', port: 8080, forward: 'tunnel', tunnel: { type: 'gue', port: 5555, checksum: 'remcsum' } }],
    [v4, { address: '10.1.0.1', port: 8080, forward: 'tunnel', tunnel: { type: 'gue' } }],
    [v4, { address: '10.1.0.1', port: 8080, forward: 'tunnel', tunnel: { type: 'gre', checksum: 'remcsum' } }],
    [v4, { address: '10.1.0.1', port: 8080, forward: 'tunnel', tunnel: { type: 'ipip', checksum: 'csum' } }],
    [v4, { address: '10.1.0.1', port: 8080, forward: 'masq', tunnel: { type: 'gre' } }],
    [v4, { address: '10.1.0.1', port: 8080, forward: 'tunnel', tunnel: { type: 'gre', port: 1 } }],
  ];
  for (const [s, d] of dests) {
    const ts = ipvsDestinationProblem(d, ipvsServiceV6(s)) !== undefined;
    const op: IpvsOp = { op: 'addDestination', service: s, dest: d };
    const addon = addonRefuses(() => native().codec.ipvs.convertOps(packIpvsOps([op]), 0));
    assert.equal(ts, addon, `${JSON.stringify(d)} in ${JSON.stringify(s)}: TypeScript ${ts ? 'refuses' : 'takes'} it, the addon ${addon ? 'refuses' : 'takes'} it`);
  }
});

test('op-checks: ipset members and link addresses are refused exactly when the addon refuses them', () => {
  const members: Array<[string, 'inet' | 'inet6' | undefined, IpSetMember]> = [
    ['hash:ip', 'inet', { ip: '10.0.0.1' }],
    ['hash:ip', 'inet', { ip: '10.0.0.1/24' }],
    ['hash:ip', 'inet', { ip: '10.0.0.1', port: 80 }],
    ['hash:ip', 'inet', { ip: 'fd00::1' }],
    ['hash:ip', 'inet6', { ip: 'fd00::1' }],
    ['hash:net', 'inet', { ip: '10.0.0.0/8' }],
    ['hash:net', 'inet', { ip: '10.0.0.0', cidr: 8 }],
    ['hash:net', 'inet', { ip: '10.0.0.0/0' }],
    ['hash:net', 'inet', { ip: '10.0.0.0/33' }],
    ['hash:net', 'inet', { ip: '10.0.0.0/8', cidr: 8 }],
    ['hash:ip,port', 'inet', { ip: '10.0.0.1', proto: 'tcp', port: 80 }],
    ['hash:ip,port', 'inet', { ip: '10.0.0.1', port: 80 }],
    ['hash:ip,port', 'inet', { ip: '10.0.0.1' }],
    ['hash:ip,port', 'inet', { ip: '10.0.0.1', proto: 'icmp', port: 0 }],
    ['hash:ip,port', 'inet6', { ip: 'fd00::1', proto: 'icmp', port: 0 }],
    ['hash:ip,port', 'inet', { ip: '10.0.0.1', proto: 47, port: 1 }],
    ['hash:ip,port', 'inet', { ip: '10.0.0.1', proto: 'bogus' as 'tcp', port: 1 }],
    ['hash:ip,port', 'inet', { ip: '10.0.0.1', proto: 'tcp', port: 65536 }],
    ['hash:ip,port,ip', 'inet', { ip: '10.0.0.1', proto: 'tcp', port: 80, ip2: '10.0.0.2' }],
    ['hash:ip,port,ip', 'inet', { ip: '10.0.0.1', proto: 'tcp', port: 80 }],
    ['hash:ip,port,net', 'inet', { ip: '10.0.0.1', proto: 'tcp', port: 80, ip2: '10.0.0.0/16' }],
    ['hash:net,port', 'inet', { ip: '10.0.0.0/16', proto: 'udp', port: 53, nomatch: true }],
    ['hash:ip,port', 'inet', { ip: '10.0.0.1', proto: 'udp', port: 53, nomatch: true }],
    ['hash:ip', 'inet', { ip: '10.0.0.1', comment: 'ok' }],
    ['hash:ip', 'inet', { ip: '10.0.0.1', comment: 'not "ok"' }],
    ['hash:ip', 'inet', { ip: '10.0.0.1', timeout: 2147484 }],
    ['bitmap:port', undefined, { port: 80 }],
    ['bitmap:port', undefined, { port: 80, proto: 'tcp' }],
  ];
  for (const [type, family, m] of members) {
    const ts = ipsetMemberProblem({ type, family }, m) !== undefined;
    const addon = addonRefuses(() => native().codec.ipset.encodeOps([{ op: 'add', name: 'x', type, family, members: [m] }]));
    assert.equal(ts, addon, `${type} ${family}: ${JSON.stringify(m)}: TypeScript ${ts ? 'refuses' : 'takes'} it, the addon ${addon ? 'refuses' : 'takes'} it`);
  }
  for (const a of ['10.0.0.1', '10.0.0.1/32', '10.0.0.0/8', 'fd00::1', 'fd00::1/128', '10.0.0.1/33', 'fd00::1/129', '10.0.0.256', '10.0.0.1/', 'fe80::1%lo', '1.2.3', '::ffff:1.2.3.4']) {
    const ts = addressProblem('address', a) !== undefined;
    const addon = addonRefuses(() => native().codec.rtnl.encodeOps([{ op: 'addAddr', index: 1, address: a }]));
    assert.equal(ts, addon, `${a}: TypeScript ${ts ? 'refuses' : 'takes'} it, the addon ${addon ? 'refuses' : 'takes'} it`);
  }
});

// A campaign over the same checks: seeded mutants of valid objects (a field set to a value of
// the fields' own vocabularies, deleted, or another field added), each judged by both. The
// hand-picked cases above name the boundaries; this finds the combinations nobody listed.
const VOCABULARY: unknown[] = [
  null, true, false, -1, 0, 1, 1.5, 7, 8, 24, 32, 33, 64, 80, 128, 129, 255, 256, 65535, 65536, 2147483647, 2147483648, 2147484, 4294967295, 4294967296,
  '', ' ', 'tcp', 'udp', 'sctp', 'icmp', 'icmpv6', 'inet', 'inet6', 'rr', 'sh', 'mh', 'wlc', 'fifteen-chars-x', 'sixteen-chars-xx', 'sip', 'x'.repeat(300),
  'persistent', 'one-packet', 'sh-port', 'mh-port', 'masq', 'tunnel', 'route', 'local', 'gue', 'gre', 'ipip', 'csum', 'remcsum', 'nocsum',
  '10.0.0.1', '10.0.0.0', '10.0.0.256', '010.0.0.1', '10.0.0.1/24', '10.0.0.0/8', '10.0.0.0/0', '10.0.0.0/33', '255.255.255.0', '255.0.0.0',
  'fd00::1', 'fd00::/64', 'fd00::1/129', 'fe80::1%eth0', '::ffff:1.2.3.4', '1:2:3:4:5:6:7:8:9', 'ok', 'not "ok"',
  [], ['persistent'], ['sh-port'], ['bogus'], {}, { type: 'gue', port: 5555 }, { type: 'gre' },
];

function mutants<T extends object>(valid: readonly T[], fields: readonly string[], runs: number, seed: number): T[] {
  const rand = prng(seed);
  const pick = <U>(xs: readonly U[]): U => xs[Math.floor(rand() * xs.length)]!;
  const out: T[] = [];
  for (let i = 0; i < runs; i++) {
    const m = JSON.parse(JSON.stringify(pick(valid))) as Record<string, unknown>;
    for (let k = 1 + Math.floor(rand() * 2); k > 0; k--) {
      const f = pick(fields);
      if (rand() < 0.15) delete m[f];
      else m[f] = pick(VOCABULARY);
    }
    out.push(m as T);
  }
  return out;
}

test('op-checks: seeded mutants of services, destinations, members and addresses get the addon\'s verdict', () => {
  const disagree: string[] = [];
  const judge = (what: string, ts: boolean, addon: boolean) => {
    if (ts !== addon) disagree.push(`${what}: TypeScript ${ts ? 'refuses' : 'takes'} it, the addon ${addon ? 'refuses' : 'takes'} it`);
  };
  const services: ServiceConfig[] = [
    { protocol: 'tcp', address: '10.0.0.1', port: 80, scheduler: 'rr', flags: ['persistent'], timeout: 10, netmask: '255.255.255.0' },
    { protocol: 'udp', address: 'fd00::1', port: 53, netmask: 64, pe: 'sip' },
    { fwmark: 7, family: 'inet6' },
    { protocol: 'sctp', address: '10.0.0.1', port: 80, scheduler: 'sh', flags: ['sh-port'] },
  ];
  const sFields = ['protocol', 'address', 'port', 'fwmark', 'family', 'scheduler', 'flags', 'timeout', 'netmask', 'pe'];
  for (const s of mutants(services, sFields, 3000, 41)) {
    judge(JSON.stringify(s), ipvsServiceProblem(s) !== undefined, addonRefuses(() => native().codec.ipvs.convertOps(packIpvsOps([{ op: 'addService', service: s }]), 0)));
  }
  const dests: DestinationConfig[] = [
    { address: '10.1.0.1', port: 8080, forward: 'masq', weight: 0, upperThreshold: 5, lowerThreshold: 1 },
    { address: '10.1.0.1', port: 8080, forward: 'tunnel', tunnel: { type: 'gue', port: 5555, checksum: 'remcsum' } },
    { address: 'fd00::5', port: 8080, family: 'inet6' },
  ];
  const dFields = ['address', 'port', 'family', 'forward', 'weight', 'upperThreshold', 'lowerThreshold', 'tunnel'];
  for (const s of services.slice(0, 2)) {
    for (const d of mutants(dests, dFields, 1500, 42)) {
      const op: IpvsOp = { op: 'addDestination', service: s, dest: d };
      judge(`${JSON.stringify(d)} in ${JSON.stringify(s)}`, ipvsDestinationProblem(d, ipvsServiceV6(s)) !== undefined, addonRefuses(() => native().codec.ipvs.convertOps(packIpvsOps([op]), 0)));
    }
  }
  const sets: Array<{ type: string; family: 'inet' | 'inet6' | undefined; member: IpSetMember }> = [
    { type: 'hash:ip', family: 'inet', member: { ip: '10.0.0.1', comment: 'ok', timeout: 10 } },
    { type: 'hash:net', family: 'inet', member: { ip: '10.0.0.0', cidr: 8, nomatch: true } },
    { type: 'hash:ip,port', family: 'inet', member: { ip: '10.0.0.1', proto: 'tcp', port: 80 } },
    { type: 'hash:ip,port,ip', family: 'inet6', member: { ip: 'fd00::1', proto: 'udp', port: 53, ip2: 'fd00::2' } },
    { type: 'hash:ip,port,net', family: 'inet', member: { ip: '10.0.0.1', proto: 'tcp', port: 80, ip2: '10.0.0.0/16' } },
    { type: 'bitmap:port', family: undefined, member: { port: 80 } },
  ];
  const mFields = ['ip', 'cidr', 'proto', 'port', 'ip2', 'cidr2', 'nomatch', 'comment', 'timeout'];
  for (const [n, { type, family, member }] of sets.entries()) {
    for (const m of mutants([member], mFields, 800, 43 + n)) {
      judge(`${type} ${family}: ${JSON.stringify(m)}`, ipsetMemberProblem({ type, family }, m) !== undefined,
        addonRefuses(() => native().codec.ipset.encodeOps([{ op: 'add', name: 'x', type, family, members: [m] }])));
    }
  }
  for (const a of VOCABULARY) {
    judge(`address ${JSON.stringify(a)}`, addressProblem('address', a) !== undefined, addonRefuses(() => native().codec.rtnl.encodeOps([{ op: 'addAddr', index: 1, address: a as string }])));
  }
  assert.deepEqual(disagree.slice(0, 20), [], `${disagree.length} disagreements`);
});
