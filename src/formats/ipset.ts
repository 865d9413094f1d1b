// The text format of `ipset save` / `ipset restore` (ipset 7.x), for the typed model of
// ipsets.ts: formatting is byte-for-byte what `ipset save` prints; parsing accepts what
// `ipset restore` accepts for the modelled types (create/add/del/flush/destroy/rename/swap,
// -exist / -!, comments and blank lines).
import { readFileSync } from 'node:fs';
import { excerpt, NetlinkError } from '../errors.js';
import type { IpSet, IpSetFamily, IpSetMember, IpSetOp, IpSetSpec, IpSetType } from '../kernel/ipsets.js';
import { IPSET_TYPES, replayShapes, typeDims, type IpSetShape } from '../kernel/ipsets.js';

// libipset's ICMP/ICMPv6 type/code names (lib/icmp.c, lib/icmpv6.c): what `ipset save` prints.
const ICMP: Record<string, string> = {
  '0/0': 'echo-reply', '3/0': 'network-unreachable', '3/1': 'host-unreachable',
  '3/2': 'protocol-unreachable', '3/3': 'port-unreachable', '3/4': 'fragmentation-needed',
  '3/5': 'source-route-failed', '3/6': 'network-unknown', '3/7': 'host-unknown',
  '3/9': 'network-prohibited', '3/10': 'host-prohibited', '3/11': 'TOS-network-unreachable',
  '3/12': 'TOS-host-unreachable', '3/13': 'communication-prohibited',
  '3/14': 'host-precedence-violation', '3/15': 'precedence-cutoff', '4/0': 'source-quench',
  '5/0': 'network-redirect', '5/1': 'host-redirect', '5/2': 'TOS-network-redirect',
  '5/3': 'TOS-host-redirect', '8/0': 'echo-request', '9/0': 'router-advertisement',
  '10/0': 'router-solicitation', '11/0': 'ttl-zero-during-transit',
  '11/1': 'ttl-zero-during-reassembly', '12/0': 'ip-header-bad', '12/1': 'required-option-missing',
  '13/0': 'timestamp-request', '14/0': 'timestamp-reply', '17/0': 'address-mask-request',
  '18/0': 'address-mask-reply',
};
const ICMPV6: Record<string, string> = {
  '1/0': 'no-route', '1/1': 'communication-prohibited', '1/3': 'address-unreachable',
  '1/4': 'port-unreachable', '2/0': 'packet-too-big', '3/0': 'ttl-zero-during-transit',
  '3/1': 'ttl-zero-during-reassembly', '4/0': 'bad-header', '4/1': 'unknown-header-type',
  '4/2': 'unknown-option', '128/0': 'echo-request', '129/0': 'echo-reply',
  '133/0': 'router-solicitation', '134/0': 'router-advertisement',
  '135/0': 'neighbour-solicitation', '136/0': 'neighbour-advertisement', '137/0': 'redirect',
};
const invert = (m: Record<string, string>) => Object.fromEntries(Object.entries(m).map(([k, v]) => [v, k]));
const ICMP_BY_NAME = { ...invert(ICMP), ping: '8/0', pong: '0/0' } as Record<string, string>;
const ICMPV6_BY_NAME = invert(ICMPV6);

