// One set's elements as a data plane keeps them between steps (kube-proxy's nftElementStorage
// idea), for both planes: the desired table's element array, changed in place, with every
// element's place in it, and — while a step records — what the step did to each key, which
// becomes the element changes the engine writes (it keeps no element itself).
import { sameElementValue, type DesiredNftTable } from '../engine/nft-diff.js';
import type { NftElementChange } from '../engine/types.js';
import { keyLength, mapTypes, type NftFamily } from '../kernel/nft-types.js';
import { elementList as decoded, hashBytes, PackedElements, sameBytes, type SetElement } from '../kernel/nftables.js';

type DesiredSet = DesiredNftTable['sets'][number];

/** An element's key parts as one text: the key of a keyed store whose parts are text already
 *  (canonical addresses, protocols named) and of a step's record. */
export const keyText = (e: SetElement): string => e.key.join(' ');

/** What a step did to one key: the element there before it, and after it. */
interface Touch {
  was: SetElement | undefined;
  now: SetElement | undefined;
}

/**
 * Values in one array, in no particular order (the last value fills a removed one's place), with
 * every key's index, each key counted by its puts (a value two owners both put stays until both
 * took it). `keyOf` finds the key of the value that moves into a hole.
 */
export class KeyedArray<K, T> {
  private readonly at = new Map<K, number>();
  private readonly owners = new Map<K, number>();

  constructor(
    readonly array: T[],
    private readonly keyOf: (v: T) => K,
  ) {}

  get(k: K): T | undefined {
    const i = this.at.get(k);
    return i === undefined ? undefined : this.array[i];
  }

  /** `v` under key `k` (one more owner of a key already there: its value is `v` now). */
  put(k: K, v: T): void {
    const i = this.at.get(k);
    if (i !== undefined) {
      this.owners.set(k, (this.owners.get(k) ?? 1) + 1);
      this.array[i] = v;
      return;
    }
    this.at.set(k, this.array.length);
    this.array.push(v);
  }

  /** One owner of `k` fewer; its value goes with the last. */
  take(k: K): void {
    const i = this.at.get(k);
    if (i === undefined) return;
    const n = this.owners.get(k);
    if (n !== undefined) {
      if (n > 2) this.owners.set(k, n - 1);
      else this.owners.delete(k);
      return;
    }
    this.at.delete(k);
    const last = this.array.pop()!;
    if (i < this.array.length) {
      this.array[i] = last;
      this.at.set(this.keyOf(last), i);
    }
  }
}

/** A store's record of a step: what it did to each key, from record() to changes(). */
abstract class Recorded {
  protected touched: Map<string, Touch> | undefined;
  abstract readonly family: NftFamily;
  /** The set's name. */
  abstract readonly name: string;

  /** Starts this step's record. */
  record(): void {
    this.touched = new Map();
  }

  /** What the step changed since record(), as an element change of table `table` (none:
   *  undefined), and the record ends. A key whose element is the same before and after (taken
   *  and put back with the same value) is no change. */
  changes(table: string): NftElementChange | undefined {
    const touched = this.touched;
    this.touched = undefined;
    if (!touched?.size) return undefined;
    const add: SetElement[] = [];
    const del: SetElement[] = [];
    for (const { was, now } of touched.values()) {
      if (was && now && sameElementValue(was, now)) continue;
      if (was) del.push(was);
      if (now) add.push(now);
    }
    return add.length || del.length ? { family: this.family, table, set: this.name, add, delete: del } : undefined;
  }
}

/**
 * A set's elements: an array in no particular order (the last element fills a removed one's
 * place) with every element's index in it. A store with `keyOf` indexes its elements by that
 * key's text and counts the owners of a key put twice (keys two owners can both put: a cluster
 * IP); without it, by the element objects themselves (a frontend's keys, which one owner puts:
 * no text per element).
 */
