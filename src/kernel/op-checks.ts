// The addon's checks of the values an op carries (native/ipvs/op_parse.h and ipvs/codec.cc's
// Validate, addon/rtnl_binding.cc's address and route arguments, addon/ipset_binding.cc's set and
// member arguments), as functions that say which field is wrong instead of throwing for the whole
// batch: a caller (the sync engine) can leave one bad object out and send the rest. The addon
// still checks every op it converts; test/unit/engine-validate.test.ts holds these to its
// verdicts. nftables needs none here: its façade checks ops in TypeScript (NftTransaction).
import { addressFamily } from '../net/address.js';
import type { DestinationConfig, ServiceConfig } from './ipvs.js';
import { typeDims, type IpSetMember, type IpSetSpec } from './ipsets.js';

/** What is wrong with a value: the field that holds it and why. */
export interface FieldProblem {
  field: string;
  message: string;
}

function problem(field: string, message: string): FieldProblem {
  return { field, message };
}

const isSet = (v: unknown): boolean => v !== undefined && v !== null;

function isInt(v: unknown, lo: number, hi: number): boolean {
  return typeof v === 'number' && Number.isFinite(v) && Math.floor(v) === v && v >= lo && v <= hi;
}

function intProblem(field: string, v: unknown, lo: number, hi: number): FieldProblem | undefined {
  if (typeof v !== 'number') return problem(field, `${field} must be a number`);
  return isInt(v, lo, hi) ? undefined : problem(field, `${field} must be an integer ${lo}-${hi}, got ${String(v)}`);
}

/** Bytes of a name as the addon counts them (UTF-8). */
function nameBytes(s: string): number {
  return s.length * 3 <= 255 && /^[\x00-\x7f]*$/.test(s) ? s.length : Buffer.byteLength(s);
}

// ---- IPVS ------------------------------------------------------------------------------------

const FLAGS: Record<string, string | null> = {
  persistent: null,
  'one-packet': null,
  'sh-fallback': 'sh',
  'sh-port': 'sh',
  'mh-fallback': 'mh',
  'mh-port': 'mh',
  'flag-1': null,
  'flag-2': null,
  'flag-3': null,
};

/** The family a service's or destination's `family` names (undefined when it names none). */
function familyField(o: { family?: unknown }): 4 | 6 | undefined | FieldProblem {
  if (!isSet(o.family)) return undefined;
  if (o.family === 'inet') return 4;
  if (o.family === 'inet6') return 6;
  return problem('family', `family must be 'inet' or 'inet6', got '${String(o.family)}'`);
}

/** The first problem of a virtual service (addService / updateService), as the addon finds it. */
export function ipvsServiceProblem(s: ServiceConfig): FieldProblem | undefined {
  const o = s as unknown as Record<string, unknown>;
  let v6: boolean;
  if (isSet(o.fwmark)) {
    if (isSet(o.address) || isSet(o.protocol)) return problem('fwmark', 'a service is identified by fwmark or by protocol/address/port, not both');
    const p = intProblem('fwmark', o.fwmark, 1, 0xffffffff);
    if (p) return p;
    const f = familyField(o);
    if (typeof f === 'object') return f;
    v6 = f === 6;
  } else {
    if (!isSet(o.protocol)) return problem('protocol', 'a service needs protocol, address and port, or a fwmark');
    if (o.protocol !== 'tcp' && o.protocol !== 'udp' && o.protocol !== 'sctp')
      return problem('protocol', `protocol must be tcp, udp or sctp, got '${String(o.protocol)}'`);
    if (typeof o.address !== 'string') return problem('address', 'address must be a string');
    const af = addressFamily(o.address);
    if (af === 0) return problem('address', `invalid service address '${o.address}'`);
    const f = familyField(o);
    if (typeof f === 'object') return f;
    if (f !== undefined && f !== af) return problem('family', 'family does not match the service address');
    const p = intProblem('port', o.port, 0, 65535);
    if (p) return p;
    v6 = af === 6;
  }
  const sched = isSet(o.scheduler) ? o.scheduler : 'wlc';
  if (typeof sched !== 'string') return problem('scheduler', 'scheduler must be a string');
  if (sched.length === 0 || nameBytes(sched) > 15) return problem('scheduler', `scheduler name must be 1-15 characters, got '${sched}'`);
  if (isSet(o.flags)) {
    if (!Array.isArray(o.flags)) return problem('flags', 'flags must be an array of flag names');
    for (const f of o.flags as unknown[]) {
      if (typeof f !== 'string') return problem('flags', 'flags must be an array of flag names');
      if (!(f in FLAGS)) return problem('flags', `unknown service flag '${f}'`);
      const needs = FLAGS[f];
      if (needs && sched !== needs) return problem('flags', `flag '${f}' needs the ${needs} scheduler, not ${sched}`);
    }
  }
  if (isSet(o.timeout)) {
    const p = intProblem('timeout', o.timeout, 0, 0xffffffff);
    if (p) return p;
  }
  if (isSet(o.netmask)) {
    if (!v6) {
      if (typeof o.netmask !== 'string') return problem('netmask', "an IPv4 service's netmask is a dotted mask string like '255.255.255.0'");
      if (addressFamily(o.netmask) !== 4) return problem('netmask', `invalid IPv4 netmask '${o.netmask}'`);
    } else {
      const p = intProblem('netmask', o.netmask, 1, 128);
      if (p) return p;
    }
  }
  if (isSet(o.pe)) {
    if (typeof o.pe !== 'string') return problem('pe', 'pe must be a string');
    if (o.pe.length === 0 || nameBytes(o.pe) > 15) return problem('pe', 'persistence engine name must be 1-15 characters');
  }
  return undefined;
}

