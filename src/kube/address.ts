// Address helpers for the semantics layer: the order of translate's lists and CIDR lists that
// never throw (bad entries come back as rejects to warn about). What they let through is what
// the kernel layer accepts: canonical addresses, CIDRs as network/length.
import { anyContains, compareAddress, cidrText, ipv4Number, parseCidrText, type Cidr } from '../net/address.js';
import type { AddressFamily } from '../kernel/ipvs.js';

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
 * and a port (below 2^50: exact in a double), else NaN (IPv6, another protocol): sortByKey's
 * key for translate's long lists.
 */
export function addressProtoPortKey(x: { address: string; protocol: string; port: number }): number {
  const n = ipv4Number(x.address);
  const r = protocolRank(x.protocol);
  if (n < 0 || r < 0 || !(x.port >= 0 && x.port < 65536)) return NaN;
  return (n * 4 + r) * 65536 + x.port;
}

export interface CidrList {
  texts: string[];
  cidrs: Cidr[];
  rejected: string[];
}

/** The list of no CIDRs (shared, frozen: translate asks for every service port's source ranges). */
const NO_CIDRS: CidrList = Object.freeze({ texts: Object.freeze([]) as never, cidrs: Object.freeze([]) as never, rejected: Object.freeze([]) as never });

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
