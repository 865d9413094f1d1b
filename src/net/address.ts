// IP addresses and CIDRs for every layer (kernel codecs and checks, engine, kube semantics):
// family, validity, canonical text, order, CIDR parsing and membership. An address is valid as
// inet_pton has it: IPv4 a dotted quad without leading zeros, IPv6 without a zone index.
// Canonical IPv6 is RFC 5952 text, an IPv4-mapped address in hex groups (::ffff:102:304).
import { isIP } from 'node:net';
import { boundedMemo } from '../util/memo.js';

/** An address family as the kernel's families name it. */
export type AddressFamily = 'inet' | 'inet6';

/** An IPv4 dotted quad as a number, or -1 (anything else, leading zeros too, as inet_pton has
 *  it). No allocation: sorts, membership tests and op checks call this per element. */
export function ipv4Number(s: string): number {
  let n = 0;
  let octet = -1;
  let dots = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 46) {
      if (octet < 0 || ++dots > 3) return -1;
      n = n * 256 + octet;
      octet = -1;
    } else if (c >= 48 && c <= 57) {
      if (octet === 0) return -1; // a leading zero
      octet = octet < 0 ? c - 48 : octet * 10 + (c - 48);
      if (octet > 255) return -1;
    } else return -1;
  }
  return dots === 3 && octet >= 0 ? n * 256 + octet : -1;
}

/** An IPv6 address as its eight 16-bit groups, or undefined (a zone index included). An
 *  embedded IPv4 tail (::ffff:1.2.3.4) is its last two groups. */
