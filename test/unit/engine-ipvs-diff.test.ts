import { test } from 'node:test';
import assert from 'node:assert/strict';
import { diffIpvs, drainKey, type IpvsDelta } from '../../src/engine/ipvs-diff.js';
import { destKey, serviceKey, type DesiredService } from '../../src/engine/ipvs-model.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import type { IpvsOp, Service } from '../../src/kernel/ipvs.js';
import { prng } from '../helpers/bytes.js';

const owned = () => true;

/** The destination weight an op sets, or null. */
function weightOf(o: IpvsOp): number | null {
  return 'dest' in o && 'weight' in o.dest ? (o.dest.weight ?? null) : null;
}

function addressOf(s: DesiredService): string {
  return (s as { address: string }).address;
}

function svc(address: string, port: number, dests: Array<[string, number, number?]>, extra: Partial<DesiredService> = {}): DesiredService {
  return {
    protocol: 'tcp',
    address,
    port,
    scheduler: 'rr',
    ...extra,
    destinations: dests.map(([a, p, w]) => ({ address: a, port: p, forward: 'masq' as const, weight: w ?? 1 })),
  } as DesiredService;
}

async function sync(k: FakeIpvs, desired: DesiredService[], state: { draining: Map<string, number>; now: number }, owns: (s: Service) => boolean = owned): Promise<IpvsDelta> {
  const observed = await k.services({ withDestinations: true });
  const d = diffIpvs({ desired, observed, owns, draining: state.draining, now: state.now, drainTimeoutMs: 60000 });
  const r = await k.apply(d.ops);
  assert.ok(r.ok, `apply failed: ${r.errors.map((e) => e.message).join(', ')}`);
  state.draining = d.draining;
  return d;
}

test('empty -> desired: services are created before their destinations', async () => {
  const k = new FakeIpvs();
  const d = await sync(k, [svc('10.0.0.1', 80, [['10.1.0.1', 8080], ['10.1.0.2', 8080]])], { draining: new Map(), now: 0 });
  assert.deepEqual(d.ops.map((o) => o.op), ['addService', 'addDestination', 'addDestination']);
});

test('unchanged kernel state -> zero ops', async () => {
  const k = new FakeIpvs();
  const desired = [svc('10.0.0.1', 80, [['10.1.0.1', 8080]]), svc('fd00::1', 443, [['fd00:1::5', 8443]], { flags: ['persistent'], timeout: 10800 })];
  const st = { draining: new Map<string, number>(), now: 0 };
  await sync(k, desired, st);
  const again = await sync(k, desired, st);
  assert.deepEqual(again.ops, []);
});

test('non-canonical IPv6 text and left-out defaults compare equal to what the kernel reports', async () => {
  const k = new FakeIpvs();
  const st = { draining: new Map<string, number>(), now: 0 };
  await sync(k, [svc('fd00::1', 80, [['fd00:1::5', 80]])], st);
  const d = await sync(k, [svc('fd00:0:0::1', 80, [['fd00:1:0:0::5', 80]])], st);
  assert.deepEqual(d.ops, []);
  // defaults: scheduler wlc, no flags, timeout 0, forward droute, weight 1
  const k2 = new FakeIpvs();
  const bare = [{ protocol: 'tcp', address: '10.0.0.9', port: 53, destinations: [{ address: '10.1.0.9', port: 53 }] } as DesiredService];
  await sync(k2, bare, st);
  assert.deepEqual((await sync(k2, bare, st)).ops, []);
});

test('one endpoint changed among 1000 services -> two ops, whatever the size', async () => {
  const k = new FakeIpvs();
  const st = { draining: new Map<string, number>(), now: 0 };
  const desired = Array.from({ length: 1000 }, (_, i) => svc(`10.0.${i >> 8}.${i & 255}`, 80, [['10.1.0.1', 80], ['10.1.0.2', 80]]));
  await sync(k, desired, st);
  desired[500] = svc(addressOf(desired[500]!), 80, [['10.1.0.1', 80], ['10.1.0.3', 80]]);
  const d = await sync(k, desired, st);
  assert.deepEqual(
    d.ops.map((o) => [o.op, 'dest' in o ? o.dest.address : '']),
    [
      ['addDestination', '10.1.0.3'],
      ['deleteDestination', '10.1.0.2'], // idle: nothing to drain
    ],
  );
});

