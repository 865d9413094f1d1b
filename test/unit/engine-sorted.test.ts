// patchSorted: a few removals and additions placed by binary search give the list a full sort
// of the same set would give, and leave the list they patch as it was.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { lowerBound, patchSorted, sortedIndexOf } from '../../src/util/sorted.js';
import { prng } from '../helpers/bytes.js';

test('patchSorted equals sorting the changed set from scratch; an added element equal to one there replaces it', () => {
  const r = prng(11);
  const order = (a: { k: number }, b: { k: number }) => a.k - b.k;
  for (let round = 0; round < 300; round++) {
    const keys = new Set<number>();
    const n = Math.floor(r() * 60);
    while (keys.size < n) keys.add(Math.floor(r() * 100));
    const base = [...keys].sort((a, b) => a - b).map((k) => ({ k, v: 'old' }));
    const copy = base.slice();
    const remove = base.filter(() => r() < 0.2).map(({ k }) => ({ k, v: 'gone' }));
    remove.push({ k: 1000, v: 'absent' }); // not in the list: nothing happens
    const add = Array.from({ length: Math.floor(r() * 5) }, () => ({ k: Math.floor(r() * 120), v: 'new' }));
    const want = new Map(base.map((e) => [e.k, e]));
    for (const x of remove) want.delete(x.k);
    for (const a of add) want.set(a.k, a);
    assert.deepEqual(patchSorted(base, remove, add, order), [...want.values()].sort(order), `round ${round}`);
    assert.deepEqual(base, copy, 'the list patched untouched');
  }
});

test('lowerBound and sortedIndexOf find exactly the elements of a list', () => {
  const r = prng(9);
  for (let round = 0; round < 100; round++) {
    const set = new Set(Array.from({ length: Math.floor(r() * 3000) }, () => Math.floor(r() * 6000)));
    const list = [...set].sort((a, b) => a - b);
    for (let x = -1; x <= 6001; x += 1 + Math.floor(r() * 3)) {
      assert.equal(sortedIndexOf(list, x, (a, b) => a - b) >= 0, set.has(x), `round ${round}, ${x}`);
      const i = lowerBound(list, x, (a, b) => a - b);
      assert.ok((i === list.length || list[i]! >= x) && (i === 0 || list[i - 1]! < x));
    }
  }
});
