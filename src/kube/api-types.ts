// The Kubernetes objects ipvsync reads, as its own plain structural types: the members the
// proxy reads (slim.ts keeps exactly these; the change trackers' fingerprints cover the same)
// and the few it writes when it mirrors legacy Endpoints. Named after the API's kinds (core/v1
// Service, discovery/v1 EndpointSlice …) and shaped as @kubernetes/client-node's types are,
// the same members required, so the client's objects are assignable to them and theirs to the
// client's (Node's deletionTimestamp aside: text on the wire, a Date in the client); but no declaration of ipvsync refers to the client, so a
// program that uses ipvsync's types never loads the client's (hundreds of declaration files).
// Values are typed as the API documents them; the proxy still reads every member through
// fields.ts, as wire data whose types are not guaranteed.

export interface V1ObjectMeta {
  name?: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  resourceVersion?: string;
}

/** Any API object: what list/watch and the object keys read. */
export interface KubernetesObject {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
}

export interface V1ServicePort {
  name?: string;
  /** "TCP" (the default), "UDP" or "SCTP". */
  protocol?: string;
  /** An integer, 1..65535. */
  port: number;
  /** An integer, 1..65535 (the cluster's NodePort range). */
  nodePort?: number;
}

export interface V1ServiceSpec {
  /** "ClusterIP" (the default), "NodePort", "LoadBalancer" or "ExternalName". */
  type?: string;
  clusterIP?: string;
  clusterIPs?: string[];
  ports?: V1ServicePort[];
  externalIPs?: string[];
  /** "None" or "ClientIP". */
  sessionAffinity?: string;
  sessionAffinityConfig?: { clientIP?: { timeoutSeconds?: number } };
  /** "Cluster" or "Local". */
  externalTrafficPolicy?: string;
  /** "Cluster" or "Local". */
  internalTrafficPolicy?: string;
  healthCheckNodePort?: number;
  loadBalancerSourceRanges?: string[];
}

export interface V1LoadBalancerIngress {
  ip?: string;
  /** "VIP" or "Proxy". */
  ipMode?: string;
}

export interface V1Service extends KubernetesObject {
  spec?: V1ServiceSpec;
  status?: { loadBalancer?: { ingress?: V1LoadBalancerIngress[] } };
}

export interface V1EndpointConditions {
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
}

export interface V1EndpointHints {
  forZones?: Array<{ name: string }>;
  forNodes?: Array<{ name: string }>;
}

export interface V1Endpoint {
  /** Only the first counts (as in kube-proxy). */
  addresses: string[];
  conditions?: V1EndpointConditions;
  hints?: V1EndpointHints;
  nodeName?: string;
  hostname?: string;
}

export interface V1EndpointSlicePort {
  name?: string;
  protocol?: string;
  port?: number;
}

export interface V1EndpointSlice extends KubernetesObject {
  /** "IPv4", "IPv6" or "FQDN". */
  addressType: string;
  /** Optional, as in the Kubernetes client 2.x's types (a slice may list no endpoint). */
  endpoints?: V1Endpoint[];
  ports?: V1EndpointSlicePort[];
}

export interface V1EndpointAddress {
  ip: string;
  hostname?: string;
  nodeName?: string;
}

export interface V1EndpointPort {
  name?: string;
  protocol?: string;
  port: number;
}

export interface V1EndpointSubset {
  addresses?: V1EndpointAddress[];
  notReadyAddresses?: V1EndpointAddress[];
  ports?: V1EndpointPort[];
}

/** Legacy core/v1 Endpoints, read from manifests and mirrored into EndpointSlices. */
export interface V1Endpoints extends KubernetesObject {
  subsets?: V1EndpointSubset[];
}

export interface V1Taint {
  key: string;
  value?: string;
  effect: string;
}

export interface V1Node extends KubernetesObject {
  /** deletionTimestamp: RFC 3339 text on the wire, a Date in the client's objects. */
  metadata?: V1ObjectMeta & { deletionTimestamp?: string | Date };
  spec?: { taints?: V1Taint[] };
}

/** networking.k8s.io/v1 ServiceCIDR: a range the API server allocates cluster IPs from (the
 *  default one from its --service-cluster-ip-range, named "kubernetes"). */
export interface V1ServiceCIDR extends KubernetesObject {
  spec?: { cidrs?: string[] };
}
