// The typed expression model: one object per kernel expression, with the fields `nft
// --debug=netlink` shows. The same objects go to the addon (native/nftables/expr.cc maps each
// field to its attribute) and come back from a rule dump, so a listed rule deep-equals the rule
// that was added. renderExpr() prints an expression exactly as `nft --debug=netlink` does.

/** Registers: 0 = verdict, 1..4 = the 16-byte registers, 8..23 = the 32-bit registers. */
export type Register = number;
/** Bytes as lower-case hex, in wire order ('0a000001' is 10.0.0.1). */
export type Hex = string;

export type VerdictCode = 'accept' | 'drop' | 'continue' | 'break' | 'return' | 'jump' | 'goto' | 'queue' | 'stolen' | 'repeat';
export interface Verdict {
  code: VerdictCode;
  /** Target of jump / goto. */
  chain?: string;
}

export type PayloadBase = 'll' | 'network' | 'transport' | 'inner';
export type MetaKey =
  | 'len' | 'protocol' | 'priority' | 'mark' | 'iif' | 'oif' | 'iifname' | 'oifname' | 'iiftype' | 'oiftype'
  | 'skuid' | 'skgid' | 'nftrace' | 'rtclassid' | 'secmark' | 'nfproto' | 'l4proto' | 'bri_iifname' | 'bri_oifname'
  | 'pkttype' | 'cpu' | 'iifgroup' | 'oifgroup' | 'cgroup' | 'random' | 'secpath' | 'iifkind' | 'oifkind'
  | 'bri_iifpvid' | 'bri_iifvproto' | 'time' | 'day' | 'hour' | 'sdif' | 'sdifname';
export type CtKey =
  | 'state' | 'direction' | 'status' | 'mark' | 'secmark' | 'expiration' | 'helper' | 'l3protocol' | 'src' | 'dst'
  | 'protocol' | 'proto-src' | 'proto-dst' | 'label' | 'packets' | 'bytes' | 'avgpkt' | 'zone' | 'event'
  | 'ip saddr' | 'ip daddr' | 'ip6 saddr' | 'ip6 daddr' | 'id';
/** libnftnl's names of the ct keys whose names differ from nft's syntax (its debug listing). */
const CT_DEBUG_NAME: Partial<Record<CtKey, string>> = {
  'proto-src': 'proto_src', 'proto-dst': 'proto_dst', 'ip saddr': 'src_ip', 'ip daddr': 'dst_ip', 'ip6 saddr': 'src_ip6', 'ip6 daddr': 'dst_ip6', id: 'ct_id',
};
export type CmpOp = 'eq' | 'neq' | 'lt' | 'lte' | 'gt' | 'gte';

export interface PayloadExpr {
  type: 'payload';
  base: PayloadBase;
  offset: number;
  len: number;
  dreg?: Register;
  /** payload write: */
  sreg?: Register;
  csumType?: number;
  csumOffset?: number;
  csumFlags?: number;
}
export interface MetaExpr {
  type: 'meta';
  key: MetaKey;
  dreg?: Register;
  sreg?: Register;
}
export interface CmpExpr {
  type: 'cmp';
  sreg: Register;
  op: CmpOp;
  data: Hex;
}
export interface BitwiseExpr {
  type: 'bitwise';
  sreg: Register;
  dreg: Register;
  op?: 'bool' | 'lshift' | 'rshift';
  len: number;
  mask?: Hex;
  xor?: Hex;
  data?: Hex;
}
export interface LookupExpr {
  type: 'lookup';
  sreg: Register;
  set: string;
  /** Set maps: where the mapped value goes (0 = verdict map). */
  dreg?: Register;
  setId?: number;
  invert?: boolean;
}
export interface ImmediateExpr {
  type: 'immediate';
  dreg: Register;
  data?: Hex;
  verdict?: Verdict;
}
export interface CounterExpr {
  type: 'counter';
  bytes?: number;
  packets?: number;
}
export interface CtExpr {
  type: 'ct';
  key: CtKey;
  dreg?: Register;
  sreg?: Register;
  direction?: 'original' | 'reply';
}
export interface NatExpr {
  type: 'nat';
  nat: 'snat' | 'dnat';
  family: 'ip' | 'ip6' | 'inet';
  addrMin?: Register;
  addrMax?: Register;
  protoMin?: Register;
  protoMax?: Register;
  flags?: number;
}
export interface MasqExpr {
  type: 'masq';
  flags?: number;
  protoMin?: Register;
  protoMax?: Register;
}
export interface RejectExpr {
  type: 'reject';
  rejectType: 'icmp' | 'tcp-reset' | 'icmpx';
  code: number;
}
export interface FibExpr {
  type: 'fib';
  flags: number;
  result: 'oif' | 'oifname' | 'type';
  dreg: Register;
}
/** `numgen random|inc mod N [offset O]`: a number in [offset, offset + N) into a register. */
export interface NumgenExpr {
  type: 'numgen';
  dreg: Register;
  modulus: number;
  ngType: 'incremental' | 'random';
  offset?: number;
}
/** `jhash <reg> mod N seed S [offset O]`: Jenkins' hash of `len` bytes from `sreg` on, scaled
 *  into [offset, offset + N), into a register (symhash: of the packet's flow, symmetric). */
