// Static manifests: files and folders, multi-document YAML, Lists, JSON, legacy Endpoints, and
// errors that say which file and document is wrong.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1EndpointSlice, V1Node, V1Service, V1ServiceCIDR } from '@kubernetes/client-node';
import { affectsManifests, isManifestName } from '../../src/kube/manifest-names.js';
import { endpointsToSlices, loadManifests, ManifestError, ManifestFolder, parseManifests } from '../../src/kube/manifests.js';
import { translate } from '../../src/proxy/ipvs/plane.js';
import { render } from '../fixtures/kube/builders.js';

const EXAMPLE = join(import.meta.dirname, '../../../test/fixtures/kube/example');

test('manifests: the example folder (YAML multi-doc, a List with legacy Endpoints, JSON) loads and translates', async () => {
  const set = await loadManifests([EXAMPLE]);
  assert.deepEqual(set.services.map((s) => `${s.metadata!.namespace}/${s.metadata!.name}`), ['default/sticky', 'default/nginx-basic', 'default/web-nodeport']);
  assert.deepEqual(set.skipped, [{ source: `${EXAMPLE}/affinity.json: document 1`, kind: 'Deployment', name: 'default/sticky' }]);
  assert.deepEqual(
    set.endpointSlices.map((s) => s.metadata!.name),
    ['sticky-1', 'nginx-basic-7xk2p', 'web-nodeport-mirror-0-ipv4'],
  );
  const m = translate({ ...set, node: { name: 'node-a', addresses: ['10.0.0.11'] } });
  assert.deepEqual(render(m.services), [
    'TCP 10.0.0.11:30080 rr',
    '  -> 192.168.1.10:8000 Masq 1',
    '  -> 192.168.2.10:8000 Masq 1',
    'TCP 10.96.100.10:8080 rr',
    '  -> 192.168.1.10:8000 Masq 1',
    '  -> 192.168.2.10:8000 Masq 1',
    'TCP 10.96.100.20:80 rr persistent 600',
    '  -> 192.168.1.20:8080 Masq 1',
    '  -> 192.168.1.21:8080 Masq 1',
    'TCP 10.105.250.129:80 rr',
    '  -> 192.168.0.7:80 Masq 1',
    '  -> 192.168.1.3:80 Masq 1',
    '  -> 192.168.1.4:80 Masq 1',
  ]);
  assert.deepEqual(m.vips, ['10.96.100.10', '10.96.100.20', '10.105.250.129']);
});

test('manifests: legacy Endpoints → one slice per subset and family; notReady addresses not ready', () => {
  const slices = endpointsToSlices({
    metadata: { name: 'db', namespace: 'prod', labels: { app: 'db' } },
    subsets: [
      {
        addresses: [{ ip: '10.244.0.1', nodeName: 'n1', hostname: 'db-0' }, { ip: 'fd00::1' }],
        notReadyAddresses: [{ ip: '10.244.0.2' }],
        ports: [{ name: 'pg', port: 5432 }, { name: 'metrics', port: 9187, protocol: 'TCP' }],
      },
      { addresses: [{ ip: '10.244.0.3' }], ports: [{ port: 53, protocol: 'UDP' }] },
      { ports: [{ port: 1 }] },
    ],
  });
  assert.deepEqual(slices, [
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'db-mirror-0-ipv4', namespace: 'prod', labels: { app: 'db', 'kubernetes.io/service-name': 'db' } },
      addressType: 'IPv4',
      endpoints: [
        { addresses: ['10.244.0.1'], conditions: { ready: true }, nodeName: 'n1', hostname: 'db-0' },
        { addresses: ['10.244.0.2'], conditions: { ready: false } },
      ],
      ports: [
        { name: 'pg', port: 5432, protocol: 'TCP' },
        { name: 'metrics', port: 9187, protocol: 'TCP' },
      ],
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'db-mirror-0-ipv6', namespace: 'prod', labels: { app: 'db', 'kubernetes.io/service-name': 'db' } },
      addressType: 'IPv6',
      endpoints: [{ addresses: ['fd00::1'], conditions: { ready: true } }],
      ports: [
        { name: 'pg', port: 5432, protocol: 'TCP' },
        { name: 'metrics', port: 9187, protocol: 'TCP' },
      ],
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'db-mirror-1-ipv4', namespace: 'prod', labels: { app: 'db', 'kubernetes.io/service-name': 'db' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.244.0.3'], conditions: { ready: true } }],
      ports: [{ name: '', port: 53, protocol: 'UDP' }],
    },
  ]);
});

