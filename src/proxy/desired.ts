// A ProxyModel (kube semantics) -> the engine's DesiredState: the IPVS services, the VIPs bound
// on the proxy's link, and the nftables glue.
import type { DesiredState } from '../engine/engine.js';
import { anyContains, parseCidr } from '../engine/cidr.js';
import { canonicalNetwork } from '../engine/routes-diff.js';
import type { ProxyModel } from '../kube/types.js';
import { glueTablesSteps } from './glue.js';
import { runSliced, runSync, type Steps, type TimeSlice } from '../engine/slice.js';
import { kubeProxyIpSets } from './kube-ipsets.js';

export interface DesiredOptions {
  /** The dummy link holding the VIPs (kube-proxy's kube-ipvs0). */
  vipLink: string;
  /** Program the nftables glue (masquerade, hairpin, source ranges, VIP port filter). */
  glue: boolean;
  /** Also maintain kube-proxy's ipsets (KUBE-CLUSTER-IP …) for iptables rules that use them. */
  kubeIpsets?: boolean;
  /** 'address' (default): every VIP an address on vipLink. 'route': one local route per service
   *  CIDR (on ROUTE_DEV) instead; VIPs outside them (external and load-balancer IPs) stay
   *  addresses. Either mode removes what the other left behind. */
  bindMode?: 'address' | 'route';
  serviceCidrs?: string[];
}

/** The link of the local routes. lo, not the VIP link: the kernel's own AnyIP idiom for both
 *  families (`ip route add local CIDR dev lo`), always up and never deleted, so local delivery
 *  does not depend on the dummy link's state (a down or re-created kube-ipvs0 would take routes
 *  on it with it); the routes' protocol, not their link, marks them as ipvsync's. */
export const ROUTE_DEV = 'lo';

export function desiredState(model: ProxyModel, opts: DesiredOptions): DesiredState {
  return runSync(desiredStateSteps(model, opts));
}

/** desiredState letting the event loop in every `slice.sliceMs` (between glue sets). */
export function desiredStateSliced(model: ProxyModel, opts: DesiredOptions, slice: TimeSlice): Promise<DesiredState> {
  return runSliced(desiredStateSteps(model, opts), slice);
}

function* desiredStateSteps(model: ProxyModel, opts: DesiredOptions): Steps<DesiredState> {
  const route = opts.bindMode === 'route';
  const cidrs = route ? (opts.serviceCidrs ?? []).map(canonicalNetwork) : [];
  if (route && !cidrs.length) throw new RangeError("bindMode 'route' needs the service CIDRs");
  const covered = cidrs.map(parseCidr);
  const d: DesiredState = {
    services: model.services,
    vips: { link: opts.vipLink, addresses: route ? model.vips.filter((v) => !anyContains(covered, v)) : model.vips },
    // Address mode wants no routes: those of an earlier route-mode run go.
    routes: { routes: cidrs.map((dst) => ({ dst, type: 'local' as const, table: 'local' as const, dev: ROUTE_DEV })) },
  };
  if (opts.glue) d.nft = yield* glueTablesSteps(model.glue, route ? { serviceCidrs: cidrs } : {});
  if (opts.kubeIpsets) d.ipsets = kubeProxyIpSets(model.glue);
  return d;
}
