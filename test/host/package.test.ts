// The package as a user gets it (docs/releasing.md): a copy of the working tree packed by
// `npm pack` (its prepack builds dist/src), the tarball's file list, and the tarball installed
// with `npm ci` into a fresh project, offline — the dependencies at the repository's locked
// versions from npm's cache, the addon compiled by the package's install script — without
// @kubernetes/client-node (an optional peer). Against that install, under `strict` without
// `skipLibCheck`: a program importing only the core compiles without reading a declaration of
// Kubernetes (the client's, or the proxy's), one importing `ipvsync/proxy` compiles without
// reading the client's, both run (the proxy's sync thread too, its API connection refused for
// want of the client, with the message saying so), the docs' examples compile, and the
// installed command runs.
// In the host suite for its time (the addon's build), not for root: it needs none.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeDocExamples } from '../helpers/doc-examples.js';

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

function run(cmd: string, args: readonly string[], opts: SpawnSyncOptions & { cwd: string }): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env: npmEnv, timeout: 480_000, maxBuffer: 64 << 20, ...opts });
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} in ${opts.cwd}: ${r.error ?? ''}\n${r.stdout}\n${r.stderr}`);
  return String(r.stdout);
}

let packed: { filename: string; entryCount: number; size: number; files: Array<{ path: string }> };
let manifest: { name: string; version: string; dependencies: Record<string, string>; peerDependencies: Record<string, string>; peerDependenciesMeta: Record<string, { optional?: boolean }> };

before(() => {
  // The tree as committed or about to be (tracked and new files, nothing ignored: no dist/,
  // build/ or node_modules/), with the repository's dependencies: what a clone has after npm ci.
  const tree = join(work, 'tree');
  for (const f of run('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT }).split('\0').filter(Boolean)) {
    if (existsSync(join(ROOT, f))) cpSync(join(ROOT, f), join(tree, f), { recursive: true });
  }
  symlinkSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'));
  // (the lifecycle scripts' banners may come before the JSON)
  const out = run('npm', ['pack', '--json', '--pack-destination', work], { cwd: tree });
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
  run('npm', ['ci'], { cwd: consumer });
});

after(() => rmSync(work, { recursive: true, force: true }));

test('the tarball holds what a user runs and builds, and nothing else', () => {
  const files = packed.files.map((f) => f.path).sort();
  const allowed = (p: string) =>
    (p.startsWith('dist/src/') && /\.(js|d\.ts)$/.test(p)) ||
    (p.startsWith('native/') && !p.startsWith('native/fuzz/')) ||
    ['binding.gyp', 'CMakeLists.txt', 'scripts/native-sources.cjs', 'README.md', 'LICENSE', 'package.json'].includes(p);
  assert.deepEqual(files.filter((p) => !allowed(p)), [], 'files outside the list');
  for (const p of ['dist/src/index.js', 'dist/src/index.d.ts', 'dist/src/proxy/index.d.ts', 'dist/src/testing/index.d.ts', 'dist/src/cli/main.js', 'binding.gyp', 'scripts/native-sources.cjs', 'native/addon/addon.cc', 'LICENSE', 'README.md'])
    assert.ok(files.includes(p), p);
  assert.ok(!files.some((p) => /(^|\/)(test|bench|fuzz|results)\//.test(p) || p.endsWith('.map')), 'no tests, benchmarks, fuzzers, results or source maps');
  assert.ok(packed.entryCount < 300 && packed.size < 1_000_000, `${packed.entryCount} files, ${packed.size} bytes`);
  // no declaration names the Kubernetes client: a consumer's compiler never goes there
  const installed = join(consumer, 'node_modules', 'ipvsync');
  const declarations = files.filter((p) => p.endsWith('.d.ts'));
  assert.deepEqual(declarations.filter((p) => readFileSync(join(installed, p), 'utf8').includes(CLIENT)), []);
  assert.equal(manifest.peerDependenciesMeta[CLIENT]?.optional, true);
  assert.equal(manifest.dependencies[CLIENT], undefined);
});

test('the install script built the addon from the tarball; the client was not installed', () => {
  assert.ok(existsSync(join(consumer, 'node_modules', 'ipvsync', 'build', 'Release', 'ipvsync.node')));
  assert.ok(!existsSync(join(consumer, 'node_modules', '@kubernetes')));
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
// queueing an op encodes it in the addon the install script built
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
// the sync thread (an in-memory kernel): without the client, watching the API fails saying so
const tp = await ThreadedProxier.start({ proxier: { node: { name: 'node-a', addresses: ['192.168.1.10'] }, config: {} }, kernel: { glue: true }, kernelModule: new URL('../kernel.mjs', import.meta.url).href });
await assert.rejects(tp.watchKube({ source: { server: 'https://127.0.0.1:6443' }, nodeName: 'node-a' }), (e: Error) => e.message.includes('the Kubernetes API needs @kubernetes/client-node'));
await tp.close();
console.log('proxy ok');
`;

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
  assert.deepEqual(ours(core.read).filter((f) => /\/dist\/src\/(kube|proxy|daemon\/(?!runner))/.test(f)), [], 'no Kubernetes or daemon declaration');
  assert.deepEqual(proxy.read.filter((f) => f.includes(CLIENT)), []);
  assert.ok(ours(proxy.read).includes('node_modules/ipvsync/dist/src/proxy/index.d.ts'));
  assert.match(run(process.execPath, [join('out-core', 'core.js')], { cwd: consumer }), /^core ok$/m);
  assert.match(run(process.execPath, [join('out-proxy', 'proxy.js')], { cwd: consumer }), /^proxy ok$/m);
});

test("the docs' TypeScript examples compile against the installed package, strict, libraries checked", () => {
  const examples = writeDocExamples(ROOT, consumer);
  assert.ok(examples.names.length >= 2);
  const r = spawnSync(process.execPath, [TSC, '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--noEmit', '--types', 'node', '--typeRoots', join(ROOT, 'node_modules', '@types'), ...examples.names], { cwd: consumer, encoding: 'utf8' });
  assert.equal(r.status, 0, examples.report(r.stdout));
});
