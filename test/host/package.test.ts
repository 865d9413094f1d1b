// The package as a user gets it (docs/releasing.md): a fresh clone of the working tree (no
// node_modules) packed by `npm pack` — its prepack installs the development dependencies itself,
// builds dist/src and both prebuilds (linux-x64, and linux-arm64 cross-compiled) — the
// tarball's file list, its prebuilds (an x86-64 and an aarch64 ELF), the README's relative links
// (each a file of the tarball), and the tarball installed with `npm ci` into a fresh project,
// offline — the dependencies at the repository's locked versions from npm's cache — with no
// compiler on PATH: the install script finds the prebuild, builds nothing, and the addon loads
// from prebuilds/. Without @kubernetes/client-node (an optional peer): under `strict` without
// `skipLibCheck`, a program importing only the core compiles without reading a declaration of
// Kubernetes (the client's, or the proxy's), one importing `ipvsync/proxy` compiles without
// reading the client's, both run (the proxy's sync thread too: a server URL needs no client; a
// kubeconfig user with an exec plugin is refused at start saying the client is needed), the
// docs' examples compile, and the installed command runs. With the client at the lowest and the
// highest version of the peer range: a strict program passing the client's objects to the proxy
// compiles, and the proxy's sync thread lists and watches the fake API server through an exec
// plugin's token (2.x, which needs Node.js >= 22.19: refused saying so on Node.js 20, and run on
// Node.js 22.19 from npm's node-linux-<arch> package).
// In the host suite for its time (the pack's builds), not for root: it needs none.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { writeDocExamples } from '../helpers/doc-examples.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { NODE, nodeObj, svcObj } from '../helpers/informer-harness.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
const CLIENT = '@kubernetes/client-node';

