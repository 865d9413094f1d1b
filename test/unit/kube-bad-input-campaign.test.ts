// Manifest values that pass nothing must crash nothing (issue 44). A seeded mutation campaign:
// a Service, an EndpointSlice, legacy Endpoints and the Service they belong to, and the Node, get one to three
// of their members (any depth) replaced by values of every wrong type, null, nested garbage or
// removed, and are written as YAML or JSON next to a good Service; the text goes through the
// manifests reader (Endpoints to slices too), the change trackers, translate and the Proxier
// onto the fake kernel. Nothing may throw, no service's translation may fail with a JavaScript
// error (only typed warnings), and the good service is programmed every time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { stringify } from 'yaml';
import { parseManifests, resolveLegacyEndpoints, type ManifestSet } from '../../src/kube/manifests.js';
import { Proxier } from '../../src/proxy/proxier.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { FakeLinks, FakeNftables } from '../../src/testing/fake-kernel.js';
import { prng } from '../helpers/bytes.js';

const NODE = { name: 'node-a', addresses: ['10.0.0.11', '127.0.0.1'] };
const CONFIG = { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] };

const GOOD = `apiVersion: v1
kind: Service
metadata: {name: good, namespace: default}
spec: {clusterIP: 10.96.0.10, ports: [{name: http, port: 80, protocol: TCP}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: good-1, namespace: default, labels: {kubernetes.io/service-name: good}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints: [{addresses: [10.244.1.5], conditions: {ready: true}}]
`;

/** The objects mutated: every member translate and the manifests reader read, set. */
function victims(): Record<string, unknown>[] {
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: {
        name: 'lb',
        namespace: 'default',
        labels: { 'service.kubernetes.io/service-proxy-name': 'ipvsync' },
        annotations: { 'ipvsync.io/scheduler': 'mh', 'ipvsync.io/scheduler-flags': 'mh-port', 'service.beta.kubernetes.io/load-balancer-source-ranges': '198.51.100.0/24' },
      },
      spec: {
        type: 'LoadBalancer',
        clusterIP: '10.96.0.20',
        clusterIPs: ['10.96.0.20', 'fd00:96::20'],
        ipFamilies: ['IPv4', 'IPv6'],
        externalIPs: ['203.0.113.9', '2001:db8::9'],
        ports: [{ name: 'https', port: 443, protocol: 'TCP', nodePort: 30443, targetPort: 8443 }, { name: 'dns', port: 53, protocol: 'UDP', nodePort: 30053 }],
        loadBalancerSourceRanges: ['198.51.100.0/24', '2001:db8:1::/48'],
        sessionAffinity: 'ClientIP',
        sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } },
        healthCheckNodePort: 32000,
        externalTrafficPolicy: 'Local',
        internalTrafficPolicy: 'Cluster',
      },
      status: { loadBalancer: { ingress: [{ ip: '192.0.2.10' }, { ip: '2001:db8::10', ipMode: 'VIP' }, { hostname: 'lb.example.com' }] } },
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'lb-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'lb' } },
      addressType: 'IPv4',
      ports: [{ name: 'https', port: 8443, protocol: 'TCP' }, { name: 'dns', port: 5353, protocol: 'UDP' }],
      endpoints: [
        { addresses: ['10.244.2.7'], conditions: { ready: true, serving: true, terminating: false }, nodeName: 'node-a', zone: 'zone-a', hints: { forZones: [{ name: 'zone-a' }], forNodes: [{ name: 'node-a' }] } },
        { addresses: ['10.244.3.7'], conditions: { ready: false, serving: true, terminating: true }, nodeName: 'node-b', zone: 'zone-b', hints: { forZones: [{ name: 'zone-b' }] } },
      ],
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'legacy', namespace: 'default' },
      spec: { type: 'NodePort', clusterIP: '10.96.0.30', ports: [{ name: 'web', port: 80, nodePort: 30080 }] },
    },
    {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name: 'legacy', namespace: 'default', labels: { app: 'legacy' } },
      subsets: [
        {
          addresses: [{ ip: '10.244.4.4', nodeName: 'node-a', hostname: 'a' }, { ip: 'fd00:244::4' }],
          notReadyAddresses: [{ ip: '10.244.4.5' }],
          ports: [{ name: 'web', port: 8080, protocol: 'TCP' }],
        },
      ],
    },
    // this node: its zone decides the hints of lb-1
    { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { 'topology.kubernetes.io/zone': 'zone-a', 'kubernetes.io/hostname': 'node-a' } } },
  ];
}

