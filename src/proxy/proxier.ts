// The service proxy: Kubernetes objects in (from informers or manifests, through change
// trackers), kube-proxy IPVS-mode semantics (translate), the engine out. Source-agnostic: the
// caller feeds the handlers and runs syncs (directly or through a SyncRunner).
import type { V1EndpointSlice, V1Node, V1Service, V1ServiceCIDR } from '../kube/api-types.js';
import { Engine, planWrites, type DesiredChanges, type EngineKernel, type Plan, type SyncReport } from '../engine/engine.js';
import type { DesiredService } from '../engine/ipvs-model.js';
import { EndpointSliceTracker, ServiceTracker } from '../kube/change-tracker.js';
import { changedServices } from './ipvs/model-diff.js';
import { TranslateCache, translate, translatePatch, type ServiceObjects } from './ipvs/translate.js';
import { LABEL_TOPOLOGY_ZONE, type NodeInfo, type ProxyConfig, type TranslateInput } from '../kube/types.js';
import { str } from '../kube/fields.js';
import type { GlueSpec, ProxyModel } from './ipvs/types.js';
import { GlueCache, desiredState } from './ipvs/desired.js';
import { NftablesPlane, type ModelOrError, type PlaneStep } from './nftables/plane.js';
import { StaleFlows, type FlowFilter } from '../kernel/conntrack.js';
import { modelContext, serviceCIDRsOf, serviceModel } from '../kube/service-model.js';
import { compareText } from '../util/sorted.js';
import type { NftOp } from '../kernel/nft-model.js';
import type { Verdict } from '../kernel/nft-expr.js';
import { KUBE_IPSET_PREFIX } from './ipvs/kube-ipsets.js';

/** Work per transaction (an op or a set element) when the glue is created from nothing: the
 *  kernel commits a transaction with the daemon's thread off a CPU, so one of ~100k elements
 *  stalls it for the whole commit; pieces bound the stall and the sync takes as long
 *  (docs/performance.md). */
export const GLUE_CREATE_TRANSACTION_UNITS = 8192;

export interface ProxierOptions {
  /** The data plane: 'ipvs' (default; IPVS, VIPs on vipLink, the nftables glue) or 'nftables'
   *  (one nftables table per family, src/proxy/nftables/; no IPVS, no VIP link). */
  mode?: 'ipvs' | 'nftables';
  node: NodeInfo;
  config: ProxyConfig;
  vipLink?: string;
  glue?: boolean;
  /** Maintain kube-proxy's ipsets too (the engine then owns sets named KUBE-*). */
  kubeIpsets?: boolean;
  excludeCidrs?: string[];
  drainTimeoutMs?: number;
  /** 'address' (default, kube-proxy) or 'route' (local routes over the service CIDRs). */
  bindMode?: 'address' | 'route';
  /**
   * Called in a full sync before the engine diffs (the translation and the desired state
   * built) and before it applies (the plan built): a garbage collection at those two points
   * lowers the sync's peak heap, its garbage gone before the next phase allocates. The sync
   * thread collects its heap there (`memoryPressure('critical')`: a lower peak, the sync no
   * slower; docs/performance.md); in process each collection would hold the event loop. Not called in an incremental sync.
   * The nftables data plane calls it once, when it built its tables from nothing (before the
   * diff).
   */
  collectGarbage?: () => void;
}

export interface ProxySyncResult {
  model: ProxyModel;
  report: SyncReport;
  /** Service and endpoint changes taken into this sync. */
  serviceChanges: number;
  endpointChanges: number;
  /** When each endpoint change taken into this sync was triggered (ms since the epoch; the
   *  network programming latency is measured from these). */
  triggerTimes: number[];
}

/** Changes received and not yet taken by a sync: services whose Service, or endpoints, differ
 *  from what the last sync took (ServiceTracker / EndpointSliceTracker pendingCount). */
export interface PendingChanges {
  services: number;
  endpoints: number;
}

export { nodeAddresses } from './node-addresses.js';