const work = mkdtempSync(join(tmpdir(), 'ipvsync-package-'));
const consumer = join(work, 'consumer');
/** npm without the network: every package comes from the cache, by the lockfile's integrity. */
const npmEnv: NodeJS.ProcessEnv = { ...process.env, npm_config_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false', npm_config_loglevel: 'error', JOBS: '2' };
// node-gyp builds against this Node's own headers (as scripts/setup.sh), never downloads them
const headers = dirname(dirname(process.execPath));
if (!npmEnv.npm_config_nodedir && existsSync(join(headers, 'include', 'node', 'node_api.h'))) npmEnv.npm_config_nodedir = headers;

/** PATH for the consumer's install: node, npm and the basic tools npm's scripts use, and no
 *  compiler, make or python (what a build from source would need). */
const bin = join(work, 'bin');
mkdirSync(bin);
const which = (tool: string) => spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
for (const tool of ['node', 'npm', 'npx', 'sh', 'env', 'which', 'cat', 'ls', 'rm', 'mkdir', 'tar', 'gzip', 'uname', 'git']) {
  const p = which(tool);
  if (p) symlinkSync(p, join(bin, tool));
}
const COMPILERS = ['cc', 'gcc', 'g++', 'c++', 'clang', 'clang++', 'make', 'python3'];

function run(cmd: string, args: readonly string[], opts: SpawnSyncOptions & { cwd: string }): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env: npmEnv, timeout: 480_000, maxBuffer: 64 << 20, ...opts });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} in ${opts.cwd}: ${r.error ?? ''}\n${r.stdout}\n${r.stderr}`);
  return String(r.stdout);
}

let packed: { filename: string; entryCount: number; size: number; files: Array<{ path: string; size: number }> };
let manifest: { name: string; version: string; dependencies: Record<string, string>; peerDependencies: Record<string, string>; peerDependenciesMeta: Record<string, { optional?: boolean }> };
/** Seconds: `npm pack` of the fresh clone (dependencies, TypeScript, two prebuilds); `npm ci` of the consumer. */
const took = { pack: 0, install: 0 };

before(() => {
  // A fresh clone: the tree as committed or about to be (tracked and new files, nothing ignored:
  // no dist/, build/, prebuilds/ or node_modules/). `npm pack` installs what it needs itself.
  const tree = join(work, 'tree');
  for (const f of run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT }).split('\0').filter(Boolean)) {
    if (existsSync(join(ROOT, f))) cpSync(join(ROOT, f), join(tree, f), { recursive: true });
  }
  assert.ok(!existsSync(join(tree, 'node_modules')));
  // (the lifecycle scripts' banners may come before the JSON)
  let t0 = performance.now();
  // (its prepack's npm ci: packages from npm's cache, the registry asked only for what the cache
  // lacks — the lockfile names no tarball URLs where npm is set to omit them)
  const out = run('npm', ['pack', '--json', '--pack-destination', work], { cwd: tree, timeout: 900_000, env: { ...npmEnv, npm_config_offline: 'false', npm_config_prefer_offline: 'true' } });
  took.pack = (performance.now() - t0) / 1000;
  [packed] = JSON.parse(out.slice(out.search(/^\[/m)));
  manifest = JSON.parse(run('tar', ['-xzOf', join(work, packed.filename), 'package/package.json'], { cwd: work }));

  // A fresh project depending on the tarball; its lockfile pins every package the tarball's
  // dependencies need to the repository's locked version (the production closure of its lock).
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, Record<string, unknown>> };
  const spec = `file:../${packed.filename}`;
  const packages: Record<string, unknown> = {
    '': { name: 'consumer', dependencies: { ipvsync: spec } },
    'node_modules/ipvsync': {
      version: manifest.version,
      resolved: spec,
      hasInstallScript: true,
      dependencies: manifest.dependencies,
      peerDependencies: manifest.peerDependencies,
      peerDependenciesMeta: manifest.peerDependenciesMeta,
      bin: { ipvsync: 'dist/src/cli/main.js' },
    },
  };
  for (const [path, entry] of Object.entries(lock.packages)) {
    if (path === '' || entry.dev || entry.link) continue;
    const name = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length);
    packages[path] = { ...entry, resolved: `https://registry.npmjs.org/${name}/-/${name.split('/').pop()}-${entry.version}.tgz` };
  }
  mkdirSync(consumer);
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module', dependencies: { ipvsync: spec } }));
  writeFileSync(join(consumer, 'package-lock.json'), JSON.stringify({ name: 'consumer', lockfileVersion: 3, requires: true, packages }));
  // no compiler: the install script must find the prebuild
  t0 = performance.now();
  run('npm', ['ci'], { cwd: consumer, env: { ...npmEnv, PATH: bin } });
  took.install = (performance.now() - t0) / 1000;
});
after(() => rmSync(work, { recursive: true, force: true }));

