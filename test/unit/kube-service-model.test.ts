// The backend-agnostic service model: what kube-proxy's semantics make of a Service and its
// EndpointSlices, before any data plane. Each case reads the model itself — ports per family,
// frontends' addresses, policies, affinity, and the endpoints each kind of traffic may use — so
// a second data plane can rely on it without reading a Kubernetes object.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  externalEndpoints,
  internalEndpoints,
  modelContext,
  serviceModel,
  DEFAULT_AFFINITY_TIMEOUT,
  type ServicePortModel,
} from '../../src/kube/service-model.js';
import { NODE, slice, svc } from '../fixtures/kube/builders.js';
import { translate } from '../../src/proxy/ipvs/plane.js';

const ctx = (config = {}, node = NODE) => modelContext(node, config);
const eps = (list: readonly { address: string; port: number }[]) => list.map((e) => `${e.address}:${e.port}`);
/** The port's plain facts, without its endpoint lists. */
const facts = (p: ServicePortModel) => {
  const { cluster: _c, local: _l, nodeLocal: _n, sourceRanges, ...rest } = p;
  return { ...rest, sourceRanges: sourceRanges.texts };
};

test('a dual-stack NodePort service: one port per family, each resolving its target port by name per slice', () => {
  const s = svc('web', {
    type: 'NodePort',
    clusterIPs: ['10.96.0.10', 'fd00::10'],
    ports: [{ name: 'http', port: 80, nodePort: 30080 }, { name: 'dns', port: 53, protocol: 'UDP' }],
    externalIPs: ['203.0.113.9', '2001:db8::9', 'not-an-ip'],
  });
  const slices = [
    slice('web', 'web-v4', [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }], [{ ip: '10.244.1.2', node: 'node-a' }, { ip: '10.244.2.2', node: 'node-b' }]),
    slice('web', 'web-v6', [{ name: 'http', port: 8081 }], [{ ip: 'fd00:244::2', node: 'node-b' }]),
  ];
  const m = serviceModel(s, slices, ctx());
  assert.equal(m.name, 'default/web');
  assert.deepEqual(
    m.ports.map((p) => [p.name, p.family, p.protocol, p.clusterIP, p.port, p.nodePort, p.externalIPs]),
    [
      ['default/web:http', 'inet', 'tcp', '10.96.0.10', 80, 30080, ['203.0.113.9']],
      ['default/web:dns', 'inet', 'udp', '10.96.0.10', 53, 0, ['203.0.113.9']],
      ['default/web:http', 'inet6', 'tcp', 'fd00::10', 80, 30080, ['2001:db8::9']],
      ['default/web:dns', 'inet6', 'udp', 'fd00::10', 53, 0, ['2001:db8::9']],
    ],
  );
  assert.deepEqual(eps(m.ports[0]!.cluster), ['10.244.1.2:8080', '10.244.2.2:8080']);
  assert.deepEqual(eps(m.ports[0]!.local), ['10.244.1.2:8080'], 'node-a is this node');
  assert.deepEqual(eps(m.ports[1]!.cluster), ['10.244.1.2:5353', '10.244.2.2:5353']);
  assert.deepEqual(eps(m.ports[2]!.cluster), ['fd00:244::2:8081']);
  assert.deepEqual(m.ports[3]!.cluster, [], 'the v6 slice has no dns port');
  assert.deepEqual(m.warnings, ['externalIP "not-an-ip" is not an IP address, ignored'], 'warned once, not per family');
  assert.equal(m.externalLocal, false);
});

