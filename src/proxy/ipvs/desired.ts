// A ProxyModel (kube semantics) -> the engine's DesiredState: the IPVS services, the VIPs bound
// on the proxy's link, and the nftables glue.
import type { DesiredState, NftElementChange } from '../../engine/engine.js';
import type { DesiredIpSet } from '../../engine/ipsets-diff.js';
import { elementChanges, type DesiredNftTable } from '../../engine/nft-diff.js';
import { anyContains, canonicalNetwork, parseCidr } from '../../net/address.js';
import type { GlueSpec, ProxyModel } from './types.js';
import type { ModelPatch } from './translate.js';
import { glueTables, patchGlueHairpin, type HairpinIndexes } from './glue.js';
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

/**
 * The engine's desired state for a model. With a cache (the same one every call), the glue
 * tables of the last call are reused when the model's glue is the last one's, or patched in
 * place when only its hairpin list differs and `patch` says how (translate's ModelPatch, when
 * the model was patched from the one whose glue the cache last saw), else built again; the
 * cache then holds the element changes from the last tables (GlueCache.changes).
 */
export function desiredState(model: ProxyModel, opts: DesiredOptions, cache?: GlueCache, patch?: Pick<ModelPatch, 'from' | 'hairpin'>): DesiredState {
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
    services: model.services,
    vips: { link: opts.vipLink, addresses },
    // Address mode wants no routes: those of an earlier route-mode run go.
    routes: { routes: cidrs.map((dst) => ({ dst, type: 'local' as const, table: 'local' as const, dev: ROUTE_DEV })) },
  };
  if (opts.glue) {
    const key = cidrKey;
    const last = cache?.last;
    let how: GlueCache['path'] = 'built';
    let tables: DesiredNftTable[];
    let changes: NftElementChange[] | undefined;
    if (last && last.key === key && last.glue === model.glue) {
      tables = last.tables;
      changes = [];
      how = 'reused';
    } else {
      // A model patched from the last one where a local endpoint moved: the last tables with
      // their hairpin sets changed in place.
      changes = last && last.key === key && patch?.from.glue === last.glue ? patchGlueHairpin(last.glue, last.tables, model.glue, patch.hairpin, last.hairpinAt) : undefined;
      if (changes) {
        how = 'patched';
        tables = last!.tables;
      } else {
        tables = glueTables(model.glue, route ? { serviceCidrs: cidrs } : {});
        // built again: its element changes from the last tables, by key
        changes = last ? elementChanges(last.tables, tables) : undefined;
      }
    }
    d.nft = tables;
    if (cache) {
      cache.from = last?.glue;
      cache.last = { key, glue: model.glue, tables, hairpinAt: how === 'built' ? [] : last!.hairpinAt };
      cache.path = how;
      cache.changes = changes;
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
 * already built, or those with their hairpin sets changed in place (the engine keeps no element
 * of the tables it was given: DesiredChanges.nft names what changed).
 */
export class GlueCache {
  /** @internal */
  last: { key: string; glue: GlueSpec; tables: DesiredNftTable[]; hairpinAt: HairpinIndexes } | undefined;
  /** @internal */
  ipsets: { glue: GlueSpec; sets: DesiredIpSet[] } | undefined;
  /** @internal route mode: the VIPs bound as addresses for a model's VIP list */
  routeVips: { from: readonly string[]; key: string; addresses: string[] } | undefined;
  /** How the last call got its tables. */
  path: 'reused' | 'patched' | 'built' = 'built';
  /** The element changes from the tables of the call before (of the GlueSpec `from`) to the
   *  last call's ('reused': none; undefined: no call before). */
  changes: NftElementChange[] | undefined;
  from: GlueSpec | undefined;
}
