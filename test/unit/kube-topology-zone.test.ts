// Topology hints need the node's zone, from its Node object (a manifest, or the API's Node) or
// from --node-labels. The scenarios are kube-proxy's TestCategorizeEndpoints (pkg/proxy/
// topology_test.go) as current kube-proxy decides them: hints apply when every ready endpoint
// has one and one names this node's zone, whatever the Service's annotations. Each runs through
// a manifests folder (the Node beside the Services, as `proxy --manifests` reads it) into the
// Proxier, in both data planes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Node } from '@kubernetes/client-node';
import { slice, svc, type Ep } from '../fixtures/kube/builders.js';
import { ManifestFolder, parseManifests } from '../../src/kube/manifests.js';
import { Proxier } from '../../src/proxy/proxier.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import { loadConfig, toProxierOptions } from '../../src/daemon/config.js';
import type { DesiredService } from '../../src/engine/ipvs-model.js';

const ZONE = 'topology.kubernetes.io/zone';
const NODE = 'node-a';

interface Scenario {
  name: string;
  /** The node's labels; undefined: no Node object at all. */
  labels: Record<string, string> | undefined;
  policy?: { externalTrafficPolicy?: 'Local'; internalTrafficPolicy?: 'Local' };
  endpoints: Array<{ n: number; zones?: string[]; ready?: boolean; local?: boolean }>;
  /** The endpoints (by n) the cluster IP sends to, and the NodePort for a Local policy. */
  cluster: number[];
  local?: number[];
}

const a = ['zone-a'];
const b = ['zone-b'];
const c = ['zone-c'];
const SCENARIOS: Scenario[] = [
  { name: 'normal endpoint filtering', labels: { [ZONE]: 'zone-a' }, endpoints: [{ n: 3, zones: a }, { n: 4, zones: b }, { n: 5, zones: c }, { n: 6, zones: a }], cluster: [3, 6] },
  { name: 'node in a zone no endpoint is hinted for: no filtering', labels: { [ZONE]: 'zone-b' }, endpoints: [{ n: 3, zones: a }], cluster: [3] },
  { name: 'empty node labels', labels: {}, endpoints: [{ n: 3, zones: a }], cluster: [3] },
  { name: 'empty zone label', labels: { [ZONE]: '' }, endpoints: [{ n: 3, zones: a }], cluster: [3] },
  { name: 'no Node object', labels: undefined, endpoints: [{ n: 3, zones: a }, { n: 4, zones: b }], cluster: [3, 4] },
  { name: 'unready endpoint', labels: { [ZONE]: 'zone-a' }, endpoints: [{ n: 3, zones: a }, { n: 4, zones: b }, { n: 5, zones: c }, { n: 6, zones: a, ready: false }], cluster: [3] },
  { name: 'only unready endpoints in the same zone: not filtered', labels: { [ZONE]: 'zone-a' }, endpoints: [{ n: 3, zones: a, ready: false }, { n: 4, zones: b }, { n: 5, zones: c }, { n: 6, zones: a, ready: false }], cluster: [4, 5] },
  { name: 'missing hints: not filtered', labels: { [ZONE]: 'zone-a' }, endpoints: [{ n: 3, zones: a }, { n: 4, zones: b }, { n: 5 }, { n: 6, zones: a }], cluster: [3, 4, 5, 6] },
  {
    name: 'multiple hints per endpoint: any that names the zone', labels: { [ZONE]: 'zone-c' },
    endpoints: [{ n: 3, zones: ['zone-a', 'zone-b', 'zone-c'] }, { n: 4, zones: ['zone-b', 'zone-c'] }, { n: 5, zones: ['zone-b', 'zone-d'] }, { n: 6, zones: c }], cluster: [3, 4, 6],
  },
  {
    name: 'externalTrafficPolicy: Local, topology ignored for Local endpoints', labels: { [ZONE]: 'zone-a' }, policy: { externalTrafficPolicy: 'Local' },
    endpoints: [{ n: 3, zones: a, local: true }, { n: 4, zones: b, local: true }, { n: 5, zones: c }, { n: 6, zones: a }], cluster: [3, 6], local: [3, 4],
  },
  {
    name: 'internalTrafficPolicy: Local, topology ignored for Local endpoints', labels: { [ZONE]: 'zone-a' }, policy: { internalTrafficPolicy: 'Local' },
    endpoints: [{ n: 3, zones: a, local: true }, { n: 4, zones: b, local: true }, { n: 5, zones: c }, { n: 6, zones: a }], cluster: [3, 4], local: [3, 6],
  },
];

