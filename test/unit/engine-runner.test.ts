import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SyncRunner, type SyncTrigger } from '../../src/daemon/runner.js';
import { FakeClock } from '../helpers/fake-clock.js';

function setup(opts: { min?: number; max?: number; retry?: number; retryMax?: number; syncMs?: number; fullSync?: number } = {}) {
  const clock = new FakeClock();
  const calls: Array<{ at: number; trigger: SyncTrigger }> = [];
  let fail = 0;
  let active = 0;
  let maxActive = 0;
  const runner = new SyncRunner(
    async (trigger) => {
      calls.push({ at: clock.now(), trigger });
      active++;
      maxActive = Math.max(maxActive, active);
      try {
        if (opts.syncMs) await new Promise<void>((r) => clock.setTimeout(r, opts.syncMs!));
        if (fail > 0) {
          fail--;
          throw new Error('sync failed');
        }
      } finally {
        active--;
      }
    },
    {
      minIntervalMs: opts.min ?? 1000,
      maxIntervalMs: opts.max ?? 30000,
      retryInitialMs: opts.retry ?? 500,
      retryMaxMs: opts.retryMax ?? 4000,
      ...(opts.fullSync ? { fullSyncPeriodMs: opts.fullSync } : {}),
      clock,
    },
  );
  return { clock, calls, runner, failNext: (n: number) => (fail = n), maxActive: () => maxActive };
}

test('starts with one immediate sync', async () => {
  const { clock, calls, runner } = setup();
  runner.start();
  await clock.advance(0);
  assert.deepEqual(calls, [{ at: 0, trigger: 'initial' }]);
});

test('a burst of requests inside minInterval coalesces into one sync at the window end', async () => {
  const { clock, calls, runner } = setup({ min: 1000 });
  runner.start();
  await clock.advance(0);
  for (let i = 0; i < 50; i++) {
    await clock.advance(10);
    runner.request();
  }
  await clock.advanceTo(999);
  assert.equal(calls.length, 1, 'nothing before the window ends');
  await clock.advanceTo(1000);
  assert.deepEqual(calls.at(-1), { at: 1000, trigger: 'request' });
  assert.equal(runner.stats.last?.coalesced, 50);
  await clock.advanceTo(5000);
  assert.equal(calls.length, 2, 'no extra syncs without requests before maxInterval');
});

test('a request long after the last sync runs at once', async () => {
  const { clock, calls, runner } = setup({ min: 1000 });
  runner.start();
  await clock.advanceTo(5000);
  runner.request();
  await clock.advance(0);
  assert.deepEqual(calls.at(-1), { at: 5000, trigger: 'request' });
});

test('periodic resync every maxInterval without requests', async () => {
  const { clock, calls, runner } = setup({ min: 1000, max: 30000 });
  runner.start();
  await clock.advanceTo(95000);
  assert.deepEqual(
    calls.map((c) => [c.at, c.trigger]),
    [
      [0, 'initial'],
      [30000, 'periodic'],
      [60000, 'periodic'],
      [90000, 'periodic'],
    ],
  );
});

test('requests that keep coming: partial syncs, and a full one once the last full one is fullSyncPeriod old', async () => {
  const { clock, calls, runner } = setup({ min: 1000, max: 30000, fullSync: 120000 });
  runner.start();
  // a change every 10 s: each its own sync, no periodic one (it would come 30 s after any sync)
  for (let t = 5000; t <= 295000; t += 10000) {
    await clock.advanceTo(t);
    runner.request();
  }
  await clock.advanceTo(295000);
  assert.deepEqual(
    calls.filter((c) => c.trigger !== 'request').map((c) => [c.at, c.trigger]),
    [
      [0, 'initial'],
      [125000, 'periodic'],
      [245000, 'periodic'],
    ],
  );
  assert.equal(calls.length, 31, 'one sync per change, and the initial one');
});

test('failures retry with exponential backoff capped at retryMax, then reset on success', async () => {
  const { clock, calls, runner, failNext } = setup({ retry: 500, retryMax: 4000 });
  const records: Array<[number, number | undefined]> = [];
  runner.onSync((r) => records.push([r.startedAt, r.retryInMs]));
  failNext(5);
  runner.start();
  await clock.advanceTo(42000);
  // each failed sync's record says when it is retried (what a log line reports); none after a success
  assert.deepEqual(records, [
    [0, 500],
    [500, 1000],
    [1500, 2000],
    [3500, 4000],
    [7500, 4000],
    [11500, undefined],
    [41500, undefined],
  ]);
  assert.deepEqual(
    calls.map((c) => [c.at, c.trigger]),
    [
      [0, 'initial'],
      [500, 'retry'],
      [1500, 'retry'],
      [3500, 'retry'],
      [7500, 'retry'],
      [11500, 'retry'], // 8000 capped at 4000; this one succeeds
      [41500, 'periodic'], // back to the normal period after a success
    ],
  );
  assert.equal(runner.stats.failures, 5);
  assert.equal(runner.stats.consecutiveFailures, 0);
  assert.equal(runner.stats.lastSuccessAt, 41500);
});

test('syncs never overlap; a request during a sync runs after it, respecting minInterval', async () => {
  const { clock, calls, runner, maxActive } = setup({ min: 1000, syncMs: 3000 });
  runner.start();
  await clock.advance(100);
  runner.request();
  runner.request();
  await clock.advanceTo(2999);
  assert.equal(calls.length, 1);
  await clock.advanceTo(3000);
  assert.deepEqual(calls.at(-1), { at: 3000, trigger: 'request' });
  assert.equal(maxActive(), 1);
});

test('stop waits for the sync in flight and cancels what was scheduled', async () => {
  const { clock, calls, runner } = setup({ syncMs: 100 });
  runner.start();
  await clock.advance(10);
  const stopped = runner.stop();
  await clock.advance(200);
  await stopped;
  runner.request();
  await clock.advanceTo(100000);
  assert.equal(calls.length, 1);
  assert.equal(runner.nextDue(), undefined);
});

test('invalid intervals are rejected', () => {
  assert.throws(() => new SyncRunner(async () => {}, { minIntervalMs: 10, maxIntervalMs: 5 }), RangeError);
});