test('the tarball holds what a user runs and builds, and nothing else', (t) => {
  const files = packed.files.map((f) => f.path).sort();
  const prebuilt = (p: string) => /^prebuilds\/linux-(x64|arm64)\/ipvsync\.glibc\.node$/.test(p);
  const allowed = (p: string) =>
    (p.startsWith('dist/src/') && /\.(js|d\.ts)$/.test(p)) ||
    (p.startsWith('native/') && !p.startsWith('native/fuzz/')) ||
    prebuilt(p) ||
    /^docs\/[^/]+\.md$/.test(p) ||
    ['binding.gyp', 'CMakeLists.txt', 'scripts/native-sources.cjs', 'README.md', 'LICENSE', 'package.json', 'bench/results/nftables-mode.svg'].includes(p);
  assert.deepEqual(files.filter((p) => !allowed(p)), [], 'files outside the list');
  for (const p of ['dist/src/index.js', 'dist/src/index.d.ts', 'dist/src/api/proxy.d.ts', 'dist/src/testing/index.d.ts', 'dist/src/cli/main.js', 'binding.gyp', 'scripts/native-sources.cjs', 'native/addon/addon.cc', 'LICENSE', 'README.md', 'docs/releasing.md'])
    assert.ok(files.includes(p), p);
  assert.ok(!files.some((p) => /(^|\/)(test|fuzz)\//.test(p) || /^bench\/(?!results\/nftables-mode\.svg$)/.test(p) || p.endsWith('.map')), 'no tests, benchmarks, fuzzers, results (but the README\'s figure) or source maps');
  // the prebuilds are binaries of about a megabyte each: the rest stays as small as before
  const prebuildBytes = packed.files.filter((f) => prebuilt(f.path)).reduce((n, f) => n + f.size, 0);
  assert.ok(packed.entryCount < 300 && packed.size - prebuildBytes < 1_000_000, `${packed.entryCount} files, ${packed.size} bytes (${prebuildBytes} of prebuilds, unpacked)`);
  t.diagnostic(`tarball: ${packed.entryCount} files, ${packed.size} bytes; prebuilds ${packed.files.filter((f) => prebuilt(f.path)).map((f) => `${f.path} ${f.size} bytes`).join(', ')}`);
  t.diagnostic(`npm pack of a fresh clone (npm ci --ignore-scripts from the cache, tsc, two prebuilds): ${took.pack.toFixed(1)} s`);
  // no declaration names the Kubernetes client: a consumer's compiler never goes there
  const installed = join(consumer, 'node_modules', 'ipvsync');
  const declarations = files.filter((p) => p.endsWith('.d.ts'));
  assert.deepEqual(declarations.filter((p) => readFileSync(join(installed, p), 'utf8').includes(CLIENT)), []);
  assert.equal(manifest.peerDependenciesMeta[CLIENT]?.optional, true);
  assert.equal(manifest.dependencies[CLIENT], undefined);
  // npm brings node-gyp to install scripts itself; node-gyp-build finds the prebuild
  assert.equal(manifest.dependencies['node-gyp'], undefined);
  assert.ok(manifest.dependencies['node-gyp-build']);
  assert.ok(manifest.dependencies['node-addon-api'], 'the build from source (the fallback) includes its headers');
});

/** The ELF header's class and machine (e_machine: 62 x86-64, 183 AArch64). */
function elf(file: string): { bits: number; machine: number } {
  const b = readFileSync(file);
  assert.equal(b.subarray(0, 4).toString('latin1'), '\x7fELF', file);
  return { bits: b[4] === 2 ? 64 : 32, machine: b.readUInt16LE(18) };
}

test('the prebuilds: linux-x64 an x86-64 shared object, linux-arm64 an AArch64 one', () => {
  const pkg = join(consumer, 'node_modules', 'ipvsync');
  assert.deepEqual(readdirSync(join(pkg, 'prebuilds')).sort(), ['linux-arm64', 'linux-x64']);
  assert.deepEqual(elf(join(pkg, 'prebuilds', 'linux-x64', 'ipvsync.glibc.node')), { bits: 64, machine: 62 });
  assert.deepEqual(elf(join(pkg, 'prebuilds', 'linux-arm64', 'ipvsync.glibc.node')), { bits: 64, machine: 183 });
});

test("every relative link and image of the README is a file of the tarball", () => {
  const readme = readFileSync(join(consumer, 'node_modules', 'ipvsync', 'README.md'), 'utf8');
  const targets = [...readme.matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!).filter((u) => !/^[a-z]+:|^#/i.test(u));
  assert.ok(targets.includes('bench/results/nftables-mode.svg') && targets.includes('docs/api.md'), targets.join(' '));
  const files = new Set(packed.files.map((f) => f.path));
  assert.deepEqual(targets.map((u) => u.replace(/#.*$/, '')).filter((p) => !files.has(p)), [], 'links to files the package does not ship');
});

test('installed with no compiler on PATH: the install script built nothing, the addon loads from the prebuild; the client was not installed', (t) => {
  t.diagnostic(`npm ci of the tarball with no compiler: ${took.install.toFixed(1)} s`);
  for (const tool of COMPILERS) assert.notEqual(spawnSync('sh', ['-c', `command -v ${tool}`], { env: { PATH: bin } }).status, 0, `${tool} on the install's PATH`);
  assert.notEqual(spawnSync(join(bin, 'which'), ['g++'], { env: { PATH: bin } }).status, 0, 'which g++');
  const pkg = join(consumer, 'node_modules', 'ipvsync');
  assert.ok(!existsSync(join(pkg, 'build')), 'no build from source');
  writeFileSync(join(consumer, 'loaded.mjs'), `import { createRequire } from 'node:module';
import { addonCpuUsage } from 'ipvsync';
addonCpuUsage();
console.log(Object.keys(createRequire(import.meta.url).cache).filter((f) => f.endsWith('.node')).join('\\n'));
`);
  const loaded = run(process.execPath, ['loaded.mjs'], { cwd: consumer, env: { ...npmEnv, PATH: bin } }).trim();
  assert.equal(loaded, join(pkg, 'prebuilds', `linux-${process.arch}`, 'ipvsync.glibc.node'));
  assert.ok(!existsSync(join(consumer, 'node_modules', '@kubernetes')));
  assert.ok(!existsSync(join(consumer, 'node_modules', 'node-gyp')), 'node-gyp is not installed');
  assert.match(run(join(consumer, 'node_modules', '.bin', 'ipvsync'), ['--help'], { cwd: consumer }), /Usage: ipvsync/);
});

/** Compiles `files` of the consumer under strict without skipLibCheck (emitting to out/ when
 *  asked); returns the files the compiler read and its extended diagnostics. */
function compile(name: string, files: readonly string[], emit: boolean): { read: string[]; diagnostics: string } {
  writeFileSync(
    join(consumer, `tsconfig.${name}.json`),
    JSON.stringify({
      compilerOptions: { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')], ...(emit ? { outDir: `out-${name}` } : { noEmit: true }) },
      files,
    }),
  );
  const r = spawnSync(process.execPath, [TSC, '-p', `tsconfig.${name}.json`, '--listFiles', '--extendedDiagnostics'], { cwd: consumer, encoding: 'utf8' });
  assert.equal(r.status, 0, `${name}: ${r.stdout.split('\n').filter((l) => /error TS/.test(l)).join('\n') || r.stdout}`);
  const read = r.stdout.split('\n').filter((l) => /\.d?\.?[cm]?ts$/.test(l) && !l.includes(' '));
  return { read: read.map((f) => relative(consumer, f)), diagnostics: r.stdout.split('\n').filter((l) => /^(Files|Lines of Definitions|Check time|Total time):/.test(l)).join(', ') };
}

const CORE = `import assert from 'node:assert/strict';
import { Ipvs, NftTransaction, Engine, addonCpuUsage, canonicalAddress, parseRules, NetlinkError, type DesiredState } from 'ipvsync';
import { fakeKernel } from 'ipvsync/testing';

assert.equal(typeof Ipvs.open, 'function');
assert.equal(canonicalAddress('2001:DB8:0::1'), '2001:db8::1');
const rules = parseRules('-A -t 10.96.0.10:80 -s rr\\n-a -t 10.96.0.10:80 -r 10.244.1.5:8080 -m -w 1\\n');
assert.equal(rules.length, 2);
// queueing an op encodes it in the addon (the prebuild)
const tx = new NftTransaction().addTable({ family: 'ip', name: 'demo' });
assert.equal(tx.ops.length, 1);
assert.throws(() => tx.addTable({ family: 'ip', name: '' }), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid');
assert.equal(typeof addonCpuUsage().jsThreadNs, 'number'); // the addon loaded
const k = fakeKernel();
const engine = new Engine({ ipvs: k.ipvs }, { managedCidrs: ['10.96.0.0/12'] });
const desired: DesiredState = { services: [{ protocol: 'tcp', address: '10.96.0.10', port: 80, scheduler: 'rr', destinations: [{ address: '10.244.1.5', port: 8080, forward: 'masq', weight: 1 }] }] };
const report = await engine.sync(desired);
assert.deepEqual(report.errors, []);
assert.equal((await k.ipvs.services({ withDestinations: true }))[0]?.destinations?.length, 1);
console.log('core ok');
`;

const PROXY = `import assert from 'node:assert/strict';
import { ThreadedProxier, translate, parseManifests, type V1Service, type V1EndpointSlice } from 'ipvsync/proxy';

const service: V1Service = { metadata: { name: 'web', namespace: 'default' }, spec: { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } };
const set = parseManifests(\`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: web-1, namespace: default, labels: { kubernetes.io/service-name: web } }
addressType: IPv4
ports: [{ name: http, port: 8080, protocol: TCP }]
endpoints: [{ addresses: [10.244.1.5], conditions: { ready: true } }]
\`, 'web.yaml');
const slices: V1EndpointSlice[] = set.endpointSlices;
const model = translate({ services: [service], endpointSlices: slices, node: { name: 'node-a', addresses: ['192.168.1.10'] } });
assert.deepEqual(model.services.map((s) => ['address' in s ? \`\${s.address}:\${s.port}\` : s.fwmark, s.destinations.map((d) => d.address)]), [['10.96.0.10:80', ['10.244.1.5']]]);
// the sync thread (an in-memory kernel): without the client, a kubeconfig user with an exec
// plugin is refused at start saying so; a server URL needs no client
const tp = await ThreadedProxier.start({ proxier: { node: { name: 'node-a', addresses: ['192.168.1.10'] }, config: {} }, kernel: { glue: true }, kernelModule: new URL('../kernel.mjs', import.meta.url).href });
const kubeconfig = new URL('../exec-kubeconfig.yaml', import.meta.url).pathname;
await assert.rejects(tp.watchKube({ source: { kubeconfig }, nodeName: 'node-a' }), (e: Error) => e.message.includes('needs @kubernetes/client-node') && e.message.includes('install it beside ipvsync'));
const kube = await tp.watchKube({ source: { server: 'http://127.0.0.1:1' }, nodeName: 'node-a' });
await kube.stop();
await tp.close();
console.log('proxy ok');
`;

/** A kubeconfig whose user's token comes from an exec credential plugin (node printing one). */
function execKubeconfig(server: string): string {
  const credential = JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: 'from-exec' } });
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'u', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: process.execPath, args: ['-e', `process.stdout.write(${JSON.stringify(credential)})`], interactiveMode: 'Never' } } }],
    contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'x',
  });
}