export class Proxier {
  readonly services = new ServiceTracker();
  readonly slices = new EndpointSliceTracker();
  readonly engine: Engine;
  /** Per-service translations: a sync translates only the services that changed. */
  private readonly translations = new TranslateCache();
  /** The glue tables last built: reused, or patched when only hairpin changed. */
  private readonly glueCache = new GlueCache();
  private last: ProxyModel | undefined;
  /** The last plan changed the glue tables in place (GlueCache path 'patched') and was not
   *  applied since: the engine's last tables, the same objects, are ahead of the kernel. */
  private tablesUnapplied = false;
  /** The nftables data plane's services and tables between syncs. */
  private readonly plane = new NftablesPlane();
  /** nftables mode: flows left stale and not deleted yet. */
  private readonly staleFlows = new StaleFlows();
  private readonly vipLink: string;
  private readonly glue: boolean;
  /** This node; its zone from ProxierOptions.node, else from its Node object (onNode). */
  node: NodeInfo;
  /** The ServiceCIDR objects' CIDRs, by object name. */
  private readonly serviceCIDRObjects = new Map<string, string[]>();

  constructor(
    private readonly kernel: EngineKernel,
    private readonly opts: ProxierOptions,
  ) {
    this.vipLink = opts.vipLink ?? 'kube-ipvs0';
    this.glue = opts.glue ?? true;
    this.node = opts.node;
    // The virtual servers the proxy owns are those the engine recorded when it made them (its
    // ClusterIPs, NodePorts on the node's addresses, …): no address range is claimed, so a
    // service someone else runs on a node address or a VIP, on any port, is never touched.
    // excludeCIDRs (kube-proxy's): never touched even when recorded.
    this.engine = new Engine(kernel, {
      excludeCidrs: opts.excludeCidrs ?? [],
      // plan() builds a fresh desired state every sync and never changes it afterwards
      desiredImmutable: true,
      // A node's first sync creates the glue (~100k elements at 10k services): in pieces, the
      // rules last (see the option), so no single commit holds a CPU for the whole load.
      createNftInTransactionsOf: GLUE_CREATE_TRANSACTION_UNITS,
      ...(opts.kubeIpsets ? { ipsetPrefix: KUBE_IPSET_PREFIX } : {}),
      ...(opts.drainTimeoutMs !== undefined ? { drainTimeoutMs: opts.drainTimeoutMs } : {}),
    });
  }

  // ---- handlers (KubeHandlers-compatible) ----
  onServiceUpdate(s: V1Service): void {
    this.services.update(s);
  }
  onServiceDelete(key: string): void {
    this.services.delete(key);
  }
  onSliceUpdate(s: V1EndpointSlice): void {
    this.slices.update(s);
  }
  onSliceDelete(key: string): void {
    this.slices.delete(key);
  }
  /** This node's Node object (another node's is ignored): the zone its label names, unless
   *  the options gave one. True when the zone changed: the next sync translates every service. */
  onNode(n: V1Node): boolean {
    return str(n, 'metadata', 'name') === this.node.name && this.setZone(str(n, 'metadata', 'labels', LABEL_TOPOLOGY_ZONE));
  }
  onNodeDelete(name: string): boolean {
    return name === this.node.name && this.setZone(undefined);
  }
  private setZone(label: string | undefined): boolean {
    const zone = this.opts.node.zone ?? (label || undefined);
    if (zone === this.node.zone) return false;
    this.node = { ...this.node, zone };
    return true;
  }

  /** A ServiceCIDR object (networking.k8s.io/v1): the cluster's service CIDRs are those of
   *  all of them, over the configuration's. True when they changed: the next sync rebuilds. */
  onServiceCIDR(o: V1ServiceCIDR): boolean {
    const name = str(o, 'metadata', 'name') ?? '';
    const before = JSON.stringify(this.serviceCIDRs());
    this.serviceCIDRObjects.set(name, serviceCIDRsOf(o));
    return JSON.stringify(this.serviceCIDRs()) !== before;
  }
  onServiceCIDRDelete(name: string): boolean {
    const before = JSON.stringify(this.serviceCIDRs());
    this.serviceCIDRObjects.delete(name);
    return JSON.stringify(this.serviceCIDRs()) !== before;
  }
  /** The ServiceCIDR objects' CIDRs, sorted, once each; undefined when there is none (the
   *  API serves none: the configuration's apply). */
  private serviceCIDRs(): string[] | undefined {
    if (this.serviceCIDRObjects.size === 0) return undefined;
    return [...new Set([...this.serviceCIDRObjects.values()].flat())].sort(compareText);
  }

