// The IPVS data plane's half of the proxy: a service's model (service-model.ts: kube-proxy's
// semantics, no data plane) → what it puts into the IPVS table, the VIPs and the glue
// kube-proxy's IPVS mode would program: per frontend (cluster IP, external IPs, load-balancer
// IPs, node ports) a virtual server and its glue record, and per service its hairpin entries.
// Pure: the same model, the same parts; the parts hold only values the kernel layer accepts.
import { field } from '../../kube/fields.js';
import { chooseScheduler, type SchedulerChoice } from './scheduler.js';
import type { V1Service } from '../../kube/api-types.js';
import type { DesiredService } from '../../engine/ipvs-model.js';
import type { IpvsProtocol, ServiceOptions } from '../../kernel/ipvs.js';
import { inAny } from '../../kube/address.js';
import { isLoopback } from '../../net/address.js';
import type { EndpointInfo } from '../../kube/endpoints.js';
import { externallyAccessible, frontends, type Frontend, type ModelContext, type ServiceModel, type ServicePortModel } from '../../kube/service-model.js';
import type { FrontendClaim, PlaneParts } from '../service-registry.js';
import type { GlueHairpin, GlueSourceRange, GlueVip } from './types.js';
import { nodePortElements, vipElements, type Placed } from './glue.js';
import type { Fam } from '../nft-sets.js';

/** A frontend of a service port: its virtual server, and what it puts into the glue. */
export interface IpvsFrontend extends FrontendClaim {
  protocol: IpvsProtocol;
  family: Fam;
  vs: DesiredService;
  /** Its address is bound on the VIP link (binds()). */
  bind: boolean;
  /** Its traffic policy is Local. */
  localOnly: boolean;
  /** Its glue elements (vipElements, nodePortElements). */
  glue: Placed;
  sourceRange?: GlueSourceRange;
}

/** What one service puts into the IPVS data plane. */
export interface IpvsParts extends PlaneParts<IpvsFrontend> {
  /** Its node-local endpoints that may reach themselves through a VIP, unique. */
  hairpin: readonly GlueHairpin[];
  /** externalTrafficPolicy Local. */
  localTraffic: boolean;
  /** Its scheduler annotation's warnings. */
  warnings: readonly string[];
}

const NONE: readonly never[] = Object.freeze([]);

/** A service's parts under this node and configuration (`defaultScheduler`: the configuration's). */
export function ipvsParts(svc: V1Service, m: ServiceModel, ctx: ModelContext, defaultScheduler: string): IpvsParts {
  const sched = chooseScheduler(field(svc, 'metadata', 'annotations'), defaultScheduler);
  const out: IpvsFrontend[] = [];
  const hairpin = new Map<string, GlueHairpin>();
  for (const sp of m.ports) {
    for (const fe of frontends(sp, ctx)) out.push(frontendOf(sp, fe, sched, ctx));
    // Node-local endpoints may reach themselves through a VIP: they need masquerade (every
    // one, whatever its conditions, as kube-proxy's KUBE-LOOP-BACK).
    for (const e of sp.nodeLocal) {
      const h: GlueHairpin = { address: e.address, protocol: sp.protocol, port: e.port };
      hairpin.set(`${h.address} ${h.protocol} ${h.port}`, h);
    }
  }
  return {
    frontends: out,
    hairpin: hairpin.size ? [...hairpin.values()] : NONE,
    localTraffic: m.externalLocal,
    // a service without ports (headless, no cluster IP) has no virtual server to schedule
    warnings: m.ports.length && sched.warnings.length ? sched.warnings : NONE,
  };
}

function frontendOf(sp: ServicePortModel, fe: Frontend, sched: SchedulerChoice, ctx: ModelContext): IpvsFrontend {
  const { protocol } = sp;
  const vs: DesiredService = {
    protocol,
    address: fe.address,
    port: fe.port,
    ...ipvsOptions(sp, sched),
    // sorted by address and port, as endpointsForPort gives them (filtering keeps the order)
    destinations: realServers(sp, fe).map((e) => ({ address: e.address, port: e.port, forward: 'masq', weight: 1 })),
  };
  const bind = binds(fe, ctx);
  const family = sp.family === 'inet' ? 'ip' : 'ip6';
  const key = [fe.address, protocol, fe.port].join(' ');
  const glue = fe.kind === 'nodePort' ? nodePortElements({ localOnly: fe.localOnly, protocol, port: fe.port }) : vipElements({ ...fe, kind: fe.kind as GlueVip['kind'], protocol, bound: bind });
  const f: IpvsFrontend = { key, service: sp.service, portName: sp.name, kind: fe.kind, address: fe.address, protocol, port: fe.port, family, vs, bind, localOnly: fe.localOnly, glue };
  if (fe.kind === 'loadBalancer' && sp.sourceRanges.cidrs.length) {
    const allowFromNode = [...ctx.nodeAddresses].some((a) => !isLoopback(a) && inAny(sp.sourceRanges, a));
    f.sourceRange = { address: fe.address, protocol, port: fe.port, cidrs: [...sp.sourceRanges.texts].sort(), allowFromNode, servicePort: sp.name };
  }
  return f;
}

/** The IPVS options of a service port: its service's scheduler, and ClientIP affinity as
 *  persistence. */
function ipvsOptions(sp: ServicePortModel, sched: SchedulerChoice): ServiceOptions {
  const options: ServiceOptions = { scheduler: sched.scheduler };
  const sticky = sp.affinityTimeout > 0;
  const flags = [...(sticky ? (['persistent'] as const) : []), ...sched.flags];
  if (flags.length) options.flags = flags;
  if (sticky) options.timeout = sp.affinityTimeout;
  return options;
}

/**
 * A frontend's real servers as kube-proxy's IPVS mode chooses them (syncEndpoint): its traffic
 * policy's endpoints, and for a Local policy without an endpoint on this node the Cluster
 * policy's (kubernetes#97081: pods here reach the service; traffic from elsewhere is forwarded
 * and its reply lost) — for the cluster IP only when the port is externally accessible, as
 * kube-proxy has no Cluster endpoints for a port that never uses them. (The nftables data plane
 * follows kube-proxy's nftables mode instead: docs/kube-proxy.md.)
 */
function realServers(sp: ServicePortModel, fe: Frontend): readonly EndpointInfo[] {
  if (!fe.localOnly) return sp.cluster;
  if (sp.local.length) return sp.local;
  return fe.kind !== 'clusterIP' || externallyAccessible(sp) ? sp.cluster : sp.local;
}

/** Bound on kube-ipvs0: the cluster IP, and external and load-balancer IPs that are no node
 *  address (those are local already); NodePorts are on node addresses. */
function binds(fe: Frontend, ctx: ModelContext): boolean {
  return fe.kind === 'clusterIP' || (fe.kind !== 'nodePort' && !ctx.nodeAddresses.has(fe.address));
}