export class ElementStore extends Recorded {
  /** The elements by key text (a keyed store), or by the element objects themselves. */
  private readonly byKey: KeyedArray<string, SetElement> | undefined;
  private readonly byElement: KeyedArray<SetElement, SetElement> | undefined;
  /** `set`: the desired set whose elements array the store keeps (its elements indexed now). */
  constructor(
    readonly family: NftFamily,
    readonly set: DesiredSet,
    private readonly keyOf?: (e: SetElement) => string,
  ) {
    super();
    const given = [...decoded(set.elements)];
    const elements: SetElement[] = (set.elements = []);
    if (keyOf) this.byKey = new KeyedArray(elements, keyOf);
    else this.byElement = new KeyedArray(elements, (e) => e);
    for (const e of given) this.add(e);
  }

  get name(): string {
    return this.set.name;
  }

  /** The element's key as this step's record and a keyed store know it. */
  key(e: SetElement): string {
    return (this.keyOf ?? keyText)(e);
  }

  /** The element of a key (a keyed store's; another's: undefined). */
  get(k: string): SetElement | undefined {
    return this.byKey?.get(k);
  }

  add(e: SetElement): void {
    const t = this.touch(e, false);
    this.put(e);
    if (t) t.now = this.keyOf ? this.get(this.key(e)) : e;
  }

  remove(e: SetElement): void {
    const t = this.touch(e, true);
    this.take(e);
    if (t) t.now = this.keyOf ? this.get(this.key(e)) : undefined;
  }

  private put(e: SetElement): void {
    if (this.byKey) this.byKey.put(this.keyOf!(e), e);
    else this.byElement!.put(e, e);
  }

  private take(e: SetElement): void {
    if (this.byKey) this.byKey.take(this.keyOf!(e));
    else this.byElement!.take(e);
  }

  /** The step's record of the element's key, made at its first touch with the element there
   *  before (a keyed store's: its key's element; another's: the element taken, or none before
   *  a put); undefined while not recording. */
  private touch(e: SetElement, taking: boolean): Touch | undefined {
    if (!this.touched) return undefined;
    const k = this.key(e);
    let t = this.touched.get(k);
    if (!t) this.touched.set(k, (t = { was: this.keyOf ? this.get(k) : taking ? e : undefined, now: undefined }));
    return t;
  }
}

/**
 * A plain set's elements as the bytes the kernel holds, for the sets that grow with the
 * endpoints (an endpoint map, a hairpin set): no object or text per element, and a commit
 * copies them as they are (PackedElements). Elements come either in blocks, each one owner's (a
 * frontend's endpoints, encoded once by it; every block of a store as long), indexed by the
 * block's array, or one at a time, indexed by the bytes of their key with their owners counted
 * (a hairpin address that two endpoints put). A removed block or element's place is filled by
 * the last one. A step's record decodes the elements it touches, and only those.
 */
export class PackedStore extends Recorded {
  private bytes = Buffer.alloc(0);
  private count = 0;
  private readonly keyWidth: number;
  private readonly stride: number;
  private readonly desired: DesiredSet;
  /** Whether `desired.elements` is older than the bytes. */
  private stale = true;
  /** Blocks: each block's number, and the block at each number. */
  private readonly blockOf = new Map<Uint8Array, number>();
  private readonly blocks: Uint8Array[] = [];
  /** Elements put one at a time: their places by a hash of their key's bytes (open addressing,
   *  linear probing; -1 empty), and each one's owners. */
  private slots = new Int32Array(0);
  private owners = new Uint32Array(0);
  /** While a step records and has only added elements (new keys, after the others): where
   *  they start, and they are its change as they are; -1 otherwise (touches record it). */
  private addedFrom = -1;

  /** `keyed`: elements are put one at a time (put/take), else in blocks (addBlock/removeBlock). */
  constructor(
    readonly family: NftFamily,
    decl: Omit<DesiredSet, 'elements' | 'unique'>,
    private readonly keyed = false,
  ) {
    super();
    this.keyWidth = keyLength(decl.key);
    this.stride = this.keyWidth + (decl.map && decl.map !== 'verdict' ? keyLength(mapTypes(decl.map)) : 0);
    this.desired = { ...decl, elements: [], unique: true };
  }