  /** Changes received since the last sync took them. */
  get pendingChanges(): PendingChanges {
    return { services: this.services.pendingCount, endpoints: this.slices.pendingCount };
  }

  /** The model for the current objects, translated from scratch (pure: the syncs' cache, whose
   *  last model the next sync patches in place, is left alone). */
  model(): ProxyModel {
    return translate(this.translateInput());
  }

  /** A service's Service and EndpointSlices as the trackers hold them (undefined: no Service). */
  private objectsOf(name: string): ServiceObjects {
    const svc = this.services.get(name);
    return svc && { svc, slices: this.slices.members(name) };
  }

  private translateInput(): TranslateInput {
    return { services: this.services.list(), endpointSlices: this.slices.list(), node: this.node, config: this.opts.config };
  }

  /**
   * Plans a sync. `full`: compare every IPVS service (one dump); otherwise only the services
   * whose virtual servers changed since the last sync (one GET each).
   */
  async plan(full: boolean): Promise<{ plan: Plan; model: ProxyModel; serviceChanges: number; endpointChanges: number; triggerTimes: number[] }> {
    if (this.opts.mode === 'nftables') return this.planNftables(full);
    if (this.tablesUnapplied) this.engine.forgetNftTables();
    const serviceChanged = this.services.drain();
    const endpointsChanged = this.slices.drain();
    const triggerTimes = this.slices.lastTriggerTimes;
    // The cache already misses on replaced objects; this also covers an object changed in place.
    const changedNames = new Set([...serviceChanged, ...endpointsChanged]);
    this.translations.invalidate(changedNames);
    const serviceChanges = serviceChanged.size;
    const endpointChanges = endpointsChanged.size;
    // Only the changed services (the last model patched), when that can be done; otherwise all
    // of them.
    const model =
      translatePatch(this.translations, changedNames, (name) => this.objectsOf(name), this.services.size, this.node, this.opts.config) ??
      translate(this.translateInput(), this.translations);
    // A model patched from the last one applied names what it changed; otherwise compare.
    const patched = this.translations.patched;
    const last = this.last;
    // Its lists are the patched model's (changed in place): a base again once this applies.
    if (patched) this.last = undefined;
    const fromLast = patched && patched.from === last ? patched : undefined;
    const desired = desiredState(model, {
      vipLink: this.vipLink,
      glue: this.glue,
      kubeIpsets: !!this.opts.kubeIpsets,
      bindMode: this.opts.bindMode ?? 'address',
      serviceCidrs: this.serviceCIDRs() ?? this.opts.config.serviceCIDRs ?? [],
    }, this.glueCache, patched);
    let changes: DesiredChanges | undefined;
    if (!full && last) {
      const services = fromLast ? fromLast.services : changedServices(last.services, model.services);
      // the glue's element changes, when they are from the tables of the last sync (which
      // applied cleanly)
      const nft = this.glue && this.glueCache.from === last.glue ? this.glueCache.changes : undefined;
      changes = nft ? { services, nft } : { services };
    }
    // Tables changed in place are known to the engine only through the changes a plan names.
    this.tablesUnapplied = this.glueCache.path === 'patched';
    if (this.tablesUnapplied && !changes?.nft) this.engine.forgetNftTables();
    if (changes === undefined) this.opts.collectGarbage?.();
    const plan = await this.engine.plan(desired, changes);
    return { plan, model, serviceChanges, endpointChanges, triggerTimes };
  }

