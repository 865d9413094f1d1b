// The backend-agnostic service model: what kube-proxy's semantics make of a Service and its
// EndpointSlices on this node, before any data plane (kube-proxy's ServicePortMap and
// EndpointsMap). Per service port and family: its frontends' addresses and ports, its traffic
// policies and affinity, and its endpoints sorted into the ones cluster-wide traffic may use and
// the node-local ones. A data plane (src/proxy/ipvs/ today) reads only this model, never a
// Kubernetes object, and the semantics here never know which data plane runs.
//
// Every field of a Service is read through fields.ts (typed, undefined for the wrong type); a
// value present with the wrong type is a warning and is ignored like any other bad value. The
// model holds only values the kernel layer accepts (canonical addresses, CIDRs as their
// network, ports in range).
import type { V1EndpointSlice, V1Service, V1ServiceCIDR } from './api-types.js';
import type { AddressFamily, IpvsProtocol } from '../kernel/ipvs.js';
import { cidrList, inAny, type CidrList } from './address.js';
import { ipFamily, isIpv6LinkLocal, compareAddress, sloppyIp, validIp } from '../net/address.js';
import { clusterEndpoints, endpointsForPort, localEndpoints, sortSlices, type EndpointInfo } from './endpoints.js';
import { objectKey, sliceServiceKey } from './change-tracker.js';
import { field, isMapping, member, present, show } from './fields.js';
import {
  LABEL_SERVICE_PROXY_NAME,
  type HealthCheck,
  type ModelWarning,
  type NodeInfo,
  type ProxyConfig,
} from './types.js';

/** kube-proxy's default ClientIP affinity timeout (3 h). */
export const DEFAULT_AFFINITY_TIMEOUT = 10800;

/** One port of a service in one family (a dual-stack service has one per family). */
export interface ServicePortModel {
  /** "namespace/name". */
  service: string;
  /** "namespace/name:port", or "namespace/name" for an unnamed port. */
  name: string;
  portName: string;
  protocol: IpvsProtocol;
  family: AddressFamily;
  port: number;
  /** 0: none. */
  nodePort: number;
  clusterIP: string;
  externalIPs: readonly string[];
  loadBalancerIPs: readonly string[];
  /** loadBalancerSourceRanges (or the legacy annotation) of this family, as networks. */
  sourceRanges: CidrList;
  /** internalTrafficPolicy Local. */
  internalLocal: boolean;
  /** Externally accessible and externalTrafficPolicy Local. */
  externalLocal: boolean;
  /** sessionAffinity ClientIP: its timeout in seconds; 0: no affinity. */
  affinityTimeout: number;
  /** Endpoints for Cluster traffic policy (ready, topology-filtered; else serving-terminating),
   *  sorted by address and port. */
  cluster: readonly EndpointInfo[];
  /** Node-local endpoints for Local traffic policy (ready; else serving-terminating). */
  local: readonly EndpointInfo[];
  /** Every node-local endpoint, whatever its conditions (kube-proxy's IPVS mode loops each back
   *  through KUBE-LOOP-BACK). */
  nodeLocal: readonly EndpointInfo[];
}

/** One service: its ports, the service-wide facts, and what was wrong with it. */
export interface ServiceModel {
  /** "namespace/name". */
  name: string;
  /** Family-major: every port of the first cluster IP's family, then the second's. */
  ports: ServicePortModel[];
  /** Externally accessible with externalTrafficPolicy Local. */
  externalLocal: boolean;
  /** A LoadBalancer with externalTrafficPolicy Local and a healthCheckNodePort. */
  healthCheck: HealthCheck | undefined;
  /** This service's problems (each once), each value ignored. */
  warnings: string[];
}

export type FrontendKind = 'clusterIP' | 'externalIP' | 'loadBalancer' | 'nodePort';

/** Where a service port is reached: its cluster IP, external IPs and load-balancer IPs at the
 *  service port, and every NodePort address of its family at the node port. */
export interface Frontend {
  kind: FrontendKind;
  address: string;
  port: number;
  /** Only node-local endpoints behind it (the traffic policy of its kind is Local). */
  localOnly: boolean;
}

