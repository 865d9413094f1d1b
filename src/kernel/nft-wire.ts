// The op stream: a transaction written in one pass into one buffer (layout in
// native/nftables/wire.h), handed across N-API in one crossing and decoded, validated and
// encoded to netlink by the addon on its worker. Replaces an object graph per op (every
// property read across N-API costs ~100 ns; 30k rules have ~1M of them).
// Shape errors (a hex string that is not hex, an unknown enum name) are thrown here as
// NetlinkError kind 'invalid'; ranges and the rest are checked by the addon.
import { NetlinkError } from '../errors.js';
import { native } from '../native.js';
import type { Expr, Verdict } from './nft-expr.js';
import type { ElementBytes, NftOp, RuleSpec, SetElement, SetSpec } from './nft-model.js';
import {
  DATATYPES, FAMILY_NUMBER, VERDICT_DATATYPE, cidrRange, dataValues, encodeKey, encodeValue, keyLength, keyTypeId, mapTypes, type KeyValue,
} from './nft-types.js';

const MAGIC = 0x3157464e; // "NFW1"
const KIND = { table: 0, chain: 1, set: 2, elements: 3, rule: 4 } as const;
const VERB: Record<string, number> = { add: 0, create: 1, delete: 2, destroy: 3, flush: 4, insert: 5, replace: 6 };
const HOOK_NUM: Record<string, number> = { prerouting: 0, input: 1, forward: 2, output: 3, postrouting: 4 };

const HEX = new Int8Array(128).fill(-1);
for (let i = 0; i < 10; i++) HEX[48 + i] = i;
for (let i = 0; i < 6; i++) {
  HEX[97 + i] = 10 + i;
  HEX[65 + i] = 10 + i;
}

function invalid(op: number, why: string): NetlinkError {
  return NetlinkError.invalid(`nftables op ${op}`, why);
}

/** A growable little-endian byte writer. */
export class WireWriter {
  buf: Buffer;
  private dv: DataView;
  off = 0;
  /** Index of the op being written (for error messages). */
  op = 0;
  /** The element being written, when an op's elements are (named by an error). */
  member: number | undefined;

  constructor(size = 1 << 16) {
    this.buf = Buffer.allocUnsafe(size);
    this.dv = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
  }

  ensure(n: number): void {
    if (this.off + n > this.buf.length) this.grow(n);
  }

  private grow(n: number): void {
    // x4 past 1 MiB: a 10k-service table's stream (~8 MiB) is copied ~6 MiB in all, not ~16.
    let size = this.buf.length * (this.buf.length >= 1 << 20 ? 4 : 2);
    while (size < this.off + n) size *= 2;
    const b = Buffer.allocUnsafe(size);
    this.buf.copy(b, 0, 0, this.off);
    this.buf = b;
    this.dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  }

  u8(v: number): void {
    this.ensure(1);
    this.buf[this.off++] = v;
  }

  u16(v: number): void {
    this.ensure(2);
    const b = this.buf;
    b[this.off] = v & 0xff;
    b[this.off + 1] = (v >>> 8) & 0xff;
    this.off += 2;
  }

  u32(v: number): void {
    this.ensure(4);
    this.dv.setUint32(this.off, v >>> 0, true);
    this.off += 4;
  }

  i32(v: number): void {
    this.ensure(4);
    this.dv.setInt32(this.off, v | 0, true);
    this.off += 4;
  }

  /** A number field (absent when undefined/null); the addon checks integer-ness and range. */
  num(v: unknown, key: string): void {
    this.ensure(9);
    if (v === undefined || v === null) {
      this.buf[this.off++] = 2;
      return;
    }
    if (typeof v === 'number') {
      this.buf[this.off++] = 0;
      this.dv.setFloat64(this.off, v, true);
      this.off += 8;
      return;
    }
    if (typeof v === 'bigint') {
      if (v < 0n || v > 0xffffffffffffffffn) throw invalid(this.op, `${key} is out of range`);
      this.buf[this.off++] = 1;
      this.dv.setBigUint64(this.off, v, true);
      this.off += 8;
      return;
    }
    throw invalid(this.op, `${key} must be a number`);
  }

