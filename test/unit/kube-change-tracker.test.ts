// Change trackers: drain() names exactly the services whose proxy-relevant state changed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { EndpointSliceTracker, ServiceTracker } from '../../src/kube/change-tracker.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const clone = <T>(x: T): T => structuredClone(x);

function web(): V1Service {
  const s = svc('web', { type: 'ClusterIP', clusterIP: '10.96.0.1', ports: [{ name: 'http', port: 80, protocol: 'TCP' }], selector: { app: 'web' } });
  s.metadata!.resourceVersion = '100';
  return s;
}

test('ServiceTracker: add, no-op churn, real change, revert, delete', () => {
  const t = new ServiceTracker();
  assert.deepEqual(t.drain(), new Set());
  t.update(web());
  assert.deepEqual(t.drain(), new Set(['default/web']));
  assert.deepEqual(t.drain(), new Set(), 'a drain starts a new round');

  // Churn that changes nothing the proxy reads.
  const churn: Array<(s: V1Service) => void> = [
    (s) => (s.metadata!.resourceVersion = '101'),
    (s) => (s.metadata!.managedFields = [{ manager: 'kubectl', operation: 'Update' }]),
    (s) => (s.metadata!.annotations = { 'kubectl.kubernetes.io/last-applied-configuration': '{}' }),
    (s) => (s.metadata!.labels = { app: 'web', team: 'a' }),
    (s) => (s.status = { conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date(0), message: '', reason: 'x' }] }),
    (s) => (s.spec!.selector = { app: 'web2' }),
    (s) => (s.spec!.ports![0]!.targetPort = 'web' as never),
    (s) => (s.spec!.ports![0]!.appProtocol = 'http'),
  ];
  for (const f of churn) {
    const s = web();
    f(s);
    t.update(s);
    assert.deepEqual(t.drain(), new Set(), `no change for ${f.toString()}`);
  }

  // Each relevant field is a change.
  const relevant: Array<(s: V1Service) => void> = [
    (s) => (s.spec!.ports![0]!.port = 81),
    (s) => (s.spec!.ports![0]!.protocol = 'UDP'),
    (s) => (s.spec!.type = 'NodePort'),
    (s) => (s.spec!.externalIPs = ['203.0.113.1']),
    (s) => (s.spec!.sessionAffinity = 'ClientIP'),
    (s) => (s.spec!.internalTrafficPolicy = 'Local'),
    (s) => (s.metadata!.labels = { 'service.kubernetes.io/service-proxy-name': 'other' }),
    (s) => (s.metadata!.annotations = { 'ipvsync.io/scheduler': 'mh' }),
    (s) => (s.status = { loadBalancer: { ingress: [{ ip: '192.0.2.1' }] } }),
  ];
  for (const f of relevant) {
    const s = web();
    f(s);
    t.update(s);
    assert.deepEqual(t.drain(), new Set(['default/web']), `change for ${f.toString()}`);
    t.update(web());
    assert.deepEqual(t.drain(), new Set(['default/web']), `and back for ${f.toString()}`);
  }

  // Changed and reverted between two drains: nothing to do.
  const moved = web();
  moved.spec!.ports![0]!.port = 8080;
  t.update(moved);
  t.update(web());
  assert.deepEqual(t.drain(), new Set());

  // Protocol TCP spelled out or left to the default is the same service.
  const implicit = web();
  delete implicit.spec!.ports![0]!.protocol;
  t.update(implicit);
  assert.deepEqual(t.drain(), new Set());

  t.delete('default/web');
  assert.deepEqual(t.drain(), new Set(['default/web']));
  t.delete('default/web');
  t.delete('default/never-existed');
  assert.deepEqual(t.drain(), new Set());

  // Added and deleted between drains: never existed as far as the proxy is concerned.
  t.update(svc('blip', { clusterIP: '10.96.0.9', ports: [{ port: 80 }] }));
  t.delete(svc('blip', {}));
  assert.deepEqual(t.drain(), new Set());
  assert.equal(t.size, 0);
});

