// Time slicing: the sliced drivers compute exactly what the synchronous ones compute, and they
// let the event loop in (an immediate or a timer queued before a long computation runs before
// it ends) — for translate, the desired state, the diffs and a whole proxier sync.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { Engine, IPVS_APPLY_CHUNK } from '../../src/engine/engine.js';
import { runSliced, runSync, TimeSlice, type Steps } from '../../src/engine/slice.js';
import { desiredState, desiredStateSliced } from '../../src/proxy/desired.js';
import { Proxier } from '../../src/proxy/proxier.js';
import { TranslateCache, translate, translateSliced } from '../../src/kube/translate.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { FakeLinks, FakeNftables } from '../../src/testing/fake-kernel.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const NODE = { name: 'node-a', addresses: ['10.0.0.11'] };
const CONFIG = { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] };

function cluster(n: number): { services: V1Service[]; endpointSlices: V1EndpointSlice[] } {
  const services: V1Service[] = [];
  const endpointSlices: V1EndpointSlice[] = [];
  for (let i = 0; i < n; i++) {
    services.push(svc(`s${i}`, { type: i % 3 === 0 ? 'NodePort' : 'ClusterIP', clusterIP: `10.96.${i >> 8}.${i & 255}`, ports: [{ name: 'http', port: 80, protocol: 'TCP', ...(i % 3 === 0 ? { nodePort: 30000 + i } : {}) }] }));
    endpointSlices.push(slice(`s${i}`, `s${i}-0`, [{ name: 'http', port: 8080 }], [0, 1, 2].map((j) => ({ ip: `10.244.${i >> 8}.${(i & 63) * 4 + j}`, node: j === 0 ? 'node-a' : 'node-b' }))));
  }
  return { services, endpointSlices };
}

/** Whether a macrotask queued now runs before `work` settles. */
async function letsLoopIn<T>(work: () => Promise<T>): Promise<{ value: T; ranBefore: boolean }> {
  let ran = false;
  setImmediate(() => (ran = true));
  const p = work();
  let ranBefore = false;
  const value = await p.then((v) => ((ranBefore = ran), v));
  return { value, ranBefore };
}

test('runSliced: the same result as runSync; with a 0 ms slice it yields at every step and the loop gets in', async () => {
  function* steps(n: number): Steps<number> {
    let sum = 0;
    for (let i = 0; i < n; i++) {
      sum += i;
      yield;
    }
    return sum;
  }
  assert.equal(runSync(steps(100)), 4950);
  const slice = new TimeSlice(0);
  const { value, ranBefore } = await letsLoopIn(() => runSliced(steps(100), slice));
  assert.equal(value, 4950);
  assert.equal(slice.yields, 100);
  assert.ok(ranBefore);
  // a long slice: no pause at all for a short computation
  const long = new TimeSlice(60_000);
  await runSliced(steps(100), long);
  assert.ok(long.yields <= 1, 'at most the first tick after construction');
});

test('translateSliced and desiredStateSliced equal translate and desiredState, and let the loop in', async () => {
  const input = { ...cluster(600), node: NODE, config: CONFIG };
  const slice = new TimeSlice(0);
  const t = await letsLoopIn(() => translateSliced(input, new TranslateCache(), slice));
  assert.ok(t.ranBefore);
  assert.deepEqual(t.value, translate(input));
  const opts = { vipLink: 'kube-ipvs0', glue: true };
  const before = slice.yields;
  const d = await letsLoopIn(() => desiredStateSliced(t.value, opts, slice));
  assert.ok(d.ranBefore && slice.yields > before);
  assert.deepEqual(d.value, desiredState(t.value, opts));
});

test('a proxier sync with a 0 ms slice: the same kernel state and writes as with one long slice, with the loop let in', async () => {
  const run = async (sliceMs: number) => {
    const kernel = { ipvs: new FakeIpvs(), links: new FakeLinks(), nft: new FakeNftables() };
    const p = new Proxier(kernel, { node: NODE, config: CONFIG, vipLink: 'kube-ipvs0', glue: true, sliceMs });
    const c = cluster(600);
    for (const s of c.services) p.onServiceUpdate(s);
    for (const s of c.endpointSlices) p.onSliceUpdate(s);
    const full = await letsLoopIn(() => p.sync(true));
    // one endpoint moves: the incremental path, sliced too
    p.onSliceUpdate(slice('s7', 's7-0', [{ name: 'http', port: 8080 }], [{ ip: '10.244.200.1', node: 'node-a' }]));
    const incr = await letsLoopIn(() => p.sync(false));
    return { kernel, full, incr, yields: p.engine.slice.yields };
  };
  const sliced = await run(0);
  const whole = await run(60_000);
  assert.ok(sliced.full.ranBefore && sliced.incr.ranBefore);
  assert.ok(sliced.yields > 100, `yields: ${sliced.yields}`);
  assert.ok(whole.yields <= 10, `a long slice pauses (almost) never: ${whole.yields}`);
  assert.deepEqual(sliced.full.value.report.errors, []);
  assert.deepEqual(sliced.incr.value.report.errors, []);
  assert.deepEqual(sliced.kernel.ipvs.log, whole.kernel.ipvs.log);
  assert.deepEqual(await sliced.kernel.ipvs.services({ withDestinations: true }), await whole.kernel.ipvs.services({ withDestinations: true }));
  assert.deepEqual(await sliced.kernel.nft.list(), await whole.kernel.nft.list());
  assert.deepEqual(await sliced.kernel.links.addresses({ link: 'kube-ipvs0' }), await whole.kernel.links.addresses({ link: 'kube-ipvs0' }));
  assert.ok(sliced.incr.value.report.ipvs.writes > 0);
});

