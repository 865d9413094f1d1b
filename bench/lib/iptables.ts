// kube-proxy iptables mode's `iptables-restore` input for a workload, written as its
// syncProxyRules writes it (pkg/proxy/iptables/proxier.go): the filter and nat tables with
// KUBE-SERVICES → KUBE-SVC-* (statistic random 1/n, 1/(n-1), … printed "%0.10f", the last
// endpoint without a match) → KUBE-SEP-* (MARK-MASQ for hairpin + DNAT), KUBE-NODEPORTS →
// KUBE-EXT-* for NodePorts, KUBE-POSTROUTING masquerade, the local-traffic detector on the
// cluster CIDR, chain names from the real hash scheme (base32(sha256(...))[:16]).
// kube-proxy restores with --noflush (NoFlushTables): declaring a chain flushes it.
//
// Partial sync (kube-proxy ≥ 1.27, the default): the filter table and the nat table's top-level
// chains (KUBE-SERVICES, KUBE-NODEPORTS, KUBE-POSTROUTING, KUBE-MARK-MASQ) are written whole,
// but the KUBE-SVC/KUBE-EXT/KUBE-SEP chains only of services that changed. In "large cluster
// mode" (more than 1000 endpoints) the per-rule comments on SVC/SEP rules are dropped and stale
// chains are not deleted on every sync (only once per syncPeriod), as kube-proxy does.
import { createHash } from 'node:crypto';
import { CLUSTER_CIDR, MASQ_MARK, servicePortName, type BenchService } from './workload.js';

