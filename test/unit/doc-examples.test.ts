// The TypeScript blocks of README.md and docs/*.md compile, each file's blocks in order as one
// user's module (a page's later blocks use the first one's imports) importing the package by
// its name, under `strict`, against the package's own declarations (dist/): an example that
// drifts from the API fails here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The ```ts blocks of a Markdown file, with the line each starts at. */
function blocks(file: string): Array<{ line: number; code: string }> {
  const out: Array<{ line: number; code: string }> = [];
  const lines = readFileSync(join(ROOT, file), 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```ts') continue;
    const start = i + 1;
    while (++i < lines.length && lines[i]!.trim() !== '```');
    out.push({ line: start + 1, code: lines.slice(start, i).join('\n') });
  }
  return out;
}

test('the TypeScript examples of README.md and docs/ compile against the package', () => {
  const files = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-doc-examples-'));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(ROOT, join(dir, 'node_modules', 'ipvsync'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  const names: string[] = [];
  const origin = new Map<string, string>();
  for (const f of files) {
    const bs = blocks(f);
    if (!bs.length) continue;
    const name = `example-${names.length}.ts`;
    names.push(name);
    origin.set(name, f);
    // each block at its own line of the page, so an error's line is the page's
    const lines: string[] = [];
    for (const b of bs) {
      while (lines.length < b.line - 1) lines.push('');
      lines.push(...b.code.split('\n'));
    }
    writeFileSync(join(dir, name), `${lines.join('\n')}\nexport {};\n`);
  }
  assert.ok(names.length >= 2, `found ${names.length} pages with examples`);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', noEmit: true, skipLibCheck: true, types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')] },
      files: names,
    }),
  );
  const r = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { encoding: 'utf8', cwd: dir });
  // each error names the page; its line is the page's
  const report = r.stdout.replace(/example-\d+\.ts/g, (n) => origin.get(n)!);
  assert.equal(r.status, 0, report);
});
