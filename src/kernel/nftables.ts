// nftables over nfnetlink. A transaction (NftTransaction) collects typed ops; Nftables.commit
// sends them as one NFNL_MSG_BATCH_BEGIN … BATCH_END batch in one sendmsg: the kernel applies
// all of them or none. Listing reads tables, chains, sets (with elements) and rules back into
// the same plain-data model.
import { NetlinkError } from '../errors.js';
import { OpStatuses, redoInterrupted } from './batch.js';
import {
  native,
  type HandleOptions,
  type NativeNftCommitOptions,
  type NativeNftHandle,
  type NativeNftSet,
  type NativeNftElementExtra,
  type NativeNftElements,
  type NativeNftWireEncoder,
  type SocketStats,
} from '../native.js';
import { freeNow, INTERVAL_END, OpStreamWriter } from './nft-wire.js';
import { canonicalExpr, renderExpr, type Expr, type Verdict } from './nft-expr.js';
import {
  DATATYPES, FAMILY_NUMBER, VERDICT_DATATYPE, decodeKey, familyName, keyTypesFromId, mapTypes, rangeToText,
  type KeyValue, type NftFamily,
} from './nft-types.js';

export { dataValues, mapTypes } from './nft-types.js';
export type { NftFamily, DataType, KeyValue } from './nft-types.js';
export type { ChainSpec, ElementBytes, HookName, NftOp, NftVerb, RuleSpec, SetElement, SetSpec, TableSpec } from './nft-model.js';
import type { ChainSpec, ElementBytes, HookName, NftOp, NftVerb, RuleSpec, SetElement, SetSpec, TableSpec } from './nft-model.js';

const HOOKS: HookName[] = ['prerouting', 'input', 'forward', 'output', 'postrouting'];
/** nft's named priorities (ip/ip6/inet). */
export const PRIORITY = { raw: -300, mangle: -150, dstnat: -100, filter: 0, security: 50, srcnat: 100 } as const;

export interface CommitOptions {
  /**
   * Split the ops into several transactions of at most this much work each (one unit per
   * table/chain/set/rule op, one per set element). Each transaction is atomic on its own;
   * the whole load is NOT: on a failure, earlier transactions stay committed and later ones are
   * not sent. Use for huge loads (the kernel's commit is superlinear in the transaction size)
   * when all-or-nothing across the whole load is not needed. Default: one atomic transaction.
   */
  maxOpsPerTransaction?: number;
  /** Commit only if the ruleset generation is still this one (else ERESTART): optimistic
   *  concurrency against a listing's genId. */
  genId?: number;
  /**
   * true: NLM_F_ACK on every op, every op is answered. false: only failed ops are answered
   * (nfnetlink reports each failure with or without the flag, still mapped to its op).
   * Default: only the last op of each transaction asks for an ack — failures are still
   * reported per op, and that one ack confirms the kernel went through the whole batch (a
   * batch with no reply at all is 'unknown'), without one reply (and one recvmsg) per op.
   */
  acks?: boolean;
}

export type NftOpStatus = 'ok' | 'error' | 'rolled-back' | 'not-sent' | 'unknown';
const STATUS: readonly NftOpStatus[] = ['not-sent', 'ok', 'error', 'unknown', 'rolled-back'];

export interface NftTransactionReport {
  firstOp: number;
  endOp: number;
  sent: boolean;
  committed: boolean;
}

/** What a commit did: per op, and per transaction when the load was split. */
export class NftCommitResult extends OpStatuses<NftOpStatus> {
  readonly transactions: NftTransactionReport[];

  constructor(raw: { statuses: Uint8Array; errors: NetlinkError[]; transactions: NftTransactionReport[]; sendmsgCalls: number }) {
    super(raw.statuses, raw.errors, raw.sendmsgCalls, STATUS);
    this.transactions = raw.transactions;
  }

  /** Every transaction committed. */
  get ok(): boolean {
    return this.errors.length === 0 && this.transactions.every((t) => t.committed);
  }

}

// ---- transactions --------------------------------------------------------------------------

function checkName(what: string, s: string, max = 255): void {
  // A UTF-16 code unit is at most 3 UTF-8 bytes: short names skip the byte count.
  if (
    typeof s !== 'string' ||
    s.length === 0 ||
    s.indexOf('\0') !== -1 ||
    (s.length * 3 > max && Buffer.byteLength(s) > max)
  )
    throw NetlinkError.invalid('nftables', `${what} must be a non-empty name of at most ${max} bytes`);
}

