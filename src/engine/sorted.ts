// Sorting helpers: plain text order, a sort by a precomputed numeric key, and a few changes to
// a long sorted list without comparing every element.
/**
 * Plain code-unit order: deterministic, locale-free and cheap. Not localeCompare, which is
 * slower and loads ICU's collation data into the process (~3 MB of resident memory) for an
 * order nothing here needs to be human.
 */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Sorts a[lo, hi) by insertion, stably and in place, allocating nothing (short lists: a
 *  service port's endpoints); returns the comparisons it made. */
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
 * Sorts `a` in place by `order`, stably, comparing a number computed once per element first:
 * for orders whose comparison is costly (addresses parsed from text on every call; a 100k-entry
 * sort makes ~1.7M comparisons). `key` must agree with `order` where it gives numbers
 * (key(x) < key(y) exactly when order(x, y) < 0 for two elements with different keys); NaN
 * (no key: an IPv6 address, say) and equal keys are left to `order`.
 */
export function sortByKey<T>(a: T[], key: (x: T) => number, order: (x: T, y: T) => number): T[] {
  const n = a.length;
  const keys = new Float64Array(n);
  const idx = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    keys[i] = key(a[i]!);
    idx[i] = i;
  }
  const copy = a.slice();
  // -1 / 1, not the keys' difference; a NaN key fails both tests, as do equal keys: `order`
  idx.sort((i, j) => {
    const x = keys[i]!;
    const y = keys[j]!;
    return x < y ? -1 : x > y ? 1 : order(copy[i]!, copy[j]!);
  });
  for (let i = 0; i < n; i++) a[i] = copy[idx[i]!]!;
  return a;
}

/**
 * What ChunkedSorted.patch did to make a list: the entries it actually removed from its base (the
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
  base: WeakRef<object>;
  record: R;
}

/** Lists made from another of the same length by replacing some entries (ChunkedList.replace): where. */
const REPLACED = new WeakMap<object, Derivation<readonly number[]>>();

/** The entries where `list` differs from `base`, if ChunkedList.replace made it from it; else
 *  undefined. A reader that saw `base` looks at those alone (the engine's pass over the desired
 *  services after translate patched a few of them: 50k+ entries otherwise). */
export function replacedOf<T>(list: ChunkedList<T>, base: ChunkedList<T>): readonly number[] | undefined {
  const d = REPLACED.get(list);
  return d && d.base.deref() === base ? d.record : undefined;
}

/** Lists made by ChunkedSorted.patch (never changed afterwards). */
const PATCHES = new WeakMap<object, Derivation<SortedPatch<unknown>>>();

/** How ChunkedSorted.patch made `list` from `base`, or undefined (not made that way from it). */
export function sortedPatchOf<T>(list: ChunkedSorted<T>, base: ChunkedSorted<T>): SortedPatch<T> | undefined {
  const d = PATCHES.get(list);
  return d && d.base.deref() === base ? (d.record as SortedPatch<T>) : undefined;
}

/**
 * A sorted sequence being patched in place (patchSequence; ChunkedSorted.patch's chunks): positions
 * come from `find` and are used at once, before the next change (an insert or removal may move
 * every later one).
 */
interface PatchTarget<T> {
  /** Where x is, or would go: the first position whose entry is not before x by the order. */
  find(x: T): number;
  /** The entry at a position find returned (undefined past the end). */
  at(pos: number): T | undefined;
  set(pos: number, x: T): void;
  insert(pos: number, x: T): void;
  removeAt(pos: number): T;
}

/**
 * `target` (sorted by `order`, unique by it) without `remove` and with `add`, each placed by
 * one search; an added element equal by `order` to one there replaces it. Returns what it did:
 * the entries it actually removed, inserted, and replaced ([the old, the new]; an element
 * removed and added back counts as replaced).
 */
