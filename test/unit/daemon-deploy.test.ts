// The DaemonSet manifest and the Dockerfile: the properties a node proxy needs, and the
// ConfigMap's config passing the daemon's own validation.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { loadConfig } from '../../src/daemon/config.js';

// dist/test/unit → repository root
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;

function manifests(): Doc[] {
  const docs = parseAllDocuments(readFileSync(join(ROOT, 'deploy', 'daemonset.yaml'), 'utf8'));
  for (const d of docs) assert.deepEqual(d.errors, [], 'YAML parses');
  return docs.map((d) => d.toJS());
}

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
  assert.equal(pod.dnsPolicy, 'ClusterFirstWithHostNet');
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
});

test('RBAC: list/watch Services, EndpointSlices, Nodes and ServiceCIDRs; write Events; bound to the pod service account', () => {
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
  assert.ok(allows('', 'events', 'create') && allows('events.k8s.io', 'events', 'create'));
  assert.equal(allows('', 'services', 'delete'), false, 'read-only on what it watches');
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

test('Dockerfile: Node 20, addon where src/native.ts looks for it, entrypoint and config path match the DaemonSet', () => {
  const text = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const froms = [...text.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
  assert.ok(froms.length >= 2 && froms.every((f) => f!.startsWith('node:20')), `Node 20 bases: ${froms.join(', ')}`);
  // the addon built in the image, where the loader looks first (node-gyp-build: build/Release)
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