function checkFamily(f: string): void {
  if (!(f in FAMILY_NUMBER)) throw NetlinkError.invalid('nftables', `family must be ip, ip6 or inet (got ${f})`);
}

function validateSet(s: SetSpec): void {
  checkFamily(s.family);
  checkName('table', s.table);
  checkName('set', s.name);
  if (!Array.isArray(s.key) || s.key.length === 0 || s.key.length > 16)
    throw NetlinkError.invalid('nftables', `set ${s.name}: key must list 1..16 datatypes`);
  for (const t of s.key) if (!(t in DATATYPES)) throw NetlinkError.invalid('nftables', `set ${s.name}: unknown datatype ${t}`);
  if (s.interval && (s.key.length !== 1 || (s.key[0] !== 'ipv4_addr' && s.key[0] !== 'ipv6_addr')))
    throw NetlinkError.invalid('nftables', `set ${s.name}: interval sets take a single ipv4_addr or ipv6_addr key (concatenated ranges are not supported)`);
  if (s.map !== undefined && s.map !== 'verdict') {
    const types = mapTypes(s.map);
    if (!types.length || types.length > 16 || !types.every((t) => typeof t === 'string' && t in DATATYPES))
      throw NetlinkError.invalid('nftables', `set ${s.name}: unknown map type ${String(s.map)}`);
  }
}

function renderSetType(s: SetSpec): string {
  return s.key.join(' . ') + (s.map ? ` : ${s.map === 'verdict' ? 'verdict' : mapTypes(s.map).join(' . ')}` : '');
}

function renderKey(e: SetElement): string {
  return e.key.join(' . ');
}

function renderVerdict(v: Verdict): string {
  return v.chain !== undefined ? `${v.code} ${v.chain}` : v.code;
}

/** Renders one op as nft-like text plus the expressions, for readable test diffs (`exprs`
 *  false: a rule's expressions counted, on its one line). */
export function renderOp(op: NftOp, exprs = true): string {
  switch (op.kind) {
    case 'table':
      return `${op.verb} table ${op.table.family} ${op.table.name}`;
    case 'chain': {
      const c = op.chain;
      const h = c.hook && (op.verb === 'add' || op.verb === 'create')
        ? ` { type ${c.hook.type} hook ${c.hook.hook} priority ${c.hook.priority}; ${c.hook.policy ? `policy ${c.hook.policy}; ` : ''}}`
        : '';
      return `${op.verb} chain ${c.family} ${c.table} ${c.name}${h}`;
    }
    case 'set': {
      const s = op.set;
      const flags = [s.interval && 'interval', s.dynamic && 'dynamic', (s.timeout || s.timeoutFlag) && 'timeout'].filter(Boolean);
      const attrs = op.verb === 'add' || op.verb === 'create'
        ? ` { type ${renderSetType(s)};${flags.length ? ` flags ${flags.join(',')};` : ''}${s.timeout ? ` timeout ${s.timeout}ms;` : ''}${s.comment ? ` comment "${s.comment}";` : ''} }`
        : '';
      return `${op.verb} ${s.map ? 'map' : 'set'} ${s.family} ${s.table} ${s.name}${attrs}`;
    }
    case 'elements': {
      const els = elementList(op.elements).map((e) => {
        let t = renderKey(e);
        if (e.timeout) t += ` timeout ${e.timeout}ms`;
        if (e.comment) t += ` comment "${e.comment}"`;
        if (e.verdict) t += ` : ${renderVerdict(e.verdict)}`;
        else if (e.data !== undefined) t += ` : ${[e.data].flat().join(' . ')}`;
        return t;
      });
      return `${op.verb} element ${op.set.family} ${op.set.table} ${op.set.name} { ${els.join(', ')} }`;
    }
    case 'rule': {
      const r = op.rule;
      const where = r.handle !== undefined ? ` handle ${r.handle}` : op.position !== undefined ? ` position ${op.position}` : '';
      const head = `${op.verb} rule ${r.family} ${r.table} ${r.chain}${where}${r.comment ? ` comment "${r.comment}"` : ''}`;
      if (op.verb === 'delete' || op.verb === 'destroy') return head;
      if (!exprs) return `${head} (${r.exprs.length} expressions)`;
      return [head, ...r.exprs.map((e) => `  ${renderExpr(e)}`)].join('\n');
    }
  }
}

export interface NftTransactionOptions {
  /**
   * Keep the queued ops as objects in `ops` (default true): what toString and test doubles
   * (FakeNftables) read. Every op is encoded into the transaction's op
   * stream when it is queued either way; a bulk load that only commits can pass false, so the
   * rule and expression objects it queues are garbage as soon as they are queued (at 30k rules
   * that is most of the cost of building the transaction: the young generation no longer
   * copies and promotes them).
   */
  keepOps?: boolean;
}