test('manifests: legacy Endpoints are ignored for a service that has EndpointSlices', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-manifests-'));
  try {
    writeFileSync(
      join(dir, 'a.yaml'),
      `apiVersion: v1
kind: Service
metadata: {name: web}
spec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}
---
apiVersion: v1
kind: Endpoints
metadata: {name: web}
subsets: [{addresses: [{ip: 10.244.9.9}], ports: [{port: 80}]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{port: 80}]
endpoints: [{addresses: [10.244.0.1]}]
`,
    );
    const set = await loadManifests([join(dir, 'a.yaml')]);
    assert.equal(set.endpoints.length, 1, 'kept as read');
    assert.deepEqual(set.endpointSlices.map((s) => s.metadata!.name), ['web-1']);
    const m = translate({ ...set, node: { name: 'n', addresses: [] } });
    assert.deepEqual(render(m.services), ['TCP 10.96.0.1:80 rr', '  -> 10.244.0.1:80 Masq 1']);
  } finally {
    rmSync(dir, { recursive: true });
  }
});

// A file that does not parse, and two objects with one name, are errors: nothing is read.
const bad: Array<{ name: string; text: string; error: RegExp; document: number; item?: number }> = [
  { name: 'YAML syntax', text: 'apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {}\n---\nfoo: [unclosed\n', error: /^x\.yaml: document 2: YAML: .* at line 7, column 1$/, document: 2 },
  { name: 'an alias before its anchor', text: 'apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: *x\n', error: /^x\.yaml: document 1: YAML: unidentified alias "x" at line 4, column 9$/, document: 1 },
  { name: 'too many aliases', text: `a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [${'*a,'.repeat(9)}]\nc: &c [${'*b,'.repeat(9)}]\nd: &d [${'*c,'.repeat(9)}]\ne: [${'*d,'.repeat(9)}]\n`, error: /^x\.yaml: document 1: YAML: excessive aliasing/, document: 1 },
  { name: 'duplicate', text: 'apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: default}\nspec: {}\n', error: /document 2: duplicate Service default\/a \(first in x\.yaml: document 1\)/, document: 2 },
];

for (const b of bad) {
  test(`manifests: bad document — ${b.name}`, () => {
    assert.throws(
      () => parseManifests(b.text, 'x.yaml'),
      (e: unknown) => {
        assert.ok(e instanceof ManifestError, String(e));
        assert.match(e.message, b.error);
        assert.equal(e.file, 'x.yaml');
        assert.equal(e.document, b.document);
        assert.equal(e.item, b.item);
        return true;
      },
    );
  });
}

