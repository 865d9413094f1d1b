// nftables datatypes as nft knows them (src/datatype.c): their ids, lengths, byte order, and
// the conversion between a typed value ('10.0.0.1', 'tcp', 443) and the bytes in a set key or
// a cmp/immediate register.
import { NetlinkError } from '../errors.js';
import { formatIPv6Words, ipv4Number, ipv6Words } from '../net/address.js';

export type NftFamily = 'ip' | 'ip6' | 'inet';
export const FAMILY_NUMBER: Record<NftFamily, number> = { inet: 1, ip: 2, ip6: 10 };
export function familyName(n: number): NftFamily {
  const f = n === 1 ? 'inet' : n === 2 ? 'ip' : n === 10 ? 'ip6' : undefined;
  if (!f) throw NetlinkError.invalid('nftables', `unsupported family ${n}`);
  return f;
}

export type DataType = 'ipv4_addr' | 'ipv6_addr' | 'inet_proto' | 'inet_service' | 'mark' | 'ifname';

interface TypeInfo {
  id: number;
  len: number; // bytes on the wire (before 4-byte padding in concatenations)
  byteorder: 1 | 2; // BYTEORDER_HOST_ENDIAN / BYTEORDER_BIG_ENDIAN (set udata)
}

export const DATATYPES: Record<DataType, TypeInfo> = {
  ipv4_addr: { id: 7, len: 4, byteorder: 2 },
  ipv6_addr: { id: 8, len: 16, byteorder: 2 },
  inet_proto: { id: 12, len: 1, byteorder: 2 },
  inet_service: { id: 13, len: 2, byteorder: 2 },
  mark: { id: 19, len: 4, byteorder: 1 },
  ifname: { id: 41, len: 16, byteorder: 1 },
};
const BY_ID = new Map<number, DataType>(Object.entries(DATATYPES).map(([k, v]) => [v.id, k as DataType]));

/** NFT_DATA_VERDICT: the data type of a verdict map. */
export const VERDICT_DATATYPE = 0xffffff00;
// nft's concat type id: (t1 << 6 | t2) << 6 | t3 … (CONCAT_TYPE_BITS = 6)
const CONCAT_BITS = 6;

export function keyTypeId(types: readonly DataType[]): number {
  let id = 0;
  for (const t of types) id = id * (1 << CONCAT_BITS) + DATATYPES[t].id;
  return id >>> 0;
}

export function keyTypesFromId(id: number, keyLen: number): DataType[] | undefined {
  const single = BY_ID.get(id);
  if (single && DATATYPES[single].len === keyLen) return [single];
  const out: DataType[] = [];
  let x = id >>> 0;
  while (x > 0) {
    const t = BY_ID.get(x & 0x3f);
    if (!t) return undefined;
    out.unshift(t);
    x = Math.floor(x / (1 << CONCAT_BITS));
  }
  return out.length && keyLength(out) === keyLen ? out : undefined;
}

/** Key length: every concatenated field takes a multiple of 4 bytes (nft registers are 32-bit). */
export function keyLength(types: readonly DataType[]): number {
  if (types.length === 1) return DATATYPES[types[0]!].len;
  return types.reduce((n, t) => n + ((DATATYPES[t].len + 3) & ~3), 0);
}

export type KeyValue = string | number;

const PROTOS: Record<string, number> = { icmp: 1, igmp: 2, tcp: 6, udp: 17, gre: 47, esp: 50, ah: 51, icmpv6: 58, sctp: 132, udplite: 136 };
const PROTO_NAMES = new Map<number, string>([
  [6, 'tcp'],
  [17, 'udp'],
  [132, 'sctp'],
  [1, 'icmp'],
  [58, 'icmpv6'],
]);

function invalid(why: string): NetlinkError {
  return NetlinkError.invalid('nftables', why);
}

/** 'a.b.c.d' -> the address as an unsigned 32-bit number (a = most significant byte). */
export function ipv4ToU32(s: string): number {
  const v = ipv4Number(s);
  if (v < 0) throw invalid(`not an IPv4 address: ${s}`);
  return v;
}

export function parseIPv4(s: string): Buffer {
  const v = ipv4ToU32(s);
  const b = Buffer.allocUnsafe(4);
  b[0] = v >>> 24;
  b[1] = (v >>> 16) & 0xff;
  b[2] = (v >>> 8) & 0xff;
  b[3] = v & 0xff;
  return b;
}

