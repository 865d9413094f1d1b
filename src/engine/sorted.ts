// Sorting helpers: plain text order, and a few changes to a long sorted list without comparing
// every element.

/**
 * Plain code-unit order: deterministic, locale-free and cheap. Not localeCompare, which is
 * slower and loads ICU's collation data into the process (~3 MB of resident memory) for an
 * order nothing here needs to be human.
 */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * `sorted` (by `order`, unique by it) without `remove` and with `add`, each placed by binary
 * search: O(k log n) comparisons for k changes (and one copy of the array). An added element
 * equal by `order` to one already there replaces it.
 */
export function patchSorted<T>(sorted: readonly T[], remove: Iterable<T>, add: Iterable<T>, order: (x: T, y: T) => number): T[] {
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
  for (const r of remove) {
    const i = at(r);
    if (i < out.length && order(out[i]!, r) === 0) out.splice(i, 1);
  }
  for (const a of add) {
    const i = at(a);
    if (i < out.length && order(out[i]!, a) === 0) out[i] = a;
    else out.splice(i, 0, a);
  }
  return out;
}

/** Whether `sorted` (by `order`) has an element equal to x by `order`: one binary search. */
export function sortedHas<T>(sorted: readonly T[], x: T, order: (a: T, b: T) => number): boolean {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const c = order(sorted[mid]!, x);
    if (c === 0) return true;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return false;
}
