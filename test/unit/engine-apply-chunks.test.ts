// The IPVS writes go to the kernel in batches of IPVS_APPLY_CHUNK ops, the next one converted
// and handed over while the kernel takes the one before; errors keep their index in the plan.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Engine, IPVS_APPLY_CHUNK } from '../../src/engine/engine.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';

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

test('the next IPVS batch is handed over while the kernel takes this one (in call order); a batch that throws ends the sync without an unhandled rejection', { timeout: 120_000 }, async () => {
  const ipvs = new FakeIpvs();
  const events: string[] = [];
  const apply = ipvs.apply.bind(ipvs);
  let calls = 0;
  const n = 3 * IPVS_APPLY_CHUNK;
  const batches = Math.ceil((n + 1) / IPVS_APPLY_CHUNK);
  // A batch's answer waits for the next batch's call (a kernel still busy with it when the
  // engine hands over the next); the last batch, which no call follows, is answered a turn of
  // the event loop later (after the answer its call released, which needs only microtasks).
  // An engine that hands over ahead gets each answer after the next call, however long it takes
  // to convert that batch (a 50-ms wait for the next call, and before it a fixed 5-ms answer,
  // raced that conversion on a loaded machine). One that waits for each answer before the next
  // call would wait forever: a 60-s stall releases every answer, only so that such an engine
  // fails on the order below rather than at the test's timeout.
  let nextCall: (() => void) | undefined;
  let stalled = false;
  ipvs.apply = (ops, opts) => {
    const k = ++calls;
    events.push(`call ${k}`);
    nextCall?.();
    const handedOver = new Promise<void>((resolve) => {
      if (stalled) return resolve();
      if (k >= batches) return void setImmediate(resolve);
      const stall = setTimeout(() => ((stalled = true), resolve()), 60_000);
      nextCall = () => (clearTimeout(stall), resolve());
    });
    return apply(ops, opts).then(async (r) => {
      await handedOver;
      events.push(`done ${k}`);
      return r;
    });
  };
  const engine = new Engine({ ipvs });
  const destinations = Array.from({ length: n }, (_, i) => ({ address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, port: 80, forward: 'masq' as const, weight: 1 }));
  const desired = { services: [{ protocol: 'tcp' as const, address: '10.96.0.1', port: 80, scheduler: 'rr', destinations }] };
  const report = await engine.sync(desired);
  assert.equal(batches, 4);
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