// An object of the wrong shape is a warning naming it (file, document, item, the object and the
// field) and is skipped; the good Service after it in the same file is kept.
const GOOD = '---\napiVersion: v1\nkind: Service\nmetadata: {name: good}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n';
const badObject: Array<{ name: string; text: string; warning: RegExp; source: string }> = [
  { name: 'a scalar document', text: 'just text\n', warning: /^not a Kubernetes object \(expected a mapping\), skipped$/, source: 'x.yaml: document 1' },
  { name: 'no kind', text: 'apiVersion: v1\nmetadata: {name: a}\n', warning: /^missing kind/, source: 'x.yaml: document 1' },
  { name: 'no name (after an empty document)', text: '---\n---\napiVersion: v1\nkind: Service\nmetadata: {}\nspec: {}\n', warning: /^Service without metadata.name/, source: 'x.yaml: document 2' },
  { name: 'a namespace that is no name', text: 'apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: [x]}\nspec: {}\n', warning: /^Service a: metadata.namespace \["x"\] is not a name, skipped$/, source: 'x.yaml: document 1' },
  { name: 'wrong apiVersion', text: 'apiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: a}\naddressType: IPv4\nendpoints: []\n', warning: /^EndpointSlice default\/a: apiVersion discovery.k8s.io\/v1beta1 \(expected discovery.k8s.io\/v1\), skipped$/, source: 'x.yaml: document 1' },
  { name: 'Service without spec', text: 'apiVersion: v1\nkind: Service\nmetadata: {name: a}\n', warning: /^Service default\/a: without spec/, source: 'x.yaml: document 1' },
  { name: 'bad service port', text: 'apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 0}]}\n', warning: /^Service default\/a: spec.ports\[0\].port must be 1..65535/, source: 'x.yaml: document 1' },
  { name: 'ports not a list', text: 'apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: {port: 80}}\n', warning: /^Service default\/a: spec.ports is not a list/, source: 'x.yaml: document 1' },
  { name: 'bad node port', text: 'apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {ports: [{port: 80, nodePort: "x"}]}\n', warning: /spec.ports\[0\].nodePort/, source: 'x.yaml: document 1' },
  { name: 'externalIPs not a list', text: 'apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {externalIPs: 1.2.3.4}\n', warning: /spec.externalIPs must be a list of strings/, source: 'x.yaml: document 1' },
  { name: 'slice addressType', text: 'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: a}\naddressType: IPv5\nendpoints: []\n', warning: /addressType must be IPv4, IPv6 or FQDN/, source: 'x.yaml: document 1' },
  { name: 'slice without endpoints', text: 'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: a}\naddressType: IPv4\n', warning: /endpoints must be a list/, source: 'x.yaml: document 1' },
  { name: 'slice endpoint without addresses', text: 'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: a}\naddressType: IPv4\nendpoints: [{addresses: []}]\n', warning: /endpoints\[0\].addresses must be a non-empty list/, source: 'x.yaml: document 1' },
  { name: 'slice endpoint not a mapping', text: 'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: a}\naddressType: IPv4\nendpoints: [null]\n', warning: /endpoints\[0\].addresses must be a non-empty list/, source: 'x.yaml: document 1' },
  { name: 'Endpoints with a bad ip', text: 'apiVersion: v1\nkind: Endpoints\nmetadata: {name: a}\nsubsets: [{addresses: [{ip: 10.0.0.300}]}]\n', warning: /^Endpoints default\/a: subsets\[0\].addresses\[0\].ip is not an IP address, skipped$/, source: 'x.yaml: document 1' },
  { name: 'Endpoints with a zone-indexed ip', text: 'apiVersion: v1\nkind: Endpoints\nmetadata: {name: a}\nsubsets: [{addresses: [{ip: "fe80::1%eth0"}]}]\n', warning: /subsets\[0\].addresses\[0\].ip is not an IP address/, source: 'x.yaml: document 1' },
  { name: 'Endpoints addresses not a list (issue 44)', text: 'apiVersion: v1\nkind: Endpoints\nmetadata: {name: a}\nsubsets: [{addresses: "10.244.9.9"}]\n', warning: /^Endpoints default\/a: subsets\[0\].addresses must be a list, skipped$/, source: 'x.yaml: document 1' },
  { name: 'Endpoints subset not a mapping', text: 'apiVersion: v1\nkind: Endpoints\nmetadata: {name: a}\nsubsets: [7]\n', warning: /subsets\[0\] is not a mapping/, source: 'x.yaml: document 1' },
  { name: 'List item', text: 'apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Service, metadata: {name: ok}, spec: {}}\n- {apiVersion: v1, kind: Service, spec: {}}\n', warning: /^Service without metadata.name, skipped$/, source: 'x.yaml: document 1, item 1' },
  { name: 'List without items', text: 'apiVersion: v1\nkind: List\n', warning: /^List without an items list, skipped$/, source: 'x.yaml: document 1' },
];