test('IPVS writes go to the kernel in batches of IPVS_APPLY_CHUNK ops; an error keeps its index in the whole op list', async () => {
  const ipvs = new FakeIpvs();
  const sizes: number[] = [];
  const apply = ipvs.apply.bind(ipvs);
  ipvs.apply = async (ops, opts) => {
    sizes.push(ops.length);
    if (sizes.length === 2) ipvs.failNext = { index: 5, code: 'ENOENT' };
    return apply(ops, opts);
  };
  const engine = new Engine({ ipvs });
  const n = IPVS_APPLY_CHUNK + 100;
  const destinations = Array.from({ length: n }, (_, i) => ({ address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, port: 80, forward: 'masq' as const, weight: 1 }));
  const report = await engine.sync({ services: [{ protocol: 'tcp', address: '10.96.0.1', port: 80, scheduler: 'rr', destinations }] });
  assert.deepEqual(sizes, [IPVS_APPLY_CHUNK, n + 1 - IPVS_APPLY_CHUNK]);
  assert.equal(report.ipvs.errors.length, 1);
  assert.equal(report.ipvs.errors[0]!.index, IPVS_APPLY_CHUNK + 5, 'the index in the plan, not in the batch');
  assert.equal(report.ipvs.errors[0]!.code, 'ENOENT');
  assert.equal(report.ipvs.writes, n);
  const [s] = await ipvs.services({ withDestinations: true });
  assert.equal(s!.destinations!.length, n - 1);
  // the failed one is the next sync's only write
  const again = await engine.sync({ services: [{ protocol: 'tcp', address: '10.96.0.1', port: 80, scheduler: 'rr', destinations }] });
  assert.equal(again.ipvs.writes, 1);
});

test('the next IPVS batch is handed over while the kernel takes this one (in call order); a batch that throws ends the sync without an unhandled rejection', async () => {
  const ipvs = new FakeIpvs();
  const events: string[] = [];
  const apply = ipvs.apply.bind(ipvs);
  let calls = 0;
  // A batch's answer waits for the next batch's call (a kernel still busy with it when the
  // engine hands over the next), or 50 ms when none comes: an engine that waited for each answer
  // before the next call gets its answers first; one that hands over ahead gets them after the
  // next call, whatever the machine's load (a fixed 5-ms answer raced the next batch's
  // conversion on a loaded machine).
  let nextCall: (() => void) | undefined;
  ipvs.apply = (ops, opts) => {
    const k = ++calls;
    events.push(`call ${k}`);
    nextCall?.();
    const handedOver = new Promise<void>((resolve) => {
      nextCall = resolve;
      setTimeout(resolve, 50);
    });
    return apply(ops, opts).then(async (r) => {
      await handedOver;
      events.push(`done ${k}`);
      return r;
    });
  };
  const engine = new Engine({ ipvs });
  const n = 3 * IPVS_APPLY_CHUNK;
  const destinations = Array.from({ length: n }, (_, i) => ({ address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, port: 80, forward: 'masq' as const, weight: 1 }));
  const desired = { services: [{ protocol: 'tcp' as const, address: '10.96.0.1', port: 80, scheduler: 'rr', destinations }] };
  const report = await engine.sync(desired);
  // 4 batches (the service and 3 x IPVS_APPLY_CHUNK destinations): each called before the one ahead of it is done
  assert.deepEqual(events, ['call 1', 'call 2', 'done 1', 'call 3', 'done 2', 'call 4', 'done 3', 'done 4']);
  assert.equal(report.ipvs.writes, n + 1);
  assert.equal(report.ipvs.errors.length, 0);
  const [s] = await ipvs.services({ withDestinations: true });
  assert.equal(s!.destinations!.length, n);

  // The second of four batches throws while the third is in flight: the sync rejects with its
  // error, the third's outcome is dropped without an unhandled rejection, the next sync heals.
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  try {
    const fresh = new FakeIpvs();
    const freshApply = fresh.apply.bind(fresh);
    let c = 0;
    fresh.apply = (ops, opts) => {
      c++;
      if (c === 2) fresh.crashAfter = 10;
      if (c === 3) return Promise.reject(new Error('socket gone'));
      return freshApply(ops, opts);
    };
    const e2 = new Engine({ ipvs: fresh });
    await assert.rejects(e2.sync(desired), /simulated crash after 10 ops/);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(unhandled, []);
    fresh.apply = freshApply;
    const healed = await e2.sync(desired);
    assert.equal(healed.ipvs.errors.length, 0);
    const [t] = await fresh.services({ withDestinations: true });
    assert.equal(t!.destinations!.length, n);
  } finally {
    process.off('unhandledRejection', onUnhandled);
  }
});