test('ServiceTracker: many services, only the touched ones are reported, sorted', () => {
  const t = new ServiceTracker();
  for (let i = 0; i < 50; i++) t.update(svc(`s${i}`, { clusterIP: `10.96.1.${i}`, ports: [{ port: 80 }] }));
  assert.equal(t.drain().size, 50);
  t.update(svc('s7', { clusterIP: '10.96.1.7', ports: [{ port: 81 }] }));
  t.update(svc('s3', { clusterIP: '10.96.1.3', ports: [{ port: 80 }] })); // identical
  t.update(svc('s2', { clusterIP: '10.96.1.2', ports: [{ port: 443 }] }));
  assert.ok(t.dirty);
  assert.deepEqual([...t.drain()], ['default/s2', 'default/s7']);
  assert.equal(t.dirty, false);
  assert.deepEqual(t.get('default/s7')!.spec!.ports![0]!.port, 81);
  assert.equal(t.list().length, 50);
});

function webSlice(name: string, ips: string[], port = 8080): V1EndpointSlice {
  const s = slice('web', name, [{ name: 'http', port }], ips.map((ip) => ({ ip, ready: true, node: 'n1' })));
  s.metadata!.resourceVersion = '1';
  return s;
}

test('EndpointSliceTracker: slices merge per service; moving an endpoint between slices is no change', () => {
  const t = new EndpointSliceTracker();
  t.update(webSlice('web-a', ['10.244.0.1', '10.244.0.2']));
  t.update(webSlice('web-b', ['10.244.0.3']));
  assert.deepEqual(t.drain(), new Set(['default/web']));
  assert.equal(t.members('default/web').length, 2);

  // The slice controller rebalances: .2 moves from a to b.
  t.update(webSlice('web-a', ['10.244.0.1']));
  t.update(webSlice('web-b', ['10.244.0.3', '10.244.0.2']));
  assert.deepEqual(t.drain(), new Set());

  // Metadata-only churn and spelled-out default conditions.
  const a = webSlice('web-a', ['10.244.0.1']);
  a.metadata!.resourceVersion = '2';
  a.metadata!.annotations = { 'endpoints.kubernetes.io/last-change-trigger-time': '2024-01-01T00:00:00Z' };
  a.endpoints[0]!.conditions = { ready: true, serving: true, terminating: false };
  a.endpoints[0]!.targetRef = { kind: 'Pod', name: 'web-1' };
  a.endpoints[0]!.zone = 'zone-x';
  t.update(a);
  assert.deepEqual(t.drain(), new Set());

  // Readiness, port number, hints, node name: changes.
  const cases: Array<(s: V1EndpointSlice) => void> = [
    (s) => (s.endpoints[0]!.conditions = { ready: false }),
    (s) => (s.ports![0]!.port = 9090),
    (s) => (s.endpoints[0]!.hints = { forZones: [{ name: 'zone-a' }] }),
    (s) => (s.endpoints[0]!.nodeName = 'n2'),
    (s) => (s.endpoints[0]!.addresses = ['10.244.0.9']),
  ];
  for (const f of cases) {
    const s = webSlice('web-a', ['10.244.0.1']);
    f(s);
    t.update(s);
    assert.deepEqual(t.drain(), new Set(['default/web']), f.toString());
    t.update(webSlice('web-a', ['10.244.0.1']));
    assert.deepEqual(t.drain(), new Set(['default/web']));
  }

  // An endpoint moving to a slice with another port number IS a change.
  t.update(webSlice('web-b', ['10.244.0.3']));
  t.update(webSlice('web-c', ['10.244.0.2'], 9090));
  assert.deepEqual(t.drain(), new Set(['default/web']));

  t.delete('default/web-c');
  assert.deepEqual(t.drain(), new Set(['default/web']));
  t.delete(webSlice('web-a', []));
  t.delete(webSlice('web-b', []));
  assert.deepEqual(t.drain(), new Set(['default/web']));
  assert.deepEqual(t.members('default/web'), []);
});