/** Stream bytes per piece handed to the pipelined encoder (~2,000 rules); smaller
 *  transactions are encoded at commit in one go. */
const FEED_BYTES = 256 << 10;
/** The commit options a pipelined encoding is built with: commit's defaults. */
const PIPELINE_OPTIONS: NativeNftCommitOptions = { ackMode: 'last' };

/**
 * A batch of ops, validated and encoded as they are queued (knftables style): a bad op throws
 * from the call that queues it and leaves the transaction as it was. `ops` is plain data, what
 * an NftablesApi implementation (the kernel or a test double) receives.
 */
export class NftTransaction {
  readonly ops: NftOp[] = [];
  // Small to start (a one-element update allocates little); it grows x2, x4 past 1 MiB.
  private readonly stream = new OpStreamWriter(512);
  private readonly keep: boolean;
  /** The addon's encoder of the stream's first `fedTo` bytes (pipelined, see feed()). */
  private encoder: NativeNftWireEncoder | undefined;
  private fedTo = 0;

  constructor(opts: NftTransactionOptions = {}) {
    this.keep = opts.keepOps !== false;
  }

  /** Builds the op about to be queued: what its checks throw names its index (`index`). */
  private at(build: () => NftOp): NftOp {
    try {
      return build();
    } catch (e) {
      throw NetlinkError.atOp(e, { index: this.size });
    }
  }

  private push(op: NftOp): this {
    this.stream.write(op);
    if (this.keep) this.ops.push(op);
    if (this.stream.bytes - this.fedTo >= FEED_BYTES) this.feed();
    return this;
  }

  /** Queues an op given as data (what a plan holds): the op stream's checks and encoding, as
   *  for the typed calls. A large transaction can be queued op by op
   *  with the event loop let in between (its encoding is pipelined, see feed()). */
  queue(op: NftOp): this {
    return this.push(op);
  }

  /**
   * Hands the ops queued since the last feed to the addon, which encodes them to netlink on the
   * thread pool while more ops are queued: a large transaction's commit then only encodes its
   * tail. Bytes once fed never change (the stream only appends; a failed op is rolled back
   * before it is fed).
   */
  private feed(): void {
    const all = this.stream.result();
    this.encoder ??= new (native().NftWireEncoder)(PIPELINE_OPTIONS);
    this.encoder.feed(all.subarray(this.fedTo));
    this.fedTo = all.length;
  }

  /** The op stream of the ops queued so far (what commit hands the addon). */
  encoded(): Uint8Array {
    if (this.stream.released) throw NetlinkError.invalid('nftables', 'the transaction was released');
    return this.stream.result();
  }

  /** For Nftables.commit with the default options: the pipelined encoder, taken once (a later
   *  commit of this transaction encodes the whole stream, or feeds a new encoder from the start). */
  takeEncoder(): NativeNftWireEncoder | undefined {
    const e = this.encoder;
    this.encoder = undefined;
    this.fedTo = 0;
    return e;
  }

  /**
   * Lets go of the transaction's encoded stream and kept ops once it is committed (a large
   * transaction's stream buffer is freed at the next young-generation collection, not the next
   * full one). It cannot be queued to or committed after.
   */
  release(): void {
    this.stream.release();
    this.ops.length = 0;
    this.encoder = undefined;
    this.fedTo = 0;
  }

  /** The queued ops as objects; throws for a transaction built with keepOps: false. */
  keptOps(what: string): NftOp[] {
    if (!this.keep) throw NetlinkError.invalid('nftables', `${what} needs the transaction's ops: build it without keepOps: false`);
    return this.ops;
  }

  private table(verb: NftVerb, t: TableSpec): this {
    return this.push(this.at(() => {
      checkFamily(t.family);
      checkName('table', t.name);
      return { verb, kind: 'table', table: t };
    }));
  }
  addTable(t: TableSpec): this { return this.table('add', t); }
  /** Fails with EEXIST if the table exists. */
  createTable(t: TableSpec): this { return this.table('create', t); }
  deleteTable(t: TableSpec): this { return this.table('delete', t); }
  /** Delete that does not fail when absent (kernel 6.3+; older kernels answer EINVAL). */
  destroyTable(t: TableSpec): this { return this.table('destroy', t); }
  /** Removes every rule of every chain of the table. */
  flushTable(t: TableSpec): this { return this.table('flush', t); }

