// Small builders for the rules a service proxy needs. Each returns exactly the expressions `nft`
// generates for the equivalent rule text (checked against golden captures of nft 1.0.6), e.g.
//   rule(inSet([F.ipDaddr, F.l4proto, F.thDport], 'svc'), accept())
//     == nft 'ip daddr . meta l4proto . th dport @svc accept'
import { NetlinkError } from '../errors.js';
import {
  CT_STATE, CT_STATUS, FIB_DADDR, FIB_SADDR, NAT_RANGE_PERSISTENT, NAT_RANGE_PROTO_RANDOM, NAT_RANGE_PROTO_RANDOM_FULLY,
  NAT_RANGE_PROTO_SPECIFIED, RTN,
  type CtKey, type Expr, type MetaKey, type PayloadBase, type Register, type Verdict,
} from './nft-expr.js';
import { DATATYPES, HEX_BYTE, cidrRange, encodeValue, hexBe32, hexLe32, ipv4ToU32, type DataType, type KeyValue } from './nft-types.js';

/** Something a rule can load into a register and compare: a header field, meta or ct key. */
export interface Field {
  readonly name: string;
  /** Bytes loaded. */
  readonly len: number;
  /** Datatype of the field's values (for match() and set keys). */
  readonly datatype: DataType | 'nfproto';
  load(dreg: Register): Expr;
}

function payload(name: string, base: PayloadBase, offset: number, len: number, datatype: DataType): Field {
  return { name, len, datatype, load: (dreg) => ({ type: 'payload', dreg, base, offset, len }) };
}
function meta(key: MetaKey, len: number, datatype: DataType | 'nfproto'): Field {
  return { name: `meta ${key}`, len, datatype, load: (dreg) => ({ type: 'meta', key, dreg }) };
}
function ct(key: CtKey, len: number, datatype: DataType): Field {
  return { name: `ct ${key}`, len, datatype, load: (dreg) => ({ type: 'ct', key, dreg }) };
}

function ctOriginal(key: CtKey, len: number, datatype: DataType): Field {
  return { name: `ct original ${key}`, len, datatype, load: (dreg) => ({ type: 'ct', key, dreg, direction: 'original' }) };
}

/** The fields a proxy matches on. */
export const F = {
  ipSaddr: payload('ip saddr', 'network', 12, 4, 'ipv4_addr'),
  ipDaddr: payload('ip daddr', 'network', 16, 4, 'ipv4_addr'),
  ip6Saddr: payload('ip6 saddr', 'network', 8, 16, 'ipv6_addr'),
  ip6Daddr: payload('ip6 daddr', 'network', 24, 16, 'ipv6_addr'),
  ipProtocol: payload('ip protocol', 'network', 9, 1, 'inet_proto'),
  ip6Nexthdr: payload('ip6 nexthdr', 'network', 6, 1, 'inet_proto'),
  thSport: payload('th sport', 'transport', 0, 2, 'inet_service'),
  thDport: payload('th dport', 'transport', 2, 2, 'inet_service'),
  l4proto: meta('l4proto', 1, 'inet_proto'),
  nfproto: meta('nfproto', 1, 'nfproto'),
  mark: meta('mark', 4, 'mark'),
  iifname: meta('iifname', 16, 'ifname'),
  oifname: meta('oifname', 16, 'ifname'),
  ctMark: ct('mark', 4, 'mark'),
  /** The connection's original destination (before the dnat). */
  ctOrigIpDaddr: ctOriginal('ip daddr', 4, 'ipv4_addr'),
  ctOrigIp6Daddr: ctOriginal('ip6 daddr', 16, 'ipv6_addr'),
  /** …and port: nft takes it in a concatenation after a match of one transport protocol. */
  ctOrigProtoDst: ctOriginal('proto-dst', 2, 'inet_service'),
} as const;

/** `numgen random mod N [offset O]` (or `inc`), as a field: the last part of a concatenated map
 *  key, so a lookup picks one of N elements per key (`... . numgen random mod 3 map @m`); with
 *  an offset, one of the N elements keyed O..O+N-1. */
