// The IPVS data plane behind the proxier's DataPlane seam: every service's parts (parts.ts) in
// the frontend registry, and what its owned frontends put into the engine's desired state —
// the IPVS services, the VIPs on the link (or local routes), the nftables glue and kube-proxy's
// ipsets — kept between steps, so a step of a few changed services takes their old parts out
// and puts their new ones in, and names what changed: the virtual servers by key, the glue's
// elements. Its work grows with those services, not with the table.
import type { DesiredChanges, DesiredState } from '../../engine/engine.js';
import { samePlain, serviceKey, type DesiredService } from '../../engine/ipvs-model.js';
import { elementChanges } from '../../engine/nft-diff.js';
import type { FlowFilter } from '../../kernel/conntrack.js';
import { addressProtoPortKey, compareAddressProtoPort } from '../../kube/address.js';
import { objectKey } from '../../kube/change-tracker.js';
import { groupSlices, modelContext, serviceModel, type ModelContext } from '../../kube/service-model.js';
import type { ServiceSummary, TranslateInput } from '../../kube/types.js';
import { addressKey, anyContains, compareAddress, parseCidr } from '../../net/address.js';
import { compareText, sortByKey } from '../../util/sorted.js';
import type { DataPlane, PlaneSources, PlaneStep } from '../data-plane.js';
import { ServiceRegistry, type Made } from '../service-registry.js';
import { KeyedArray } from '../element-store.js';
import { GlueTables } from './glue.js';
import { kubeProxyIpSets } from './kube-ipsets.js';
import { ipvsParts, type IpvsFrontend, type IpvsParts } from './parts.js';
import { configScheduler } from './scheduler.js';
import type { GlueHairpin, GlueNodePort, GlueSourceRange, GlueSpec, GlueVip, ProxyModel } from './types.js';

/** The link of the local routes. lo, not the VIP link: the kernel's own AnyIP idiom for both
 *  families (`ip route add local CIDR dev lo`), always up and never deleted, so local delivery
 *  does not depend on the dummy link's state (a down or re-created kube-ipvs0 would take routes
 *  on it with it); the routes' protocol, not their link, marks them as ipvsync's. */
export const ROUTE_DEV = 'lo';

export interface IpvsPlaneOptions {
  /** The dummy link holding the VIPs (kube-proxy's kube-ipvs0). */
  vipLink: string;
  /** Program the nftables glue (masquerade, hairpin, source ranges, VIP port filter). */
  glue: boolean;
  /** Also maintain kube-proxy's ipsets (KUBE-CLUSTER-IP …) for iptables rules that use them. */
  kubeIpsets: boolean;
  /** 'address' (kube-proxy): every VIP an address on vipLink. 'route': one local route per
   *  service CIDR (on ROUTE_DEV) instead; VIPs outside them (external and load-balancer IPs)
   *  stay addresses. Either mode removes what the other left behind. */
  bindMode: 'address' | 'route';
}

/** A virtual server's key in the plane's list: its frontend's ("address protocol port"). */
const frontendKey = (vs: DesiredService): string => {
  const { address, protocol, port } = vs as { address: string; protocol: string; port: number };
  return [address, protocol, port].join(' ');
};
/** The plane's list of virtual servers, by frontend key. */
const vsList = () => new KeyedArray<string, DesiredService>([], frontendKey);
/** The VIP addresses to bind, each counted by the frontends binding it (a cluster IP has one
 *  per port). */
const vipList = () => new KeyedArray<string, string>([], (a) => a);

export class IpvsPlane implements DataPlane {
  /** Building every service's parts leaves its garbage behind the plan (docs/performance.md). */
  readonly collectsGarbage = true;
  private registry: ServiceRegistry<IpvsFrontend, IpvsParts> | undefined;
  private ctx: ModelContext | undefined;
  private ctxKey: string | undefined;
  private services = vsList();
  private vips = vipList();
  private glue: GlueTables | undefined;
  /** Route mode: the service CIDRs, whose addresses the local routes bind. */
  private covered: ReturnType<typeof parseCidr>[] = [];
  /** While a step patches: what it did to each virtual server, by key. */
  private touched: Map<string, { was: DesiredService | undefined; now: DesiredService | undefined }> | undefined;
  private readonly sink = { put: (p: IpvsParts, owned: readonly IpvsFrontend[]) => this.put(p, owned), take: (p: IpvsParts, owned: readonly IpvsFrontend[]) => this.take(p, owned) };

  constructor(private readonly opts: IpvsPlaneOptions) {}

