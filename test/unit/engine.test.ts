import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine, keyToId } from '../../src/engine/engine.js';
import { serviceKey, type DesiredService } from '../../src/engine/ipvs-model.js';
import { parseCidr, cidrContains } from '../../src/net/address.js';
import type { FlowFilter } from '../../src/kernel/conntrack.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { prng } from '../helpers/bytes.js';

function svc(address: string, port: number, dests: string[], protocol: 'tcp' | 'udp' = 'tcp'): DesiredService {
  return {
    protocol,
    address,
    port,
    scheduler: 'rr',
    destinations: dests.map((d) => ({ address: d, port: 8080, forward: 'masq' as const, weight: 1 })),
  };
}

function cluster(n: number, dests = 3): DesiredService[] {
  return Array.from({ length: n }, (_, i) => svc(`10.96.${i >> 8}.${i & 255}`, 80, Array.from({ length: dests }, (_, j) => `10.244.${j}.${(i % 250) + 1}`)));
}

test('first sync creates everything; a resync of unchanged state writes nothing and dumps once', async () => {
  const ipvs = new FakeIpvs();
  const e = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'] });
  const desired = { services: cluster(200) };
  const r1 = await e.sync(desired);
  assert.equal(r1.ipvs.ops.addService, 200);
  assert.equal(r1.ipvs.ops.addDestination, 600);
  assert.equal(r1.ipvs.writes, 800);
  assert.deepEqual(r1.errors, []);
  const dumps = ipvs.dumps;
  const writes = ipvs.writes;
  const r2 = await e.sync(desired);
  assert.equal(r2.ipvs.writes, 0);
  assert.equal(ipvs.writes, writes, 'zero write messages');
  assert.equal(ipvs.dumps - dumps, 1, 'one dump for the whole sync');
  assert.equal(ipvs.gets, 0, 'never a GET per service in a full sync');
});

test('ownership: foreign services and excluded CIDRs survive every sync; stale managed ones go', async () => {
  const ipvs = new FakeIpvs();
  await ipvs.apply([
    { op: 'addService', service: { protocol: 'tcp', address: '192.168.1.10', port: 22 } }, // foreign
    { op: 'addService', service: { protocol: 'tcp', address: '10.96.0.200', port: 80 } }, // stale, managed
    { op: 'addService', service: { protocol: 'tcp', address: '10.96.100.1', port: 80 } }, // excluded
    { op: 'addService', service: { fwmark: 5 } }, // foreign fwmark
    { op: 'addService', service: { fwmark: 0x4001 } }, // managed fwmark, stale
  ]);
  const e = new Engine(
    { ipvs },
    { managedCidrs: ['10.96.0.0/12'], excludeCidrs: ['10.96.100.0/24'], managedFwmarks: { min: 0x4000, max: 0x4fff } },
  );
  const r = await e.sync({ services: [svc('10.96.0.1', 80, ['10.244.0.1'])] });
  assert.equal(r.ipvs.ops.deleteService, 2);
  const left = (await ipvs.services()).map((s) => serviceKey(s)).sort();
  assert.deepEqual(left, ['inet|fwmark|5', 'inet|tcp|10.96.0.1|80', 'inet|tcp|10.96.100.1|80', 'inet|tcp|192.168.1.10|22']);
  // a service outside the managed CIDRs that the desired state names is managed all the same
  await e.sync({ services: [svc('10.96.0.1', 80, ['10.244.0.1']), svc('172.16.0.9', 443, [])] });
  await e.sync({ services: [svc('10.96.0.1', 80, ['10.244.0.1'])] });
  assert.ok(!(await ipvs.services()).some((s) => s.address === '172.16.0.9'), 'a VIP it once created is its own');
});

