// kube-proxy's iptables glue for IPVS mode, as nftables tables ipvsync owns (`ip ipvsync` and
// `ip6 ipvsync`): static chains and rules, with everything per-service in sets and maps, so a
// service or endpoint change is an element change, never a rule change.
//
//   nat prerouting/output -> services: mark 0x4000 for traffic that must be masqueraded:
//       to a cluster IP from outside the cluster CIDRs (or all of it with masqueradeAll),
//       to an external / load-balancer IP (unless externalTrafficPolicy Local),
//       to a NodePort on a local address (unless Local)
//   nat postrouting: masquerade (fully random) what carries the mark; hairpin: an endpoint that
//       reached itself through a VIP is masqueraded so the reply comes back through IPVS
//   filter input: loadBalancerSourceRanges (jump to a per-service chain that returns for
//       allowed sources and drops the rest); reject new connections to a VIP on a port that
//       is no service (IPVS would otherwise hand them to the local stack); with bindMode
//       'route' (a local route covers each service CIDR, so every address in it is local),
//       also reject new connections of any protocol to an address in those CIDRs that is no
//       VIP — the node must not answer on 10.96.0.0/12 as a whole
// IPVS runs at LOCAL_IN priority 98 and LOCAL_OUT -98, after the filter input chain (0) and
// after the nat output chain (-100); with net.ipv4.vs.conntrack=1 its forwarded packets pass
// nat postrouting, where the masquerade happens.
import type { DesiredNftTable } from '../../engine/nft-diff.js';
import type { NftElementChange } from '../../engine/engine.js';
import type { Expr } from '../../kernel/nft-expr.js';
import * as R from '../../kernel/nft-rules.js';
import type { SetElement } from '../../kernel/nftables.js';
import type { GlueHairpin, GlueSpec } from './types.js';
import { ElementStore, keyText } from '../element-store.js';
import { FIELDS, fam, mapDefined, MASQ_MARK, natBase, PROXY_TABLE_OWNED, uniq, uniqText, type Fam } from '../nft-sets.js';

export const GLUE_TABLE = 'ipvsync';

/** A stable, short chain name for a service's source-range firewall: 48 bits of a 64-bit
 *  FNV-1a hash of the virtual server (not node:crypto, whose loading alone costs the daemon
 *  ~2.6 MB of resident memory for a name). */
export function firewallChain(address: string, protocol: string, port: number): string {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(`${address}|${protocol}|${port}`)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return `fw-${h.toString(16).padStart(16, '0').slice(0, 12)}`;
}

export interface GlueOptions {
  /** bindMode 'route': the service CIDRs the local routes cover (non-VIP addresses rejected). */
  serviceCidrs?: string[];
}

/** The glue tables for a GlueSpec: always both families, so stale ones are emptied, not left. */
export function glueTables(g: GlueSpec, opts: GlueOptions = {}): DesiredNftTable[] {
  return [glueTable(g, 'ip', opts), glueTable(g, 'ip6', opts)];
}

/** The hairpin set's elements: each local endpoint, masqueraded when it reaches itself. */
function hairpinElements(g: GlueSpec, family: Fam): SetElement[] {
  return uniq(mapDefined(g.hairpin, (h) => (fam(h.address) === family ? hairpinElement(h) : undefined)));
}

function hairpinElement(h: GlueHairpin): SetElement {
  return { key: [h.address, h.protocol, h.port, h.address] };
}

/** Each glue table's hairpin set's store, by the tables' order: made by the first patch of the
 *  tables and kept with them. */
export type HairpinIndexes = Array<ElementStore | undefined>;

/**
 * Makes the glue tables of `before` those of `g`, when the two specs differ in hairpin only
 * (every other field the very same object, as in a model patched from the last one when a local
 * endpoint moved): `change` (translate's ModelPatch.hairpin: the entries that went and came)
 * made to the tables' hairpin sets in place, through their stores (`at`, kept with the tables).
 * Returns the element changes (what the engine writes); undefined, changing nothing, when
 * anything else differs.
 */
export function patchGlueHairpin(
  before: GlueSpec,
  tables: readonly DesiredNftTable[],
  g: GlueSpec,
  change: { removed: readonly GlueHairpin[]; added: readonly GlueHairpin[] },
  at: HairpinIndexes,
): NftElementChange[] | undefined {
  for (const k of Object.keys(g) as Array<keyof GlueSpec>) if (k !== 'hairpin' && g[k] !== before[k]) return undefined;
  if (Object.keys(before).length !== Object.keys(g).length) return undefined;
  const changes: NftElementChange[] = [];
  tables.forEach((t, i) => {
    const s = t.sets.find((x) => x.name === 'hairpin');
    const mine = (h: GlueHairpin) => fam(h.address) === t.family;
    const del = change.removed.filter(mine);
    const add = change.added.filter(mine);
    if (!s || (!del.length && !add.length)) return;
    const store = (at[i] ??= new ElementStore(t.family, s, keyText));
    store.record();
    for (const h of del) store.remove(hairpinElement(h));
    for (const h of add) store.add(hairpinElement(h));
    const c = store.changes(t.name);
    if (c) changes.push(c);
  });
  return changes;
}

