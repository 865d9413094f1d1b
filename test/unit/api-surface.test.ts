// The package's public surface is what docs/api.md lists: each entry point's exported names
// (values and types, read from its declarations in dist/ by the TypeScript compiler) equal the
// names its paragraph of "Entry points" lists, so a name is neither exported undocumented nor
// documented and gone. The surface stays small (at most MAX_NAMES names over the three entry
// points: what an embedder calls or must name, not every type a signature mentions), and the
// proxy's entry point, which exports daemon pieces too, lives outside src/proxy/ so that the
// proxier layer imports nothing of the daemon above it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const ENTRY_POINTS = { ipvsync: 'dist/src/index.d.ts', 'ipvsync/proxy': 'dist/src/api/proxy.d.ts', 'ipvsync/testing': 'dist/src/testing/index.d.ts' } as const;
/** Every name counts: a value, a type, a namespace (`nftExpr`) as one. */
const MAX_NAMES = 120;

function exported(files: readonly string[]): Map<string, string[]> {
  const program = ts.createProgram(files, { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, types: [], noEmit: true });
  const checker = program.getTypeChecker();
  return new Map(files.map((f) => [f, checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(f)!)!).map((s) => s.name).sort()]));
}

/** The names in backticks of each entry point's paragraph ("**`ipvsync/proxy`** — …" up to the next one). */
function documented(): Map<string, string[]> {
  const text = readFileSync(join(ROOT, 'docs', 'api.md'), 'utf8');
  const section = text.slice(text.indexOf('\n## Entry points\n'));
  const out = new Map<string, string[]>();
  const parts = section.split(/^\*\*`([^`]+)`\*\*/m);
  for (let i = 1; i < parts.length; i += 2) {
    const body = parts[i + 1]!.split(/^## /m)[0]!;
    out.set(parts[i]!, [...body.matchAll(/`([A-Za-z_][A-Za-z0-9_]*)`/g)].map((m) => m[1]!).sort());
  }
  return out;
}

test('every entry point exports exactly the names docs/api.md lists for it', () => {
  const files = Object.values(ENTRY_POINTS).map((f) => join(ROOT, f));
  const names = exported(files);
  const docs = documented();
  assert.deepEqual([...docs.keys()].sort(), Object.keys(ENTRY_POINTS).sort());
  for (const [entry, file] of Object.entries(ENTRY_POINTS)) {
    const have = names.get(join(ROOT, file))!;
    const listed = docs.get(entry)!;
    assert.deepEqual(
      { undocumented: have.filter((n) => !listed.includes(n)), notExported: listed.filter((n) => !have.includes(n)) },
      { undocumented: [], notExported: [] },
      entry,
    );
    assert.equal(new Set(listed).size, listed.length, `${entry}: a name listed twice`);
  }
});

test('package.json maps each entry point to the declarations checked here, and its module beside them', () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, { types: string; default: string }> };
  for (const [entry, file] of Object.entries(ENTRY_POINTS)) {
    const target = pkg.exports[entry.replace(/^ipvsync/, '.')]!;
    assert.deepEqual(target, { types: `./${file}`, default: `./${file.replace(/\.d\.ts$/, '.js')}` }, entry);
  }
});

test(`the three entry points export at most ${MAX_NAMES} names together; each module exports at run time only names its declarations have`, async () => {
  const files = Object.values(ENTRY_POINTS).map((f) => join(ROOT, f));
  const names = exported(files);
  const counts = Object.fromEntries(Object.entries(ENTRY_POINTS).map(([entry, f]) => [entry, names.get(join(ROOT, f))!.length]));
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  assert.ok(total <= MAX_NAMES, `${total} names exported (${JSON.stringify(counts)}), more than ${MAX_NAMES}`);
  for (const [entry, file] of Object.entries(ENTRY_POINTS)) {
    const values = Object.keys(await import(pathToFileURL(join(ROOT, file.replace(/\.d\.ts$/, '.js'))).href));
    assert.ok(values.length > 0, entry);
    assert.deepEqual(values.filter((n) => !names.get(join(ROOT, file))!.includes(n)), [], `${entry}: exported at run time, not declared`);
  }
});

/** The .ts files under `dir`, recursively. */
function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

test('no module of src/proxy/ imports src/daemon/ (the layer above it)', () => {
  const proxy = join(ROOT, 'src', 'proxy');
  const daemon = join(ROOT, 'src', 'daemon');
  const upward: string[] = [];
  for (const file of sources(proxy)) {
    // import and export declarations, `import type`, and dynamic import() calls alike
    for (const ref of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (!ref.fileName.startsWith('.')) continue;
      const target = resolve(dirname(file), ref.fileName);
      if (!relative(daemon, target).startsWith('..')) upward.push(`${relative(ROOT, file)} -> ${ref.fileName}`);
    }
  }
  assert.ok(sources(proxy).length > 10, 'read the sources');
  assert.deepEqual(upward, []);
});
