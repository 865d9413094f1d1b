// A ProxyModel (kube semantics) -> the engine's DesiredState: the IPVS services, the VIPs bound
// on the proxy's link, and the nftables glue.
import type { DesiredState } from '../engine/engine.js';
import type { ProxyModel } from '../kube/types.js';
import { glueTables } from './glue.js';

export interface DesiredOptions {
  /** The dummy link holding the VIPs (kube-proxy's kube-ipvs0). */
  vipLink: string;
  /** Program the nftables glue (masquerade, hairpin, source ranges, VIP port filter). */
  glue: boolean;
}

export function desiredState(model: ProxyModel, opts: DesiredOptions): DesiredState {
  const d: DesiredState = { services: model.services, vips: { link: opts.vipLink, addresses: model.vips } };
  if (opts.glue) d.nft = glueTables(model.glue);
  return d;
}