export function glueTable(g: GlueSpec, family: Fam, opts: GlueOptions = {}): DesiredNftTable {
  const F = FIELDS[family];
  const mine = <T extends { address: string }>(x: T) => fam(x.address) === family;
  const vipKey = (v: { address: string; protocol: string; port: number }): SetElement => ({ key: [v.address, v.protocol, v.port] });
  const svcKey = [F.addr, 'inet_proto', 'inet_service'] as const;

  // One element per VIP, shared by the three sets that hold it (elements are never changed).
  const vips = mapDefined(g.vips, (v) => (mine(v) ? { v, key: vipKey(v) } : undefined));
  const clusterIps = uniq(mapDefined(vips, (x) => (x.v.kind === 'clusterIP' ? x.key : undefined)));
  const externalMasq = uniq(mapDefined(vips, (x) => (x.v.kind !== 'clusterIP' && !x.v.localOnly ? x.key : undefined)));
  const allVipPorts = uniq(vips.map((x) => x.key));
  // only the bound ones: an external IP that is a node address serves the node's own ports too
  const vipAddrs = uniq(mapDefined(vips, (x) => (x.v.bound ? { key: [x.v.address] } : undefined)));
  const nodePortFamily = family === 'ip' ? 'inet' : 'inet6';
  const nodePorts = uniq(g.nodePorts.filter((n) => n.family === nodePortFamily && !n.localOnly).map((n) => ({ key: [n.protocol, n.port] })));
  const clusterCidrs = uniqText(g.clusterCIDRs.filter((c) => fam(c.split('/')[0]!) === family).map((c) => ({ key: [c] })));
  const hairpin = hairpinElements(g, family);
  const ranges = g.sourceRanges.filter(mine);

  const { chains, rules } = natBase();
  chains.push({ name: 'input', hook: { type: 'filter', hook: 'input', priority: 0, policy: 'accept' } }, { name: 'services' });
  const add = (chain: string, ...parts: Array<Expr | Expr[]>) => rules.push({ chain, exprs: R.rule(...parts) });
  const mark = R.setMarkBits(MASQ_MARK);
  const svcFields = [F.daddr, R.F.l4proto, R.F.thDport];

  if (g.masqueradeAll) add('services', R.inSet(svcFields, 'cluster-ips'), mark);
  else if (clusterCidrs.length) add('services', R.inSet(svcFields, 'cluster-ips'), R.inSet([F.saddr], 'cluster-cidrs', { invert: true }), mark);
  // no cluster CIDR to tell pods by: the node's own traffic, which leaves with the cluster IP
  // itself as source (kube-proxy's `KUBE-CLUSTER-IP src,dst`)
  else add('services', R.inSet([F.saddr, R.F.l4proto, R.F.thDport], 'cluster-ips'), mark);
  add('services', R.inSet(svcFields, 'external-ips'), mark);
  add('services', R.fibDaddrType('local'), R.inSet([R.F.l4proto, R.F.thDport], 'nodeports'), mark);
  add('postrouting', R.inSet([F.daddr, R.F.l4proto, R.F.thDport, F.saddr], 'hairpin'), R.masquerade({ fullyRandom: true }));
  add('input', R.vmap(svcFields, 'firewall'));
  // Only new connections: replies to a local client whose source is a VIP (the kernel picks
  // the VIP itself as source for a local destination) arrive on the VIP at an ephemeral port.
  add('input', R.ctState('new'), R.inSet([R.F.l4proto], 'service-protocols'), R.inSet([F.daddr], 'vips'), R.inSet(svcFields, 'vip-ports', { invert: true }), R.reject(F.reject));
  // Route mode: the static part gains a set and a rule (a mode switch rebuilds the table in one
  // transaction); address mode keeps the table it always had.
  const serviceCidrs = opts.serviceCidrs ? uniqText(opts.serviceCidrs.filter((c) => fam(c.split('/')[0]!) === family).map((c) => ({ key: [c] }))) : undefined;
  if (serviceCidrs) add('input', R.ctState('new'), R.inSet([F.daddr], 'service-cidrs'), R.inSet([F.daddr], 'vips', { invert: true }), R.reject(F.reject));

  let firewall: SetElement[] = [];
  for (const r of ranges) {
    const chain = firewallChain(r.address, r.protocol, r.port);
    if (chains.some((c) => c.name === chain)) continue;
    chains.push({ name: chain });
    for (const cidr of r.cidrs.filter((c) => fam(c.split('/')[0]!) === family)) add(chain, R.match(F.saddr, cidr), R.ret());
    if (r.allowFromNode) add(chain, R.match(F.saddr, r.address), R.ret());
    add(chain, R.drop());
    firewall.push({ key: [r.address, r.protocol, r.port], verdict: { code: 'jump', chain } });
  }
  firewall = uniq(firewall);

  // the sets built by uniq: one element per key
  const unique = true;
  return {
    family,
    name: GLUE_TABLE,
    chains,
    sets: [
      { name: 'cluster-ips', key: [...svcKey], elements: clusterIps, unique },
      { name: 'external-ips', key: [...svcKey], elements: externalMasq, unique },
      { name: 'vip-ports', key: [...svcKey], elements: allVipPorts, unique },
      { name: 'vips', key: [F.addr], elements: vipAddrs, unique },
      { name: 'nodeports', key: ['inet_proto', 'inet_service'], elements: nodePorts, unique },
      { name: 'cluster-cidrs', key: [F.addr], interval: true, elements: clusterCidrs },
      { name: 'hairpin', key: [F.addr, 'inet_proto', 'inet_service', F.addr], elements: hairpin, unique },
      { name: 'service-protocols', key: ['inet_proto'], elements: [{ key: ['tcp'] }, { key: ['udp'] }, { key: ['sctp'] }] },
      { name: 'firewall', key: [...svcKey], map: 'verdict', elements: firewall, unique },
      ...(serviceCidrs ? [{ name: 'service-cidrs', key: [F.addr], interval: true, elements: serviceCidrs }] : []),
    ],
    rules,
    owned: PROXY_TABLE_OWNED,
  };
}
