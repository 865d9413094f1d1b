// The plain-data shapes of the Kubernetes semantics layer: what goes into translate() and what
// comes out. Kubernetes objects are @kubernetes/client-node's types (used as types only, so this
// layer loads none of the client's runtime).
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import type { DesiredService } from '../engine/ipvs-model.js';
import type { AddressFamily, IpvsProtocol } from '../kernel/ipvs.js';

export type { V1EndpointSlice, V1Endpoints, V1Node, V1Service } from '@kubernetes/client-node';

/** Label that hands a Service to a non-default proxy; kube-proxy skips every Service carrying it. */
export const LABEL_SERVICE_PROXY_NAME = 'service.kubernetes.io/service-proxy-name';
/** Label that ties an EndpointSlice to its Service. */
export const LABEL_SERVICE_NAME = 'kubernetes.io/service-name';
/** ipvsync's per-service IPVS scheduler ("rr", "mh", …; see SCHEDULERS). */
export const ANNOTATION_SCHEDULER = 'ipvsync.io/scheduler';
/** ipvsync's per-service scheduler flags, comma separated ("mh-fallback,mh-port"). */
export const ANNOTATION_SCHEDULER_FLAGS = 'ipvsync.io/scheduler-flags';
/** Legacy source-range annotation, used when spec.loadBalancerSourceRanges is empty (as kube-proxy). */
export const ANNOTATION_LB_SOURCE_RANGES = 'service.beta.kubernetes.io/load-balancer-source-ranges';

/** Where Services and EndpointSlices go (keys "namespace/name"): a Proxier's handlers, in process
 *  or on its thread; fed by the informers (KubeHandlers) and by a manifests folder. */
export interface ObjectHandlers {
  onServiceUpdate(svc: V1Service): void;
  onServiceDelete(key: string): void;
  onSliceUpdate(slice: V1EndpointSlice): void;
  onSliceDelete(key: string): void;
}

/** The subset of KubeProxyConfiguration that changes what is programmed. */
export interface ProxyConfig {
  /** Default IPVS scheduler (kube-proxy's ipvs.scheduler); 'rr' when empty. */
  scheduler?: string;
  /** NodePorts only on node addresses inside these CIDRs (per family: a family with no CIDR
   *  listed keeps all its addresses, as kube-proxy). Empty: every node address. */
  nodePortAddresses?: string[];
  /** Pod CIDRs: traffic to service VIPs from outside them is masqueraded (a glue detail). */
  clusterCIDRs?: string[];
  /** Masquerade all traffic to service VIPs (a glue detail). */
  masqueradeAll?: boolean;
  /** When set, Services labelled `service.kubernetes.io/service-proxy-name: <proxyName>` are
   *  served too (kube-proxy skips every labelled Service). */
  proxyName?: string;
  /** With proxyName: serve ONLY Services labelled with it (ipvsync running beside kube-proxy). */
  proxyNameOnly?: boolean;
}

export interface NodeInfo {
  /** The node's name as EndpointSlices' `nodeName` spells it. */
  name: string;
  /** Every local address usable for NodePorts (node IPs, 127.0.0.1, bridges …). */
  addresses: string[];
  /** Value of the node's topology.kubernetes.io/zone label. */
  zone?: string;
}

export interface TranslateInput {
  services: Iterable<V1Service>;
  endpointSlices: Iterable<V1EndpointSlice>;
  node: NodeInfo;
  config?: ProxyConfig;
}

export type FrontendKind = 'clusterIP' | 'externalIP' | 'loadBalancer' | 'nodePort';

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

/** Plain data for the nftables (or ipset) glue renderer. Every list is sorted. */
export interface GlueSpec {
  clusterCIDRs: string[];
  masqueradeAll: boolean;
  vips: GlueVip[];
  nodePorts: GlueNodePort[];
  /** The node addresses NodePort virtual servers were created on. */
  nodePortAddresses: string[];
  sourceRanges: GlueSourceRange[];
  hairpin: GlueHairpin[];
  /** "namespace/name" of services with externalTrafficPolicy Local. */
  localTrafficServices: string[];
  /** healthCheckNodePorts in use (TCP, on every node address). */
  healthCheckNodePorts: number[];
}

export interface HealthCheck {
  nodePort: number;
  /** "namespace/name". */
  service: string;
  /** Ready node-local endpoints (distinct addresses): the health server answers 200 if > 0. */
  localEndpoints: number;
}

export interface ModelWarning {
  /** "namespace/name", or "" for configuration problems. */
  service: string;
  message: string;
}

export interface ProxyModel {
  services: DesiredService[];
  /** Addresses to bind on kube-ipvs0 (cluster, external and load-balancer IPs). */
  vips: string[];
  glue: GlueSpec;
  healthChecks: HealthCheck[];
  /** "namespace/name" of services with a Local traffic policy and no local endpoint here. */
  noLocalEndpoints: string[];
  /** kube-proxy's sync_proxy_rules_no_local_endpoints_total, counted per service port. */
  noLocalEndpointsTotal: { internal: number; external: number };
  /** Bad annotations, bad addresses, conflicts: ignored, never thrown. */
  warnings: ModelWarning[];
}