const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 of a buffer (Go's base32.StdEncoding, padding irrelevant: we cut to 16). */
export function base32(buf: Uint8Array): string {
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of buf) {
    value = ((value << 8) | byte) & 0xffff;
    bits += 8;
    while (bits >= 5) {
      out += B32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += B32[(value << (5 - bits)) & 31];
  return out;
}

function hash16(s: string): string {
  return base32(createHash('sha256').update(s).digest()).slice(0, 16);
}

/** portProtoHash: KUBE-SVC-/KUBE-EXT-/KUBE-FW-/KUBE-SVL- + this. */
export function portProtoHash(servicePortName: string, protocol: string): string {
  return hash16(servicePortName + protocol);
}

export function svcChain(s: BenchService): string {
  return `KUBE-SVC-${portProtoHash(servicePortName(s), s.protocol)}`;
}

export function extChain(s: BenchService): string {
  return `KUBE-EXT-${portProtoHash(servicePortName(s), s.protocol)}`;
}

/** servicePortEndpointChainName: endpoint is "ip:port". */
export function sepChain(s: BenchService, endpoint: string): string {
  return `KUBE-SEP-${hash16(servicePortName(s) + s.protocol + endpoint)}`;
}

/** computeProbability: fmt.Sprintf("%0.10f", 1.0/float64(n)). */
export function probability(n: number): string {
  return (1 / n).toFixed(10);
}

/** What iptables-save prints for a --probability (libxt_statistic stores lround(2^31 * p) and
 *  prints it back with "%.11f"): 0.3333333333 → 0.33333333349. */
export function savedProbability(p: string): string {
  return (Math.round(0x80000000 * Number(p)) / 0x80000000).toFixed(11);
}

export interface IptablesOptions {
  clusterCidr?: string;
  /** Default: totalEndpoints > 1000, as kube-proxy decides. */
  largeClusterMode?: boolean;
}

export interface IptablesRuleset {
  text: string;
  natChains: number;
  natRules: number;
  filterRules: number;
}

const q = (s: string) => `"${s}"`;

function topFilter(): { chains: string[]; rules: string[] } {
  const chains = ['KUBE-SERVICES', 'KUBE-EXTERNAL-SERVICES', 'KUBE-FORWARD', 'KUBE-NODEPORTS', 'KUBE-PROXY-FIREWALL', 'KUBE-FIREWALL'].map((c) => `:${c} - [0:0]`);
  const rules = [
    `-A KUBE-FIREWALL -m comment --comment ${q('block incoming localnet connections')} -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`,
    '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP',
    `-A KUBE-FORWARD -m comment --comment ${q('kubernetes forwarding rules')} -m mark --mark ${MASQ_MARK}/${MASQ_MARK} -j ACCEPT`,
    `-A KUBE-FORWARD -m comment --comment ${q('kubernetes forwarding conntrack rule')} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`,
  ];
  return { chains, rules };
}

/**
 * The restore input. `only`: a partial sync that writes the per-service chains of these
 * services only (by index); undefined: a full sync.
 */
export function iptablesRestore(services: readonly BenchService[], opts: IptablesOptions = {}, only?: ReadonlySet<number>): IptablesRuleset {
  const cidr = opts.clusterCidr ?? CLUSTER_CIDR;
  const totalEndpoints = services.reduce((n, s) => n + s.endpoints.length, 0);
  const large = opts.largeClusterMode ?? totalEndpoints > 1000;
  const comment = (c: string) => (large ? '' : ` -m comment --comment ${c}`);

  const filter = topFilter();
  const natChains = ['KUBE-SERVICES', 'KUBE-NODEPORTS', 'KUBE-POSTROUTING', 'KUBE-MARK-MASQ'].map((c) => `:${c} - [0:0]`);
  const natRules = [
    `-A KUBE-POSTROUTING -m mark ! --mark ${MASQ_MARK}/${MASQ_MARK} -j RETURN`,
    `-A KUBE-POSTROUTING -j MARK --xor-mark ${MASQ_MARK}`,
    `-A KUBE-POSTROUTING -m comment --comment ${q('kubernetes service traffic requiring SNAT')} -j MASQUERADE --random-fully`,
    `-A KUBE-MARK-MASQ -j MARK --or-mark ${MASQ_MARK}`,
  ];
  for (const s of services) {
    const name = servicePortName(s);
    const p = s.protocol;
    const svc = svcChain(s);
    const ext = extChain(s);
    const has = s.endpoints.length > 0;
    const match = `-m ${p} -p ${p} -d ${s.clusterIP} --dport ${s.port}`;
    if (has) natRules.push(`-A KUBE-SERVICES -m comment --comment ${q(`${name} cluster IP`)} ${match} -j ${svc}`);
    else filter.rules.push(`-A KUBE-SERVICES -m comment --comment ${q(`${name} has no endpoints`)} ${match} -j REJECT`);
    if (s.nodePort !== undefined) {
      if (has) natRules.push(`-A KUBE-NODEPORTS -m comment --comment ${name} -m ${p} -p ${p} --dport ${s.nodePort} -j ${ext}`);
      else filter.rules.push(`-A KUBE-EXTERNAL-SERVICES -m comment --comment ${q(`${name} has no endpoints`)} -m addrtype --dst-type LOCAL -m ${p} -p ${p} --dport ${s.nodePort} -j REJECT`);
    }
    if (only && !only.has(s.index)) continue;
    if (!has) continue;
    natRules.push(`-A ${svc} -m comment --comment ${q(`${name} cluster IP`)} ${match} ! -s ${cidr} -j KUBE-MARK-MASQ`);
    if (s.nodePort !== undefined) {
      natChains.push(`:${ext} - [0:0]`);
      natRules.push(`-A ${ext} -m comment --comment ${q(`masquerade traffic for ${name} external destinations`)} -j KUBE-MARK-MASQ`, `-A ${ext} -j ${svc}`);
    }
    natChains.push(`:${svc} - [0:0]`);
    const n = s.endpoints.length;
    s.endpoints.forEach((e, i) => {
      const ep = `${e.ip}:${e.port}`;
      const stat = i < n - 1 ? ` -m statistic --mode random --probability ${probability(n - i)}` : '';
      natRules.push(`-A ${svc}${comment(q(`${name} -> ${ep}`))}${stat} -j ${sepChain(s, ep)}`);
    });
    for (const e of s.endpoints) {
      const ep = `${e.ip}:${e.port}`;
      const sep = sepChain(s, ep);
      natChains.push(`:${sep} - [0:0]`);
      natRules.push(`-A ${sep}${comment(name)} -s ${e.ip} -j KUBE-MARK-MASQ`, `-A ${sep}${comment(name)} -m ${p} -p ${p} -j DNAT --to-destination ${ep}`);
    }
  }
  natRules.push(`-A KUBE-SERVICES -m comment --comment ${q('kubernetes service nodeports; NOTE: this must be the last rule in this chain')} -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`);
  const text = ['*filter', ...filter.chains, ...filter.rules, 'COMMIT', '*nat', ...natChains, ...natRules, 'COMMIT', ''].join('\n');
  return { text, natChains: natChains.length, natRules: natRules.length, filterRules: filter.rules.length };
}

/** The chains and jump rules kube-proxy ensures once (EnsureChain, EnsureRule → iptables -N,
 *  -I) before its first restore. */
export const JUMP_RULES: ReadonlyArray<readonly string[]> = [
  ['-t', 'nat', '-N', 'KUBE-SERVICES'],
  ['-t', 'nat', '-N', 'KUBE-POSTROUTING'],
  ['-t', 'nat', '-I', 'PREROUTING', '-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES'],
  ['-t', 'nat', '-I', 'OUTPUT', '-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES'],
  ['-t', 'nat', '-I', 'POSTROUTING', '-m', 'comment', '--comment', 'kubernetes postrouting rules', '-j', 'KUBE-POSTROUTING'],
];
