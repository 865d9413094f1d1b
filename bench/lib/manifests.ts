// Service + EndpointSlice manifests for a workload, as `ipvsync sync -f` and
// `ipvsync proxy --manifests` read them: two JSON documents, a v1 List of Services and a v1 List
// of EndpointSlices (one slice per service, its endpoints spread over three nodes).
import { CLUSTER_CIDR, NODE_NAME, type BenchService } from './workload.js';

export function serviceObject(s: BenchService): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: s.name, namespace: s.namespace },
    spec: {
      type: s.nodePort !== undefined ? 'NodePort' : 'ClusterIP',
      clusterIP: s.clusterIP,
      clusterIPs: [s.clusterIP],
      ipFamilies: ['IPv4'],
      ports: [{ name: s.portName, port: s.port, targetPort: s.endpoints[0]?.port ?? s.port, protocol: 'TCP', ...(s.nodePort !== undefined ? { nodePort: s.nodePort } : {}) }],
    },
  };
}

export function sliceObject(s: BenchService): Record<string, unknown> {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${s.name}-1`, namespace: s.namespace, labels: { 'kubernetes.io/service-name': s.name } },
    addressType: 'IPv4',
    ports: [{ name: s.portName, port: s.endpoints[0]?.port ?? s.port, protocol: 'TCP' }],
    endpoints: s.endpoints.map((e, i) => ({ addresses: [e.ip], conditions: { ready: true }, nodeName: i % 3 === 0 ? NODE_NAME : `node-${i % 3}` })),
  };
}

const list = (items: unknown[]) => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });

/** File name → content: services.json and endpointslices.json. */
export function manifestFiles(services: readonly BenchService[]): Record<string, string> {
  return {
    'services.json': list(services.map(serviceObject)) + '\n',
    'endpointslices.json': list(services.map(sliceObject)) + '\n',
  };
}

/** The `ipvsync sync` flags that match the other generators' assumptions. */
export function syncFlags(nodeIp: string): string[] {
  return ['--node-name', NODE_NAME, '--node-ip', nodeIp, '--cluster-cidr', CLUSTER_CIDR, '--no-sysctl'];
}