  /**
   * The nftables data plane's plan: the changed services patched into the plane's tables (an
   * element change each; the tables' shape changes only with a new endpoint count or a
   * source-range firewall), or, for a full sync, every service from nothing compared with the
   * last tables (or the kernel's, when anyone committed since). What the IPVS data plane
   * leaves behind goes in a full sync: the virtual servers it recorded (when there is an IPVS
   * handle), its VIP addresses and its routes; the tables share the IPVS glue's names, so
   * they are replaced. The model it reports has the semantics' parts (health checks, policies
   * without local endpoints, warnings) and no IPVS ones.
   */
  private async planNftables(full: boolean): Promise<{ plan: Plan; model: ProxyModel; serviceChanges: number; endpointChanges: number; triggerTimes: number[]; staleFlows: FlowFilter[] }> {
    const serviceChanged = this.services.drain();
    const endpointsChanged = this.slices.drain();
    const triggerTimes = this.slices.lastTriggerTimes;
    const serviceCIDRs = this.serviceCIDRs();
    const ctx = modelContext(this.node, this.opts.config, serviceCIDRs);
    const ctxKey = JSON.stringify([this.node, this.opts.config, serviceCIDRs]);
    const modelOf = (name: string): ModelOrError | undefined => {
      const s = this.services.get(name);
      if (!s) return undefined;
      try {
        return serviceModel(s, this.slices.members(name), ctx);
      } catch (error) {
        return { error };
      }
    };
    let step: PlaneStep | undefined;
    if (!full && this.plane.canPatch(ctxKey)) {
      const names = [...new Set([...serviceChanged, ...endpointsChanged])].sort(compareText);
      step = this.plane.patch(names.map((n) => [n, modelOf(n)] as const));
    }
    // By name, as the IPVS data plane merges them: the first of two claiming a frontend keeps it.
    step ??= this.plane.rebuild([...this.services.keys()].sort(compareText), (n) => modelOf(n)!, ctx, ctxKey);
    // Built from nothing: the rebuild's garbage goes before the diff and the commit allocate.
    if (!step.changes) this.opts.collectGarbage?.();
    const nft = this.plane.tables();
    let plan: Plan;
    if (step.changes) plan = await this.engine.plan({ services: [], nft }, { services: new Map(), nft: step.changes });
    else {
      // The IPVS data plane's VIP addresses go from its link, which is left (and not created).
      const vips = this.kernel.links ? { vips: { link: this.vipLink, addresses: [], createLink: false } } : {};
      plan = await this.engine.plan({ services: [], routes: { routes: [] }, ...vips, nft });
    }
    const model: ProxyModel = { services: [], vips: [], glue: emptyGlue(), ...this.plane.summary() };
    return { plan, model, serviceChanges: serviceChanged.size, endpointChanges: endpointsChanged.size, triggerTimes, staleFlows: step.staleFlows };
  }

  /** Plans and applies; remembers the model as the base of the next incremental sync. */
  async sync(full: boolean): Promise<ProxySyncResult> {
    if (this.opts.mode === 'nftables') return this.syncNftables(full);
    const { plan, model, serviceChanges, endpointChanges, triggerTimes } = await this.plan(full);
    if (plan.mode === 'full') this.opts.collectGarbage?.();
    const report = await this.engine.apply(plan);
    this.tablesUnapplied = false;
    // Only a clean sync is a base for incremental ones; otherwise the next sync is full.
    this.last = report.errors.length ? undefined : model;
    return { model, report, serviceChanges, endpointChanges, triggerTimes };
  }

  /** The nftables data plane's sync: a sync that failed, or threw, leaves the plane and the
   *  engine knowing nothing (the plane's tables changed in place for it), so the next one
   *  builds from nothing and lists the kernel. Once applied, the flows it left stale go —
   *  and those of earlier syncs whose delete failed or that never got that far (a rebuild after
   *  a failure no longer sees those endpoints go), unless their endpoint serves again. */
  private async syncNftables(full: boolean): Promise<ProxySyncResult> {
    try {
      const { plan, model, serviceChanges, endpointChanges, triggerTimes, staleFlows } = await this.planNftables(full);
      this.staleFlows.add(staleFlows);
      const report = await this.engine.apply(plan);
      if (report.errors.length) this.forgetNftables();
      else if (this.kernel.conntrack && this.staleFlows.size) report.flowsFlushed = await this.staleFlows.flush(this.kernel.conntrack, report.errors, (f) => this.plane.serves(f));
      return { model, report, serviceChanges, endpointChanges, triggerTimes };
    } catch (e) {
      this.forgetNftables();
      throw e;
    }
  }

  private forgetNftables(): void {
    this.plane.reset();
    this.engine.forgetNftTables();
  }
}