  /** u16 length + UTF-8 bytes; undefined/null is the empty string (absent). */
  str(s: unknown, key: string): void {
    if (s === undefined || s === null) {
      this.u16(0);
      return;
    }
    if (typeof s !== 'string') throw invalid(this.op, `${key} must be a string`);
    const n = s.length;
    this.ensure(2 + n * 3);
    const b = this.buf;
    const start = this.off + 2;
    let o = start;
    for (let i = 0; i < n; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) {
        o = start + b.write(s, start, 'utf8');
        break;
      }
      b[o++] = c;
    }
    const len = o - start;
    if (len > 0xffff) throw invalid(this.op, `${key} is too long`);
    b[this.off] = len & 0xff;
    b[this.off + 1] = len >>> 8;
    this.off = o;
  }

  bytes(v: Uint8Array): void {
    this.u16(v.length);
    this.ensure(v.length);
    this.buf.set(v, this.off);
    this.off += v.length;
  }

  /** Data: a Buffer/Uint8Array or a hex string, as u16 length + bytes. */
  data(v: unknown, key: string): void {
    if (typeof v === 'string') {
      const n = v.length;
      if (n & 1) throw invalid(this.op, `${key}: odd-length hex string`);
      this.u16(n >> 1);
      this.ensure(n >> 1);
      const b = this.buf;
      let o = this.off;
      for (let i = 0; i < n; i += 2) {
        const h = v.charCodeAt(i);
        const l = v.charCodeAt(i + 1);
        const hi = h < 128 ? HEX[h]! : -1;
        const lo = l < 128 ? HEX[l]! : -1;
        if (hi < 0 || lo < 0) throw invalid(this.op, `${key}: not a hex string`);
        b[o++] = (hi << 4) | lo;
      }
      this.off = o;
      return;
    }
    if (v instanceof Uint8Array) {
      this.bytes(v);
      return;
    }
    throw invalid(this.op, `${key} must be a Buffer or a hex string`);
  }

  result(): Uint8Array {
    return this.buf.subarray(0, this.off);
  }

  /**
   * Lets go of the buffer when the writer is done with: a buffer of its own (not a slice of
   * Node's shared pool) is detached, so its memory goes now rather than at a collection (a
   * 10k-service proxy table's stream has a 4 MiB buffer; a full sync goes on for seconds after
   * its commit, and a table created in pieces commits them one after the other with little
   * JavaScript between: their streams piled up until one). Views of it are detached.
   */
  release(): void {
    const b = this.buf;
    this.buf = Buffer.alloc(0);
    this.dv = new DataView(this.buf.buffer, this.buf.byteOffset, 0);
    this.off = 0;
    freeNow(b);
  }
}

/** Frees a view's memory now, detaching its ArrayBuffer, when the view is the whole of it;
 *  memory shared with other views (a slice of Node's Buffer pool) is left to the collector. */
export function freeNow(v: ArrayBufferView | undefined): void {
  const ab = v?.buffer;
  if (ab instanceof ArrayBuffer && v!.byteOffset === 0 && v!.byteLength === ab.byteLength) native().detachArrayBuffer(ab);
}

// ---- expressions ---------------------------------------------------------------------------

const NUM = 0;
const STR = 1;
const DATA = 2;
const BOOL = 3;

interface FieldInfo {
  name: string;
  key: string;
  kind: number;
  enums: Map<string, number> | undefined;
}
/** Writes an expression of one type (its type byte included); see compileWriter. */
type ExprWriter = (w: WireWriter, rec: Record<string, unknown>) => void;

/** The expression writers by type name, made once from the addon's schema. */
let writers: Map<string, ExprWriter> | undefined;
/** Verdict codes (linux/netfilter.h NF_*, linux/netfilter/nf_tables.h NFT_*). */
const verdicts = new Map<string, number>([
  ['drop', 0], ['accept', 1], ['stolen', 2], ['queue', 3], ['repeat', 4],
  ['continue', -1], ['break', -2], ['jump', -3], ['goto', -4], ['return', -5],
]);

