// The API server's limits on the objects a manifest holds (issue #58): each limit at its
// boundary — exactly the limit kept, one more refuses the file with a ManifestError naming the
// file, the object and the field — and a 10 MB name refused before the YAML parser reads it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManifestError, parseManifests, type ManifestSet } from '../../src/kube/manifests.js';
import { BadInputError } from '../../src/errors.js';

type Obj = Record<string, unknown>;

const service = (meta: Obj = {}, spec: Obj = {}): Obj => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name: 'web', namespace: 'ns', ...meta },
  spec: { clusterIP: '10.96.0.1', ports: [{ port: 80 }], ...spec },
});
const endpoint = (i: number, more: Obj = {}): Obj => ({ addresses: [`10.244.${i >> 8}.${i & 255}`], ...more });
const slice = (top: Obj = {}, meta: Obj = {}): Obj => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name: 'web-1', namespace: 'ns', labels: { 'kubernetes.io/service-name': 'web' }, ...meta },
  addressType: 'IPv4',
  endpoints: [endpoint(1)],
  ports: [{ port: 8080 }],
  ...top,
});
const legacy = (address: Obj = {}, port: Obj = {}): Obj => ({
  apiVersion: 'v1',
  kind: 'Endpoints',
  metadata: { name: 'web', namespace: 'ns' },
  subsets: [{ addresses: [{ ip: '10.244.0.5', ...address }], ports: [{ port: 8080, ...port }] }],
});
const node = (meta: Obj = {}): Obj => ({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', ...meta } });
const cidr = (name: string): Obj => ({ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name }, spec: { cidrs: ['10.96.0.0/12'] } });

const a = (n: number, c = 'a') => c.repeat(n);
const many = <T>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));

/** Kept: parsed, no warning, one object of its kind. */
function kept(o: Obj): ManifestSet {
  const m = parseManifests(JSON.stringify(o), 'm.json');
  assert.deepEqual(m.warnings, []);
  const n = m.services.length + m.endpointSlices.length + m.endpoints.length + m.nodes.length + m.serviceCIDRs.length;
  assert.equal(n, 1, 'the object is kept');
  return m;
}

/** Refused: a ManifestError (a BadInputError) naming the file, the document, the object and the field. */
function refused(o: Obj, object: string, field: RegExp, file = 'm.json'): void {
  assert.throws(
    () => parseManifests(JSON.stringify(o), file),
    (e: unknown) => {
      assert.ok(e instanceof ManifestError, String(e));
      assert.ok(e instanceof BadInputError);
      assert.equal(e.file, file);
      assert.equal(e.document, 1);
      assert.ok(e.message.startsWith(`${file}: document 1: ${object}: `), e.message);
      assert.match(e.message, field);
      assert.ok(e.message.length < 400, 'the message quotes no long value whole');
      return true;
    },
  );
}

/** Exactly `limit` kept, `limit + 1` refused. */
function boundary(make: (n: number) => Obj, limit: number, object: (n: number) => string, field: RegExp): void {
  kept(make(limit));
  refused(make(limit + 1), object(limit + 1), field);
}

test('limits: names — a Service a DNS-1035 label (63), its namespace a DNS-1123 label (63); EndpointSlice, Endpoints, Node and ServiceCIDR names DNS-1123 subdomains (253)', () => {
  boundary((n) => service({ name: a(n) }), 63, (n) => `Service ns/${a(n)}`, /metadata\.name must be no more than 63 characters \(a DNS-1035 label\), not 64$/);
  boundary((n) => service({ namespace: a(n, 'n') }), 63, (n) => `Service ${a(n, 'n')}/web`, /metadata\.namespace must be no more than 63 characters \(a DNS-1123 label\), not 64$/);
  const long = (n: number) => (n > 80 ? `${a(n).slice(0, 60)} … (${n - 80} characters left out) … ${a(20)}` : a(n));
  boundary((n) => slice({}, { name: a(n) }), 253, (n) => `EndpointSlice ns/${long(n)}`, /metadata\.name must be no more than 253 characters \(a DNS-1123 subdomain\), not 254$/);
  boundary((n) => ({ ...legacy(), metadata: { name: a(n), namespace: 'ns' } }), 253, (n) => `Endpoints ns/${long(n)}`, /metadata\.name must be no more than 253 characters/);
  boundary((n) => node({ name: a(n) }), 253, (n) => `Node ${long(n)}`, /metadata\.name must be no more than 253 characters/);
  boundary((n) => cidr(a(n)), 253, (n) => `ServiceCIDR ${long(n)}`, /metadata\.name must be no more than 253 characters/);
  // a cluster-scoped object's namespace is not its (the reader drops it)
  kept(node({ namespace: a(300) }));
});