// Protocol names as getprotobynumber(3) gives them (ipset prints those): /etc/protocols when
// present, a built-in table of the usual ones otherwise.
let protoNames: Map<number, string> | undefined;
function protocols(): Map<number, string> {
  if (protoNames) return protoNames;
  const m = new Map<number, string>([
    [1, 'icmp'], [2, 'igmp'], [4, 'ipencap'], [6, 'tcp'], [17, 'udp'], [41, 'ipv6'], [47, 'gre'],
    [50, 'esp'], [51, 'ah'], [58, 'ipv6-icmp'], [89, 'ospf'], [103, 'pim'], [112, 'vrrp'],
    [132, 'sctp'], [136, 'udplite'],
  ]);
  try {
    for (const line of readFileSync('/etc/protocols', 'utf8').split('\n')) {
      const f = line.replace(/#.*/, '').trim().split(/\s+/);
      if (f.length >= 2 && /^\d+$/.test(f[1]!) && !m.has(Number(f[1]))) m.set(Number(f[1]), f[0]!);
    }
  } catch {
    // no /etc/protocols: the built-in table stands
  }
  protoNames = m;
  return m;
}

function protoNumber(p: IpSetMember['proto']): number {
  switch (p) {
    case undefined:
    case 'tcp': return 6;
    case 'udp': return 17;
    case 'sctp': return 132;
    case 'udplite': return 136;
    case 'icmp': return 1;
    case 'icmpv6': return 58;
    default: return p;
  }
}

function fullLen(family: IpSetFamily | undefined, ip: string): number {
  return family === 'inet6' || ip.includes(':') ? 128 : 32;
}

function formatPort(m: IpSetMember): string {
  const p = protoNumber(m.proto);
  const port = m.port ?? 0;
  if (p === 1 || p === 58) {
    const key = `${port >> 8}/${port & 0xff}`;
    const name = (p === 1 ? ICMP : ICMPV6)[key];
    return `${p === 1 ? 'icmp' : 'ipv6-icmp'}:${name ?? key}`;
  }
  return `${protocols().get(p) ?? String(p)}:${port}`;
}

/** The element part of an add line: "10.0.0.1,tcp:80,10.0.0.2". */
export function formatElement(set: { type: string; family?: IpSetFamily }, m: IpSetMember): string {
  const dims = typeDims(set.type);
  if (!dims) throw NetlinkError.invalid('ipset save', `set type ${set.type} is not supported`);
  const parts: string[] = [];
  let addr = 0;
  for (const d of dims) {
    if (d === 'port') {
      parts.push(set.type === 'bitmap:port' ? String(m.port ?? 0) : formatPort(m));
      continue;
    }
    const ip = addr === 0 ? m.ip! : m.ip2!;
    const cidr = addr === 0 ? m.cidr : m.cidr2;
    addr++;
    parts.push(d === 'net' && cidr !== undefined && cidr !== fullLen(set.family, ip) ? `${ip}/${cidr}` : ip);
  }
  return parts.join(',');
}

function hex(n: number): string {
  return '0x' + (n >>> 0).toString(16);
}

/** Extension options of an add line, in ipset's order. */
export function formatMemberOptions(m: IpSetMember): string {
  let s = '';
  if (m.timeout !== undefined) s += ` timeout ${m.timeout}`;
  if (m.nomatch) s += ' nomatch';
  if (m.packets !== undefined || m.bytes !== undefined) s += ` packets ${m.packets ?? 0} bytes ${m.bytes ?? 0}`;
  if (m.comment !== undefined) s += ` comment "${m.comment}"`;
  if (m.skbmark !== undefined) {
    const mask = m.skbmarkmask ?? 0xffffffff;
    s += ` skbmark ${hex(m.skbmark)}${mask === 0xffffffff ? '' : '/' + hex(mask)}`;
  }
  if (m.skbprio !== undefined) s += ` skbprio ${(m.skbprio >>> 16).toString(16)}:${(m.skbprio & 0xffff).toString(16)}`;
  if (m.skbqueue !== undefined) s += ` skbqueue ${m.skbqueue}`;
  return s;
}

/** "create NAME TYPE …" as `ipset save` prints it. */
export function formatCreate(s: IpSet | (IpSetSpec & { bucketsize?: number; initval?: number })): string {
  let line = `create ${s.name} ${s.type}`;
  if (s.type.startsWith('bitmap:')) {
    if (s.range) line += ` range ${s.range.from}-${s.range.to}`;
  } else {
    line += ` family ${s.family ?? 'inet'}`;
    if (s.hashsize !== undefined) line += ` hashsize ${s.hashsize}`;
    if (s.maxelem !== undefined) line += ` maxelem ${s.maxelem}`;
    if (s.netmask !== undefined) line += ` netmask ${s.netmask}`;
  }
  if (s.timeout !== undefined) line += ` timeout ${s.timeout}`;
  if (s.counters) line += ' counters';
  if (s.comment) line += ' comment';
  if (s.skbinfo) line += ' skbinfo';
  if (s.forceadd) line += ' forceadd';
  if (!s.type.startsWith('bitmap:')) {
    if (s.bucketsize !== undefined) line += ` bucketsize ${s.bucketsize}`;
    if (s.initval !== undefined) line += ` initval 0x${(s.initval >>> 0).toString(16).padStart(8, '0')}`;
  }
  return line;
}

/** `ipset save` output for the listed sets (members in the kernel's order). */
export function formatSave(sets: IpSet[]): string {
  const out: string[] = [];
  for (const s of sets) {
    out.push(formatCreate(s));
    for (const m of s.members ?? []) out.push(`add ${s.name} ${formatElement(s, m)}${formatMemberOptions(m)}`);
  }
  return out.length ? out.join('\n') + '\n' : '';
}

// ---- restore -----------------------------------------------------------------------------

/** A restore-format error: names the 1-based line. */
export class RestoreSyntaxError extends Error {
  constructor(
    readonly line: number,
    why: string,
  ) {
    super(`line ${line}: ${excerpt(why)}`);
    this.name = 'RestoreSyntaxError';
  }
}

/** Splits a line into words; "double quoted" words may hold spaces (comments). */
function words(text: string, line: number): string[] {
  // most lines: single spaces, no quotes, no tabs
  if (!text.includes('"') && !text.includes('\t') && !text.includes('  ')) return text.split(' ');
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    if (text[i] === ' ' || text[i] === '\t') {
      i++;
      continue;
    }
    if (text[i] === '"') {
      const end = text.indexOf('"', i + 1);
      if (end < 0) throw new RestoreSyntaxError(line, 'unterminated "quoted" word');
      out.push(text.slice(i + 1, end));
      i = end + 1;
      continue;
    }
    let j = i;
    while (j < text.length && text[j] !== ' ' && text[j] !== '\t') j++;
    out.push(text.slice(i, j));
    i = j;
  }
  return out;
}

