// Table-driven semantics tests: Services + EndpointSlices + node → exactly the IPVS table, VIPs
// and glue kube-proxy's IPVS mode would program.
import { test } from 'node:test';
import { elementList } from '../../src/kernel/nftables.js';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { translate } from '../../src/proxy/ipvs/plane.js';
import type { NodeInfo, ProxyConfig } from '../../src/kube/types.js';
import type { ProxyModel } from '../../src/proxy/ipvs/types.js';
import { NODE, render, slice, svc } from '../fixtures/kube/builders.js';
import { glueTables } from '../../src/proxy/ipvs/glue.js';
import { kubeProxyIpSets } from '../../src/proxy/ipvs/kube-ipsets.js';

interface Case {
  name: string;
  services: V1Service[];
  slices?: V1EndpointSlice[];
  node?: NodeInfo;
  config?: ProxyConfig;
  /** The whole IPVS table, rendered. */
  table: string[];
  vips?: string[];
  check?: (m: ProxyModel) => void;
}

const three = [
  { ip: '192.168.0.7', node: 'node-b' },
  { ip: '192.168.1.3', node: 'node-a' },
  { ip: '192.168.1.4', node: 'node-c' },
];

const cases: Case[] = [
  {
    name: 'nginx-basic ClusterIP with three endpoints (docs/kube-proxy.md)',
    services: [svc('nginx-basic', { type: 'ClusterIP', clusterIP: '10.105.250.129', ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 80 as never }] })],
    slices: [slice('nginx-basic', 'nginx-basic-abcde', [{ name: 'http', port: 80 }], three)],
    table: ['TCP 10.105.250.129:80 rr', '  -> 192.168.0.7:80 Masq 1', '  -> 192.168.1.3:80 Masq 1', '  -> 192.168.1.4:80 Masq 1'],
    vips: ['10.105.250.129'],
    check: (m) => {
      assert.deepEqual(m.glue.vips, [{ kind: 'clusterIP', address: '10.105.250.129', protocol: 'tcp', port: 80, localOnly: false, bound: true, servicePort: 'default/nginx-basic:http' }]);
      assert.deepEqual(m.glue.nodePorts, []);
      assert.deepEqual(m.glue.hairpin, [{ address: '192.168.1.3', protocol: 'tcp', port: 80 }], 'only the node-local endpoint hairpins');
      assert.deepEqual(m.warnings, []);
    },
  },
  {
    name: 'a service without endpoints still gets its virtual server',
    services: [svc('empty', { clusterIP: '10.96.0.5', ports: [{ port: 53, protocol: 'UDP' }] })],
    table: ['UDP 10.96.0.5:53 rr'],
    vips: ['10.96.0.5'],
  },
  {
    name: 'NodePort: a virtual server on every node address of the family (v6 link-local skipped)',
    services: [svc('np', { type: 'NodePort', clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80, nodePort: 30080 }] })],
    slices: [slice('np', 'np-1', [{ name: 'http', port: 8080 }], [{ ip: '10.244.1.5' }])],
    node: { name: 'node-a', addresses: ['10.0.0.11', '127.0.0.1', '172.17.0.1', 'fe80::1', '2001:db8::11'] },
    table: [
      'TCP 10.0.0.11:30080 rr',
      '  -> 10.244.1.5:8080 Masq 1',
      'TCP 10.96.0.10:80 rr',
      '  -> 10.244.1.5:8080 Masq 1',
      'TCP 127.0.0.1:30080 rr',
      '  -> 10.244.1.5:8080 Masq 1',
      'TCP 172.17.0.1:30080 rr',
      '  -> 10.244.1.5:8080 Masq 1',
    ],
    vips: ['10.96.0.10'],
    check: (m) => {
      assert.deepEqual(m.glue.nodePorts, [{ protocol: 'tcp', port: 30080, family: 'inet', localOnly: false, servicePort: 'default/np:http' }]);
      assert.deepEqual(m.glue.nodePortAddresses, ['10.0.0.11', '127.0.0.1', '172.17.0.1', '2001:db8::11']);
    },
  },
  {
    name: 'NodePort narrowed by nodePortAddresses (a family with no CIDR keeps all its addresses)',
    services: [
      svc('np', {
        type: 'NodePort',
        clusterIP: '10.96.0.10',
        clusterIPs: ['10.96.0.10', 'fd00:96::10'],
        ipFamilies: ['IPv4', 'IPv6'],
        ports: [{ port: 80, nodePort: 30080 }],
      }),
    ],
    node: { name: 'node-a', addresses: ['10.0.0.11', '127.0.0.1', '172.17.0.1', '2001:db8::11', '::1'] },
    config: { nodePortAddresses: ['10.0.0.0/24', ' 127.0.0.0/8'] },
    table: ['TCP 10.0.0.11:30080 rr', 'TCP 10.96.0.10:80 rr', 'TCP 127.0.0.1:30080 rr', 'TCP [::1]:30080 rr', 'TCP [2001:db8::11]:30080 rr', 'TCP [fd00:96::10]:80 rr'],
    vips: ['10.96.0.10', 'fd00:96::10'],
  },
  {
    name: 'nodePortAddresses with only an IPv6 CIDR narrows IPv6 and leaves IPv4 whole; a bad CIDR is a warning',
    services: [svc('np', { type: 'NodePort', clusterIPs: ['10.96.0.10', 'fd00:96::10'], ports: [{ port: 80, nodePort: 30080 }] })],
    node: { name: 'node-a', addresses: ['10.0.0.11', '2001:db8::11', '2001:db9::1'] },
    config: { nodePortAddresses: ['2001:db8::/64', 'not-a-cidr'] },
    table: ['TCP 10.0.0.11:30080 rr', 'TCP 10.96.0.10:80 rr', 'TCP [2001:db8::11]:30080 rr', 'TCP [fd00:96::10]:80 rr'],
    check: (m) => assert.deepEqual(m.warnings, [{ service: '', message: 'nodePortAddresses: "not-a-cidr" is not a CIDR, ignored' }]),
  },
  {
    name: 'ExternalIPs: a virtual server per external IP of the family, bound as VIP unless already a node address',
    services: [svc('ext', { clusterIP: '10.96.0.20', externalIPs: ['203.0.113.7', '10.0.0.11', '2001:db8::7', 'bogus'], ports: [{ name: 'https', port: 443 }] })],
    slices: [slice('ext', 'ext-1', [{ name: 'https', port: 8443 }], [{ ip: '10.244.2.2' }])],
    table: [
      'TCP 10.0.0.11:443 rr',
      '  -> 10.244.2.2:8443 Masq 1',
      'TCP 10.96.0.20:443 rr',
      '  -> 10.244.2.2:8443 Masq 1',
      'TCP 203.0.113.7:443 rr',
      '  -> 10.244.2.2:8443 Masq 1',
    ],
    vips: ['10.96.0.20', '203.0.113.7'],
    check: (m) => {
      assert.deepEqual(
        m.glue.vips.map((v) => `${v.kind} ${v.address}:${v.port}`),
        ['externalIP 10.0.0.11:443', 'clusterIP 10.96.0.20:443', 'externalIP 203.0.113.7:443'],
      );
      assert.deepEqual(m.warnings, [{ service: 'default/ext', message: 'externalIP "bogus" is not an IP address, ignored' }]);
    },
  },
  {
    name: 'LoadBalancer: ingress IPs (not ipMode Proxy, not hostnames) + node port + source ranges to the glue',
    services: [
      svc(
        'lb',
        { type: 'LoadBalancer', clusterIP: '10.96.0.30', ports: [{ port: 80, nodePort: 31000 }], loadBalancerSourceRanges: ['198.51.100.0/24', '10.0.0.0/8', '2001:db8::/32'] },
        { ingress: [{ ip: '192.0.2.10' }, { ip: '192.0.2.11', ipMode: 'Proxy' }, { hostname: 'lb.example.com' }] },
      ),
    ],
    slices: [slice('lb', 'lb-1', [{ port: 8080 }], [{ ip: '10.244.3.3' }])],
    node: { name: 'node-a', addresses: ['10.0.0.11'] },
    table: [
      'TCP 10.0.0.11:31000 rr',
      '  -> 10.244.3.3:8080 Masq 1',
      'TCP 10.96.0.30:80 rr',
      '  -> 10.244.3.3:8080 Masq 1',
      'TCP 192.0.2.10:80 rr',
      '  -> 10.244.3.3:8080 Masq 1',
    ],
    vips: ['10.96.0.30', '192.0.2.10'],
    check: (m) => {
      assert.deepEqual(m.glue.sourceRanges, [
        { address: '192.0.2.10', protocol: 'tcp', port: 80, cidrs: ['10.0.0.0/8', '198.51.100.0/24'], allowFromNode: true, servicePort: 'default/lb' },
      ]);
      assert.deepEqual(
        m.glue.vips.map((v) => v.kind),
        ['clusterIP', 'loadBalancer'],
      );
    },
  },
  {
    name: "LoadBalancer source ranges from the spec only, as kube-proxy (the legacy annotation is the cloud controller's); the node outside them",
    services: [
      svc(
        'lb',
        { type: 'LoadBalancer', clusterIP: '10.96.0.30', ports: [{ port: 80 }], loadBalancerSourceRanges: ['198.51.100.0/24', '203.0.113.0/24'] },
        { ingress: [{ ip: '192.0.2.10' }], annotations: { 'service.beta.kubernetes.io/load-balancer-source-ranges': '10.0.0.0/8' } },
      ),
      svc('annotated', { type: 'LoadBalancer', clusterIP: '10.96.0.32', ports: [{ port: 80 }] }, { ingress: [{ ip: '192.0.2.12' }], annotations: { 'service.beta.kubernetes.io/load-balancer-source-ranges': '198.51.100.0/24' } }),
    ],
    table: ['TCP 10.96.0.30:80 rr', 'TCP 10.96.0.32:80 rr', 'TCP 192.0.2.10:80 rr', 'TCP 192.0.2.12:80 rr'],
    check: (m) =>
      assert.deepEqual(m.glue.sourceRanges, [
        { address: '192.0.2.10', protocol: 'tcp', port: 80, cidrs: ['198.51.100.0/24', '203.0.113.0/24'], allowFromNode: false, servicePort: 'default/lb' },
      ]),
  },
  {
    name: "a load-balancer status on a Service of another type is programmed, as kube-proxy reads ingress IPs whatever the type (until the controller clears them)",
    services: [svc('was-lb', { type: 'ClusterIP', clusterIP: '10.96.0.31', ports: [{ port: 80 }] }, { ingress: [{ ip: '192.0.2.10' }] })],
    table: ['TCP 10.96.0.31:80 rr', 'TCP 192.0.2.10:80 rr'],
    vips: ['10.96.0.31', '192.0.2.10'],
  },
  {
    name: 'headless, ExternalName and not-yet-allocated services produce nothing',
    services: [
      svc('headless', { clusterIP: 'None', clusterIPs: ['None'], ports: [{ port: 80 }] }),
      svc('extname', { type: 'ExternalName', externalName: 'db.example.com', ports: [{ port: 5432 }] }),
      svc('pending', { type: 'ClusterIP', ports: [{ port: 80 }] }),
    ],
    slices: [slice('headless', 'headless-1', [{ port: 80 }], [{ ip: '10.244.0.9' }])],
    table: [],
    vips: [],
    check: (m) => {
      assert.deepEqual(m.glue.vips, []);
      assert.deepEqual(m.glue.hairpin, []);
    },
  },
  {
    name: 'sessionAffinity ClientIP: persistent with the default 10800 s or the configured timeout',
    services: [
      svc('sticky', { clusterIP: '10.96.0.40', sessionAffinity: 'ClientIP', ports: [{ port: 80 }] }),
      svc('sticky-short', { clusterIP: '10.96.0.41', sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } }, ports: [{ port: 80 }] }),
      svc('plain', { clusterIP: '10.96.0.42', sessionAffinity: 'None', ports: [{ port: 80 }] }),
    ],
    table: ['TCP 10.96.0.40:80 rr persistent 10800', 'TCP 10.96.0.41:80 rr persistent 600', 'TCP 10.96.0.42:80 rr'],
  },
  {
    name: 'externalTrafficPolicy Local with a local endpoint: external frontends get only it, ClusterIP all',
    services: [
      svc(
        'etp',
        { type: 'LoadBalancer', clusterIP: '10.96.0.50', externalTrafficPolicy: 'Local', healthCheckNodePort: 32000, externalIPs: ['203.0.113.50'], ports: [{ port: 80, nodePort: 30050 }] },
        { ingress: [{ ip: '192.0.2.50' }] },
      ),
    ],
    slices: [slice('etp', 'etp-1', [{ port: 8080 }], three)],
    node: { name: 'node-a', addresses: ['10.0.0.11'] },
    table: [
      'TCP 10.0.0.11:30050 rr',
      '  -> 192.168.1.3:8080 Masq 1',
      'TCP 10.96.0.50:80 rr',
      '  -> 192.168.0.7:8080 Masq 1',
      '  -> 192.168.1.3:8080 Masq 1',
      '  -> 192.168.1.4:8080 Masq 1',
      'TCP 192.0.2.50:80 rr',
      '  -> 192.168.1.3:8080 Masq 1',
      'TCP 203.0.113.50:80 rr',
      '  -> 192.168.1.3:8080 Masq 1',
    ],
    check: (m) => {
      assert.deepEqual(m.healthChecks, [{ nodePort: 32000, service: 'default/etp', localEndpoints: 1 }]);
      assert.deepEqual(m.noLocalEndpoints, []);
      assert.deepEqual(m.glue.localTrafficServices, ['default/etp']);
      assert.deepEqual(m.glue.healthCheckNodePorts, [32000]);
      assert.deepEqual(
        m.glue.vips.map((v) => `${v.kind}:${v.localOnly}`),
        ['clusterIP:false', 'loadBalancer:true', 'externalIP:true'],
      );
      assert.equal(m.glue.nodePorts[0]!.localOnly, true);
    },
  },
  {
    name: "externalTrafficPolicy Local without a local endpoint: the external virtual servers get the Cluster endpoints (kube-proxy's IPVS mode, kubernetes#97081)",
    services: [
      svc(
        'etp',
        { type: 'LoadBalancer', clusterIP: '10.96.0.50', externalTrafficPolicy: 'Local', healthCheckNodePort: 32000, ports: [{ port: 80, nodePort: 30050 }] },
        { ingress: [{ ip: '192.0.2.50' }] },
      ),
    ],
    slices: [slice('etp', 'etp-1', [{ port: 8080 }], [{ ip: '192.168.0.7', node: 'node-b' }])],
    node: { name: 'node-a', addresses: ['10.0.0.11'] },
    table: ['TCP 10.0.0.11:30050 rr', '  -> 192.168.0.7:8080 Masq 1', 'TCP 10.96.0.50:80 rr', '  -> 192.168.0.7:8080 Masq 1', 'TCP 192.0.2.50:80 rr', '  -> 192.168.0.7:8080 Masq 1'],
    check: (m) => {
      assert.deepEqual(m.healthChecks, [{ nodePort: 32000, service: 'default/etp', localEndpoints: 0 }]);
      assert.deepEqual(m.noLocalEndpoints, ['default/etp']);
      assert.deepEqual(m.noLocalEndpointsTotal, { internal: 0, external: 1 });
    },
  },
  {
    name: 'externalTrafficPolicy Local on a ClusterIP-only service is no policy at all',
    services: [svc('ci', { clusterIP: '10.96.0.51', externalTrafficPolicy: 'Local', ports: [{ port: 80 }] })],
    slices: [slice('ci', 'ci-1', [{ port: 80 }], [{ ip: '192.168.0.7', node: 'node-b' }])],
    table: ['TCP 10.96.0.51:80 rr', '  -> 192.168.0.7:80 Masq 1'],
    check: (m) => {
      assert.deepEqual(m.noLocalEndpoints, []);
      assert.deepEqual(m.glue.localTrafficServices, []);
    },
  },
  {
    name: 'internalTrafficPolicy Local: ClusterIP gets node-local endpoints, NodePort all',
    services: [svc('itp', { type: 'NodePort', clusterIP: '10.96.0.60', internalTrafficPolicy: 'Local', ports: [{ port: 80, nodePort: 30060 }] })],
    slices: [slice('itp', 'itp-1', [{ port: 80 }], three)],
    node: { name: 'node-a', addresses: ['10.0.0.11'] },
    table: [
      'TCP 10.0.0.11:30060 rr',
      '  -> 192.168.0.7:80 Masq 1',
      '  -> 192.168.1.3:80 Masq 1',
      '  -> 192.168.1.4:80 Masq 1',
      'TCP 10.96.0.60:80 rr',
      '  -> 192.168.1.3:80 Masq 1',
    ],
    check: (m) => assert.deepEqual(m.glue.vips[0]!.localOnly, true),
  },
  {
    name: 'internalTrafficPolicy Local without a local endpoint: an empty ClusterIP virtual server',
    services: [svc('itp', { clusterIP: '10.96.0.60', internalTrafficPolicy: 'Local', ports: [{ port: 80 }] })],
    slices: [slice('itp', 'itp-1', [{ port: 80 }], [{ ip: '192.168.0.7', node: 'node-b' }])],
    table: ['TCP 10.96.0.60:80 rr'],
    check: (m) => {
      assert.deepEqual(m.noLocalEndpoints, ['default/itp']);
      assert.deepEqual(m.noLocalEndpointsTotal, { internal: 1, external: 0 });
    },
  },
  {
    name: "internalTrafficPolicy Local without a local endpoint on a NodePort: the ClusterIP virtual server gets the Cluster endpoints (kube-proxy's IPVS mode)",
    services: [svc('itp', { type: 'NodePort', clusterIP: '10.96.0.61', internalTrafficPolicy: 'Local', ports: [{ port: 80, nodePort: 30061 }] })],
    slices: [slice('itp', 'itp-1', [{ port: 80 }], [{ ip: '192.168.0.7', node: 'node-b' }])],
    node: { name: 'node-a', addresses: ['10.0.0.11'] },
    table: ['TCP 10.0.0.11:30061 rr', '  -> 192.168.0.7:80 Masq 1', 'TCP 10.96.0.61:80 rr', '  -> 192.168.0.7:80 Masq 1'],
    check: (m) => assert.deepEqual(m.noLocalEndpointsTotal, { internal: 1, external: 0 }),
  },
  {
    name: 'Local policies and no endpoint anywhere: empty virtual servers, no "no local endpoints" count',
    services: [svc('none', { type: 'NodePort', clusterIP: '10.96.0.62', internalTrafficPolicy: 'Local', externalTrafficPolicy: 'Local', ports: [{ port: 80, nodePort: 30062 }] })],
    slices: [],
    node: { name: 'node-a', addresses: ['10.0.0.11'] },
    table: ['TCP 10.0.0.11:30062 rr', 'TCP 10.96.0.62:80 rr'],
    check: (m) => {
      assert.deepEqual(m.noLocalEndpoints, []);
      assert.deepEqual(m.noLocalEndpointsTotal, { internal: 0, external: 0 });
    },
  },
  {
    name: "hairpin: every node-local endpoint, whatever its conditions or the policies (kube-proxy's KUBE-LOOP-BACK)",
    services: [svc('hp', { clusterIP: '10.96.0.63', ports: [{ port: 80 }] })],
    slices: [
      slice('hp', 'hp-1', [{ port: 80 }], [
        { ip: '10.244.0.1', node: 'node-a' },
        { ip: '10.244.0.2', node: 'node-a', ready: false, serving: false, terminating: true },
        { ip: '10.244.0.3', node: 'node-a', ready: false, serving: true, terminating: true },
        { ip: '10.244.0.4', node: 'node-b' },
      ]),
    ],
    node: { name: 'node-a', addresses: ['10.0.0.11'] },
    table: ['TCP 10.96.0.63:80 rr', '  -> 10.244.0.1:80 Masq 1', '  -> 10.244.0.4:80 Masq 1'],
    check: (m) => assert.deepEqual(m.glue.hairpin.map((h) => h.address).sort(), ['10.244.0.1', '10.244.0.2', '10.244.0.3']),
  },
  {
    name: 'not-ready endpoints are excluded; absent conditions mean ready',
    services: [svc('nr', { clusterIP: '10.96.0.70', ports: [{ port: 80 }] })],
    slices: [
      slice('nr', 'nr-1', [{ port: 80 }], [
        { ip: '10.244.0.1', ready: true },
        { ip: '10.244.0.2', ready: false, serving: false },
        { ip: '10.244.0.3' },
        { ip: '10.244.0.4', ready: false, serving: true, terminating: true },
      ]),
    ],
    table: ['TCP 10.96.0.70:80 rr', '  -> 10.244.0.1:80 Masq 1', '  -> 10.244.0.3:80 Masq 1'],
  },
  {
    name: 'serving-terminating fallback when no endpoint is ready (not-serving ones never)',
    services: [svc('term', { clusterIP: '10.96.0.71', ports: [{ port: 80 }] })],
    slices: [
      slice('term', 'term-1', [{ port: 80 }], [
        { ip: '10.244.0.1', ready: false, serving: true, terminating: true },
        { ip: '10.244.0.2', ready: false, serving: false, terminating: true },
        { ip: '10.244.0.3', ready: false, serving: false },
      ]),
    ],
    table: ['TCP 10.96.0.71:80 rr', '  -> 10.244.0.1:80 Masq 1'],
  },
  {
    name: 'serving-terminating fallback for Local policy: local ready missing → local serving-terminating; health check counts ready only',
    services: [
      svc(
        'lt',
        { type: 'LoadBalancer', clusterIP: '10.96.0.72', externalTrafficPolicy: 'Local', healthCheckNodePort: 32001, ports: [{ port: 80 }] },
        { ingress: [{ ip: '192.0.2.72' }] },
      ),
    ],
    slices: [
      slice('lt', 'lt-1', [{ port: 80 }], [
        { ip: '10.244.0.1', ready: false, serving: true, terminating: true, node: 'node-a' },
        { ip: '10.244.0.2', ready: true, node: 'node-b' },
      ]),
    ],
    table: ['TCP 10.96.0.72:80 rr', '  -> 10.244.0.2:80 Masq 1', 'TCP 192.0.2.72:80 rr', '  -> 10.244.0.1:80 Masq 1'],
    check: (m) => {
      assert.deepEqual(m.healthChecks, [{ nodePort: 32001, service: 'default/lt', localEndpoints: 0 }]);
      assert.deepEqual(m.noLocalEndpoints, []);
    },
  },
  {
    name: 'topology: zone hints on every ready endpoint, one for this zone → only those',
    services: [svc('topo', { clusterIP: '10.96.0.80', trafficDistribution: 'PreferClose', ports: [{ port: 80 }] })],
    slices: [
      slice('topo', 'topo-1', [{ port: 80 }], [
        { ip: '10.244.0.1', zones: ['zone-a'] },
        { ip: '10.244.0.2', zones: ['zone-b'] },
        { ip: '10.244.0.3', zones: ['zone-a', 'zone-c'] },
        { ip: '10.244.0.4', ready: false, serving: false },
      ]),
    ],
    table: ['TCP 10.96.0.80:80 rr', '  -> 10.244.0.1:80 Masq 1', '  -> 10.244.0.3:80 Masq 1'],
  },
  {
    name: 'topology: one ready endpoint without a hint → all endpoints',
    services: [svc('topo', { clusterIP: '10.96.0.80', ports: [{ port: 80 }] })],
    slices: [slice('topo', 'topo-1', [{ port: 80 }], [{ ip: '10.244.0.1', zones: ['zone-a'] }, { ip: '10.244.0.2' }])],
    table: ['TCP 10.96.0.80:80 rr', '  -> 10.244.0.1:80 Masq 1', '  -> 10.244.0.2:80 Masq 1'],
  },
  {
    name: 'topology: no endpoint hinted for this zone → all',
    services: [svc('topo', { clusterIP: '10.96.0.80', ports: [{ port: 80 }] })],
    slices: [slice('topo', 'topo-1', [{ port: 80 }], [{ ip: '10.244.0.1', zones: ['zone-b'] }, { ip: '10.244.0.2', zones: ['zone-c'] }])],
    table: ['TCP 10.96.0.80:80 rr', '  -> 10.244.0.1:80 Masq 1', '  -> 10.244.0.2:80 Masq 1'],
  },
  {
    name: 'topology: a node without a zone label ignores zone hints',
    services: [svc('topo', { clusterIP: '10.96.0.80', ports: [{ port: 80 }] })],
    slices: [slice('topo', 'topo-1', [{ port: 80 }], [{ ip: '10.244.0.1', zones: ['zone-a'] }, { ip: '10.244.0.2', zones: ['zone-b'] }])],
    node: { name: 'node-a', addresses: ['10.0.0.11'] },
    table: ['TCP 10.96.0.80:80 rr', '  -> 10.244.0.1:80 Masq 1', '  -> 10.244.0.2:80 Masq 1'],
  },
  {
    name: 'topology hints do not apply to Local policy: all local endpoints, hinted or not',
    services: [svc('topo', { clusterIP: '10.96.0.80', internalTrafficPolicy: 'Local', ports: [{ port: 80 }] })],
    slices: [
      slice('topo', 'topo-1', [{ port: 80 }], [
        { ip: '10.244.0.1', zones: ['zone-a'], node: 'node-b' },
        { ip: '10.244.0.2', zones: ['zone-b'], node: 'node-a' },
      ]),
    ],
    table: ['TCP 10.96.0.80:80 rr', '  -> 10.244.0.2:80 Masq 1'],
  },
  {
    name: 'topology: node hints (PreferSameNode) win over zone hints',
    services: [svc('topo', { clusterIP: '10.96.0.80', trafficDistribution: 'PreferSameNode', ports: [{ port: 80 }] })],
    slices: [
      slice('topo', 'topo-1', [{ port: 80 }], [
        { ip: '10.244.0.1', zones: ['zone-a'], nodes: ['node-b'] },
        { ip: '10.244.0.2', zones: ['zone-a'], nodes: ['node-a'] },
      ]),
    ],
    table: ['TCP 10.96.0.80:80 rr', '  -> 10.244.0.2:80 Masq 1'],
  },
  {
    name: 'service-proxy-name label: another proxy’s service is skipped',
    services: [
      svc('theirs', { clusterIP: '10.96.0.90', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/service-proxy-name': 'other' } }),
      svc('ours', { clusterIP: '10.96.0.91', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/service-proxy-name': 'ipvsync' } }),
      svc('default', { clusterIP: '10.96.0.92', ports: [{ port: 80 }] }),
    ],
    table: ['TCP 10.96.0.92:80 rr'],
  },
  {
    name: 'service-proxy-name label with config.proxyName: its own services are served too',
    services: [
      svc('theirs', { clusterIP: '10.96.0.90', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/service-proxy-name': 'other' } }),
      svc('ours', { clusterIP: '10.96.0.91', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/service-proxy-name': 'ipvsync' } }),
      svc('default', { clusterIP: '10.96.0.92', ports: [{ port: 80 }] }),
    ],
    config: { proxyName: 'ipvsync' },
    table: ['TCP 10.96.0.91:80 rr', 'TCP 10.96.0.92:80 rr'],
  },
  {
    name: 'service-proxy-name label with proxyNameOnly: only its own services',
    services: [
      svc('ours', { clusterIP: '10.96.0.91', ports: [{ port: 80 }] }, { labels: { 'service.kubernetes.io/service-proxy-name': 'ipvsync' } }),
      svc('default', { clusterIP: '10.96.0.92', ports: [{ port: 80 }] }),
    ],
    config: { proxyName: 'ipvsync', proxyNameOnly: true },
    table: ['TCP 10.96.0.91:80 rr'],
  },
  {
    name: 'dual-stack: each cluster IP gets the endpoints of its own family; IPv6 canonical',
    services: [svc('ds', { clusterIP: '10.96.1.1', clusterIPs: ['10.96.1.1', 'fd00:10:96:0:0::101'], ipFamilies: ['IPv4', 'IPv6'], ipFamilyPolicy: 'RequireDualStack', ports: [{ name: 'web', port: 80 }] })],
    slices: [
      slice('ds', 'ds-v4', [{ name: 'web', port: 8080 }], [{ ip: '10.244.0.1' }]),
      slice('ds', 'ds-v6', [{ name: 'web', port: 8080 }], [{ ip: 'fd00:10:244:0000::1' }]),
    ],
    table: ['TCP 10.96.1.1:80 rr', '  -> 10.244.0.1:8080 Masq 1', 'TCP [fd00:10:96::101]:80 rr', '  -> [fd00:10:244::1]:8080 Masq 1'],
    vips: ['10.96.1.1', 'fd00:10:96::101'],
  },
  {
    name: 'IPv6 single-stack service with persistence',
    services: [svc('v6', { clusterIPs: ['fd00::100'], ipFamilies: ['IPv6'], sessionAffinity: 'ClientIP', ports: [{ port: 443 }] })],
    slices: [slice('v6', 'v6-1', [{ port: 8443 }], [{ ip: 'fd00:244::2' }, { ip: 'fd00:244::1' }]), slice('v6', 'v6-v4', [{ port: 8443 }], [{ ip: '10.244.0.1' }])],
    table: ['TCP [fd00::100]:443 rr persistent 10800', '  -> [fd00:244::1]:8443 Masq 1', '  -> [fd00:244::2]:8443 Masq 1'],
  },
  {
    name: 'TCP, UDP and SCTP ports of one service; a port is matched by name AND protocol',
    services: [
      svc('dns', {
        clusterIP: '10.96.0.10',
        ports: [
          { name: 'dns', port: 53, protocol: 'UDP' },
          { name: 'dns-tcp', port: 53, protocol: 'TCP' },
          { name: 'sig', port: 3868, protocol: 'SCTP' },
        ],
      }),
    ],
    slices: [
      slice('dns', 'dns-1', [{ name: 'dns', port: 5353, protocol: 'UDP' }, { name: 'dns-tcp', port: 5354, protocol: 'TCP' }, { name: 'sig', port: 3869, protocol: 'SCTP' }, { name: 'dns', port: 9999, protocol: 'TCP' }], [{ ip: '10.244.0.10' }]),
    ],
    table: ['SCTP 10.96.0.10:3868 rr', '  -> 10.244.0.10:3869 Masq 1', 'TCP 10.96.0.10:53 rr', '  -> 10.244.0.10:5354 Masq 1', 'UDP 10.96.0.10:53 rr', '  -> 10.244.0.10:5353 Masq 1'],
  },
  {
    name: 'named target port resolved per slice: the same port name maps to different numbers',
    services: [svc('named', { clusterIP: '10.96.0.100', ports: [{ name: 'http', port: 80, targetPort: 'web' as never }] })],
    slices: [
      slice('named', 'named-a', [{ name: 'http', port: 8080 }], [{ ip: '10.244.0.1' }, { ip: '10.244.0.2' }]),
      slice('named', 'named-b', [{ name: 'http', port: 9090 }], [{ ip: '10.244.0.3' }]),
      slice('named', 'named-c', [{ name: 'metrics', port: 9100 }], [{ ip: '10.244.0.4' }]),
    ],
    table: ['TCP 10.96.0.100:80 rr', '  -> 10.244.0.1:8080 Masq 1', '  -> 10.244.0.2:8080 Masq 1', '  -> 10.244.0.3:9090 Masq 1'],
  },
  {
    name: 'several slices per service merge; a duplicated address is one real server; other services’ and other namespaces’ slices stay apart',
    services: [svc('multi', { clusterIP: '10.96.0.110', ports: [{ port: 80 }] }), svc('multi', { clusterIP: '10.96.0.111', ports: [{ port: 80 }] }, { namespace: 'other' })],
    slices: [
      slice('multi', 'multi-1', [{ port: 80 }], [{ ip: '10.244.0.1' }, { ip: '10.244.0.2' }]),
      slice('multi', 'multi-2', [{ port: 80 }], [{ ip: '10.244.0.3' }, { ip: '10.244.0.2' }]),
      slice('multi', 'multi-x', [{ port: 80 }], [{ ip: '10.244.9.9' }], { namespace: 'other' }),
      slice('unrelated', 'unrelated-1', [{ port: 80 }], [{ ip: '10.244.8.8' }]),
    ],
    table: [
      'TCP 10.96.0.110:80 rr',
      '  -> 10.244.0.1:80 Masq 1',
      '  -> 10.244.0.2:80 Masq 1',
      '  -> 10.244.0.3:80 Masq 1',
      'TCP 10.96.0.111:80 rr',
      '  -> 10.244.9.9:80 Masq 1',
    ],
  },
  {
    name: 'scheduler and flags from annotations; the default scheduler from config',
    services: [
      svc('mh', { clusterIP: '10.96.0.120', ports: [{ port: 80 }] }, { annotations: { 'ipvsync.io/scheduler': 'mh', 'ipvsync.io/scheduler-flags': 'mh-fallback, mh-port' } }),
      svc('dflt', { clusterIP: '10.96.0.121', ports: [{ port: 80 }] }),
      svc('sticky-sh', { clusterIP: '10.96.0.122', sessionAffinity: 'ClientIP', ports: [{ port: 80 }] }, { annotations: { 'ipvsync.io/scheduler': 'sh', 'ipvsync.io/scheduler-flags': 'sh-port' } }),
    ],
    config: { scheduler: 'wlc' },
    table: ['TCP 10.96.0.120:80 mh (mh-fallback,mh-port)', 'TCP 10.96.0.121:80 wlc', 'TCP 10.96.0.122:80 sh (sh-port) persistent 10800'],
    check: (m) => assert.deepEqual(m.warnings, []),
  },
  {
    name: 'bad scheduler annotations are warnings and fall back, never a throw',
    services: [
      svc('bad', { clusterIP: '10.96.0.130', ports: [{ port: 80 }] }, { annotations: { 'ipvsync.io/scheduler': 'fastest', 'ipvsync.io/scheduler-flags': 'mh-port,persistent,turbo' } }),
      svc('mismatch', { clusterIP: '10.96.0.131', ports: [{ port: 80 }] }, { annotations: { 'ipvsync.io/scheduler': 'sh', 'ipvsync.io/scheduler-flags': 'mh-fallback,flag-3' } }),
    ],
    config: { scheduler: 'nonsense' },
    table: ['TCP 10.96.0.130:80 rr', 'TCP 10.96.0.131:80 sh (flag-3)'],
    check: (m) =>
      assert.deepEqual(m.warnings, [
        { service: '', message: 'config scheduler: unknown scheduler "nonsense", using "rr"' },
        { service: 'default/bad', message: 'ipvsync.io/scheduler: unknown scheduler "fastest", using "rr"' },
        { service: 'default/bad', message: 'ipvsync.io/scheduler-flags: "mh-port" needs scheduler mh, not rr; ignored' },
        { service: 'default/bad', message: 'ipvsync.io/scheduler-flags: "persistent" comes from sessionAffinity: ClientIP, ignored' },
        { service: 'default/bad', message: 'ipvsync.io/scheduler-flags: unknown flag "turbo", ignored' },
        { service: 'default/mismatch', message: 'ipvsync.io/scheduler-flags: "mh-fallback" needs scheduler mh, not sh; ignored' },
      ]),
  },
  {
    name: 'two services claiming one external IP:port: the first by name wins, the other is a warning',
    services: [
      svc('b', { clusterIP: '10.96.0.141', externalIPs: ['203.0.113.1'], ports: [{ port: 80 }] }),
      svc('a', { clusterIP: '10.96.0.140', externalIPs: ['203.0.113.1'], ports: [{ port: 80 }] }),
    ],
    slices: [slice('a', 'a-1', [{ port: 80 }], [{ ip: '10.244.0.1' }]), slice('b', 'b-1', [{ port: 80 }], [{ ip: '10.244.0.2' }])],
    table: ['TCP 10.96.0.140:80 rr', '  -> 10.244.0.1:80 Masq 1', 'TCP 10.96.0.141:80 rr', '  -> 10.244.0.2:80 Masq 1', 'TCP 203.0.113.1:80 rr', '  -> 10.244.0.1:80 Masq 1'],
    check: (m) => assert.deepEqual(m.warnings, [{ service: 'default/b', message: 'externalIP 203.0.113.1:80/tcp already belongs to default/a, ignored' }]),
  },
];

for (const c of cases) {
  test(`translate: ${c.name}`, () => {
    const m = translate({ services: c.services, endpointSlices: c.slices ?? [], node: c.node ?? NODE, config: c.config ?? {} });
    assert.deepEqual(render(m.services), c.table);
    for (const s of m.services) for (const d of s.destinations) assert.deepEqual([d.forward, d.weight], ['masq', 1]);
    if (c.vips) assert.deepEqual(m.vips, c.vips);
    c.check?.(m);
  });
}

test('translate: output does not depend on input order', () => {
  const services = cases.flatMap((c) => c.services).filter((s, i, a) => a.findIndex((o) => o.metadata?.name === s.metadata?.name && o.metadata?.namespace === s.metadata?.namespace) === i);
  const slices = cases.flatMap((c) => c.slices ?? []).filter((s, i, a) => a.findIndex((o) => o.metadata?.name === s.metadata?.name && o.metadata?.namespace === s.metadata?.namespace) === i);
  const a = translate({ services, endpointSlices: slices, node: NODE });
  let seed = 7;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const shuffle = <T>(xs: T[]): T[] => xs.map((x) => [rnd(), x] as const).sort((p, q) => p[0] - q[0]).map(([, x]) => x);
  for (let i = 0; i < 5; i++) {
    const b = translate({ services: shuffle(services), endpointSlices: shuffle(slices), node: NODE });
    assert.deepEqual(b, a);
  }
  assert.ok(a.services.length > 20);
});

test('translate: never throws on malformed objects, never mutates its input', () => {
  const weird = [
    svc('noports', { clusterIP: '10.96.5.1' }),
    svc('badip', { clusterIP: '10.96.5.999', ports: [{ port: 80 }] }),
    svc('badport', { clusterIP: '10.96.5.2', ports: [{ port: 70000 }, { port: 81, protocol: 'ICMP' }] }),
    { metadata: { name: 'nospec' } } as V1Service,
    svc('badaffinity', { clusterIP: '10.96.5.3', sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: -5 } }, ports: [{ port: 80 }] }),
  ];
  const badSlices = [
    { metadata: { name: 's', labels: { 'kubernetes.io/service-name': 'badaffinity' } }, addressType: 'IPv4', endpoints: [{ addresses: ['nope'] }, { addresses: [] }], ports: [{ port: 80 }] },
    { metadata: { name: 'f', labels: { 'kubernetes.io/service-name': 'badaffinity' } }, addressType: 'FQDN', endpoints: [{ addresses: ['a.example'] }], ports: [{ port: 80 }] },
    { metadata: { name: 'noport', labels: { 'kubernetes.io/service-name': 'badaffinity' } }, addressType: 'IPv4', endpoints: [{ addresses: ['10.244.0.1'] }], ports: [{}] },
  ] as V1EndpointSlice[];
  const before = JSON.stringify([weird, badSlices]);
  const m = translate({ services: weird, endpointSlices: badSlices, node: NODE });
  assert.equal(JSON.stringify([weird, badSlices]), before);
  assert.deepEqual(render(m.services), ['TCP 10.96.5.3:80 rr persistent 10800']);
  assert.deepEqual(m.warnings, [
    { service: 'default/badaffinity', message: 'sessionAffinityConfig.clientIP.timeoutSeconds -5 out of range 1..86400, using 10800' },
    { service: 'default/badip', message: 'clusterIP "10.96.5.999" is not an IP address, ignored' },
    { service: 'default/badport', message: 'port 70000 out of range, ignored' },
    { service: 'default/badport', message: 'port 81: protocol ICMP not supported, ignored' },
  ]);
});

test("the glue and kube-proxy's ipsets as kube-proxy's IPVS mode has them: other ports refused only on bound VIPs; Local external IPs not in KUBE-EXTERNAL-IP; no cluster CIDR: the node's traffic from a cluster IP masqueraded; mh hashes ports", () => {
  const node: NodeInfo = { name: 'node-a', addresses: ['10.0.0.11'] };
  const services = [
    // an external IP that is the node's own address: served, not bound
    svc('mine', { clusterIP: '10.96.0.80', externalIPs: ['10.0.0.11', '203.0.113.80'], ports: [{ port: 8080 }] }),
    svc('local', { type: 'NodePort', clusterIP: '10.96.0.81', externalIPs: ['203.0.113.81'], externalTrafficPolicy: 'Local', ports: [{ port: 80, nodePort: 30081 }] }),
    svc('hashed', { clusterIP: '10.96.0.82', ports: [{ port: 80 }] }, { annotations: { 'ipvsync.io/scheduler': 'mh' } }),
    svc('flagged', { clusterIP: '10.96.0.83', ports: [{ port: 80 }] }, { annotations: { 'ipvsync.io/scheduler': 'mh', 'ipvsync.io/scheduler-flags': 'mh-fallback' } }),
  ];
  const m = translate({ services, endpointSlices: [], node });
  assert.deepEqual(m.vips.sort(), ['10.96.0.80', '10.96.0.81', '10.96.0.82', '10.96.0.83', '203.0.113.80', '203.0.113.81']);
  const [ip] = glueTables(m.glue);
  const elements = (name: string) => elementList(ip!.sets.find((s) => s.name === name)!.elements).map((e) => e.key.join(' '));
  assert.ok(!elements('vips').includes('10.0.0.11'), "the node's address is no VIP: its other ports are not refused");
  assert.ok(elements('vip-ports').includes('10.0.0.11 tcp 8080'));
  const sets = new Map(kubeProxyIpSets(m.glue).map((s) => [s.name, s.members.map((x) => Object.values(x).join(','))]));
  assert.ok(!sets.get('KUBE-IPVS-IPS')!.includes('10.0.0.11'));
  assert.deepEqual(sets.get('KUBE-EXTERNAL-IP'), ['203.0.113.80,tcp,8080', '10.0.0.11,tcp,8080'].sort(), 'the Local one is in -LOCAL only');
  assert.deepEqual(sets.get('KUBE-EXTERNAL-IP-LOCAL'), ['203.0.113.81,tcp,80']);
  // no cluster CIDR: kube-proxy's `KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ`
  const services4 = ip!.rules.filter((r) => r.chain === 'services');
  const bySource = services4.filter((r) => r.exprs.some((e) => e.type === 'payload' && (e as { offset: number }).offset === 12) && r.exprs.some((e) => e.type === 'lookup' && (e as { set: string }).set === 'cluster-ips'));
  assert.equal(bySource.length, 1, 'one rule: a cluster IP as source, the service port as destination');
  const [withCidr] = glueTables(translate({ services, endpointSlices: [], node, config: { clusterCIDRs: ['10.244.0.0/16'] } }).glue);
  assert.equal(withCidr!.rules.filter((r) => r.chain === 'services' && r.exprs.some((e) => e.type === 'lookup' && (e as { set: string }).set === 'cluster-cidrs')).length, 1);
  // mh: kube-proxy's flag (source port hashed) unless the flags are given
  const flags = Object.fromEntries(m.services.map((s) => ['address' in s ? s.address : '', s.flags ?? []]));
  assert.deepEqual(flags['10.96.0.82'], ['mh-port']);
  assert.deepEqual(flags['10.96.0.83'], ['mh-fallback']);
});