function schema(): Map<string, ExprWriter> {
  if (writers) return writers;
  const w = native().codec.nftables.exprWire;
  const made = new Map<string, ExprWriter>();
  w.types.forEach((t, index) => {
    const fields = t.fields.map((f) => ({
      name: f.name,
      key: `${t.name}.${f.name}`,
      kind: f.kind === 'str' ? STR : f.kind === 'data' ? DATA : f.kind === 'bool' ? BOOL : NUM,
      enums: f.enums ? new Map(Object.entries(f.enums)) : undefined,
    }));
    const dataAt = t.name === 'immediate' ? fields.findIndex((f) => f.name === 'data') : -1;
    made.set(t.name, compileWriter(index, fields, dataAt));
  });
  return (writers = made);
}

/**
 * One writer per expression type, generated from the addon's schema: each field is read with
 * its own property access, so every read site sees one type's objects (a few shapes) instead of
 * one generic loop's keyed reads over every type's fields (megamorphic: the biggest single cost
 * of encoding a 30k-rule table). The generated code only inlines field names and indices
 * (JSON-quoted), never values. Same output and the same checks and messages as the generic
 * loop it replaced: fields in schema order, a presence mask (bit i for field i, 0x8000 for an
 * immediate's verdict), then the unknown-attribute list.
 */
function compileWriter(index: number, fields: readonly FieldInfo[], dataAt: number): ExprWriter {
  const q = (x: unknown) => JSON.stringify(x);
  const body: string[] = [
    `w.ensure(3); w.buf[w.off] = ${index}; const maskAt = w.off + 1; w.off += 3;`,
    'let mask = 0; let v;',
  ];
  if (dataAt >= 0) body.push('const verdict = rec.verdict; const hasVerdict = verdict !== undefined && verdict !== null;');
  fields.forEach((f, i) => {
    body.push(`v = rec[${q(f.name)}];`);
    if (i === dataAt) {
      body.push(
        `if (hasVerdict) { if (v !== undefined) throw invalid(w.op, 'immediate takes data or verdict, not both'); writeVerdict(w, verdict, 'verdict'); mask |= 0x8000; } else`,
      );
    }
    const key = q(f.key);
    switch (f.kind) {
      case NUM:
        body.push(
          f.enums !== undefined
            ? `if (v !== undefined && v !== null) { if (typeof v === 'string') { const x = enums[${i}].get(v); if (x === undefined) throw invalid(w.op, ${key} + ': unknown value ' + v); w.num(x, ${key}); } else w.num(v, ${key}); mask |= ${1 << i}; }`
            : `if (v !== undefined && v !== null) { w.num(v, ${key}); mask |= ${1 << i}; }`,
        );
        break;
      case STR:
        body.push(`if (v !== undefined && v !== null) { if (typeof v !== 'string') throw invalid(w.op, ${q(`${f.key} must be a string`)}); w.str(v, ${key}); mask |= ${1 << i}; }`);
        break;
      case DATA:
        body.push(`if (v !== undefined && v !== null) { w.data(v, ${key}); mask |= ${1 << i}; }`);
        break;
      default: // BOOL
        body.push(`if (v !== undefined && v !== null) { if (typeof v !== 'boolean') throw invalid(w.op, ${q(`${f.key} must be a boolean`)}); if (v) mask |= ${1 << i}; }`);
    }
  });
  body.push('w.buf[maskAt] = mask & 0xff; w.buf[maskAt + 1] = mask >>> 8;', 'writeUnknown(w, rec.unknown);');
  const enums = fields.map((f) => f.enums);
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- generated from the addon's schema, see above
  const make = new Function('invalid', 'writeVerdict', 'writeUnknown', 'enums', `return function write(w, rec) {\n${body.join('\n')}\n};`) as (
    ...a: unknown[]
  ) => ExprWriter;
  return make(invalid, writeVerdict, writeUnknown, enums);
}

function writeVerdict(w: WireWriter, v: unknown, where: string): void {
  if (v === null || typeof v !== 'object') throw invalid(w.op, `${where} must be an object { code, chain? }`);
  const { code, chain } = v as Verdict;
  const n = typeof code === 'string' ? verdicts.get(code) : undefined;
  if (n === undefined) throw invalid(w.op, `unknown verdict ${String(code)}`);
  w.i32(n);
  if (code === 'jump' || code === 'goto') {
    if (typeof chain !== 'string' || chain.length === 0) throw invalid(w.op, `${where}: ${code} needs a chain`);
    w.str(chain, 'chain');
  } else {
    if (chain !== undefined && chain !== null) throw invalid(w.op, 'only jump and goto take a chain');
    w.u16(0);
  }
}