const ATOMS: readonly unknown[] = [
  null, true, false, 0, -1, 1.5, 6, 80, 65536, 30080, 2 ** 53 + 2, 1e308, NaN, Infinity, -Infinity,
  '', ' ', 'x', 'None', 'TCP', 'tcp', 'UDP', 'SCTP', 'Local', 'ClientIP', 'LoadBalancer', 'NodePort', 'ExternalName', 'IPv4', 'IPv6', 'Proxy',
  '10.0.0.01', 'fe80::1%eth0', '::ffff:1.2.3.4', '203.0.113.7/24', '10.0.0.0/33', ' 10.96.5.5 ', '10.96.5.5', 'fd00::5', '10.244.9.9', 'zone-a', 'node-a',
  'x'.repeat(200), '__proto__', 'constructor', 'toString',
];
const KEYS: readonly string[] = ['ip', 'port', 'name', 'protocol', 'addresses', 'conditions', 'ready', 'forZones', 'nodePort', 'clientIP', 'timeoutSeconds', 'ingress', 'hostname', 'toString', '__proto__'];

function garbage(rand: () => number, depth = 0): unknown {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const r = rand();
  if (depth > 2 || r < 0.6) return pick(ATOMS);
  if (r < 0.8) return Array.from({ length: Math.floor(rand() * 3) }, () => garbage(rand, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = Math.floor(rand() * 3); i > 0; i--) Object.defineProperty(o, pick(KEYS), { value: garbage(rand, depth + 1), enumerable: true, writable: true, configurable: true });
  return o;
}

type Path = Array<string | number>;

/** Every member of `v` at any depth (not `v` itself). */
function paths(v: unknown, at: Path = [], out: Path[] = []): Path[] {
  if (typeof v !== 'object' || v === null) return out;
  for (const k of Object.keys(v)) {
    const p = [...at, Array.isArray(v) ? Number(k) : k];
    out.push(p);
    paths((v as Record<string, unknown>)[k], p, out);
  }
  return out;
}

function mutate(o: Record<string, unknown>, rand: () => number): string {
  const all = paths(o);
  const path = all[Math.floor(rand() * all.length)]!;
  let parent = o as Record<string | number, unknown>;
  for (const k of path.slice(0, -1)) parent = parent[k] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (rand() < 0.1) {
    if (Array.isArray(parent)) parent.splice(last as number, 1);
    else delete parent[last];
    return `${path.join('.')} removed`;
  }
  const value = garbage(rand);
  Object.defineProperty(parent, last, { value, enumerable: true, writable: true, configurable: true });
  return `${path.join('.')} = ${JSON.stringify(value) ?? String(value)}`;
}

/** Documents whose YAML aliases make a cycle: the objects are not trees. */
const CYCLES = [
  'apiVersion: v1\nkind: Service\nmetadata: {name: cyc1, namespace: default}\nspec: &s {type: LoadBalancer, clusterIP: 10.96.0.40, ports: [{port: 80}], externalIPs: *s, loadBalancerSourceRanges: [*s]}\nstatus: {loadBalancer: {ingress: [*s]}}\n',
  'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: cyc-1, namespace: default, labels: {kubernetes.io/service-name: cyc1}}\naddressType: IPv4\nports: &p [{port: *p}]\nendpoints: [&e {addresses: [10.244.5.5], conditions: *e, nodeName: *e, hints: {forZones: [*e]}}]\n',
];

/** What a JavaScript error's message looks like (a warning must never carry one). */
const RAW_ERROR = /TypeError|is not a function|Cannot read prop|is not iterable|Invalid URL|Maximum call stack/;

interface Outcome {
  manifestWarnings: number;
  modelWarnings: number;
}

async function run(text: string, what: string): Promise<Outcome> {
  let set: ManifestSet;
  try {
    set = resolveLegacyEndpoints(parseManifests(`${GOOD}---\n${text}`, 'campaign.yaml'));
  } catch (e) {
    assert.fail(`${what}: the manifests reader threw ${String(e)}\n${text}`);
  }
  for (const w of set.warnings) assert.ok(typeof w.source === 'string' && typeof w.message === 'string' && !RAW_ERROR.test(w.message), `${what}: ${JSON.stringify(w)}`);
  const kernel = { ipvs: new FakeIpvs(), links: new FakeLinks(), nft: new FakeNftables() };
  const p = new Proxier(kernel, { node: NODE, config: CONFIG, vipLink: 'kube-ipvs0', glue: true });
  try {
    for (const s of set.services) p.onServiceUpdate(s as V1Service);
    for (const s of set.endpointSlices) p.onSliceUpdate(s as V1EndpointSlice);
    for (const n of set.nodes) p.onNode(n);
  } catch (e) {
    assert.fail(`${what}: a handler threw ${String(e)}\n${text}`);
  }
  const r = await p.sync(true).catch((e: unknown) => assert.fail(`${what}: the sync threw ${String(e)}\n${text}`));
  assert.deepEqual(r.report.errors.map((e) => e.message), [], `${what}\n${text}`);
  const raw = r.summary.warnings.filter((w) => w.message.startsWith('not programmed:') || RAW_ERROR.test(w.message));
  assert.deepEqual(raw, [], `${what}: a JavaScript error, not a typed warning\n${text}`);
  const vs = (await kernel.ipvs.services({ withDestinations: true })).find((s) => s.address === '10.96.0.10' && s.port === 80);
  assert.deepEqual(vs?.destinations?.map((d) => `${d.address}:${d.port}`), ['10.244.1.5:8080'], `${what}: the good service\n${text}`);
  const clusterIps = (await kernel.nft.list()).sets.find((s) => s.family === 'ip' && s.name === 'cluster-ips');
  assert.ok(clusterIps?.elements?.some((e) => e.key.join(' . ') === '10.96.0.10 . tcp . 80'), `${what}: the good glue\n${text}`);
  return { manifestWarnings: set.warnings.length, modelWarnings: r.summary.warnings.length };
}

test('the campaign\'s objects, unmutated, are programmed without a warning', async () => {
  const text = victims().map((o) => stringify(o)).join('---\n');
  assert.deepEqual(await run(text, 'unmutated'), { manifestWarnings: 0, modelWarnings: 0 });
});

test('YAML aliases making cycles: typed warnings, the good service programmed', async () => {
  for (const c of CYCLES) await run(c, 'cycle');
  await run(CYCLES.join('---\n'), 'cycles');
});

test('seeded mutation campaign over Service, EndpointSlice, Endpoints and Node manifests: no JavaScript error, the good service programmed every time', async () => {
  const rand = prng(44);
  const INPUTS = 250;
  let warned = 0;
  for (let i = 0; i < INPUTS; i++) {
    const objects = victims();
    const target = objects[Math.floor(rand() * objects.length)]!;
    const done: string[] = [];
    for (let m = 1 + Math.floor(rand() * 3); m > 0; m--) done.push(mutate(target, rand));
    const asJson = rand() < 0.3;
    const text = objects.map((o) => (asJson ? JSON.stringify(o) + '\n' : stringify(o))).join('---\n');
    const o = await run(text, `input ${i} (${String((target.metadata as { name?: unknown } | undefined)?.name)}: ${done.join('; ')})`);
    if (o.manifestWarnings + o.modelWarnings > 0) warned++;
  }
  // the campaign reaches the checks: most inputs are bad enough to be warned about
  assert.ok(warned > INPUTS / 2, `${warned} of ${INPUTS} inputs warned about`);
});
