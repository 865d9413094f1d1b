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

export function nftRuleset(services: readonly BenchService[], clusterCidr = CLUSTER_CIDR): { text: string; chains: number; rules: number; mapElements: number } {
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
  chain('mark-for-masquerade', [`meta mark set meta mark | ${MASQ_MARK}`]);
  chain('masquerading', [`meta mark & ${MASQ_MARK} == 0 return`, `meta mark set meta mark ^ ${MASQ_MARK}`, 'masquerade fully-random']);
  chain('services', ['ip daddr . meta l4proto . th dport vmap @service-ips', 'fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports']);
  chain('nat-prerouting', ['type nat hook prerouting priority dstnat; policy accept;', 'jump services']);
  chain('nat-output', ['type nat hook output priority -100; policy accept;', 'jump services']);
  chain('nat-postrouting', ['type nat hook postrouting priority srcnat; policy accept;', 'jump masquerading']);
  for (const s of services) {
    if (!s.endpoints.length) continue;
    const vmap = s.endpoints.map((e, i) => `${i} : goto ${endpointChainName(s, e.ip, e.port)}`).join(', ');
    chain(serviceChainName(s), [
      `ip daddr ${s.clusterIP} ${s.protocol} dport ${s.port} ip saddr != ${clusterCidr} jump mark-for-masquerade`,
      `numgen random mod ${s.endpoints.length} vmap { ${vmap} }`,
    ]);
    if (s.nodePort !== undefined) chain(externalChainName(s), ['jump mark-for-masquerade', `goto ${serviceChainName(s)}`]);
    for (const e of s.endpoints) {
      chain(endpointChainName(s, e.ip, e.port), [`ip saddr ${e.ip} jump mark-for-masquerade`, `meta l4proto ${s.protocol} dnat to ${e.ip}:${e.port}`]);
    }
  }
  out.push('}', '');
  return { text: out.join('\n'), chains, rules, mapElements: svcEls.length + npEls.length };
}
