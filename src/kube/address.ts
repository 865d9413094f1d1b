// Address helpers for the semantics layer: family, canonical text, a total order for stable
// output, and CIDR lists that never throw (bad entries come back as rejects to warn about).
// What they let through is what the kernel layer accepts: canonical addresses, CIDRs as
// network/length.
import { isIP } from 'node:net';
import { anyContains, ipv4Number, networkText, parseCidr, type Cidr } from '../engine/cidr.js';
import { canonicalAddress } from '../engine/ipvs-model.js';
import { boundedMemo } from '../engine/memo.js';
import type { AddressFamily } from '../kernel/ipvs.js';

export function ipFamily(address: string): AddressFamily | undefined {
  const f = isIP(address);
  return f === 4 ? 'inet' : f === 6 ? 'inet6' : undefined;
}

/** Canonical text of a valid IP, or undefined (for anything that is not a string too). Not an
 *  IP here: a zone index ("fe80::1%eth0": isIP takes it, no kernel address has one), an
 *  IPv4-mapped IPv6 address (::ffff:1.2.3.4: kube-proxy reads it as IPv4, the kernel as IPv6;
 *  the API server refuses it in new objects), leading zeros (isIP refuses them; kube-proxy
 *  would read 010 as 10). */
export function validIp(address: unknown): string | undefined {
  if (typeof address !== 'string' || !address) return undefined;
  const a = address.trim();
  if (ipv4Number(a) >= 0) return a; // the common case, without the regex
  if (!ipFamily(a) || a.includes('%')) return undefined;
  const c = canonicalAddress(a);
  return /^::ffff:[0-9a-f]{1,4}:[0-9a-f]{1,4}$/.test(c) ? undefined : c;
}

/** A node address given on the command line (--node-ip), canonical; throws naming it when it
 *  is not an IP address (validIp). */
export function parseNodeIp(text: string): string {
  const ip = validIp(text);
  if (ip === undefined) throw new Error(`--node-ip: "${text}" is not an IP address`);
  return ip;
}

/** Fixed-width hex, so string order is numeric order and IPv4 sorts before IPv6. */
function sortKey(address: string): string {
  if (isIP(address) === 4) return '4' + address.split('.').map((o) => Number(o).toString(16).padStart(2, '0')).join('');
  if (isIP(address) !== 6) return '9' + address;
  const full = canonicalAddress(address).replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_, a, b, c, d) =>
    [(Number(a) << 8) | Number(b), (Number(c) << 8) | Number(d)].map((n) => n.toString(16)).join(':'),
  );
  const [head = '', tail] = full.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return '6' + groups.map((g) => g.padStart(4, '0')).join('');
}

/** Sort keys, memoized: a sort calls compareAddress O(n log n) times for n addresses. */
const cachedSortKey = boundedMemo(sortKey, 1 << 18);

export function compareAddress(a: string, b: string): number {
  const na = ipv4Number(a);
  const nb = ipv4Number(b);
  if (na >= 0 && nb >= 0) return na - nb;
  const ka = cachedSortKey(a);
  const kb = cachedSortKey(b);
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

/** Address, then protocol, then port: the order of translate's sorted lists (virtual servers,
 *  glue VIPs, hairpin entries, source ranges). */
export function compareAddressProtoPort<T extends { address: string; protocol: string; port: number }>(a: T, b: T): number {
  return compareAddress(a.address, b.address) || (a.protocol < b.protocol ? -1 : a.protocol > b.protocol ? 1 : 0) || a.port - b.port;
}

/** The protocols' text order ('sctp' < 'tcp' < 'udp'); -1 for another. */
function protocolRank(p: string): number {
  return p === 'tcp' ? 1 : p === 'udp' ? 2 : p === 'sctp' ? 0 : -1;
}

/**
 * A number in compareAddressProtoPort's order for an IPv4 address, a protocol (sctp, tcp, udp)
 * and a port (below 2^50: exact in a double), else NaN (IPv6, another protocol): sortByKeySteps'
 * key for translate's long lists.
 */
export function addressProtoPortKey(x: { address: string; protocol: string; port: number }): number {
  const n = ipv4Number(x.address);
  const r = protocolRank(x.protocol);
  if (n < 0 || r < 0 || !(x.port >= 0 && x.port < 65536)) return NaN;
  return (n * 4 + r) * 65536 + x.port;
}

/** compareAddress's key for an IPv4 address (its number), else NaN. */
export function addressKey(address: string): number {
  const n = ipv4Number(address);
  return n < 0 ? NaN : n;
}

export function isIpv6LinkLocal(address: string): boolean {
  return isIP(address) === 6 && /^fe[89ab]/i.test(canonicalAddress(address));
}

export interface CidrList {
  texts: string[];
  cidrs: Cidr[];
  rejected: string[];
}

/** The list of no CIDRs (shared, frozen: translate asks for every service port's source ranges). */
const NO_CIDRS: CidrList = Object.freeze({ texts: Object.freeze([]) as never, cidrs: Object.freeze([]) as never, rejected: Object.freeze([]) as never });

/**
 * A CIDR as kube-proxy reads one (netutils.ParseCIDRSloppy, then the network): whitespace
 * trimmed, the address a valid IP (validIp), the length decimal digits in range, host bits
 * dropped ("203.0.113.7/24" is 203.0.113.0/24: the API server accepts it, kube-proxy programs
 * the network, and nftables refuses host bits). A bare address is its /32 or /128. undefined:
 * not a CIDR.
 */
export function parseCidrText(raw: unknown): Cidr | undefined {
  if (typeof raw !== 'string') return undefined;
  const text = raw.trim();
  const slash = text.indexOf('/');
  const address = validIp(slash < 0 ? text : text.slice(0, slash));
  if (!address || (slash >= 0 && !/^\d{1,3}$/.test(text.slice(slash + 1)))) return undefined;
  try {
    return parseCidr(slash < 0 ? address : `${address}/${Number(text.slice(slash + 1))}`);
  } catch {
    return undefined; // a length beyond the family's
  }
}

/** A CIDR's canonical text, network/length ("203.0.113.0/24"): what nftables and ipset take. */
export function cidrText(c: Cidr): string {
  return `${networkText(c)}/${c.bits}`;
}

/** Parses CIDRs (parseCidrText), keeping those of `family` if given; `texts` are their
 *  canonical texts (cidrText), each once. */
export function cidrList(texts: readonly unknown[] | undefined, family?: AddressFamily): CidrList {
  if (!Array.isArray(texts) || !texts.length) return NO_CIDRS;
  const out: CidrList = { texts: [], cidrs: [], rejected: [] };
  for (const raw of texts) {
    const c = parseCidrText(raw);
    if (!c) {
      out.rejected.push(String(raw));
      continue;
    }
    if (family && (c.family === 4 ? 'inet' : 'inet6') !== family) continue;
    const text = cidrText(c);
    if (out.texts.includes(text)) continue;
    out.texts.push(text);
    out.cidrs.push(c);
  }
  return out;
}

export function inAny(list: CidrList, address: string): boolean {
  return anyContains(list.cidrs, address);
}