  step(full: boolean, changed: ReadonlySet<string>, src: PlaneSources): PlaneStep {
    const ctx = modelContext(src.node, src.config, src.serviceCIDRs);
    const ctxKey = JSON.stringify([src.node, src.config, src.serviceCIDRs]);
    const schedWarnings: ServiceSummary['warnings'] = [];
    const defaultScheduler = configScheduler(src.config, schedWarnings);
    const made = (name: string): Made<IpvsParts> | undefined => {
      const o = src.objectsOf(name);
      if (!o) return undefined;
      try {
        const model = serviceModel(o.svc, o.slices, ctx, name);
        return { model, parts: ipvsParts(o.svc, model, ctx, defaultScheduler) };
      } catch (error) {
        return { error };
      }
    };
    let changes: DesiredChanges | undefined;
    if (this.registry && this.ctxKey === ctxKey && !full) {
      this.touched = new Map();
      this.glue?.record();
      try {
        this.registry.update(changed, made);
      } finally {
        const touched = this.touched;
        this.touched = undefined;
        const services = new Map<string, DesiredService | undefined>();
        for (const { was, now } of touched.values()) if (!(was && now && samePlain(was, now))) services.set(serviceKey((now ?? was)!), now);
        changes = { services, ...(this.glue ? { nft: this.glue.changes() } : {}) };
      }
    } else {
      const last = this.registry && { services: this.services.array, nft: this.glue?.tables() };
      if (this.opts.bindMode === 'route' && !ctx.serviceCIDRs.length) throw new RangeError("bindMode 'route' needs the service CIDRs");
      this.ctx = ctx;
      this.ctxKey = ctxKey;
      this.services = vsList();
      this.vips = vipList();
      this.covered = this.opts.bindMode === 'route' ? ctx.serviceCIDRs.map(parseCidr) : [];
      const serviceCidrs = this.opts.bindMode === 'route' ? { serviceCidrs: ctx.serviceCIDRs } : {};
      this.glue = this.opts.glue ? new GlueTables({ clusterCIDRs: ctx.clusterCIDRs, masqueradeAll: ctx.config.masqueradeAll ?? false, ...serviceCidrs }) : undefined;
      this.registry = new ServiceRegistry(this.sink, [...schedWarnings, ...ctx.warnings]);
      this.registry.build(src.names(), (n) => made(n)!);
      if (last) {
        // what the step changed since the last one (whose state the engine applied cleanly)
        const services = full ? undefined : changedServices(last.services, this.services.array);
        const nft = last.nft && this.glue ? elementChanges(last.nft, this.glue.tables()) : undefined;
        if (services || nft) changes = { ...(services ? { services } : {}), ...(nft ? { nft } : {}) };
      }
    }
    const desired: DesiredState = {
      services: this.services.array,
      vips: { link: this.opts.vipLink, addresses: this.vips.array },
      // Address mode wants no routes: those of an earlier route-mode run go.
      routes: { routes: this.ctx!.serviceCIDRs.filter(() => this.opts.bindMode === 'route').map((dst) => ({ dst, type: 'local' as const, table: 'local' as const, dev: ROUTE_DEV })) },
    };
    if (this.glue) desired.nft = this.glue.tables();
    if (this.opts.kubeIpsets) desired.ipsets = kubeProxyIpSets(this.glueSpec());
    const summary = this.registry!.summary();
    return { desired, ...(changes ? { changes } : {}), summary, model: this.model(false, summary), staleFlows: [] };
  }

  /** A step the engine did not apply cleanly is no base: the next builds from nothing. */
  applied(clean: boolean): void {
    if (!clean) this.reset();
  }

  reset(): void {
    this.registry = undefined;
    this.ctxKey = undefined;
  }

  /** The IPVS reconciler deletes a removed UDP real server's flows itself. */
  serves(_f: FlowFilter): boolean {
    return false;
  }

  /**
   * The plane's model: its virtual servers and VIPs (the lists the engine is given, in no
   * order, until the next step; `sorted`: sorted copies), the glue as plain data (made when
   * read), and the summary.
   */
  model(sorted: boolean, summary = this.registry!.summary()): ProxyModel {
    const plane = this;
    const services = sorted ? sortByKey([...this.services.array], vsKey, (a, b) => compareAddressProtoPort(a as never, b as never)) : this.services.array;
    const vips = sorted ? sortByKey([...this.vips.array], addressKey, compareAddress) : this.vips.array;
    let glue: GlueSpec | undefined;
    return {
      services,
      vips,
      get glue() {
        return (glue ??= plane.glueSpec());
      },
      ...summary,
    };
  }

