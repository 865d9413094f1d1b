// Service + EndpointSlice manifests for a workload, as `ipvsync sync -f` and
// `ipvsync proxy --manifests` read them: two files, a v1 List of Services and a v1 List of
// EndpointSlices (one slice per service, its endpoints spread over three nodes), as JSON or YAML
// (what `kubectl get -o json|yaml` writes), or one YAML document per object.
import { renderYaml } from '../../src/yaml.js';
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

/** json: a List each (JSON); yaml: a List each, as `kubectl get -o yaml` writes it;
 *  yaml-documents: one `---`-separated document per object. */
export type ManifestFormat = 'json' | 'yaml' | 'yaml-documents';
export const MANIFEST_FORMATS: readonly ManifestFormat[] = ['json', 'yaml', 'yaml-documents'];

/** A List's items one by one: js-yaml's dump of one 20k-item List takes over a minute (its
 *  time grows with the square of the items), of 20k objects a second. */
function yamlList(items: readonly unknown[]): string {
  return `apiVersion: v1\nkind: List\nitems:\n${items.map((o) => `- ${renderYaml(o).replace(/\n(?=.)/g, '\n  ')}`).join('')}`;
}

function render(items: readonly unknown[], format: ManifestFormat): string {
  if (format === 'json') return JSON.stringify({ apiVersion: 'v1', kind: 'List', items }) + '\n';
  if (format === 'yaml') return yamlList(items);
  return items.map((o) => renderYaml(o)).join('---\n');
}

/** File name → content: services.json and endpointslices.json (.yaml for the YAML formats). */
export function manifestFiles(services: readonly BenchService[], format: ManifestFormat = 'json'): Record<string, string> {
  const ext = format === 'json' ? 'json' : 'yaml';
  return {
    [`services.${ext}`]: render(services.map(serviceObject), format),
    [`endpointslices.${ext}`]: render(services.map(sliceObject), format),
  };
}

/** The `ipvsync sync` flags that match the other generators' assumptions. */
export function syncFlags(nodeIp: string): string[] {
  return ['--node-name', NODE_NAME, '--node-ip', nodeIp, '--cluster-cidr', CLUSTER_CIDR, '--no-sysctl'];
}