test('incremental: one changed service costs one GET and one or two writes, whatever the size', async () => {
  const ipvs = new FakeIpvs();
  const e = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'] });
  const desired = { services: cluster(2000) };
  await e.sync(desired);
  const changed = desired.services[1234]!;
  changed.destinations = [...changed.destinations.slice(1), { address: '10.244.9.9', port: 8080, forward: 'masq', weight: 1 }];
  const dumps = ipvs.dumps;
  const writes = ipvs.writes;
  const r = await e.sync(desired, new Set([serviceKey(changed)]));
  assert.equal(r.mode, 'incremental');
  assert.equal(ipvs.dumps, dumps, 'no dump');
  assert.equal(ipvs.gets, 1, 'one GET for the one changed service');
  assert.equal(ipvs.writes - writes, 2);
  assert.deepEqual(r.ipvs.ops, { addDestination: 1, deleteDestination: 1 });
  // a full sync afterwards finds nothing left to do
  assert.equal((await e.sync(desired)).ipvs.writes, 0);
});

test('incremental: a deleted service is removed when named in the change set', async () => {
  const ipvs = new FakeIpvs();
  const e = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'] });
  const desired = { services: cluster(10) };
  await e.sync(desired);
  const gone = desired.services.pop()!;
  const r = await e.sync(desired, new Set([serviceKey(gone)]));
  assert.deepEqual(r.ipvs.ops, { deleteService: 1 });
  assert.equal((await ipvs.services()).length, 9);
});

test('a failed op is reported, the rest converges, and the next sync retries it', async () => {
  const ipvs = new FakeIpvs();
  const e = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'] });
  const desired = { services: cluster(5, 2) }; // ops: 5 addService, then 10 addDestination
  ipvs.failNext = { index: 7, code: 'EEXIST' };
  const r1 = await e.sync(desired);
  assert.equal(r1.errors.length, 1);
  assert.equal(r1.errors[0]!.index, 7);
  assert.equal(r1.errors[0]!.code, 'EEXIST');
  assert.equal(r1.ipvs.writes, 14, 'every other op applied');
  const r2 = await e.sync(desired);
  assert.deepEqual(r2.ipvs.ops, { addDestination: 1 }, 'the one failed op, retried');
  assert.deepEqual(r2.errors, []);
  assert.equal((await e.sync(desired)).ipvs.writes, 0);
});

test('a failed service add fails its destinations too (ESRCH), and all of it converges next time', async () => {
  const ipvs = new FakeIpvs();
  const e = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'] });
  const desired = { services: cluster(5, 2) };
  ipvs.failNext = { index: 3, code: 'EEXIST' };
  const r1 = await e.sync(desired);
  assert.deepEqual(
    r1.errors.map((x) => [x.index, x.code]),
    [
      [3, 'EEXIST'],
      [11, 'ESRCH'],
      [12, 'ESRCH'],
    ],
  );
  const r2 = await e.sync(desired);
  assert.deepEqual(r2.ipvs.ops, { addService: 1, addDestination: 2 });
  assert.equal((await e.sync(desired)).ipvs.writes, 0);
});

