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
import type { GlueHairpin, GlueNodePort, GlueSourceRange, GlueSpec, GlueVip } from './types.js';
import { compareText } from '../../util/sorted.js';
import { ElementStore, keyText } from '../element-store.js';
import { FIELDS, fam, MASQ_MARK, natBase, PROXY_TABLE_OWNED, uniqText, type Fam } from '../nft-sets.js';

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

/** The glue's static facts: the configuration's, not the services'. */
export interface GlueContext extends GlueOptions {
  clusterCIDRs: readonly string[];
  masqueradeAll: boolean;
}

const FAMS: readonly Fam[] = ['ip', 'ip6'];
const SETS = ['cluster-ips', 'external-ips', 'vip-ports', 'vips', 'nodeports', 'cluster-cidrs', 'hairpin', 'service-protocols', 'firewall', 'service-cidrs'] as const;

/** What a glue record puts into its family's table: `elements[i]` into the set `sets[i]` (a
 *  frontend keeps these: two arrays, the sets' one shared by every frontend of its kind). */
export interface Placed {
  readonly sets: readonly string[];
  readonly elements: readonly SetElement[];
}

/** Frozen: the set lists, one per combination. */
const SETS_OF: Record<string, readonly string[]> = {};
const setsOf = (...names: string[]): readonly string[] => (SETS_OF[names.join()] ??= Object.freeze(names));
const NOTHING: Placed = Object.freeze({ sets: setsOf(), elements: Object.freeze([]) });

/** A VIP's elements: its port among the VIPs' and in the set of its kind (a cluster IP; an
 *  external one to masquerade), one element shared by both; its address among those bound. */
export function vipElements(v: Pick<GlueVip, 'kind' | 'address' | 'protocol' | 'port' | 'localOnly' | 'bound'>): Placed {
  const key: SetElement = { key: [v.address, v.protocol, v.port] };
  const kind = v.kind === 'clusterIP' ? 'cluster-ips' : !v.localOnly ? 'external-ips' : undefined;
  const sets = ['vip-ports', ...(kind ? [kind] : [])];
  const elements = sets.map(() => key);
  // only the bound ones: an external IP that is a node address serves the node's own ports too
  if (v.bound) {
    sets.push('vips');
    elements.push({ key: [v.address] });
  }
  return { sets: setsOf(...sets), elements };
}

/** A node port's element (externalTrafficPolicy Local: none, its traffic is not masqueraded). */
export function nodePortElements(n: Pick<GlueNodePort, 'localOnly' | 'protocol' | 'port'>): Placed {
  return n.localOnly ? NOTHING : { sets: setsOf('nodeports'), elements: [{ key: [n.protocol, n.port] }] };
}

/** A local endpoint, masqueraded when it reaches itself. */
const hairpinElement = (h: GlueHairpin): SetElement => ({ key: [h.address, h.protocol, h.port, h.address] });

/** A source-range firewall's jump from its load-balancer IP and port. */
const firewallElement = (r: GlueSourceRange): SetElement => ({ key: [r.address, r.protocol, r.port], verdict: { code: 'jump', chain: firewallChain(r.address, r.protocol, r.port) } });

/** Keyed by text, each key counted: the sets whose keys more than one record can put (a bound
 *  address, a node port, a local endpoint), the configuration's, and those whose elements are
 *  made at each put and take (hairpin, firewall). The others hold a key per frontend, which one
 *  service owns, and the frontend keeps its elements: kept by the element objects. */
const KEYED = new Set(['vips', 'nodeports', 'hairpin', 'firewall', 'cluster-cidrs', 'service-protocols', 'service-cidrs']);

interface GlueFamily {
  sets: Map<string, ElementStore>;
  /** The source-range firewalls, by chain: their chains and rules are the table's shape. */
  firewalls: Map<string, GlueSourceRange>;
  table: DesiredNftTable | undefined;
}

/**
 * The glue tables as stores: every set's elements kept by key, each key counted by the records
 * that put it (a bound address, a node port, a local endpoint can come from more than one), so
 * records put and taken in any order leave the elements of those left. While recording, the
 * stores name the element changes.
 */
export class GlueTables {
  private readonly families: Record<Fam, GlueFamily>;

  constructor(private readonly ctx: GlueContext) {
    this.families = { ip: this.family('ip'), ip6: this.family('ip6') };
  }

  /** A frontend's elements, put or taken (the same objects both times). */
  put(family: Fam, p: Placed): void {
    const sets = this.families[family].sets;
    for (let i = 0; i < p.sets.length; i++) sets.get(p.sets[i]!)!.add(p.elements[i]!);
  }
  take(family: Fam, p: Placed): void {
    const sets = this.families[family].sets;
    for (let i = 0; i < p.sets.length; i++) sets.get(p.sets[i]!)!.remove(p.elements[i]!);
  }
  putHairpin(h: GlueHairpin): void {
    this.families[fam(h.address)].sets.get('hairpin')!.add(hairpinElement(h));
  }
  takeHairpin(h: GlueHairpin): void {
    this.families[fam(h.address)].sets.get('hairpin')!.remove(hairpinElement(h));
  }
  /** A source-range firewall: its chain (the table's shape) and its jump. */
  putSourceRange(r: GlueSourceRange): void {
    const f = this.families[fam(r.address)];
    f.firewalls.set(firewallChain(r.address, r.protocol, r.port), r);
    f.table = undefined;
    f.sets.get('firewall')!.add(firewallElement(r));
  }
  takeSourceRange(r: GlueSourceRange): void {
    const f = this.families[fam(r.address)];
    f.firewalls.delete(firewallChain(r.address, r.protocol, r.port));
    f.table = undefined;
    f.sets.get('firewall')!.remove(firewallElement(r));
  }