export interface HashExpr {
  type: 'hash';
  sreg?: Register;
  dreg: Register;
  len?: number;
  modulus: number;
  seed?: number;
  offset?: number;
  hashType: 'jhash' | 'symhash';
}
/** `update|add|delete @set { key [timeout T] [: data] }` from the packet path: the key (and a
 *  map's data) from the registers that hold them. */
export interface DynsetExpr {
  type: 'dynset';
  sregKey: Register;
  sregData?: Register;
  op: 'add' | 'update' | 'delete';
  /** ms */
  timeout?: number;
  set: string;
  setId?: number;
  flags?: number;
}
export interface LimitExpr {
  type: 'limit';
  rate: number;
  /** seconds */
  unit: number;
  burst: number;
  limitType: 'packets' | 'bytes';
  flags: number;
}
export interface LogExpr {
  type: 'log';
  prefix?: string;
  group?: number;
  snaplen?: number;
  qthreshold?: number;
  level?: number;
  flags?: number;
}
/** An expression ipvsync has no schema for, kept verbatim from a dump (re-encodes losslessly). */
export interface UnknownExpr {
  type: string;
  unknown: Array<{ attr: number; hex: Hex }>;
}

export type Expr =
  | PayloadExpr | MetaExpr | CmpExpr | BitwiseExpr | LookupExpr | ImmediateExpr | CounterExpr | CtExpr
  | NatExpr | MasqExpr | RejectExpr | FibExpr | NumgenExpr | HashExpr | DynsetExpr | LimitExpr | LogExpr;

// NAT range flags (linux/netfilter/nf_nat.h)
export const NAT_RANGE_MAP_IPS = 0x1;
export const NAT_RANGE_PROTO_SPECIFIED = 0x2;
export const NAT_RANGE_PROTO_RANDOM = 0x4;
export const NAT_RANGE_PERSISTENT = 0x8;
export const NAT_RANGE_PROTO_RANDOM_FULLY = 0x10;
// fib flags
export const FIB_SADDR = 0x1;
export const FIB_DADDR = 0x2;
export const FIB_MARK = 0x4;
export const FIB_IIF = 0x8;
export const FIB_OIF = 0x10;
export const FIB_PRESENT = 0x20;
/** RTN_* route types a `fib … type` lookup yields. */
export const RTN = { unicast: 1, local: 2, broadcast: 3, anycast: 4, multicast: 5, blackhole: 6, unreachable: 7, prohibit: 8 } as const;
export const CT_STATE = { invalid: 1, established: 2, related: 4, new: 8, untracked: 64 } as const;
export const CT_STATUS = { expected: 0x1, seen_reply: 0x2, assured: 0x4, confirmed: 0x8, snat: 0x10, dnat: 0x20, dying: 0x200 } as const;

// ---- rendering (libnftnl's expression snprintf, as nft --debug=netlink prints it) ---------

