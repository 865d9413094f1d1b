// The benchmark workload: S services × E endpoints, described once and rendered for every tool
// (Service/EndpointSlice manifests for ipvsync, kube-proxy iptables-mode restore input,
// kube-proxy IPVS-mode ipvsadm/ipset input, a kube-proxy-nftables-mode-shaped nft ruleset).
// Pure: no I/O.
//
// Addressing (room for 50k services × 10 endpoints):
//   service i        bench/svc-i, port "http" 80/TCP → targetPort 8080, ClusterIP 172.20.0.0/16
//   endpoint (i, d)  pod address in the cluster CIDR 10.64.0.0/10 (index i*E+d from 10.64.0.1)
//   NodePort         every 10th service while the 30000-32767 range lasts: 30000 + i/10
//   node             bench-node, 192.168.100.1

export const NAMESPACE = 'bench';
export const CLUSTER_CIDR = '10.64.0.0/10';
export const SERVICE_CIDR = '172.20.0.0/16';
export const NODE_IP = '192.168.100.1';
export const NODE_NAME = 'bench-node';
export const PORT_NAME = 'http';
export const SERVICE_PORT = 80;
export const TARGET_PORT = 8080;
export const MASQ_MARK = '0x4000';
const NODEPORT_MIN = 30000;
const NODEPORT_MAX = 32767;

export interface BenchEndpoint {
  ip: string;
  port: number;
}

export interface BenchService {
  index: number;
  namespace: string;
  name: string;
  portName: string;
  protocol: 'tcp';
  clusterIP: string;
  port: number;
  nodePort?: number;
  /** Sorted as kube-proxy sorts them (by "ip:port" string). */
  endpoints: BenchEndpoint[];
}

export interface Workload {
  services: BenchService[];
  endpointsPerService: number;
}

function ipv4(base: number, offset: number): string {
  const n = (base + offset) >>> 0;
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}

const SVC_BASE = (172 << 24) | (20 << 16);
const POD_BASE = (10 << 24) | (64 << 16);

export function clusterIpOf(i: number): string {
  if (i + 1 >= 65535) throw new RangeError(`service ${i} does not fit ${SERVICE_CIDR}`);
  return ipv4(SVC_BASE, i + 1);
}

export function podIpOf(n: number): string {
  if (n + 1 >= 1 << 22) throw new RangeError(`pod ${n} does not fit ${CLUSTER_CIDR}`);
  return ipv4(POD_BASE, n + 1);
}

export function nodePortOf(i: number): number | undefined {
  if (i % 10 !== 0) return undefined;
  const p = NODEPORT_MIN + i / 10;
  return p <= NODEPORT_MAX ? p : undefined;
}

const byEndpoint = (a: BenchEndpoint, b: BenchEndpoint) => {
  const x = `${a.ip}:${a.port}`;
  const y = `${b.ip}:${b.port}`;
  return x < y ? -1 : x > y ? 1 : 0;
};

export function serviceOf(i: number, endpoints: number): BenchService {
  const eps = Array.from({ length: endpoints }, (_, d) => ({ ip: podIpOf(i * endpoints + d), port: TARGET_PORT })).sort(byEndpoint);
  const np = nodePortOf(i);
  return {
    index: i,
    namespace: NAMESPACE,
    name: `svc-${i}`,
    portName: PORT_NAME,
    protocol: 'tcp',
    clusterIP: clusterIpOf(i),
    port: SERVICE_PORT,
    ...(np !== undefined ? { nodePort: np } : {}),
    endpoints: eps,
  };
}

export function workload(services: number, endpointsPerService = 10): Workload {
  return { services: Array.from({ length: services }, (_, i) => serviceOf(i, endpointsPerService)), endpointsPerService };
}

/** The service whose endpoint the one-endpoint change replaces (the middle one). */
export function changedIndex(w: Workload): number {
  return Math.floor(w.services.length / 2);
}

/** The replacement pod address: outside every generated one, inside the cluster CIDR. */
export const REPLACEMENT_IP = '10.127.255.1';

/** The workload with one endpoint of the middle service replaced (a pod rescheduled). */
export function withOneEndpointChanged(w: Workload): Workload {
  const i = changedIndex(w);
  const old = w.services[i]!;
  const eps = [{ ip: REPLACEMENT_IP, port: TARGET_PORT }, ...old.endpoints.slice(1)].sort(byEndpoint);
  const services = w.services.slice();
  services[i] = { ...old, endpoints: eps };
  return { ...w, services };
}

/** "namespace/name:port" as kube-proxy prints a ServicePortName. */
export function servicePortName(s: BenchService): string {
  return `${s.namespace}/${s.name}:${s.portName}`;
}