  /** The desired set, its elements the bytes now (shared: valid until the next change). */
  get set(): DesiredSet {
    if (this.stale) {
      this.desired.elements = PackedElements.fixed(this.desired, this.bytes.subarray(0, this.count * this.stride), this.count, this.keyWidth, this.stride - this.keyWidth);
      this.stale = false;
    }
    return this.desired;
  }

  get name(): string {
    return this.desired.name;
  }

  override record(): void {
    this.touched = undefined;
    this.addedFrom = this.count;
  }

  override changes(table: string): NftElementChange | undefined {
    const from = this.addedFrom;
    if (from < 0) return super.changes(table);
    this.addedFrom = -1;
    if (from === this.count) return undefined;
    const bytes = Buffer.from(this.bytes.subarray(from * this.stride, this.count * this.stride));
    const add = PackedElements.fixed(this.desired, bytes, this.count - from, this.keyWidth, this.stride - this.keyWidth);
    return { family: this.family, table, set: this.name, add, delete: [] };
  }

  /** Before the step's first removal: what it added so far recorded as touches (new keys: none
   *  was there before). */
  private touching(): void {
    const from = this.addedFrom;
    if (from < 0) return;
    this.addedFrom = -1;
    const touched = (this.touched = new Map<string, Touch>());
    for (let i = from; i < this.count; i++) {
      const e = this.element(this.bytes, i * this.stride);
      touched.set(keyText(e), { was: undefined, now: e });
    }
  }

  /** How many bytes an element takes: its key's, then its value's. */
  get width(): number {
    return this.stride;
  }

  /** A block of elements' bytes (block.length / width of them), as the last block. */
  addBlock(block: Uint8Array): void {
    this.blockOf.set(block, this.blocks.length);
    this.blocks.push(block);
    const n = block.length / this.stride;
    this.room(n);
    this.bytes.set(block, this.count * this.stride);
    this.count += n;
    if (this.touched) for (let i = 0; i < n; i++) this.touch(block, i * this.stride, false, true);
  }

  /** A block goes; the last block takes its place. */
  removeBlock(block: Uint8Array): void {
    const b = this.blockOf.get(block);
    if (b === undefined) return;
    const n = block.length / this.stride;
    this.touching();
    if (this.touched) for (let i = 0; i < n; i++) this.touch(block, i * this.stride, true, false);
    this.blockOf.delete(block);
    const last = this.blocks.pop()!;
    if (last !== block) {
      this.blocks[b] = last;
      this.blockOf.set(last, b);
      this.bytes.copy(this.bytes, b * block.length, (this.count - n) * this.stride, this.count * this.stride);
    }
    this.count -= n;
    this.stale = true;
  }

  /** The element whose bytes are `width` of `from` from `offset`, or one more owner of its key. */
  put(from: Uint8Array, offset: number): void {
    const h = this.find(from, offset);
    const i = this.slots[h]!;
    if (i >= 0) {
      this.owners[i]!++;
      return;
    }
    if (this.touched) this.touch(from, offset, false, true);
    this.room(1);
    const b = this.bytes;
    const at = this.count * this.stride;
    for (let k = 0; k < this.stride; k++) b[at + k] = from[offset + k]!;
    this.owners[this.count] = 1;
    if (2 * (this.count + 1) > this.slots.length) {
      this.count++;
      this.reindex();
    } else this.slots[h] = this.count++;
  }