/** Data as nft prints it: each 4-byte word read in host (little-endian) order, 0x%08x. */
export function renderData(hex: Hex): string {
  const b = Buffer.from(hex, 'hex');
  const words: string[] = [];
  for (let i = 0; i < b.length; i += 4) {
    const w = Buffer.alloc(4);
    b.copy(w, 0, i, Math.min(i + 4, b.length));
    words.push(`0x${w.readUInt32LE(0).toString(16).padStart(8, '0')}`);
  }
  return words.join(' ');
}

const UNITS: Record<number, string> = { 1: 'second', 60: 'minute', 3600: 'hour', 86400: 'day', 604800: 'week' };

function renderVerdict(v: Verdict): string {
  return v.chain !== undefined ? `${v.code} -> ${v.chain}` : v.code;
}

function body(e: Expr | UnknownExpr): string {
  if ('unknown' in e && e.unknown) return e.unknown.map((u) => `${u.attr}=${u.hex}`).join(' ') + ' ';
  const x = e as Expr;
  switch (x.type) {
    case 'payload':
      if (x.sreg !== undefined)
        return `write reg ${x.sreg} => ${x.len}b @ ${x.base} header + ${x.offset} csum_type ${x.csumType ?? 0} csum_off ${x.csumOffset ?? 0} csum_flags 0x${(x.csumFlags ?? 0).toString(16)} `;
      return `load ${x.len}b @ ${x.base} header + ${x.offset} => reg ${x.dreg} `;
    case 'meta':
      return x.sreg !== undefined ? `set ${x.key} with reg ${x.sreg} ` : `load ${x.key} => reg ${x.dreg} `;
    case 'cmp':
      return `${x.op} reg ${x.sreg} ${renderData(x.data)} `;
    case 'bitwise':
      if (x.op === 'lshift' || x.op === 'rshift')
        return `reg ${x.dreg} = ( reg ${x.sreg} ${x.op === 'lshift' ? '<<' : '>>'} ${renderData(x.data ?? '')} ) `;
      return `reg ${x.dreg} = ( reg ${x.sreg} & ${renderData(x.mask ?? '')} ) ^ ${renderData(x.xor ?? '')} `;
    case 'lookup':
      return `reg ${x.sreg} set ${x.set}${x.dreg !== undefined ? ` dreg ${x.dreg}` : ''}${x.invert ? ' 0x1' : ''} `;
    case 'immediate':
      return `reg ${x.dreg} ${x.verdict ? renderVerdict(x.verdict) : renderData(x.data ?? '')} `;
    case 'counter':
      return `pkts ${x.packets ?? 0} bytes ${x.bytes ?? 0} `;
    case 'ct':
      if (x.sreg !== undefined) return `set ${x.key} with reg ${x.sreg} `;
      return `load ${CT_DEBUG_NAME[x.key] ?? x.key} => reg ${x.dreg} ${x.direction !== undefined ? `, dir ${x.direction} ` : ''}`;
    case 'nat': {
      let s = `${x.nat} ${x.family} `;
      if (x.addrMin !== undefined) s += `addr_min reg ${x.addrMin} `;
      if (x.addrMax !== undefined) s += `addr_max reg ${x.addrMax} `;
      if (x.protoMin !== undefined) s += `proto_min reg ${x.protoMin} `;
      if (x.protoMax !== undefined) s += `proto_max reg ${x.protoMax} `;
      if (x.flags !== undefined) s += `flags 0x${x.flags.toString(16)} `;
      return s;
    }
    case 'masq': {
      let s = '';
      if (x.flags !== undefined) s += `flags 0x${x.flags.toString(16)} `;
      if (x.protoMin !== undefined) s += `proto_min reg ${x.protoMin} `;
      if (x.protoMax !== undefined) s += `proto_max reg ${x.protoMax} `;
      return s;
    }
    case 'reject':
      return `type ${{ icmp: 0, 'tcp-reset': 1, icmpx: 2 }[x.rejectType]} code ${x.code} `;
    case 'fib': {
      const names = (['saddr', 'daddr', 'mark', 'iif', 'oif', 'present'] as const).filter((_, i) => x.flags & (1 << i));
      return `${names.join(' . ')} ${x.result} => reg ${x.dreg} `;
    }
    case 'numgen':
      return `reg ${x.dreg} = ${x.ngType === 'random' ? 'random' : 'inc'} mod ${x.modulus} ${x.offset ? `offset ${x.offset} ` : ''}`;
    case 'hash':
      return x.hashType === 'symhash'
        ? `reg ${x.dreg} = symhash() % mod ${x.modulus} ${x.offset ? `offset ${x.offset} ` : ''}`
        : `reg ${x.dreg} = jhash(reg ${x.sreg}, ${x.len}, 0x${(x.seed ?? 0).toString(16)}) % mod ${x.modulus} ${x.offset ? `offset ${x.offset} ` : ''}`;
    case 'dynset':
      return `${x.op} reg_key ${x.sregKey} set ${x.set} ${x.sregData !== undefined ? `sreg_data ${x.sregData} ` : ''}${x.timeout ? `timeout ${x.timeout}ms ` : ''}`;
    case 'limit':
      return `rate ${x.rate}/${UNITS[x.unit] ?? x.unit} burst ${x.burst} type ${x.limitType} flags 0x${x.flags.toString(16)} `;
    case 'log': {
      let s = '';
      if (x.prefix !== undefined) s += `prefix ${x.prefix} `;
      if (x.group !== undefined) s += `group ${x.group} snaplen ${x.snaplen ?? 0} qthreshold ${x.qthreshold ?? 0} `;
      else if (x.level !== undefined) s += `level ${x.level} `;
      if (x.flags !== undefined && x.flags !== 0) s += `flags ${x.flags} `;
      return s;
    }
  }
}

