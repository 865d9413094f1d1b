// The nftables data plane's state between syncs: every service's frontends and elements, each
// set's elements as one array (the desired table's own, changed in place) with every key's
// place in it, and the tables' shape (endpoint counts, source-range firewalls). A sync of a few
// changed services removes their old elements and adds their new ones: the work and the
// element changes it hands the engine grow with those services, not with the table.
import { elementChanges, type DesiredNftTable } from '../../engine/nft-diff.js';
import { ElementStore, keyText } from '../element-store.js';
import type { NftElementChange } from '../../engine/engine.js';
import type { FlowFilter } from '../../kernel/conntrack.js';
import { compareText } from '../../util/sorted.js';
import type { SetElement } from '../../kernel/nftables.js';
import { localWithoutEndpoints, modelContext, notProgrammed, serviceModel, type ModelContext, type ServiceModel } from '../../kube/service-model.js';
import type { HealthCheck, ModelWarning, ServiceSummary } from '../../kube/types.js';
import type { Fam } from '../nft-sets.js';
import type { DataPlane, PlaneSources, PlaneStep } from '../data-plane.js';
import {
  addressShard, affinityTimeoutSet, endpointsMap, FIXED_SETS, hairpinElement, hairpinSet, NFT_PROXY_TABLE, proxyTable, serviceParts, setDecl, SHARDS, staticElements,
  type Firewall, type FrontendPart, type ServiceElement, type SetDecl, type TableShape,
} from './table.js';

/** The sets whose keys two services (or two ports of one) can both put: a hairpin endpoint, a
 *  cluster IP, the configuration's, keyed by text (a hairpin element's is its address: both
 *  parts are, no new text for ~100k of them at 10k services × 10). Every other set is keyed by
 *  a frontend, which one service owns, with unique endpoints behind it: its keys are unique
 *  without checking. */
const SHARED_KEYS: ReadonlySet<string> = new Set(['cluster-addrs', 'service-protocols', 'cluster-cidrs', 'service-cidrs', 'service-shards', 'hairpin-shards']);
const isHairpin = (name: string) => name.startsWith('hairpin-') && name !== 'hairpin-shards';
const byAddress = (e: SetElement) => e.key[0] as string;

/** A set's store: its declaration's set with the elements given. */
function store(family: Fam, decl: SetDecl, elements: readonly SetElement[] = []): ElementStore {
  const keyOf = isHairpin(decl.name) ? byAddress : SHARED_KEYS.has(decl.name) ? keyText : undefined;
  return new ElementStore(family, { ...decl, elements: [...elements], unique: true }, keyOf);
}

/** A service as the plane took it. */
interface ServiceState {
  /** The frontends it owns, with their elements. */
  readonly owned: readonly FrontendPart[];
  /** Keys of frontends it wanted that another service owns. */
  readonly lost: readonly string[];
  readonly clusterAddrs: readonly ServiceElement[];
  readonly warnings: readonly string[];
  readonly healthCheck: HealthCheck | undefined;
  readonly noLocal: { readonly internal: number; readonly external: number };
}

const NONE: readonly never[] = Object.freeze([]);
const NO_LOCAL_NONE = Object.freeze({ internal: 0, external: 0 });
/** An array as long as its elements (one built by pushing keeps room for 17). */
const exact = <T>(a: T[]): readonly T[] => (a.length ? a.slice() : NONE);

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

/** A service's model, or what made it unprogrammable. */
export type ModelOrError = ServiceModel | { error: unknown };

interface Family {
  family: Fam;
  sets: Map<string, ElementStore>;
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

export class NftablesPlane implements DataPlane {
  /** Once, when the tables were built from nothing, before the diff: the plan leaves little
   *  garbage (a listing's buffers are released set by set). */
  readonly collectBeforeApply = false;
  private services = new Map<string, ServiceState>();
  /** The services with a health check, a Local policy without local endpoints or a warning:
   *  what the summary lists (few, so a sync does not walk every service). */
  private notable = new Map<string, ServiceState>();
  private owners = new Map<string, { service: string; portName: string }>();
  /** Frontend keys other services wanted too, and which. */
  private wanted = new Map<string, Set<string>>();
  private families: Record<Fam, Family> | undefined;
  private ctxKey: string | undefined;
  private ctx: ModelContext | undefined;
  /** A patch is under way: a set it makes (a new endpoint count's) records from its start. */
  private recording = false;

  constructor(private readonly opts: NftablesPlaneOptions = { vipLink: 'kube-ipvs0', links: false }) {}

