// The TypeScript blocks of README.md and docs/*.md compile (test/helpers/doc-examples.ts: each
// file's blocks in order as one user's module) importing the package by its name, under
// `strict`, against the package's own declarations (dist/): an example that drifts from the API
// fails here. The host suite's package.test.ts compiles them against the packed package too,
// and the e2e suite runs them (test/e2e/doc-examples-run.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, symlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeDocExamples } from '../helpers/doc-examples.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

test('the TypeScript examples of README.md and docs/ compile against the package', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-doc-examples-'));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(ROOT, join(dir, 'node_modules', 'ipvsync'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
  const examples = writeDocExamples(ROOT, dir);
  assert.ok(examples.names.length >= 2, `found ${examples.names.length} pages with examples`);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', noEmit: true, skipLibCheck: true, types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')] },
      files: examples.names,
    }),
  );
  const r = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', dir], { encoding: 'utf8', cwd: dir });
  // each error names the page; its line is the page's
  assert.equal(r.status, 0, examples.report(r.stdout));
});
