// memoryPressure: the addon's one V8-facing binding (a daemon calls it after a full resync).
import assert from 'node:assert/strict';
import test from 'node:test';
import v8 from 'node:v8';
import { memoryPressure } from '../../src/native.js';

test("memoryPressure('critical') collects what a large transient left: the heap's used size drops", () => {
  // ~40 MB of objects, then dropped (a full resync's listings, in miniature)
  let junk: Array<{ a: string; b: number[] }> | undefined = Array.from({ length: 200_000 }, (_, i) => ({ a: `10.0.${i >> 8}.${i & 255}`, b: [i, i + 1, i + 2] }));
  const held = v8.getHeapStatistics().used_heap_size;
  assert.equal(junk.length, 200_000);
  junk = undefined;
  memoryPressure('critical');
  const after = v8.getHeapStatistics().used_heap_size;
  assert.ok(after < held - 20 * 1024 * 1024, `used ${held} -> ${after}`);
  memoryPressure('none');
});

test("memoryPressure('moderate') starts a collection without blocking; 'none' clears; anything else is a TypeError", async () => {
  memoryPressure('moderate');
  await new Promise((r) => setTimeout(r, 10));
  memoryPressure('none');
  for (const bad of ['high', '', 3, undefined]) assert.throws(() => memoryPressure(bad as never), (e: Error) => e instanceof TypeError && /level must be/.test(e.message));
});