const FORWARDS = new Set(['masq', 'local', 'tunnel', 'droute']);

/** The first problem of a real server of a service (addDestination / updateDestination), as the
 *  addon finds it. `serviceV6`: the service's family (its own problems are ipvsServiceProblem's). */
export function ipvsDestinationProblem(d: DestinationConfig, serviceV6: boolean): FieldProblem | undefined {
  const o = d as unknown as Record<string, unknown>;
  if (typeof o.address !== 'string') return problem('address', 'address must be a string');
  const af = addressFamily(o.address);
  if (af === 0) return problem('address', `invalid destination address '${o.address}'`);
  const f = familyField(o);
  if (typeof f === 'object') return f;
  if (f !== undefined && f !== af) return problem('family', 'family does not match the destination address');
  const port = intProblem('port', o.port, 0, 65535);
  if (port) return port;
  let forward = 'droute';
  if (isSet(o.forward)) {
    if (typeof o.forward !== 'string') return problem('forward', 'forward must be a string');
    if (!FORWARDS.has(o.forward)) return problem('forward', `forward must be masq, local, tunnel or droute, got '${o.forward}'`);
    forward = o.forward;
  }
  if (isSet(o.weight)) {
    if (typeof o.weight !== 'number') return problem('weight', 'weight must be a number');
    if (!isInt(o.weight, 0, 2147483647)) return problem('weight', `weight must be an integer 0-2147483647, got ${String(o.weight)}`);
  }
  if (isSet(o.upperThreshold)) {
    const p = intProblem('upperThreshold', o.upperThreshold, 0, 0xffffffff);
    if (p) return p;
  }
  if (isSet(o.lowerThreshold)) {
    const p = intProblem('lowerThreshold', o.lowerThreshold, 0, 0xffffffff);
    if (p) return p;
  }
  let type = 'ipip';
  let tunPort = 0;
  let checksum = 'none';
  if (isSet(o.tunnel)) {
    const t = o.tunnel as Record<string, unknown>;
    if (typeof t !== 'object' || Array.isArray(t)) return problem('tunnel', 'tunnel must be an object');
    if (isSet(t.type)) {
      if (typeof t.type !== 'string') return problem('tunnel', 'type must be a string');
      if (!['ipip', 'gue', 'gre'].includes(t.type)) return problem('tunnel', `tunnel type must be ipip, gue or gre, got '${t.type}'`);
      type = t.type;
    }
    if (isSet(t.port)) {
      const p = intProblem('port', t.port, 1, 65535);
      if (p) return problem('tunnel', p.message);
      tunPort = t.port as number;
    }
    if (isSet(t.checksum)) {
      if (typeof t.checksum !== 'string') return problem('tunnel', 'checksum must be a string');
      if (!['none', 'csum', 'remcsum'].includes(t.checksum)) return problem('tunnel', `tunnel checksum must be none, csum or remcsum, got '${t.checksum}'`);
      checksum = t.checksum;
    }
  }
  // ipvs/codec.cc ValidateDest
  if ((af === 6) !== serviceV6 && forward !== 'tunnel')
    return problem('forward', `mixed address families: an ${af === 6 ? 'IPv6' : 'IPv4'} destination in an ${serviceV6 ? 'IPv6' : 'IPv4'} service needs the tunnel forwarding method`);
  const tunAttrs = type !== 'ipip' || tunPort !== 0 || checksum !== 'none';
  if (forward !== 'tunnel' && tunAttrs) return problem('tunnel', 'tunnel type, port and checksum options need the tunnel forwarding method');
  if (type === 'gue' && tunPort === 0) return problem('tunnel', 'a gue tunnel needs a tunnel port (1-65535)');
  if (type !== 'gue' && tunPort !== 0) return problem('tunnel', 'only gue tunnels take a tunnel port');
  if (type === 'ipip' && checksum !== 'none') return problem('tunnel', 'ipip tunnels take no checksum option');
  if (type === 'gre' && checksum === 'remcsum') return problem('tunnel', 'gre tunnels do not support remote checksum offload');
  return undefined;
}