const ip = (s: number, n: number) => `10.1.${s}.${n}`;
const clusterIp = (s: number) => `10.96.0.${s + 10}`;
const NODE_PORT = (s: number) => 30000 + s;

function objects(s: Scenario, i: number) {
  const eps: Ep[] = s.endpoints.map((e) => ({
    ip: ip(i, e.n),
    node: e.local ? NODE : 'node-b',
    ...(e.zones ? { zones: e.zones } : {}),
    ...(e.ready === false ? { ready: false } : {}),
  }));
  const local = s.policy?.externalTrafficPolicy === 'Local';
  return [
    svc(`s${i}`, { type: local ? 'NodePort' : 'ClusterIP', clusterIP: clusterIp(i), ports: [{ port: 80, ...(local ? { nodePort: NODE_PORT(i) } : {}) }], ...(s.policy ?? {}) }),
    slice(`s${i}`, `s${i}-1`, [{ port: 8080 }], eps),
  ];
}

function nodeObject(labels: Record<string, string>): V1Node {
  return { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE, labels } };
}

/** A manifests folder with the scenarios that share one node's labels, loaded into a proxier. */
async function loaded(mode: 'ipvs' | 'nftables', labels: Record<string, string> | undefined, group: Array<[Scenario, number]>, flags: string[] = []) {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-zone-'));
  const items = [...(labels ? [nodeObject(labels)] : []), ...group.flatMap(([s, i]) => objects(s, i))];
  writeFileSync(join(dir, 'all.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  const { config } = loadConfig({ flags: { proxyMode: mode, hostnameOverride: NODE, clusterCidr: ['10.244.0.0/16'], ...parseFlags(flags) } });
  const proxier = new Proxier(fakeKernel(), toProxierOptions(config, { addresses: ['192.168.1.1'], glue: true, kubeIpsets: false }));
  const load = await new ManifestFolder(dir).load(proxier);
  rmSync(dir, { recursive: true });
  return { proxier, load };
}

function parseFlags(flags: string[]): Record<string, unknown> {
  return flags.length ? { nodeLabels: flags } : {};
}

function destinations(services: readonly DesiredService[], address: string, port: number): string[] {
  const vs = services.find((x) => 'address' in x && x.address === address && x.port === port);
  return (vs?.destinations ?? []).map((d) => d.address).sort();
}

const groups = new Map<string, Array<[Scenario, number]>>();
SCENARIOS.forEach((s, i) => {
  const k = JSON.stringify(s.labels ?? null);
  groups.set(k, [...(groups.get(k) ?? []), [s, i]]);
});

test("the scenarios of kube-proxy's TestCategorizeEndpoints, the Node read from the manifests: IPVS", async () => {
  for (const [k, group] of groups) {
    const { proxier, load } = await loaded('ipvs', JSON.parse(k) ?? undefined, group);
    assert.equal(load.nodes, k === 'null' ? 0 : 1);
    const { model, report } = await proxier.sync(true);
    assert.deepEqual(report.errors, []);
    for (const [s, i] of group) {
      const want = (ns: number[]) => ns.map((n) => ip(i, n)).sort();
      assert.deepEqual(destinations(model!.services, clusterIp(i), 80), want(s.cluster), `${s.name}: the cluster IP`);
      if (s.policy?.externalTrafficPolicy === 'Local') assert.deepEqual(destinations(model!.services, '192.168.1.1', NODE_PORT(i)), want(s.local!), `${s.name}: the NodePort`);
    }
  }
});

test("the same scenarios in the nftables data plane: only the chosen endpoints are in the tables", async () => {
  for (const [k, group] of groups) {
    const { proxier } = await loaded('nftables', JSON.parse(k) ?? undefined, group);
    const { plan } = await proxier.plan(true);
    const text = JSON.stringify(plan.nft?.ops ?? []);
    for (const [s, i] of group) {
      const programmed = s.endpoints.map((e) => e.n).filter((n) => text.includes(`"${ip(i, n)}"`)).sort();
      const want = [...new Set([...s.cluster, ...(s.policy?.externalTrafficPolicy === 'Local' ? s.local! : [])])].sort();
      assert.deepEqual(programmed, want, s.name);
    }
  }
});

test('--node-labels gives the zone over the Node object; a changed or deleted Node object moves the next sync to the new zone', async () => {
  const [s, i] = [SCENARIOS[0]!, 0];
  // the flag wins: zone-b from the flag, the Node says zone-a
  const pinned = await loaded('ipvs', { [ZONE]: 'zone-a' }, [[s, i]], [`${ZONE}=zone-b`]);
  assert.equal(pinned.proxier.node.zone, 'zone-b');
  assert.deepEqual(destinations((await pinned.proxier.sync(true)).model!.services, clusterIp(i), 80), [ip(i, 4)]);

  const { proxier } = await loaded('ipvs', { [ZONE]: 'zone-a' }, [[s, i]]);
  assert.deepEqual(destinations((await proxier.sync(true)).model!.services, clusterIp(i), 80), [ip(i, 3), ip(i, 6)]);
  // another node's object changes nothing
  proxier.onNode({ metadata: { name: 'node-b', labels: { [ZONE]: 'zone-c' } } });
  assert.equal(proxier.node.zone, 'zone-a');
  proxier.onNode(nodeObject({ [ZONE]: 'zone-c' }));
  const moved = await proxier.sync(false);
  assert.deepEqual(destinations(moved.model!.services, clusterIp(i), 80), [ip(i, 5)]);
  assert.deepEqual(moved.report.ipvs.ops, { addDestination: 1, deleteDestination: 2 });
  proxier.onNodeDelete(NODE);
  assert.deepEqual(destinations((await proxier.sync(false)).model!.services, clusterIp(i), 80), [3, 4, 5, 6].map((n) => ip(i, n)));
});

test('a Node manifest is cluster-scoped; labels that are not strings skip it with a warning', () => {
  const m = parseManifests(
    JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [
      { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { [ZONE]: 'zone-a' } } },
      { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-b', labels: { [ZONE]: 7 } } },
      { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-c', labels: 'zone-a' } },
    ] }),
    'nodes.json',
  );
  assert.deepEqual(m.nodes.map((n) => n.metadata), [{ name: 'node-a', labels: { [ZONE]: 'zone-a' } }]);
  assert.deepEqual(m.warnings.map((w) => w.message), [
    `Node node-b: metadata.labels["${ZONE}"] is not a string, skipped`,
    'Node node-c: metadata.labels is not a mapping, skipped',
  ]);
});

test('--node-labels: KEY=VALUE items and a mapping in the file; bad keys and values are refused naming them', () => {
  const ok = loadConfig({ flags: { nodeLabels: [`${ZONE}=zone-a`, 'tier=edge'] } });
  assert.deepEqual(ok.config.nodeLabels, { [ZONE]: 'zone-a', tier: 'edge' });
  assert.throws(() => loadConfig({ flags: { nodeLabels: ['zone-a'] } }), /--node-labels: string "zone-a" is not KEY=VALUE/);
  assert.throws(() => loadConfig({ flags: { nodeLabels: ['bad key=x'] } }), /"bad key" is not a label key/);
  assert.throws(() => loadConfig({ flags: { nodeLabels: [`${ZONE}=a b`] } }), /"a b" is not a label value/);
  assert.throws(() => loadConfig({ flags: { nodeLabels: ['Bad_Prefix/x=y'] } }), /the prefix is not a DNS subdomain/);
});
