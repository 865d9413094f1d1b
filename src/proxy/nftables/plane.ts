// The nftables data plane's state between syncs: every service's frontends and elements, each
// set's elements as one array (the desired table's own, changed in place) with every key's
// place in it, and the tables' shape (endpoint counts, source-range firewalls). A sync of a few
// changed services removes their old elements and adds their new ones: the work and the
// element changes it hands the engine grow with those services, not with the table.
import { elementChanges, type DesiredNftTable } from '../../engine/nft-diff.js';
import { ElementStore, keyText, PackedStore } from '../element-store.js';
import type { NftElementChange } from '../../engine/engine.js';
import type { FlowFilter } from '../../kernel/conntrack.js';
import type { SetElement } from '../../kernel/nftables.js';
import { modelContext, serviceModel, type ModelContext, type ServiceModel } from '../../kube/service-model.js';
import type { ServiceSummary } from '../../kube/types.js';
import { ServiceRegistry, type Made } from '../service-registry.js';
import { fam, type Fam } from '../nft-sets.js';
import type { DataPlane, PlaneSources, PlaneStep } from '../data-plane.js';
import {
  affinityTimeoutSet, blockCount, endpointsMap, FIXED_SETS, hairpinOf, hairpinSet, isFrontendSet, NFT_PROXY_TABLE, proxyTable, serviceParts, setDecl, SHARDS, staticElements,
  type Firewall, type FrontendPart, type ServiceParts, type SetDecl, type TableShape,
} from './table.js';

/** The sets whose keys two services (or two ports of one) can both put: a cluster IP, the
 *  configuration's, keyed by text. Every other set is keyed by a frontend, which one service
 *  owns, with unique endpoints behind it: its keys are unique without checking. */
const SHARED_KEYS: ReadonlySet<string> = new Set(['cluster-addrs', 'service-protocols', 'cluster-cidrs', 'service-cidrs', 'service-shards', 'hairpin-shards']);
const isHairpin = (name: string) => name.startsWith('hairpin-') && name !== 'hairpin-shards';

/** A set's store: its declaration's set with the elements given. The sets that grow with the
 *  endpoints keep bytes: an endpoint map a block per frontend, a hairpin set an element per
 *  endpoint address (keyed by it: two services can both have it). */
function store(family: Fam, decl: SetDecl, elements: readonly SetElement[] = []): Store {
  const keyed = isHairpin(decl.name) || isFrontendSet(decl.name);
  if (keyed || decl.name.startsWith('endpoints-')) return new PackedStore(family, decl, keyed);
  return new ElementStore(family, { ...decl, elements: [...elements], unique: true }, SHARED_KEYS.has(decl.name) ? keyText : undefined);
}
type Store = ElementStore | PackedStore;

/** A hairpin element's bytes, made in place. */
const HAIRPIN = Buffer.alloc(32);

/** What a rebuild or a patch hands the engine, and the conntrack flows to delete once it applied. */
export interface ElementStep {
  /** The element changes since the last step (undefined: there was none: the engine lists). */
  changes: NftElementChange[] | undefined;
  /** Only the changed services were patched (a rebuild compared every one). */
  patched: boolean;
  /** UDP and SCTP flows to an endpoint no longer behind its frontend, and to a frontend that
   *  had no endpoint and has some now (its flows were never translated). */
  staleFlows: FlowFilter[];
}

interface Family {
  family: Fam;
  sets: Map<string, Store>;
  sizes: number[];
  shortCircuitSizes: number[];
  affinityTimeouts: number[];
  firewalls: Map<string, Firewall>;
  table: DesiredNftTable | undefined;
}

const FAMS: readonly Fam[] = ['ip', 'ip6'];

export interface NftablesPlaneOptions {
  /** The IPVS data plane's VIP link: its addresses go in a full step (the link is left, and
   *  not created). */
  vipLink: string;
  /** Whether the kernel has a links handle (none: no VIP addresses to remove). */
  links: boolean;
}

/** A service's model, or what made it unprogrammable. */
export type ModelOrError = ServiceModel | { error: unknown };

export class NftablesPlane implements DataPlane {
  /** No: the step leaves little garbage since the sets that grow with the endpoints are bytes,
   *  and so does the plan (a listing's buffers are released set by set); a collection cost
   *  more than it saved (docs/performance.md). */
  readonly collectsGarbage = false;
  private registry: ServiceRegistry<FrontendPart, ServiceParts> | undefined;
  private families: Record<Fam, Family> | undefined;
  private ctxKey: string | undefined;
  private ctx: ModelContext | undefined;
  /** A patch is under way: a set it makes (a new endpoint count's) records from its start. */
  private recording = false;
  /** Puts a service's parts into the tables, and takes them out. */
  private readonly sink = { put: (p: ServiceParts, owned: readonly FrontendPart[]) => this.put(p, owned), take: (p: ServiceParts, owned: readonly FrontendPart[]) => this.take(p, owned) };

