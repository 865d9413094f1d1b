// ChunkedSorted.patch: a few removals and additions placed by binary search give the list a full
// sort of the same set would give.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import v8 from 'node:v8';
import vm from 'node:vm';
import { ChunkedList, ChunkedSorted, replacedOf, sortedPatchOf } from '../../src/engine/sorted.js';
import { prng } from '../helpers/bytes.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

test('a patched ChunkedSorted equals sorting the changed set from scratch, and its record is what changed', () => {
  const r = prng(11);
  const order = (a: { k: number }, b: { k: number }) => a.k - b.k;
  for (let round = 0; round < 300; round++) {
    const keys = new Set<number>();
    const n = Math.floor(r() * 60);
    while (keys.size < n) keys.add(Math.floor(r() * 100));
    const base = [...keys].sort((a, b) => a - b).map((k) => ({ k, v: 'old' }));
    const remove = base.filter(() => r() < 0.2).map(({ k }) => ({ k, v: 'gone' }));
    remove.push({ k: 1000, v: 'absent' }); // not in the list: nothing happens
    const add = Array.from({ length: Math.floor(r() * 5) }, () => ({ k: Math.floor(r() * 120), v: 'new' }));
    const want = new Map(base.map((e) => [e.k, e]));
    for (const x of remove) want.delete(x.k);
    for (const a of add) want.set(a.k, a); // an equal key is replaced by the added element
    const baseList = ChunkedSorted.of(base);
    const gotList = baseList.patch(remove, add, order);
    const got = [...gotList];
    assert.deepEqual(got, [...want.values()].sort(order), `round ${round}`);
    assert.deepEqual([...baseList], base, 'the base list untouched');
    // What it did, as a diff of the two lists would tell it
    const p = sortedPatchOf(gotList, baseList)!;
    assert.ok(p, 'the record of got from base');
    assert.equal(sortedPatchOf(gotList, ChunkedSorted.of(base)), undefined, 'not from another list, equal or not');
    const inGot = new Map(got.map((e) => [e.k, e]));
    const inBase = new Map(base.map((e) => [e.k, e]));
    const byK = (a: { k: number }, b: { k: number }) => a.k - b.k;
    assert.deepEqual([...p.removed].sort(byK), base.filter((e) => !inGot.has(e.k)), `round ${round}: removed`);
    for (const e of p.removed) assert.ok(base.includes(e), 'removed: the objects of the base');
    assert.deepEqual([...p.added].sort(byK), got.filter((e) => !inBase.has(e.k)), `round ${round}: added`);
    for (const e of p.added) assert.ok(got.includes(e), 'added: the objects in the list');
    assert.deepEqual(
      [...p.replaced].sort(([a], [b]) => a.k - b.k),
      got.filter((e) => inBase.has(e.k) && inBase.get(e.k) !== e).map((e) => [inBase.get(e.k), e]),
      `round ${round}: replaced`,
    );
  }
  assert.equal(sortedPatchOf(ChunkedSorted.of([1, 2]), ChunkedSorted.of([1, 2])), undefined, 'a list no patch made');
});

test('a chain of patched lists keeps no list but the ones its holders keep (the records hold their bases weakly)', async () => {
  const order = (a: { k: number }, b: { k: number }) => a.k - b.k;
  let list = ChunkedSorted.of(Array.from({ length: 1000 }, (_, i) => ({ k: i * 2 })));
  let services = ChunkedList.of(Array.from({ length: 1000 }, (_, i) => ({ k: i * 2 })));
  const first = new WeakRef(list);
  const firstServices = new WeakRef(services);
  for (let r = 0; r < 50; r++) {
    list = list.patch([{ k: 2 * r }], [{ k: 2 * r + 1 }], order);
    services = services.replace(new Map([[r, { k: -r }]]));
  }
  // the last record still works while its base is held
  const before = list;
  const after = before.patch([before.toArray()[0]!], [], order);
  assert.equal(sortedPatchOf(after, before)?.removed.length, 1);
  const lastServices = services;
  assert.deepEqual(replacedOf(lastServices.replace(new Map([[999, { k: 0 }], [5, { k: 1 }]])), lastServices), [5, 999]);
  await new Promise((r) => setImmediate(r)); // WeakRefs deref'd in this job stay alive until it ends
  gc();
  assert.equal(first.deref(), undefined, 'the first list of the chain was collected');
  assert.equal(firstServices.deref(), undefined, 'the first list of the replace chain was collected');
  assert.equal(services.length, 1000);
});

test('ChunkedSorted.has finds exactly the elements of a list, across chunks', () => {
  const r = prng(9);
  for (let round = 0; round < 100; round++) {
    const set = new Set(Array.from({ length: Math.floor(r() * 3000) }, () => Math.floor(r() * 6000)));
    const list = ChunkedSorted.of([...set].sort((a, b) => a - b));
    for (let x = -1; x <= 6001; x += 1 + Math.floor(r() * 3)) assert.equal(list.has(x, (a, b) => a - b), set.has(x), `round ${round}, ${x}`);
  }
});