test('options change in place: SET_SERVICE for the scheduler, SET_DEST for the weight', async () => {
  const k = new FakeIpvs();
  const st = { draining: new Map<string, number>(), now: 0 };
  await sync(k, [svc('10.0.0.1', 80, [['10.1.0.1', 80]])], st);
  const d = await sync(k, [svc('10.0.0.1', 80, [['10.1.0.1', 80, 5]], { scheduler: 'wrr' })], st);
  assert.deepEqual(d.ops.map((o) => o.op), ['updateService', 'updateDestination']);
  const s = (await k.services({ withDestinations: true }))[0]!;
  assert.equal(s.scheduler, 'wrr');
  assert.equal(s.destinations![0]!.weight, 5);
});

test('foreign services survive; owned stale ones are deleted', async () => {
  const k = new FakeIpvs();
  await k.apply([
    { op: 'addService', service: { protocol: 'tcp', address: '192.168.99.1', port: 22 } },
    { op: 'addService', service: { protocol: 'tcp', address: '10.0.0.7', port: 80 } },
  ]);
  const owns = (s: Service) => (s.address ?? '').startsWith('10.');
  const d = await sync(k, [svc('10.0.0.1', 80, [])], { draining: new Map(), now: 0 }, owns);
  assert.deepEqual(d.ops.map((o) => [o.op, 'service' in o && o.service && 'address' in o.service ? o.service.address : '']), [
    ['addService', '10.0.0.1'],
    ['deleteService', '10.0.0.7'],
  ]);
  const left = (await k.services()).map((s) => s.address).sort();
  assert.deepEqual(left, ['10.0.0.1', '192.168.99.1']);
});

test('graceful termination: a TCP destination with connections drains, then goes when idle', async () => {
  const k = new FakeIpvs();
  const st = { draining: new Map<string, number>(), now: 0 };
  const id = { protocol: 'tcp' as const, address: '10.0.0.1', port: 80 };
  await sync(k, [svc('10.0.0.1', 80, [['10.1.0.1', 80], ['10.1.0.2', 80]])], st);
  k.setConnections(id, { address: '10.1.0.2', port: 80 }, 3, 1);
  st.now = 1000;
  const d1 = await sync(k, [svc('10.0.0.1', 80, [['10.1.0.1', 80]])], st);
  assert.deepEqual(d1.ops.map((o) => [o.op, weightOf(o)]), [['updateDestination', 0]]);
  assert.equal(st.draining.get(drainKey(serviceKey(id), destKey({ address: '10.1.0.2', port: 80 }))), 1000);
  // still busy: nothing to do
  st.now = 2000;
  assert.deepEqual((await sync(k, [svc('10.0.0.1', 80, [['10.1.0.1', 80]])], st)).ops, []);
  // connections gone: deleted
  k.setConnections(id, { address: '10.1.0.2', port: 80 }, 0, 0);
  const d3 = await sync(k, [svc('10.0.0.1', 80, [['10.1.0.1', 80]])], st);
  assert.deepEqual(d3.ops.map((o) => o.op), ['deleteDestination']);
  assert.equal(st.draining.size, 0);
});

test('graceful termination: the drain timeout deletes a destination that keeps connections', async () => {
  const k = new FakeIpvs();
  const st = { draining: new Map<string, number>(), now: 0 };
  const id = { protocol: 'tcp' as const, address: '10.0.0.1', port: 80 };
  await sync(k, [svc('10.0.0.1', 80, [['10.1.0.2', 80]])], st);
  k.setConnections(id, { address: '10.1.0.2', port: 80 }, 1);
  await sync(k, [svc('10.0.0.1', 80, [])], st);
  st.now = 59999;
  assert.deepEqual((await sync(k, [svc('10.0.0.1', 80, [])], st)).ops, []);
  st.now = 60000;
  assert.deepEqual((await sync(k, [svc('10.0.0.1', 80, [])], st)).ops.map((o) => o.op), ['deleteDestination']);
});

test('a draining destination that comes back returns to its weight; so does one left at 0 by a previous run', async () => {
  const k = new FakeIpvs();
  const st = { draining: new Map<string, number>(), now: 0 };
  const id = { protocol: 'tcp' as const, address: '10.0.0.1', port: 80 };
  await sync(k, [svc('10.0.0.1', 80, [['10.1.0.2', 80, 3]])], st);
  k.setConnections(id, { address: '10.1.0.2', port: 80 }, 2);
  await sync(k, [svc('10.0.0.1', 80, [])], st);
  assert.equal((await k.destinations(id))[0]!.weight, 0);
  const back = await sync(k, [svc('10.0.0.1', 80, [['10.1.0.2', 80, 3]])], st);
  assert.deepEqual(back.ops.map((o) => [o.op, weightOf(o)]), [['updateDestination', 3]]);
  assert.equal(st.draining.size, 0);
  // A restart forgets the drain map; weight 0 in the kernel is restored all the same.
  await k.apply([{ op: 'updateDestination', service: id, dest: { address: '10.1.0.2', port: 80, forward: 'masq', weight: 0 } }]);
  const fresh = { draining: new Map<string, number>(), now: 0 };
  const restored = await sync(k, [svc('10.0.0.1', 80, [['10.1.0.2', 80, 3]])], fresh);
  assert.deepEqual(restored.ops.map((o) => [o.op, weightOf(o)]), [['updateDestination', 3]]);
});