  private chain(verb: NftVerb, c: ChainSpec): this {
    return this.push(this.at(() => {
      checkFamily(c.family);
      checkName('table', c.table);
      checkName('chain', c.name, 255);
      if (c.hook) {
        if (!HOOKS.includes(c.hook.hook)) throw NetlinkError.invalid('nftables', `chain ${c.name}: unknown hook ${c.hook.hook}`);
        if (!['filter', 'nat', 'route'].includes(c.hook.type)) throw NetlinkError.invalid('nftables', `chain ${c.name}: unknown type ${c.hook.type}`);
        if (!Number.isInteger(c.hook.priority)) throw NetlinkError.invalid('nftables', `chain ${c.name}: priority must be an integer`);
      }
      return { verb, kind: 'chain', chain: c };
    }));
  }
  addChain(c: ChainSpec): this { return this.chain('add', c); }
  createChain(c: ChainSpec): this { return this.chain('create', c); }
  deleteChain(c: ChainSpec): this { return this.chain('delete', c); }
  destroyChain(c: ChainSpec): this { return this.chain('destroy', c); }
  /** Removes every rule of the chain. */
  flushChain(c: ChainSpec): this { return this.chain('flush', c); }

  private set(verb: NftVerb, s: SetSpec): this {
    return this.push(this.at(() => {
      validateSet(s);
      return { verb, kind: 'set', set: s };
    }));
  }
  addSet(s: SetSpec): this { return this.set('add', s); }
  createSet(s: SetSpec): this { return this.set('create', s); }
  deleteSet(s: SetSpec): this { return this.set('delete', s); }
  destroySet(s: SetSpec): this { return this.set('destroy', s); }
  /** Removes every element. */
  flushSet(s: SetSpec): this { return this.set('flush', s); }

  private elements(verb: 'add' | 'create' | 'delete' | 'destroy', s: SetSpec, elements: SetElement[]): this {
    // Encoding validates every key now, so a bad element fails here and not at commit.
    return this.push(this.at(() => {
      validateSet(s);
      return { verb, kind: 'elements', set: s, elements };
    }));
  }
  addElements(s: SetSpec, elements: SetElement[]): this { return this.elements('add', s, elements); }
  /** Fails with EEXIST if an element exists. */
  createElements(s: SetSpec, elements: SetElement[]): this { return this.elements('create', s, elements); }
  deleteElements(s: SetSpec, elements: SetElement[]): this { return this.elements('delete', s, elements); }
  destroyElements(s: SetSpec, elements: SetElement[]): this { return this.elements('destroy', s, elements); }

  private rule(verb: 'add' | 'insert' | 'replace' | 'delete' | 'destroy', r: RuleSpec, position?: number): this {
    return this.push(this.at(() => {
      checkFamily(r.family);
      checkName('table', r.table);
      checkName('chain', r.chain);
      if ((verb === 'replace' || verb === 'delete' || verb === 'destroy') && !(Number.isInteger(r.handle) && r.handle! > 0))
        throw NetlinkError.invalid('nftables', `${verb} rule needs the rule's handle`);
      if ((verb === 'add' || verb === 'insert' || verb === 'replace') && (!Array.isArray(r.exprs) || r.exprs.length === 0))
        throw NetlinkError.invalid('nftables', `${verb} rule needs expressions`);
      const op: NftOp = { verb, kind: 'rule', rule: r };
      if (position !== undefined) op.position = position;
      return op;
    }));
  }
  /** Appends (after rule `position` when given). */
  addRule(r: RuleSpec, opts?: { after?: number }): this { return this.rule('add', r, opts?.after); }
  /** Prepends (before rule `position` when given). */
  insertRule(r: RuleSpec, opts?: { before?: number }): this { return this.rule('insert', r, opts?.before); }
  /** Replaces the rule with r.handle. */
  replaceRule(r: RuleSpec): this { return this.rule('replace', r); }
  deleteRule(r: Omit<RuleSpec, 'exprs'> & { exprs?: Expr[]; handle: number }): this {
    return this.rule('delete', { exprs: [], ...r });
  }
  destroyRule(r: Omit<RuleSpec, 'exprs'> & { exprs?: Expr[]; handle: number }): this {
    return this.rule('destroy', { exprs: [], ...r });
  }

  get size(): number {
    return this.stream.count;
  }

  /** nft-like text, one op per line (rules followed by their expressions). */
  toString(): string {
    if (!this.keep) return `(${this.size} ops, built with keepOps: false)`;
    return this.ops.map((op) => renderOp(op)).join('\n');
  }
}