test('limits: labels (key name 63, key prefix 253, value 63) and annotations (256 KiB together), on every kind read', () => {
  boundary((n) => service({ labels: { [`example.com/${a(n, 'k')}`]: 'v' } }), 63, () => 'Service ns/web', /metadata\.labels key name must be no more than 63 characters \(a qualified name\), not 64$/);
  boundary((n) => service({ labels: { [`${a(n, 'p')}/k`]: 'v' } }), 253, () => 'Service ns/web', /metadata\.labels key prefix must be no more than 253 characters \(a DNS-1123 subdomain\), not 254$/);
  boundary((n) => slice({}, { labels: { 'kubernetes.io/service-name': a(n) } }), 63, () => 'EndpointSlice ns/web-1', /metadata\.labels\["kubernetes\.io\/service-name"\] must be no more than 63 characters \(a label value\), not 64$/);
  boundary((n) => node({ labels: { 'topology.kubernetes.io/zone': a(n) } }), 63, () => 'Node node-a', /metadata\.labels\["topology\.kubernetes\.io\/zone"\] must be no more than 63/);
  const total = 256 * 1024;
  boundary((n) => service({ annotations: { k: a(n - 1), 'ipvsync.io/scheduler': '' } }), total - 'ipvsync.io/scheduler'.length, () => 'Service ns/web', /metadata\.annotations must have at most 262144 characters, all keys and values together, not 262145$/);
});

test('limits: Service ports names (DNS-1123 labels, 63), spec.clusterIPs and spec.ipFamilies (2)', () => {
  boundary((n) => service({}, { ports: [{ port: 80, name: 'http' }, { port: 81, name: a(n) }] }), 63, () => 'Service ns/web', /spec\.ports\[1\]\.name must be no more than 63 characters \(a DNS-1123 label\), not 64$/);
  boundary((n) => service({}, { clusterIPs: ['10.96.0.1', 'fd00::1', '10.96.0.2'].slice(0, n) }), 2, () => 'Service ns/web', /spec\.clusterIPs must have at most 2 items, not 3$/);
  boundary((n) => service({}, { ipFamilies: ['IPv4', 'IPv6', 'IPv4'].slice(0, n) }), 2, () => 'Service ns/web', /spec\.ipFamilies must have at most 2 items, not 3$/);
});

test('limits: EndpointSlice — 1000 endpoints, 100 addresses an endpoint, addresses 253, hostname 63, nodeName 253, 8 zone hints (63) and 8 node hints (253), 20000 ports named 63', () => {
  const S = 'EndpointSlice ns/web-1';
  boundary((n) => slice({ endpoints: many(n, (i) => endpoint(i)) }), 1000, () => S, /: endpoints must have at most 1000 items, not 1001$/);
  boundary((n) => slice({ endpoints: [{ addresses: many(n, (i) => `10.244.0.${i}`) }] }), 100, () => S, /endpoints\[0\]\.addresses must have at most 100 items, not 101$/);
  boundary((n) => slice({ addressType: 'FQDN', endpoints: [{ addresses: [a(n)] }] }), 253, () => S, /endpoints\[0\]\.addresses\[0\] must be no more than 253 characters/);
  boundary((n) => slice({ endpoints: [endpoint(0), endpoint(1, { hostname: a(n) })] }), 63, () => S, /endpoints\[1\]\.hostname must be no more than 63 characters \(a DNS-1123 label\), not 64$/);
  boundary((n) => slice({ endpoints: [endpoint(0, { nodeName: a(n) })] }), 253, () => S, /endpoints\[0\]\.nodeName must be no more than 253 characters \(a node name\), not 254$/);
  boundary((n) => slice({ endpoints: [endpoint(0, { hints: { forZones: many(n, (i) => ({ name: `z${i}` })) } })] }), 8, () => S, /endpoints\[0\]\.hints\.forZones must have at most 8 items, not 9$/);
  boundary((n) => slice({ endpoints: [endpoint(0, { hints: { forZones: [{ name: a(n) }] } })] }), 63, () => S, /endpoints\[0\]\.hints\.forZones\[0\]\.name must be no more than 63 characters \(a label value\)/);
  boundary((n) => slice({ endpoints: [endpoint(0, { hints: { forNodes: many(n, (i) => ({ name: `n${i}` })) } })] }), 8, () => S, /endpoints\[0\]\.hints\.forNodes must have at most 8 items, not 9$/);
  boundary((n) => slice({ endpoints: [endpoint(0, { hints: { forNodes: [{ name: a(n) }] } })] }), 253, () => S, /endpoints\[0\]\.hints\.forNodes\[0\]\.name must be no more than 253 characters/);
  boundary((n) => slice({ ports: many(n, (i) => ({ port: (i % 65535) + 1, name: `p${i}` })) }), 20000, () => S, /: ports must have at most 20000 items, not 20001$/);
  boundary((n) => slice({ ports: [{ port: 80, name: a(n) }] }), 63, () => S, /ports\[0\]\.name must be no more than 63 characters \(a DNS-1123 label\), not 64$/);
});