test('a crash in the middle of an apply, then a restart, converges with no duplicate or leftover', async () => {
  const ipvs = new FakeIpvs();
  const desiredA = { services: cluster(50) };
  await new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'] }).sync(desiredA);
  const desiredB = { services: cluster(80).slice(20) }; // 20 removed, 30 added, 30 kept
  ipvs.crashAfter = 40;
  await assert.rejects(new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'] }).sync(desiredB), /simulated crash/);
  const restarted = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'] });
  const r = await restarted.sync(desiredB);
  assert.deepEqual(r.errors, [], 'no EEXIST: the diff starts from what the kernel has');
  const keys = (await ipvs.services({ withDestinations: true })).map((s) => `${serviceKey(s)} ${s.destinations!.length}`).sort();
  assert.deepEqual(keys, desiredB.services.map((s) => `${serviceKey(s)} 3`).sort());
  assert.equal((await restarted.sync(desiredB)).ipvs.writes, 0);
});

test('removed UDP destinations: deleted at once and their flows flushed', async () => {
  const ipvs = new FakeIpvs();
  const flushed: FlowFilter[] = [];
  const conntrack = {
    list: async () => [],
    count: async () => 0,
    delete: async (f: FlowFilter) => (flushed.push(f), { matched: 2, deleted: 2, gone: 0, errors: [], sendmsgCalls: 1 }),
  };
  const e = new Engine({ ipvs, conntrack }, { managedCidrs: ['10.96.0.0/12'] });
  await e.sync({ services: [svc('10.96.0.10', 53, ['10.244.0.5', '10.244.0.6'], 'udp')] });
  const r = await e.sync({ services: [svc('10.96.0.10', 53, ['10.244.0.5'], 'udp')] });
  assert.deepEqual(r.ipvs.ops, { deleteDestination: 1 });
  assert.equal(r.flowsFlushed, 2);
  assert.deepEqual(flushed, [
    { family: 'inet', proto: 'udp', origDst: '10.96.0.10', origDport: 53, replySrc: '10.244.0.6', replySport: 8080 },
  ]);
});

test('a flush of stale flows that fails is tried again by the next sync, though its diff no longer sees the destination go', async () => {
  const ipvs = new FakeIpvs();
  const calls: FlowFilter[] = [];
  let fail = true;
  const conntrack = {
    list: async () => [],
    count: async () => 0,
    delete: async (f: FlowFilter) => {
      calls.push(f);
      if (fail) throw Object.assign(new Error('conntrack delete: ENOBUFS'), { errno: 105 });
      return { matched: 1, deleted: 1, gone: 0, errors: [], sendmsgCalls: 1 };
    },
  };
  const e = new Engine({ ipvs, conntrack }, { managedCidrs: ['10.96.0.0/12'] });
  const one = { services: [svc('10.96.0.10', 53, ['10.244.0.5'], 'udp')] };
  await e.sync({ services: [svc('10.96.0.10', 53, ['10.244.0.5', '10.244.0.6'], 'udp')] });
  const r = await e.sync(one);
  assert.equal(r.errors.length, 1, 'the failed delete is the sync\'s error');
  fail = false;
  const retry = await e.sync(one);
  assert.deepEqual(retry.ipvs.ops, {}, 'nothing left to write');
  assert.deepEqual(retry.errors, []);
  assert.equal(retry.flowsFlushed, 1);
  const stale = { family: 'inet', proto: 'udp', origDst: '10.96.0.10', origDport: 53, replySrc: '10.244.0.6', replySport: 8080 };
  assert.deepEqual(calls, [stale, stale]);
  assert.equal((await e.sync(one)).flowsFlushed, 0, 'and once deleted, never again');
  assert.equal(calls.length, 2);
});

test('graceful termination through the engine: drain, keep draining across syncs, delete when idle', async () => {
  const ipvs = new FakeIpvs();
  let now = 0;
  const e = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'], drainTimeoutMs: 1000, now: () => now });
  await e.sync({ services: [svc('10.96.0.1', 80, ['10.244.0.1', '10.244.0.2'])] });
  ipvs.setConnections({ protocol: 'tcp', address: '10.96.0.1', port: 80 }, { address: '10.244.0.2', port: 8080 }, 1);
  const d1 = await e.sync({ services: [svc('10.96.0.1', 80, ['10.244.0.1'])] });
  assert.deepEqual(d1.ipvs.ops, { updateDestination: 1 });
  assert.equal(d1.draining, 1);
  now = 500;
  assert.equal((await e.sync({ services: [svc('10.96.0.1', 80, ['10.244.0.1'])] })).ipvs.writes, 0);
  now = 1000;
  const d3 = await e.sync({ services: [svc('10.96.0.1', 80, ['10.244.0.1'])] });
  assert.deepEqual(d3.ipvs.ops, { deleteDestination: 1 }, 'the drain timeout passed');
  assert.equal(d3.draining, 0);
});

test('cidr helpers', () => {
  assert.ok(cidrContains(parseCidr('10.96.0.0/12'), '10.111.255.1'));
  assert.ok(!cidrContains(parseCidr('10.96.0.0/12'), '10.112.0.1'));
  assert.ok(cidrContains(parseCidr('fd00:10::/108'), 'fd00:10::f:1'));
  assert.ok(!cidrContains(parseCidr('fd00:10::/108'), 'fd00:10::10:1'));
  assert.ok(cidrContains(parseCidr('::ffff:10.0.0.0/104'), '::ffff:10.1.2.3'));
  assert.ok(!cidrContains(parseCidr('10.0.0.0/8'), 'fd00::1'));
  assert.ok(cidrContains(parseCidr('0.0.0.0/0'), '1.2.3.4'));
  assert.throws(() => parseCidr('10.0.0.0/33'), RangeError);
  assert.throws(() => parseCidr('nope'), RangeError);
  assert.deepEqual(keyToId('inet6|udp|fd00::1|53'), { family: 'inet6', protocol: 'udp', address: 'fd00::1', port: 53 });
  assert.deepEqual(keyToId('inet|fwmark|7'), { family: 'inet', fwmark: 7 });
});

test('CIDR membership: IPv4 as 32-bit numbers equals the BigInt arithmetic, for any prefix; other text is never inside', () => {
  const r = prng(21);
  const dotted = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
  for (let i = 0; i < 3000; i++) {
    const bits = Math.floor(r() * 33);
    const net = Math.floor(r() * 2 ** 32) >>> 0;
    const c = parseCidr(`${dotted(net)}/${bits}`);
    // an address near the network (often inside) or anywhere
    const a = r() < 0.5 ? (net ^ Math.floor(r() * 2 ** Math.max(0, 33 - bits))) >>> 0 : Math.floor(r() * 2 ** 32) >>> 0;
    const shift = BigInt(32 - bits);
    const want = (BigInt(a) >> shift) << shift === (BigInt(net) >> shift) << shift;
    assert.equal(cidrContains(c, dotted(a)), want, `${dotted(a)} in ${dotted(net)}/${bits}`);
  }
  const c = parseCidr('10.96.0.0/12');
  assert.equal(cidrContains(c, '10.96.0.1'), true);
  assert.equal(cidrContains(c, '10.111.255.255'), true);
  assert.equal(cidrContains(c, '10.112.0.0'), false);
  for (const x of ['010.96.0.1', '10.96.0', '10.96.0.1.1', '10.96.0.256', 'fd00::1', '::ffff:10.96.0.1', '', 'x']) assert.equal(cidrContains(c, x), false, x);
  assert.equal(cidrContains(parseCidr('0.0.0.0/0'), '255.255.255.255'), true);
  assert.equal(cidrContains(parseCidr('fd00::/8'), 'fd12::1'), true);
  assert.equal(cidrContains(parseCidr('fd00::/8'), '10.0.0.1'), false);
});

test('incremental plans find the changed services by key as a filter over every service does (random patched lists)', async () => {
  const r = prng(33);
  for (let round = 0; round < 20; round++) {
    const a = { ipvs: new FakeIpvs(), e: undefined as unknown as Engine };
    const b = { ipvs: new FakeIpvs(), e: undefined as unknown as Engine };
    a.e = new Engine({ ipvs: a.ipvs }, { managedCidrs: ['10.96.0.0/12'] });
    b.e = new Engine({ ipvs: b.ipvs }, { managedCidrs: ['10.96.0.0/12'] });
    let list = cluster(40 + Math.floor(r() * 40));
    await a.e.sync({ services: list });
    await b.e.sync({ services: structuredClone(list) });
    for (let step = 0; step < 15; step++) {
      // as a patched model: a new list with some services swapped for new objects of the same
      // key, now and then one moved, added or removed; `changed` may name keys not in the list
      const next = list.slice();
      const changed = new Set<string>();
      for (let c = 1 + Math.floor(r() * 3); c > 0; c--) {
        const i = Math.floor(r() * next.length);
        const what = r();
        if (what < 0.6) next[i] = svc((next[i] as { address: string }).address, 80, [`10.250.${step}.${c}`, '10.244.0.1']);
        else if (what < 0.75) next.push(svc(`10.97.${round}.${step * 4 + c}`, 80, ['10.244.9.9']));
        else if (what < 0.85) next.splice(i, 1);
        else if (what < 0.95) next.unshift(...next.splice(i, 1));
        else changed.add('inet|tcp|10.99.0.1|80');
        changed.add(serviceKey(next[Math.min(i, next.length - 1)]!));
        if (what >= 0.75 && what < 0.85) changed.add(serviceKey(list[i]!)); // the removed one
      }
      list = next;
      const pa = await a.e.plan({ services: list }, changed);
      const pb = await b.e.plan({ services: structuredClone(list) }, changed);
      assert.deepStrictEqual(pa.ipvs.ops, pb.ipvs.ops, `round ${round} step ${step}`);
      await a.e.apply(pa);
      await b.e.apply(pb);
    }
    assert.deepStrictEqual(await a.ipvs.services({ withDestinations: true }), await b.ipvs.services({ withDestinations: true }));
  }
});

test('a full plan reads destinations a slice of services at a time and plans what a read of the whole table plans', async () => {
  const r = prng(44);
  for (let round = 0; round < 25; round++) {
    // the same kernel state on two doubles: one read a slice at a time (destinationsOf), one
    // only as a whole (a handle without destinationsOf)
    const sliced = new FakeIpvs();
    const whole = new FakeIpvs();
    const wholeApi = new Proxy(whole, { get: (t, p) => (p === 'destinationsOf' ? undefined : Reflect.get(t, p, t)) }) as FakeIpvs;
    const now = () => 1000;
    const a = new Engine({ ipvs: sliced }, { managedCidrs: ['10.96.0.0/12'], observeSlice: 1 + Math.floor(r() * 9), now });
    const b = new Engine({ ipvs: wholeApi }, { managedCidrs: ['10.96.0.0/12'], now });
    const start = cluster(10 + Math.floor(r() * 30), 1 + Math.floor(r() * 4));
    // foreign and stale services, a busy destination to drain
    const extra = [svc('192.0.2.1', 80, ['10.244.7.7']), svc('10.96.200.1', 80, ['10.244.8.8'])];
    for (const e of [a, b]) await e.sync({ services: [...start, ...extra] });
    for (const k of [sliced, whole]) k.setConnections({ protocol: 'tcp', address: '10.96.0.1', port: 80 }, { address: '10.244.0.2', port: 8080 }, 2, 0);
    // the next desired state: some services changed, some gone, some new
    const next = start
      .filter(() => r() < 0.8)
      .map((s) => (r() < 0.3 ? svc((s as { address: string }).address, 80, ['10.244.9.1', '10.244.9.2']) : s));
    next.push(...cluster(3).map((s, i) => svc(`10.97.${round}.${i + 1}`, 80, ['10.244.5.5'])));
    const pa = await a.plan({ services: next });
    const pb = await b.plan({ services: structuredClone(next) });
    assert.deepStrictEqual(pa.ipvs, pb.ipvs, `round ${round}`);
    assert.ok(pa.ipvs.ops.length > 0);
  }
});

test('a full plan never reads the whole table with its destinations when the handle reads slices', async () => {
  const ipvs = new FakeIpvs();
  const e = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'], observeSlice: 16 });
  await e.sync({ services: cluster(100) });
  const seen: number[] = [];
  const services = ipvs.services.bind(ipvs);
  const destinationsOf = ipvs.destinationsOf.bind(ipvs);
  let withDests = 0;
  ipvs.services = async (o) => ((withDests += o?.withDestinations ? 1 : 0), services(o));
  ipvs.destinationsOf = async (ids) => (seen.push(ids.length), destinationsOf(ids));
  const r = await e.sync({ services: cluster(100) });
  assert.equal(r.ipvs.writes, 0);
  assert.equal(withDests, 0, 'no services({ withDestinations: true })');
  assert.deepEqual(seen, [16, 16, 16, 16, 16, 16, 4], 'every service read once, 16 at a time');
});
