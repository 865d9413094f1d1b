// The nftables data plane: the service model → one table per family that does what
// kube-proxy's iptables and nftables modes do (DNAT of every frontend to an endpoint chosen at
// random, masquerade, hairpin, reject) with a fixed set of rules. Everything per service or per
// endpoint is an element of a data map or a plain set, never a rule, a chain or a jump: adding,
// removing or changing a service or an endpoint commits element changes only, which the kernel
// applies without re-validating the table (a jump/goto element or a rule with a nat or verdict
// expression makes every commit walk the whole jump graph, docs/ARCHITECTURE.md). The rules
// that grow are one per distinct endpoint count, not per service.
//
//   nat prerouting/output -> services:
//       mark 0x4000 (masquerade) for a cluster IP from outside the cluster CIDRs (or all of it
//       with masqueradeAll) and for external frontends (externalTrafficPolicy Cluster);
//       then, for each endpoint count N in use, one rule: dnat to the address and port map
//       `endpoints-N` gives daddr . l4proto . dport . (numgen random mod N). A frontend with N
//       endpoints has its N elements (one per endpoint) in that map only, so the rules of the
//       other counts miss it, and each new connection picks one of its endpoints evenly
//   nat postrouting: masquerade what carries the mark; hairpin (an endpoint that reached
//       itself through its service: the pods' bridge ports need hairpin mode, as for
//       kube-proxy, docs/kube-proxy.md)
//   filter prerouting (after the dnat) and output: new connections to a frontend without
//       endpoints are rejected (no endpoint anywhere) or dropped (a Local traffic policy with
//       none on this node), and to a cluster IP on a port that is no service, rejected. In
//       prerouting, not forward: a packet the node would route back out of the interface it
//       came in on makes the kernel send an ICMP redirect first, which uses up the client's
//       ICMP rate limit, and the port-unreachable would not go out (icmpv4_xrlim_allow)
//
// A frontend is (address, protocol, port): the cluster IP at the service port; external and
// load-balancer IPs at the service port; each NodePort address at the node port (no loopback:
// DNAT of 127.0.0.1 to a pod needs route_localnet, as in kube-proxy's nftables mode).
import type { DesiredNftTable } from '../../engine/nft-diff.js';
import type { Expr } from '../../kernel/nft-expr.js';
import * as R from '../../kernel/nft-rules.js';
import type { KeyValue } from '../../kernel/nft-types.js';
import type { SetElement } from '../../kernel/nftables.js';
import { frontendEndpoints, frontends, type Frontend, type ModelContext, type ServiceModel, type ServicePortModel } from '../../kube/service-model.js';
import type { ModelWarning } from '../../kube/types.js';
import { compareElements, FIELDS, fam, uniq, uniqText, type Fam } from '../nft-sets.js';
import { isLoopback } from '../../net/address.js';

/** The table of each family (the IPVS glue's name: a switch of data plane replaces one table
 *  with the other, and the ownership rule stays one name per family). */
export const NFT_PROXY_TABLE = 'ipvsync';
export const MASQ_MARK = 0x4000;

/** What the model translates into, per family. */
interface Elements {
  /** By endpoint count: the endpoints-N map's elements. */
  endpoints: Map<number, SetElement[]>;
  clusterIps: SetElement[];
  externalIps: SetElement[];
  reject: SetElement[];
  drop: SetElement[];
  hairpin: SetElement[];
  clusterAddrs: SetElement[];
}

const emptyElements = (): Elements => ({
  endpoints: new Map(), clusterIps: [], externalIps: [], reject: [], drop: [], hairpin: [], clusterAddrs: [],
});

export interface NftTablesResult {
  tables: DesiredNftTable[];
  /** Frontends two service ports claim: the first (in the models' order) keeps it. */
  warnings: ModelWarning[];
}

/** The tables (ip, then ip6: both always, so a family's last service leaves an empty table,
 *  not a stale one) for these services under this node and configuration. */
export function nftablesTables(models: readonly ServiceModel[], ctx: ModelContext): NftTablesResult {
  const by: Record<Fam, Elements> = { ip: emptyElements(), ip6: emptyElements() };
  const owners = new Map<string, string>();
  const warnings: ModelWarning[] = [];
  for (const m of models)
    for (const p of m.ports) {
      const e = by[p.family === 'inet' ? 'ip' : 'ip6'];
      e.clusterAddrs.push({ key: [p.clusterIP] });
      for (const fe of frontends(p, ctx)) {
        // no NodePort on loopback: DNAT of 127.0.0.1 to a pod needs route_localnet
        if (fe.kind === 'nodePort' && isLoopback(fe.address)) continue;
        const tuple: KeyValue[] = [fe.address, p.protocol, fe.port];
        const key = tuple.join(' ');
        const owner = owners.get(key);
        if (owner !== undefined) {
          if (owner !== p.name) warnings.push({ service: p.service, message: `${fe.address}:${fe.port}/${p.protocol} already belongs to ${owner}, ignored` });
          continue;
        }
        owners.set(key, p.name);
        addFrontend(e, p, fe, tuple);
      }
    }
  return { tables: [table('ip', by.ip, ctx), table('ip6', by.ip6, ctx)], warnings };
}

