// What the restore commands read, on the host: bounded input, an unreadable input refused (never
// taken as empty), a bad line quoted bounded. Exit 2 and nothing applied in every case; the
// ipset cases with the kernel's ipset as the independent reader.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'main.js');
const ipset = (...args: string[]) => execFileSync('ipset', args, { encoding: 'utf8' });

/** The CLI with `stdin` as its standard input: text, or a file opened for it. */
function cli(args: string[], stdin: { text: string } | { file: string }): { status: number | null; stderr: string } {
  const fd = 'file' in stdin ? openSync(stdin.file, 'r') : undefined;
  try {
    const r = spawnSync(process.execPath, [CLI, ...args], {
      encoding: 'utf8',
      maxBuffer: 1 << 26,
      timeout: 120_000,
      ...(fd !== undefined ? { stdio: [fd, 'pipe', 'pipe'] } : { input: (stdin as { text: string }).text }),
    });
    return { status: r.status, stderr: r.stderr };
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

test('an endless input (/dev/zero) is refused past the bound, as a file and on stdin, for both restores', () => {
  for (const [args, stdin] of [
    [['ipset', 'restore', '-f', '/dev/zero'], { text: '' }],
    [['ipset', 'restore'], { file: '/dev/zero' }],
    [['ipvs', 'restore'], { file: '/dev/zero' }],
  ] as const) {
    const r = cli([...args], stdin);
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, /more than 256 MiB of input; nothing was applied/);
  }
  assert.equal(ipset('list', '-n'), '', 'no set made');
});

test('an input that cannot be read is an error, never an empty input', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-input-'));
  const file = cli(['ipset', 'restore', '-f', dir], { text: '' });
  assert.equal(file.status, 2, file.stderr);
  assert.match(file.stderr, new RegExp(`cannot read ${dir}: .*EISDIR.*; nothing was applied`));
  for (const args of [['ipset', 'restore'], ['ipvs', 'restore']]) {
    const r = cli(args, { file: dir });
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, /cannot read stdin: .*EISDIR.*; nothing was applied/);
  }
  const missing = cli(['ipset', 'restore', '-f', join(dir, 'missing')], { text: '' });
  assert.equal(missing.status, 2);
  assert.match(missing.stderr, /cannot read .*missing: .*ENOENT/);
});

test('a 10 MB bad line is named by its line and quoted bounded', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-input-'));
  const long = 'x'.repeat(10_000_000);
  const ipsetText = join(dir, 'ipset.txt');
  writeFileSync(ipsetText, `create big hash:ip\nadd big ${long}\n`);
  const a = cli(['ipset', 'restore', '-f', ipsetText], { text: '' });
  assert.equal(a.status, 2, a.stderr.slice(0, 500));
  assert.match(a.stderr, /line 2: .*'x+ … \(\d+ characters left out\) … x+' is not an IPv4 or IPv6 address; nothing was applied/);
  assert.ok(a.stderr.length < 1000, `stderr is ${a.stderr.length} bytes`);
  assert.doesNotMatch(ipset('list', '-n'), /big/);
  const b = cli(['ipvs', 'restore'], { text: `-A -t 10.0.0.1:80 -s rr\n-A -t ${long}:80 -s rr\n` });
  assert.equal(b.status, 2, b.stderr.slice(0, 500));
  assert.match(b.stderr, /line 2: invalid address 'x+ … \(\d+ characters left out\) … x+:80 -s rr \(nothing applied\)/);
  assert.ok(b.stderr.length < 1000, `stderr is ${b.stderr.length} bytes`);
});