  /**
   * The changed services patched into the plane's tables (an element change each; the tables'
   * shape changes only with a new endpoint count or a source-range firewall), or, for a full
   * step, every service from nothing (by name, as the IPVS data plane merges them: the first of
   * two claiming a frontend keeps it), compared with the last tables by key (the engine takes
   * those changes while nobody committed since, else lists the kernel's). What the IPVS data
   * plane leaves behind goes in a
   * full step: its VIP addresses and its routes (the tables share the IPVS glue's names, so
   * they are replaced). It reports the services' summary (health checks, policies without
   * local endpoints, warnings), and no IPVS model.
   */
  step(full: boolean, changed: ReadonlySet<string>, src: PlaneSources): PlaneStep {
    const ctx = modelContext(src.node, src.config, src.serviceCIDRs);
    const ctxKey = JSON.stringify([src.node, src.config, src.serviceCIDRs]);
    const modelOf = (name: string): ModelOrError | undefined => {
      const o = src.objectsOf(name);
      if (!o) return undefined;
      try {
        return serviceModel(o.svc, o.slices, ctx);
      } catch (error) {
        return { error };
      }
    };
    let step: ElementStep | undefined;
    if (!full && this.canPatch(ctxKey)) step = this.patch([...changed].sort(compareText).map((n) => [n, modelOf(n)] as const));
    step ??= this.rebuild(src.names(), (n) => modelOf(n)!, ctx, ctxKey);
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
    this.services = new Map();
    this.notable = new Map();
    this.owners = new Map();
    this.wanted = new Map();
    this.ctxKey = undefined;
  }

  /** Every service from nothing, in the order of `names` (the first of two claiming a frontend
   *  keeps it), each model made when the plane takes it and dropped after (all of them at
   *  once would be a second copy of every endpoint). The endpoint counts of the last tables
   *  stay, in their order, so their rules do not move; the element changes are the new
   *  tables' against the last ones, by key. */
  rebuild(names: readonly string[], modelOf: (name: string) => ModelOrError, ctx: ModelContext, ctxKey: string): ElementStep {
    const before = this.services;
    const last = this.families;
    const lastTables = last && this.tables();
    this.services = new Map();
    this.notable = new Map();
    this.owners = new Map();
    this.wanted = new Map();
    this.ctx = ctx;
    this.ctxKey = ctxKey;
    const fams = {} as Record<Fam, Family>;
    for (const f of FAMS) {
      const fixed = staticElements(f, ctx);
      const sets = new Map<string, ElementStore>(FIXED_SETS.map((n) => [n, store(f, setDecl(f, n), fixed[n])]));
      const fam: Family = { family: f, sets, sizes: [], shortCircuitSizes: [], affinityTimeouts: [], firewalls: new Map(), table: undefined };
      for (const n of last?.[f].sizes ?? []) this.addSize(fam, n);
      fam.shortCircuitSizes.push(...(last?.[f].shortCircuitSizes ?? []));
      for (const t of last?.[f].affinityTimeouts ?? []) this.addAffinityTimeout(fam, t);
      fams[f] = fam;
    }
    this.families = fams;
    for (const name of names) this.add(name, modelOf(name));
    const staleFlows: FlowFilter[] = [];
    for (const name of new Set([...before.keys(), ...this.services.keys()])) staleFlows.push(...flowsGone(before.get(name)?.owned, this.services.get(name)?.owned ?? []));
    return { changes: lastTables && elementChanges(lastTables, this.tables()), patched: false, staleFlows };
  }

  /**
   * The changed services (their models now; undefined: gone) patched into the last step.
   * Undefined — nothing changed, rebuild instead — when a frontend changes hands: one of these
   * services gives up a frontend another wanted, or takes one from a service after it by name.
   */
  patch(changed: ReadonlyArray<readonly [string, ModelOrError | undefined]>): ElementStep | undefined {
    const ctx = this.ctx!;
    const names = new Set(changed.map(([n]) => n));
    const claims = new Map<string, string>();
    const parts = new Map<string, ReturnType<typeof serviceParts> | undefined>();
    for (const [name, m] of changed) {
      for (const fe of this.services.get(name)?.owned ?? []) if ([...(this.wanted.get(fe.key) ?? [])].some((w) => !names.has(w))) return undefined;
      const p = m && !('error' in m) ? partsOf(m, ctx) : undefined;
      if (p && 'error' in p) {
        parts.set(name, undefined);
        continue;
      }
      parts.set(name, p);
      for (const fe of p?.frontends ?? []) {
        if (claims.has(fe.key)) return undefined;
        claims.set(fe.key, name);
        const owner = this.owners.get(fe.key)?.service;
        if (owner !== undefined && !names.has(owner) && owner > name) return undefined;
      }
    }
    const before = new Map(changed.map(([n]) => [n, this.services.get(n)?.owned]));
    const stores = () => FAMS.flatMap((f) => [...this.families![f].sets.values()]);
    this.recording = true;
    try {
      for (const st of stores()) st.record();
      for (const [name] of changed) this.remove(name);
      for (const [name, m] of changed) if (m) this.add(name, m, parts.get(name));
    } finally {
      this.recording = false;
    }
    const changes: NftElementChange[] = [];
    for (const st of stores()) {
      const c = st.changes(NFT_PROXY_TABLE);
      if (c) changes.push(c);
    }
    const staleFlows: FlowFilter[] = [];
    for (const [name, was] of before) staleFlows.push(...flowsGone(was, this.services.get(name)?.owned ?? []));
    return { changes, patched: true, staleFlows };
  }

