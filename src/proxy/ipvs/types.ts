// The IPVS data plane's model of the node: what translate() makes of the service model — the
// IPVS table, the VIPs for kube-ipvs0 and a plain-data spec of the nftables glue.
import type { DesiredService } from '../../engine/ipvs-model.js';
import type { AddressFamily, IpvsProtocol } from '../../kernel/ipvs.js';
import type { ServiceSummary } from '../../kube/types.js';
import type { FrontendKind } from '../../kube/service-model.js';

export type { FrontendKind } from '../../kube/service-model.js';

/** A (VIP, protocol, port) the glue must know about. */
export interface GlueVip {
  kind: Exclude<FrontendKind, 'nodePort'>;
  address: string;
  protocol: IpvsProtocol;
  port: number;
  /** Only node-local endpoints behind it: externalTrafficPolicy Local for external IPs and
   *  load-balancer IPs (their traffic keeps its source address: no SNAT), internalTrafficPolicy
   *  Local for cluster IPs (informational: cluster-IP masquerade rules do not change). */
  localOnly: boolean;
  /** Bound on the VIP link (a cluster IP; an external or load-balancer IP that is no node
   *  address): the addresses whose other ports are refused (kube-proxy's KUBE-IPVS-IPS). */
  bound: boolean;
  /** "namespace/name:port". */
  servicePort: string;
}

export interface GlueNodePort {
  protocol: IpvsProtocol;
  port: number;
  family: AddressFamily;
  /** externalTrafficPolicy Local: no SNAT. */
  localOnly: boolean;
  servicePort: string;
}

/** Only these sources may reach this LoadBalancer IP:port. */
export interface GlueSourceRange {
  address: string;
  protocol: IpvsProtocol;
  port: number;
  cidrs: string[];
  /** A range contains one of the node's addresses: the node itself (reaching the VIP with the VIP
   *  as source, kube-proxy's KUBE-LOAD-BALANCER-SOURCE-IP entry) is allowed too. */
  allowFromNode: boolean;
  servicePort: string;
}

/** A node-local endpoint that may reach itself through a VIP: needs masquerade (hairpin). */
export interface GlueHairpin {
  address: string;
  protocol: IpvsProtocol;
  port: number;
}

/** Plain data for the nftables (or ipset) glue renderer, sorted throughout. */
export interface GlueSpec {
  clusterCIDRs: string[];
  masqueradeAll: boolean;
  vips: GlueVip[];
  nodePorts: GlueNodePort[];
  /** The node addresses NodePort virtual servers were created on. */
  nodePortAddresses: string[];
  sourceRanges: GlueSourceRange[];
  /** Unique. */
  hairpin: GlueHairpin[];
  /** "namespace/name" of services with externalTrafficPolicy Local. */
  localTrafficServices: string[];
  /** healthCheckNodePorts in use (TCP, on every node address). */
  healthCheckNodePorts: number[];
}

/** The IPVS data plane's model. A sync's is the plane's own lists, in no order, until its next
 *  step (its glue made when read); translate()'s is sorted throughout. */
export interface ProxyModel extends ServiceSummary {
  services: DesiredService[];
  /** Addresses to bind on kube-ipvs0 (cluster, external and load-balancer IPs). */
  vips: string[];
  glue: GlueSpec;
}
