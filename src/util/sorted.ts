// Sorting helpers: plain text order, insertion sort of short runs, a sort by a precomputed
// numeric key.
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
