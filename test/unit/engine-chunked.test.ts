// ChunkedSorted: a sorted list in chunks, patched by copying only the chunks a change touches;
// the list and the record a sort from scratch and a diff give, and lists read as arrays only on
// demand.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChunkedSorted, defineList, flattenedLists, registeredList, shareList, sortedListOf, sortedPatchOf, withList, type SortedPatch } from '../../src/engine/sorted.js';
import { prng } from '../helpers/bytes.js';

type E = { k: number; v: string };
const order = (a: E, b: E) => a.k - b.k;
const chunksOf = (l: ChunkedSorted<E>) => (l as unknown as { chunks: E[][] }).chunks;

/** `base` without `remove` and with `add` (an added key replaces the entry there), sorted. */
function fromScratch(base: readonly E[], remove: readonly E[], add: readonly E[]): E[] {
  const m = new Map(base.map((e) => [e.k, e]));
  for (const x of remove) m.delete(x.k);
  for (const a of add) m.set(a.k, a);
  return [...m.values()].sort(order);
}

/** The record a diff of the two lists gives (each part in key order). */
function diffRecord(base: readonly E[], now: readonly E[]): SortedPatch<E> {
  const inBase = new Map(base.map((e) => [e.k, e]));
  const inNow = new Map(now.map((e) => [e.k, e]));
  return {
    removed: base.filter((e) => !inNow.has(e.k)),
    added: now.filter((e) => !inBase.has(e.k)),
    replaced: now.filter((e) => inBase.has(e.k) && inBase.get(e.k) !== e).map((e) => [inBase.get(e.k)!, e] as const),
  };
}

const sortedRecord = (p: SortedPatch<E>): SortedPatch<E> => ({
  removed: [...p.removed].sort(order),
  added: [...p.added].sort(order),
  replaced: [...p.replaced].sort(([a], [b]) => order(a, b)),
});

test('patching a ChunkedSorted gives the list a sort from scratch gives and the record a diff gives, through chunk splits and emptied chunks', () => {
  const r = prng(23);
  for (let round = 0; round < 200; round++) {
    const n = Math.floor(r() * 3000);
    const keys = new Set<number>();
    while (keys.size < n) keys.add(Math.floor(r() * 10000));
    let arr: E[] = [...keys].sort((a, b) => a - b).map((k) => ({ k, v: 'old' }));
    let list = ChunkedSorted.of(arr);
    // several patches in a row: many inserts into one region split its chunk; removals of a
    // whole run empty one
    for (let step = 0; step < 4; step++) {
      const from = Math.floor(r() * 10000);
      const remove = arr.filter((e) => (e.k >= from && e.k < from + 700) || r() < 0.01).map(({ k }) => ({ k, v: 'gone' }));
      remove.push({ k: 20000, v: 'absent' });
      const add = Array.from({ length: Math.floor(r() * 1500) }, () => ({ k: from + Math.floor(r() * (r() < 0.5 ? 800 : 10000)), v: `new${step}` }));
      const wantArr = fromScratch(arr, remove, add);
      const got = list.patch(remove, add, order);
      assert.deepEqual([...got], wantArr, `round ${round} step ${step}: the entries`);
      assert.equal(got.length, wantArr.length);
      assert.deepEqual(sortedRecord(sortedPatchOf(got, list)!), diffRecord(arr, wantArr), `round ${round} step ${step}: the record`);
      assert.equal(sortedPatchOf(got, ChunkedSorted.of(arr)), undefined, 'not from another list');
      for (const c of chunksOf(got)) assert.ok(c.length > 0 && c.length < 1024, 'no empty chunk, none past twice the size');
      for (const e of wantArr.slice(0, 50)) assert.ok(got.has({ k: e.k, v: '' }, order));
      assert.equal(got.has({ k: 30000, v: '' }, order), false);
      arr = wantArr;
      list = got;
    }
    assert.deepEqual(list.toArray(), arr);
  }
  const empty = ChunkedSorted.of<E>([]).patch([], [{ k: 1, v: 'a' }, { k: 0, v: 'b' }], order);
  assert.deepEqual([...empty].map((e) => e.k), [0, 1]);
  assert.deepEqual([...empty.patch([{ k: 0, v: '' }, { k: 1, v: '' }], [], order)], []);
});

test('a patch copies the chunk table and the chunks it changes, and shares every other chunk', () => {
  const arr = Array.from({ length: 200_000 }, (_, i) => ({ k: 2 * i, v: 'x' }));
  const list = ChunkedSorted.of(arr);
  const next = list.patch([arr[1000]!], [{ k: 2 * 150_000 + 1, v: 'y' }], order);
  const a = chunksOf(list);
  const b = chunksOf(next);
  assert.equal(a.length, b.length);
  const copied = b.filter((c, i) => c !== a[i]).length;
  assert.equal(copied, 2, 'the two chunks changed, no other');
  assert.equal(list.toArray(), arr, 'the list made from an array reads as that array');
  assert.equal(list.length, 200_000);
  assert.equal(next.length, 200_000);
});

test('defineList: the array is made on the first read, once; the list stays registered', () => {
  const list = ChunkedSorted.of([{ k: 1, v: 'a' }]).patch([], [{ k: 2, v: 'b' }], order);
  const holder: { name: string; items?: readonly E[] } = { name: 'h' };
  let made = 0;
  const before = flattenedLists();
  defineList(holder, 'items', list, () => made++);
  assert.deepEqual(Object.keys(holder), ['name', 'items'], 'enumerable, in place');
  assert.equal(registeredList(holder, 'items'), list);
  assert.equal(registeredList(holder, 'other'), undefined);
  assert.equal(sortedListOf(holder, 'items'), list);
  assert.equal(flattenedLists(), before, 'nothing made yet');
  const a = holder.items!;
  assert.deepEqual(a.map((e) => e.k), [1, 2]);
  assert.equal(holder.items, a, 'the same array again');
  assert.equal(made, 1);
  assert.equal(flattenedLists(), before + 1);
  // an array-held list becomes a list once, then the same one
  const plain = { items: [{ k: 5, v: 'p' }] };
  const l = sortedListOf<E>(plain, 'items');
  assert.equal(sortedListOf(plain, 'items'), l);
  assert.equal(l.toArray(), plain.items);
});

test('withList and shareList carry a holder’s other lists as lists: none made into an array, and its made callback kept', () => {
  const a = ChunkedSorted.of([{ k: 1, v: 'a' }]).patch([], [{ k: 2, v: 'b' }], order);
  const b = ChunkedSorted.of([{ k: 3, v: 'c' }]).patch([], [{ k: 4, v: 'd' }], order);
  const holder = { x: [] as readonly E[], y: [] as readonly E[], z: 1 };
  let madeX = 0;
  defineList(holder, 'x', a, () => madeX++);
  defineList(holder, 'y', b);
  const before = flattenedLists();
  const next = withList(holder, 'y', b.patch([], [{ k: 5, v: 'e' }], order));
  assert.deepEqual(Object.keys(next), ['x', 'y', 'z']);
  assert.equal(registeredList(next, 'x'), a, 'x shared as the list');
  assert.equal(flattenedLists(), before, 'no list made into an array');
  const copy = {};
  shareList(next, 'x', copy);
  assert.equal(registeredList(copy, 'x'), a);
  assert.deepEqual((copy as { x: readonly E[] }).x.map((e) => e.k), [1, 2]);
  assert.equal(madeX, 1, 'the made callback runs for the sharing holder too');
  assert.deepEqual(next.y.map((e) => e.k), [3, 4, 5]);
  assert.equal(next.z, 1);
});
