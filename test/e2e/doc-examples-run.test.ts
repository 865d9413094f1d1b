// The TypeScript examples of README.md and docs/api.md run unchanged on a real kernel. Each
// page's blocks become one module (test/helpers/doc-examples.ts, as the unit suite compiles
// them), importing the package by its name; it is transpiled as written and run as a user would,
// as root in a network namespace of its own, and must exit 0. A few lines appended after the
// page's code print what it got (the IPVS batch's outcome, the engine's report), and ipvsadm, ip
// and nft read back what it programmed.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ipvsadmList, linkAddresses, ROOT, run, sh } from './helpers/kernel.js';
import { writeDocExamples } from '../helpers/doc-examples.js';

const skip = process.env.IPVSYNC_VM !== 'qemu' ? 'the examples need IPVS and nftables: run in qemu (node dist/test/vm/cli.js --kernel qemu --suite e2e)' : false;
const ts = createRequire(import.meta.url)(join(ROOT, 'node_modules', 'typescript')) as typeof import('typescript');

/** What each page's module printed after its own code: the values its examples bound. */
const EPILOGUE: Record<string, string> = {
  'README.md': 'console.log(JSON.stringify({ ipvsOk: r.ok, ipvsErrors: r.errors.map(String), reportErrors: report.errors.map(String), invalid: report.invalid.length, ipvsOps: report.ipvs.ops, addressOps: report.addresses.ops }));',
  'docs/api.md': 'console.log(JSON.stringify({ ipvsOk: r.ok, ipvsErrors: r.errors.map(String), nftOk: res.ok, reportErrors: report.errors.map(String), invalid: report.invalid.length }));',
};

let dir: string;
const modules = new Map<string, string>();

before(() => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'ipvsync-doc-run-'));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(ROOT, join(dir, 'node_modules', 'ipvsync'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  const examples = writeDocExamples(ROOT, dir);
  for (const name of examples.names) {
    const page = examples.report(name);
    const epilogue = EPILOGUE[page];
    if (epilogue === undefined) continue;
    const source = `${readFileSync(join(dir, name), 'utf8')}\n${epilogue}\n`;
    const js = ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
    const file = join(dir, name.replace(/\.ts$/, '.js'));
    writeFileSync(file, js);
    modules.set(page, file);
  }
});

after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Runs a page's module in a fresh namespace `ns`; returns what its epilogue printed. */
async function runPage(page: string, ns: string): Promise<Record<string, unknown>> {
  const file = modules.get(page);
  assert.ok(file, `${page} has TypeScript examples`);
  await run('ip', ['netns', 'del', ns]);
  await sh('ip', 'netns', 'add', ns);
  await sh('ip', '-n', ns, 'link', 'set', 'lo', 'up');
  const r = await run('ip', ['netns', 'exec', ns, process.execPath, file], { timeoutMs: 180_000 });
  assert.equal(r.code, 0, `${page}'s examples exited ${r.code}:\n${r.stderr}${r.stdout}`);
  const last = r.stdout.trim().split('\n').at(-1)!;
  return JSON.parse(last) as Record<string, unknown>;
}

test("README.md's example runs unchanged and programs what it says", { skip }, async () => {
  const ns = 'ipvsync-readme';
  try {
    const out = await runPage('README.md', ns);
    // The batch applied both ops; the engine then found the service as desired (no IPVS write)
    // and added the VIP link, its mark and the VIP: nothing failed, nothing was invalid.
    assert.deepEqual(out, {
      ipvsOk: true, ipvsErrors: [], reportErrors: [], invalid: 0,
      ipvsOps: {}, addressOps: { addLink: 1, setLink: 1, addAddr: 1 },
    });
    const table = await ipvsadmList(ns);
    const svc = table.get('TCP 10.96.0.10:80');
    assert.ok(svc, `ipvsadm -Ln shows the service: ${[...table.keys()].join(', ')}`);
    assert.equal(svc.scheduler, 'rr');
    assert.deepEqual(svc.dests.map((d) => `${d.address} ${d.forward} ${d.weight}`), ['10.244.1.5:8080 Masq 1']);
    assert.ok((await linkAddresses('kube-ipvs0', ns)).includes('10.96.0.10/32'), 'the VIP is on kube-ipvs0');
    const demo = await sh('ip', 'netns', 'exec', ns, 'nft', 'list', 'table', 'ip', 'demo');
    assert.match(demo, /set services \{[\s\S]*type ipv4_addr \. inet_proto \. inet_service[\s\S]*elements = \{ 10\.96\.0\.10 \. tcp \. 80 \}/);
    assert.match(demo, /chain pre \{[\s\S]*type nat hook prerouting priority dstnat; policy accept;[\s\S]*ip daddr \. meta l4proto \. th dport @services meta mark set meta mark \| 0x00004000/);
  } finally {
    await run('ip', ['netns', 'del', ns]);
  }
});

test("docs/api.md's examples run unchanged", { skip }, async () => {
  const ns = 'ipvsync-apidoc';
  try {
    const out = await runPage('docs/api.md', ns);
    assert.deepEqual(out, { ipvsOk: true, ipvsErrors: [], nftOk: true, reportErrors: [], invalid: 0 });
    assert.ok((await ipvsadmList(ns)).get('TCP 10.96.0.10:80'), 'the service is there');
    const sets = await sh('ip', 'netns', 'exec', ns, 'ipset', 'list', 'KUBE-CLUSTER-IP');
    assert.match(sets, /Members:\n10\.96\.0\.1,tcp:443/);
    const routes = await sh('ip', '-n', ns, 'route', 'show', 'table', 'local', 'proto', '249');
    assert.match(routes, /local 10\.96\.0\.0\/12 dev lo/);
    assert.match(await sh('ip', 'netns', 'exec', ns, 'nft', 'list', 'table', 'ip', 'ipvsync'), /elements = \{ 10\.96\.0\.10 \. tcp \. 80 \}/);
  } finally {
    await run('ip', ['netns', 'del', ns]);
  }
});