/** The value of a word of decimal digits (up to 15 of them), else NaN. */
function decimal(word: string): number {
  if (word.length === 0 || word.length > 15) return NaN;
  let v = 0;
  for (let i = 0; i < word.length; i++) {
    const c = word.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return NaN;
    v = v * 10 + c;
  }
  return v;
}

function uint(word: string | undefined, max: number, what: string, line: number): number {
  if (word === undefined) throw new RestoreSyntaxError(line, `${what} needs a value`);
  let v = decimal(word);
  if (Number.isNaN(v)) v = /^0x[0-9a-f]+$/i.test(word) ? parseInt(word, 16) : /^\d+$/.test(word) ? Number(word) : NaN;
  if (!Number.isSafeInteger(v) || v > max) throw new RestoreSyntaxError(line, `'${word}' is not a valid ${what} (0-${max})`);
  return v;
}

function isV6(ip: string): boolean {
  return ip.includes(':');
}

function parseAddr(text: string, net: boolean, family: IpSetFamily, line: number): { ip: string; cidr?: number } {
  if (text.includes('-')) throw new RestoreSyntaxError(line, `address ranges are not supported: '${text}'`);
  const slash = text.indexOf('/');
  const ip = slash < 0 ? text : text.slice(0, slash);
  const c = slash < 0 ? undefined : text.slice(slash + 1);
  if ((c !== undefined && c.includes('/')) || !ip) throw new RestoreSyntaxError(line, `cannot parse '${text}' as an address`);
  if (isV6(ip) !== (family === 'inet6'))
    throw new RestoreSyntaxError(line, `'${ip}' is not an ${family === 'inet6' ? 'IPv6' : 'IPv4'} address (set family ${family})`);
  if (c === undefined) return { ip };
  if (!net) throw new RestoreSyntaxError(line, `'${text}': a prefix length needs a net component (ranges are not supported)`);
  const cidr = uint(c, family === 'inet6' ? 128 : 32, 'prefix length', line);
  if (cidr === 0) throw new RestoreSyntaxError(line, `prefix length 0 is not valid in '${text}'`);
  return { ip, cidr };
}

