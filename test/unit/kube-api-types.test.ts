// ipvsync's own Kubernetes object types (src/kube/api-types.ts) against @kubernetes/client-node's:
// an embedder's client objects must typecheck where ipvsync takes objects, and the objects
// ipvsync makes (slimmed, mirrored from Endpoints) where the client takes them. The checks are
// the assignments (this file does not compile if one breaks); the test runs them on full
// objects, every member the proxy reads set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type * as k8s from '@kubernetes/client-node';
import type { ApiAccess, Cluster, User } from '../../src/kube/kubeconfig.js';
import type { KubernetesObject, V1EndpointSlice, V1Endpoints, V1Node, V1Service } from '../../src/kube/api-types.js';
import { serviceKey } from '../../src/engine/ipvs-model.js';
import { endpointsToSlices } from '../../src/kube/manifests.js';
import { slimService, slimSlice } from '../../src/kube/slim.js';
import { translate } from '../../src/proxy/ipvs/plane.js';

const service: k8s.V1Service = {
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'web', namespace: 'default', labels: { app: 'web' }, annotations: { 'ipvsync.io/scheduler': 'mh' }, resourceVersion: '7', creationTimestamp: new Date(0) },
  spec: {
    type: 'LoadBalancer',
    clusterIP: '10.96.0.10',
    clusterIPs: ['10.96.0.10'],
    selector: { app: 'web' },
    ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30080 }],
    externalIPs: ['192.0.2.10'],
    sessionAffinity: 'ClientIP',
    sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } },
    externalTrafficPolicy: 'Local',
    internalTrafficPolicy: 'Cluster',
    healthCheckNodePort: 32000,
    loadBalancerSourceRanges: ['203.0.113.0/24'],
  },
  status: { loadBalancer: { ingress: [{ ip: '198.51.100.1', ipMode: 'VIP' }] }, conditions: [] },
};

const slice: k8s.V1EndpointSlice = {
  metadata: { name: 'web-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
  addressType: 'IPv4',
  ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
  endpoints: [
    {
      addresses: ['10.244.1.5'],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: 'node-a',
      zone: 'a',
      hints: { forZones: [{ name: 'a' }], forNodes: [{ name: 'node-a' }] },
      targetRef: { kind: 'Pod', name: 'web-0' },
    },
  ],
};

const endpoints: k8s.V1Endpoints = {
  metadata: { name: 'legacy', namespace: 'default' },
  subsets: [{ addresses: [{ ip: '10.244.1.6', nodeName: 'node-a' }], notReadyAddresses: [{ ip: '10.244.1.7' }], ports: [{ name: 'http', port: 8080, protocol: 'TCP' }] }],
};

const node: k8s.V1Node = {
  metadata: { name: 'node-a', labels: { 'topology.kubernetes.io/zone': 'a' }, deletionTimestamp: new Date(0) },
  spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }], podCIDR: '10.244.1.0/24' },
};

test("the client's objects are ipvsync's objects", () => {
  const ours: [V1Service, V1EndpointSlice, V1Endpoints, V1Node, KubernetesObject] = [service, slice, endpoints, node, service];
  const model = translate({ services: [service], endpointSlices: [slice], node: { name: 'node-a', addresses: ['192.168.1.10'] } });
  assert.equal(ours.length, 5);
  const web = model.services.find((s) => serviceKey(s) === 'inet|tcp|10.96.0.10|80');
  assert.deepEqual(web?.destinations.map((d) => d.address), ['10.244.1.5']);
});

test("ipvsync's Services and EndpointSlices are the client's", () => {
  const svc: k8s.V1Service = slimService(service);
  const slices: k8s.V1EndpointSlice[] = [slimSlice(slice), ...endpointsToSlices(endpoints)];
  assert.equal(svc.metadata?.name, 'web');
  assert.deepEqual(slices.map((s) => s.endpoints.length), [1, 2]); // the subset's ready and not-ready address
});

test("the client's KubeConfig, Cluster and User fit where ipvsync takes its own", () => {
  const access = (kc: k8s.KubeConfig): ApiAccess => kc;
  const cluster = (c: k8s.Cluster): Cluster => c;
  const user = (u: k8s.User): User => u;
  // and back: the full client is handed ipvsync's cluster and user (kubeconfig.ts, exec plugins)
  const toClient = (c: Cluster, u: User): [k8s.Cluster, k8s.User] => [c, u];
  assert.equal([access, cluster, user, toClient].length, 4);
});
