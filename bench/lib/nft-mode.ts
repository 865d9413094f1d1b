// An `nft -f` ruleset shaped like kube-proxy's nftables mode (pkg/proxy/nftables): one table,
// the service-ips / service-nodeports verdict maps → a chain per service port (masquerade mark
// for off-cluster sources, then `numgen random mod n vmap` over its endpoint chains) → a chain
// per endpoint (hairpin mark + DNAT); NodePorts through an external-* chain that marks for
// masquerade; base chains for nat prerouting/output/postrouting. Chain names follow kube-proxy's
// "service-HASH-ns/name/proto/port" and "endpoint-HASH-…__ip/port" pattern. Two renderings:
//   nftRuleset      the ruleset as one declarative `table { … }` document (what `nft list` prints)
//   nftTransaction  the commands kube-proxy's full sync sends (knftables writes each object as an
//                   `add`/`flush` line on `nft -f -`'s standard input, in syncProxyRules' order:
//                   setupNFTables, the maps flushed, then per service its chains added and
//                   flushed, its map elements, its rules)
// Shaped, not byte-identical: kube-proxy's filter-table chains (firewall, reject of endpoint-less
// services) are left out of the declarative one; the transaction has their constant setup (a few
// chains and maps) but no element or rule of theirs (every bench service has endpoints).
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

/** The family and table every command names, as knftables writes one object a line
 *  (`add chain ip kube-proxy NAME`). */
const T = `ip ${NFT_TABLE}`;

/** kube-proxy's setupNFTables(): the table, its base chains (added and flushed), the jump
 *  chains and the rules to them, the masquerade chains' rules, and the dispatch maps (flushed:
 *  a full sync rebuilds them). */
function setupCommands(): string[] {
  // kube-proxy names the priorities (dstnat, dstnat-10); nft 1.0.6 takes a name only on the hook
  // it belongs to, so the numbers (dstnat = -100, srcnat = 100) where the name is refused
  const out = [`add table ${T} { comment "rules for kube-proxy" ; }`];
  const base: Array<[string, string, string, string]> = [
    ['filter-prerouting', 'filter', 'prerouting', '-110'],
    ['filter-input', 'filter', 'input', '-110'],
    ['filter-forward', 'filter', 'forward', '-110'],
    ['filter-output', 'filter', 'output', '-110'],
    ['nat-prerouting', 'nat', 'prerouting', 'dstnat'],
    ['nat-output', 'nat', 'output', '-100'],
    ['nat-postrouting', 'nat', 'postrouting', 'srcnat'],
  ];
  for (const [name, type, hook, priority] of base) out.push(`add chain ${T} ${name} { type ${type} hook ${hook} priority ${priority} ; }`, `flush chain ${T} ${name}`);
  const created = new Set<string>();
  const ensure = (c: string) => {
    if (created.has(c)) return;
    created.add(c);
    out.push(`add chain ${T} ${c}`, `flush chain ${T} ${c}`);
  };
  const jumps: Array<[string, string, string]> = [
    ['endpoints-check', 'filter-input', 'ct state new '],
    ['endpoints-check', 'filter-forward', 'ct state new '],
    ['endpoints-check', 'filter-output', 'ct state new '],
    ['firewall-check', 'filter-prerouting', 'ct state new '],
    ['firewall-check', 'filter-output', 'ct state new '],
    ['services', 'nat-output', ''],
    ['services', 'nat-prerouting', ''],
    ['masquerading', 'nat-postrouting', ''],
  ];
  for (const [dst, src, extra] of jumps) {
    ensure(dst);
    out.push(`add rule ${T} ${src} ${extra}jump ${dst}`);
  }
  for (const c of ['services', 'masquerading', 'mark-for-masquerade', 'reject-chain']) ensure(c);
  out.push(
    `add rule ${T} mark-for-masquerade mark set mark or ${MASQ_MARK}`,
    `add rule ${T} masquerading mark and ${MASQ_MARK} == 0 return`,
    `add rule ${T} masquerading mark set mark xor ${MASQ_MARK}`,
    `add rule ${T} masquerading masquerade fully-random`,
    `add rule ${T} reject-chain reject`,
  );
  const maps: Array<[string, string]> = [
    ['firewall-ips', 'ipv4_addr . inet_proto . inet_service'],
    ['no-endpoint-services', 'ipv4_addr . inet_proto . inet_service'],
    ['no-endpoint-nodeports', 'inet_proto . inet_service'],
    ['service-ips', 'ipv4_addr . inet_proto . inet_service'],
    ['service-nodeports', 'inet_proto . inet_service'],
  ];
  for (const [name, type] of maps) out.push(`add map ${T} ${name} { type ${type} : verdict ; }`, `flush map ${T} ${name}`);
  out.push(
    `add rule ${T} services ip daddr . meta l4proto . th dport vmap @service-ips`,
    `add rule ${T} services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports`,
    `add rule ${T} endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services`,
    `add rule ${T} firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips`,
  );
  return out;
}