test('traffic policies pick the endpoints each kind of frontend uses; a Local LoadBalancer gets its health check', () => {
  const s = svc(
    'lb',
    {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.20',
      ports: [{ port: 443, nodePort: 30443 }],
      externalTrafficPolicy: 'Local',
      internalTrafficPolicy: 'Cluster',
      healthCheckNodePort: 32000,
      loadBalancerSourceRanges: ['203.0.113.7/24', 'bogus'],
      sessionAffinity: 'ClientIP',
    },
    { ingress: [{ ip: '198.51.100.1' }, { ip: '198.51.100.2', ipMode: 'Proxy' }, { hostname: 'lb.example' }] },
  );
  const sl = slice('lb', 'lb-1', [{ port: 8443 }], [
    { ip: '10.244.1.7', node: 'node-a' },
    { ip: '10.244.1.8', node: 'node-a', ready: false, serving: true, terminating: true },
    { ip: '10.244.3.7', node: 'node-c' },
  ]);
  const m = serviceModel(s, [sl], ctx());
  assert.equal(m.externalLocal, true);
  assert.deepEqual(m.healthCheck, { nodePort: 32000, service: 'default/lb', localEndpoints: 1 });
  const [p] = m.ports;
  assert.deepEqual(facts(p!), {
    service: 'default/lb',
    name: 'default/lb',
    portName: '',
    protocol: 'tcp',
    family: 'inet',
    port: 443,
    nodePort: 30443,
    clusterIP: '10.96.0.20',
    externalIPs: [],
    loadBalancerIPs: ['198.51.100.1'],
    sourceRanges: ['203.0.113.0/24'],
    internalLocal: false,
    externalLocal: true,
    affinityTimeout: DEFAULT_AFFINITY_TIMEOUT,
  });
  assert.deepEqual(eps(internalEndpoints(p!)), ['10.244.1.7:8443', '10.244.3.7:8443'], 'cluster IP: every ready endpoint');
  assert.deepEqual(eps(externalEndpoints(p!)), ['10.244.1.7:8443'], 'external: ready node-local only');
  assert.deepEqual(m.warnings, ['loadBalancerSourceRanges: "bogus" is not a CIDR, ignored']);
});

test("load-balancer IPs and source ranges as kube-proxy reads them: the status's ingress IPs whatever the type, the spec's ranges only (not the cloud controller's annotation)", () => {
  // A Service changed from LoadBalancer to NodePort keeps its ingress until the controller clears it.
  const was = svc('was-lb', { type: 'NodePort', clusterIP: '10.96.0.21', ports: [{ port: 80, nodePort: 30021 }], loadBalancerSourceRanges: ['203.0.113.0/24'] }, { ingress: [{ ip: '198.51.100.21' }] });
  const [p] = serviceModel(was, [], ctx()).ports;
  assert.deepEqual([p!.loadBalancerIPs, p!.sourceRanges.texts], [['198.51.100.21'], ['203.0.113.0/24']]);
  // a ClusterIP Service with an ingress IP: reached from outside through it
  const cip = svc('cip', { clusterIP: '10.96.0.22', ports: [{ port: 80 }], internalTrafficPolicy: 'Local' }, { ingress: [{ ip: '198.51.100.22' }] });
  assert.deepEqual(serviceModel(cip, [], ctx()).ports[0]!.loadBalancerIPs, ['198.51.100.22']);
  // the annotation alone: no source ranges (kube-proxy reads spec.loadBalancerSourceRanges only)
  const annotated = svc('ann', { type: 'LoadBalancer', clusterIP: '10.96.0.23', ports: [{ port: 80, nodePort: 30023 }] }, {
    ingress: [{ ip: '198.51.100.23' }],
    annotations: { 'service.beta.kubernetes.io/load-balancer-source-ranges': '203.0.113.0/24' },
  });
  const m = serviceModel(annotated, [], ctx());
  assert.deepEqual([m.ports[0]!.loadBalancerIPs, m.ports[0]!.sourceRanges.texts, m.warnings], [['198.51.100.23'], [], []]);
});

test('node-local endpoints fall back to serving-terminating ones; internalTrafficPolicy Local uses them', () => {
  const s = svc('itp', { clusterIP: '10.96.0.30', ports: [{ port: 80 }], internalTrafficPolicy: 'Local' });
  const sl = slice('itp', 'itp-1', [{ port: 80 }], [
    { ip: '10.244.1.9', node: 'node-a', ready: false, serving: true, terminating: true },
    { ip: '10.244.2.9', node: 'node-b' },
  ]);
  const [p] = serviceModel(s, [sl], ctx()).ports;
  assert.equal(p!.internalLocal, true);
  assert.deepEqual(eps(p!.local), ['10.244.1.9:80']);
  assert.deepEqual(eps(internalEndpoints(p!)), ['10.244.1.9:80']);
  assert.deepEqual(eps(p!.cluster), ['10.244.2.9:80']);
});

