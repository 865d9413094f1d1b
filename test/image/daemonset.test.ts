// The node image as the DaemonSet runs it (scripts/image-test.sh; root, in private network and
// mount namespaces): this namespace is the node, with a pod namespace answering HTTP and a
// client namespace outside it. The image's own `ipvsync proxy` runs under podman with what
// deploy/daemonset.yaml gives its container — the args ($(NODE_NAME) substituted), env,
// privileged, host network, the ConfigMap's files at /etc/ipvsync (deploy/config-nftables.yaml's,
// the nftables data plane), /lib/modules read-only and a service-account token + CA — against
// the fake API server over HTTPS, which requires that token and whose certificate only that CA
// signs: only the kubeconfig's `server:` is changed. The proxy must then carry a connection from
// the client to the Service's ClusterIP and its NodePort to the pod, and answer /healthz. The
// image's contents are checked too: no compilers, development dependencies or tests; the addon
// and @kubernetes/client-node present.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { FakeApiServer, type KubeObject } from '../helpers/fake-apiserver.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const IMAGE = process.env.IPVSYNC_IMAGE ?? 'localhost/ipvsync:dev';
/** podman's flags for this machine (scripts/image-test.sh sets them; docs/releasing.md). */
const PODMAN_FLAGS = (process.env.IPVSYNC_PODMAN_FLAGS ?? '--runtime runc --cgroup-manager cgroupfs').split(' ').filter(Boolean);
const CONTAINER = `ipvsync-image-test-${process.pid}`;
const NODE_NAME = 'node-a';
const NODE_IP = '10.9.0.1';
const CLIENT_IP = '10.9.0.2';
const POD = { ns: 'img-pod', ip: '10.244.1.2', gw: '10.244.1.1' };
const CLIENT = 'img-client';
const CLUSTER_IP = '10.96.0.10';
const NODE_PORT = 30080;
const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** Bounds for conditions, not delays: each wait returns as soon as its condition holds. */
const START_MS = 180_000;

const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const podman = (...args: string[]) => spawnSync('podman', [...PODMAN_FLAGS, ...args], { encoding: 'utf8', timeout: 120_000 });

/** Polls `probe` until it returns a value (not undefined) or `ms` pass; `what` names it. */
async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined> | T | undefined, alive?: () => string | undefined): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    const dead = alive?.();
    if (dead) throw new Error(`${what}: ${dead}`);
    try {
      const v = await probe();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

// ---- the manifests ----

interface Container {
  args: string[];
  env: Array<{ name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }>;
  securityContext?: { privileged?: boolean };
  volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}

function docs(file: string): Array<Record<string, any>> {
  return parseAllDocuments(readFileSync(join(ROOT, file), 'utf8')).map((d) => d.toJS() as Record<string, any>);
}

/** The DaemonSet's pod spec and its container, and the nftables ConfigMap's files. */
function manifests() {
  const ds = docs('deploy/daemonset.yaml').find((d) => d.kind === 'DaemonSet');
  assert.ok(ds, 'deploy/daemonset.yaml has a DaemonSet');
  const pod = ds.spec.template.spec;
  const cm = docs('deploy/config-nftables.yaml').find((d) => d.kind === 'ConfigMap');
  assert.ok(cm, 'deploy/config-nftables.yaml has a ConfigMap');
  assert.equal(pod.containers.length, 1);
  return { pod, container: pod.containers[0] as Container, configMap: cm.data as Record<string, string> };
}

/** `podman run` arguments for the DaemonSet's container on node NODE_NAME. */
function runArgs(work: string, server: string): { args: string[]; envs: Record<string, string> } {
  const { pod, container, configMap } = manifests();
  // the kubelet's part: fieldRefs resolved, $(VAR) in args expanded from the env
  const envs: Record<string, string> = {};
  for (const e of container.env ?? []) {
    if (e.value !== undefined) envs[e.name] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName') envs[e.name] = NODE_NAME;
    else throw new Error(`env ${e.name}: no value this test knows how to give`);
  }
  const args = container.args.map((a) => a.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, n: string) => envs[n] ?? m));
  // the ConfigMap's files, with only the API server's address changed
  const cmDir = join(work, 'configmap');
  mkdirSync(cmDir);
  for (const [name, text] of Object.entries(configMap)) {
    const out = name === 'kubeconfig.conf' ? text.replace(/^(\s*server:\s*).*$/m, `$1${server}`) : text;
    if (name === 'kubeconfig.conf') assert.notEqual(out, text, 'kubeconfig.conf names a server');
    writeFileSync(join(cmDir, name), out);
  }
  const flags: string[] = ['--name', CONTAINER, '--rm', '--pull=never'];
  if (pod.hostNetwork) flags.push('--network', 'host');
  if (container.securityContext?.privileged) flags.push('--privileged');
  for (const [k, v] of Object.entries(envs)) flags.push('--env', `${k}=${v}`);
  const volumes = new Map<string, { configMap?: { name: string }; hostPath?: { path: string } }>(pod.volumes.map((v: any) => [v.name, v]));
  for (const m of container.volumeMounts) {
    const v = volumes.get(m.name);
    assert.ok(v, `volume ${m.name} declared`);
    let src: string;
    if (v.configMap) src = cmDir;
    else if (v.hostPath) {
      src = v.hostPath.path;
      if (!existsSync(src)) (src = join(work, m.name)), mkdirSync(src);
    } else throw new Error(`volume ${m.name}: a kind this test does not mount`);
    flags.push('--volume', `${src}:${m.mountPath}${m.readOnly ? ':ro' : ''}`);
  }
  // the service account's projected volume (automountServiceAccountToken)
  flags.push('--volume', `${join(work, 'serviceaccount')}:${SA_DIR}:ro`);
  return { args: [...flags, IMAGE, ...args], envs };
}