  /** The glue as plain data, sorted throughout: the owned frontends' records, and every
   *  service's hairpin entries. */
  glueSpec(): GlueSpec {
    const vips: GlueVip[] = [];
    const nodePorts = new Map<string, GlueNodePort>();
    const sourceRanges: GlueSourceRange[] = [];
    const hairpin = new Map<string, GlueHairpin>();
    const localTraffic: string[] = [];
    const services: Array<{ name: string; parts: IpvsParts | undefined; owned: readonly IpvsFrontend[] }> = [];
    this.registry!.forEach((name, owned, parts) => services.push({ name, parts, owned }));
    for (const { name, parts, owned } of services.sort((a, b) => compareText(a.name, b.name))) {
      for (const fe of owned) {
        const { kind, address, protocol, port, localOnly, portName: servicePort } = fe;
        if (kind !== 'nodePort') vips.push({ kind, address, protocol, port, localOnly, bound: fe.bind, servicePort });
        else {
          const k = `${fe.family} ${protocol} ${port}`;
          if (!nodePorts.has(k)) nodePorts.set(k, { protocol, port, family: fe.family === 'ip' ? 'inet' : 'inet6', localOnly, servicePort });
        }
        if (fe.sourceRange) sourceRanges.push(fe.sourceRange);
      }
      for (const h of parts?.hairpin ?? []) hairpin.set(`${h.address} ${h.protocol} ${h.port}`, h);
      if (parts?.localTraffic) localTraffic.push(name);
    }
    const ctx = this.ctx!;
    return {
      clusterCIDRs: [...ctx.clusterCIDRs],
      masqueradeAll: ctx.config.masqueradeAll ?? false,
      vips: sortByKey(vips, addressProtoPortKey, (a, b) => compareAddressProtoPort(a, b) || compareText(a.kind, b.kind)),
      nodePorts: [...nodePorts.values()].sort((a, b) => compareText(a.family, b.family) || compareText(a.protocol, b.protocol) || a.port - b.port),
      nodePortAddresses: [...ctx.nodePortAddresses.inet, ...ctx.nodePortAddresses.inet6],
      sourceRanges: sourceRanges.sort(compareAddressProtoPort),
      hairpin: sortByKey([...hairpin.values()], addressProtoPortKey, compareAddressProtoPort),
      localTrafficServices: localTraffic,
      healthCheckNodePorts: this.registry!.summary().healthChecks.map((h) => h.nodePort),
    };
  }

  /** A service's owned frontends' virtual servers, VIPs and glue, and its hairpin entries. */
  private put(parts: IpvsParts, owned: readonly IpvsFrontend[]): void {
    for (const fe of owned) {
      this.touch(fe);
      this.services.put(fe.key, fe.vs);
      if (this.touched) this.touched.get(fe.key)!.now = fe.vs;
      if (this.bound(fe)) this.vips.put(fe.address, fe.address);
      this.glue?.put(fe.family, fe.glue);
      if (fe.sourceRange) this.glue?.putSourceRange(fe.sourceRange);
    }
    if (this.glue) for (const h of parts.hairpin) this.glue.putHairpin(h);
  }

  private take(parts: IpvsParts, owned: readonly IpvsFrontend[]): void {
    for (const fe of owned) {
      this.touch(fe);
      this.services.take(fe.key);
      if (this.touched) this.touched.get(fe.key)!.now = undefined;
      if (this.bound(fe)) this.vips.take(fe.address);
      this.glue?.take(fe.family, fe.glue);
      if (fe.sourceRange) this.glue?.takeSourceRange(fe.sourceRange);
    }
    if (this.glue) for (const h of parts.hairpin) this.glue.takeHairpin(h);
  }

  /** Its address is an address on the VIP link: bound, and (route mode) outside the service CIDRs. */
  private bound(fe: IpvsFrontend): boolean {
    return fe.bind && !(this.covered.length && anyContains(this.covered, fe.address));
  }

  private touch(fe: IpvsFrontend): void {
    if (this.touched && !this.touched.has(fe.key)) this.touched.set(fe.key, { was: this.services.get(fe.key), now: undefined });
  }
}

/** A virtual server's sort key (fwmark services have no address: NaN, left to the comparator). */
const vsKey = (vs: DesiredService): number => ('address' in vs && vs.address !== undefined ? addressProtoPortKey(vs as never) : NaN);

/** The virtual servers that differ between two lists, by key: the one of `next` (undefined:
 *  not in it), as DesiredChanges.services has them. */
export function changedServices(previous: readonly DesiredService[], next: readonly DesiredService[]): Map<string, DesiredService | undefined> {
  const before = new Map<string, DesiredService>();
  for (const s of previous) before.set(serviceKey(s), s);
  const changed = new Map<string, DesiredService | undefined>();
  for (const s of next) {
    const k = serviceKey(s);
    const was = before.get(k);
    if (was === undefined || !samePlain(was, s)) changed.set(k, s);
    before.delete(k);
  }
  for (const k of before.keys()) changed.set(k, undefined);
  return changed;
}

/**
 * Every Service and EndpointSlice translated for the IPVS data plane: the plane taking them
 * from nothing, its model sorted throughout. Bad input becomes a warning, never a throw.
 */
export function translate(input: TranslateInput): ProxyModel {
  const slices = groupSlices(input.endpointSlices);
  const services = new Map([...input.services].map((s) => [objectKey(s), s]));
  const plane = new IpvsPlane({ vipLink: 'kube-ipvs0', glue: false, kubeIpsets: false, bindMode: 'address' });
  plane.step(true, new Set(), {
    node: input.node,
    config: input.config ?? {},
    serviceCIDRs: undefined,
    size: services.size,
    names: () => [...services.keys()].sort(compareText),
    objectsOf: (name) => {
      const svc = services.get(name);
      return svc && { svc, slices: slices.get(name) ?? [] };
    },
  });
  const m = plane.model(true);
  return { ...m, glue: m.glue };
}