/** Whether a service is IPv6 as the addon reads it (its address, else its family). */
export function ipvsServiceV6(s: ServiceConfig): boolean {
  const o = s as unknown as Record<string, unknown>;
  if (!isSet(o.fwmark) && typeof o.address === 'string') return addressFamily(o.address) === 6;
  return o.family === 'inet6';
}

// ---- rtnetlink -------------------------------------------------------------------------------

/** The first problem of a link name (dev, the VIP link): 1-15 bytes, no '/', ':' or whitespace. */
export function linkNameProblem(field: string, name: unknown): FieldProblem | undefined {
  if (typeof name !== 'string') return problem(field, 'link name must be a string');
  if (name.length === 0) return problem(field, 'link name is empty');
  if (Buffer.byteLength(name) > 15) return problem(field, `link name '${name}' is ${Buffer.byteLength(name)} bytes; at most 15`);
  if (/[/:\s]/.test(name)) return problem(field, `link name '${name}' holds a character the kernel refuses ('/', ':' or whitespace)`);
  return undefined;
}

/** The first problem of an address as addAddr takes it ("10.0.0.1", "fd00::1/128"). */
export function addressProblem(field: string, text: unknown): FieldProblem | undefined {
  if (typeof text !== 'string') return problem(field, "address must be a string such as '10.0.0.1/32' or 'fd00::1'");
  const slash = text.indexOf('/');
  const addr = slash < 0 ? text : text.slice(0, slash);
  if (slash >= 0) {
    const len = text.slice(slash + 1);
    if (!/^[0-9]{1,3}$/.test(len)) return problem(field, `bad prefix length in '${text}'`);
  }
  const af = addressFamily(addr);
  if (af === 0) return problem(field, `'${addr}' is not an IPv4 or IPv6 address`);
  if (slash >= 0 && Number(text.slice(slash + 1)) > (af === 6 ? 128 : 32))
    return problem(field, `prefix length ${text.slice(slash + 1)} is out of range 0-${af === 6 ? 128 : 32}`);
  return undefined;
}

const ROUTE_TYPES = ['unicast', 'local', 'broadcast', 'anycast', 'multicast', 'blackhole', 'unreachable', 'prohibit', 'throw', 'nat'];
const NO_LINK_TYPES = ['blackhole', 'unreachable', 'prohibit', 'throw'];

/** The first problem of a route add's own fields (type, table, dev); dst, which the engine
 *  canonicalizes to its network first, is checked by the caller. */
export function routeFieldsProblem(r: { type?: unknown; table?: unknown; dev?: unknown }): FieldProblem | undefined {
  if (isSet(r.type) && (typeof r.type !== 'string' || !ROUTE_TYPES.includes(r.type)))
    return problem('type', `route type '${String(r.type)}' is unknown (${ROUTE_TYPES.join(', ')})`);
  if (isSet(r.table)) {
    if (typeof r.table === 'string') {
      if (!['local', 'main', 'default'].includes(r.table)) return problem('table', `table '${r.table}' is unknown (local, main, default, or a number)`);
    } else if (!isInt(r.table, 1, 4294967295)) return problem('table', 'table must be an integer in 1-4294967295');
  }
  if (isSet(r.dev)) {
    const p = linkNameProblem('dev', r.dev);
    if (p) return p;
    if (NO_LINK_TYPES.includes(r.type as string)) return problem('dev', `${String(r.type)} routes take no dev`);
  } else if ((r.type ?? 'unicast') === 'unicast') return problem('dev', 'a unicast route needs dev or gateway');
  return undefined;
}