export function numgen(modulus: number, ngType: 'random' | 'incremental' = 'random', offset = 0): Field {
  if (!Number.isInteger(modulus) || modulus < 1 || modulus > 0xffffffff) throw NetlinkError.invalid('nftables', `numgen modulus ${modulus} out of range`);
  if (!Number.isInteger(offset) || offset < 0 || offset + modulus - 1 > 0xffffffff) throw NetlinkError.invalid('nftables', `numgen offset ${offset} out of range`);
  return { name: `numgen ${ngType} mod ${modulus}${offset ? ` offset ${offset}` : ''}`, len: 4, datatype: 'mark', load: (dreg) => ({ type: 'numgen', dreg, modulus, ngType, offset }) };
}

/** nft's register for the field starting at 32-bit word `w` of a concatenation: the 16-byte
 *  registers (1..4) where aligned, for compatibility, else the 32-bit ones (8 + w). */
export function registerForWord(w: number): Register {
  return w % 4 === 0 ? 1 + w / 4 : 8 + w;
}

/** 32-bit words a concatenation of the fields takes. */
function words(fields: readonly Field[]): number {
  return fields.reduce((n, f) => n + ((f.len + 3) >> 2), 0);
}

/** Loads a (concatenation of) field(s) into consecutive registers starting at reg 1 (or at
 *  32-bit word `from`). */
export function load(fields: readonly Field[], from = 0): Expr[] {
  const out: Expr[] = [];
  let w = from;
  for (const f of fields) {
    out.push(f.load(registerForWord(w)));
    w += (f.len + 3) >> 2;
  }
  return out;
}

const PROTO_HEX: Record<string, string> = { tcp: '06', udp: '11', sctp: '84', icmp: '01', icmpv6: '3a' };

/** A field value as the hex a cmp compares with. */
function fieldValueHex(f: Field, v: KeyValue): string {
  switch (f.datatype) {
    case 'nfproto': {
      const n = v === 'ipv4' || v === 'ip' ? 2 : v === 'ipv6' || v === 'ip6' ? 10 : v;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < 0 || n > 255) throw NetlinkError.invalid('nftables', `not an nfproto: ${v}`);
      return HEX_BYTE[n]!;
    }
    case 'inet_proto':
      if (typeof v === 'string' && PROTO_HEX[v] !== undefined) return PROTO_HEX[v]!;
      break;
    case 'ipv4_addr':
      if (typeof v === 'string') return hexBe32(ipv4ToU32(v));
      break;
    case 'inet_service':
      if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 65535) return HEX_BYTE[v >>> 8]! + HEX_BYTE[v & 0xff]!;
      break;
    case 'mark':
      if (typeof v === 'number' && Number.isInteger(v) && v >= 0 && v <= 0xffffffff) return hexLe32(v);
      break;
  }
  const b = Buffer.alloc(DATATYPES[f.datatype].len);
  encodeValue(f.datatype, v, b, 0);
  return b.toString('hex');
}

/** A CIDR match's constant parts, computed once per (type, text). */
interface CidrMatch {
  plen: number;
  /** byte-aligned prefix: the bytes compared */
  prefixHex: string;
  start: string;
  mask: string;
  zero: string;
  len: number;
}
const CIDR_CACHE = new Map<string, CidrMatch>();

function cidrMatch(t: 'ipv4_addr' | 'ipv6_addr', value: string): CidrMatch {
  const k = t === 'ipv4_addr' ? value : `6 ${value}`;
  let m = CIDR_CACHE.get(k);
  if (m) return m;
  const plen = Number(value.split('/')[1]);
  const { start } = cidrRange(t, value);
  const mask = Buffer.alloc(start.length);
  for (let i = 0; i < plen; i++) mask[i >> 3]! |= 0x80 >> (i & 7);
  m = {
    plen,
    prefixHex: plen % 8 === 0 ? start.subarray(0, plen / 8).toString('hex') : '',
    start: start.toString('hex'),
    mask: mask.toString('hex'),
    zero: Buffer.alloc(start.length).toString('hex'),
    len: start.length,
  };
  if (CIDR_CACHE.size < 4096) CIDR_CACHE.set(k, m);
  return m;
}