/** Checks ops one at a time as a transaction queues them (throwing what it throws), each written
 *  into the same buffer and taken out again: checking many ops allocates no stream per op. */
export function opChecker(): (op: NftOp) => void {
  const w = new OpStreamWriter(512);
  return (op) => w.check(op);
}

// ---- listing -------------------------------------------------------------------------------

export interface TableInfo extends TableSpec {
  handle: number;
  flags: number;
}
export interface ChainInfo extends ChainSpec {
  handle: number;
}
export interface SetInfo extends SetSpec {
  handle: number;
  /** The elements, decoded (empty when listed without elements). */
  elements: SetElement[];
}

export interface RuleInfo extends RuleSpec {
  handle: number;
}
export interface NftRuleset {
  /** The generation the listing is consistent with (pass it to commit's genId). */
  genId: number;
  tables: TableInfo[];
  chains: ChainInfo[];
  sets: SetInfo[];
  rules: RuleInfo[];
}

function setFromNative(s: NativeNftSet): SetInfo {
  const key = keyTypesFromId(s.keyType, s.keyLen);
  if (!key)
    throw new NetlinkError({ message: `nftables list: set ${s.table}/${s.name} has a key type ipvsync does not know (${s.keyType}/${s.keyLen} bytes)`, code: 'EPROTO', errno: 71, kind: 'decode', op: 'NFT_MSG_GETSET' });
  const info: SetInfo = { family: familyName(s.family), table: s.table, name: s.name, key, handle: s.handle, elements: [] };
  if (s.flags & 0x8) {
    if (s.dataType === VERDICT_DATATYPE) info.map = 'verdict';
    else {
      const d = keyTypesFromId(s.dataType ?? 0, s.dataLen ?? 0);
      if (d) info.map = d.length === 1 ? d[0] : d;
    }
  }
  if (s.flags & 0x4) info.interval = true;
  if (s.flags & 0x20) info.dynamic = true;
  if (s.timeout) info.timeout = s.timeout;
  else if (s.flags & 0x10) info.timeoutFlag = true;
  if (s.comment) info.comment = s.comment;
  if (s.size) info.size = s.size;
  const raw = s.elements;
  if (raw) info.elements = new PackedElements(info, raw).decode();
  return info;
}

/** What reading a set's elements takes of its declaration. */
type ElementTypes = Readonly<Pick<SetSpec, 'key' | 'map' | 'interval'>>;

/**
 * A set's elements as the kernel lists them, not decoded: the bytes of every key, key end and
 * value back to back (where each element's are: keyAt, keyLength, dataAt, dataLength), and the
 * rarer parts of the elements that have any. An interval set's CIDRs are start and end
 * elements here, as in the kernel. Also a plain set's elements as a builder encoded them
 * (PackedElements.fixed): what a commit writes as it is (ElementBytes).
 */
export class PackedElements implements ElementBytes {
  readonly count: number;
  readonly bytes: Buffer;
  /** Per element, the offset and length of its key, key end and value (NativeNftElements):
   *  only when the elements' lengths differ; else `widths`. */
  private readonly spans: Uint32Array | undefined;
  private readonly widths: readonly [number, number, number];
  /** The three widths' sum: element i's key starts at i × stride (without spans). */
  private readonly stride: number;
  private readonly extras: ReadonlyMap<number, NativeNftElementExtra>;
  /** keyTable's, made when first asked for. */
  private keys: { slots: Int32Array; mask: number; repeats: number[] } | undefined;

  constructor(readonly set: ElementTypes, raw: NativeNftElements) {
    this.count = raw.count;
    this.bytes = raw.bytes;
    this.spans = raw.spans;
    this.widths = raw.widths ?? [0, 0, 0];
    this.stride = this.widths[0] + this.widths[1] + this.widths[2];
    this.extras = new Map(raw.extras.map((x) => [x.index, x]));
  }

  /** `count` elements of a plain set, each a key of `keyWidth` bytes and a value of
   *  `dataWidth` (0: none) back to back in `bytes` (shared, not copied). */
  static fixed(set: ElementTypes, bytes: Buffer, count: number, keyWidth: number, dataWidth: number): PackedElements {
    return new PackedElements(set, { count, bytes, widths: [keyWidth, 0, dataWidth], extras: [] });
  }

  get length(): number {
    return this.count;
  }