// ---- ipset -----------------------------------------------------------------------------------

const PROTOS: Record<string, number> = { tcp: 6, udp: 17, sctp: 132, udplite: 136, icmp: 1, icmpv6: 58, 'ipv6-icmp': 58 };
const PORTED = new Set([6, 17, 132, 136, 1, 58]);
/** IPSET_MAX_TIMEOUT: (UINT_MAX >> 1) / MSEC_PER_SEC. */
const MAX_TIMEOUT = 2147483;

function setNameProblem(field: string, name: unknown): FieldProblem | undefined {
  if (typeof name !== 'string') return problem(field, 'set name must be a string');
  if (name.length === 0) return problem(field, 'set name is empty');
  if (Buffer.byteLength(name) > 31) return problem(field, `set name '${name}' is ${Buffer.byteLength(name)} bytes; ipset names are at most 31`);
  return undefined;
}

/** The first problem of a set's declaration (create), as the addon finds it. */
export function ipsetSpecProblem(s: IpSetSpec): FieldProblem | undefined {
  const o = s as unknown as Record<string, unknown>;
  const name = setNameProblem('name', o.name);
  if (name) return name;
  if (typeof o.type !== 'string') return problem('type', 'type must be a string');
  const dims = typeDims(o.type);
  if (!dims) return problem('type', `set type '${o.type}' is not supported by ipvsync`);
  const bitmap = o.type.startsWith('bitmap:');
  if (bitmap ? isSet(o.family) : isSet(o.family) && o.family !== 'inet' && o.family !== 'inet6')
    return problem('family', bitmap ? `${o.type} takes no family` : `family must be 'inet' or 'inet6' (got '${String(o.family)}')`);
  for (const [k, max] of [['hashsize', 0xffffffff], ['maxelem', 0xffffffff], ['timeout', MAX_TIMEOUT], ['initval', 0xffffffff], ['bucketsize', 255]] as const) {
    if (!isSet(o[k])) continue;
    if (bitmap && k !== 'timeout') return problem(k, `${o.type} takes no ${k}`);
    if (!isInt(o[k], 0, max)) return problem(k, `${k} is out of range 0-${max}`);
  }
  if (o.maxelem === 0) return problem('maxelem', 'maxelem must be at least 1');
  if (isSet(o.netmask)) {
    if (o.type !== 'hash:ip') return problem('netmask', 'netmask is only supported by hash:ip');
    const max = o.family === 'inet6' ? 128 : 32;
    if (!isInt(o.netmask, 1, max)) return problem('netmask', `netmask is out of range 1-${max}`);
  }
  for (const k of ['counters', 'comment', 'skbinfo', 'forceadd'] as const)
    if (isSet(o[k]) && typeof o[k] !== 'boolean') return problem(k, `${k} must be a boolean`);
  if (o.forceadd === true && bitmap) return problem('forceadd', 'forceadd is only supported by hash types');
  if (bitmap) {
    const r = o.range as { from?: unknown; to?: unknown } | undefined;
    if (typeof r !== 'object' || r === null) return problem('range', 'bitmap:port needs range: { from, to }');
    if (!isInt(r.from, 0, 65535) || !isInt(r.to, 0, 65535)) return problem('range', 'range.from and range.to must be ports 0-65535');
    if ((r.from as number) > (r.to as number)) return problem('range', 'range.from is greater than range.to');
  } else if (isSet(o.range)) return problem('range', `${o.type} takes no range`);
  return undefined;
}