export function frontends(p: ServicePortModel, ctx: ModelContext): Frontend[] {
  const out: Frontend[] = [{ kind: 'clusterIP', address: p.clusterIP, port: p.port, localOnly: p.internalLocal }];
  for (const address of p.externalIPs) out.push({ kind: 'externalIP', address, port: p.port, localOnly: p.externalLocal });
  for (const address of p.loadBalancerIPs) out.push({ kind: 'loadBalancer', address, port: p.port, localOnly: p.externalLocal });
  if (p.nodePort) for (const address of ctx.nodePortAddresses[p.family]) out.push({ kind: 'nodePort', address, port: p.nodePort, localOnly: p.externalLocal });
  return out;
}

/** The endpoints behind a frontend of the port: the traffic policy of its kind applied. */
export const frontendEndpoints = (p: ServicePortModel, fe: Frontend): readonly EndpointInfo[] => (fe.kind === 'clusterIP' ? internalEndpoints(p) : externalEndpoints(p));

/** The endpoints that pod traffic (from the cluster CIDRs) and the node's own traffic to an
 *  external frontend of an externalTrafficPolicy Local port reach: every endpoint the Cluster
 *  policy would use, as if the traffic had gone out to a load balancer and come back in
 *  (kube-proxy's "short-circuit" in its iptables and nftables modes). None for any other
 *  frontend, whose traffic all follows frontendEndpoints. */
export const shortCircuitEndpoints = (p: ServicePortModel, fe: Frontend): readonly EndpointInfo[] => (fe.kind !== 'clusterIP' && p.externalLocal ? p.cluster : NONE);

/** The Local traffic policies of a port left without a node-local endpoint while it has
 *  endpoints elsewhere (what kube-proxy's sync_proxy_rules_no_local_endpoints_total counts; a
 *  port without any endpoint is not counted). */
export function localWithoutEndpoints(p: ServicePortModel): { internal: boolean; external: boolean } {
  const none = p.local.length === 0 && p.cluster.length > 0;
  return { internal: none && p.internalLocal, external: none && p.externalLocal };
}

/** The port is reached from outside the cluster: a node port, load-balancer or external IPs
 *  (kube-proxy's ExternallyAccessible). */
export const externallyAccessible = (p: ServicePortModel): boolean => p.nodePort > 0 || p.loadBalancerIPs.length > 0 || p.externalIPs.length > 0;

/** The warning for a service whose objects threw on a shape no check foresaw: it is skipped. */
export function notProgrammed(e: unknown): string {
  return `not programmed: ${e instanceof Error ? e.message : String(e)}`;
}

/** Endpoints behind the cluster IP (internalTrafficPolicy applied). */
export const internalEndpoints = (p: ServicePortModel): readonly EndpointInfo[] => (p.internalLocal ? p.local : p.cluster);
/** Endpoints behind external IPs, load-balancer IPs and node ports (externalTrafficPolicy applied). */
export const externalEndpoints = (p: ServicePortModel): readonly EndpointInfo[] => (p.externalLocal ? p.local : p.cluster);

/** This node and the configuration, as the semantics read them. */
export interface ModelContext {
  nodeName: string;
  zone: string | undefined;
  config: ProxyConfig;
  /** config.clusterCIDRs, canonical (cidrText), the bad ones left out. */
  clusterCIDRs: string[];
  /** The service CIDRs, canonical: the ServiceCIDR objects' when the API serves them, else
   *  config.serviceCIDRs (the bad ones left out). */
  serviceCIDRs: string[];
  nodeAddresses: ReadonlySet<string>;
  /** Per family, sorted: the node addresses NodePorts are served on. */
  nodePortAddresses: Record<AddressFamily, string[]>;
  /** Configuration problems (service ""). */
  warnings: ModelWarning[];
}

/** `serviceCIDRObjects`: the CIDRs of the cluster's ServiceCIDR objects (networking.k8s.io/v1),
 *  undefined when the API serves none (then config.serviceCIDRs). */
export function modelContext(node: NodeInfo, config: ProxyConfig, serviceCIDRObjects?: readonly string[]): ModelContext {
  const warnings: ModelWarning[] = [];
  const nodeAddresses = new Set(node.addresses.map(validIp).filter((a): a is string => a !== undefined));
  const clusterCIDRs = cidrList(config.clusterCIDRs);
  for (const bad of clusterCIDRs.rejected) warnings.push({ service: '', message: `clusterCIDRs: "${bad}" is not a CIDR, ignored` });
  const serviceCIDRs = cidrList(serviceCIDRObjects ?? config.serviceCIDRs);
  for (const bad of serviceCIDRs.rejected) warnings.push({ service: '', message: `serviceCIDRs: "${bad}" is not a CIDR, ignored` });
  return {
    nodeName: node.name,
    zone: node.zone || undefined,
    config,
    clusterCIDRs: clusterCIDRs.texts,
    serviceCIDRs: serviceCIDRs.texts,
    nodeAddresses,
    nodePortAddresses: nodePortAddresses([...nodeAddresses], config.nodePortAddresses, warnings),
    warnings,
  };
}