  constructor(private readonly opts: NftablesPlaneOptions = { vipLink: 'kube-ipvs0', links: false }) {}

  /**
   * The changed services patched into the plane's tables (an element change each; the tables'
   * shape changes only with a new endpoint count or a source-range firewall), or, for a full
   * step, every service from nothing (by name, as the IPVS data plane takes them: the first of
   * two claiming a frontend keeps it), compared with the last tables by key (the engine takes
   * those changes while nobody committed since, else lists the kernel's). What the IPVS data
   * plane leaves behind goes in a full step: its VIP addresses and its routes (the tables
   * share the IPVS glue's names, so they are replaced). It reports the services' summary
   * (health checks, policies without local endpoints, warnings), and no IPVS model.
   */
  step(full: boolean, changed: ReadonlySet<string>, src: PlaneSources): PlaneStep {
    const ctx = modelContext(src.node, src.config, src.serviceCIDRs);
    const ctxKey = JSON.stringify([src.node, src.config, src.serviceCIDRs]);
    const modelOf = (name: string): ModelOrError | undefined => {
      const o = src.objectsOf(name);
      if (!o) return undefined;
      try {
        return serviceModel(o.svc, o.slices, ctx, name);
      } catch (error) {
        return { error };
      }
    };
    const step =
      !full && this.canPatch(ctxKey) ? this.patch(changed, modelOf) : this.rebuild(src.names(), (n) => modelOf(n)!, ctx, ctxKey);
    const nft = this.tables();
    const summary = this.summary();
    if (step.patched) return { desired: { services: [], nft }, changes: { services: new Map(), nft: step.changes! }, summary, staleFlows: step.staleFlows };
    const vips = this.opts.links ? { vips: { link: this.opts.vipLink, addresses: [], createLink: false } } : {};
    const changes = step.changes ? { changes: { nft: step.changes } } : {};
    return { desired: { services: [], routes: { routes: [] }, ...vips, nft }, ...changes, summary, staleFlows: step.staleFlows };
  }

  /** A step that failed leaves nothing half-known: the next builds from nothing. */
  applied(clean: boolean): void {
    if (!clean) this.reset();
  }

  /** Whether a step can patch the last one under this context (its JSON). */
  canPatch(ctxKey: string): boolean {
    return this.families !== undefined && this.ctxKey === ctxKey;
  }

  /** Forget everything: the next step builds from nothing (after a sync that failed). */
  reset(): void {
    this.families = undefined;
    this.registry = undefined;
    this.ctxKey = undefined;
  }

  /** Every service from nothing, in the order of `names` (the first of two claiming a frontend
   *  keeps it), each model made when the plane takes it and dropped after (all of them at
   *  once would be a second copy of every endpoint). The endpoint counts of the last tables
   *  stay (their maps and rules are not made and dropped as services scale); the element
   *  changes are the new tables' against the last ones, by key. */
  rebuild(names: readonly string[], modelOf: (name: string) => ModelOrError, ctx: ModelContext, ctxKey: string): ElementStep {
    const last = this.families;
    const lastTables = last && this.tables();
    const before = new Map<string, readonly FrontendPart[]>();
    this.registry?.forEach((name, owned) => before.set(name, owned));
    this.ctx = ctx;
    this.ctxKey = ctxKey;
    const fams = {} as Record<Fam, Family>;
    for (const f of FAMS) {
      const fixed = staticElements(f, ctx);
      const sets = new Map<string, Store>(FIXED_SETS.map((n) => [n, store(f, setDecl(f, n), fixed[n])]));
      const fam: Family = { family: f, sets, sizes: [], shortCircuitSizes: [], affinityTimeouts: [], firewalls: new Map(), table: undefined };
      for (const n of last?.[f].sizes ?? []) this.addSize(fam, n);
      fam.shortCircuitSizes.push(...(last?.[f].shortCircuitSizes ?? []));
      for (const t of last?.[f].affinityTimeouts ?? []) this.addAffinityTimeout(fam, t);
      fams[f] = fam;
    }
    this.families = fams;
    const registry = (this.registry = new ServiceRegistry(this.sink, ctx.warnings));
    registry.build(names, (n) => made(modelOf(n), ctx));
    const staleFlows: FlowFilter[] = [];
    registry.forEach((name, owned) => {
      staleFlows.push(...flowsGone(before.get(name), owned));
      before.delete(name);
    });
    for (const was of before.values()) staleFlows.push(...flowsGone(was, []));
    return { changes: lastTables && elementChanges(lastTables, this.tables()), patched: false, staleFlows };
  }