  /** Starts a step's record of every set. */
  record(): void {
    for (const f of FAMS) for (const st of this.families[f].sets.values()) st.record();
  }

  /** The element changes since record(), and the record ends. */
  changes(): NftElementChange[] {
    const out: NftElementChange[] = [];
    for (const f of FAMS) for (const st of this.families[f].sets.values()) {
      const c = st.changes(GLUE_TABLE);
      if (c) out.push(c);
    }
    return out;
  }

  /** Both families' tables: the same objects while their shape (the firewalls) stays. */
  tables(): DesiredNftTable[] {
    return FAMS.map((f) => {
      const g = this.families[f];
      g.table ??= glueTable(f, this.ctx, [...g.firewalls.values()], [...g.sets.values()].map((s) => s.set));
      return g.table;
    });
  }

  private family(family: Fam): GlueFamily {
    const F = FIELDS[family];
    const mine = (c: string) => fam(c.split('/')[0]!) === family;
    const svcKey = [F.addr, 'inet_proto', 'inet_service'] as const;
    const fixed: Record<string, SetElement[]> = {
      'cluster-cidrs': uniqText(this.ctx.clusterCIDRs.filter(mine).map((c) => ({ key: [c] }))),
      'service-protocols': [{ key: ['tcp'] }, { key: ['udp'] }, { key: ['sctp'] }],
      ...(this.ctx.serviceCidrs ? { 'service-cidrs': uniqText(this.ctx.serviceCidrs.filter(mine).map((c) => ({ key: [c] }))) } : {}),
    };
    const decl = (name: string): Omit<DesiredSet, 'elements'> => {
      switch (name) {
        case 'vips':
          return { name, key: [F.addr] };
        case 'nodeports':
          return { name, key: ['inet_proto', 'inet_service'] };
        case 'cluster-cidrs':
        case 'service-cidrs':
          return { name, key: [F.addr], interval: true };
        case 'hairpin':
          return { name, key: [...svcKey, F.addr] };
        case 'service-protocols':
          return { name, key: ['inet_proto'] };
        case 'firewall':
          return { name, key: [...svcKey], map: 'verdict' };
        default:
          return { name, key: [...svcKey] };
      }
    };
    const sets = new Map<string, ElementStore>();
    for (const name of SETS) {
      if (name === 'service-cidrs' && !this.ctx.serviceCidrs) continue;
      const d = decl(name);
      sets.set(name, new ElementStore(family, { ...d, elements: [...(fixed[name] ?? [])], ...(d.interval ? {} : { unique: true }) }, KEYED.has(name) ? keyText : undefined));
    }
    return { sets, firewalls: new Map(), table: undefined };
  }
}

type DesiredSet = DesiredNftTable['sets'][number];

/** The glue tables for a GlueSpec (each frontend's record once, the first, as one service owns
 *  a frontend): always both families, so stale ones are emptied, not left. */
export function glueTables(g: GlueSpec, opts: GlueOptions = {}): DesiredNftTable[] {
  const t = new GlueTables({ clusterCIDRs: g.clusterCIDRs, masqueradeAll: g.masqueradeAll, ...opts });
  const once = <T>(xs: readonly T[], key: (x: T) => string) => [...new Map(xs.map((x) => [key(x), x])).values()];
  for (const v of once(g.vips, (v) => `${v.address} ${v.protocol} ${v.port}`)) t.put(fam(v.address), vipElements(v));
  for (const n of once(g.nodePorts, (n) => `${n.family} ${n.protocol} ${n.port}`)) t.put(n.family === 'inet' ? 'ip' : 'ip6', nodePortElements(n));
  for (const h of g.hairpin) t.putHairpin(h);
  for (const r of once(g.sourceRanges, (r) => `${r.address} ${r.protocol} ${r.port}`)) t.putSourceRange(r);
  return t.tables();
}

/** A family's glue table: its chains and rules (a chain per source-range firewall), with these sets. */
function glueTable(family: Fam, ctx: GlueContext, firewalls: readonly GlueSourceRange[], sets: DesiredSet[]): DesiredNftTable {
  const F = FIELDS[family];
  const clusterCidrs = ctx.clusterCIDRs.some((c) => fam(c.split('/')[0]!) === family);
  const { chains, rules } = natBase();
  chains.push({ name: 'input', hook: { type: 'filter', hook: 'input', priority: 0, policy: 'accept' } }, { name: 'services' });
  const add = (chain: string, ...parts: Array<Expr | Expr[]>) => rules.push({ chain, exprs: R.rule(...parts) });
  const mark = R.setMarkBits(MASQ_MARK);
  const svcFields = [F.daddr, R.F.l4proto, R.F.thDport];

  if (ctx.masqueradeAll) add('services', R.inSet(svcFields, 'cluster-ips'), mark);
  else if (clusterCidrs) add('services', R.inSet(svcFields, 'cluster-ips'), R.inSet([F.saddr], 'cluster-cidrs', { invert: true }), mark);
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
  if (ctx.serviceCidrs) add('input', R.ctState('new'), R.inSet([F.daddr], 'service-cidrs'), R.inSet([F.daddr], 'vips', { invert: true }), R.reject(F.reject));

  for (const [chain, r] of firewalls.map((r) => [firewallChain(r.address, r.protocol, r.port), r] as const).sort(([a], [b]) => compareText(a, b))) {
    chains.push({ name: chain });
    for (const cidr of r.cidrs.filter((c: string) => fam(c.split('/')[0]!) === family)) add(chain, R.match(F.saddr, cidr), R.ret());
    if (r.allowFromNode) add(chain, R.match(F.saddr, r.address), R.ret());
    add(chain, R.drop());
  }
  return { family, name: GLUE_TABLE, chains, sets, rules, owned: PROXY_TABLE_OWNED };
}
