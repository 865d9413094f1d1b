// An `nft -f` ruleset shaped like kube-proxy's nftables mode (pkg/proxy/nftables): one table,
// the service-ips / service-nodeports verdict maps → a chain per service port (masquerade mark
// for off-cluster sources, then `numgen random mod n vmap` over its endpoint chains) → a chain
// per endpoint (hairpin mark + DNAT); NodePorts through an external-* chain that marks for
// masquerade; base chains for nat prerouting/output/postrouting. Chain names follow kube-proxy's
// "service-HASH-ns/name/proto/port" and "endpoint-HASH-…__ip/port" pattern. One transaction,
// as kube-proxy's full sync writes it. Shaped, not byte-identical: kube-proxy's filter-table
// chains (firewall, reject of endpoint-less services) are left out.
import { createHash } from 'node:crypto';
import { base32 } from './iptables.js';
import { CLUSTER_CIDR, MASQ_MARK, type BenchService } from './workload.js';

export const NFT_TABLE = 'kube-proxy';

const h8 = (s: string) => base32(createHash('sha256').update(s).digest()).slice(0, 8);

function base(s: BenchService): string {
  return `${s.namespace}/${s.name}/${s.protocol}/${s.portName}`;
}

export function serviceChainName(s: BenchService): string {
  return `service-${h8(base(s))}-${base(s)}`;
}

export function externalChainName(s: BenchService): string {
  return `external-${h8(base(s))}-${base(s)}`;
}

export function endpointChainName(s: BenchService, ip: string, port: number): string {
  const b = `${base(s)}__${ip}/${port}`;
  return `endpoint-${h8(b)}-${b}`;
}

/** `base: false`: the services' chains and map elements only (a later piece of a load in
 *  several transactions: the base chains and their rules are in the first). */
export function nftRuleset(services: readonly BenchService[], clusterCidr = CLUSTER_CIDR, o: { base?: boolean } = {}): { text: string; chains: number; rules: number; mapElements: number } {
  const withBase = o.base ?? true;
  const out: string[] = [`table ip ${NFT_TABLE} {`, '  comment "rules for kube-proxy"'];
  let chains = 0;
  let rules = 0;
  const chain = (name: string, body: string[]) => {
    out.push(`  chain ${name} {`, ...body.map((l) => `    ${l}`), '  }');
    chains++;
    rules += body.filter((l) => !l.startsWith('type ')).length;
  };
  const svcEls: string[] = [];
  const npEls: string[] = [];
  for (const s of services) {
    if (!s.endpoints.length) continue;
    svcEls.push(`${s.clusterIP} . ${s.protocol} . ${s.port} : goto ${serviceChainName(s)}`);
    if (s.nodePort !== undefined) npEls.push(`${s.protocol} . ${s.nodePort} : goto ${externalChainName(s)}`);
  }
  const map = (name: string, type: string, els: string[]) => {
    out.push(`  map ${name} {`, `    type ${type} : verdict`);
    if (els.length) out.push('    elements = {', ...els.map((e) => `      ${e},`), '    }');
    out.push('  }');
  };
  map('service-ips', 'ipv4_addr . inet_proto . inet_service', svcEls);
  map('service-nodeports', 'inet_proto . inet_service', npEls);
  if (withBase) baseChains(chain);
  for (const s of services) {
    if (!s.endpoints.length) continue;
    serviceChains(s, clusterCidr, chain);
  }
  out.push('}', '');
  return { text: out.join('\n'), chains, rules, mapElements: svcEls.length + npEls.length };
}

type ChainWriter = (name: string, body: string[]) => void;

function baseChains(chain: ChainWriter): void {
  chain('mark-for-masquerade', [`meta mark set meta mark | ${MASQ_MARK}`]);
  chain('masquerading', [`meta mark & ${MASQ_MARK} == 0 return`, `meta mark set meta mark ^ ${MASQ_MARK}`, 'masquerade fully-random']);
  chain('services', ['ip daddr . meta l4proto . th dport vmap @service-ips', 'fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports']);
  chain('nat-prerouting', ['type nat hook prerouting priority dstnat; policy accept;', 'jump services']);
  chain('nat-output', ['type nat hook output priority -100; policy accept;', 'jump services']);
  chain('nat-postrouting', ['type nat hook postrouting priority srcnat; policy accept;', 'jump masquerading']);
}

function serviceRules(s: BenchService, clusterCidr: string): string[] {
  const vmap = s.endpoints.map((e, i) => `${i} : goto ${endpointChainName(s, e.ip, e.port)}`).join(', ');
  return [`ip daddr ${s.clusterIP} ${s.protocol} dport ${s.port} ip saddr != ${clusterCidr} jump mark-for-masquerade`, `numgen random mod ${s.endpoints.length} vmap { ${vmap} }`];
}

function endpointRules(s: BenchService, e: { ip: string; port: number }): string[] {
  return [`ip saddr ${e.ip} jump mark-for-masquerade`, `meta l4proto ${s.protocol} dnat to ${e.ip}:${e.port}`];
}

function serviceChains(s: BenchService, clusterCidr: string, chain: ChainWriter): void {
  chain(serviceChainName(s), serviceRules(s, clusterCidr));
  if (s.nodePort !== undefined) chain(externalChainName(s), ['jump mark-for-masquerade', `goto ${serviceChainName(s)}`]);
  for (const e of s.endpoints) chain(endpointChainName(s, e.ip, e.port), endpointRules(s, e));
}

/**
 * The transaction kube-proxy's nftables mode sends when one endpoint of a service is replaced:
 * the new endpoint's chain and rules, the service chain flushed and refilled with the new
 * numgen vmap, the old endpoint's chain flushed and deleted.
 */
export function nftEndpointChange(before: BenchService, after: BenchService, clusterCidr = CLUSTER_CIDR): string {
  const t = `ip ${NFT_TABLE}`;
  const key = (e: { ip: string; port: number }) => `${e.ip}:${e.port}`;
  const had = new Set(before.endpoints.map(key));
  const has = new Set(after.endpoints.map(key));
  const out: string[] = [];
  for (const e of after.endpoints.filter((x) => !had.has(key(x)))) {
    const c = endpointChainName(after, e.ip, e.port);
    out.push(`add chain ${t} ${c}`, ...endpointRules(after, e).map((r) => `add rule ${t} ${c} ${r}`));
  }
  const svc = serviceChainName(after);
  out.push(`flush chain ${t} ${svc}`, ...serviceRules(after, clusterCidr).map((r) => `add rule ${t} ${svc} ${r}`));
  for (const e of before.endpoints.filter((x) => !has.has(key(x)))) {
    const c = endpointChainName(before, e.ip, e.port);
    out.push(`flush chain ${t} ${c}`, `delete chain ${t} ${c}`);
  }
  return out.join('\n') + '\n';
}