  /** The changed services (their models now, each made when the plane takes it; undefined:
   *  gone) patched into the last step, with the services whose frontends they contend for
   *  (ServiceRegistry.update). */
  patch(changed: Iterable<string>, modelOf: (name: string) => ModelOrError | undefined): ElementStep {
    const ctx = this.ctx!;
    const stores = () => FAMS.flatMap((f) => [...this.families![f].sets.values()]);
    this.recording = true;
    let readded;
    try {
      for (const st of stores()) st.record();
      readded = this.registry!.update(changed, (n) => {
        const m = modelOf(n);
        return m && made(m, ctx);
      });
    } finally {
      this.recording = false;
    }
    const changes: NftElementChange[] = [];
    for (const st of stores()) {
      const c = st.changes(NFT_PROXY_TABLE);
      if (c) changes.push(c);
    }
    const staleFlows: FlowFilter[] = [];
    for (const r of readded) staleFlows.push(...flowsGone(r.was, r.now));
    return { changes, patched: true, staleFlows };
  }

  /** Whether a stale flow's filter names an endpoint (replySrc, replySport) that serves its
   *  frontend now (a filter without the endpoint's port names none). */
  serves(f: FlowFilter): boolean {
    if (f.replySport === undefined || f.origDst === undefined) return false;
    const fe = this.registry?.owner(`${f.origDst} ${f.proto} ${f.origDport}`);
    return fe?.endpoints?.some(([a, p]) => a === f.replySrc && p === f.replySport) ?? false;
  }

  /** The tables of the last step: the same objects while their shape stays. */
  tables(): DesiredNftTable[] {
    return FAMS.map((f) => {
      const fam = this.families![f];
      // each time: a packed store's set holds its bytes as they are now
      const sets = [...fam.sets.values()].map((s) => s.set);
      fam.table ??= proxyTable(f, shapeOf(fam), this.ctx!, sets);
      return fam.table;
    });
  }

  summary(): ServiceSummary {
    return this.registry!.summary();
  }

  /** A service's cluster IPs, and its owned frontends' elements and endpoints. */
  private put(parts: ServiceParts, owned: readonly FrontendPart[]): void {
    for (const e of parts.clusterAddrs) this.clusterAddrs(e).add(e);
    for (const fe of owned) {
      const fam = this.families![fe.family];
      if (fe.endpointCount && !fam.sets.has(endpointsMap(fe.endpointCount, 0))) this.addSize(fam, fe.endpointCount);
      const m = fe.shortCircuit && blockCount(fam.family, fe.shortCircuit);
      if (m && !fam.sets.has(endpointsMap(m, 0))) this.addSize(fam, m);
      if (m && !fam.shortCircuitSizes.includes(m)) {
        ascending(fam.shortCircuitSizes, m);
        fam.table = undefined;
      }
      if (fe.affinity && !fam.sets.has(affinityTimeoutSet(fe.affinity))) this.addAffinityTimeout(fam, fe.affinity);
      if (fe.firewall) {
        fam.firewalls.set(fe.firewall.chain, fe.firewall);
        fam.table = undefined;
      }
      for (const set of fe.keyed) this.packed(fam, set).put(fe.keyBytes, 0);
      for (let i = 0; i < fe.elements.length; i++) this.elements(fam, fe.sets[i]!).add(fe.elements[i]!);
      if (fe.endpointBlock) this.putBlock(fam, fe.shard, fe.endpointBlock);
      if (fe.shortCircuit) this.putBlock(fam, fe.shard, fe.shortCircuit);
    }
  }

  private take(parts: ServiceParts, owned: readonly FrontendPart[]): void {
    for (const e of parts.clusterAddrs) this.clusterAddrs(e).remove(e);
    for (const fe of owned) {
      const fam = this.families![fe.family];
      for (const set of fe.keyed) this.packed(fam, set).take(fe.keyBytes, 0);
      for (let i = 0; i < fe.elements.length; i++) this.elements(fam, fe.sets[i]!).remove(fe.elements[i]!);
      if (fe.endpointBlock) this.takeBlock(fam, fe.shard, fe.endpointBlock);
      if (fe.shortCircuit) this.takeBlock(fam, fe.shard, fe.shortCircuit);
      if (fe.firewall) {
        fam.firewalls.delete(fe.firewall.chain);
        fam.table = undefined;
      }
    }
  }