/** No glue: the nftables data plane's model has none. */
function emptyGlue(): GlueSpec {
  return { clusterCIDRs: [], masqueradeAll: false, vips: [], nodePorts: [], nodePortAddresses: [], sourceRanges: [], hairpin: [], localTrafficServices: [], healthCheckNodePorts: [] };
}

/** The first line of `--dry-run`'s text: what the lines after it are. */
export const PLAN_SUMMARY_HEADER = '# the writes a sync would make, one per line: a summary (not nft, ipvsadm or ip input; --json has every field)';

/** One line per kernel write, for `--dry-run`: its kind, verb and object, and what identifies it
 *  (a base chain's hook, a set's key, a map's value, elements with their values, a rule's size). */
export function describePlan(plan: Plan): string[] {
  return planWrites(plan).map((w) => {
    switch (w.kind) {
      case 'ipvs': {
        const o = w.op;
        const svc = 'service' in o && o.service ? svcText(o.service) : '';
        const dest = 'dest' in o ? ` -> ${o.dest.address}:${o.dest.port}${'weight' in o.dest && o.dest.weight !== undefined ? ` weight ${o.dest.weight}` : ''}` : '';
        return `ipvs: ${o.op} ${svc}${dest}`.trimEnd();
      }
      case 'route': {
        const o = w.op;
        return `route: ${o.op} ${o.type ? `${o.type} ` : ''}${o.dst}${o.dev ? ` dev ${o.dev}` : ''} table ${o.table ?? 'main'} proto ${o.protocol ?? 'any'}`;
      }
      case 'link':
        return `link: ${w.op.op} ${'address' in w.op ? `${w.op.address} dev ${w.op.link ?? w.op.index}` : 'name' in w.op ? w.op.name : ''}`.trimEnd();
      case 'ipset':
        return `ipset: ${w.op.op} ${w.op.name}${'members' in w.op ? ` (${w.op.members.length} members)` : ''}`;
      case 'nft':
        return `nftables: ${nftText(w.op)}`;
    }
  });
}

function nftText(o: NftOp): string {
  switch (o.kind) {
    case 'table':
      return `${o.verb} table ${o.table.family} ${o.table.name}`;
    case 'chain': {
      const h = o.chain.hook;
      return `${o.verb} chain ${o.chain.family} ${o.chain.table}/${o.chain.name}${h ? ` (type ${h.type} hook ${h.hook} priority ${h.priority}${h.policy ? ` policy ${h.policy}` : ''})` : ''}`;
    }
    case 'set': {
      const s = o.set;
      const value = s.map === undefined ? '' : ` : ${Array.isArray(s.map) ? s.map.join(' . ') : s.map}`;
      const flags = [s.interval && 'interval', s.dynamic && 'dynamic', (s.timeout || s.timeoutFlag) && 'timeout'].filter(Boolean);
      return `${o.verb} ${s.map ? 'map' : 'set'} ${s.family} ${s.table}/${s.name} (key ${s.key.join(' . ')}${value}${flags.length ? `, ${flags.join(', ')}` : ''})`;
    }
    case 'elements': {
      const el = o.elements.map((e) => {
        const data = e.data === undefined ? (e.verdict ? ` : ${verdictText(e.verdict)}` : '') : ` : ${Array.isArray(e.data) ? e.data.join(' . ') : e.data}`;
        return `${e.key.join(' . ')}${data}`;
      });
      return `${o.verb} ${o.elements.length} element(s) of ${o.set.family} ${o.set.table}/${o.set.name}: ${el.join(', ')}`;
    }
    case 'rule':
      return `${o.verb} rule in ${o.rule.family} ${o.rule.table}/${o.rule.chain} (${o.rule.exprs.length} expressions${o.rule.comment ? `, comment ${JSON.stringify(o.rule.comment)}` : ''})`;
  }
}

function verdictText(v: Verdict): string {
  return v.chain ? `${v.code} ${v.chain}` : v.code;
}

function svcText(s: Partial<DesiredService> & { fwmark?: number }): string {
  if (s.fwmark !== undefined) return `fwmark ${s.fwmark}`;
  const a = s as { protocol: string; address: string; port: number };
  return `${a.protocol.toUpperCase()} ${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`;
}
