// A ProxyModel (kube semantics) -> the engine's DesiredState: the IPVS services, the VIPs bound
// on the proxy's link, and the nftables glue.
import type { DesiredState } from '../engine/engine.js';
import type { ProxyModel } from '../kube/types.js';
import { glueTables } from './glue.js';
import { kubeProxyIpSets } from './kube-ipsets.js';

export interface DesiredOptions {
  /** The dummy link holding the VIPs (kube-proxy's kube-ipvs0). */
  vipLink: string;
  /** Program the nftables glue (masquerade, hairpin, source ranges, VIP port filter). */
  glue: boolean;
  /** Also maintain kube-proxy's ipsets (KUBE-CLUSTER-IP …) for iptables rules that use them. */
  kubeIpsets?: boolean;
}

export function desiredState(model: ProxyModel, opts: DesiredOptions): DesiredState {
  const d: DesiredState = { services: model.services, vips: { link: opts.vipLink, addresses: model.vips } };
  if (opts.glue) d.nft = glueTables(model.glue);
  if (opts.kubeIpsets) d.ipsets = kubeProxyIpSets(model.glue);
  return d;
}
