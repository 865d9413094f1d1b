// Sorting helpers: plain text order, a sort that lets the event loop in, and a few changes to a
// long sorted list without comparing every element.
import type { Steps } from './slice.js';

/**
 * Plain code-unit order: deterministic, locale-free and cheap. Not localeCompare, which is
 * slower and loads ICU's collation data into the process (~3 MB of resident memory) for an
 * order nothing here needs to be human.
 */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Comparisons per unit of work of sortSteps (a few ms at most, also with costly comparators). */
const SORT_CHUNK = 4096;

/**
 * Sorts `a` in place by `order`, stably (as Array.prototype.sort), as units of work of about
 * SORT_CHUNK comparisons each, so runSliced can let the event loop in during a long sort (one
 * Array.prototype.sort of 40k elements with an address comparator is ~20 ms at real speed,
 * ~300 ms under emulation, with nothing else running). An array already in order costs one
 * pass; otherwise a bottom-up merge sort over runs of 32 sorted by insertion.
 */
export function* sortSteps<T>(a: T[], order: (x: T, y: T) => number): Steps<T[]> {
  const n = a.length;
  let budget = SORT_CHUNK;
  let sorted = true;
  for (let i = 1; i < n; i++) {
    if (order(a[i - 1]!, a[i]!) > 0) {
      sorted = false;
      break;
    }
    if (--budget === 0) {
      budget = SORT_CHUNK;
      yield;
    }
  }
  if (sorted) return a;
  const RUN = 32;
  for (let lo = 0; lo < n; lo += RUN) {
    budget -= insertionSort(a, lo, Math.min(lo + RUN, n), order);
    // checked per run: a unit of work may go over by one run's comparisons (at most 496)
    if (budget <= 0) {
      budget = SORT_CHUNK;
      yield;
    }
  }
  let src = a;
  let dst: T[] = new Array<T>(n);
  for (let width = RUN; width < n; width *= 2) {
    for (let lo = 0; lo < n; lo += 2 * width) {
      const mid = Math.min(lo + width, n);
      const hi = Math.min(lo + 2 * width, n);
      let i = lo;
      let j = mid;
      let k = lo;
      // stable: on a tie the left run's element goes first
      while (i < mid && j < hi) {
        dst[k++] = order(src[j]!, src[i]!) < 0 ? src[j++]! : src[i++]!;
        if (--budget === 0) {
          budget = SORT_CHUNK;
          yield;
        }
      }
      while (i < mid) dst[k++] = src[i++]!;
      while (j < hi) dst[k++] = src[j++]!;
    }
    [src, dst] = [dst, src];
  }
  if (src !== a) for (let i = 0; i < n; i++) a[i] = src[i]!;
  return a;
}

/** Sorts a[lo, hi) by insertion, stably and in place, allocating nothing (short lists: a
 *  merge sort's runs, a service port's endpoints); returns the comparisons it made. */
export function insertionSort<T>(a: T[], lo: number, hi: number, order: (x: T, y: T) => number): number {
  let comparisons = 0;
  for (let i = lo + 1; i < hi; i++) {
    const x = a[i]!;
    let j = i - 1;
    while (j >= lo && (comparisons++, order(a[j]!, x) > 0)) {
      a[j + 1] = a[j]!;
      j--;
    }
    a[j + 1] = x;
  }
  return comparisons;
}

/**
 * sortSteps by a numeric key computed once per element, for orders whose comparison is costly
 * (addresses parsed from text on every call: a 40k-entry sort makes ~600k comparisons). `key`
 * must agree with `order` where it gives numbers (key(x) < key(y) exactly when order(x, y) < 0
 * for two elements with different keys); NaN (no key: an IPv6 address, say) and equal keys are
 * left to `order`. Sorts the indices, then puts `a` in that order (in place, stable).
 */
export function* sortByKeySteps<T>(a: T[], key: (x: T) => number, order: (x: T, y: T) => number): Steps<T[]> {
  const n = a.length;
  const keys = new Float64Array(n);
  const idx = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    keys[i] = key(a[i]!);
    idx[i] = i;
  }
  yield* sortSteps(idx, (i, j) => {
    const d = keys[i]! - keys[j]!;
    return d === d && d !== 0 ? d : order(a[i]!, a[j]!); // d !== d: a NaN key
  });
  const copy = a.slice();
  for (let i = 0; i < n; i++) a[i] = copy[idx[i]!]!;
  return a;
}

/**
 * What patchSorted did to make a list: the entries it actually removed from its base (the
 * base's objects), inserted, and replaced (an added element equal by the order to one there:
 * [the base's, the new]). Readers of a patched list that hold its base (the glue's hairpin set
 * from translate's hairpin list, the engine's element diff from the last applied set) take the
 * change from here instead of walking both lists (at 50k services × 10 with a third of the
 * endpoints local, ~200k entries per list and per sync).
 */