for (const b of badObject) {
  test(`manifests: bad object, skipped with a warning — ${b.name}`, () => {
    const set = parseManifests(b.text + GOOD, 'x.yaml');
    assert.equal(set.warnings.length, 1, JSON.stringify(set.warnings));
    assert.equal(set.warnings[0]!.source, b.source);
    assert.match(set.warnings[0]!.message, b.warning);
    assert.ok(set.services.some((s) => s.metadata?.name === 'good'), 'the good Service after it is kept');
    const bad = [...set.services, ...set.endpointSlices, ...set.endpoints].filter((o) => o.metadata?.name !== 'good' && o.metadata?.name !== 'ok');
    assert.deepEqual(bad, [], 'the bad object is not kept');
  });
}

test('manifests: a missing path and a duplicate across files name the files', async () => {
  await assert.rejects(loadManifests(['/nonexistent/ipvsync.yaml']), (e: unknown) => e instanceof ManifestError && e.file === '/nonexistent/ipvsync.yaml' && /ENOENT/.test(e.message));
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-manifests-'));
  try {
    const doc = 'apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {}\n';
    writeFileSync(join(dir, '1.yaml'), doc);
    writeFileSync(join(dir, '2.yml'), `---\n${doc}`);
    writeFileSync(join(dir, '.hidden.yaml'), 'broken: [');
    await assert.rejects(loadManifests([dir]), (e: unknown) => {
      assert.ok(e instanceof ManifestError);
      assert.equal(e.message, `${join(dir, '2.yml')}: document 1: duplicate Service default/a (first in ${join(dir, '1.yaml')}: document 1)`);
      return true;
    });
  } finally {
    rmSync(dir, { recursive: true });
  }
});

test('manifest names: the reader reads *.yaml, *.yml, *.json that are not hidden; a folder event for those or for a ConfigMap volume\'s ..data can change what it reads', async (t) => {
  const read = ['a.yaml', 'b.yml', 'C.JSON', 'web-1.json'];
  const skipped = ['.a.yaml', '.web.json.tmp', 'web.json.tmp', 'web.json~', '4913', 'README.md', '..2024_01_01_00_00_00.123', '..data'];
  for (const n of read) assert.ok(isManifestName(n) && affectsManifests(n), n);
  for (const n of skipped) assert.ok(!isManifestName(n), n);
  assert.deepEqual(skipped.filter(affectsManifests), ['..data']);
  // the reader reads exactly those names
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-names-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const doc = (name: string) => `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}}\nspec: {ports: [{port: 80}]}\n`;
  for (const [i, n] of [...read, ...skipped.filter((x) => x !== '..data')].entries()) writeFileSync(join(dir, n), doc(`s${i}`));
  assert.deepEqual((await loadManifests([dir])).services.map((s) => s.metadata?.name).sort(), ['s0', 's1', 's2', 's3']);
});

