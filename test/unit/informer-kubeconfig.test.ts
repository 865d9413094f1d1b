// Where the informers find the API server: a kubeconfig file (with credentials used by both the
// list requests and the client's watch), a context, --master overriding it, clear errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfigError, loadKubeConfig } from '../../src/kube/kubeconfig.js';
import { KubeSources } from '../../src/kube/informers.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { NODE, nodeObj, svcObj, TEST_OPTS } from '../helpers/informer-harness.js';

function kubeconfigFile(server: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-kc-'));
  const file = join(dir, 'kubeconfig');
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster: {server: "${server}", insecure-skip-tls-verify: true}
- name: other
  cluster: {server: "https://192.0.2.1:6443"}
users:
- name: proxy
  user: {token: s3cret}
contexts:
- name: main
  context: {cluster: fake, user: proxy}
- name: elsewhere
  context: {cluster: other, user: proxy}
current-context: elsewhere
`,
  );
  return file;
}

test('a kubeconfig context with a bearer token: lists and watches both authenticate', async () => {
  const api = await FakeApiServer.start();
  api.create('services', svcObj('web', '10.96.0.10'));
  api.create('nodes', nodeObj(NODE));
  const kc = loadKubeConfig({ kubeconfig: kubeconfigFile(api.url), context: 'main', env: {} });
  const seen: string[] = [];
  const sources = new KubeSources({
    kubeConfig: kc,
    nodeName: NODE,
    ...TEST_OPTS,
    handlers: {
      onServiceUpdate: (s) => seen.push(`svc ${s.metadata?.name}`),
      onServiceDelete: () => {},
      onSliceUpdate: () => {},
      onSliceDelete: () => {},
      onNode: (n) => seen.push(`node ${n.metadata?.name}`),
    },
  });
  sources.start();
  try {
    await sources.synced();
    await api.waitFor(() => api.openWatches() === 4, 'four watches');
    assert.deepEqual(seen.sort(), [`node ${NODE}`, 'svc web']);
    assert.equal(api.requests.length, 8, 'a list and a watch of each of the four resources');
    for (const r of api.requests) assert.equal(r.authorization, 'Bearer s3cret', `${r.resource} ${r.watch ? 'watch' : 'list'} carries the token`);
  } finally {
    await sources.stop();
    await api.stop();
  }
});

test('--master overrides the kubeconfig server; the current context is the default', () => {
  const file = kubeconfigFile('http://127.0.0.1:1');
  assert.equal(loadKubeConfig({ kubeconfig: file, env: {} }).getCurrentCluster()!.server, 'https://192.0.2.1:6443');
  const kc = loadKubeConfig({ kubeconfig: file, server: 'http://127.0.0.1:8080', env: {} });
  assert.equal(kc.getCurrentCluster()!.server, 'http://127.0.0.1:8080');
  assert.equal(kc.getCurrentCluster()!.skipTLSVerify, true, 'plain http needs no TLS verification');
  assert.equal(kc.getCurrentUser()!.name, 'proxy', 'credentials kept');
  const bare = loadKubeConfig({ server: 'https://10.0.0.1:6443', env: {} });
  assert.equal(bare.getCurrentCluster()!.skipTLSVerify, false);
});

test('clear errors: missing file, unknown context, nothing to connect to', () => {
  assert.throws(() => loadKubeConfig({ kubeconfig: '/nonexistent/kubeconfig', env: {} }), (e: Error) => e instanceof KubeConfigError && /kubeconfig \/nonexistent\/kubeconfig: .*ENOENT/.test(e.message));
  assert.throws(() => loadKubeConfig({ kubeconfig: kubeconfigFile('http://127.0.0.1:1'), context: 'nope', env: {} }), /no context "nope"/);
  assert.throws(() => loadKubeConfig({ env: {} }), /no API server: give a kubeconfig, a server URL, or run in a pod/);
});