/** The attributes of an expression ipvsync has no codec for, kept as read (`unknown`). */
function writeUnknown(w: WireWriter, unknown: unknown): void {
  if (!Array.isArray(unknown)) {
    w.u16(0);
    return;
  }
  w.u16(unknown.length);
  for (const u of unknown as unknown[]) {
    if (u === null || typeof u !== 'object') throw invalid(w.op, 'unknown attributes must be { attr, hex }');
    const { attr, hex } = u as { attr: unknown; hex: unknown };
    if (typeof attr !== 'number' || !Number.isInteger(attr) || attr < 0 || attr > 0xffff)
      throw invalid(w.op, 'attr must be an integer in 0..65535');
    w.u16(attr);
    if (hex === '') w.u16(0);
    else w.data(hex, 'unknown.hex');
  }
}

export function writeExpr(w: WireWriter, e: Expr): void {
  if (e === null || typeof e !== 'object') throw invalid(w.op, 'expression must be an object');
  const rec = e as unknown as Record<string, unknown>;
  const type = rec.type;
  if (typeof type !== 'string') throw invalid(w.op, 'type must be a string');
  const write = schema().get(type);
  if (write) {
    write(w, rec);
    return;
  }
  const unknown = rec.unknown;
  if (!Array.isArray(unknown)) throw invalid(w.op, `unknown expression type ${type}`);
  w.u8(255);
  w.str(type, 'type');
  w.u16(0);
  writeUnknown(w, unknown);
}

// ---- ops -----------------------------------------------------------------------------------

function family(w: WireWriter, f: string): number {
  const n = FAMILY_NUMBER[f as keyof typeof FAMILY_NUMBER];
  if (n === undefined) throw invalid(w.op, `family must be ip, ip6 or inet (got ${f})`);
  return n;
}

function head(w: WireWriter, kind: number, verb: string, fam: string): void {
  const v = VERB[verb];
  if (v === undefined) throw invalid(w.op, `unknown verb ${verb}`);
  w.ensure(3);
  w.buf[w.off] = kind;
  w.buf[w.off + 1] = v;
  w.buf[w.off + 2] = family(w, fam);
  w.off += 3;
}

function writeSet(w: WireWriter, verb: string, s: SetSpec, id: number): void {
  head(w, KIND.set, verb, s.family);
  w.str(s.table, 'table');
  w.str(s.name, 'name');
  w.num(undefined, 'handle');
  if (verb !== 'add' && verb !== 'create') {
    w.u8(0);
    return;
  }
  w.u8(1);
  let flags = s.interval === true ? 0x4 : 0; // NFT_SET_INTERVAL
  if (s.map) flags |= 0x8; // NFT_SET_MAP
  if (s.timeout || s.timeoutFlag) flags |= 0x10; // NFT_SET_TIMEOUT
  if (s.dynamic) flags |= 0x20; // NFT_SET_EVAL
  w.num(flags, 'flags');
  w.num(keyTypeId(s.key), 'keyType');
  w.num(keyLength(s.key), 'keyLen');
  w.num(s.key.length === 1 ? DATATYPES[s.key[0]!].byteorder : 0, 'keyByteorder');
  if (s.map === 'verdict') {
    w.u8(1);
    w.num(VERDICT_DATATYPE, 'dataType');
    w.num(0, 'dataLen');
    w.num(0, 'dataByteorder');
  } else if (Array.isArray(s.map)) {
    w.u8(1);
    w.num(keyTypeId(s.map), 'dataType');
    w.num(keyLength(s.map), 'dataLen');
    w.num(s.map.length === 1 ? DATATYPES[s.map[0]!].byteorder : 0, 'dataByteorder');
  } else if (s.map) {
    w.u8(1);
    w.num(DATATYPES[s.map].id, 'dataType');
    w.num(DATATYPES[s.map].len, 'dataLen');
    w.num(DATATYPES[s.map].byteorder, 'dataByteorder');
  } else {
    w.u8(0);
  }
  w.num(id, 'id');
  w.num(s.timeout || undefined, 'timeout');
  w.num(undefined, 'gcInterval');
  w.num(s.size || undefined, 'size');
  w.u8(0); // concat
  w.str(s.comment || undefined, 'comment');
}