/** Per family: the node addresses inside nodePortAddresses CIDRs of that family, or all of that
 *  family when it lists none. IPv6 link-local addresses never carry NodePorts (no scope). */
function nodePortAddresses(addresses: string[], cidrs: string[] | undefined, warnings: ModelWarning[]): Record<AddressFamily, string[]> {
  const all = cidrList(cidrs);
  for (const bad of all.rejected) warnings.push({ service: '', message: `nodePortAddresses: "${bad}" is not a CIDR, ignored` });
  const pick = (family: AddressFamily): string[] => {
    const mine = cidrList(all.texts, family);
    return addresses
      .filter((a) => ipFamily(a) === family && !isIpv6LinkLocal(a))
      .filter((a) => mine.cidrs.length === 0 || inAny(mine, a))
      .sort(compareAddress);
  };
  return { inet: pick('inet'), inet6: pick('inet6') };
}

/** A ServiceCIDR object's CIDRs (spec.cidrs, one per family at most), as they are written: the
 *  model context checks them (cidrList) with the configuration's. */
export function serviceCIDRsOf(o: V1ServiceCIDR): string[] {
  const cidrs = field(o, 'spec', 'cidrs');
  return Array.isArray(cidrs) ? cidrs.filter((c): c is string => typeof c === 'string') : [];
}

/** Slices by service ("namespace/name"), each service's in name order. */
export function groupSlices(slices: Iterable<V1EndpointSlice>): Map<string, V1EndpointSlice[]> {
  const by = new Map<string, V1EndpointSlice[]>();
  for (const s of slices) {
    const key = sliceServiceKey(s);
    if (!key) continue;
    const list = by.get(key);
    if (list) list.push(s);
    else by.set(key, [s]);
  }
  for (const [k, v] of by) if (v.length > 1) by.set(k, sortSlices(v));
  return by;
}

/** kube-proxy skips every Service labelled service-proxy-name; ipvsync also serves its own name. */
export function servedBy(svc: V1Service, config: ProxyConfig): boolean {
  const label = field(svc, 'metadata', 'labels', LABEL_SERVICE_PROXY_NAME);
  if (config.proxyName && config.proxyNameOnly) return label === config.proxyName;
  return label === undefined || (config.proxyName !== undefined && label === config.proxyName);
}

const NONE: readonly never[] = Object.freeze([]);

/**
 * The model of one service from its Service and its EndpointSlices (in name order). Headless,
 * ExternalName, unallocated and other proxies' services have no ports. Throws only on a shape
 * no check foresaw (the caller skips the service with a warning). `name`: the service's
 * "namespace/name" where the caller has it (a data plane keeps it in every frontend: the
 * caller's own string, not one more per service).
 */