function memberAddressProblem(field: 'ip' | 'ip2', v: unknown, cidrV: unknown, net: boolean, v6: boolean): FieldProblem | undefined {
  if (typeof v !== 'string') return problem(field, `${field} must be a string`);
  let s = v;
  let cidr = -1;
  const slash = s.indexOf('/');
  if (slash >= 0) {
    const c = s.slice(slash + 1);
    s = s.slice(0, slash);
    if (!/^[0-9]{1,3}$/.test(c)) return problem(field, `${field} has a bad prefix length '${c}'`);
    cidr = Number(c);
  }
  const cidrField = field === 'ip' ? 'cidr' : 'cidr2';
  if (isSet(cidrV)) {
    if (cidr >= 0) return problem(cidrField, `${field} has a prefix length twice`);
    if (!isInt(cidrV, 0, 128)) return problem(cidrField, `${cidrField} is out of range 0-128`);
    cidr = cidrV as number;
  }
  const af = addressFamily(s);
  if (af === 0) return problem(field, `${field} '${s}' is not an IPv4 or IPv6 address`);
  if ((af === 6) !== v6) return problem(field, `${field} '${s}' is ${v6 ? 'IPv4' : 'IPv6'} but the set is family ${v6 ? 'inet6' : 'inet'}`);
  if (cidr >= 0) {
    if (!net) return problem(field, `${field} is a host address in this set type; no prefix length allowed`);
    const max = v6 ? 128 : 32;
    if (cidr < 1 || cidr > max) return problem(slash >= 0 ? field : cidrField, `prefix length ${cidr} is out of range 1-${max}`);
  }
  return undefined;
}

/** The first problem of a member of a set of this type and family (add), as the addon finds it. */
export function ipsetMemberProblem(set: { type: string; family?: string }, m: IpSetMember): FieldProblem | undefined {
  const dims = typeDims(set.type);
  if (!dims) return problem('type', `set type '${set.type}' is not supported by ipvsync`);
  if (typeof m !== 'object' || m === null) return problem('member', 'member must be an object');
  const o = m as unknown as Record<string, unknown>;
  const bitmap = set.type.startsWith('bitmap:');
  const v6 = set.family === 'inet6';
  const d0 = dims[0]!;
  if (d0 === 'ip' || d0 === 'net') {
    if (!isSet(o.ip)) return problem('ip', `${set.type} members need ip`);
    const p = memberAddressProblem('ip', o.ip, o.cidr, d0 === 'net', v6);
    if (p) return p;
  } else if (isSet(o.ip)) return problem('ip', `${set.type} members take no ip`);
  if (dims.includes('port')) {
    if (!isSet(o.port)) return problem('port', `${set.type} members need port`);
    if (!isInt(o.port, 0, 65535)) return problem('port', 'port is out of range 0-65535');
    if (!bitmap) {
      let proto = 6;
      if (isSet(o.proto)) {
        if (typeof o.proto === 'number') {
          if (!isInt(o.proto, 0, 255)) return problem('proto', 'proto is out of range 0-255');
          if (o.proto === 0) return problem('proto', 'proto 0 is not a valid protocol');
          proto = o.proto;
        } else if (typeof o.proto === 'string' && o.proto in PROTOS) proto = PROTOS[o.proto]!;
        else return problem('proto', `unknown proto '${String(o.proto)}' (tcp, udp, sctp, udplite, icmp, icmpv6 or a number)`);
      }
      if (proto === 1 && v6) return problem('proto', 'proto icmp can be used with family inet only');
      if (proto === 58 && !v6) return problem('proto', 'proto icmpv6 can be used with family inet6 only');
      if (!PORTED.has(proto) && o.port !== 0) return problem('port', `proto ${proto} has no ports; port must be 0`);
    } else if (isSet(o.proto)) return problem('proto', 'bitmap:port members take no proto');
  } else if (isSet(o.port)) return problem('port', `${set.type} members take no port`);
  const last = dims.length >= 2 ? dims[dims.length - 1]! : undefined;
  if (last === 'ip' || last === 'net') {
    if (!isSet(o.ip2)) return problem('ip2', `${set.type} members need ip2`);
    const p = memberAddressProblem('ip2', o.ip2, o.cidr2, last === 'net', v6);
    if (p) return p;
  } else if (isSet(o.ip2)) return problem('ip2', `${set.type} members take no ip2`);
  if (isSet(o.timeout) && !isInt(o.timeout, 0, MAX_TIMEOUT)) return problem('timeout', `timeout is out of range 0-${MAX_TIMEOUT}`);
  if (isSet(o.comment)) {
    if (typeof o.comment !== 'string') return problem('comment', 'comment must be a string');
    if (Buffer.byteLength(o.comment) > 255) return problem('comment', 'comment is longer than 255 bytes');
    if (o.comment.includes('"')) return problem('comment', `comment must not contain '"'`);
  }
  if (isSet(o.nomatch)) {
    if (typeof o.nomatch !== 'boolean') return problem('nomatch', 'nomatch must be a boolean');
    if (o.nomatch && !dims.includes('net')) return problem('nomatch', `nomatch needs a net component; ${set.type} has none`);
  }
  return undefined;
}