/** `<field> [!=] <value>`; an address field takes a CIDR too ('10.0.0.0/8'), as nft does:
 *  byte-aligned prefixes load fewer bytes, others are masked. */
export function match(f: Field, value: KeyValue, op: 'eq' | 'neq' = 'eq'): Expr[] {
  if ((f.datatype === 'ipv4_addr' || f.datatype === 'ipv6_addr') && typeof value === 'string' && value.includes('/')) {
    const m = cidrMatch(f.datatype, value);
    const l = f.load(1);
    if (m.plen % 8 === 0 && l.type === 'payload') {
      l.len = m.plen / 8; // l is a fresh object from load()
      return [l, { type: 'cmp', sreg: 1, op, data: m.prefixHex }];
    }
    return [
      l,
      { type: 'bitwise', sreg: 1, dreg: 1, op: 'bool', len: m.len, mask: m.mask, xor: m.zero },
      { type: 'cmp', sreg: 1, op, data: m.start },
    ];
  }
  return [f.load(1), { type: 'cmp', sreg: 1, op, data: fieldValueHex(f, value) }];
}

/** `<fields> [!=] @set`. */
export function inSet(fields: readonly Field[], set: string, opts: { invert?: boolean; setId?: number } = {}): Expr[] {
  return [
    ...load(fields),
    { type: 'lookup', sreg: 1, set, ...(opts.setId !== undefined ? { setId: opts.setId } : {}), ...(opts.invert ? { invert: true } : {}) },
  ];
}

/** `<fields> vmap @map`. */
export function vmap(fields: readonly Field[], map: string, opts: { setId?: number } = {}): Expr[] {
  return [...load(fields), { type: 'lookup', sreg: 1, dreg: 0, set: map, ...(opts.setId !== undefined ? { setId: opts.setId } : {}) }];
}

/** `jhash <fields> mod N seed S vmap @map`: the fields loaded from register 2 on, their hash
 *  into register 1, looked up in a verdict map keyed by the hash (a mark), as nft lays it out. */
export function hashVmap(fields: readonly Field[], modulus: number, map: string, seed = 0): Expr[] {
  if (!Number.isInteger(modulus) || modulus < 1 || modulus > 0xffffffff) throw NetlinkError.invalid('nftables', `hash modulus ${modulus} out of range`);
  return [
    ...load(fields, 4),
    { type: 'hash', sreg: 2, dreg: 1, len: words(fields) * 4, modulus, seed, offset: 0, hashType: 'jhash' },
    { type: 'lookup', sreg: 1, dreg: 0, set: map },
  ];
}

/**
 * `add|update|delete @set { <key> [timeout T] [: <data>] }` from the packet path: the key loaded
 * from register 1 on, a map's data right after it, as nft lays them out.
 */
export function dynset(op: 'add' | 'update' | 'delete', key: readonly Field[], set: string, opts: { data?: readonly Field[]; timeoutMs?: number } = {}): Expr[] {
  const out = load(key);
  const e: Expr = { type: 'dynset', sregKey: 1, op, set };
  if (opts.data) {
    const at = words(key);
    out.push(...load(opts.data, at));
    e.sregData = registerForWord(at);
  }
  if (opts.timeoutMs) e.timeout = opts.timeoutMs;
  out.push(e);
  return out;
}

export function verdict(v: Verdict): Expr {
  return { type: 'immediate', dreg: 0, verdict: v };
}
export const accept = (): Expr => verdict({ code: 'accept' });
export const drop = (): Expr => verdict({ code: 'drop' });
export const ret = (): Expr => verdict({ code: 'return' });
export const jump = (chain: string): Expr => verdict({ code: 'jump', chain });
export const goTo = (chain: string): Expr => verdict({ code: 'goto', chain });

function u32le(v: number): string {
  return hexLe32(v >>> 0);
}