export function serviceModel(svc: V1Service, slices: readonly V1EndpointSlice[], ctx: ModelContext, name = objectKey(svc)): ServiceModel {
  const m: ServiceModel = { name, ports: [], externalLocal: false, healthCheck: undefined, warnings: [] };
  // The same problem on every port of a service is one warning.
  const warn = (message: string): void => void (m.warnings.includes(message) || m.warnings.push(message));
  if (!servedBy(svc, ctx.config)) return m;
  const spec = member(svc, 'spec');
  if (!isMapping(spec)) {
    if (present(spec)) warn(`spec ${show(spec)} is not a mapping, ignored`);
    return m;
  }
  const clusterIPs = clusterIPsOf(spec, warn);
  if (clusterIPs.length === 0) return m;
  const type = spec.type;
  const affinity = spec.sessionAffinity === 'ClientIP' ? affinityTimeout(spec, warn) : 0;
  const externalIPs = listOf(spec, 'externalIPs', warn);
  const externallyAccessible = type === 'NodePort' || type === 'LoadBalancer' || externalIPs.length > 0;
  m.externalLocal = externallyAccessible && spec.externalTrafficPolicy === 'Local';

  const hc = nodePortOf(spec.healthCheckNodePort, 'healthCheckNodePort', warn);
  const healthCheck = type === 'LoadBalancer' && m.externalLocal && hc > 0;
  // The health check counts the ready node-local endpoint addresses over all ports
  const localReady = healthCheck ? new Set<string>() : undefined;
  const shared = sharedInfo(svc, spec, externalIPs, warn);
  const ports = listOf(spec, 'ports', warn);
  const base = { service: name, externalLocal: m.externalLocal, affinityTimeout: affinity };
  clusterIPs.forEach((clusterIP, i) => {
    const family = ipFamily(clusterIP)!;
    for (let j = 0; j < ports.length; j++) {
      const w = i === 0 ? warn : ignore; // warn once, not per family
      const p = servicePort(ports[j], j, shared, { ...base, clusterIP, family }, w);
      if (!p) continue;
      const all = endpointsForPort(slices, p.portName, p.protocol, family, ctx.nodeName, warn);
      p.cluster = clusterEndpoints(all, ctx.nodeName, ctx.zone);
      p.local = localEndpoints(all);
      p.nodeLocal = all.some((e) => e.local) ? all.filter((e) => e.local) : NONE;
      m.ports.push(p);
      if (localReady) for (const e of all) if (e.local && e.ready) localReady.add(e.address);
    }
  });
  if (localReady) m.healthCheck = { nodePort: hc, service: name, localEndpoints: localReady.size };
  return m;
}

const ignore = (): void => {};

/** A list member of `spec`: its items, none when absent; a value that is no list is warned about. */
function listOf(spec: unknown, name: string, warn: (m: string) => void): readonly unknown[] {
  const v = member(spec, name);
  if (Array.isArray(v)) return v;
  if (present(v)) warn(`${name} ${show(v)} is not a list, ignored`);
  return NONE;
}

/** Allocated cluster IPs; none for headless ("None"), ExternalName or not-yet-allocated services. */
function clusterIPsOf(spec: Record<string, unknown>, warn: (m: string) => void): string[] {
  if (spec.type === 'ExternalName') return [];
  const list = listOf(spec, 'clusterIPs', warn);
  const one = spec.clusterIP;
  if (!list.length && present(one) && typeof one !== 'string') warn(`clusterIP ${show(one)} is not an IP address, ignored`);
  const raw = list.length ? list : typeof one === 'string' && one ? [one] : NONE;
  if (raw.length === 0 || raw[0] === 'None') return [];
  const ips: string[] = [];
  for (const r of raw) {
    const ip = sloppyIp(r);
    if (ip) ips.push(ip);
    else warn(`clusterIP ${quote(r)} is not an IP address, ignored`);
  }
  return ips;
}

/** A value in a warning: a string in quotes, anything else as show() has it. */
function quote(v: unknown): string {
  return typeof v === 'string' ? `"${show(v)}"` : show(v);
}

function affinityTimeout(spec: Record<string, unknown>, warn: (m: string) => void): number {
  const t = field(spec, 'sessionAffinityConfig', 'clientIP', 'timeoutSeconds');
  if (t === undefined || t === null) return DEFAULT_AFFINITY_TIMEOUT;
  if (Number.isInteger(t) && (t as number) > 0 && (t as number) <= 86400) return t as number;
  warn(`sessionAffinityConfig.clientIP.timeoutSeconds ${show(t)} out of range 1..86400, using ${DEFAULT_AFFINITY_TIMEOUT}`);
  return DEFAULT_AFFINITY_TIMEOUT;
}

/** A node port (nodePort, healthCheckNodePort): 1..65535, else 0 (none) with a warning. */
function nodePortOf(v: unknown, what: string, warn: (m: string) => void): number {
  if (v === undefined || v === null || v === 0) return 0;
  if (Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535) return v as number;
  warn(`${what} ${show(v)} out of range 1..65535, ignored`);
  return 0;
}

/** A Service port's protocol (absent: TCP); undefined for another or a value not a string. */
function protocolOf(p: unknown): IpvsProtocol | undefined {
  if (p === undefined || p === null) return 'tcp';
  return p === 'TCP' ? 'tcp' : p === 'UDP' ? 'udp' : p === 'SCTP' ? 'sctp' : undefined;
}