  /** Elements start to end (exclusive) of a set without extras (a fixed one's): their bytes shared. */
  slice(start: number, end: number): PackedElements {
    if (this.spans || this.extras.size) throw new Error('PackedElements.slice: only a fixed-width set without extras is sliced');
    const from = Math.max(0, Math.min(start, this.count));
    const to = Math.max(from, Math.min(end, this.count));
    return PackedElements.fixed(this.set, this.bytes.subarray(from * this.stride, to * this.stride), to - from, this.widths[0], this.widths[2]);
  }

  /** As JSON (a plan's ops printed): the elements decoded. */
  toJSON(): SetElement[] {
    return this.decode();
  }

  /** The elements as the kernel would list them after adding these (a test double's listing):
   *  the NEWSETELEM messages a transaction adding them sends, read by the addon's decoder of a
   *  listing. */
  static of(set: SetSpec, elements: SetElement[]): PackedElements {
    const NFT_MSG_NEWSETELEM = (10 << 8) | 12;
    const codec = native().codec.nftables;
    const stream = new NftTransaction({ keepOps: false }).addElements(set, elements).encoded();
    const parts: NativeNftElements[] = [];
    for (const batch of codec.encodeWire(stream, { ackMode: 'none' })) {
      for (let at = 0; at < batch.length; at += (batch.readUInt32LE(at) + 3) & ~3) {
        const msg = batch.subarray(at, at + batch.readUInt32LE(at));
        if (msg.readUInt16LE(4) === NFT_MSG_NEWSETELEM) parts.push(codec.decodeElements(msg).elements);
      }
    }
    if (parts.length === 1) return new PackedElements(set, parts[0]!);
    // Past one message's worth: the parts back to back, each element placed by spans.
    const count = parts.reduce((n, p) => n + p.count, 0);
    const spans = new Uint32Array(count * 6);
    const extras: NativeNftElementExtra[] = [];
    let n = 0;
    let base = 0;
    for (const raw of parts) {
      const p = new PackedElements(set, raw);
      // no key ends: an interval set's ranges are start and end elements
      for (let i = 0; i < p.count; i++) spans.set([base + p.keyAt(i), p.keyLength(i), 0, 0, base + p.dataAt(i), p.dataLength(i)], (n + i) * 6);
      for (const x of raw.extras) extras.push({ ...x, index: n + x.index });
      n += p.count;
      base += raw.bytes.length;
    }
    return new PackedElements(set, { count, bytes: Buffer.concat(parts.map((p) => p.bytes)), spans, extras });
  }

  /** Where element i's key starts in `bytes`. */
  keyAt(i: number): number {
    return this.spans ? this.spans[i * 6]! : i * this.stride;
  }

  keyLength(i: number): number {
    return this.spans ? this.spans[i * 6 + 1]! : this.widths[0];
  }

  /** Where element i's value (a data map's) starts in `bytes`. */
  dataAt(i: number): number {
    return this.spans ? this.spans[i * 6 + 4]! : i * this.stride + this.widths[0] + this.widths[1];
  }

  /** The length of element i's value: 0 without one. */
  dataLength(i: number): number {
    return this.spans ? this.spans[i * 6 + 5]! : this.widths[2];
  }

  /** The element whose key is the `len` bytes of `b` from `at` (the first of them), or -1. */
  indexOfKey(b: Uint8Array, at: number, len: number): number {
    const { slots, mask } = this.keyTable();
    for (let h = hashBytes(b, at, len) & mask; ; h = (h + 1) & mask) {
      const i = slots[h]!;
      if (i === -1 || (this.keyLength(i) === len && sameBytes(this.bytes, this.keyAt(i), b, at, len))) return i;
    }
  }

  /**
   * The elements whose key an earlier element has. A set's keys are unique in the kernel: a
   * listing that repeats one was dumped while the kernel resized the set's hash table (each
   * message of a dump resumes by counting elements over a table that is then in another
   * order), and it misses as many elements as it repeats. (An interval set's start and end
   * elements may share a key.)
   */
  repeatedKeys(): readonly number[] {
    return this.keyTable().repeats;
  }

  /** The keys by a hash of their bytes (open addressing: element indexes, -1 empty), each key
   *  once, and the elements whose key an earlier one has. */
  private keyTable(): { slots: Int32Array; mask: number; repeats: number[] } {
    if (this.keys) return this.keys;
    const { bytes, count } = this;
    let cap = 16;
    while (cap < count * 2) cap *= 2;
    const mask = cap - 1;
    const slots = new Int32Array(cap).fill(-1);
    const repeats: number[] = [];
    for (let i = 0; i < count; i++) {
      const at = this.keyAt(i);
      const len = this.keyLength(i);
      let h = hashBytes(bytes, at, len) & mask;
      for (; slots[h] !== -1; h = (h + 1) & mask) {
        const j = slots[h]!;
        if (this.keyLength(j) === len && sameBytes(bytes, this.keyAt(j), bytes, at, len)) break;
      }
      if (slots[h] === -1) slots[h] = i;
      else repeats.push(i);
    }
    return (this.keys = { slots, mask, repeats });
  }