test('UDP and SCTP destinations are deleted at once and their flows marked for flushing', async () => {
  const k = new FakeIpvs();
  const st = { draining: new Map<string, number>(), now: 0 };
  const udp = svc('10.0.0.53', 53, [['10.1.0.1', 53], ['10.1.0.2', 53]], { protocol: 'udp' } as Partial<DesiredService>);
  await sync(k, [udp], st);
  k.setConnections({ protocol: 'udp', address: '10.0.0.53', port: 53 }, { address: '10.1.0.2', port: 53 }, 0, 9);
  const d = await sync(k, [svc('10.0.0.53', 53, [['10.1.0.1', 53]], { protocol: 'udp' } as Partial<DesiredService>)], st);
  assert.deepEqual(d.ops.map((o) => o.op), ['deleteDestination']);
  assert.deepEqual(d.flushFlows, [
    { protocol: 'udp', family: 'inet', service: { address: '10.0.0.53', port: 53 }, dest: { address: '10.1.0.2', port: 53 } },
  ]);
});

// --- property: random A then B ---------------------------------------------------------------

function randomState(rand: () => number): DesiredService[] {
  const out = new Map<string, DesiredService>();
  const n = Math.floor(rand() * 40);
  for (let i = 0; i < n; i++) {
    const v6 = rand() < 0.3;
    const proto = (['tcp', 'udp', 'sctp'] as const)[Math.floor(rand() * 3)]!;
    const address = v6 ? `fd00::${1 + Math.floor(rand() * 20)}` : `10.0.0.${1 + Math.floor(rand() * 20)}`;
    const port = [80, 443, 53][Math.floor(rand() * 3)]!;
    const dests = new Map<string, [string, number, number]>();
    const m = Math.floor(rand() * 6);
    for (let j = 0; j < m; j++) {
      const a = v6 ? `fd00:1::${1 + Math.floor(rand() * 8)}` : `10.1.0.${1 + Math.floor(rand() * 8)}`;
      dests.set(a, [a, 8080, 1 + Math.floor(rand() * 3)]);
    }
    const s = svc(address, port, [...dests.values()], {
      protocol: proto,
      scheduler: rand() < 0.5 ? 'rr' : 'wrr',
      ...(rand() < 0.2 ? { flags: ['persistent'], timeout: 10800 } : {}),
    } as Partial<DesiredService>);
    out.set(serviceKey(s), s);
  }
  return [...out.values()];
}

/** The size of the difference, counted naively and independently of diffIpvs. */
function differenceSize(a: DesiredService[], b: DesiredService[]): number {
  const am = new Map(a.map((s) => [serviceKey(s), s]));
  const bm = new Map(b.map((s) => [serviceKey(s), s]));
  let n = 0;
  for (const [k, s] of bm) {
    const old = am.get(k);
    if (!old) {
      n += 1 + s.destinations.length;
      continue;
    }
    if (old.scheduler !== s.scheduler || JSON.stringify(old.flags ?? []) !== JSON.stringify(s.flags ?? []) || (old.timeout ?? 0) !== (s.timeout ?? 0)) n++;
    const od = new Map(old.destinations.map((d) => [d.address, d]));
    const nd = new Map(s.destinations.map((d) => [d.address, d]));
    for (const [addr, d] of nd) {
      const o = od.get(addr);
      if (!o) n++;
      else if (o.weight !== d.weight) n++;
    }
    for (const addr of od.keys()) if (!nd.has(addr)) n++;
  }
  for (const k of am.keys()) if (!bm.has(k)) n++;
  return n;
}

function snapshot(services: Service[]): string[] {
  return services
    .flatMap((s) => [
      `${serviceKey(s)} ${s.scheduler} ${s.flags.join(',')} ${s.timeout}`,
      ...(s.destinations ?? []).map((d) => `${serviceKey(s)} -> ${destKey(d)} w${d.weight} ${d.forward}`),
    ])
    .sort();
}