function addFrontend(e: Elements, p: ServicePortModel, fe: Frontend, tuple: KeyValue[]): void {
  const eps = frontendEndpoints(p, fe);
  if (fe.kind === 'clusterIP') e.clusterIps.push({ key: tuple });
  else if (!p.externalLocal) e.externalIps.push({ key: tuple });
  if (eps.length === 0) {
    // No endpoint at all: refused at once. Endpoints elsewhere but a Local policy: dropped.
    (p.cluster.length === 0 && p.local.length === 0 ? e.reject : e.drop).push({ key: tuple });
    return;
  }
  let map = e.endpoints.get(eps.length);
  if (!map) e.endpoints.set(eps.length, (map = []));
  eps.forEach((ep, i) => {
    map.push({ key: [...tuple, i], data: [ep.address, ep.port] });
    if (ep.local) e.hairpin.push({ key: [ep.address, p.protocol, ep.port, ep.address] });
  });
}

function table(family: Fam, e: Elements, ctx: ModelContext): DesiredNftTable {
  const F = FIELDS[family];
  const svcKey = [F.addr, 'inet_proto', 'inet_service'] as const;
  const svcFields = [F.daddr, R.F.l4proto, R.F.thDport];
  const sizes = [...e.endpoints.keys()].sort((a, b) => a - b);
  const clusterCidrs = uniqText(ctx.clusterCIDRs.filter((c) => fam(c.split('/')[0]!) === family).map((c) => ({ key: [c] })));

  const chains: DesiredNftTable['chains'] = [
    { name: 'prerouting', hook: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } },
    { name: 'output', hook: { type: 'nat', hook: 'output', priority: -100, policy: 'accept' } },
    { name: 'postrouting', hook: { type: 'nat', hook: 'postrouting', priority: 100, policy: 'accept' } },
    { name: 'filter-prerouting', hook: { type: 'filter', hook: 'prerouting', priority: -99, policy: 'accept' } },
    { name: 'filter-output', hook: { type: 'filter', hook: 'output', priority: 0, policy: 'accept' } },
    { name: 'services' },
    { name: 'endpoints-check' },
  ];
  const rules: DesiredNftTable['rules'] = [];
  const add = (chain: string, ...parts: Array<Expr | Expr[]>) => rules.push({ chain, exprs: R.rule(...parts) });
  const mark = R.setMarkBits(MASQ_MARK);

  add('prerouting', R.jump('services'));
  add('output', R.jump('services'));
  if (ctx.config.masqueradeAll) add('services', R.inSet(svcFields, 'cluster-ips'), mark);
  else if (clusterCidrs.length) add('services', R.inSet(svcFields, 'cluster-ips'), R.inSet([F.saddr], 'cluster-cidrs', { invert: true }), mark);
  add('services', R.inSet(svcFields, 'external-ips'), mark);
  for (const n of sizes) add('services', R.inSet([R.F.l4proto], 'service-protocols'), R.dnatMap(family, [...svcFields, R.numgen(n)], endpointsMap(n), { port: true }));

  add('postrouting', R.markMatch('meta', MASQ_MARK), R.masquerade({ fullyRandom: true }));
  add('postrouting', R.ctStatus('dnat'), R.inSet([F.daddr, R.F.l4proto, R.F.thDport, F.saddr], 'hairpin'), R.masquerade({ fullyRandom: true }));

  for (const c of ['filter-prerouting', 'filter-output']) add(c, R.ctState('new'), R.jump('endpoints-check'));
  // TCP is refused with a reset (connect() fails at once with ECONNREFUSED, whatever the
  // client's ICMP rate limit), the rest with ICMP port unreachable.
  const refuse = (...match: Expr[][]) => {
    add('endpoints-check', R.match(R.F.l4proto, 'tcp'), ...match, R.reject('tcp-reset'));
    add('endpoints-check', ...match, R.reject(F.reject));
  };
  refuse(R.inSet(svcFields, 'reject-services'));
  add('endpoints-check', R.inSet(svcFields, 'drop-services'), R.drop());
  // Still addressed to a cluster IP after the nat hooks: a port that is no service.
  refuse(R.inSet([F.daddr], 'cluster-addrs'));

  const order = compareElements;
  return {
    family,
    name: NFT_PROXY_TABLE,
    chains,
    sets: [
      ...sizes.map((n) => ({ name: endpointsMap(n), key: [...svcKey, 'mark' as const], map: [F.addr, 'inet_service' as const], elements: uniq(e.endpoints.get(n)!), order })),
      { name: 'service-protocols', key: ['inet_proto'], elements: [{ key: ['sctp'] }, { key: ['tcp'] }, { key: ['udp'] }] },
      { name: 'cluster-ips', key: [...svcKey], elements: uniq(e.clusterIps), order },
      { name: 'external-ips', key: [...svcKey], elements: uniq(e.externalIps), order },
      { name: 'cluster-cidrs', key: [F.addr], interval: true, elements: clusterCidrs },
      { name: 'hairpin', key: [F.addr, 'inet_proto', 'inet_service', F.addr], elements: uniq(e.hairpin), order },
      { name: 'reject-services', key: [...svcKey], elements: uniq(e.reject), order },
      { name: 'drop-services', key: [...svcKey], elements: uniq(e.drop), order },
      { name: 'cluster-addrs', key: [F.addr], elements: uniq(e.clusterAddrs), order },
    ],
    rules,
  };
}

function endpointsMap(n: number): string {
  return `endpoints-${n}`;
}
