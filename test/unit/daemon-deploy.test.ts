// The DaemonSet manifest, its nftables-mode ConfigMap and the Dockerfile: schema-valid (the
// Kubernetes API's own schemas, from kubernetes-models, and no field the API does not know,
// from @kubernetes/client-node's models), the properties a node proxy needs, and the ConfigMap's
// config and kubeconfig passing the daemon's own loaders.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/daemon/config.js';
import { loadKubeConfig } from '../../src/kube/kubeconfig.js';

// dist/test/unit → repository root
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

function manifests(file = 'daemonset.yaml'): Doc[] {
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'deploy', file), 'utf8'));
  for (const d of docs) assert.deepEqual(d.errors, [], 'YAML parses');
  return docs.map((d) => d.toJS());
}

const FILES = ['daemonset.yaml', 'config-nftables.yaml'];
const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';

const byKind = (docs: Doc[], kind: string) => docs.filter((d) => d.kind === kind);

test('DaemonSet: host network, privileged, /lib/modules read-only, system-node-critical, tolerates everything', () => {
  const docs = manifests();
  assert.deepEqual(docs.map((d) => d.kind).sort(), ['ClusterRole', 'ClusterRoleBinding', 'ConfigMap', 'DaemonSet', 'ServiceAccount']);
  const [ds] = byKind(docs, 'DaemonSet');
  assert.equal(ds.apiVersion, 'apps/v1');
  const pod = ds.spec.template.spec;
  assert.deepEqual(ds.spec.selector.matchLabels, ds.spec.template.metadata.labels, 'selector matches the pod labels');
  assert.equal(pod.hostNetwork, true);
  assert.equal(pod.priorityClassName, 'system-node-critical');
  // kube-proxy's DaemonSet leaves dnsPolicy at its default (on the host network: the node's
  // resolver); ClusterFirstWithHostNet would need the cluster DNS Service the proxy programs.
  assert.equal(pod.dnsPolicy, undefined);
  assert.deepEqual(pod.tolerations, [{ operator: 'Exists' }]);
  const [c] = pod.containers;
  assert.equal(c.securityContext.privileged, true);
  const mounts = Object.fromEntries(c.volumeMounts.map((m: Doc) => [m.name, m]));
  const volumes = Object.fromEntries(pod.volumes.map((v: Doc) => [v.name, v]));
  assert.equal(mounts['lib-modules'].mountPath, '/lib/modules');
  assert.equal(mounts['lib-modules'].readOnly, true);
  assert.equal(volumes['lib-modules'].hostPath.path, '/lib/modules');
  for (const m of c.volumeMounts) assert.ok(volumes[m.name], `volume ${m.name} exists`);
  // The config comes from the ConfigMap, at the path the args name.
  assert.equal(volumes.config.configMap.name, 'ipvsync');
  assert.ok(c.args.includes(`--config=${mounts.config.mountPath}/config.yaml`));
  assert.equal(c.args[0], 'proxy');
  // The node name comes from the downward API.
  assert.ok(c.args.includes('--hostname-override=$(NODE_NAME)'));
  assert.deepEqual(c.env.find((e: Doc) => e.name === 'NODE_NAME').valueFrom.fieldRef, { fieldPath: 'spec.nodeName' });
  // Liveness on kube-proxy's /livez port and path.
  assert.equal(c.livenessProbe.httpGet.path, '/livez');
  assert.equal(c.livenessProbe.httpGet.port, 10256);
  assert.equal(pod.serviceAccountName, byKind(docs, 'ServiceAccount')[0].metadata.name);
  // the ports it serves are declared, at the ConfigMap's bind addresses
  const { config } = loadConfig({ text: byKind(docs, 'ConfigMap')[0].data['config.yaml'] });
  const ports = Object.fromEntries(c.ports.map((p: Doc) => [p.name, p]));
  assert.equal(ports.healthz.containerPort, config.healthzBindAddress!.port);
  assert.equal(ports.metrics.containerPort, config.metricsBindAddress!.port);
  for (const p of c.ports) assert.equal(p.hostPort, p.containerPort, 'host network: the host port is the container port');
});