/** One service's part of a full sync, in syncProxyRules' order: its endpoint chains, service
 *  chain and external chain added and flushed (ensureChain), its map elements, then its rules. */
function serviceCommands(s: BenchService, clusterCidr: string): string[] {
  if (!s.endpoints.length) return [];
  const out: string[] = [];
  const ensure = (c: string) => out.push(`add chain ${T} ${c}`, `flush chain ${T} ${c}`);
  for (const e of s.endpoints) ensure(endpointChainName(s, e.ip, e.port));
  const svc = serviceChainName(s);
  ensure(svc);
  const ext = s.nodePort !== undefined ? externalChainName(s) : undefined;
  if (ext) ensure(ext);
  out.push(`add element ${T} service-ips { ${s.clusterIP} . ${s.protocol} . ${s.port} : goto ${svc} }`);
  if (ext) out.push(`add element ${T} service-nodeports { ${s.protocol} . ${s.nodePort} : goto ${ext} }`);
  const [masq, lb] = serviceRules(s, clusterCidr);
  out.push(`add rule ${T} ${svc} ${masq}`);
  if (ext) out.push(`add rule ${T} ${ext} jump mark-for-masquerade`, `add rule ${T} ${ext} goto ${svc}`);
  out.push(`add rule ${T} ${svc} ${lb}`);
  for (const e of s.endpoints) for (const r of endpointRules(s, e)) out.push(`add rule ${T} ${endpointChainName(s, e.ip, e.port)} ${r}`);
  return out;
}

/**
 * kube-proxy's full sync for `services` as it sends it: one `nft -f -` transaction of commands.
 * (Before it kube-proxy lists the table's chains, `nft --json list chains`, to flush stale ones:
 * a process of its own, not in this text.)
 * `setup: false`: the services' part only (a later piece of a load in several transactions; the
 * table, base chains and maps are in the first, whose map flushes must not run again).
 */
export function nftTransaction(services: readonly BenchService[], clusterCidr = CLUSTER_CIDR, o: { setup?: boolean } = {}): string {
  const out = o.setup ?? true ? setupCommands() : [];
  for (const s of services) out.push(...serviceCommands(s, clusterCidr));
  return out.join('\n') + '\n';
}

/**
 * The same full sync cut into transactions of `per` services each (the first with the setup).
 * The kernel binds each anonymous vmap (a service chain's `numgen … vmap { … }`) at a cost that
 * grows with the transaction it is in: at 10k services × 10 one transaction took 259 s, ten of
 * 1,000 took 22 s in all. kube-proxy sends one; the pieces are the fastest way to load its
 * ruleset with its own tool.
 */
export function nftTransactionPieces(services: readonly BenchService[], per = 1000, clusterCidr = CLUSTER_CIDR): string[] {
  const out: string[] = [];
  for (let i = 0; i < services.length || i === 0; i += per) out.push(nftTransaction(services.slice(i, i + per), clusterCidr, { setup: i === 0 }));
  return out;
}