/** An element lowered for the op stream: key, flags, verdict code and chain, data, timeout,
 *  comment, key end. */
type LoweredElement = [Buffer, number | undefined, string | undefined, string | undefined, Buffer | undefined, number | undefined, string | undefined, Buffer | undefined];

/** Elements written as the addon's element list (u32 count + elements). */
function writeLoweredElements(w: WireWriter, els: readonly LoweredElement[]): void {
  w.u32(els.length);
  for (const [key, flags, code, chain, data, timeout, comment, keyEnd] of els) {
    let m = 0;
    if (flags !== undefined) m |= 1;
    if (code !== undefined) m |= 2;
    else if (data !== undefined) m |= 4;
    if (timeout !== undefined) m |= 8;
    if (comment !== undefined) m |= 16;
    if (keyEnd !== undefined) m |= 32;
    w.u8(m);
    w.bytes(key);
    if (m & 1) w.num(flags, 'flags');
    if (m & 2) writeVerdict(w, { code: code as Verdict['code'], ...(chain !== undefined ? { chain } : {}) }, 'verdict');
    if (m & 4) w.bytes(data!);
    if (m & 8) w.num(timeout, 'timeout');
    if (m & 16) w.str(comment, 'comment');
    if (m & 32) w.bytes(keyEnd!);
  }
}

/** A plain (non-interval) set's elements, keys encoded straight into the stream. */
export function writeElements(w: WireWriter, s: SetSpec, elements: readonly SetElement[], verb: string): void {
  const adding = verb === 'add' || verb === 'create';
  const types = s.key;
  const nt = types.length;
  const klen = keyLength(types);
  const isVerdictMap = s.map === 'verdict';
  const dataTypes = s.map && s.map !== 'verdict' ? (Array.isArray(s.map) ? s.map : [s.map]) : undefined;
  const dataConcat = Array.isArray(s.map);
  const dlen = dataTypes ? keyLength(dataTypes) : 0;
  const timeouts = !!(s.timeout || s.timeoutFlag);
  const offs: number[] = [];
  let o = 0;
  for (const t of types) {
    offs.push(o);
    o += nt === 1 ? DATATYPES[t].len : (DATATYPES[t].len + 3) & ~3;
  }
  const render = (e: SetElement) => e.key.join(' . ');
  w.u32(elements.length);
  for (let i = 0; i < elements.length; i++) {
    w.member = i;
    const e = elements[i]!;
    if (!e || !Array.isArray(e.key)) throw NetlinkError.invalid('nftables', `set ${s.name}: element key must be an array of values`);
    const key = e.key;
    if (key.length !== nt) throw NetlinkError.invalid('nftables', `key has ${key.length} field(s), the set's type has ${nt} (${types.join(' . ')})`);
    let m = 0;
    const verdict = e.verdict;
    if (isVerdictMap) {
      if (verdict) m |= 2;
      else if (adding) throw NetlinkError.invalid('nftables', `map ${s.name}: element ${render(e)} needs a verdict`);
    } else if (dataTypes) {
      if (e.data !== undefined) {
        if (Array.isArray(e.data) !== dataConcat || (dataConcat && (e.data as KeyValue[]).length !== dataTypes.length))
          throw NetlinkError.invalid('nftables', `map ${s.name}: element ${render(e)} data does not match the map's type ${dataTypes.join(' . ')}`);
        m |= 4;
      }
      else if (adding) throw NetlinkError.invalid('nftables', `map ${s.name}: element ${render(e)} needs data`);
    } else if (verdict || e.data !== undefined) {
      throw NetlinkError.invalid('nftables', `set ${s.name} is not a map`);
    }
    if (e.timeout !== undefined) {
      if (!timeouts) throw NetlinkError.invalid('nftables', `set ${s.name} has no timeout flag`);
      if (!Number.isInteger(e.timeout) || e.timeout <= 0) throw NetlinkError.invalid('nftables', 'timeout must be a positive integer (ms)');
      m |= 8;
    }
    if (e.comment !== undefined) {
      if (Buffer.byteLength(e.comment) > 127) throw NetlinkError.invalid('nftables', 'comment longer than 127 bytes');
      m |= 16;
    }
    w.ensure(3 + klen);
    const b = w.buf;
    b[w.off] = m;
    b[w.off + 1] = klen & 0xff;
    b[w.off + 2] = klen >>> 8;
    const at = w.off + 3;
    for (let k = 0; k < klen; k++) b[at + k] = 0;
    for (let k = 0; k < nt; k++) encodeValue(types[k]!, key[k]!, b, at + offs[k]!);
    w.off = at + klen;
    if (m & 2) writeVerdict(w, verdict, 'verdict');
    if (m & 4) {
      w.u16(dlen);
      w.ensure(dlen);
      for (let k = 0; k < dlen; k++) w.buf[w.off + k] = 0;
      if (dataConcat) {
        let off = w.off;
        const d = e.data as KeyValue[];
        for (let k = 0; k < dataTypes!.length; k++) {
          encodeValue(dataTypes![k]!, d[k]!, w.buf, off);
          off += (DATATYPES[dataTypes![k]!].len + 3) & ~3;
        }
      } else encodeValue(dataTypes![0]!, e.data as KeyValue, w.buf, w.off);
      w.off += dlen;
    }
    if (m & 8) w.num(e.timeout, 'timeout');
    if (m & 16) w.str(e.comment, 'comment');
  }
}

