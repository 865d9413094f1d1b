// The service proxy: Kubernetes objects in (from informers or manifests, through change
// trackers), a data plane (DataPlane: IPVS or nftables) that turns them into the engine's
// desired state, the engine out. Source-agnostic: the caller feeds the handlers and runs syncs
// (directly or through a SyncRunner).
import type { V1EndpointSlice, V1Node, V1Service, V1ServiceCIDR } from '../kube/api-types.js';
import { Engine, planWrites, type EngineKernel, type Plan, type SyncReport } from '../engine/engine.js';
import type { DesiredService } from '../engine/ipvs-model.js';
import { EndpointSliceTracker, ServiceTracker } from '../kube/change-tracker.js';
import { LABEL_TOPOLOGY_ZONE, type ModelWarning, type NodeInfo, type ProxyConfig, type ServiceSummary } from '../kube/types.js';
import { str } from '../kube/fields.js';
import type { ProxyModel } from './ipvs/types.js';
import { IpvsPlane } from './ipvs/plane.js';
import { NftablesPlane } from './nftables/plane.js';
import type { DataPlane, PlaneSources } from './data-plane.js';
import { StaleFlows } from '../kernel/conntrack.js';
import { serviceCIDRsOf } from '../kube/service-model.js';
import { compareText } from '../util/sorted.js';
import { renderOp } from '../kernel/nftables.js';
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
   * Called in a full sync before the engine diffs (the desired state built) and before it
   * applies (the plan built): a garbage collection at those two points lowers the sync's peak
   * heap, its garbage gone before the next phase allocates. The sync thread collects its heap
   * there (`memoryPressure('critical')`: a lower peak, the sync no slower;
   * docs/performance.md); in process each collection would hold the event loop. Not called in
   * an incremental sync, nor by a data plane whose steps leave little garbage
   * (DataPlane.collectsGarbage: the IPVS plane's do).
   */
  collectGarbage?: () => void;
}

export interface ProxySyncResult {
  /** The services' summary: health-check ports, policies without local endpoints, warnings. */
  summary: ServiceSummary;
  /** The IPVS data plane's translation (IPVS mode). */
  model?: ProxyModel;
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
  private readonly plane: DataPlane;
  /** Flows steps left stale and not deleted yet. */
  private readonly staleFlows = new StaleFlows();
  /** The summary of the last step the plane took (ProxySyncResult.summary). */
  private stepped: ServiceSummary | undefined;
  /** This node; its zone from ProxierOptions.node, else from its Node object (onNode). */
  node: NodeInfo;
  /** The ServiceCIDR objects' CIDRs, by object name. */
  private readonly serviceCIDRObjects = new Map<string, string[]>();

  constructor(
    private readonly kernel: EngineKernel,
    private readonly opts: ProxierOptions,
  ) {
    const vipLink = opts.vipLink ?? 'kube-ipvs0';
    this.node = opts.node;
    this.plane =
      opts.mode === 'nftables'
        ? new NftablesPlane({ vipLink, links: !!kernel.links })
        : new IpvsPlane({ vipLink, glue: opts.glue ?? true, kubeIpsets: !!opts.kubeIpsets, bindMode: opts.bindMode ?? 'address' });
    // The virtual servers the proxy owns are those the engine recorded when it made them (its
    // ClusterIPs, NodePorts on the node's addresses, …): no address range is claimed, so a
    // service someone else runs on a node address or a VIP, on any port, is never touched.
    // excludeCIDRs (kube-proxy's): never touched even when recorded.
    this.engine = new Engine(kernel, {
      excludeCidrs: opts.excludeCidrs ?? [],
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

  /** What a plane reads: the trackers' objects, this node, the configuration. */
  private sources(): PlaneSources {
    const services = this.services;
    const slices = this.slices;
    return {
      node: this.node,
      config: this.opts.config,
      serviceCIDRs: this.serviceCIDRs(),
      size: services.size,
      names: () => [...services.keys()].sort(compareText),
      objectsOf: (name) => {
        const svc = services.get(name);
        return svc && { svc, slices: slices.members(name) };
      },
    };
  }

  /**
   * Plans a sync: the data plane's step for the services changed since the last sync took
   * them (full: every service compared, the kernel's objects dumped where they are not known).
   */
  async plan(full: boolean): Promise<{ plan: Plan } & Omit<ProxySyncResult, 'report'>> {
    try {
      return (await this.planStep(full)).planned;
    } finally {
      // planned, never applied: the plane's step is not the engine's base
      this.plane.reset();
    }
  }

  private async planStep(full: boolean) {
    const serviceChanged = this.services.drain();
    const endpointsChanged = this.slices.drain();
    const triggerTimes = this.slices.lastTriggerTimes;
    this.stepped = undefined;
    // (a full step compares every service: the changed ones need no set of their own)
    const step = this.plane.step(full, full ? NONE_CHANGED : new Set([...serviceChanged, ...endpointsChanged]), this.sources());
    this.stepped = step.summary;
    // A full step built from nothing: its garbage goes before the diff allocates.
    if (!step.changes?.services && this.plane.collectsGarbage) this.opts.collectGarbage?.();
    const plan = await this.engine.plan(step.desired, step.changes);
    const model = step.model ? { model: step.model } : {};
    return { planned: { plan, summary: step.summary, ...model, serviceChanges: serviceChanged.size, endpointChanges: endpointsChanged.size, triggerTimes }, staleFlows: step.staleFlows };
  }

  /**
   * Plans and applies. A sync that failed, or threw, leaves the plane and the engine knowing
   * nothing they changed for it: the next one compares everything. Once applied, the flows it
   * left stale go — and those of earlier syncs whose delete failed or that never got that far,
   * unless their endpoint serves again.
   */
  async sync(full: boolean): Promise<ProxySyncResult> {
    try {
      const { planned, staleFlows } = await this.planStep(full);
      const { plan, ...result } = planned;
      this.staleFlows.add(staleFlows);
      if (plan.mode === 'full' && this.plane.collectsGarbage) this.opts.collectGarbage?.();
      const report = await this.engine.apply(plan);
      const clean = !report.errors.length;
      this.plane.applied(clean);
      if (clean && this.kernel.conntrack && this.staleFlows.size) report.flowsFlushed = await this.staleFlows.flush(this.kernel.conntrack, report.errors, (f) => this.plane.serves(f));
      return { ...result, report };
    } catch (e) {
      this.plane.reset();
      throw e;
    }
  }

  /** The warnings of the last step the data plane took (a sync that threw in the engine has
   *  them still: what the model let through that the kernel layer refused may be named). */
  warnings(): ModelWarning[] {
    return this.stepped?.warnings ?? [];
  }
}

const NONE_CHANGED: ReadonlySet<string> = new Set();

/** The first line of `--dry-run`'s text: what the lines after it are. */
export const PLAN_SUMMARY_HEADER = '# the writes a sync would make, one per line: a summary (not nft, ipvsadm or ip input; --json has every field)';

/** One line per kernel write, for `--dry-run`: its kind, verb and object, and what identifies it
 *  (nftables ops as renderOp has them, a rule with its expressions counted). */
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
        return `nftables: ${renderOp(w.op, false)}`;
    }
  });
}

function svcText(s: Partial<DesiredService> & { fwmark?: number }): string {
  if (s.fwmark !== undefined) return `fwmark ${s.fwmark}`;
  const a = s as { protocol: string; address: string; port: number };
  return `${a.protocol.toUpperCase()} ${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`;
}
