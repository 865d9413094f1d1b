// Addresses of the service CIDRs that no Service holds (kube-proxy's "unallocated ClusterIPs"),
// with real packets through `ipvsync sync -f --proxy-mode nftables` (the packet-flow lab): new
// connections to them are dropped, from pods, from outside and from the node; a cluster IP on a
// port that is no service is still refused; the ranges come from the ServiceCIDR objects in the
// manifests (networking.k8s.io/v1) over --service-cidrs, and from the flag without them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FlowLab, expectedOutput, type FlowCase, type FlowSpec } from '../helpers/packet-flows.js';

const NODE_IPS = ['192.168.0.2', '192.168.1.2', '192.168.99.11', '2001:db8::1', '2001:db8:1::2'];
const flow = (name: string, source: string, dest: string, port: number, output: string, protocol: 'TCP' | 'UDP' = 'TCP'): FlowSpec => ({ name, source, protocol, dest, port, output, masq: false });

const SERVICE = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'svc1', namespace: 'ns1' },
  spec: { clusterIP: '172.30.0.41', ports: [{ name: 'p80', port: 80, protocol: 'TCP' }] },
};
const SLICE = {
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name: 'svc1-1', namespace: 'ns1', labels: { 'kubernetes.io/service-name': 'svc1' } },
  addressType: 'IPv4',
  endpoints: [{ addresses: ['10.180.0.1'] }],
  ports: [{ name: 'p80', port: 80, protocol: 'TCP' }],
};
const serviceCIDR = (name: string, cidrs: string[]) => ({ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name }, spec: { cidrs } });

function flowCase(file: string, serviceCIDRs: string[], objects: FlowCase['objects'], flows: FlowSpec[]): FlowCase {
  return {
    file,
    upstream: { repo: 'kubernetes/kubernetes', path: 'pkg/proxy/nftables/proxier_test.go', commit: '030880a5dc5449403c6d1f0aa146a7dc21d6c6dc', test: 'TestClusterIPGeneral' },
    family: 'ipv4',
    nodeName: 'test-node',
    nodeIPs: NODE_IPS,
    clusterCIDR: '10.0.0.0/8',
    serviceCIDRs,
    nodePortAddresses: ['192.168.0.2/32'],
    masqueradeAll: false,
    other: [],
    objects,
    flows,
  };
}

const CASES = [
  flowCase('a ServiceCIDR object, no flag', [], [SERVICE, SLICE, serviceCIDR('kubernetes', ['172.30.0.0/16', 'fd00:10:96::/112'])], [
    flow('pod to the cluster IP', '10.0.0.2', '172.30.0.41', 80, '10.180.0.1:80'),
    flow('pod to the cluster IP on a port that is no service', '10.0.0.2', '172.30.0.41', 81, 'REJECT'),
    flow('pod to an unallocated address', '10.0.0.2', '172.30.0.50', 80, 'DROP'),
    flow('pod to an unallocated address, UDP', '10.0.0.2', '172.30.200.1', 53, 'DROP', 'UDP'),
    flow('outside to an unallocated address', '203.0.113.2', '172.30.0.50', 80, 'DROP'),
    flow('node to an unallocated address', '192.168.0.2', '172.30.0.50', 80, 'DROP'),
    flow('pod to an address outside the range', '10.0.0.2', '172.31.0.50', 80, ''),
  ]),
  flowCase('a ServiceCIDR object wins over --service-cidrs', ['172.31.0.0/16'], [SERVICE, SLICE, serviceCIDR('kubernetes', ['172.30.0.0/16']), serviceCIDR('more', ['172.29.0.0/16'])], [
    flow('pod to an unallocated address of the first object', '10.0.0.2', '172.30.0.50', 80, 'DROP'),
    flow('pod to an unallocated address of the second object', '10.0.0.2', '172.29.0.50', 80, 'DROP'),
    flow("pod to an address of the flag's range only", '10.0.0.2', '172.31.0.50', 80, ''),
  ]),
  flowCase('--service-cidrs without objects', ['172.31.0.0/16'], [SERVICE, SLICE], [
    flow("pod to an unallocated address of the flag's range", '10.0.0.2', '172.31.0.50', 80, 'DROP'),
    flow('pod to an address the flag does not name', '10.0.0.2', '172.30.0.50', 80, ''),
    flow('pod to the cluster IP (outside the range: still served)', '10.0.0.2', '172.30.0.41', 80, '10.180.0.1:80'),
  ]),
  flowCase('no service CIDRs known: nothing dropped', [], [SERVICE, SLICE], [flow('pod to an address no Service holds', '10.0.0.2', '172.30.0.50', 80, '')]),
];

test('unallocated addresses of the service CIDRs are dropped; the ranges from ServiceCIDR objects, else --service-cidrs; real packets', async (t) => {
  const lab = await FlowLab.open(NODE_IPS);
  t.after(() => lab.dispose());
  for (const c of CASES) {
    await lab.program(c);
    for (const f of c.flows) {
      const got = await lab.flow(f);
      assert.deepEqual({ output: got.output, masq: got.masq }, { output: expectedOutput(f.output), masq: f.masq }, `${c.file}: ${f.name}`);
    }
  }
});