test('RBAC: list and watch Services, EndpointSlices, Nodes and ServiceCIDRs, nothing more; bound to the pod service account', () => {
  const docs = manifests();
  const [role] = byKind(docs, 'ClusterRole');
  const [binding] = byKind(docs, 'ClusterRoleBinding');
  const [sa] = byKind(docs, 'ServiceAccount');
  const allows = (group: string, resource: string, verb: string) =>
    role.rules.some((r: Doc) => r.apiGroups.includes(group) && r.resources.includes(resource) && r.verbs.includes(verb));
  for (const verb of ['list', 'watch']) {
    assert.ok(allows('', 'services', verb), `services ${verb}`);
    assert.ok(allows('', 'nodes', verb), `nodes ${verb}`);
    assert.ok(allows('discovery.k8s.io', 'endpointslices', verb), `endpointslices ${verb}`);
    assert.ok(allows('networking.k8s.io', 'servicecidrs', verb), `servicecidrs ${verb}`);
  }
  // what the informers call (src/kube/informers.ts), and nothing it does not use: no events
  // (the proxy writes none), no get
  assert.deepEqual(
    role.rules.flatMap((r: Doc) => r.apiGroups.flatMap((g: string) => r.resources.map((res: string) => `${g}/${res}: ${[...r.verbs].sort().join(',')}`))).sort(),
    ['/nodes: list,watch', '/services: list,watch', 'discovery.k8s.io/endpointslices: list,watch', 'networking.k8s.io/servicecidrs: list,watch'],
  );
  assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata.name });
  assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace }]);
  const [ds] = byKind(docs, 'DaemonSet');
  assert.equal(ds.metadata.namespace, sa.metadata.namespace);
});

test("the ConfigMap's config is valid for the daemon, with no ignored fields", () => {
  const [cm] = byKind(manifests(), 'ConfigMap');
  const { config, warnings } = loadConfig({ text: cm.data['config.yaml'], file: 'deploy/daemonset.yaml#config.yaml' });
  assert.deepEqual(warnings, []);
  assert.deepEqual(config.healthzBindAddress, { host: '0.0.0.0', port: 10256 });
  assert.deepEqual(config.metricsBindAddress, { host: '127.0.0.1', port: 10249 });
  assert.equal(config.vipLink, 'kube-ipvs0');
  assert.deepEqual(config.clusterCIDRs, ['10.244.0.0/16']);
  // kube-proxy's document and ipvsync's own, each with its fields
  assert.deepEqual(config.logging, { verbosity: 0, format: 'text' });
  assert.equal(config.ipvs.minSyncPeriodMs, 1000);
  assert.equal(config.ipvs.statsMetrics, 'none');
  assert.equal(config.drainTimeoutMs, 15 * 60_000);
  assert.match(cm.data['config.yaml'], /^kind: IpvsyncConfiguration$/m);
});

test("nftables mode's ConfigMap: the same object, the nftables section read, no ignored fields", () => {
  const [ipvs] = byKind(manifests(), 'ConfigMap');
  const [nft] = manifests('config-nftables.yaml');
  assert.equal(nft.kind, 'ConfigMap');
  assert.deepEqual(nft.metadata, ipvs.metadata, 'it replaces the DaemonSet file\'s ConfigMap');
  assert.deepEqual(Object.keys(nft.data).sort(), Object.keys(ipvs.data).sort());
  assert.equal(nft.data['kubeconfig.conf'], ipvs.data['kubeconfig.conf']);
  const { config, warnings } = loadConfig({ text: nft.data['config.yaml'], file: 'deploy/config-nftables.yaml#config.yaml' });
  assert.deepEqual(warnings, []);
  assert.equal(config.mode, 'nftables');
  assert.deepEqual({ sync: config.nftables.syncPeriodMs, min: config.nftables.minSyncPeriodMs, masq: config.nftables.masqueradeAll }, { sync: 30_000, min: 1000, masq: false });
  assert.deepEqual(config.serviceCIDRs, ['10.96.0.0/12']);
});