  /**
   * Frees the listing's memory now rather than at the garbage collection that finds it
   * unreachable (a listing that outlived two young-generation collections, as one diffed for a
   * while does, waits for a full one). The elements cannot be read after. Memory shared with
   * other buffers (a small pooled Buffer) is left to the collector.
   */
  release(): void {
    this.keys = undefined;
    freeNow(this.bytes);
    freeNow(this.spans);
  }

  /** Element i's key (a plain set's: an interval set's elements are the ends of its ranges). */
  key(i: number): KeyValue[] {
    return decodeKey(this.set.key, this.bytes, this.keyAt(i), this.keyLength(i));
  }

  verdict(i: number): Verdict | undefined {
    return this.extras.get(i)?.verdict as Verdict | undefined;
  }

  /** The elements as objects; an interval set's CIDRs rebuilt from its start/end elements. */
  decode(): SetElement[] {
    const { set, bytes } = this;
    const dataTypes = set.map && set.map !== 'verdict' ? mapTypes(set.map) : undefined;
    const plain = (i: number, k: KeyValue[]): SetElement => {
      const out: SetElement = { key: k };
      const x = this.extras.get(i);
      const dataLen = this.dataLength(i);
      if (x?.verdict) out.verdict = x.verdict as Verdict;
      else if (dataLen && dataTypes) {
        const d = decodeKey(dataTypes, bytes, this.dataAt(i), dataLen);
        out.data = Array.isArray(set.map) ? d : d[0]!;
      }
      if (x?.timeout) out.timeout = x.timeout;
      if (x?.comment) out.comment = x.comment;
      return out;
    };
    if (!set.interval) {
      const els = new Array<SetElement>(this.count);
      for (let i = 0; i < this.count; i++) els[i] = plain(i, this.key(i));
      return els;
    }
    const t = set.key[0] as 'ipv4_addr' | 'ipv6_addr';
    const keyOf = (i: number) => bytes.subarray(this.keyAt(i), this.keyAt(i) + this.keyLength(i));
    const isEnd = (i: number) => ((this.extras.get(i)?.flags ?? 0) & INTERVAL_END) !== 0;
    // Adjacent ranges share a key: the first one's end and the next one's start. The end goes
    // first (the kernel lists the two in either order), else the first range would run on.
    const sorted = Array.from({ length: this.count }, (_, i) => i).sort((a, b) => Buffer.compare(keyOf(a), keyOf(b)) || Number(isEnd(b)) - Number(isEnd(a)));
    const out: SetElement[] = [];
    for (let j = 0; j < sorted.length; j++) {
      const i = sorted[j]!;
      if (isEnd(i)) continue;
      const next = sorted[j + 1];
      const end = next !== undefined && isEnd(next) ? keyOf(next) : undefined;
      out.push(plain(i, [rangeToText(t, keyOf(i), end)]));
    }
    return out;
  }
}

/** Elements as objects: bytes decoded. */
export function elementList(elements: readonly SetElement[] | ElementBytes): readonly SetElement[] {
  return Array.isArray(elements) ? elements : (elements as ElementBytes).decode();
}

/** FNV-1a of a byte range, its bits mixed at the end (MurmurHash3's finalizer): a table indexed
 *  by its low bits gets them all (FNV's low bits depend on its input's low bits only, so a key
 *  whose bytes come in pairs, a hairpin element's address twice, leaves most slots unused). */