export interface SortedPatch<T> {
  removed: readonly T[];
  added: readonly T[];
  replaced: ReadonlyArray<readonly [T, T]>;
}

/** A list's base is held weakly: a strong one would keep every list of a chain of patches
 *  alive through the records (each list's record holding the one before it). */
interface Derivation<R> {
  base: WeakRef<readonly unknown[]>;
  record: R;
}

/** Lists made from another of the same length by replacing some entries: where. */
const REPLACED = new WeakMap<readonly unknown[], Derivation<readonly number[]>>();

/**
 * Declares `list` to be `base` but for the entries at `at` (a copy, same length, never changed
 * afterwards): a reader that saw `base` looks at those alone (the engine's pass over the
 * desired services after translate patched a few of them: 50k+ entries otherwise). Returns it.
 */
export function withReplaced<T>(list: T[], base: readonly T[], at: readonly number[]): T[] {
  if (list.length === base.length) REPLACED.set(list, { base: new WeakRef(base), record: at });
  return list;
}

/** The entries where `list` differs from `base`, if withReplaced declared it so; else undefined. */
export function replacedOf<T>(list: readonly T[], base: readonly T[]): readonly number[] | undefined {
  const d = REPLACED.get(list);
  return d && d.base.deref() === base ? d.record : undefined;
}

/** Lists made by patchSorted (never changed afterwards, as patchSorted's callers promise). */
const PATCHES = new WeakMap<readonly unknown[], Derivation<SortedPatch<unknown>>>();

/** How patchSorted made `list` from `base`, or undefined (not made by patchSorted from it). */
export function sortedPatchOf<T>(list: readonly T[], base: readonly T[]): SortedPatch<T> | undefined {
  const d = PATCHES.get(list);
  return d && d.base.deref() === base ? (d.record as SortedPatch<T>) : undefined;
}

/**
 * `sorted` (by `order`, unique by it) without `remove` and with `add`, each placed by binary
 * search: O(k log n) comparisons for k changes (and one copy of the array). An added element
 * equal by `order` to one already there replaces it. The result must not be changed: what was
 * done is kept for sortedPatchOf.
 */
export function patchSorted<T>(sorted: readonly T[], remove: Iterable<T>, add: Iterable<T>, order: (x: T, y: T) => number): T[] {
  // One copy, changed in place (a splice moves part of it; a copy of a 200k-entry list is a
  // fresh large-object allocation, ~2 ms, so none more than this one).
  const out = sorted.slice();
  const at = (x: T) => {
    let lo = 0;
    let hi = out.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (order(out[mid]!, x) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const removed: T[] = [];
  for (const r of remove) {
    const i = at(r);
    if (i < out.length && order(out[i]!, r) === 0) removed.push(...out.splice(i, 1));
  }
  // An element removed and then added back (equal by the order) replaced the base's.
  const removedSorted = removed.length > 1 ? removed.slice().sort(order) : removed;
  const readded = new Set<T>();
  const added: T[] = [];
  const addedAt = new Map<T, number>();
  const replaced: Array<readonly [T, T]> = [];
  const replacedAt = new Map<T, number>();
  for (const a of add) {
    const i = at(a);
    if (i < out.length && order(out[i]!, a) === 0) {
      const was = out[i]!;
      out[i] = a;
      const k = addedAt.get(was);
      const r = replacedAt.get(was);
      if (k !== undefined) {
        added[k] = a; // inserted by this call: still an insertion
        addedAt.delete(was);
        addedAt.set(a, k);
      } else if (r !== undefined) {
        replaced[r] = [replaced[r]![0], a];
        replacedAt.delete(was);
        replacedAt.set(a, r);
      } else {
        replacedAt.set(a, replaced.length);
        replaced.push([was, a]);
      }
      continue;
    }
    out.splice(i, 0, a);
    const k = sortedIndexOf(removedSorted, a, order);
    const back = k >= 0 ? removedSorted[k]! : undefined;
    if (back !== undefined && !readded.has(back)) {
      readded.add(back);
      replacedAt.set(a, replaced.length);
      replaced.push([back, a]);
    } else {
      addedAt.set(a, added.length);
      added.push(a);
    }
  }
  const gone = readded.size ? removed.filter((x) => !readded.has(x)) : removed;
  PATCHES.set(out, { base: new WeakRef(sorted), record: { removed: gone, added, replaced } });
  return out;
}

/** The index of an element of `sorted` equal to x by `order`, or -1: one binary search. */
function sortedIndexOf<T>(sorted: readonly T[], x: T, order: (a: T, b: T) => number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const c = order(sorted[mid]!, x);
    if (c === 0) return mid;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return -1;
}

/** Whether `sorted` (by `order`) has an element equal to x by `order`: one binary search. */
export function sortedHas<T>(sorted: readonly T[], x: T, order: (a: T, b: T) => number): boolean {
  return sortedIndexOf(sorted, x, order) >= 0;
}