  /** Whether a stale flow's filter names an endpoint (replySrc, replySport) that serves its
   *  frontend now (a filter without the endpoint's port names none). */
  serves(f: FlowFilter): boolean {
    if (f.replySport === undefined || f.origDst === undefined) return false;
    const owner = this.owners.get(`${f.origDst} ${f.proto} ${f.origDport}`);
    const fe = owner && this.services.get(owner.service)?.owned.find((p) => p.address === f.origDst && p.protocol === f.proto && p.port === f.origDport);
    return fe?.endpoints?.some(([a, p]) => a === f.replySrc && p === f.replySport) ?? false;
  }

  /** The tables of the last step: the same objects while their shape stays. */
  tables(): DesiredNftTable[] {
    return FAMS.map((f) => {
      const fam = this.families![f];
      fam.table ??= proxyTable(f, shapeOf(fam), this.ctx!, [...fam.sets.values()].map((s) => s.set));
      return fam.table;
    });
  }

  summary(): ServiceSummary {
    const healthChecks: HealthCheck[] = [];
    const noLocalEndpoints: string[] = [];
    const total = { internal: 0, external: 0 };
    const warnings: ModelWarning[] = [...this.ctx!.warnings];
    for (const [name, s] of [...this.notable].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (s.healthCheck) healthChecks.push(s.healthCheck);
      if (s.noLocal.internal || s.noLocal.external) noLocalEndpoints.push(name);
      total.internal += s.noLocal.internal;
      total.external += s.noLocal.external;
      for (const message of s.warnings) warnings.push({ service: name, message });
    }
    healthChecks.sort((a, b) => a.nodePort - b.nodePort);
    return { healthChecks, noLocalEndpoints: noLocalEndpoints.sort(), noLocalEndpointsTotal: total, warnings };
  }

  private add(name: string, m: ModelOrError, given?: ReturnType<typeof serviceParts>): void {
    const parts = given ?? ('error' in m ? { error: m.error } : partsOf(m, this.ctx!));
    if ('error' in parts) {
      const s: ServiceState = { owned: NONE, lost: NONE, clusterAddrs: NONE, warnings: [notProgrammed(parts.error)], healthCheck: undefined, noLocal: NO_LOCAL_NONE };
      this.services.set(name, s);
      this.notable.set(name, s);
      return;
    }
    const model = m as ServiceModel;
    const warnings = [...model.warnings];
    let internal = 0;
    let external = 0;
    for (const p of model.ports) {
      const n = localWithoutEndpoints(p);
      if (n.internal) internal++;
      if (n.external) external++;
    }
    for (const e of parts.clusterAddrs) this.put(e.family, e.set, e.element);
    const owned: FrontendPart[] = [];
    const lost: string[] = [];
    for (const fe of parts.frontends) {
      const owner = this.owners.get(fe.key);
      if (owner !== undefined) {
        lost.push(fe.key);
        let w = this.wanted.get(fe.key);
        if (!w) this.wanted.set(fe.key, (w = new Set()));
        w.add(name);
        warnings.push(`${fe.address}:${fe.port}/${fe.protocol} already belongs to ${owner.portName}, ignored`);
        continue;
      }
      this.owners.set(fe.key, { service: name, portName: fe.portName });
      owned.push(fe);
      const fam = this.families![fe.family];
      if (fe.endpointCount && !fam.sets.has(endpointsMap(fe.endpointCount, 0))) this.addSize(fam, fe.endpointCount);
      const m = fe.shortCircuit?.length;
      if (m && !fam.sets.has(endpointsMap(m, 0))) this.addSize(fam, m);
      if (m && !fam.shortCircuitSizes.includes(m)) {
        fam.shortCircuitSizes.push(m);
        fam.table = undefined;
      }
      if (fe.affinity && !fam.sets.has(affinityTimeoutSet(fe.affinity))) this.addAffinityTimeout(fam, fe.affinity);
      if (fe.firewall) {
        fam.firewalls.set(fe.firewall.chain, fe.firewall);
        fam.table = undefined;
      }
      for (let i = 0; i < fe.elements.length; i++) this.put(fe.family, fe.sets[i]!, fe.elements[i]!);
      this.putEndpoints(fe);
    }
    // Kept for every service (10k of them): exact-size arrays, one shared empty one.
    const s: ServiceState = {
      owned: exact(owned),
      lost: exact(lost),
      clusterAddrs: parts.clusterAddrs,
      warnings: exact(warnings),
      healthCheck: model.healthCheck,
      noLocal: internal || external ? { internal, external } : NO_LOCAL_NONE,
    };
    this.services.set(name, s);
    if (s.healthCheck || internal || external || s.warnings.length) this.notable.set(name, s);
  }