/** One line of `nft --debug=netlink`: "[ payload load 4b @ network header + 16 => reg 1 ]". */
export function renderExpr(e: Expr | UnknownExpr): string {
  return `[ ${e.type} ${body(e)}]`;
}

/**
 * The canonical form of an expression, as ipvsync's builders (and nft) write it. A rule dump
 * carries values the kernel fills in itself: nat's max registers (= min) and its MAP_IPS flag,
 * lookup flags 0, log level 4 (the default), counter values. Listing applies this, so a listed
 * rule deep-equals canonicalExprs(the rule that was added).
 */
export function canonicalExpr(e: Expr, opts: { counters?: boolean } = {}): Expr {
  switch (e.type) {
    case 'lookup': {
      if (e.invert === false) {
        const { invert: _i, ...rest } = e;
        return rest;
      }
      return e;
    }
    case 'nat': {
      const out: NatExpr = { ...e };
      if (out.addrMax !== undefined && out.addrMax === out.addrMin) delete out.addrMax;
      if (out.protoMax !== undefined && out.protoMax === out.protoMin) delete out.protoMax;
      if (out.flags !== undefined && out.addrMin !== undefined) out.flags &= ~NAT_RANGE_MAP_IPS;
      if (out.flags === 0) delete out.flags;
      return out;
    }
    case 'log': {
      if (e.level === 4 && e.group === undefined) {
        const { level: _l, ...rest } = e;
        if (rest.flags === 0) delete rest.flags;
        return rest;
      }
      return e;
    }
    case 'reject':
      return e.code === undefined ? { ...e, code: 0 } : e;
    case 'counter':
      return opts.counters ? e : { type: 'counter' };
    case 'dynset': {
      // the kernel dumps NFTA_DYNSET_TIMEOUT and NFTA_DYNSET_FLAGS always, 0 for none
      if (!e.timeout || !e.flags) {
        const out: DynsetExpr = { ...e };
        if (!out.timeout) delete out.timeout;
        if (!out.flags) delete out.flags;
        return out;
      }
      return e;
    }
    case 'hash':
      // the kernel dumps NFTA_HASH_OFFSET only when it is not 0
      if (e.offset === 0) {
        const { offset: _o, ...rest } = e;
        return rest;
      }
      return e;
    case 'bitwise': {
      // the kernel dumps NFTA_BITWISE_OP always; nft sends it for some rules only
      if (e.op === 'bool') {
        const { op: _o, ...rest } = e;
        return rest;
      }
      return e;
    }
    default:
      return e;
  }
}

export function canonicalExprs(exprs: readonly Expr[], opts: { counters?: boolean } = {}): Expr[] {
  return exprs.map((e) => canonicalExpr(e, opts));
}