/** Valid IPs of `family` from a list; others of the family that fail to parse are warned about. */
function ipsOfFamily(list: readonly unknown[], family: AddressFamily, what: string, warn: (m: string) => void): readonly string[] {
  if (!list.length) return NONE;
  const out: string[] = [];
  for (const raw of list) {
    const ip = sloppyIp(raw);
    if (!ip) warn(`${what} ${quote(raw)} is not an IP address, ignored`);
    else if (ipFamily(ip) === family) out.push(ip);
  }
  return out;
}

/** What every port of a service shares, read once: its external IPs, load-balancer ingress IPs
 *  and source-range texts. */
interface SharedInfo {
  externalIPs: readonly unknown[];
  lbIPs: readonly unknown[];
  rangeTexts: readonly unknown[];
  internalLocal: boolean;
}

/** As kube-proxy's newBaseServiceInfo: the status's ingress IPs whatever the Service's type (a
 *  Service changed from LoadBalancer keeps its address until the controller clears it), and the
 *  spec's source ranges only (the old annotation is the cloud controller's, not the proxy's). */
function sharedInfo(svc: V1Service, spec: Record<string, unknown>, externalIPs: readonly unknown[], warn: (m: string) => void): SharedInfo {
  let lbIPs: unknown[] | readonly never[] = NONE;
  const ingress = field(svc, 'status', 'loadBalancer', 'ingress');
  if (present(ingress) && !Array.isArray(ingress)) warn(`status.loadBalancer.ingress ${show(ingress)} is not a list, ignored`);
  // ipMode Proxy (KEP-1860): the load balancer proxies itself; the IP must not be captured here.
  // An entry without an IP (a hostname; null) has nothing to program.
  for (const i of Array.isArray(ingress) ? ingress : NONE) {
    const ip = member(i, 'ip');
    if (present(ip) && ip !== '' && member(i, 'ipMode') !== 'Proxy') (lbIPs === NONE ? (lbIPs = []) : (lbIPs as unknown[])).push(ip);
  }
  return { externalIPs, lbIPs, rangeTexts: listOf(spec, 'loadBalancerSourceRanges', warn), internalLocal: spec.internalTrafficPolicy === 'Local' };
}

type PortBase = Pick<ServicePortModel, 'service' | 'clusterIP' | 'family' | 'externalLocal' | 'affinityTimeout'>;

/** A port of the Service's spec, its endpoints not yet given; undefined (warned) when unusable. */
function servicePort(port: unknown, index: number, shared: SharedInfo, base: PortBase, warn: (m: string) => void): ServicePortModel | undefined {
  if (!isMapping(port)) return void warn(`ports[${index}] ${show(port)} is not a mapping, ignored`);
  const number = port.port;
  const protocol = protocolOf(port.protocol);
  if (!protocol) return void warn(`port ${show(number)}: protocol ${show(port.protocol)} not supported, ignored`);
  if (!Number.isInteger(number) || (number as number) < 1 || (number as number) > 65535) return void warn(`port ${show(number)} out of range, ignored`);
  const name = port.name;
  if (present(name) && typeof name !== 'string') return void warn(`port ${show(number)}: name ${show(name)} is not a string, ignored`);
  const portName = (name as string | null | undefined) ?? '';
  const sourceRanges = cidrList(shared.rangeTexts, base.family);
  for (const bad of sourceRanges.rejected) warn(`loadBalancerSourceRanges: "${show(bad)}" is not a CIDR, ignored`);
  return {
    service: base.service,
    // joined, not a template: a flat string, not two concatenations over the service's (kept per port)
    name: portName ? [base.service, portName].join(':') : base.service,
    portName,
    protocol,
    family: base.family,
    port: number as number,
    nodePort: nodePortOf(port.nodePort, `port ${show(number)}: nodePort`, warn),
    clusterIP: base.clusterIP,
    externalIPs: ipsOfFamily(shared.externalIPs, base.family, 'externalIP', warn),
    loadBalancerIPs: ipsOfFamily(shared.lbIPs, base.family, 'load balancer ingress IP', warn),
    sourceRanges,
    internalLocal: shared.internalLocal,
    externalLocal: base.externalLocal,
    affinityTimeout: base.affinityTimeout,
    cluster: NONE,
    local: NONE,
    nodeLocal: NONE,
  };
}
