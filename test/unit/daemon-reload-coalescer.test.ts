// ReloadCoalescer on a fake clock: bursts of change events coalesced into one load, one load at
// a time, the last state always the one loaded last, and nothing loaded after stop().
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ReloadCoalescer } from '../../src/daemon/reload-coalescer.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { prng } from '../helpers/engine-random.js';

/** A source whose loads take `loadMs` on the fake clock: each reads `state` when it starts and
 *  applies what it read when it ends (as the sync thread's folder load does). */
function setup(opts: { loadMs?: number; debounceMs?: number; maxDelayMs?: number } = {}) {
  const clock = new FakeClock();
  const s = {
    state: 0,
    applied: 0,
    appliedSeq: [] as number[],
    starts: [] as number[],
    active: 0,
    maxActive: 0,
    loaded: 0,
    failed: [] as unknown[],
    failNext: 0,
    loadMs: opts.loadMs ?? 0,
  };
  const r = new ReloadCoalescer({
    clock,
    debounceMs: opts.debounceMs ?? 100,
    maxDelayMs: opts.maxDelayMs ?? 1000,
    load: async () => {
      const read = s.state;
      s.starts.push(clock.now());
      s.maxActive = Math.max(s.maxActive, ++s.active);
      try {
        if (s.loadMs) await new Promise<void>((done) => clock.setTimeout(done, s.loadMs));
        if (s.failNext > 0) {
          s.failNext--;
          throw new Error('does not parse');
        }
        s.applied = read;
        s.appliedSeq.push(read);
      } finally {
        s.active--;
      }
    },
    onChangeLoaded: () => s.loaded++,
    onChangeFailed: (e) => s.failed.push(e),
  });
  const change = () => (s.state++, r.changed());
  return { clock, s, r, change };
}

test('a burst of changes is one load, debounceMs after the last of them; its end asks for one sync', async () => {
  const { clock, s, change } = setup();
  for (let i = 0; i < 50; i++) {
    change();
    await clock.advance(10);
  }
  assert.deepEqual(s.starts, [], 'no load while the changes keep coming within the debounce');
  await clock.advance(89);
  assert.deepEqual(s.starts, []);
  await clock.advance(1);
  assert.deepEqual(s.starts, [590]);
  assert.equal(s.loaded, 1);
  assert.equal(s.applied, 50);
  await clock.advance(10_000);
  assert.equal(s.starts.length, 1, 'nothing more without a change');
});

test('changes that never pause are still loaded every maxDelayMs', async () => {
  const { clock, s, change } = setup({ debounceMs: 100, maxDelayMs: 1000 });
  for (let i = 0; i < 500; i++) {
    change();
    await clock.advance(10);
  }
  // the first change at 0, the last at 4990: a load every 1000 (each after the first change
  // it has to serve), the last one reading the last change
  assert.deepEqual(s.starts, [1000, 2000, 3000, 4000, 5000]);
  assert.equal(s.applied, 500);
});

test('one load at a time: the changes during a load are one more load, started when it has ended', async () => {
  const { clock, s, r, change } = setup({ loadMs: 500, debounceMs: 100 });
  change();
  await clock.advance(100);
  assert.deepEqual(s.starts, [100]);
  for (let i = 0; i < 20; i++) {
    change();
    await clock.advance(10);
  }
  // the first load ends at 600; the changes during it wait for its end, then the debounce
  await clock.advance(2000);
  assert.equal(s.maxActive, 1);
  assert.deepEqual(s.starts, [100, 700]);
  assert.deepEqual(s.appliedSeq, [1, 21]);
  assert.equal(s.loaded, 2);
  // now() during a load waits for it too, then loads again (the first may have read too early)
  change();
  await clock.advance(100);
  const p = r.now();
  await clock.advance(100);
  assert.equal(s.starts.length, 3, 'now() has not started a second load');
  await clock.advance(400);
  assert.equal(s.starts.length, 4);
  await clock.advance(500);
  await p;
  assert.equal(s.maxActive, 1);
  assert.equal(s.applied, s.state);
});

test('the last state is the one applied last, and no older read lands after a newer one: random changes against loads of random length', async () => {
  for (let seed = 1; seed <= 200; seed++) {
    const rand = prng(seed);
    const { clock, s, r, change } = setup({ debounceMs: 1 + Math.floor(rand() * 50), maxDelayMs: 50 + Math.floor(rand() * 200) });
    for (let i = 0; i < 60; i++) {
      s.loadMs = Math.floor(rand() * 120);
      if (rand() < 0.85) change();
      else void r.now();
      await clock.advance(Math.floor(rand() * 40));
    }
    await clock.advance(100_000);
    assert.equal(s.maxActive, 1, `seed ${seed}: two loads at once`);
    assert.equal(s.applied, s.state, `seed ${seed}: the last state was not loaded last`);
    for (let i = 1; i < s.appliedSeq.length; i++) assert.ok(s.appliedSeq[i]! >= s.appliedSeq[i - 1]!, `seed ${seed}: ${s.appliedSeq}`);
  }
});

test('now(): loads at once, serving the changes pending (no second load for them); it rejects with its failure, which onChangeFailed does not get', async () => {
  const { clock, s, r, change } = setup();
  change();
  await r.now();
  assert.deepEqual(s.starts, [0]);
  assert.equal(s.loaded, 0, 'a sync is for the caller to ask');
  await clock.advance(10_000);
  assert.equal(s.starts.length, 1);
  s.failNext = 1;
  await assert.rejects(r.now(), /does not parse/);
  assert.deepEqual(s.failed, []);
  assert.deepEqual(r.stats, { loads: 2, failures: 1 });
});

test('a load that changes asked for and that fails is reported; the next change loads again', async () => {
  const { clock, s, change } = setup();
  s.failNext = 1;
  change();
  await clock.advance(100);
  assert.equal(s.failed.length, 1);
  assert.match(String(s.failed[0]), /does not parse/);
  assert.equal(s.loaded, 0);
  change();
  await clock.advance(100);
  assert.equal(s.loaded, 1);
  assert.equal(s.applied, 2);
});

test('stop(): pending changes are dropped, no load starts after it, the end of the load under way is not reported, and now() resolves without loading', async () => {
  const { clock, s, r, change } = setup({ loadMs: 500 });
  change();
  await clock.advance(50);
  r.stop();
  await clock.advance(10_000);
  assert.deepEqual(s.starts, [], 'the debounced load was dropped');

  const b = setup({ loadMs: 500 });
  b.change();
  await b.clock.advance(100);
  assert.deepEqual(b.s.starts, [100]);
  b.change();
  const waiting = b.r.now();
  let resolved = false;
  void waiting.then(() => (resolved = true));
  await b.clock.advance(100);
  b.r.stop();
  await b.clock.advance(0);
  assert.ok(resolved, 'a now() waiting for the load under way resolves at the stop');
  b.change();
  await b.r.now();
  await b.clock.advance(10_000);
  assert.deepEqual(b.s.starts, [100], 'nothing after the stop');
  assert.equal(b.s.loaded, 0, 'the load under way at the stop is not reported');
  assert.equal(b.s.active, 0);
});