export function hashBytes(b: Uint8Array, start: number, len: number): number {
  let h = 0x811c9dc5;
  for (let k = start; k < start + len; k++) h = Math.imul(h ^ b[k]!, 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Whether `len` bytes of `a` from `ao` are those of `b` from `bo`. */
export function sameBytes(a: Uint8Array, ao: number, b: Uint8Array, bo: number, len: number): boolean {
  for (let k = 0; k < len; k++) if (a[ao + k] !== b[bo + k]) return false;
  return true;
}

export interface ListOptions {
  family?: NftFamily;
  /** Only this table (its chains, sets and rules). */
  table?: string;
  /** Read set elements (default true; one dump per set). */
  elements?: boolean;
  /** Keep counter values in rule expressions (default: dropped, so rules compare equal). */
  counters?: boolean;
}

/** The calls an engine needs; the kernel implementation is Nftables, a test double can be another. */
export interface NftablesApi {
  commit(tx: NftTransaction, opts?: CommitOptions): Promise<NftCommitResult>;
  list(opts?: ListOptions): Promise<NftRuleset>;
  /** One set's elements as listed (one dump, redone if interrupted): not tied to a generation,
   *  read genId around such dumps. A set that is not there: ENOENT. */
  listElements(set: SetSpec): Promise<PackedElements>;
  genId(): Promise<number>;
}

/** nf_tables over nfnetlink. One handle owns one netlink socket (per network namespace). */
export class Nftables implements NftablesApi {
  private constructor(private readonly h: NativeNftHandle) {}

  static async open(opts: HandleOptions = {}): Promise<Nftables> {
    const n = new Nftables(new (native().NftHandle)(opts));
    await n.genId(); // fails early (typed) without CAP_NET_ADMIN or nf_tables
    return n;
  }

  /**
   * Sends the ops as one nfnetlink batch in one sendmsg (or several batches with
   * maxOpsPerTransaction). Never throws for a kernel rejection: the result says which op
   * failed (index, errno name, extack) and that the others were rolled back.
   */
  async commit(tx: NftTransaction, opts: CommitOptions = {}): Promise<NftCommitResult> {
    const stream = tx.encoded();
    const native: NativeNftCommitOptions = { ackMode: opts.acks === true ? 'all' : opts.acks === false ? 'none' : 'last' };
    if (opts.maxOpsPerTransaction !== undefined) native.maxOpsPerTransaction = opts.maxOpsPerTransaction;
    if (opts.genId !== undefined) native.genId = opts.genId;
    const defaults = opts.acks === undefined && opts.maxOpsPerTransaction === undefined && opts.genId === undefined;
    const encoder = defaults ? tx.takeEncoder() : undefined;
    const raw = await this.h.commitWire(stream, native, encoder);
    return new NftCommitResult(raw);
  }

  /** Tables, chains, sets with their elements, and rules: one dump per kind (plus one per set
   *  for elements), consistent with one ruleset generation (retried if it moved). */
  async list(opts: ListOptions = {}): Promise<NftRuleset> {
    const raw = await redoInterrupted(() => this.h.list({
      family: opts.family ? FAMILY_NUMBER[opts.family] : 0,
      ...(opts.table ? { table: opts.table } : {}),
      elements: opts.elements !== false,
    }));
    return {
      genId: raw.genId,
      tables: raw.tables.map((t) => ({ family: familyName(t.family), name: t.name, handle: t.handle, flags: t.flags })),
      chains: raw.chains.map((c) => {
        const out: ChainInfo = { family: familyName(c.family), table: c.table, name: c.name, handle: c.handle };
        if (c.hook) {
          out.hook = {
            type: c.hook.type as 'filter' | 'nat' | 'route',
            hook: HOOKS[c.hook.hooknum] ?? (String(c.hook.hooknum) as HookName),
            priority: c.hook.priority,
          };
          if (c.hook.policy !== undefined) out.hook.policy = c.hook.policy === 1 ? 'accept' : 'drop';
        }
        return out;
      }),
      sets: raw.sets.map((x) => setFromNative(x)),
      rules: raw.rules.map((r) => {
        const exprs = (r.exprs as Expr[]).map((e) => canonicalExpr(e, { counters: opts.counters === true }));
        const out: RuleInfo = { family: familyName(r.family), table: r.table, chain: r.chain, handle: r.handle, exprs };
        if (r.comment) out.comment = r.comment;
        return out;
      }),
    };
  }

  /** One set's elements as the kernel sends them (a map of 110k elements is ~5 MB packed,
   *  ~33 MB decoded into objects): one dump, redone if interrupted. */
  listElements(set: SetSpec): Promise<PackedElements> {
    checkFamily(set.family);
    checkName('table', set.table);
    checkName('set', set.name);
    return redoInterrupted(async () => {
      return new PackedElements(set, await this.h.listElements({ family: FAMILY_NUMBER[set.family], table: set.table, set: set.name }));
    });
  }

  /** NFT_MSG_GETGEN: the ruleset generation id (changes with every committed transaction). */
  genId(): Promise<number> {
    return this.h.genId();
  }

  /** Closes the handle's socket(s) once the calls made before it are done; every later call
   *  rejects with a NetlinkError of kind 'invalid', code 'EBADF'. */
  close(): Promise<void> {
    return this.h.close();
  }

  socketStats(): SocketStats {
    return this.h.stats();
  }
}