export function ipv6Words(s: string): number[] | undefined {
  let str = s;
  if (str.includes('.')) {
    const i = str.lastIndexOf(':');
    const v4 = i < 0 ? -1 : ipv4Number(str.slice(i + 1));
    if (v4 < 0) return undefined;
    str = `${str.slice(0, i + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = str.split('::');
  if (halves.length > 2) return undefined;
  const words: number[] = [];
  const take = (x: string): boolean => {
    if (x === '') return true;
    for (const w of x.split(':')) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(w)) return false;
      words.push(parseInt(w, 16));
    }
    return true;
  };
  if (!take(halves[0]!)) return undefined;
  const head = words.length;
  if (halves.length === 2 && !take(halves[1]!)) return undefined;
  const fill = 8 - words.length;
  if (halves.length === 1 ? fill !== 0 : fill < 1) return undefined;
  if (fill) words.splice(head, 0, ...Array<number>(fill).fill(0));
  return words;
}

/** RFC 5952 text of eight groups: lower case, the longest run (≥ 2) of zero groups as '::'. */
export function formatIPv6Words(w: readonly number[]): string {
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (w[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && w[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (a: readonly number[]) => a.map((x) => x.toString(16)).join(':');
  if (best < 0) return hex(w);
  return `${hex(w.slice(0, best))}::${hex(w.slice(best + bestLen))}`;
}

/** What inet_pton (the addon's parser) makes of an address: 4, 6, or 0 for no address. */
export function addressFamily(text: unknown): 4 | 6 | 0 {
  if (typeof text !== 'string') return 0;
  if (!text.includes(':')) return ipv4Number(text) >= 0 ? 4 : 0;
  // isIP takes an IPv6 zone ("fe80::1%eth0"); inet_pton does not
  return isIP(text) === 6 && !text.includes('%') ? 6 : 0;
}

/** addressFamily as a family name, undefined for no address. */
export function ipFamily(address: string): AddressFamily | undefined {
  const f = addressFamily(address);
  return f === 4 ? 'inet' : f === 6 ? 'inet6' : undefined;
}

/** The family of an address, 'inet' for anything that is not IPv6. */
export function familyOf(address: string): AddressFamily {
  // only a text with a colon can be IPv6 (isIP's regular expressions are the cost otherwise)
  return address.includes(':') && isIP(address) === 6 ? 'inet6' : 'inet';
}

/** The prefix length of one address of its family: 32 or 128. */
export function hostPrefix(address: string): number {
  return familyOf(address) === 'inet6' ? 128 : 32;
}

/** Canonical IPv6 text, memoized: translate and the engine canonicalize every address each sync. */
const canonical6 = boundedMemo((a) => {
  const w = ipv6Words(a);
  return w ? formatIPv6Words(w) : a;
}, 1 << 16);

/** Canonical text of an address ("fd00:0::1" → "fd00::1"); unchanged when not an IP (or not
 *  one the kernel takes: a zone index). Never throws. */
export function canonicalAddress(a: string): string {
  // Only a text with a colon can be IPv6: IPv4 (and anything else) is returned as it is.
  return a.includes(':') ? canonical6(a) : a;
}

/** Canonical text of a valid IP, or undefined (for anything that is not a string too). Not an
 *  IP here: a zone index ("fe80::1%eth0": isIP takes it, no kernel address has one), an
 *  IPv4-mapped IPv6 address (::ffff:1.2.3.4: kube-proxy reads it as IPv4, the kernel as IPv6;
 *  the API server refuses it in new objects), leading zeros (isIP refuses them; kube-proxy
 *  would read 010 as 10). Whitespace around it is trimmed. */
export function validIp(address: unknown): string | undefined {
  if (typeof address !== 'string' || !address) return undefined;
  const a = address.trim();
  if (ipv4Number(a) >= 0) return a; // the common case, without the regex
  if (addressFamily(a) !== 6) return undefined;
  const c = canonicalAddress(a);
  return /^::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}$/.test(c) ? undefined : c;
}

/** Canonical text of an IP as kube-proxy reads Kubernetes objects' addresses (ParseIPSloppy,
 *  k8s.io/utils/net): IPv4 octets with leading zeros are decimal ("172.30.0.041" is
 *  172.30.0.41, as older API servers stored such addresses), and an IPv4-mapped IPv6 address is
 *  its IPv4 address; otherwise validIp. Undefined for anything else. */
export function sloppyIp(address: unknown): string | undefined {
  const ip = validIp(address);
  if (ip !== undefined) return ip;
  if (typeof address !== 'string') return undefined;
  const a = address.trim();
  const octets = a.split('.');
  if (octets.length === 4 && octets.every((o) => /^\d+$/.test(o) && Number(o) <= 255)) return octets.map(Number).join('.');
  if (addressFamily(a) !== 6) return undefined;
  const w = ipv6Words(canonicalAddress(a));
  // ::ffff:a.b.c.d: words 0-4 zero, word 5 0xffff
  if (w && w.slice(0, 5).every((x) => x === 0) && w[5] === 0xffff) return [w[6]! >> 8, w[6]! & 255, w[7]! >> 8, w[7]! & 255].join('.');
  return undefined;
}

/** 127.0.0.0/8 or ::1, for canonical addresses. */
export function isLoopback(address: string): boolean {
  return address === '::1' || address.startsWith('127.');
}

export function isIpv6LinkLocal(address: string): boolean {
  return addressFamily(address) === 6 && /^fe[89ab]/i.test(canonicalAddress(address));
}

/** Fixed-width hex, so string order is numeric order and IPv4 sorts before IPv6. */
function sortKey(address: string): string {
  const n = ipv4Number(address);
  if (n >= 0) return '4' + n.toString(16).padStart(8, '0');
  const w = address.includes(':') ? ipv6Words(address) : undefined;
  return w ? '6' + w.map((g) => g.toString(16).padStart(4, '0')).join('') : '9' + address;
}

/** Sort keys, memoized: a sort calls compareAddress O(n log n) times for n addresses. */
const cachedSortKey = boundedMemo(sortKey, 1 << 18);

/** A total order: IPv4 by number, then IPv6 by number, then anything else by text. */
export function compareAddress(a: string, b: string): number {
  const na = ipv4Number(a);
  const nb = ipv4Number(b);
  if (na >= 0 && nb >= 0) return na - nb;
  const ka = cachedSortKey(a);
  const kb = cachedSortKey(b);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/** compareAddress's key for an IPv4 address (its number), else NaN. */
export function addressKey(address: string): number {
  const n = ipv4Number(address);
  return n < 0 ? NaN : n;
}

// ---- CIDRs -----------------------------------------------------------------------------------

export interface Cidr {
  family: 4 | 6;
  /** The network (host bits clear). */
  base: bigint;
  bits: number;
  /** IPv4: the network and its mask as unsigned 32-bit numbers (membership without BigInt, which
   *  costs ~1 µs an address: route mode checks every VIP against the service CIDRs each sync). */
  base4?: number;
  mask4?: number;
}

function toBig(address: string): { family: 4 | 6; value: bigint } | undefined {
  const n = ipv4Number(address);
  if (n >= 0) return { family: 4, value: BigInt(n) };
  const w = address.includes(':') ? ipv6Words(address) : undefined;
  return w && { family: 6, value: w.reduce((acc, g) => (acc << 16n) | BigInt(g), 0n) };
}

/** Parses "10.96.0.0/12", "fd00::/108" or a bare address (a /32 or /128); host bits are
 *  dropped ("10.1.2.3/16" is 10.1.0.0/16). Throws a RangeError on anything else. */
export function parseCidr(text: string): Cidr {
  const [addr, len] = text.split('/');
  const a = toBig(addr ?? '');
  if (!a) throw new RangeError(`not a CIDR: ${text}`);
  const max = a.family === 4 ? 32 : 128;
  const bits = len === undefined ? max : Number(len);
  if (!Number.isInteger(bits) || bits < 0 || bits > max) throw new RangeError(`bad prefix length in ${text}`);
  const shift = BigInt(max - bits);
  const base = (a.value >> shift) << shift;
  if (a.family === 6) return { family: 6, base, bits };
  const mask4 = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return { family: 4, base, bits, base4: Number(base), mask4 };
}

/**
 * A CIDR as kube-proxy reads one (netutils.ParseCIDRSloppy, then the network): whitespace
 * trimmed, the address an IP as sloppyIp reads it, the length decimal digits in range, host bits
 * dropped ("203.0.113.7/24" is 203.0.113.0/24: the API server accepts it, kube-proxy programs
 * the network, and nftables refuses host bits). A bare address is its /32 or /128. undefined:
 * not a CIDR.
 */
export function parseCidrText(raw: unknown): Cidr | undefined {
  if (typeof raw !== 'string') return undefined;
  const text = raw.trim();
  const slash = text.indexOf('/');
  // read as kube-proxy reads it (ParseCIDRSloppy): leading zeros are decimal
  const address = sloppyIp(slash < 0 ? text : text.slice(0, slash));
  if (!address || (slash >= 0 && !/^\d{1,3}$/.test(text.slice(slash + 1)))) return undefined;
  try {
    return parseCidr(slash < 0 ? address : `${address}/${Number(text.slice(slash + 1))}`);
  } catch {
    return undefined; // a length beyond the family's
  }
}

export function cidrContains(c: Cidr, address: string): boolean {
  if (c.base4 !== undefined) {
    const n = ipv4Number(address);
    return n >= 0 && ((n & c.mask4!) >>> 0) === c.base4;
  }
  const a = toBig(address);
  if (!a || a.family !== c.family) return false;
  const shift = BigInt((c.family === 4 ? 32 : 128) - c.bits);
  return (a.value >> shift) << shift === c.base;
}

export function anyContains(cidrs: readonly Cidr[], address: string): boolean {
  return cidrs.some((c) => cidrContains(c, address));
}

/** The network address of a CIDR as text ("10.1.2.3/16" -> "10.1.0.0"), canonical for IPv6. */
export function networkText(c: Cidr): string {
  if (c.family === 4) return [24n, 16n, 8n, 0n].map((s) => String((c.base >> s) & 255n)).join('.');
  const w: number[] = [];
  for (let i = 7; i >= 0; i--) w.push(Number((c.base >> BigInt(i * 16)) & 0xffffn));
  return formatIPv6Words(w);
}

/** A CIDR's canonical text, network/length ("203.0.113.0/24"): what nftables and ipset take. */
export function cidrText(c: Cidr): string {
  return `${networkText(c)}/${c.bits}`;
}

/** The network of a CIDR, canonical ("fd00:0096::/108" -> "fd00:96::/108"); throws as parseCidr. */
export function canonicalNetwork(cidr: string): string {
  return cidrText(parseCidr(cidr));
}