const PORT_PROTOS: Record<string, IpSetMember['proto']> = {
  tcp: 'tcp', udp: 'udp', sctp: 'sctp', udplite: 'udplite', icmp: 'icmp', icmpv6: 'icmpv6', 'ipv6-icmp': 'icmpv6',
};

function parsePort(text: string, family: IpSetFamily, line: number): { proto: IpSetMember['proto']; port: number } {
  const colon = text.indexOf(':');
  if (colon < 0) return { proto: 'tcp', port: uint(text, 65535, 'port', line) };
  const pname = text.slice(0, colon);
  const value = text.slice(colon + 1);
  let proto = PORT_PROTOS[pname];
  if (proto === undefined) {
    const byName = [...protocols()].find(([, n]) => n === pname)?.[0];
    const num = /^\d+$/.test(pname) ? Number(pname) : byName;
    if (num === undefined || num < 1 || num > 255) throw new RestoreSyntaxError(line, `cannot parse '${pname}' as a protocol`);
    proto = num === 58 ? 'icmpv6' : num === 1 ? 'icmp' : num === 6 ? 'tcp' : num === 17 ? 'udp' : num === 132 ? 'sctp' : num === 136 ? 'udplite' : num;
  }
  if (proto === 'icmp' || proto === 'icmpv6') {
    if (proto === 'icmp' && family !== 'inet') throw new RestoreSyntaxError(line, 'Protocol ICMP can be used with family inet only');
    if (proto === 'icmpv6' && family !== 'inet6') throw new RestoreSyntaxError(line, 'Protocol ICMPv6 can be used with family inet6 only');
    const key = (proto === 'icmp' ? ICMP_BY_NAME : ICMPV6_BY_NAME)[value] ?? value;
    const m = /^(\d+)\/(\d+)$/.exec(key);
    if (!m || Number(m[1]) > 255 || Number(m[2]) > 255) throw new RestoreSyntaxError(line, `cannot parse '${value}' as an ${proto} type/code`);
    return { proto, port: (Number(m[1]) << 8) | Number(m[2]) };
  }
  const port = uint(value, 65535, 'port', line);
  if (typeof proto === 'number' && port !== 0)
    throw new RestoreSyntaxError(line, `Protocol ${pname} can be used with pseudo port value 0 only.`);
  return { proto, port };
}

/** Parses one element of a set of the given type ("10.0.0.1,udp:53"). */
export function parseElement(type: IpSetType, family: IpSetFamily | undefined, text: string, line = 0): IpSetMember {
  const dims = typeDims(type)!;
  const parts = text.split(',');
  if (parts.length !== dims.length)
    throw new RestoreSyntaxError(line, `'${text}' does not match ${type} (${dims.length} component${dims.length > 1 ? 's' : ''})`);
  const fam = family ?? 'inet';
  const m: IpSetMember = {};
  let addr = 0;
  for (let i = 0; i < dims.length; i++) {
    const d = dims[i]!;
    const part = parts[i]!;
    if (d === 'port') {
      if (type === 'bitmap:port') {
        if (part.includes('-')) throw new RestoreSyntaxError(line, `port ranges are not supported: '${part}'`);
        m.port = uint(part, 65535, 'port', line);
      } else {
        const p = parsePort(part, fam, line);
        m.proto = p.proto;
        m.port = p.port;
      }
      continue;
    }
    const a = parseAddr(part, d === 'net', fam, line);
    if (addr++ === 0) {
      m.ip = a.ip;
      if (a.cidr !== undefined) m.cidr = a.cidr;
    } else {
      m.ip2 = a.ip;
      if (a.cidr !== undefined) m.cidr2 = a.cidr;
    }
  }
  return m;
}

