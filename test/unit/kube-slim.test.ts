// What the change trackers keep of Services and EndpointSlices (src/kube/slim.ts): the proxy must
// program exactly what it would from the objects as given, and see exactly the same changes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { SlimEndpoint, endpointAddress, slimService, slimSlice } from '../../src/kube/slim.js';
import { EndpointSliceTracker, ServiceTracker, endpointSlicesFingerprint, serviceFingerprint } from '../../src/kube/change-tracker.js';
import { translate } from '../../src/proxy/ipvs/plane.js';
import type { NodeInfo, ProxyConfig } from '../../src/kube/types.js';
import { slice, svc } from '../fixtures/kube/builders.js';
import { prng as rng } from '../helpers/bytes.js';

const NODE: NodeInfo = { name: 'node-a', addresses: ['10.0.0.11', '2001:db8::11'], zone: 'zone-a' };
const CONFIG: ProxyConfig = { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] };

/** What an apiserver adds to every object: none of it may reach the proxy's state. */
function noise<T extends { metadata?: Record<string, unknown> }>(o: T, i: number): T {
  Object.assign(o.metadata!, {
    uid: `uid-${i}`,
    resourceVersion: String(1000 + i),
    creationTimestamp: new Date(0),
    generation: 3,
    managedFields: [{ manager: 'kube-controller-manager', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:spec': {} } }],
  });
  o.metadata!.labels = { app: `app-${i}`, 'app.kubernetes.io/managed-by': 'helm', ...(o.metadata!.labels as object) };
  o.metadata!.annotations = { 'kubectl.kubernetes.io/last-applied-configuration': '{"big":"json"}', ...(o.metadata!.annotations as object) };
  return o;
}

function makeService(r: () => number, i: number): V1Service {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const type = pick(['ClusterIP', 'ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'] as const);
  const dual = r() < 0.3;
  const v4 = `10.96.0.${1 + Math.floor(r() * 20)}`;
  const ports = Array.from({ length: 1 + Math.floor(r() * 3) }, (_, k) => ({
    name: k === 0 && r() < 0.5 ? undefined : `p${k}`,
    port: pick([53, 80, 443, 8080]),
    protocol: pick(['TCP', 'TCP', 'UDP', 'SCTP', undefined]),
    targetPort: 8080 + k,
    ...(type === 'NodePort' || type === 'LoadBalancer' ? { nodePort: 30000 + Math.floor(r() * 50) } : {}),
    appProtocol: 'http',
  }));
  const s = svc(
    `s${i}`,
    {
      type,
      clusterIP: v4,
      clusterIPs: dual ? [v4, `fd00:96::${1 + i}`] : [v4],
      ipFamilies: dual ? ['IPv4', 'IPv6'] : ['IPv4'],
      ipFamilyPolicy: dual ? 'PreferDualStack' : 'SingleStack',
      selector: { app: `app-${i}` },
      ports: ports as never,
      ...(r() < 0.25 ? { externalIPs: [pick(['192.0.2.1', '192.0.2.2', '10.0.0.11', 'bogus'])] } : {}),
      ...(r() < 0.3 && type !== 'ClusterIP' ? { externalTrafficPolicy: pick(['Local', 'Cluster']) } : {}),
      ...(r() < 0.2 ? { internalTrafficPolicy: 'Local' } : {}),
      ...(r() < 0.25 ? { sessionAffinity: 'ClientIP', ...(r() < 0.5 ? { sessionAffinityConfig: { clientIP: { timeoutSeconds: pick([60, 0, 100000]) } } } : {}) } : {}),
      ...(type === 'LoadBalancer' && r() < 0.5 ? { loadBalancerSourceRanges: ['203.0.113.0/24', 'bad'], healthCheckNodePort: 32000 + i } : {}),
    },
    {
      ...(r() < 0.2 ? { labels: { 'service.kubernetes.io/service-proxy-name': pick(['other', 'ipvsync']) } } : {}),
      annotations: {
        ...(r() < 0.2 ? { 'ipvsync.io/scheduler': pick(['lc', 'sh', 'bogus']) } : {}),
        ...(r() < 0.1 ? { 'ipvsync.io/scheduler-flags': 'sh-port' } : {}),
        ...(r() < 0.1 ? { 'service.beta.kubernetes.io/load-balancer-source-ranges': '198.51.100.0/24' } : {}),
      },
      ...(type === 'LoadBalancer' ? { ingress: [{ ip: `198.51.100.${1 + Math.floor(r() * 4)}`, ...(r() < 0.3 ? { ipMode: pick(['VIP', 'Proxy']) } : {}) }, { hostname: 'lb.example' }] } : {}),
    },
  );
  return noise(s as never, i);
}

function makeSlice(r: () => number, i: number, k: number): V1EndpointSlice {
  const v6 = r() < 0.2;
  const eps = Array.from({ length: Math.floor(r() * 5) }, (_, j) => ({
    ip: v6 ? `fd00:244::${i}:${j + 1}` : `10.244.${i}.${1 + Math.floor(r() * 30) + j}`,
    ...(r() < 0.8 ? { node: r() < 0.4 ? 'node-a' : 'node-b' } : {}),
    ...(r() < 0.2 ? { ready: false, serving: r() < 0.5, terminating: true } : r() < 0.3 ? { ready: true } : {}),
    ...(r() < 0.15 ? { zones: ['zone-a'] } : {}),
    ...(r() < 0.1 ? { nodes: ['node-a', 'node-b'] } : {}),
  }));
  const s = slice(`s${i}`, `s${i}-${k}`, [{ name: r() < 0.5 ? 'p0' : '', port: 8080 + Math.floor(r() * 2), protocol: r() < 0.8 ? 'TCP' : 'UDP' }, { name: 'p1', port: 9090 }], eps, v6 ? { addressType: 'IPv6' } : {});
  for (const e of s.endpoints) {
    Object.assign(e, { targetRef: { kind: 'Pod', name: `pod-${i}`, uid: 'x' }, zone: 'zone-b', deprecatedTopology: { a: 'b' } });
    if (r() < 0.2) e.addresses.push('10.255.255.255'); // only the first address counts
  }
  return noise(s as never, i);
}

test('slim objects fingerprint and translate exactly as the objects they came from (random objects, 40 seeds)', () => {
  for (let seed = 1; seed <= 40; seed++) {
    const r = rng(seed);
    const services: V1Service[] = [];
    const slices: V1EndpointSlice[] = [];
    for (let i = 0; i < 20; i++) {
      services.push(makeService(r, i));
      slices.push(makeSlice(r, i, 0));
      if (r() < 0.3) slices.push(makeSlice(r, i, 1));
    }
    const slimServices = services.map(slimService);
    const slimSlices = slices.map(slimSlice);
    services.forEach((s, i) => assert.equal(serviceFingerprint(slimServices[i]), serviceFingerprint(s)));
    assert.equal(endpointSlicesFingerprint(slimSlices), endpointSlicesFingerprint(slices));
    const full = translate({ services, endpointSlices: slices, node: NODE, config: CONFIG });
    const slim = translate({ services: slimServices, endpointSlices: slimSlices, node: NODE, config: CONFIG });
    assert.deepStrictEqual(slim, full);
    assert.ok(full.services.length > 0);
  }
});

test('slim objects keep only what the proxy reads; equal endpoint conditions are one object', () => {
  const r = rng(7);
  const s = makeService(r, 1);
  s.spec!.type = 'LoadBalancer';
  s.spec!.sessionAffinity = 'ClientIP';
  s.spec!.sessionAffinityConfig = { clientIP: { timeoutSeconds: 60 } };
  const kept = slimService(s);
  // members with values: what translate() and the fingerprint read, nothing else
  const defined = (o: object) => Object.entries(o).filter(([, v]) => v !== undefined).map(([k]) => k).sort();
  assert.deepEqual(defined(kept), s.status ? ['metadata', 'spec', 'status'] : ['metadata', 'spec']);
  assert.deepEqual(defined(kept.metadata!), ['name', 'namespace']); // no proxy label or annotation of ours on this one
  for (const k of defined(kept.spec!))
    assert.ok(['type', 'clusterIP', 'clusterIPs', 'ports', 'externalIPs', 'sessionAffinity', 'sessionAffinityConfig', 'externalTrafficPolicy', 'internalTrafficPolicy', 'healthCheckNodePort', 'loadBalancerSourceRanges'].includes(k), k);
  assert.equal((kept.spec as Record<string, unknown>).ipFamilies, undefined);
  assert.equal((kept.spec as Record<string, unknown>).selector, undefined);
  assert.equal((kept.spec!.ports![0] as { targetPort?: unknown }).targetPort, undefined);
  assert.deepEqual(kept.spec!.sessionAffinityConfig, { clientIP: { timeoutSeconds: 60 } });
  // one shape for every kept Service, endpoint and port (members in the same order)
  const other = slimService(svc('x', { clusterIP: '10.96.0.1' }));
  assert.deepEqual(Object.keys(other), Object.keys(kept));
  assert.deepEqual(Object.keys(other.spec!), Object.keys(kept.spec!));

  const sl = slice('web', 'web-1', [{ name: 'http', port: 8080 }], [
    { ip: '10.244.0.1', ready: true, node: 'node-a' },
    { ip: '10.244.0.2', ready: true, node: 'node-a' },
    { ip: '10.244.0.3', ready: false, serving: true, terminating: true, node: 'node-b' },
  ]);
  noise(sl as never, 1);
  sl.endpoints[0]!.addresses.push('10.244.9.9');
  (sl.endpoints[0] as unknown as Record<string, unknown>).targetRef = { kind: 'Pod', name: 'web-1' };
  const ks = slimSlice(sl);
  assert.deepEqual(ks.metadata, { name: 'web-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } });
  const e0 = ks.endpoints[0]!;
  assert.ok(e0 instanceof SlimEndpoint);
  assert.deepEqual({ ...e0 }, {
    address: '10.244.0.1',
    conditions: { ready: true, serving: undefined, terminating: undefined },
    nodeName: 'node-a',
  });
  assert.equal(e0.hints, undefined);
  // hints are kept (as read) on the few endpoints that have them
  const hinted = slimSlice(slice('web', 'web-2', [{ port: 80 }], [{ ip: '10.244.0.9', zones: ['zone-a'], nodes: ['node-a'] }])).endpoints[0]!;
  assert.ok(hinted instanceof SlimEndpoint);
  assert.deepEqual(hinted.hints, { forZones: [{ name: 'zone-a' }], forNodes: [{ name: 'node-a' }] });
  assert.equal(endpointAddress(hinted), '10.244.0.9');
  // read as a V1 endpoint, it has its first address (only that one counts)
  assert.deepEqual(e0.addresses, ['10.244.0.1']);
  assert.equal(endpointAddress(e0), '10.244.0.1');
  assert.equal(endpointAddress(sl.endpoints[0]!), '10.244.0.1');
  assert.deepEqual(Object.keys(ks.endpoints[2]!), Object.keys(e0));
  assert.equal(ks.endpoints[0]!.conditions, ks.endpoints[1]!.conditions);
  assert.equal(ks.endpoints[0]!.conditions, slimSlice(sl).endpoints[1]!.conditions);
  assert.notEqual(ks.endpoints[0]!.conditions, ks.endpoints[2]!.conditions);
  assert.ok(Object.isFrozen(ks.endpoints[2]!.conditions));
  assert.deepEqual(ks.endpoints[2]!.conditions, { ready: false, serving: true, terminating: true });
  // each of the 27 combinations of true, false and absent is its own shared object, read as given
  const vals = [true, false, undefined];
  const seen = new Set<object>();
  for (const ready of vals)
    for (const serving of vals)
      for (const terminating of vals) {
        const one = (n: number) =>
          slimSlice(slice('c', `c-${n}`, [{ port: 80 }], [{ ip: '10.244.1.1', ready, serving, terminating }])).endpoints[0]!.conditions!;
        const c = one(1);
        assert.deepEqual({ ...c }, { ready, serving, terminating });
        assert.equal(one(2), c);
        seen.add(c);
      }
  assert.equal(seen.size, 27);
  // a value of another type is kept as read, in an object of its own
  const odd = { ...sl, endpoints: [{ addresses: ['10.244.1.2'], conditions: { ready: 'yes' as unknown as boolean } }] };
  const oddKept = slimSlice(odd).endpoints[0]!.conditions!;
  assert.equal(oddKept.ready as unknown, 'yes');
  assert.ok(!seen.has(oddKept) && !Object.isFrozen(oddKept));
  // the original is left as it was
  assert.deepEqual(sl.endpoints[0]!.addresses, ['10.244.0.1', '10.244.9.9']);
});

test('the trackers keep slim objects and report the same changes as for the originals', () => {
  const services = new ServiceTracker();
  const slices = new EndpointSliceTracker();
  const r = rng(3);
  const s = makeService(r, 2);
  const sl = makeSlice(r, 2, 0);
  services.update(s);
  slices.update(sl);
  assert.deepEqual(services.get('default/s2'), slimService(s));
  assert.equal((services.get('default/s2')!.metadata as Record<string, unknown>).managedFields, undefined);
  assert.deepEqual(slices.members('default/s2'), [slimSlice(sl)]);
  assert.deepEqual(services.drain(), new Set(['default/s2']));
  slices.drain();
  // apiserver churn only: no change
  const s2 = structuredClone(s);
  s2.metadata!.resourceVersion = '99999';
  services.update(s2);
  assert.deepEqual(services.drain(), new Set());
});
