// The package's public surface is what docs/api.md lists: each entry point's exported names
// (values and types, read from its declarations in dist/ by the TypeScript compiler) equal the
// names its paragraph of "Entry points" lists, so a name is neither exported undocumented nor
// documented and gone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const ENTRY_POINTS = { ipvsync: 'dist/src/index.d.ts', 'ipvsync/proxy': 'dist/src/proxy/index.d.ts', 'ipvsync/testing': 'dist/src/testing/index.d.ts' } as const;

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