/** `meta mark & mask == value` (or `ct mark …`, or `!=`). */
export function markMatch(source: 'meta' | 'ct', mask: number, value: number = mask, op: 'eq' | 'neq' = 'eq'): Expr[] {
  const f = source === 'meta' ? F.mark : F.ctMark;
  return [
    f.load(1),
    { type: 'bitwise', sreg: 1, dreg: 1, op: 'bool', len: 4, mask: u32le(mask), xor: u32le(0) },
    { type: 'cmp', sreg: 1, op, data: u32le(value) },
  ];
}

/** `meta mark set mark | bits`. */
export function setMarkBits(bits: number): Expr[] {
  return [
    F.mark.load(1),
    { type: 'bitwise', sreg: 1, dreg: 1, op: 'bool', len: 4, mask: u32le(~bits >>> 0), xor: u32le(bits) },
    { type: 'meta', key: 'mark', sreg: 1 },
  ];
}

/** `meta mark set <value>`. */
export function setMark(value: number): Expr[] {
  return [{ type: 'immediate', dreg: 1, data: u32le(value) }, { type: 'meta', key: 'mark', sreg: 1 }];
}

/** `ct mark set meta mark`. */
export function ctMarkFromMeta(): Expr[] {
  return [F.mark.load(1), { type: 'ct', key: 'mark', sreg: 1 }];
}

/** `fib daddr type local` (or another route type). */
export function fibDaddrType(type: keyof typeof RTN = 'local'): Expr[] {
  return fibType(FIB_DADDR, type);
}

/** `fib saddr type local`: the packet's source is an address of this host (what it sends). */
export function fibSaddrType(type: keyof typeof RTN = 'local'): Expr[] {
  return fibType(FIB_SADDR, type);
}

function fibType(flags: number, type: keyof typeof RTN): Expr[] {
  return [
    { type: 'fib', flags, result: 'type', dreg: 1 },
    { type: 'cmp', sreg: 1, op: 'eq', data: u32le(RTN[type]) },
  ];
}

/** `ct state established,related`. */
export function ctState(...states: Array<keyof typeof CT_STATE>): Expr[] {
  const bits = states.reduce((m, s) => m | CT_STATE[s], 0);
  return [
    { type: 'ct', key: 'state', dreg: 1 },
    // nft leaves NFTA_BITWISE_OP out for flag tests (the kernel defaults it to bool)
    { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: u32le(bits), xor: u32le(0) },
    { type: 'cmp', sreg: 1, op: 'neq', data: u32le(0) },
  ];
}

/** `ct status dnat` (any of the bits). */
export function ctStatus(...bits: Array<keyof typeof CT_STATUS>): Expr[] {
  const m = bits.reduce((x, s) => x | CT_STATUS[s], 0);
  return [
    { type: 'ct', key: 'status', dreg: 1 },
    { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: u32le(m), xor: u32le(0) },
    { type: 'cmp', sreg: 1, op: 'neq', data: u32le(0) },
  ];
}

/** `ct direction original|reply`. */
export function ctDirection(d: 'original' | 'reply'): Expr[] {
  return [{ type: 'ct', key: 'direction', dreg: 1 }, { type: 'cmp', sreg: 1, op: 'eq', data: d === 'reply' ? '01' : '00' }];
}

function natTo(kind: 'snat' | 'dnat', family: 'ip' | 'ip6', addr: string, port?: number, flags = 0): Expr[] {
  let hex: string;
  if (family === 'ip' && typeof addr === 'string') {
    hex = hexBe32(ipv4ToU32(addr));
  } else {
    const a = Buffer.alloc(family === 'ip' ? 4 : 16);
    encodeValue(family === 'ip' ? 'ipv4_addr' : 'ipv6_addr', addr, a, 0);
    hex = a.toString('hex');
  }
  const out: Expr[] = [{ type: 'immediate', dreg: 1, data: hex }];
  if (port !== undefined) {
    if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) throw NetlinkError.invalid('nftables', `not a port: ${port}`);
    out.push({ type: 'immediate', dreg: 2, data: HEX_BYTE[port >>> 8]! + HEX_BYTE[port & 0xff]! });
    flags |= NAT_RANGE_PROTO_SPECIFIED;
  }
  // Built without spreads: one literal shape per variant, no temporary objects (a proxy table
  // has one of these per endpoint).
  const nat: Expr =
    port !== undefined ? { type: 'nat', nat: kind, family, addrMin: 1, protoMin: 2 } : { type: 'nat', nat: kind, family, addrMin: 1 };
  if (flags) nat.flags = flags;
  out.push(nat);
  return out;
}