// ---- the node's networks ----

const SERVER = `
require('node:http').createServer((q, r) => r.end('pod-a ' + q.socket.remoteAddress))
  .listen(8080, '${POD.ip}', () => console.log('ready'));
`;

/** One HTTP request from the client namespace: the answer, or undefined on an error. Not
 *  spawnSync: the fake API server answers the proxy from this process meanwhile. */
function get(host: string, port: number): Promise<string | undefined> {
  const script = `
    const q = require('node:http').get({ host: '${host}', port: ${port}, agent: false, timeout: 5000 }, (r) => {
      let s = ''; r.on('data', (d) => (s += d)).on('end', () => console.log(s));
    });
    q.on('timeout', () => q.destroy(new Error('timeout')));
    q.on('error', (e) => { console.error(e.message); process.exit(1); });
  `;
  return new Promise((resolve) => {
    execFile('ip', ['netns', 'exec', CLIENT, process.execPath, '-e', script], { encoding: 'utf8', timeout: 30_000 }, (err, stdout) =>
      resolve(err ? undefined : stdout.trim()),
    );
  });
}

async function topology(t: { after(fn: () => void): void }): Promise<void> {
  let server: ChildProcess | undefined;
  t.after(() => {
    if (server?.pid) process.kill(server.pid);
    spawnSync('ip', ['link', 'del', 'imgp0']);
    spawnSync('ip', ['link', 'del', 'imgc0']);
    spawnSync('ip', ['netns', 'del', POD.ns]);
    spawnSync('ip', ['netns', 'del', CLIENT]);
  });
  sh('ip', 'link', 'set', 'lo', 'up');
  sh('ip', 'netns', 'add', POD.ns);
  sh('ip', 'link', 'add', 'imgp0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', POD.ns);
  sh('ip', 'addr', 'add', `${POD.gw}/24`, 'dev', 'imgp0');
  sh('ip', 'link', 'set', 'imgp0', 'up');
  sh('ip', '-n', POD.ns, 'addr', 'add', `${POD.ip}/24`, 'dev', 'eth0');
  sh('ip', '-n', POD.ns, 'link', 'set', 'eth0', 'up');
  sh('ip', '-n', POD.ns, 'link', 'set', 'lo', 'up');
  sh('ip', '-n', POD.ns, 'route', 'add', 'default', 'via', POD.gw);
  sh('ip', 'netns', 'add', CLIENT);
  sh('ip', 'link', 'add', 'imgc0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', CLIENT);
  sh('ip', 'addr', 'add', `${NODE_IP}/24`, 'dev', 'imgc0');
  sh('ip', 'link', 'set', 'imgc0', 'up');
  sh('ip', '-n', CLIENT, 'addr', 'add', `${CLIENT_IP}/24`, 'dev', 'eth0');
  sh('ip', '-n', CLIENT, 'link', 'set', 'eth0', 'up');
  sh('ip', '-n', CLIENT, 'link', 'set', 'lo', 'up');
  // the client reaches the service range through the node, as a machine beside a node would
  sh('ip', '-n', CLIENT, 'route', 'add', 'default', 'via', NODE_IP);
  // a node has a default route (KERNEL.md: packets to a service IP are routed before DNAT)
  sh('ip', 'route', 'add', 'default', 'via', CLIENT_IP);
  sh('sysctl', '-qw', 'net.ipv4.ip_forward=1');
  const s = spawn('ip', ['netns', 'exec', POD.ns, process.execPath, '-e', SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  server = s;
  await new Promise<void>((resolve, reject) => {
    s.stdout!.once('data', () => resolve());
    s.once('exit', (c) => reject(new Error(`pod server exited ${c}`)));
  });
}

/** A CA, and a certificate it signs for 127.0.0.1, made with openssl. */
function certificates(dir: string): { ca: string; key: string; cert: string } {
  const f = (n: string) => join(dir, n);
  const ossl = (...a: string[]) => execFileSync('openssl', a, { stdio: ['ignore', 'ignore', 'pipe'] });
  ossl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=ipvsync-image-test-ca', '-keyout', f('ca.key'), '-out', f('ca.crt'));
  ossl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=kube-apiserver', '-keyout', f('server.key'), '-out', f('server.csr'));
  writeFileSync(f('server.ext'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  ossl('x509', '-req', '-in', f('server.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '2', '-extfile', f('server.ext'), '-out', f('server.crt'));
  return { ca: readFileSync(f('ca.crt'), 'utf8'), key: readFileSync(f('server.key'), 'utf8'), cert: readFileSync(f('server.crt'), 'utf8') };
}

// ---- the tests ----

test('the image holds the proxy and what it runs on, and no compilers, development dependencies or tests', () => {
  const m = podman('image', 'mount', IMAGE);
  assert.equal(m.status, 0, `podman image mount ${IMAGE}: ${m.stderr}`);
  const root = m.stdout.trim();
  try {
    const app = join(root, 'opt/ipvsync');
    for (const p of ['build/Release/ipvsync.node', 'dist/src/cli/main.js', 'node_modules/@kubernetes/client-node/package.json', 'node_modules/js-yaml/package.json', 'usr/local/bin/node'].map((p) => (p.startsWith('usr/') ? join(root, p) : join(app, p)))) {
      assert.ok(existsSync(p), `${p.slice(root.length)} in the image`);
    }
    for (const tool of ['gcc', 'g++', 'cc', 'c++', 'make', 'python3', 'clang']) {
      for (const dir of ['usr/bin', 'usr/local/bin', 'bin']) assert.ok(!existsSync(join(root, dir, tool)), `no ${dir}/${tool} in the image`);
    }
    const devDeps = Object.keys(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).devDependencies ?? {}).filter((d) => d !== '@kubernetes/client-node');
    for (const d of [...devDeps, 'typescript', 'cmake-js', 'node-gyp', '@types']) assert.ok(!existsSync(join(app, 'node_modules', d)), `no node_modules/${d} in the image`);
    for (const p of ['dist/test', 'dist/bench', 'bench', 'test', 'native', 'src']) assert.ok(!existsSync(join(app, p)), `no ${p} in the image`);
    for (const tool of ['nft', 'ip', 'ipset', 'conntrack', 'modprobe']) {
      assert.ok(['usr/sbin', 'sbin', 'usr/bin', 'bin'].some((d) => existsSync(join(root, d, tool))), `${tool} in the image (for operators)`);
    }
  } finally {
    podman('image', 'unmount', IMAGE);
  }
});

test("the image's `ipvsync proxy --proxy-mode nftables`, run as the DaemonSet runs it, serves a ClusterIP and a NodePort to a pod and answers /healthz", async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'ipvsync-image-'));
  t.after(() => rmSync(work, { recursive: true, force: true }));
  await topology(t);

  const certs = certificates(work);
  const token = randomBytes(24).toString('hex');
  mkdirSync(join(work, 'serviceaccount'));
  writeFileSync(join(work, 'serviceaccount', 'token'), token);
  writeFileSync(join(work, 'serviceaccount', 'ca.crt'), certs.ca);
  writeFileSync(join(work, 'serviceaccount', 'namespace'), 'kube-system');

  const api = await FakeApiServer.start(0, { tls: { key: certs.key, cert: certs.cert }, token });
  t.after(() => api.stop());
  api.create('nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE_NAME }, status: { addresses: [{ type: 'InternalIP', address: NODE_IP }] } });
  api.create('services', svc('web', { type: 'NodePort', clusterIP: CLUSTER_IP, clusterIPs: [CLUSTER_IP], ports: [{ name: 'http', port: 80, targetPort: 8080 as any, nodePort: NODE_PORT, protocol: 'TCP' }] }) as unknown as KubeObject);
  api.create('endpointslices', slice('web', 'web-1', [{ name: 'http', port: 8080 }], [{ ip: POD.ip, node: NODE_NAME, ready: true }]) as unknown as KubeObject);

  const { args, envs } = runArgs(work, api.url);
  assert.equal(envs.NODE_NAME, NODE_NAME);
  assert.ok(args.includes(`--hostname-override=${NODE_NAME}`), `$(NODE_NAME) substituted: ${args.join(' ')}`);

  let output = '';
  let exited: string | undefined;
  const proxy = spawn('podman', [...PODMAN_FLAGS, 'run', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  proxy.stdout!.on('data', (d) => (output += d));
  proxy.stderr!.on('data', (d) => (output += d));
  proxy.once('exit', (code, signal) => (exited = `the container exited (${code ?? signal}):\n${output}`));
  t.after(async () => {
    if (exited === undefined) {
      const gone = new Promise((r) => proxy.once('exit', r));
      podman('stop', '--time', '10', CONTAINER);
      await gone;
    }
  });

  try {
    const health = await until('/healthz 200', START_MS, async () => {
      const r = await fetch('http://127.0.0.1:10256/healthz');
      return r.status === 200 ? r.status : undefined;
    }, () => exited);
    assert.equal(health, 200);
    const viaClusterIP = await until(`${CLUSTER_IP}:80 from the client`, START_MS, () => get(CLUSTER_IP, 80), () => exited);
    assert.match(viaClusterIP, /^pod-a /);
    const viaNodePort = await until(`${NODE_IP}:${NODE_PORT} from the client`, START_MS, () => get(NODE_IP, NODE_PORT), () => exited);
    assert.match(viaNodePort, /^pod-a /);
  } catch (e) {
    throw new Error(`${(e as Error).message}\n--- the container's output:\n${output}\n--- nft list ruleset:\n${spawnSync('nft', ['list', 'ruleset'], { encoding: 'utf8' }).stdout}`);
  }

  // It reached the API server with the kubeconfig's CA and the service account's token: every
  // request carried the token (the server answers 401 otherwise, and none was).
  assert.ok(api.requests.some((r) => r.resource === 'services' && !r.watch && r.status === 200), 'listed Services');
  assert.ok(api.requests.some((r) => r.resource === 'endpointslices' && r.status === 200), 'listed EndpointSlices');
  assert.deepEqual(api.requests.filter((r) => r.status === 401), [], 'no request without the token');
  // The DaemonSet's ClusterRole grants what the proxy calls, and nothing it does not: once every
  // informer is watching, the (group, resource, verb) of its requests are the role's rules.
  const [role] = parseAllDocuments(readFileSync(join(ROOT, 'deploy', 'daemonset.yaml'), 'utf8')).map((d) => d.toJS()).filter((d) => d.kind === 'ClusterRole');
  const GROUPS: Record<string, string> = { services: '', nodes: '', endpointslices: 'discovery.k8s.io', servicecidrs: 'networking.k8s.io' };
  const granted = new Set<string>((role.rules as Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }>).flatMap((r) => r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g}/${res} ${v}`)))));
  const used = () => new Set(api.requests.map((r) => `${GROUPS[r.resource] ?? `?${r.method}`}/${r.resource} ${r.method === 'GET' ? (r.watch ? 'watch' : 'list') : r.method}`));
  await until('a watch on every resource the role grants', START_MS, () => ([...granted].every((g) => used().has(g)) ? true : undefined), () => exited);
  assert.deepEqual([...used()].sort(), [...granted].sort(), 'the role grants exactly what the proxy calls');
  // The nftables data plane (this kernel has no IPVS: the traffic above went through it).
  const tables = sh('nft', 'list', 'tables');
  assert.match(tables, /^table ip ipvsync$/m, tables);

  const report = process.env.IPVSYNC_IMAGE_TEST_REPORT;
  if (report) writeFileSync(report, `ClusterIP ${CLUSTER_IP}:80 and NodePort ${NODE_IP}:${NODE_PORT} reached the pod, /healthz 200, ${api.requests.length} authenticated HTTPS requests to the fake API server`);
});