function parseMemberOptions(w: string[], i: number, m: IpSetMember, line: number): void {
  while (i < w.length) {
    const k = w[i++]!;
    switch (k) {
      case 'timeout': m.timeout = uint(w[i++], 2147483, 'timeout', line); break;
      case 'packets': m.packets = BigInt(uint(w[i++], Number.MAX_SAFE_INTEGER, 'packets', line)); break;
      case 'bytes': m.bytes = BigInt(uint(w[i++], Number.MAX_SAFE_INTEGER, 'bytes', line)); break;
      case 'comment': {
        const c = w[i++];
        if (c === undefined) throw new RestoreSyntaxError(line, 'comment needs a value');
        if (c.length > 255) throw new RestoreSyntaxError(line, 'comment is longer than 255 characters');
        m.comment = c;
        break;
      }
      case 'nomatch': m.nomatch = true; break;
      case 'skbmark': {
        const [mark, mask] = (w[i++] ?? '').split('/');
        m.skbmark = uint(mark, 0xffffffff, 'skbmark', line);
        if (mask !== undefined) m.skbmarkmask = uint(mask, 0xffffffff, 'skbmark mask', line);
        break;
      }
      case 'skbprio': {
        const p = /^([0-9a-f]+):([0-9a-f]+)$/i.exec(w[i++] ?? '');
        if (!p) throw new RestoreSyntaxError(line, 'Invalid skbprio format, it should be: MAJOR:MINOR');
        m.skbprio = ((parseInt(p[1]!, 16) << 16) | parseInt(p[2]!, 16)) >>> 0;
        break;
      }
      case 'skbqueue': m.skbqueue = uint(w[i++], 65535, 'skbqueue', line); break;
      default: throw new RestoreSyntaxError(line, `unknown element option '${k}'`);
    }
  }
}

function parseCreate(w: string[], line: number, exist: boolean): IpSetOp {
  const [name, type] = [w[1], w[2]];
  if (!name || !type) throw new RestoreSyntaxError(line, 'create needs a name and a type');
  if (!(IPSET_TYPES as readonly string[]).includes(type)) throw new RestoreSyntaxError(line, `set type '${type}' is not supported`);
  const op: IpSetOp & { op: 'create' } = { op: 'create', name, type: type as IpSetType, exist };
  const bitmap = type.startsWith('bitmap:');
  for (let i = 3; i < w.length; ) {
    const k = w[i++]!;
    switch (k) {
      case 'family': {
        const f = w[i++];
        if (bitmap) throw new RestoreSyntaxError(line, `${type} takes no family`);
        if (f !== 'inet' && f !== 'inet6') throw new RestoreSyntaxError(line, `unknown family '${f ?? ''}'`);
        op.family = f;
        break;
      }
      case 'hashsize': op.hashsize = uint(w[i++], 0xffffffff, 'hashsize', line); break;
      case 'maxelem': op.maxelem = uint(w[i++], 0xffffffff, 'maxelem', line); break;
      case 'netmask': op.netmask = uint(w[i++], 128, 'netmask', line); break;
      case 'timeout': op.timeout = uint(w[i++], 2147483, 'timeout', line); break;
      case 'bucketsize': op.bucketsize = uint(w[i++], 255, 'bucketsize', line); break;
      case 'initval': op.initval = uint(w[i++], 0xffffffff, 'initval', line); break;
      case 'counters': op.counters = true; break;
      case 'comment': op.comment = true; break;
      case 'skbinfo': op.skbinfo = true; break;
      case 'forceadd': op.forceadd = true; break;
      case 'range': {
        const r = /^(\d+)-(\d+)$/.exec(w[i++] ?? '');
        if (!r) throw new RestoreSyntaxError(line, 'range must be FROM-TO');
        op.range = { from: uint(r[1], 65535, 'port', line), to: uint(r[2], 65535, 'port', line) };
        break;
      }
      default: throw new RestoreSyntaxError(line, `unknown create option '${k}'`);
    }
  }
  if (bitmap && !op.range) throw new RestoreSyntaxError(line, `${type} needs range FROM-TO`);
  return op;
}

export interface RestorePlan {
  ops: IpSetOp[];
  /** For each op, the input line of each of its parts (create/flush…: one; add/del: per member). */
  lines: number[][];
}