/**
 * `dnat ip to <fields> map @map`, as nft writes it: the map gives the key an address, or with
 * `port` an address and a port (a map whose data is `ipv4_addr . inet_service`: the address in
 * register 1, the port in the 32-bit word after it — for ip6, register 2, as the kernel lists
 * it). nft takes the port form after a
 * transport protocol match only (`meta l4proto @protos dnat ...`).
 */
export function dnatMap(family: 'ip' | 'ip6', fields: readonly Field[], map: string, opts: { port?: boolean } = {}): Expr[] {
  const nat: Expr = opts.port
    ? { type: 'nat', nat: 'dnat', family, addrMin: 1, protoMin: registerForWord(family === 'ip' ? 1 : 4), flags: NAT_RANGE_PROTO_SPECIFIED }
    : { type: 'nat', nat: 'dnat', family, addrMin: 1 };
  return [...load(fields), { type: 'lookup', sreg: 1, set: map, dreg: 1 }, nat];
}

/** `dnat to 10.1.1.1:8080` (ip) / `dnat to [fd00::2]:8080` (ip6). */
export function dnat(family: 'ip' | 'ip6', addr: string, port?: number): Expr[] {
  return natTo('dnat', family, addr, port);
}
export function snat(family: 'ip' | 'ip6', addr: string, port?: number): Expr[] {
  return natTo('snat', family, addr, port);
}

/** `masquerade [random] [fully-random] [persistent]`. */
export function masquerade(opts: { random?: boolean; fullyRandom?: boolean; persistent?: boolean } = {}): Expr {
  const flags =
    (opts.random ? NAT_RANGE_PROTO_RANDOM : 0) |
    (opts.fullyRandom ? NAT_RANGE_PROTO_RANDOM_FULLY : 0) |
    (opts.persistent ? NAT_RANGE_PERSISTENT : 0);
  return flags ? { type: 'masq', flags } : { type: 'masq' };
}

export const counter = (): Expr => ({ type: 'counter' });

/** `limit rate N/unit burst B packets`. */
export function limit(rate: number, per: 'second' | 'minute' | 'hour' | 'day' = 'second', burst = 5): Expr {
  const unit = { second: 1, minute: 60, hour: 3600, day: 86400 }[per];
  return { type: 'limit', rate, unit, burst, limitType: 'packets', flags: 0 };
}

export function log(prefix?: string): Expr {
  return prefix === undefined ? { type: 'log' } : { type: 'log', prefix };
}

/** `reject` (icmp port-unreachable in ip, icmpv6 in ip6) or `reject with tcp reset`. */
export function reject(how: 'icmp-port-unreachable' | 'icmpv6-port-unreachable' | 'icmpx-port-unreachable' | 'tcp-reset' = 'icmp-port-unreachable'): Expr {
  switch (how) {
    case 'tcp-reset':
      return { type: 'reject', rejectType: 'tcp-reset', code: 0 };
    case 'icmpv6-port-unreachable':
      return { type: 'reject', rejectType: 'icmp', code: 4 };
    case 'icmpx-port-unreachable':
      return { type: 'reject', rejectType: 'icmpx', code: 1 };
    default:
      return { type: 'reject', rejectType: 'icmp', code: 3 };
  }
}

/** Flattens parts into one expression list. */
export function rule(...parts: Array<Expr | Expr[]>): Expr[] {
  const out: Expr[] = [];
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if (Array.isArray(p)) for (let k = 0; k < p.length; k++) out.push(p[k]!);
    else out.push(p);
  }
  return out;
}