  /** A frontend's block of endpoints into its endpoint map, and their hairpin elements (which
   *  derive from the block, not kept: one per endpoint). */
  private putBlock(fam: Family, shard: number, block: Buffer): void {
    const n = blockCount(fam.family, block);
    this.packed(fam, endpointsMap(n, shard)).addBlock(block);
    for (let i = 0; i < n; i++) this.packed(fam, hairpinSet(hairpinOf(fam.family, block, i, HAIRPIN))).put(HAIRPIN, 0);
  }

  private takeBlock(fam: Family, shard: number, block: Buffer): void {
    const n = blockCount(fam.family, block);
    this.packed(fam, endpointsMap(n, shard)).removeBlock(block);
    for (let i = 0; i < n; i++) this.packed(fam, hairpinSet(hairpinOf(fam.family, block, i, HAIRPIN))).take(HAIRPIN, 0);
  }

  /** The family's `cluster-addrs` set of a cluster IP's element. */
  private clusterAddrs(e: SetElement): ElementStore {
    return this.elements(this.families![fam(String(e.key[0]))], 'cluster-addrs');
  }

  /** A set of the family's kept as objects. */
  private elements(fam: Family, set: string): ElementStore {
    return fam.sets.get(set) as ElementStore;
  }

  /** A set of the family's kept as bytes (an endpoint map, a hairpin set). */
  private packed(fam: Family, set: string): PackedStore {
    return fam.sets.get(set) as PackedStore;
  }

  private addSize(fam: Family, n: number): void {
    this.grow(fam, fam.sizes, n, ...Array.from({ length: SHARDS }, (_, s) => endpointsMap(n, s)));
  }

  private addAffinityTimeout(fam: Family, seconds: number): void {
    this.grow(fam, fam.affinityTimeouts, seconds, affinityTimeoutSet(seconds));
  }

  /** A new endpoint count or affinity timeout: its set, and the table's shape changes. */
  private grow(fam: Family, list: number[], n: number, ...sets: string[]): void {
    ascending(list, n);
    for (const set of sets) {
      const st = store(fam.family, setDecl(fam.family, set));
      if (this.recording) st.record();
      fam.sets.set(set, st);
    }
    fam.table = undefined;
  }
}

/** `n` into an ascending list, in its place. */
function ascending(list: number[], n: number): void {
  const at = list.findIndex((x) => x > n);
  if (at < 0) list.push(n);
  else list.splice(at, 0, n);
}

/** A service's model made into its parts (or what failed). */
function made(m: ModelOrError, ctx: ModelContext): Made<ServiceParts> {
  if ('error' in m) return m;
  try {
    return { model: m, parts: serviceParts(m, ctx) };
  } catch (error) {
    return { error };
  }
}

function shapeOf(fam: Family): TableShape {
  return { sizes: fam.sizes, shortCircuitSizes: fam.shortCircuitSizes, affinityTimeouts: fam.affinityTimeouts, firewalls: fam.firewalls };
}

/** No frontend (shared: flowsGone never adds to it). */
const NO_FRONTENDS = new Map<string, FrontendPart>();

/** The flows a frontend's change leaves stale (PlaneStep.staleFlows). TCP's are left alone. */
function flowsGone(was: readonly FrontendPart[] | undefined, now: readonly FrontendPart[]): FlowFilter[] {
  const out: FlowFilter[] = [];
  const to = (fe: FrontendPart, replySrc: string, replySport?: number): FlowFilter => ({
    family: fe.family === 'ip' ? 'inet' : 'inet6', proto: fe.protocol, origDst: fe.address, origDport: fe.port, replySrc, ...(replySport !== undefined ? { replySport } : {}),
  });
  // a service new to the plane, or without UDP or SCTP frontends: one shared empty map
  const udp = was?.filter((fe) => fe.protocol !== 'tcp');
  const before = udp?.length ? new Map(udp.map((fe) => [fe.key, fe])) : NO_FRONTENDS;
  for (const fe of now) {
    if (fe.protocol === 'tcp') continue;
    const b = before.get(fe.key);
    before.delete(fe.key);
    if ((!b || b.endpointCount === 0) && fe.endpointCount > 0) out.push(to(fe, fe.address));
    if (!b) continue;
    const keep = new Set((fe.endpoints ?? []).map(([a, p]) => `${a} ${p}`));
    for (const [a, p] of b.endpoints ?? []) if (!keep.has(`${a} ${p}`)) out.push(to(fe, a, p));
  }
  // frontends gone: every endpoint's
  for (const fe of before.values()) for (const [a, p] of fe.endpoints ?? []) out.push(to(fe, a, p));
  return out;
}