  /** One owner of the key of the element at `offset` of `from` fewer; with none left, the
   *  element goes and the last takes its place. */
  take(from: Uint8Array, offset: number): void {
    let h = this.find(from, offset);
    const i = this.slots[h]!;
    if (i < 0 || --this.owners[i]! > 0) return;
    this.touching();
    if (this.touched) this.touch(from, offset, true, false);
    this.unslot(h);
    const last = --this.count;
    if (i < last) {
      // the last element moves to i: its slot follows
      h = this.find(this.bytes, last * this.stride);
      this.bytes.copy(this.bytes, i * this.stride, last * this.stride, (last + 1) * this.stride);
      this.owners[i] = this.owners[last]!;
      this.slots[h] = i;
    }
    this.stale = true;
  }

  /** The slot of the key at `offset` of `b`: its element's, or the empty one it would take. */
  private find(b: Uint8Array, offset: number): number {
    if (!this.slots.length) this.reindex();
    const { slots, bytes, keyWidth, stride } = this;
    const mask = slots.length - 1;
    for (let h = hashBytes(b, offset, keyWidth) & mask; ; h = (h + 1) & mask) {
      const i = slots[h]!;
      if (i < 0 || sameBytes(bytes, i * stride, b, offset, keyWidth)) return h;
    }
  }

  /** Slot h emptied, the probe runs after it closed up (backward shift). */
  private unslot(h: number): void {
    const { slots, bytes, keyWidth, stride } = this;
    const mask = slots.length - 1;
    for (let j = (h + 1) & mask; slots[j]! >= 0; j = (j + 1) & mask) {
      const home = hashBytes(bytes, slots[j]! * stride, keyWidth) & mask;
      // the element at j stays where its probe from `home` still reaches it without h
      if (((j - home) & mask) < ((j - h) & mask)) continue;
      slots[h] = slots[j]!;
      h = j;
    }
    slots[h] = -1;
  }

  /** Every element's slot again, in a table twice their number or more. */
  private reindex(): void {
    let cap = 16;
    while (cap < 2 * this.count) cap *= 2;
    cap *= 2;
    this.slots = new Int32Array(cap).fill(-1);
    const mask = cap - 1;
    for (let i = 0; i < this.count; i++) {
      let h = hashBytes(this.bytes, i * this.stride, this.keyWidth) & mask;
      while (this.slots[h]! >= 0) h = (h + 1) & mask;
      this.slots[h] = i;
    }
  }

  /** Room for n more elements (the bytes and the owners grow by half again). */
  private room(n: number): void {
    this.stale = true;
    const need = this.count + n;
    if (need * this.stride <= this.bytes.length) return;
    const cap = Math.max(need, Math.ceil((this.bytes.length / this.stride) * 1.5), 64);
    const grown = Buffer.alloc(cap * this.stride);
    this.bytes.copy(grown, 0, 0, this.count * this.stride);
    this.bytes = grown;
    if (!this.keyed) return;
    const owners = new Uint32Array(cap);
    owners.set(this.owners.subarray(0, this.count));
    this.owners = owners;
  }

  /** The element whose bytes start at `offset` of `b`, decoded. */
  private element(b: Uint8Array, offset: number): SetElement {
    const one = Buffer.from(b.buffer, b.byteOffset + offset, this.stride);
    return PackedElements.fixed(this.desired, one, 1, this.keyWidth, this.stride - this.keyWidth).decode()[0]!;
  }

  /** The record of the key of the element at `offset` of `b`, made at its first touch with the
   *  element there before (a block's: the one taken, or none before an add; a keyed one's: the
   *  store's of that key), and the element there after: this one (`present`), or none. */
  private touch(b: Uint8Array, offset: number, taking: boolean, present: boolean): void {
    const e = this.element(b, offset);
    const k = keyText(e);
    let t = this.touched!.get(k);
    if (!t) {
      let was = taking ? e : undefined;
      if (this.keyed) {
        const i = this.slots[this.find(b, offset)]!;
        was = i >= 0 ? this.element(this.bytes, i * this.stride) : undefined;
      }
      this.touched!.set(k, (t = { was, now: undefined }));
    }
    t.now = present ? e : undefined;
  }
}
