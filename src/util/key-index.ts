// Where each item of a long unordered list is, by key, for a few changes at a time.

/**
 * The positions of a list's items by key: an open-addressing table (linear probing) of
 * positions over the list, which stays the caller's plain array and changes only through this:
 * push, and removeAt (the last item fills the hole). Each is O(1), so a few changes to a list
 * of 200k cost what they cost to one of 2k. No key text or Map entry per item: a Map by key
 * text was ~160 B an entry (~6 MB for the 40k hairpin entries of 10k services), this is 4–8 B.
 * `hash` and `same` must agree: same(a, b) implies hash(a) === hash(b).
 */
export class KeyIndex<T> {
  private slots = new Int32Array(0);
  private mask = 0;

  constructor(
    readonly items: T[],
    private readonly hash: (x: T) => number,
    private readonly same: (a: T, b: T) => boolean,
  ) {
    this.resize();
  }

  /** The position of the item `same` as x, or -1. */
  indexOf(x: T): number {
    for (let s = this.hash(x) & this.mask; ; s = (s + 1) & this.mask) {
      const p = this.slots[s]!;
      if (p === 0) return -1;
      if (this.same(this.items[p - 1]!, x)) return p - 1;
    }
  }

  push(x: T): void {
    this.items.push(x);
    if (this.items.length * 2 > this.slots.length) this.resize();
    else this.place(this.items.length - 1);
  }

  /** Removes the item at i: the last item takes its place. */
  removeAt(i: number): void {
    const items = this.items;
    this.free(this.slotOf(i));
    const last = items.length - 1;
    if (i !== last) {
      this.slots[this.slotOf(last)] = i + 1;
      items[i] = items[last]!;
    }
    items.pop();
  }

  private slotOf(i: number): number {
    for (let s = this.hash(this.items[i]!) & this.mask; ; s = (s + 1) & this.mask) if (this.slots[s] === i + 1) return s;
  }

  private place(i: number): void {
    let s = this.hash(this.items[i]!) & this.mask;
    while (this.slots[s] !== 0) s = (s + 1) & this.mask;
    this.slots[s] = i + 1;
  }

  /** Empties slot s, moving back each later entry of its run that probing from its home slot
   *  would no longer reach (deletion without tombstones). */
  private free(s: number): void {
    const m = this.mask;
    for (let j = (s + 1) & m; this.slots[j] !== 0; j = (j + 1) & m) {
      const home = this.hash(this.items[this.slots[j]! - 1]!) & m;
      // its home lies cyclically after s: it is reached without passing s
      if (((j - home) & m) < ((j - s) & m)) continue;
      this.slots[s] = this.slots[j]!;
      s = j;
    }
    this.slots[s] = 0;
  }

  /** Room for the items at a load of at most 1/3 (push resizes past 1/2). */
  private resize(): void {
    let cap = 16;
    while (cap < this.items.length * 3) cap *= 2;
    this.slots = new Int32Array(cap);
    this.mask = cap - 1;
    for (let i = 0; i < this.items.length; i++) this.place(i);
  }
}

/** FNV-1a over parts (strings by UTF-16 unit, numbers as one unit each), finalised so that
 *  the low bits, which KeyIndex uses, depend on every part. */
export function hashParts(...parts: ReadonlyArray<string | number>): number {
  let h = 0x811c9dc5;
  for (const p of parts) {
    if (typeof p === 'number') h = Math.imul(h ^ p, 0x01000193);
    else for (let i = 0; i < p.length; i++) h = Math.imul(h ^ p.charCodeAt(i), 0x01000193);
    h = Math.imul(h ^ 0xff, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x45d9f3b);
  return h ^ (h >>> 16);
}
