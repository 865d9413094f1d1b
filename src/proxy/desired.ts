// A ProxyModel (kube semantics) -> the engine's DesiredState: the IPVS services, the VIPs bound
// on the proxy's link, and the nftables glue.
import type { DesiredState } from '../engine/engine.js';
import type { DesiredIpSet } from '../engine/ipsets-diff.js';
import type { DesiredNftTable } from '../engine/nft-diff.js';
import { anyContains, canonicalNetwork, parseCidr } from '../net/address.js';
import type { GlueSpec, ProxyModel } from '../kube/types.js';
import { glueTables, patchGlueHairpin } from './glue.js';
import { shareList } from '../engine/sorted.js';
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

export function desiredState(model: ProxyModel, opts: DesiredOptions, cache?: GlueCache): DesiredState {
  const route = opts.bindMode === 'route';
  const cidrs = route ? (opts.serviceCidrs ?? []).map(canonicalNetwork) : [];
  if (route && !cidrs.length) throw new RangeError("bindMode 'route' needs the service CIDRs");
  const covered = cidrs.map(parseCidr);
  // Route mode binds only the VIPs outside the CIDRs: the last list again for the same VIPs
  // (a patched model keeps its VIP list) under the same CIDRs.
  const cidrKey = JSON.stringify(cidrs);
  let addresses = model.vips;
  if (route) {
    const lastVips = cache?.routeVips;
    addresses = lastVips && lastVips.from === model.vips && lastVips.key === cidrKey ? lastVips.addresses : model.vips.filter((v) => !anyContains(covered, v));
    if (cache) cache.routeVips = { from: model.vips, key: cidrKey, addresses };
  }
  const d: DesiredState = {
    services: [], // model.services, below
    vips: { link: opts.vipLink, addresses },
    // Address mode wants no routes: those of an earlier route-mode run go.
    routes: { routes: cidrs.map((dst) => ({ dst, type: 'local' as const, table: 'local' as const, dev: ROUTE_DEV })) },
  };
  // The model's list in chunks (a patched model's), not made into an array here.
  shareList(model, 'services', d);
  if (opts.glue) {
    const key = cidrKey;
    const last = cache?.last;
    let how: GlueCache['path'] = 'built';
    if (last && last.key === key && last.glue === model.glue) {
      d.nft = last.tables;
      how = 'reused';
    } else {
      // A model patched from the last one where a local endpoint moved: the last tables with
      // a new hairpin set.
      const patched = last && last.key === key ? patchGlueHairpin(last.glue, last.tables, model.glue) : undefined;
      if (patched) how = 'patched';
      d.nft = patched ?? glueTables(model.glue, route ? { serviceCidrs: cidrs } : {});
    }
    if (cache) {
      cache.last = { key, glue: model.glue, tables: d.nft };
      cache.path = how;
    }
  }
  if (opts.kubeIpsets) {
    d.ipsets = cache?.ipsets?.glue === model.glue ? cache.ipsets.sets : kubeProxyIpSets(model.glue);
    if (cache) cache.ipsets = { glue: model.glue, sets: d.ipsets };
  }
  return d;
}

/**
 * What the last desiredState built from a GlueSpec, kept between calls (the Proxier passes the
 * same cache every sync): a model patched from the last one (TranslateCache path 'patched') has
 * the last one's glue object, or one that differs in hairpin only, so its tables are the ones
 * already built, or those with a new hairpin set. The engine takes desired state read-only.
 */
export class GlueCache {
  /** @internal */
  last: { key: string; glue: GlueSpec; tables: DesiredNftTable[] } | undefined;
  /** @internal */
  ipsets: { glue: GlueSpec; sets: DesiredIpSet[] } | undefined;
  /** @internal route mode: the VIPs bound as addresses for a model's VIP list */
  routeVips: { from: readonly string[]; key: string; addresses: string[] } | undefined;
  /** How the last call got its tables. */
  path: 'reused' | 'patched' | 'built' = 'built';
}