/** SyncThreadOptions.kernelModule: the in-memory kernel, on the sync thread. */
const KERNEL = `import { fakeKernel } from 'ipvsync/testing';
export async function openKernel(_handle, o) {
  const k = fakeKernel();
  return { ipvs: k.ipvs, links: k.links, routes: k.routes, conntrack: k.conntrack, ipsets: k.ipsets, ...(o.glue ? { nft: k.nft } : {}) };
}
`;

test('a strict consumer of the core reads nothing of Kubernetes; of the proxy, nothing of the client; both run', (t) => {
  writeFileSync(join(consumer, 'core.ts'), CORE);
  writeFileSync(join(consumer, 'proxy.ts'), PROXY);
  writeFileSync(join(consumer, 'kernel.mjs'), KERNEL);
  writeFileSync(join(consumer, 'exec-kubeconfig.yaml'), execKubeconfig('https://127.0.0.1:6443'));
  // The client resolvable while compiling, so that a declaration reaching for it would load it
  // (and be seen) rather than fail; gone again before anything runs.
  const client = join(consumer, 'node_modules', ...CLIENT.split('/'));
  mkdirSync(dirname(client), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules', ...CLIENT.split('/')), client);
  let core, proxy;
  try {
    core = compile('core', ['core.ts'], true);
    proxy = compile('proxy', ['proxy.ts'], true);
  } finally {
    rmSync(dirname(client), { recursive: true });
  }
  t.diagnostic(`core: ${core.diagnostics}`);
  t.diagnostic(`proxy: ${proxy.diagnostics}`);
  const ours = (read: string[]) => read.filter((f) => f.startsWith('node_modules/ipvsync/'));
  assert.ok(ours(core.read).includes('node_modules/ipvsync/dist/src/index.d.ts'));
  assert.deepEqual(core.read.filter((f) => f.includes(CLIENT) || f.includes('prom-client')), []);
  assert.deepEqual(ours(core.read).filter((f) => /\/dist\/src\/(kube|proxy|api|daemon\/(?!runner))/.test(f)), [], 'no Kubernetes or daemon declaration');
  assert.deepEqual(proxy.read.filter((f) => f.includes(CLIENT)), []);
  assert.ok(ours(proxy.read).includes('node_modules/ipvsync/dist/src/api/proxy.d.ts'));
  assert.match(run(process.execPath, [join('out-core', 'core.js')], { cwd: consumer }), /^core ok$/m);
  assert.match(run(process.execPath, [join('out-proxy', 'proxy.js')], { cwd: consumer }), /^proxy ok$/m);
});

test("the docs' TypeScript examples compile against the installed package, strict, libraries checked", () => {
  const examples = writeDocExamples(ROOT, consumer);
  assert.ok(examples.names.length >= 2);
  const r = spawnSync(process.execPath, [TSC, '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--noEmit', '--types', 'node', '--typeRoots', join(ROOT, 'node_modules', '@types'), ...examples.names], { cwd: consumer, encoding: 'utf8' });
  assert.equal(r.status, 0, examples.report(r.stdout));
});

/** The client's objects handed to the proxy: ipvsync's types take them, under strict. */
const WITH_CLIENT = `import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { translate } from 'ipvsync/proxy';

const service: V1Service = { metadata: { name: 'web', namespace: 'default' }, spec: { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] } };
const slice: V1EndpointSlice = { addressType: 'IPv4', metadata: { name: 'web-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } }, ports: [{ name: 'http', port: 8080, protocol: 'TCP' }], endpoints: [{ addresses: ['10.244.1.5'], conditions: { ready: true } }] };
const model = translate({ services: [service], endpointSlices: [slice], node: { name: 'node-a', addresses: ['192.168.1.10'] } });
console.log(model.services.length);
`;

/** The proxy's sync thread watching the API through a kubeconfig user's exec plugin (the full
 *  client's path); prints 'synced' or the error that kept it from starting. */
const EXEC = `import { ThreadedProxier } from 'ipvsync/proxy';
const tp = await ThreadedProxier.start({ proxier: { node: { name: '${NODE}', addresses: ['192.168.1.10'] }, config: {} }, kernel: { glue: true }, kernelModule: new URL('./kernel.mjs', import.meta.url).href });
try {
  // the first failed list or watch ends it (the informers would retry it for ever)
  let failed;
  const failure = new Promise((_, reject) => (failed = reject));
  const kube = await tp.watchKube({ source: { kubeconfig: process.argv[2] }, nodeName: '${NODE}', onError: (e) => failed(new Error(e.resource + ': ' + e.error.message)) });
  await Promise.race([kube.synced, failure]);
  await kube.stop();
  console.log('synced');
} catch (e) {
  console.log('refused: ' + e.message);
}
await tp.close();
`;

test('with the client at the lowest and the highest version of the peer range: its objects compile against the proxy, strict; an exec plugin authenticates the watches', async (t) => {
  // The range, and its ends as the registry had them when it was chosen (docs/releasing.md).
  assert.equal(manifest.peerDependencies[CLIENT], '^1.0.0 || ^2.0.0');
  const api = await FakeApiServer.start();
  try {
    api.create('services', svcObj('web', '10.96.0.10'));
    api.create('nodes', nodeObj(NODE));
    for (const version of ['1.0.0', '2.0.1']) {
      const dir = join(work, `client-${version}`);
      mkdirSync(dir);
      // 2.x's declarations import 'ws' without depending on its types (1.x does): a strict
      // consumer of 2.x installs @types/ws itself (docs/releasing.md)
      const types = version.startsWith('2.') ? { '@types/ws': '^8.18.1' } : {};
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `client-${version}`, private: true, type: 'module', dependencies: { ipvsync: `file:../${packed.filename}`, [CLIENT]: version, ...types } }));
      // the client's own dependencies come from the registry unless npm's cache has them
      const t0 = performance.now();
      run('npm', ['install'], { cwd: dir, env: { ...npmEnv, npm_config_offline: 'false', npm_config_prefer_offline: 'true', PATH: bin } });
      t.diagnostic(`${CLIENT}@${version}: npm install with the tarball ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      assert.equal(JSON.parse(readFileSync(join(dir, 'node_modules', ...CLIENT.split('/'), 'package.json'), 'utf8')).version, version);
      writeFileSync(join(dir, 'client.ts'), WITH_CLIENT);
      writeFileSync(join(dir, 'kernel.mjs'), KERNEL);
      writeFileSync(join(dir, 'exec.mjs'), EXEC);
      writeFileSync(join(dir, 'kubeconfig'), execKubeconfig(api.url));
      const r = spawnSync(process.execPath, [TSC, '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--outDir', 'out', '--types', 'node', '--typeRoots', join(ROOT, 'node_modules', '@types'), 'client.ts'], { cwd: dir, encoding: 'utf8' });
      assert.equal(r.status, 0, `${version}: ${r.stdout}`);
      assert.equal(run(process.execPath, [join('out', 'client.js')], { cwd: dir }).trim(), '1');
      // asynchronously: the fake API server answers from this process
      let before = api.requests.length;
      const { stdout } = await promisify(execFile)(process.execPath, ['exec.mjs', join(dir, 'kubeconfig')], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
      // 2.x's undici 8 needs Node.js >= 22.19 (its engines); 1.x runs on every Node.js ipvsync does
      const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
      let synced = stdout;
      if (version.startsWith('2.') && (major < 22 || (major === 22 && minor < 19))) {
        assert.match(stdout, /^refused: .*needs @kubernetes\/client-node.*failed to load on Node\.js .*2\.x needs Node\.js >= 22\.19/m, version);
        // ... and on the lowest Node.js it takes (npm's node-linux-<arch> package, from its
        // cache when there), the same install runs it: the prebuild is N-API, any Node.js loads it
        const node = join(work, 'node-22.19.0');
        mkdirSync(node);
        run('npm', ['pack', `node-linux-${process.arch}@22.19.0`], { cwd: node, env: { ...npmEnv, npm_config_offline: 'false', npm_config_prefer_offline: 'true' } });
        run('tar', ['-xzf', `node-linux-${process.arch}-22.19.0.tgz`], { cwd: node });
        before = api.requests.length;
        ({ stdout: synced } = await promisify(execFile)(join(node, 'package', 'bin', 'node'), ['exec.mjs', join(dir, 'kubeconfig')], { cwd: dir, encoding: 'utf8', timeout: 120_000 }));
        t.diagnostic(`${CLIENT}@${version}: on Node.js ${process.version} refused (2.x needs Node.js >= 22.19); run on Node.js 22.19.0`);
      }
      assert.match(synced, /^synced$/m, version);
      const requests = api.requests.slice(before);
      assert.ok(requests.some((q) => q.resource === 'services' && !q.watch), 'the services were listed');
      for (const q of requests) assert.equal(q.authorization, 'Bearer from-exec', `${version}: ${q.resource} ${q.watch ? 'watch' : 'list'}`);
    }
  } finally {
    await api.stop();
  }
});