test("the kubeconfig in the ConfigMap: the API server's real address, the pod's service-account CA and token file, the path config.yaml names", () => {
  const docs = manifests();
  const [cm] = byKind(docs, 'ConfigMap');
  const [ds] = byKind(docs, 'DaemonSet');
  const mount = ds.spec.template.spec.containers[0].volumeMounts.find((m: Doc) => m.name === 'config').mountPath;
  const { config } = loadConfig({ text: cm.data['config.yaml'] });
  assert.equal(config.kubeconfig, `${mount}/kubeconfig.conf`, 'clientConnection.kubeconfig is the ConfigMap key, where it is mounted');
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-deploy-'));
  try {
    const file = join(dir, 'kubeconfig.conf');
    writeFileSync(file, cm.data['kubeconfig.conf']);
    // in the pod KUBERNETES_SERVICE_HOST is set: the kubeconfig still wins
    const api = loadKubeConfig({ kubeconfig: file, env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' } });
    assert.equal(api.cluster.caFile, `${SERVICE_ACCOUNT}/ca.crt`);
    assert.equal(api.tokenFile, `${SERVICE_ACCOUNT}/token`, "client-go's tokenFile, re-read as the kubelet rotates it");
    assert.equal(api.cluster.skipTLSVerify, false);
    const server = new URL(api.cluster.server);
    assert.equal(server.protocol, 'https:');
    assert.notEqual(server.hostname, '10.96.0.1', 'not the kubernetes Service, which only the proxy itself programs');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('Dockerfile: Node 20, addon where src/native.ts looks for it, entrypoint and config path match the DaemonSet', () => {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  // Both stages on one base: Node 20 by default (docker build .), a local one by build-arg
  // (npm run image, where no registry is reachable).
  assert.match(text, /^ARG NODE_IMAGE=node:20-bookworm-slim$/m);
  const froms = [...text.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
  assert.ok(froms.length >= 2 && froms.every((f) => f === '${NODE_IMAGE}'), `the same base: ${froms.join(', ')}`);
  // the addon built in the image, where the loader looks first (node-gyp-build: build/Release;
  // test/image runs the image, and fails without it)
  assert.match(text, /^COPY --from=build \/src\/build\/Release\/ipvsync\.node \.\/build\/Release\/ipvsync\.node$/m);
  const entry = /^ENTRYPOINT (.+)$/m.exec(text)![1]!;
  // The image runs node with the same environment and flags as the command's shebang
  // (#!/usr/bin/env -S NAME=VALUE… node --flag…).
  const shebang = readFileSync(join(ROOT, 'src', 'cli', 'main.ts'), 'utf8').split('\n', 1)[0]!;
  assert.match(shebang, /^#!\/usr\/bin\/env -S( [A-Z_]+=\S+)* node( --\S+)+$/);
  const words = shebang.split(' ').slice(2);
  const envVars = words.slice(0, words.indexOf('node'));
  const nodeFlags = words.slice(words.indexOf('node') + 1);
  assert.ok(nodeFlags.includes('--max-semi-space-size=1'), shebang);
  assert.ok(nodeFlags.includes('--heap-growing-percent=20'), shebang);
  assert.ok(nodeFlags.includes('--no-memory-reducer'), shebang);
  assert.ok(envVars.includes('MALLOC_ARENA_MAX=2'), shebang);
  assert.ok(envVars.includes('MALLOC_MMAP_THRESHOLD_=131072') && envVars.includes('MALLOC_TRIM_THRESHOLD_=131072'), shebang);
  assert.deepEqual(JSON.parse(entry), ['node', ...nodeFlags, '/opt/ipvsync/dist/src/cli/main.js']);
  const imageEnv = [...text.matchAll(/^ENV (\S+=\S+)$/gm)].map((m) => m[1]);
  for (const v of envVars) assert.ok(imageEnv.includes(v), `the image sets ${v} as the shebang does`);
  const cmd = JSON.parse(/^CMD (.+)$/m.exec(text)![1]!);
  const [cm] = byKind(manifests(), 'ConfigMap');
  assert.deepEqual(cmd, ['proxy', '--config', '/etc/ipvsync/config.yaml']);
  assert.ok(Object.keys(cm.data).includes('config.yaml'));
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  assert.equal(pkg.bin.ipvsync, 'dist/src/cli/main.js', 'the entrypoint is the package binary');
});

/** The API's schema of each kind the manifests hold (kubernetes-models: the OpenAPI schemas,
 *  compiled). */
const SCHEMAS: Record<string, () => Promise<{ new (data: Doc): { validate(): void } }>> = {
  'v1/ServiceAccount': async () => (await import('kubernetes-models/v1/ServiceAccount')).ServiceAccount,
  'v1/ConfigMap': async () => (await import('kubernetes-models/v1/ConfigMap')).ConfigMap,
  'rbac.authorization.k8s.io/v1/ClusterRole': async () => (await import('kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole')).ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': async () => (await import('kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding')).ClusterRoleBinding,
  'apps/v1/DaemonSet': async () => (await import('kubernetes-models/apps/v1/DaemonSet')).DaemonSet,
};

/** Fields the API does not know, as kubectl's strict field validation (its default) refuses
 *  them: each object walked against @kubernetes/client-node's models of the API's types. */
async function unknownFields(obj: Doc): Promise<string[]> {
  const client = (await import('@kubernetes/client-node')) as unknown as Record<string, { getAttributeTypeMap?(): Array<{ baseName: string; type: string }> }>;
  const typeName = `V1${obj.kind}`;
  const out: string[] = [];
  const walk = (value: Doc, type: string, path: string): void => {
    const list = /^Array<(.+)>$/.exec(type);
    if (list) return void (Array.isArray(value) && value.forEach((v, i) => walk(v, list[1]!, `${path}[${i}]`)));
    const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
    if (map) return void Object.entries(value ?? {}).forEach(([k, v]) => walk(v, map[1]!, `${path}.${k}`));
    const attrs = client[type]?.getAttributeTypeMap?.();
    if (!attrs || value === null || typeof value !== 'object') return;
    const known = new Map(attrs.map((a) => [a.baseName, a.type]));
    for (const [k, v] of Object.entries(value)) {
      const t = known.get(k);
      if (t === undefined) out.push(`${path}.${k}`);
      else walk(v, t, `${path}.${k}`);
    }
  };
  assert.ok(client[typeName]?.getAttributeTypeMap, `the client models ${typeName}`);
  walk(obj, typeName, obj.kind);
  return out;
}

test("every object of deploy/ is valid against the API's schemas, with no field the API does not know", async () => {
  for (const file of FILES) {
    for (const obj of manifests(file)) {
      const key = `${obj.apiVersion}/${obj.kind}`;
      const Model = await SCHEMAS[key]?.();
      assert.ok(Model, `${file}: a schema for ${key}`);
      assert.doesNotThrow(() => new Model(obj).validate(), `${file}: ${key} ${obj.metadata?.name}`);
      assert.deepEqual(await unknownFields(obj), [], `${file}: ${key} ${obj.metadata?.name}`);
    }
  }
  // the checks see what they should: a typo, a wrong type, a value outside the enum
  const [ds] = byKind(manifests(), 'DaemonSet');
  const typo = structuredClone(ds);
  typo.spec.template.spec.containers[0].volumeMount = [];
  assert.deepEqual(await unknownFields(typo), ['DaemonSet.spec.template.spec.containers[0].volumeMount']);
  const Model = await SCHEMAS['apps/v1/DaemonSet']!();
  const wrongType = structuredClone(ds);
  wrongType.spec.template.spec.containers[0].ports[0].containerPort = '10256';
  assert.throws(() => new Model(wrongType).validate(), /containerPort must be integer/);
  const badEnum = structuredClone(ds);
  badEnum.spec.template.spec.dnsPolicy = 'ClusterFirstWithHostnet';
  assert.throws(() => new Model(badEnum).validate(), /dnsPolicy must be equal to one of the allowed values/);
});
