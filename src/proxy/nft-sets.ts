// What both data planes' nftables tables are built from: the per-family fields, the nat base
// chains, and sets whose elements are unique by key.
import type { DesiredNftTable } from '../engine/nft-diff.js';
import type { SetElement } from '../kernel/nftables.js';
import * as R from '../kernel/nft-rules.js';
import { familyOf } from '../net/address.js';

export type Fam = 'ip' | 'ip6';

export interface FamilyFields {
  saddr: R.Field;
  daddr: R.Field;
  /** The connection's original destination address (before the dnat). */
  ctOrigDaddr: R.Field;
  addr: 'ipv4_addr' | 'ipv6_addr';
  reject: 'icmp-port-unreachable' | 'icmpv6-port-unreachable';
}

export const FIELDS: Record<Fam, FamilyFields> = {
  ip: { saddr: R.F.ipSaddr, daddr: R.F.ipDaddr, ctOrigDaddr: R.F.ctOrigIpDaddr, addr: 'ipv4_addr', reject: 'icmp-port-unreachable' },
  ip6: { saddr: R.F.ip6Saddr, daddr: R.F.ip6Daddr, ctOrigDaddr: R.F.ctOrigIp6Daddr, addr: 'ipv6_addr', reject: 'icmpv6-port-unreachable' },
};

/**
 * The chains and sets of the proxy's tables (`ip` / `ip6 ipvsync`) that are ipvsync's, in
 * either data plane (a switch of mode replaces the other plane's): the fixed names of both, the
 * per-service firewall chains (`fw-…`), the endpoint maps by count and shard (`endpoints-N-S`),
 * the shards' chains and hairpin sets (`services-S`, `hairpin-S`, `*-shards`) and the affinity
 * sets. Any other chain or set someone puts in the table survives every sync, as in
 * kube-proxy's nftables mode; `cleanup` removes the table whole, as kube-proxy's does its own.
 */
export const PROXY_TABLE_OWNED: { names: readonly string[]; prefixes: readonly string[] } = {
  names: [
    // chains of both planes
    'prerouting', 'output', 'postrouting', 'input', 'services',
    'filter-prerouting', 'filter-output', 'firewall-prerouting', 'firewall-output', 'endpoints-check', 'affinity',
    // sets of both planes
    'service-protocols', 'cluster-ips', 'external-ips', 'external-local', 'cluster-cidrs', 'hairpin', 'firewall', 'vip-ports', 'vips', 'nodeports', 'service-cidrs',
    'reject-services', 'drop-services', 'cluster-addrs', 'service-shards',
  ],
  prefixes: ['fw-', 'endpoints-', 'affinity-', 'services-', 'hairpin-'],
};

/** The packet mark of traffic to masquerade, in either plane's table. */
export const MASQ_MARK = 0x4000;

/** The nat part both planes' tables begin with: prerouting and output jump to `services` (the
 *  plane's), postrouting masquerades (fully random) what carries MASQ_MARK. */
export function natBase(): Pick<DesiredNftTable, 'chains' | 'rules'> {
  return {
    chains: [
      { name: 'prerouting', hook: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } },
      { name: 'output', hook: { type: 'nat', hook: 'output', priority: -100, policy: 'accept' } },
      { name: 'postrouting', hook: { type: 'nat', hook: 'postrouting', priority: 100, policy: 'accept' } },
    ],
    rules: [
      { chain: 'prerouting', exprs: R.rule(R.jump('services')) },
      { chain: 'output', exprs: R.rule(R.jump('services')) },
      { chain: 'postrouting', exprs: R.rule(R.markMatch('meta', MASQ_MARK), R.masquerade({ fullyRandom: true })) },
    ],
  };
}

export function fam(address: string): Fam {
  return familyOf(address) === 'inet6' ? 'ip6' : 'ip';
}

/** Interval sets (CIDRs): by text, one element per text. */
export function uniqText(elements: SetElement[]): SetElement[] {
  const seen = new Map<string, SetElement>();
  for (const e of elements) seen.set(e.key.join('\u0000'), e); // key parts never hold a NUL
  return [...seen.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, e]) => e);
}
