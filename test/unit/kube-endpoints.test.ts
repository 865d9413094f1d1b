// kube-proxy's choice of cluster-wide and node-local endpoints (src/kube/endpoints.ts), called
// directly: the fast paths (the list itself when every endpoint qualifies, one shared empty
// list) must choose exactly what the filters do.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clusterEndpoints, endpointOrderKey, endpointsForPort, localEndpoints, type EndpointInfo } from '../../src/kube/endpoints.js';
import { slice } from '../fixtures/kube/builders.js';

const NONE: ReadonlySet<string> = new Set();
function ep(address: string, o: Partial<EndpointInfo> = {}): EndpointInfo {
  const ready = o.ready ?? true;
  return { address, port: 80, ready, serving: o.serving ?? ready, terminating: o.terminating ?? false, local: o.local ?? false, zoneHints: o.zoneHints ?? NONE, nodeHints: o.nodeHints ?? NONE, orderKey: endpointOrderKey(address, 80) };
}
const addrs = (xs: readonly EndpointInfo[]) => xs.map((e) => e.address);

test('clusterEndpoints: every endpoint ready: the list itself, not a copy', () => {
  const all = [ep('10.0.0.1'), ep('10.0.0.2', { local: true })];
  const out = clusterEndpoints(all, 'node-a', undefined);
  assert.deepEqual(addrs(out), ['10.0.0.1', '10.0.0.2']);
  assert.equal(out, all);
});

test('clusterEndpoints: not-ready endpoints are left out; none ready, the serving-terminating ones', () => {
  const all = [ep('10.0.0.1', { ready: false }), ep('10.0.0.2'), ep('10.0.0.3', { ready: false, serving: true, terminating: true })];
  const out = clusterEndpoints(all, 'node-a', undefined);
  assert.deepEqual(addrs(out), ['10.0.0.2']);
  assert.notEqual(out, all);
  const none = [ep('10.0.0.1', { ready: false }), ep('10.0.0.3', { ready: false, serving: true, terminating: true })];
  assert.deepEqual(addrs(clusterEndpoints(none, 'node-a', undefined)), ['10.0.0.3']);
  assert.deepEqual(addrs(clusterEndpoints([ep('10.0.0.1', { ready: false })], 'node-a', undefined)), []);
  assert.deepEqual(clusterEndpoints([], 'node-a', undefined), []);
});

test('clusterEndpoints: topology hints filter even when every endpoint is ready', () => {
  const zones = (z: string) => new Set([z]);
  const all = [ep('10.0.0.1', { zoneHints: zones('z1') }), ep('10.0.0.2', { zoneHints: zones('z2') })];
  assert.deepEqual(addrs(clusterEndpoints(all, 'node-a', 'z2')), ['10.0.0.2']);
  // no endpoint for this zone: hints ignored, all of them
  assert.deepEqual(addrs(clusterEndpoints(all, 'node-a', 'z3')), ['10.0.0.1', '10.0.0.2']);
  const nodes = [ep('10.0.0.1', { nodeHints: new Set(['node-a']) }), ep('10.0.0.2', { nodeHints: new Set(['node-b']) })];
  assert.deepEqual(addrs(clusterEndpoints(nodes, 'node-a', undefined)), ['10.0.0.1']);
});

test('localEndpoints: ready node-local ones, else serving-terminating node-local, else none (a frozen shared list)', () => {
  const all = [ep('10.0.0.1', { local: true }), ep('10.0.0.2'), ep('10.0.0.3', { local: true, ready: false })];
  assert.deepEqual(addrs(localEndpoints(all)), ['10.0.0.1']);
  const term = [ep('10.0.0.1', { local: true, ready: false, serving: true, terminating: true }), ep('10.0.0.2')];
  assert.deepEqual(addrs(localEndpoints(term)), ['10.0.0.1']);
  const remote = [ep('10.0.0.1'), ep('10.0.0.2')];
  const none = localEndpoints(remote);
  assert.deepEqual(none, []);
  assert.ok(Object.isFrozen(none));
  assert.equal(localEndpoints([]), none);
});

test("endpointsForPort reads conditions as kube-proxy's endpoint slice cache: ready and serving absent are true, terminating absent is false", () => {
  const s = slice('web', 'web-1', [{ name: 'http', port: 8080 }], []);
  s.endpoints = [
    { addresses: ['10.0.0.1'], conditions: {} },
    { addresses: ['10.0.0.2'], conditions: { ready: false, terminating: true } },
    { addresses: ['10.0.0.3'], conditions: { ready: false, serving: false, terminating: true } },
    { addresses: ['10.0.0.4'] },
  ];
  const all = endpointsForPort([s], 'http', 'tcp', 'inet', 'node-a');
  assert.deepEqual(all.map((e) => [e.address, e.ready, e.serving, e.terminating]), [
    ['10.0.0.1', true, true, false],
    ['10.0.0.2', false, true, true],
    ['10.0.0.3', false, false, true],
    ['10.0.0.4', true, true, false],
  ]);
  // no ready endpoint left: the one serving-terminating by default is the fallback
  assert.deepEqual(addrs(clusterEndpoints(all.filter((e) => !e.ready), 'node-a', undefined)), ['10.0.0.2']);
});

test("one address and port in two slices: the later slice's unless it is terminating, as kube-proxy's endpoint slice cache (a pod's address reused while the old pod terminates)", () => {
  const port = [{ name: 'http', port: 8080 }];
  const a = slice('web', 'web-a', port, []);
  const b = slice('web', 'web-b', port, []);
  // the new pod in the earlier slice, the terminating old one in the later: the new one is kept
  a.endpoints = [{ addresses: ['10.0.0.7'], conditions: { ready: true }, nodeName: 'node-a' }];
  b.endpoints = [{ addresses: ['10.0.0.7'], conditions: { ready: false, serving: true, terminating: true }, nodeName: 'node-b' }];
  const kept = endpointsForPort([a, b], 'http', 'tcp', 'inet', 'node-a');
  assert.deepEqual(kept.map((e) => [e.address, e.ready, e.terminating, e.local]), [['10.0.0.7', true, false, true]]);
  // the other way round: the later, not terminating, replaces the earlier
  const [later] = endpointsForPort([b, a], 'http', 'tcp', 'inet', 'node-a');
  assert.deepEqual([later!.ready, later!.local], [true, true]);
  // both terminating: the first given stays; neither terminating: the later wins
  b.endpoints[0]!.nodeName = 'node-c';
  a.endpoints = [{ addresses: ['10.0.0.7'], conditions: { ready: false, serving: true, terminating: true }, nodeName: 'node-a' }];
  assert.equal(endpointsForPort([a, b], 'http', 'tcp', 'inet', 'node-a')[0]!.local, true);
  a.endpoints[0]!.conditions = { ready: true };
  b.endpoints[0]!.conditions = { ready: true };
  assert.equal(endpointsForPort([a, b], 'http', 'tcp', 'inet', 'node-a')[0]!.local, false, 'node-c, the later');
});
