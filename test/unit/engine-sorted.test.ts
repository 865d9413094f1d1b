// patchSorted: a few removals and additions placed by binary search give the list a full sort
// of the same set would give.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { patchSorted } from '../../src/engine/sorted.js';
import { prng } from '../helpers/bytes.js';

test('patchSorted equals sorting the changed set from scratch', () => {
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
    const got = patchSorted(base, remove, add, order);
    assert.deepEqual(got, [...want.values()].sort(order), `round ${round}`);
    assert.notEqual(got, base, 'a copy, the input untouched');
  }
});