test('property: after syncing A then B the kernel equals B and the writes equal the difference (300 seeds)', async () => {
  for (let seed = 1; seed <= 300; seed++) {
    const rand = prng(seed);
    const a = randomState(rand);
    const b = randomState(rand);
    const k = new FakeIpvs();
    const st = { draining: new Map<string, number>(), now: 0 };
    await sync(k, a, st);
    const expectK = new FakeIpvs();
    await sync(expectK, b, { draining: new Map(), now: 0 });
    const before = k.writes;
    await sync(k, b, st);
    assert.deepEqual(snapshot(await k.services({ withDestinations: true })), snapshot(await expectK.services({ withDestinations: true })), `seed ${seed}`);
    assert.equal(k.writes - before, differenceSize(a, b), `seed ${seed}: writes`);
    assert.deepEqual((await sync(k, b, st)).ops, [], `seed ${seed}: resync is a no-op`);
  }
});

test('ops hold canonical desired services and destinations themselves; a non-canonical address is a copy with the canonical text', () => {
  const canonical = svc('10.0.0.1', 80, [['10.1.0.1', 8080], ['10.1.0.2', 8080]]);
  const v6 = svc('fd00:0:0::1', 80, [['fd00:1:0:0::5', 80], ['fd00:1::6', 80]]);
  const shared = diffIpvs({ desired: [canonical, v6], observed: [], owns: owned, draining: new Map<string, number>(), now: 0, drainTimeoutMs: 1 });
  const svcOf = (d: IpvsDelta, i: number) => (d.ops[i] as unknown as { service: DesiredService }).service;
  const destOf = (d: IpvsDelta, i: number) => (d.ops[i] as unknown as { dest: unknown }).dest;
  // ops: addService x2, then the destinations in desired order
  assert.equal(svcOf(shared, 0), canonical);
  assert.equal(destOf(shared, 2), canonical.destinations[0]);
  assert.equal(destOf(shared, 3), canonical.destinations[1]);
  // a non-canonical address is never shared: the op carries the canonical text
  assert.notEqual(svcOf(shared, 1), v6);
  assert.equal(addressOf(svcOf(shared, 1)), 'fd00::1');
  assert.notEqual(destOf(shared, 4), v6.destinations[0]);
  assert.deepEqual(destOf(shared, 4), { ...v6.destinations[0], address: 'fd00:1::5' });
  assert.equal(destOf(shared, 5), v6.destinations[1]);
});

test('destination lists matched pairwise (short) and by key (long) give the same delta (200 seeds)', async () => {
  /** Up to 40 destinations, some listed twice, some IPv6 spelled two ways. */
  const state = (rand: () => number): DesiredService[] =>
    Array.from({ length: 1 + Math.floor(rand() * 6) }, (_, i) => {
      const v6 = rand() < 0.4;
      const dests: Array<[string, number, number]> = [];
      for (let j = Math.floor(rand() * 40); j > 0; j--) {
        const n = 1 + Math.floor(rand() * 30);
        const a = v6 ? (rand() < 0.5 ? `fd00:1::${n.toString(16)}` : `fd00:1:0:0::${n.toString(16)}`) : `10.1.0.${n}`;
        dests.push([a, rand() < 0.8 ? 8080 : 9090, 1 + Math.floor(rand() * 2)]);
      }
      return svc(v6 ? `fd00::${i + 1}` : `10.0.0.${i + 1}`, 80, dests, { protocol: rand() < 0.7 ? 'tcp' : 'udp' } as Partial<DesiredService>);
    });
  let long = 0;
  for (let seed = 1; seed <= 200; seed++) {
    const rand = prng(seed);
    const k = new FakeIpvs();
    // the kernel state: A, de-duplicated as a diff from empty writes it, some destinations busy
    const a = state(rand);
    const first = diffIpvs({ desired: a, observed: [], owns: owned, draining: new Map(), now: 0, drainTimeoutMs: 1000 });
    assert.ok((await k.apply(first.ops)).ok);
    for (const s of a)
      for (const d of s.destinations) if (rand() < 0.2) k.setConnections(s as never, d, 1, 0);
    const observed = await k.services({ withDestinations: true });
    const b = state(rand);
    long += b.filter((s) => s.destinations.length > 16).length;
    const draining = new Map<string, number>();
    const input = { desired: b, observed, owns: owned, draining, now: 5000, drainTimeoutMs: 1000 };
    const keyed = diffIpvs({ ...input, pairwiseMax: 0 });
    assert.deepStrictEqual(diffIpvs(input), keyed, `seed ${seed}`);
    assert.deepStrictEqual(diffIpvs({ ...input, pairwiseMax: 1000 }), keyed, `seed ${seed}`);
  }
  assert.ok(long > 50, `lists longer than the pairwise bound: ${long}`);
});
