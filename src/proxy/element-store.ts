// One set's elements as a data plane keeps them between steps (kube-proxy's nftElementStorage
// idea), for both planes: the desired table's element array, changed in place, with every
// element's place in it, and — while a step records — what the step did to each key, which
// becomes the element changes the engine writes (it keeps no element itself).
import { sameElementValue, type DesiredNftTable } from '../engine/nft-diff.js';
import type { NftElementChange } from '../engine/types.js';
import type { NftFamily } from '../kernel/nft-types.js';
import type { SetElement } from '../kernel/nftables.js';

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

/**
 * A set's elements: an array in no particular order (the last element fills a removed one's
 * place) with every element's index in it. A store with `keyOf` indexes its elements by that
 * key's text and counts the owners of a key put twice (keys two owners can both put: a hairpin
 * endpoint, a cluster IP); without it, by the element objects themselves (a frontend's keys,
 * which one owner puts: no text per element), and an endpoint map holds blocks of its endpoint
 * count (a frontend's endpoints), indexed by the block's array.
 */
export class ElementStore {
  /** The elements by key text (a keyed store), or by the element objects themselves. */
  private readonly byKey: KeyedArray<string, SetElement> | undefined;
  private readonly byElement: KeyedArray<SetElement, SetElement> | undefined;
  /** An endpoint map's blocks: each block's number, and the block at each number. */
  private readonly blockOf = new Map<readonly SetElement[], number>();
  private readonly blocks: Array<readonly SetElement[]> = [];
  /** The current step's record by key (undefined: not recording). */
  private touched: Map<string, Touch> | undefined;

  /** `set`: the desired set whose elements array the store keeps (its elements indexed now). */
  constructor(
    readonly family: NftFamily,
    readonly set: DesiredSet,
    private readonly keyOf?: (e: SetElement) => string,
  ) {
    const given = set.elements.splice(0);
    if (keyOf) this.byKey = new KeyedArray(set.elements, keyOf);
    else this.byElement = new KeyedArray(set.elements, (e) => e);
    for (const e of given) this.add(e);
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

  /** A block of endpoint-map elements, as the last block (every block of the map has as many
   *  elements as its name's count). */
  addBlock(block: readonly SetElement[]): void {
    this.blockOf.set(block, this.blocks.length);
    this.blocks.push(block);
    for (const e of block) this.set.elements.push(e);
    if (this.touched) for (const e of block) this.touch(e, false)!.now = e;
  }

  /** A block goes; the last block takes its place. */
  removeBlock(block: readonly SetElement[]): void {
    const b = this.blockOf.get(block);
    if (b === undefined) return;
    if (this.touched) for (const e of block) this.touch(e, true)!.now = undefined;
    this.blockOf.delete(block);
    const n = block.length;
    const els = this.set.elements;
    const last = this.blocks.pop()!;
    if (last !== block) {
      this.blocks[b] = last;
      this.blockOf.set(last, b);
      for (let j = 0; j < n; j++) els[b * n + j] = els[els.length - n + j]!;
    }
    els.length -= n;
  }

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
    return add.length || del.length ? { family: this.family, table, set: this.set.name, add, delete: del } : undefined;
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
