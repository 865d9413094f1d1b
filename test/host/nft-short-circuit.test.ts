// externalTrafficPolicy: Local in the nftables data plane, with real packets (the packet-flow
// lab, test/helpers/packet-flows.ts): an external frontend (load-balancer IP, external IP,
// NodePort) serves only this node's endpoints to traffic from elsewhere, unmasqueraded, and
// drops it when there is none here; pods and the node itself reach every endpoint of the
// service through it (kube-proxy's short-circuit), the node's traffic masqueraded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FlowLab, expectedOutput, type FlowCase, type FlowSpec } from '../helpers/packet-flows.js';

const NODE_IPS = ['192.168.0.2', '192.168.1.2', '192.168.99.11', '2001:db8::1', '2001:db8:1::2'];

/** A case in the lab's form: kube-proxy's fake proxier's node and configuration. */
function flowCase(name: string, objects: FlowCase['objects'], flows: FlowSpec[], test = name): FlowCase {
  return {
    file: name,
    upstream: { repo: 'kubernetes/kubernetes', path: 'pkg/proxy/nftables/proxier_test.go', commit: '030880a5dc5449403c6d1f0aa146a7dc21d6c6dc', test },
    family: 'ipv4',
    nodeName: 'test-node',
    nodeIPs: NODE_IPS,
    clusterCIDR: '10.0.0.0/8',
    serviceCIDRs: [],
    nodePortAddresses: ['192.168.0.2/32', '2001:db8::1/128'],
    masqueradeAll: false,
    other: [],
    objects,
    flows,
  };
}

const service = (protocol: 'TCP' | 'UDP') => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'svc1', namespace: 'ns1' },
  spec: {
    type: 'LoadBalancer',
    externalTrafficPolicy: 'Local',
    clusterIP: '172.30.0.41',
    externalIPs: ['192.168.99.11'],
    ports: [{ name: 'p80', port: 80, protocol, nodePort: 3001, targetPort: 80 }],
    healthCheckNodePort: 30000,
  },
  status: { loadBalancer: { ingress: [{ ip: '1.2.3.4' }] } },
});
const slice = (protocol: 'TCP' | 'UDP', endpoints: Array<{ addresses: string[]; nodeName?: string }>) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name: 'svc1-1', namespace: 'ns1', labels: { 'kubernetes.io/service-name': 'svc1' } },
  addressType: 'IPv4',
  endpoints,
  ports: [{ name: 'p80', port: 80, protocol }],
});
const flow = (name: string, source: string, dest: string, port: number, output: string, masq: boolean, protocol: 'TCP' | 'UDP' = 'TCP'): FlowSpec => ({ name, source, protocol, dest, port, output, masq });

const CASES: FlowCase[] = [
  // upstream's TestExternalTrafficPolicyLocal, as it is
  flowCase('one endpoint here', [service('TCP'), slice('TCP', [{ addresses: ['10.180.0.1'] }, { addresses: ['10.180.2.1'], nodeName: 'test-node' }])], [
    flow('pod to cluster IP hits both endpoints, unmasqueraded', '10.0.0.2', '172.30.0.41', 80, '10.180.0.1:80, 10.180.2.1:80', false),
    flow('pod to external IP hits both endpoints, unmasqueraded', '10.0.0.2', '192.168.99.11', 80, '10.180.0.1:80, 10.180.2.1:80', false),
    flow('external to external IP hits only local endpoint, unmasqueraded', '203.0.113.2', '192.168.99.11', 80, '10.180.2.1:80', false),
    flow('pod to LB IP hits only both endpoints, unmasqueraded', '10.0.0.2', '1.2.3.4', 80, '10.180.0.1:80, 10.180.2.1:80', false),
    flow('external to LB IP hits only local endpoint, unmasqueraded', '203.0.113.2', '1.2.3.4', 80, '10.180.2.1:80', false),
    flow('pod to NodePort hits both endpoints, unmasqueraded', '10.0.0.2', '192.168.0.2', 3001, '10.180.0.1:80, 10.180.2.1:80', false),
    flow('external to NodePort hits only local endpoint, unmasqueraded', '203.0.113.2', '192.168.0.2', 3001, '10.180.2.1:80', false),
  ], 'TestExternalTrafficPolicyLocal'),
  // no endpoint on this node: what failed before (a pod reaching its ingress controller's LB IP)
  ...(['TCP', 'UDP'] as const).map((p) =>
    flowCase(`no endpoint here (${p})`, [service(p), slice(p, [{ addresses: ['10.180.0.1'] }, { addresses: ['10.180.0.2'], nodeName: 'other-node' }])], [
      flow('pod to LB IP reaches every endpoint, unmasqueraded', '10.0.0.2', '1.2.3.4', 80, '10.180.0.1:80, 10.180.0.2:80', false, p),
      flow('pod to NodePort reaches every endpoint, unmasqueraded', '10.0.0.2', '192.168.0.2', 3001, '10.180.0.1:80, 10.180.0.2:80', false, p),
      flow('pod to external IP reaches every endpoint, unmasqueraded', '10.0.0.2', '192.168.99.11', 80, '10.180.0.1:80, 10.180.0.2:80', false, p),
      flow('node to LB IP reaches every endpoint, masqueraded', '192.168.0.2', '1.2.3.4', 80, '10.180.0.1:80, 10.180.0.2:80', true, p),
      flow('node to its NodePort reaches every endpoint, masqueraded', '192.168.0.2', '192.168.0.2', 3001, '10.180.0.1:80, 10.180.0.2:80', true, p),
      flow('external to LB IP is dropped', '203.0.113.2', '1.2.3.4', 80, 'DROP', false, p),
      flow('external to NodePort is dropped', '203.0.113.2', '192.168.0.2', 3001, 'DROP', false, p),
      flow('external to external IP is dropped', '203.0.113.2', '192.168.99.11', 80, 'DROP', false, p),
      flow('pod to cluster IP reaches every endpoint', '10.0.0.2', '172.30.0.41', 80, '10.180.0.1:80, 10.180.0.2:80', false, p),
    ]),
  ),
];

test('externalTrafficPolicy Local: pods and the node reach every endpoint through the external frontends, others only this node’s, real packets', async (t) => {
  const lab = await FlowLab.open(NODE_IPS);
  t.after(() => lab.dispose());
  for (const c of CASES) {
    await lab.program(c);
    for (const f of c.flows) {
      const got = await lab.flow(f);
      assert.deepEqual({ output: got.output, masq: got.masq }, { output: expectedOutput(f.output), masq: f.masq }, `${c.file}: ${f.name} (${got.packets} packets)`);
    }
  }
});