/** Two lower-case hex digits per byte value. */
export const HEX_BYTE: readonly string[] = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** A 32-bit value as 8 hex digits, most significant byte first (network order). */
export function hexBe32(v: number): string {
  return HEX_BYTE[v >>> 24]! + HEX_BYTE[(v >>> 16) & 0xff]! + HEX_BYTE[(v >>> 8) & 0xff]! + HEX_BYTE[v & 0xff]!;
}

/** A 32-bit value as 8 hex digits, least significant byte first (host order on x86/arm). */
export function hexLe32(v: number): string {
  return HEX_BYTE[v & 0xff]! + HEX_BYTE[(v >>> 8) & 0xff]! + HEX_BYTE[(v >>> 16) & 0xff]! + HEX_BYTE[v >>> 24]!;
}

export function parseIPv6(s: string): Buffer {
  const b = Buffer.alloc(16);
  writeIPv6(s, b, 0);
  return b;
}

/** An IPv6 address's 16 bytes into `out` at `off`. */
function writeIPv6(s: string, out: Uint8Array, off: number): void {
  const w = ipv6Words(s);
  if (!w) throw invalid(`not an IPv6 address: ${s}`);
  for (let i = 0; i < 8; i++) {
    out[off + 2 * i] = w[i]! >>> 8;
    out[off + 2 * i + 1] = w[i]! & 0xff;
  }
}

export function formatIPv4(b: Buffer | Uint8Array, off = 0): string {
  return `${b[off]}.${b[off + 1]}.${b[off + 2]}.${b[off + 3]}`;
}

/** RFC 5952 text (formatIPv6Words). */
export function formatIPv6(b: Buffer | Uint8Array, off = 0): string {
  const w: number[] = [];
  for (let i = 0; i < 8; i++) w.push((b[off + 2 * i]! << 8) | b[off + 2 * i + 1]!);
  return formatIPv6Words(w);
}

/** Writes one typed value into `out` at `off` (exactly DATATYPES[t].len bytes). */
export function encodeValue(t: DataType, v: KeyValue, out: Buffer, off: number): void {
  switch (t) {
    case 'ipv4_addr':
      if (typeof v !== 'string') throw invalid(`ipv4_addr value must be a string: ${v}`);
      {
        const x = ipv4ToU32(v);
        out[off] = x >>> 24;
        out[off + 1] = (x >>> 16) & 0xff;
        out[off + 2] = (x >>> 8) & 0xff;
        out[off + 3] = x & 0xff;
      }
      return;
    case 'ipv6_addr':
      if (typeof v !== 'string') throw invalid(`ipv6_addr value must be a string: ${v}`);
      writeIPv6(v, out, off);
      return;
    case 'inet_proto': {
      const n = typeof v === 'string' ? PROTOS[v] : v;
      if (n === undefined || !Number.isInteger(n) || n < 0 || n > 255) throw invalid(`not an inet_proto: ${v}`);
      out[off] = n;
      return;
    }
    case 'inet_service':
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 65535) throw invalid(`not a port: ${v}`);
      out[off] = v >>> 8;
      out[off + 1] = v & 0xff;
      return;
    case 'mark':
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 0xffffffff) throw invalid(`not a mark: ${v}`);
      out.writeUInt32LE(v, off); // host byte order
      return;
    case 'ifname': {
      if (typeof v !== 'string' || v.length === 0 || Buffer.byteLength(v) > 15 || v.includes('\0'))
        throw invalid(`not an interface name: ${v}`);
      out.fill(0, off, off + 16);
      out.write(v, off, 'utf8');
      return;
    }
  }
}

export function decodeValue(t: DataType, b: Buffer, off: number): KeyValue {
  switch (t) {
    case 'ipv4_addr':
      return formatIPv4(b, off);
    case 'ipv6_addr':
      return formatIPv6(b, off);
    case 'inet_proto':
      return PROTO_NAMES.get(b[off]!) ?? b[off]!;
    case 'inet_service':
      return b.readUInt16BE(off);
    case 'mark':
      return b.readUInt32LE(off);
    case 'ifname': {
      const s = b.subarray(off, off + 16);
      const nul = s.indexOf(0);
      return s.subarray(0, nul < 0 ? 16 : nul).toString('utf8');
    }
  }
}

/** A data map's value types: one, or the parts of a concatenation. */
export function mapTypes(map: DataType | DataType[]): DataType[] {
  return Array.isArray(map) ? map : [map];
}

/** An element's data as one value per part of the map's type (a concatenation's values are
 *  a list; a single type's, the value itself). */
export function dataValues(map: DataType | DataType[], data: KeyValue | KeyValue[]): KeyValue[] {
  if (Array.isArray(map) !== Array.isArray(data))
    throw NetlinkError.invalid('nftables', `map data ${JSON.stringify(data)} does not match the map's type ${mapTypes(map).join(' . ')}`);
  return Array.isArray(data) ? data : [data];
}