function patchSequence<T>(target: PatchTarget<T>, remove: Iterable<T>, add: Iterable<T>, order: (x: T, y: T) => number): SortedPatch<T> {
  const removed: T[] = [];
  for (const r of remove) {
    const i = target.find(r);
    const there = target.at(i);
    if (there !== undefined && order(there, r) === 0) removed.push(target.removeAt(i));
  }
  // An element removed and then added back (equal by the order) replaced the base's.
  const removedSorted = removed.length > 1 ? removed.slice().sort(order) : removed;
  const readded = new Set<T>();
  const added: T[] = [];
  const addedAt = new Map<T, number>();
  const replaced: Array<readonly [T, T]> = [];
  const replacedAt = new Map<T, number>();
  for (const a of add) {
    const i = target.find(a);
    const was = target.at(i);
    if (was !== undefined && order(was, a) === 0) {
      target.set(i, a);
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
    target.insert(i, a);
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
  return { removed: gone, added, replaced };
}

/** The first index of `sorted` whose entry is not before x by `order` (sorted.length: none). */
function lowerBound<T>(sorted: readonly T[], x: T, order: (a: T, b: T) => number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (order(sorted[mid]!, x) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The index of an element of `sorted` equal to x by `order`, or -1: one binary search. */
function sortedIndexOf<T>(sorted: readonly T[], x: T, order: (a: T, b: T) => number): number {
  const i = lowerBound(sorted, x, order);
  return i < sorted.length && order(sorted[i]!, x) === 0 ? i : -1;
}

/** Lists that toArray made into arrays so far (a test's count: an incremental sync makes none). */
let flattened = 0;

export function flattenedLists(): number {
  return flattened;
}

/** `a` in chunks of `size` (copies). */
function chunked<T>(a: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < a.length; i += size) chunks.push(a.slice(i, i + size));
  return chunks;
}

/** A copy of a chunk table for making a new list: a chunk is copied on its first write
 *  (`mine`); chunks made for the new list are its own from the start (`adopt`). */
function writableChunks<T>(from: ReadonlyArray<readonly T[]>): { chunks: T[][]; mine(c: number): T[]; adopt(a: T[]): T[] } {
  const chunks = from.slice() as T[][];
  const own = new Set<T[]>();
  return {
    chunks,
    mine(c) {
      let a = chunks[c]!;
      if (!own.has(a)) {
        a = a.slice();
        own.add(a);
        chunks[c] = a;
      }
      return a;
    },
    adopt(a) {
      own.add(a);
      return a;
    },
  };
}

/** A list kept in chunks, never changed once made: a new list shares the chunks it does not
 *  change (ChunkedSorted, ChunkedList). Read as one array by toArray, made once and kept. */
abstract class Chunks<T> implements Iterable<T> {
  readonly length: number;
  #array: readonly T[] | undefined;

  protected constructor(
    protected readonly chunks: ReadonlyArray<readonly T[]>,
    length: number,
    array?: readonly T[],
  ) {
    this.length = length;
    this.#array = array;
  }

  /** The entries in order, as one array (made on the first call). */
  toArray(): readonly T[] {
    if (this.#array === undefined) {
      flattened++;
      const out = new Array<T>(this.length);
      let n = 0;
      for (const c of this.chunks) for (let i = 0; i < c.length; i++) out[n++] = c[i]!;
      this.#array = out;
    }
    return this.#array;
  }

  *[Symbol.iterator](): Iterator<T> {
    for (const c of this.chunks) yield* c;
  }
}

/** Entries per chunk of a ChunkedList (a power of two: an index splits by shift and mask). */
const LIST_SHIFT = 10;
const LIST_MASK = (1 << LIST_SHIFT) - 1;

/**
 * A list whose entries are replaced in place, the length kept (translate's virtual servers: a
 * patched model swaps a changed service's), in chunks of 1024: replacing k entries copies the
 * chunk table and at most k chunks instead of the list (at 50k services a 55k-entry copy per
 * one-endpoint sync, 0.4 MB). What was replaced is kept for replacedOf.
 */
export class ChunkedList<T> extends Chunks<T> {
  private constructor(chunks: ReadonlyArray<readonly T[]>, length: number, array?: readonly T[]) {
    super(chunks, length, array);
  }

  /** The list of an array (which it keeps as its toArray: not to be changed). */
  static of<T>(a: readonly T[]): ChunkedList<T> {
    return new ChunkedList(chunked(a, 1 << LIST_SHIFT), a.length, a);
  }

  get(i: number): T | undefined {
    return this.chunks[i >>> LIST_SHIFT]?.[i & LIST_MASK];
  }

  /** This list with the entries at the given indexes (each within it) replaced. */
  replace(entries: ReadonlyMap<number, T>): ChunkedList<T> {
    const w = writableChunks(this.chunks);
    const at: number[] = [];
    for (const [i, x] of entries) {
      if (!(i >= 0 && i < this.length)) throw new RangeError(`ChunkedList.replace: index ${i} outside 0..${this.length - 1}`);
      w.mine(i >>> LIST_SHIFT)[i & LIST_MASK] = x;
      at.push(i);
    }
    const out = new ChunkedList<T>(w.chunks, this.length);
    REPLACED.set(out, { base: new WeakRef(this), record: at.sort((x, y) => x - y) });
    return out;
  }
}

/** Entries per chunk of a ChunkedSorted made from an array; a chunk grown to twice this splits. */
const CHUNK = 512;

/** Positions in a ChunkedSorted being patched: chunk * POS + index (chunks stay under POS). */
const POS = 4096;

/**
 * A sorted list (unique by its order) kept in chunks, so that a few changes copy the chunk
 * table and the chunks they touch, not the list: at 50k services × 10 a one-endpoint sync
 * patched two ~200k-entry hairpin lists, 1.6 MB each — old-generation garbage a sync later,
 * so a mark of the whole ~500 MB heap every few dozen syncs (GC ~17 of the ~19 ms a sync took
 * on average, against ~1.6 ms at 1k). Read as an array by toArray (made once, kept). Never
 * changed after it is made.
 */
export class ChunkedSorted<T> extends Chunks<T> {
  private constructor(chunks: ReadonlyArray<readonly T[]>, length: number, array?: readonly T[]) {
    super(chunks, length, array);
  }

  /** The list of a sorted, unique array (which it keeps as its toArray: not to be changed). */
  static of<T>(sorted: readonly T[]): ChunkedSorted<T> {
    return new ChunkedSorted(chunked(sorted, CHUNK), sorted.length, sorted);
  }

  /** Whether an entry equals x by `order` (the list's order): two binary searches. */
  has(x: T, order: (a: T, b: T) => number): boolean {
    const pos = findIn(this.chunks, x, order);
    const e = this.chunks[Math.floor(pos / POS)]?.[pos % POS];
    return e !== undefined && order(e, x) === 0;
  }

  /**
   * This list without `remove` and with `add`, each placed by binary search (O(k log n)
   * comparisons for k changes); an added element equal by the order to one there replaces it.
   * The chunk table is copied, and each chunk it changes once. What was done is kept for
   * sortedPatchOf.
   */
  patch(remove: Iterable<T>, add: Iterable<T>, order: (x: T, y: T) => number): ChunkedSorted<T> {
    const { chunks, mine, adopt } = writableChunks(this.chunks);
    let length = this.length;
    const record = patchSequence<T>(
      {
        find: (x) => findIn(chunks, x, order),
        at: (pos) => chunks[Math.floor(pos / POS)]?.[pos % POS],
        set: (pos, x) => void (mine(Math.floor(pos / POS))[pos % POS] = x),
        insert: (pos, x) => {
          const c = Math.floor(pos / POS);
          length++;
          if (c === chunks.length) {
            chunks.push(adopt([x]));
            return;
          }
          const a = mine(c);
          a.splice(pos % POS, 0, x);
          if (a.length >= 2 * CHUNK) {
            chunks.splice(c + 1, 0, adopt(a.splice(CHUNK)));
          }
        },
        removeAt: (pos) => {
          const c = Math.floor(pos / POS);
          const a = mine(c);
          const [x] = a.splice(pos % POS, 1);
          length--;
          if (!a.length) chunks.splice(c, 1);
          return x!;
        },
      },
      remove,
      add,
      order,
    );
    const out = new ChunkedSorted<T>(chunks, length);
    PATCHES.set(out, { base: new WeakRef(this), record });
    return out;
  }
}

/** Where x is or would go in sorted chunks (chunk * POS + index): the first chunk whose last
 *  entry is not before x, then within it; past the last entry, the end of the last chunk. */
function findIn<T>(chunks: ReadonlyArray<readonly T[]>, x: T, order: (a: T, b: T) => number): number {
  let lo = 0;
  let hi = chunks.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const c = chunks[mid]!;
    if (order(c[c.length - 1]!, x) < 0) lo = mid + 1;
    else hi = mid;
  }
  if (lo === chunks.length) return lo === 0 ? 0 : (lo - 1) * POS + chunks[lo - 1]!.length;
  return lo * POS + lowerBound(chunks[lo]!, x, order);
}

/** A list a holder's property can be read from (defineList). */
export type ChunkedLists<T> = ChunkedSorted<T> | ChunkedList<T>;

/**
 * Defines `holder[key]` as the array of `list`, made on the first read (an enumerable property
 * like any other, then a plain value): the list stays registered (registeredList), so code that
 * patches or reads the holder's list again never makes the array. `made` runs on the array once
 * made.
 */
export function defineList<H extends object, T>(holder: H, key: string, list: ChunkedLists<T>, made?: (a: readonly T[]) => void): void {
  register(holder, key, { list, made });
  Object.defineProperty(holder, key, {
    enumerable: true,
    configurable: true,
    get() {
      const a = list.toArray();
      made?.(a);
      Object.defineProperty(holder, key, { value: a, enumerable: true, configurable: false, writable: false });
      return a;
    },
  });
}

/**
 * A copy of `holder` (its own enumerable properties, in their order) whose `key` is `list`,
 * read as an array only when read (defineList). The holder's own `key` is not read, and its
 * other lists are shared as lists (shareList): none is made into an array.
 */
export function withList<H extends object, T>(holder: H, key: keyof H & string, list: ChunkedLists<T>, made?: (a: readonly T[]) => void): H {
  const out = {} as Record<string, unknown>;
  for (const k of Object.keys(holder)) {
    if (k === key) defineList(out, key, list, made);
    else shareList(holder, k, out);
  }
  if (!(key in out)) defineList(out, key, list, made);
  return out as H;
}

/** `to[key]` = `from[key]`, as the same list if `from` has one there (not made into an array). */
export function shareList(from: object, key: string, to: object): void {
  const l = LISTS.get(from)?.get(key);
  if (l) defineList(to, key, l.list, l.made);
  else (to as Record<string, unknown>)[key] = (from as Record<string, unknown>)[key];
}

/** The lists defineList gave their holders, or sortedListOf / chunkedListOf made from arrays:
 *  by holder, then by key. */
const LISTS = new WeakMap<object, Map<string, Registered<unknown>>>();

/** A holder's list, and what runs on its array once made (defineList). */
interface Registered<T> {
  list: ChunkedLists<T>;
  made?(a: readonly T[]): void;
}

function register<T>(holder: object, key: string, r: Registered<T>): void {
  let m = LISTS.get(holder);
  if (!m) LISTS.set(holder, (m = new Map()));
  m.set(key, r as Registered<unknown>);
}

/** The list defineList gave `holder[key]`, if any: no array made. */
export function registeredList<T>(holder: object, key: string): ChunkedLists<T> | undefined {
  return LISTS.get(holder)?.get(key)?.list as ChunkedLists<T> | undefined;
}

/** holder[key] as a ChunkedSorted: the one it was defined with, or one made (once, then kept)
 *  from the array there, which must be sorted and unique by the order it is patched with. */
export function sortedListOf<T>(holder: object, key: string): ChunkedSorted<T> {
  return listOf(holder, key, ChunkedSorted) as ChunkedSorted<T>;
}

/** holder[key] as a ChunkedList: the one it was defined with, or one made (once, then kept)
 *  from the array there. */
export function chunkedListOf<T>(holder: object, key: string): ChunkedList<T> {
  return listOf(holder, key, ChunkedList) as ChunkedList<T>;
}

function listOf<L extends ChunkedLists<unknown>>(holder: object, key: string, kind: { of(a: readonly unknown[]): L; [Symbol.hasInstance](x: unknown): boolean }): L {
  const had = registeredList(holder, key);
  if (had instanceof kind) return had as L;
  const list = kind.of((holder as Record<string, readonly unknown[]>)[key]!);
  register(holder, key, { list });
  return list;
}