test('EndpointSliceTracker: relabelling a slice changes both services; unlabelled slices are ignored', () => {
  const t = new EndpointSliceTracker();
  t.update(webSlice('web-a', ['10.244.0.1']));
  t.update(slice('api', 'api-a', [{ port: 80 }], [{ ip: '10.244.1.1' }]));
  t.drain();
  const moved = webSlice('web-a', ['10.244.0.1']);
  moved.metadata!.labels!['kubernetes.io/service-name'] = 'api';
  t.update(moved);
  assert.deepEqual(t.drain(), new Set(['default/api', 'default/web']));
  assert.deepEqual(t.members('default/web'), []);
  assert.equal(t.members('default/api').length, 2);

  const orphan = clone(moved);
  orphan.metadata!.name = 'orphan';
  delete orphan.metadata!.labels!['kubernetes.io/service-name'];
  t.update(orphan);
  assert.deepEqual(t.drain(), new Set());
  assert.ok(t.get('default/orphan'));
});

test('EndpointSliceTracker: same service name in two namespaces are two services', () => {
  const t = new EndpointSliceTracker();
  t.update(slice('web', 'web-a', [{ port: 80 }], [{ ip: '10.244.0.1' }]));
  t.update(slice('web', 'web-a', [{ port: 80 }], [{ ip: '10.244.0.2' }], { namespace: 'prod' }));
  assert.deepEqual(t.drain(), new Set(['default/web', 'prod/web']));
  t.update(slice('web', 'web-a', [{ port: 80 }], [{ ip: '10.244.0.3' }], { namespace: 'prod' }));
  assert.deepEqual(t.drain(), new Set(['prod/web']));
});

test('EndpointSliceTracker: a service whose slices have no endpoints is no change until one appears (and empty again is a change)', () => {
  const t = new EndpointSliceTracker();
  t.update(webSlice('web-a', []));
  t.update(webSlice('web-b', []));
  assert.deepEqual(t.drain(), new Set(), 'slices without endpoints program nothing');
  t.update(webSlice('web-b', ['10.244.0.9']));
  assert.deepEqual(t.drain(), new Set(['default/web']), 'the first endpoint of a service that had none');
  t.update(webSlice('web-b', []));
  assert.deepEqual(t.drain(), new Set(['default/web']), 'back to none');
  // Added with endpoints and emptied before the drain: nothing to do.
  t.update(webSlice('web-c', ['10.244.0.10']));
  t.update(webSlice('web-c', []));
  assert.deepEqual(t.drain(), new Set());
});

test('ServiceTracker: a service first seen is a change without any fingerprint compare; deleted before the drain it is none', () => {
  const t = new ServiceTracker();
  for (let i = 0; i < 300; i++) t.update(svc(`s${i}`, { type: 'ClusterIP', clusterIP: `10.96.1.${i % 250}`, ports: [{ name: 'p', port: 80, protocol: 'TCP' }] }));
  t.delete('default/s5');
  const d = t.drain();
  assert.equal(d.size, 299);
  assert.ok(!d.has('default/s5'));
});

test('EndpointSliceTracker: a group through one, two, one and no members keeps its members in arrival order', () => {
  const t = new EndpointSliceTracker();
  const names = () => t.members('default/web').map((s) => s.metadata!.name);
  t.update(webSlice('web-a', ['10.244.0.1']));
  assert.deepEqual(names(), ['web-a']);
  t.update(webSlice('web-a', ['10.244.0.9'])); // replaced, still one member
  assert.deepEqual(names(), ['web-a']);
  assert.deepEqual(t.members('default/web')[0]!.endpoints![0]!.addresses, ['10.244.0.9']);
  t.update(webSlice('web-b', ['10.244.0.2']));
  t.update(webSlice('web-c', ['10.244.0.3']));
  assert.deepEqual(names(), ['web-a', 'web-b', 'web-c']);
  t.delete('default/web-a');
  t.delete('default/web-c');
  assert.deepEqual(names(), ['web-b']);
  t.update(webSlice('web-a', ['10.244.0.1']));
  assert.deepEqual(names(), ['web-b', 'web-a']);
  // relabelled away: the old group loses it, the new one gains it
  const moved = webSlice('web-b', ['10.244.0.2']);
  moved.metadata!.labels = { 'kubernetes.io/service-name': 'api' };
  t.update(moved);
  assert.deepEqual(names(), ['web-a']);
  assert.deepEqual(t.members('default/api').map((s) => s.metadata!.name), ['web-b']);
  t.delete('default/web-a');
  assert.deepEqual(names(), []);
  assert.equal(t.size, 1);
});