/** A plain set's elements as bytes already (ElementBytes): each key (and an add's value) copied
 *  as it is, once its width is the set's. */
function writeElementBytes(w: WireWriter, s: SetSpec, els: ElementBytes, verb: string): void {
  if (s.interval) throw NetlinkError.invalid('nftables', `set ${s.name}: an interval set's elements are not written as bytes`);
  const adding = verb === 'add' || verb === 'create';
  const klen = keyLength(s.key);
  const dlen = s.map && s.map !== 'verdict' ? keyLength(mapTypes(s.map)) : 0;
  const src = els.bytes;
  w.u32(els.length);
  for (let i = 0; i < els.length; i++) {
    w.member = i;
    const kl = els.keyLength(i);
    const dl = els.dataLength(i);
    if (kl !== klen || (adding && dl !== dlen)) throw NetlinkError.invalid('nftables', `set ${s.name}: element bytes of ${kl}/${dl} bytes, the set's key and value are ${klen}/${dlen}`);
    const m = adding && dl ? 4 : 0;
    w.ensure(3 + kl + (m ? 2 + dl : 0));
    const b = w.buf;
    let o = w.off;
    b[o] = m;
    b[o + 1] = kl & 0xff;
    b[o + 2] = kl >>> 8;
    o += 3;
    const k = els.keyAt(i);
    for (let j = 0; j < kl; j++) b[o + j] = src[k + j]!;
    o += kl;
    if (m) {
      b[o] = dl & 0xff;
      b[o + 1] = dl >>> 8;
      const d = els.dataAt(i);
      for (let j = 0; j < dl; j++) b[o + 2 + j] = src[d + j]!;
      o += 2 + dl;
    }
    w.off = o;
  }
}

/** NFT_SET_ELEM_INTERVAL_END: the element ends a range. */
export const INTERVAL_END = 1;

/** An interval set's elements as the kernel wants them: each CIDR becomes a start element and
 *  an end element (flag INTERVAL_END) at the first address past it, sorted, with a leading zero
 *  END element when the lowest range does not start at zero — as nft does. Checks each element
 *  as writeElements checks a plain set's. */
