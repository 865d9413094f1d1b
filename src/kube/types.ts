// The plain-data shapes of the Kubernetes semantics layer: what goes into translate() and what
// comes out. Kubernetes objects are ipvsync's own structural types (api-types.ts), which the
// client's objects and plain JSON both fit.
import type { Scheduler } from '../kernel/ipvs.js';
import type { V1EndpointSlice, V1Node, V1Service, V1ServiceCIDR } from './api-types.js';

export type { V1EndpointSlice, V1Endpoints, V1Node, V1Service, V1ServiceCIDR } from './api-types.js';

/** Label that hands a Service to a non-default proxy; kube-proxy skips every Service carrying it. */
export const LABEL_SERVICE_PROXY_NAME = 'service.kubernetes.io/service-proxy-name';
/** The node label naming its zone: topology hints for the zone apply on nodes that have it. */
export const LABEL_TOPOLOGY_ZONE = 'topology.kubernetes.io/zone';
/** Label that ties an EndpointSlice to its Service. */
export const LABEL_SERVICE_NAME = 'kubernetes.io/service-name';
/** ipvsync's per-service IPVS scheduler ("rr", "mh", …; see SCHEDULERS). */
export const ANNOTATION_SCHEDULER = 'ipvsync.io/scheduler';
/** ipvsync's per-service scheduler flags, comma separated ("mh-fallback,mh-port"). */
export const ANNOTATION_SCHEDULER_FLAGS = 'ipvsync.io/scheduler-flags';

/** Where Services and EndpointSlices go (keys "namespace/name"): a Proxier's handlers, in process
 *  or on its thread; fed by the informers (KubeHandlers) and by a manifests folder. */
export interface ObjectHandlers {
  onServiceUpdate(svc: V1Service): void;
  onServiceDelete(key: string): void;
  onSliceUpdate(slice: V1EndpointSlice): void;
  onSliceDelete(key: string): void;
  /** A Node (its key is its name); the proxy reads its own node's labels. */
  onNode?(node: V1Node): void;
  onNodeDelete?(name: string): void;
  /** A ServiceCIDR (its key is its name): the cluster's service CIDRs. */
  onServiceCIDR?(cidr: V1ServiceCIDR): void;
  onServiceCIDRDelete?(name: string): void;
}

/** The subset of KubeProxyConfiguration that changes what is programmed. */
export interface ProxyConfig {
  /** Default IPVS scheduler (kube-proxy's ipvs.scheduler); 'rr' when empty. */
  scheduler?: Scheduler;
  /** NodePorts only on node addresses inside these CIDRs (per family: a family with no CIDR
   *  listed keeps all its addresses, as kube-proxy). Empty: every node address. */
  nodePortAddresses?: string[];
  /** Pod CIDRs: traffic to service VIPs from outside them is masqueraded (a glue detail). */
  clusterCIDRs?: string[];
  /** Masquerade all traffic to service VIPs (a glue detail). */
  masqueradeAll?: boolean;
  /** The cluster's service CIDRs, when the API serves no ServiceCIDR objects: new
   *  connections to an address in them that no Service holds are dropped (the nftables data
   *  plane, as kube-proxy's nftables mode); IPVS route mode's local routes cover them. */
  serviceCIDRs?: string[];
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
  /** Value of the node's topology.kubernetes.io/zone label (a Proxier given one keeps it, over
   *  what its Node object says). */
  zone?: string;
}

export interface TranslateInput {
  services: Iterable<V1Service>;
  endpointSlices: Iterable<V1EndpointSlice>;
  node: NodeInfo;
  config?: ProxyConfig;
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

/** What the proxy says of its services, whatever the data plane: health-check node ports, the
 *  services with a Local policy and no local endpoint, warnings. */
export interface ServiceSummary {
  healthChecks: HealthCheck[];
  /** "namespace/name" of services with a Local traffic policy and no local endpoint here. */
  noLocalEndpoints: string[];
  /** kube-proxy's sync_proxy_rules_no_local_endpoints_total, counted per service port. */
  noLocalEndpointsTotal: { internal: number; external: number };
  /** Bad annotations, bad addresses, conflicts: ignored, never thrown. */
  warnings: ModelWarning[];
}