/**
 * Parses `ipset restore` input into ops. Consecutive add (or del) lines for one set with the
 * same -exist become one op, so they travel as ADT messages. `known` gives the type and family
 * of sets the input does not create. Throws RestoreSyntaxError naming the first bad line.
 */
export function parseRestore(
  text: string,
  known: ReadonlyMap<string, IpSetShape>,
  opts: { exist?: boolean } = {},
): RestorePlan {
  const shapes = new Map(known);
  const ops: IpSetOp[] = [];
  const lines: number[][] = [];
  const src = text.split('\n');
  for (let n = 0; n < src.length; n++) {
    const line = n + 1;
    const raw = src[n]!.trim();
    if (!raw || raw.startsWith('#')) continue;
    if (raw === 'COMMIT' || raw === 'quit') continue;
    let w = words(raw, line);
    let exist = opts.exist ?? false;
    if (raw.includes('-exist') || raw.includes('-!')) w = w.filter((x) => (x === '-exist' || x === '-!' ? ((exist = true), false) : true));
    // options alone (a line that is only -exist): ipset says the same
    if (!w.length) throw new RestoreSyntaxError(line, 'no command specified');
    const cmd = w[0]!.startsWith('-') ? w[0]!.slice(1) : w[0]!;
    const name = w[1];
    const need = (k: number, what: string) => {
      if (w.length !== k) throw new RestoreSyntaxError(line, `${cmd} takes ${what}`);
    };
    const checkName = (s: string | undefined) => {
      if (!s) throw new RestoreSyntaxError(line, `${cmd} needs a set name`);
      if (Buffer.byteLength(s) > 31) throw new RestoreSyntaxError(line, `set name '${s}' is longer than 31 bytes`);
    };
    switch (cmd) {
      case 'create':
      case 'n':
      case 'N': {
        checkName(name);
        const op = parseCreate(w, line, exist);
        replayShapes(shapes, op);
        ops.push(op);
        lines.push([line]);
        break;
      }
      case 'add':
      case 'del':
      case 'A':
      case 'D': {
        const verb = cmd === 'add' || cmd === 'A' ? 'add' : 'del';
        checkName(name);
        const shape = shapes.get(name!);
        if (!shape) throw new RestoreSyntaxError(line, `The set with the given name does not exist: ${name}`);
        if (w.length < 3) throw new RestoreSyntaxError(line, `${verb} needs an element`);
        const m = parseElement(shape.type, shape.family, w[2]!, line);
        parseMemberOptions(w, 3, m, line);
        const last = ops[ops.length - 1];
        if (last && last.op === verb && last.name === name && (last.exist ?? false) === exist) {
          last.members.push(m);
          lines[lines.length - 1]!.push(line);
        } else {
          ops.push({ op: verb, name: name!, members: [m], exist, type: shape.type, family: shape.family });
          lines.push([line]);
        }
        break;
      }
      case 'flush':
      case 'destroy':
      case 'F':
      case 'X': {
        const verb = cmd === 'flush' || cmd === 'F' ? 'flush' : 'destroy';
        if (w.length === 1) throw new RestoreSyntaxError(line, `${verb} of every set is not supported in restore; name the set`);
        need(2, 'exactly one set name');
        checkName(name);
        const op: IpSetOp = { op: verb, name: name! };
        replayShapes(shapes, op);
        ops.push(op);
        lines.push([line]);
        break;
      }
      case 'rename':
      case 'e':
      case 'swap':
      case 'W': {
        need(3, 'two set names');
        checkName(name);
        checkName(w[2]);
        const op: IpSetOp = cmd === 'rename' || cmd === 'e' ? { op: 'rename', name: name!, to: w[2]! } : { op: 'swap', name: name!, with: w[2]! };
        replayShapes(shapes, op);
        ops.push(op);
        lines.push([line]);
        break;
      }
      default:
        throw new RestoreSyntaxError(line, `unknown command '${w[0]}'`);
    }
  }
  return { ops, lines };
}