  private remove(name: string): void {
    const s = this.services.get(name);
    if (!s) return;
    this.services.delete(name);
    this.notable.delete(name);
    for (const e of s.clusterAddrs) this.take(e.family, e.set, e.element);
    for (const fe of s.owned) {
      this.owners.delete(fe.key);
      for (let i = 0; i < fe.elements.length; i++) this.take(fe.family, fe.sets[i]!, fe.elements[i]!);
      this.takeEndpoints(fe);
      if (fe.firewall) {
        const fam = this.families![fe.family];
        fam.firewalls.delete(fe.firewall.chain);
        fam.table = undefined;
      }
    }
    for (const k of s.lost) {
      const w = this.wanted.get(k);
      w?.delete(name);
      if (w?.size === 0) this.wanted.delete(k);
    }
  }

  private addSize(fam: Family, n: number): void {
    this.grow(fam, fam.sizes, n, ...Array.from({ length: SHARDS }, (_, s) => endpointsMap(n, s)));
  }

  private addAffinityTimeout(fam: Family, seconds: number): void {
    this.grow(fam, fam.affinityTimeouts, seconds, affinityTimeoutSet(seconds));
  }

  /** A new endpoint count or affinity timeout: its set, and the table's shape changes. */
  private grow(fam: Family, list: number[], n: number, ...sets: string[]): void {
    list.push(n);
    for (const set of sets) {
      const st = store(fam.family, setDecl(fam.family, set));
      if (this.recording) st.record();
      fam.sets.set(set, st);
    }
    fam.table = undefined;
  }

  private put(family: Fam, name: string, element: SetElement): void {
    this.families![family].sets.get(name)!.add(element);
  }

  private take(family: Fam, name: string, element: SetElement): void {
    this.families![family].sets.get(name)!.remove(element);
  }

  /** A frontend's endpoint blocks into their maps, and its endpoints into the hairpin set
   *  (derived from the blocks, not kept: one more element per endpoint of every frontend). */
  private putEndpoints(fe: FrontendPart): void {
    for (const block of [fe.endpointElements, fe.shortCircuit]) {
      if (!block?.length) continue;
      const set = this.families![fe.family].sets.get(endpointsMap(block.length, fe.shard))!;
      set.addBlock(block);
      for (const e of block) this.putHairpin(fe.family, hairpinElement(e));
    }
  }

  private takeEndpoints(fe: FrontendPart): void {
    for (const block of [fe.endpointElements, fe.shortCircuit]) {
      if (!block?.length) continue;
      const set = this.families![fe.family].sets.get(endpointsMap(block.length, fe.shard))!;
      set.removeBlock(block);
      for (const e of block) this.takeHairpin(fe.family, hairpinElement(e));
    }
  }

  private putHairpin(family: Fam, e: SetElement): void {
    this.put(family, hairpinSet(addressShard(e.key[0] as string)), e);
  }

  private takeHairpin(family: Fam, e: SetElement): void {
    this.take(family, hairpinSet(addressShard(e.key[0] as string)), e);
  }
}

function partsOf(m: ServiceModel, ctx: ModelContext): ReturnType<typeof serviceParts> | { error: unknown } {
  try {
    return serviceParts(m, ctx);
  } catch (error) {
    return { error };
  }
}

function shapeOf(fam: Family): TableShape {
  return { sizes: fam.sizes, shortCircuitSizes: fam.shortCircuitSizes, affinityTimeouts: fam.affinityTimeouts, firewalls: fam.firewalls };
}

/** The flows a frontend's change leaves stale (PlaneStep.staleFlows). TCP's are left alone. */
function flowsGone(was: readonly FrontendPart[] | undefined, now: readonly FrontendPart[]): FlowFilter[] {
  const out: FlowFilter[] = [];
  const to = (fe: FrontendPart, replySrc: string, replySport?: number): FlowFilter => ({
    family: fe.family === 'ip' ? 'inet' : 'inet6', proto: fe.protocol, origDst: fe.address, origDport: fe.port, replySrc, ...(replySport !== undefined ? { replySport } : {}),
  });
  const before = new Map((was ?? []).filter((fe) => fe.protocol !== 'tcp').map((fe) => [fe.key, fe]));
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