test('zone hints narrow the cluster endpoints when every endpoint has one and one names this zone', () => {
  const s = svc('hinted', { clusterIP: '10.96.0.40', ports: [{ port: 80 }] });
  const sl = slice('hinted', 'h-1', [{ port: 80 }], [
    { ip: '10.244.1.1', zones: ['zone-a'] },
    { ip: '10.244.2.1', zones: ['zone-b'] },
  ]);
  assert.deepEqual(eps(serviceModel(s, [sl], ctx()).ports[0]!.cluster), ['10.244.1.1:80']);
  assert.deepEqual(eps(serviceModel(s, [sl], ctx({}, { ...NODE, zone: 'zone-x' })).ports[0]!.cluster), ['10.244.1.1:80', '10.244.2.1:80']);
});

test('services that program nothing have no ports: headless, ExternalName, unallocated, another proxy', () => {
  const c = ctx();
  assert.deepEqual(serviceModel(svc('h', { clusterIP: 'None', ports: [{ port: 80 }] }), [], c).ports, []);
  assert.deepEqual(serviceModel(svc('x', { type: 'ExternalName', externalName: 'example.com', ports: [{ port: 80 }] }), [], c).ports, []);
  assert.deepEqual(serviceModel(svc('u', { ports: [{ port: 80 }] }), [], c).ports, []);
  const other = svc('o', { clusterIP: '10.96.0.50', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/service-proxy-name': 'cilium' } });
  assert.deepEqual(serviceModel(other, [], c).ports, []);
  assert.equal(serviceModel(other, [], ctx({ proxyName: 'cilium' })).ports.length, 1, 'served when it names this proxy');
});

test('the context reads the node and configuration once: NodePort addresses per family, CIDRs as networks', () => {
  const c = modelContext(
    { name: 'n', addresses: ['10.0.0.11', '192.168.1.5', 'fe80::1', '2001:db8::11', 'junk'] },
    { nodePortAddresses: ['10.0.0.0/8', 'nope'], clusterCIDRs: ['10.244.1.5/16'] },
  );
  assert.deepEqual(c.nodePortAddresses, { inet: ['10.0.0.11'], inet6: ['2001:db8::11'] });
  assert.deepEqual(c.clusterCIDRs, ['10.244.0.0/16']);
  assert.deepEqual(
    c.warnings.map((w) => w.message),
    ['nodePortAddresses: "nope" is not a CIDR, ignored'],
  );
});

test('addresses with leading zeros (as older API servers stored them) are read as kube-proxy reads them: decimal, in every field, source ranges and endpoints included; both data planes program them', () => {
  const s = svc(
    'old',
    { type: 'LoadBalancer', clusterIP: '172.30.0.041', externalIPs: ['192.168.099.022'], loadBalancerSourceRanges: ['203.0.113.000/025'], ports: [{ name: 'p80', port: 80, nodePort: 3001 }] },
    { ingress: [{ ip: '1.2.3.004' }] },
  );
  const m = serviceModel(s, [slice('old', 'old-1', [{ name: 'p80', port: 80 }], [{ ip: '10.180.00.001', node: 'node-b' }])], ctx({ clusterCIDRs: ['10.0.0.0/8'] }));
  assert.deepEqual(m.warnings, []);
  const [p] = m.ports;
  assert.equal(p!.clusterIP, '172.30.0.41');
  assert.deepEqual(p!.externalIPs, ['192.168.99.22']);
  assert.deepEqual(p!.loadBalancerIPs, ['1.2.3.4']);
  assert.deepEqual(p!.sourceRanges.texts, ['203.0.113.0/25']);
  assert.deepEqual(eps(p!.cluster), ['10.180.0.1:80']);
  // the IPVS data plane: its virtual servers and VIPs
  const ipvs = translate({ services: [s], endpointSlices: [slice('old', 'old-1', [{ name: 'p80', port: 80 }], [{ ip: '10.180.00.001', node: 'node-b' }])], node: NODE, config: {} });
  assert.deepEqual(ipvs.warnings, []);
  assert.deepEqual(ipvs.vips.sort(), ['1.2.3.4', '172.30.0.41', '192.168.99.22']);
  for (const v of ipvs.services.filter((x) => 'address' in x && x.address !== NODE.addresses[0])) assert.deepEqual(v.destinations.map((d) => d.address), ['10.180.0.1']);
});