test('ManifestFolder: each load gives every object (Nodes and ServiceCIDRs too) and deletes the ones gone since the last; a load that fails calls no handler', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-folder-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const doc = (name: string) =>
    `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: ns}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n---\n` +
    `apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: ${name}-1, namespace: ns, labels: {kubernetes.io/service-name: ${name}}}\naddressType: IPv4\nendpoints: [{addresses: [10.244.0.5]}]\nports: [{port: 8080}]\n`;
  writeFileSync(join(dir, 'a.yaml'), doc('a'));
  writeFileSync(join(dir, 'b.yaml'), doc('b'));
  writeFileSync(join(dir, 'n.yaml'), 'apiVersion: v1\nkind: Node\nmetadata: {name: node-a, labels: {topology.kubernetes.io/zone: z1}}\n');
  writeFileSync(join(dir, 'r.yaml'), 'apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: kubernetes}\nspec: {cidrs: [10.96.0.0/12]}\n');
  const calls: string[] = [];
  const h = {
    onServiceUpdate: (s: V1Service) => void calls.push(`service ${s.metadata?.namespace}/${s.metadata?.name}`),
    onServiceDelete: (k: string) => void calls.push(`serviceDelete ${k}`),
    onSliceUpdate: (s: V1EndpointSlice) => void calls.push(`slice ${s.metadata?.namespace}/${s.metadata?.name}`),
    onSliceDelete: (k: string) => void calls.push(`sliceDelete ${k}`),
    onNode: (n: V1Node) => void calls.push(`node ${n.metadata?.name} ${n.metadata?.labels?.['topology.kubernetes.io/zone']}`),
    onNodeDelete: (name: string) => void calls.push(`nodeDelete ${name}`),
    onServiceCIDR: (c: V1ServiceCIDR) => void calls.push(`serviceCIDR ${c.metadata?.name} ${c.spec?.cidrs?.join(',')}`),
    onServiceCIDRDelete: (name: string) => void calls.push(`serviceCIDRDelete ${name}`),
  };
  const folder = new ManifestFolder(dir);
  assert.deepEqual(await folder.load(h), { services: 2, endpointSlices: 2, nodes: 1, serviceCIDRs: 1, warnings: [] });
  assert.deepEqual(calls.splice(0), ['service ns/a', 'service ns/b', 'slice ns/a-1', 'slice ns/b-1', 'node node-a z1', 'serviceCIDR kubernetes 10.96.0.0/12']);
  rmSync(join(dir, 'a.yaml'));
  rmSync(join(dir, 'n.yaml'));
  rmSync(join(dir, 'r.yaml'));
  assert.deepEqual(await folder.load(h), { services: 1, endpointSlices: 1, nodes: 0, serviceCIDRs: 0, warnings: [] });
  assert.deepEqual(calls.splice(0), ['serviceDelete ns/a', 'sliceDelete ns/a-1', 'nodeDelete node-a', 'serviceCIDRDelete kubernetes', 'service ns/b', 'slice ns/b-1']);
  writeFileSync(join(dir, 'c.yaml'), 'kind: Service\nmetadata: [\n');
  await assert.rejects(folder.load(h), ManifestError);
  assert.deepEqual(calls, []);
  // what it knows is the last good load's: b goes when the folder is good again without it
  rmSync(join(dir, 'c.yaml'));
  rmSync(join(dir, 'b.yaml'));
  assert.deepEqual(await folder.load(h), { services: 0, endpointSlices: 0, nodes: 0, serviceCIDRs: 0, warnings: [] });
  assert.deepEqual(calls.splice(0), ['serviceDelete ns/b', 'sliceDelete ns/b-1']);
});

test('manifests: ServiceCIDR objects are read as the API server checks them (one or two CIDRs, of two families), the bad ones skipped with a warning', () => {
  const doc = (name: string, cidrs: string) => `apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: ${name}}\nspec: {cidrs: ${cidrs}}\n`;
  const m = parseManifests(
    [
      doc('kubernetes', '[10.96.0.0/12, "fd00:96::/108"]'),
      doc('no-list', '10.96.0.0/12'),
      doc('three', '[10.1.0.0/16, 10.2.0.0/16, "fd00::/64"]'),
      doc('same-family', '[10.1.0.0/16, 10.2.0.0/16]'),
      doc('not-cidr', '[10.1.0.300/16]'),
      'apiVersion: networking.k8s.io/v1beta1\nkind: ServiceCIDR\nmetadata: {name: beta}\nspec: {cidrs: [10.3.0.0/16]}\n',
    ].join('---\n'),
    'cidrs.yaml',
  );
  assert.deepEqual(m.serviceCIDRs.map((c) => c.metadata?.name), ['kubernetes']);
  assert.deepEqual(m.warnings.map((w) => w.message), [
    'ServiceCIDR no-list: spec.cidrs is not a list, skipped',
    'ServiceCIDR three: spec.cidrs must hold one or two CIDRs, not 3, skipped',
    'ServiceCIDR same-family: spec.cidrs must be of different families, skipped',
    'ServiceCIDR not-cidr: spec.cidrs[0] 10.1.0.300/16 is not a CIDR, skipped',
    'ServiceCIDR beta: apiVersion networking.k8s.io/v1beta1 (expected networking.k8s.io/v1), skipped',
  ]);
});
