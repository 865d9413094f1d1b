// With --json, a command that fails says so in JSON on stdout, where its output goes (its
// error's name, message, own fields and the exit code), and still in text on stderr; the exit
// codes are the README's: 2 bad input, 3 a kernel without the feature, 1 anything else.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CLI = join(import.meta.dirname, '../../src/cli/main.js');

function run(...args: string[]) {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

test('--json: a missing manifest, a bad flag and a missing netns fail as JSON, with the exit code', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-json-'));
  t.after(() => rmSync(dir, { recursive: true }));
  const cases: Array<{ args: string[]; status: number; error: Record<string, unknown> }> = [
    { args: ['sync', '-f', join(dir, 'missing.yaml'), '--dry-run', '--json'], status: 2, error: { name: 'ManifestError', file: join(dir, 'missing.yaml'), document: 0 } },
    { args: ['sync', '-f', dir, '--cluster-cidr', 'bogus', '--dry-run', '--json'], status: 2, error: { name: 'ConfigError' } },
    { args: ['--netns', join(dir, 'no-such-netns'), 'ipvs', 'list', '--json'], status: 1, error: { name: 'NetlinkError', code: 'ENOENT', kind: 'system', op: 'open' } },
  ];
  for (const c of cases) {
    const r = run(...c.args);
    assert.equal(r.status, c.status, `${c.args.join(' ')}: ${r.stderr}`);
    const out = JSON.parse(r.stdout) as { error: Record<string, unknown> };
    for (const [k, v] of Object.entries(c.error)) assert.deepEqual(out.error[k], v, `${c.args.join(' ')}: ${k} in ${r.stdout}`);
    assert.equal(out.error.exitCode, c.status);
    assert.equal(typeof out.error.message, 'string');
    assert.ok(r.stderr.includes(`ipvsync: ${out.error.message as string}`), r.stderr);
  }
  const config = JSON.parse(run(...cases[1]!.args).stdout) as { error: { issues: Array<{ path: string }> } };
  assert.deepEqual(config.error.issues.map((i) => i.path), ['--cluster-cidr']);
  // without --json: text only
  const text = run('sync', '-f', join(dir, 'missing.yaml'), '--dry-run');
  assert.equal(text.status, 2);
  assert.equal(text.stdout, '');
});