test('limits: legacy Endpoints — hostname 63, nodeName 253, port names 63', () => {
  const E = 'Endpoints ns/web';
  boundary((n) => legacy({ hostname: a(n) }), 63, () => E, /subsets\[0\]\.addresses\[0\]\.hostname must be no more than 63 characters/);
  boundary((n) => legacy({ nodeName: a(n) }), 253, () => E, /subsets\[0\]\.addresses\[0\]\.nodeName must be no more than 253 characters/);
  boundary((n) => legacy({}, { name: a(n) }), 63, () => E, /subsets\[0\]\.ports\[0\]\.name must be no more than 63 characters/);
});

test('limits: an object of a List is named by its item; the other objects of the file are not read (the file is refused)', () => {
  const list = { apiVersion: 'v1', kind: 'List', items: [service({ name: 'ok' }), service({ name: a(64) })] };
  assert.throws(
    () => parseManifests(JSON.stringify(list), 'list.json'),
    (e: unknown) => e instanceof ManifestError && e.item === 1 && e.message.startsWith(`list.json: document 1, item 1: Service ns/${a(64)}: metadata.name`),
  );
});

test('limits: a 10 MB Service name is refused — in YAML before the parser reads it (a line over the 3 MiB request limit), in JSON by the name limit; the message quotes it shortly', () => {
  const name = a(10_000_000);
  assert.throws(
    () => parseManifests(`apiVersion: v1\nkind: Service\nmetadata:\n  name: ${name}\n  namespace: ns\nspec: {ports: [{port: 80}]}\n`, 'big.yaml'),
    (e: unknown) => {
      assert.ok(e instanceof ManifestError);
      assert.equal(e.file, 'big.yaml');
      assert.match(e.message, /^big\.yaml: line 4 has 10000008 characters, more than 3145728 \(3 MiB, the API server's largest request body: no object it accepts has a line that long\):   name: aaa/);
      assert.ok(e.message.length < 400);
      return true;
    },
  );
  // flow style on one line: the same
  assert.throws(() => parseManifests(`kind: Service\nmetadata: {name: ${name}}\n`, 'flow.yaml'), /^ManifestError: flow\.yaml: line 2 has/);
  refused(service({ name }), `Service ns/${name.slice(0, 60)} … (9999920 characters left out) … ${a(20)}`, /metadata\.name must be no more than 63 characters \(a DNS-1035 label\), not 10000000$/, 'big.json');
});

test('limits: a YAML line of exactly 3 MiB is read (a ConfigMap beside the Service, skipped as another kind), one character more refuses the file', () => {
  const MiB3 = 3 * 1024 * 1024;
  const doc = (n: number) => `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  k: ${a(n - '  k: '.length, 'x')}\n---\n${'apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n'}`;
  const m = parseManifests(doc(MiB3), 'cm.yaml');
  assert.equal(m.services.length, 1);
  assert.deepEqual(m.skipped.map((s) => s.kind), ['ConfigMap']);
  assert.throws(() => parseManifests(doc(MiB3 + 1), 'cm.yaml'), (e: unknown) => e instanceof ManifestError && e.document === 0 && /^cm\.yaml: line 5 has 3145729 characters/.test(e.message));
});