function lowerInterval(s: SetSpec, elements: SetElement[], verb: string): LoweredElement[] {
  const adding = verb === 'add' || verb === 'create';
  const tuple = (key: Buffer, e: SetElement | undefined, flags?: number): LoweredElement => {
    let code: string | undefined;
    let chain: string | undefined;
    let data: Buffer | undefined;
    let timeout: number | undefined;
    let comment: string | undefined;
    if (e) {
      if (s.map === 'verdict') {
        if (e.verdict) {
          code = e.verdict.code;
          chain = e.verdict.chain;
          // Checked here as the addon checks them: it reads the lowered elements, which are
          // not the caller's (an error must name the caller's element).
          if (chain !== undefined && (typeof chain !== 'string' || chain.length === 0 || chain.includes('\0') || Buffer.byteLength(chain) > 255))
            throw NetlinkError.invalid('nftables', `map ${s.name}: verdict chain must be a name`);
        } else if (adding) throw NetlinkError.invalid('nftables', `map ${s.name}: element ${e.key.join(' . ')} needs a verdict`);
      } else if (s.map) {
        if (e.data !== undefined) data = encodeKey(mapTypes(s.map), dataValues(s.map, e.data));
        else if (adding) throw NetlinkError.invalid('nftables', `map ${s.name}: element ${e.key.join(' . ')} needs data`);
      } else if (e.verdict || e.data !== undefined) {
        throw NetlinkError.invalid('nftables', `set ${s.name} is not a map`);
      }
      if (e.timeout !== undefined) {
        if (!s.timeout && !s.timeoutFlag) throw NetlinkError.invalid('nftables', `set ${s.name} has no timeout flag`);
        if (!Number.isSafeInteger(e.timeout) || e.timeout <= 0) throw NetlinkError.invalid('nftables', 'timeout must be a positive integer (ms)');
        timeout = e.timeout;
      }
      if (e.comment !== undefined) {
        if (typeof e.comment !== 'string' || e.comment.includes('\0')) throw NetlinkError.invalid('nftables', 'comment must be a string without NUL');
        if (Buffer.byteLength(e.comment) > 127) throw NetlinkError.invalid('nftables', 'comment longer than 127 bytes');
        comment = e.comment;
      }
    }
    return [key, flags, code, chain, data, timeout, comment, undefined];
  };
  // An error names the element it is about (`member`, its index in `elements`).
  const at = <T>(member: number, f: () => T): T => {
    try {
      return f();
    } catch (err) {
      throw NetlinkError.atOp(err, { member });
    }
  };
  const t = s.key[0] as 'ipv4_addr' | 'ipv6_addr';
  const ranges = elements.map((e, j) => at(j, () => {
    if (!e || !Array.isArray(e.key)) throw NetlinkError.invalid('nftables', `set ${s.name}: element key must be an array of values`);
    if (e.key.length !== 1) throw NetlinkError.invalid('nftables', `set ${s.name}: an interval element has one key value`);
    return { e, j, ...cidrRange(t, e.key[0]!) };
  }));
  ranges.sort((a, b) => Buffer.compare(a.start, b.start));
  const out: LoweredElement[] = [];
  if (adding && ranges.length && ranges[0]!.start.some((x) => x !== 0))
    out.push(tuple(Buffer.alloc(ranges[0]!.start.length), undefined, INTERVAL_END));
  for (const r of ranges) {
    out.push(at(r.j, () => tuple(r.start, r.e)));
    if (r.end) out.push(tuple(r.end, undefined, INTERVAL_END));
  }
  return out;
}

function writeRule(w: WireWriter, verb: string, r: RuleSpec, position: number | undefined): void {
  head(w, KIND.rule, verb, r.family);
  w.str(r.table, 'table');
  w.str(r.chain, 'chain');
  const byHandle = verb === 'replace' || verb === 'delete' || verb === 'destroy';
  w.num(byHandle ? r.handle : undefined, 'handle');
  w.num(position, 'position');
  w.str(r.comment || undefined, 'comment');
  if (verb === 'delete' || verb === 'destroy') {
    w.u8(0);
    return;
  }
  const exprs = r.exprs;
  if (!Array.isArray(exprs)) throw invalid(w.op, 'exprs must be an array');
  if (exprs.length > 128) throw invalid(w.op, 'more than 128 expressions in a rule');
  w.u8(1);
  w.u16(exprs.length);
  for (let i = 0; i < exprs.length; i++) writeExpr(w, exprs[i]!);
}

const setKey = (s: SetSpec) => `${s.family}\0${s.table}\0${s.name}`;

/**
 * An op stream being written, op by op: what a transaction is queued into (so its ops are
 * validated and encoded as they are queued and the objects they came from can be collected).
 * Set ids (NFTA_SET_ID, for elements and lookups in the same batch) are numbered in the order
 * sets are added.
 */
export class OpStreamWriter {
  private readonly w: WireWriter;
  private readonly setIds = new Map<string, number>();
  private nextId = 1;
  /** Ops written. */
  count = 0;

  constructor(sizeHint: number) {
    this.w = new WireWriter(Math.max(64, Math.min(1 << 24, sizeHint)));
    this.w.u32(MAGIC);
  }

  /** Writes one op; on an error nothing of it stays in the stream. */
  write(op: NftOp): void {
    this.writeOp(op, true);
  }