/** A concatenated key: every field padded to 4 bytes (a single field is not padded). */
export function encodeKey(types: readonly DataType[], values: readonly KeyValue[]): Buffer {
  const out = Buffer.alloc(keyLength(types));
  encodeKeyInto(types, values, out, 0);
  return out;
}

/** encodeKey into `out` at `off`; returns the key's length. The padding is zeroed. */
export function encodeKeyInto(types: readonly DataType[], values: readonly KeyValue[], out: Buffer, off: number): number {
  if (values.length !== types.length)
    throw invalid(`key has ${values.length} field(s), the set's type has ${types.length} (${types.join(' . ')})`);
  const start = off;
  for (let i = 0; i < types.length; i++) {
    const t = types[i]!;
    const n = DATATYPES[t].len;
    const len = types.length === 1 ? n : (n + 3) & ~3;
    encodeValue(t, values[i]!, out, off);
    for (let k = off + n; k < off + len; k++) out[k] = 0;
    off += len;
  }
  return off - start;
}

export function decodeKey(types: readonly DataType[], b: Buffer, start = 0, length = b.length - start): KeyValue[] {
  // Exactly as long as the key (a listing holds one per element; a pushed-to array keeps room
  // for 17 values).
  const out = new Array<KeyValue>(types.length);
  let off = start;
  for (let i = 0; i < types.length; i++) {
    const t = types[i]!;
    if (off + DATATYPES[t].len > start + length) throw new NetlinkError({ message: 'nftables: set key shorter than its type', code: 'EPROTO', errno: 71, kind: 'decode', op: 'NFT_MSG_GETSETELEM' });
    out[i] = decodeValue(t, b, off);
    off += types.length === 1 ? DATATYPES[t].len : (DATATYPES[t].len + 3) & ~3;
  }
  return out;
}

/** 'a.b.c.d/n' or 'x::/n' (a bare address is /32 or /128) -> [start, end) as bytes; end is
 *  undefined when the range reaches the top of the address space. */
export function cidrRange(t: 'ipv4_addr' | 'ipv6_addr', v: KeyValue): { start: Buffer; end: Buffer | undefined } {
  if (typeof v !== 'string') throw invalid(`not a CIDR: ${v}`);
  const [addr, plen] = v.split('/');
  const start = t === 'ipv4_addr' ? parseIPv4(addr!) : parseIPv6(addr!);
  const bits = start.length * 8;
  const p = plen === undefined ? bits : Number(plen);
  if (!Number.isInteger(p) || p < 0 || p > bits || (plen !== undefined && !/^\d+$/.test(plen)))
    throw invalid(`bad prefix length in ${v}`);
  for (let i = p; i < bits; i++)
    if (start[i >> 3]! & (0x80 >> (i & 7))) throw invalid(`${v} has host bits set (nft would reject it too)`);
  const end = Buffer.from(start);
  // add 2^(bits-p): increment at bit p-1
  if (p === 0) return { start, end: undefined };
  let i = (p - 1) >> 3;
  let carry = 0x80 >> ((p - 1) & 7);
  while (i >= 0 && carry) {
    const x = end[i]! + carry;
    end[i] = x & 0xff;
    carry = x > 0xff ? 1 : 0;
    i--;
  }
  return { start, end: carry ? undefined : end };
}

/** [start, end) back to 'addr/len' when it is a prefix, else 'start-last'. */
export function rangeToText(t: 'ipv4_addr' | 'ipv6_addr', start: Buffer, end: Buffer | undefined): string {
  const fmt = (b: Buffer) => (t === 'ipv4_addr' ? formatIPv4(b) : formatIPv6(b));
  const bits = start.length * 8;
  for (let p = 0; p <= bits; p++) {
    try {
      const r = cidrRange(t, `${fmt(start)}/${p}`);
      if ((r.end === undefined && end === undefined) || (r.end && end && r.end.equals(end)))
        return p === bits ? fmt(start) : `${fmt(start)}/${p}`;
    } catch {
      // host bits set at this length: try a longer prefix
    }
  }
  const last = Buffer.from(end ?? Buffer.alloc(start.length, 0xff));
  if (end) {
    for (let i = last.length - 1; i >= 0; i--) {
      if (last[i]! > 0) {
        last[i] = last[i]! - 1;
        break;
      }
      last[i] = 0xff;
    }
  }
  return `${fmt(start)}-${fmt(last)}`;
}