  /** Writes one op as write does (throwing what it throws) and takes it out again: the stream
   *  is as it was, and its buffer is kept for the next (many ops checked allocate once). */
  check(op: NftOp): void {
    this.writeOp(op, false);
  }

  private writeOp(op: NftOp, keep: boolean): void {
    if (this.done) throw invalid(this.count, 'the op stream was released');
    if (op === null || typeof op !== 'object') throw NetlinkError.invalid(`nftables op ${this.count}`, 'must be an object', { index: this.count });
    const w = this.w;
    const at = w.off;
    const nextId = this.nextId;
    let idKey: string | undefined;
    try {
      idKey = op.kind === 'set' ? setKey(op.set) : undefined;
    } catch (err) {
      throw NetlinkError.atOp(err, { index: this.count });
    }
    const prevId = idKey === undefined ? undefined : this.setIds.get(idKey);
    w.op = this.count;
    w.member = undefined;
    try {
      this.put(op);
    } catch (err) {
      // Whatever a value of the wrong shape made the writer throw leaves as the op's 'invalid'
      // NetlinkError (with the element as `member`).
      const e = NetlinkError.atOp(err, { index: this.count, ...(w.member === undefined ? {} : { member: w.member }) });
      this.rewind(at, nextId, idKey, prevId);
      throw e;
    }
    if (keep) this.count++;
    else this.rewind(at, nextId, idKey, prevId);
  }

  /** The stream back to its end `at`, its next set id, and `idKey`'s id as it was. */
  private rewind(at: number, nextId: number, idKey: string | undefined, prevId: number | undefined): void {
    this.w.off = at;
    this.nextId = nextId;
    if (idKey === undefined) return;
    if (prevId === undefined) this.setIds.delete(idKey);
    else this.setIds.set(idKey, prevId);
  }

  /** Stream bytes written so far. */
  get bytes(): number {
    return this.w.off;
  }

  /** The stream so far (a view: later writes only append past its end). */
  result(): Uint8Array {
    return this.w.result();
  }

  /** Lets go of the stream (WireWriter.release); nothing can be written after. */
  release(): void {
    this.w.release();
    this.done = true;
  }

  /** Whether release() was called. */
  get released(): boolean {
    return this.done;
  }

  private done = false;

  private put(op: NftOp): void {
    const w = this.w;
    switch (op.kind) {
      case 'table':
        head(w, KIND.table, op.verb, op.table.family);
        w.str(op.table.name, 'name');
        w.num(undefined, 'handle');
        w.num(undefined, 'flags');
        break;
      case 'chain': {
        const c = op.chain;
        head(w, KIND.chain, op.verb, c.family);
        w.str(c.table, 'table');
        w.str(c.name, 'name');
        w.num(undefined, 'handle');
        const h = c.hook;
        if (h) {
          w.u8(1);
          w.str(h.type, 'type');
          w.num(HOOK_NUM[h.hook], 'hook.hooknum');
          w.num(h.priority, 'hook.priority');
          if (h.policy) {
            w.u8(1);
            w.num(h.policy === 'accept' ? 1 : 0, 'policy');
          } else {
            w.u8(0);
          }
          w.u16(0); // device
        } else {
          w.u8(0);
        }
        break;
      }
      case 'set': {
        const s = op.set;
        let id = 0;
        if (op.verb === 'add' || op.verb === 'create') {
          id = this.nextId++;
          this.setIds.set(setKey(s), id);
        }
        writeSet(w, op.verb, s, id);
        break;
      }
      case 'elements': {
        const s = op.set;
        head(w, KIND.elements, op.verb, s.family);
        w.str(s.table, 'table');
        w.str(s.name, 'set');
        w.num(this.setIds.get(setKey(s)), 'setId');
        if (!Array.isArray(op.elements)) writeElementBytes(w, s, op.elements as ElementBytes, op.verb);
        else if (s.interval) writeLoweredElements(w, lowerInterval(s, op.elements, op.verb));
        else writeElements(w, s, op.elements, op.verb);
        break;
      }
      case 'rule':
        writeRule(w, op.verb, op.rule, op.position);
        break;
      default:
        throw invalid(this.count, `unknown kind ${(op as { kind: unknown }).kind}`);
    }
  }
}
