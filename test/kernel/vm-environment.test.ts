// Runs inside the test VM (node dist/test/vm/cli.js --suite kernel) and checks
// the environment every other real-kernel test relies on. If this file fails,
// the other kernel tests' failures are not about ipvsync.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';

const where = process.env.IPVSYNC_VM
  ? `inside the ${process.env.IPVSYNC_VM} test VM (kernel ${os.release()})`
  : `outside the test VM (kernel ${os.release()}; run it with: node dist/test/vm/cli.js --suite kernel)`;

function run(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const err = e as Error & { stderr?: string; status?: number };
    throw new Error(`${cmd} ${args.join(' ')} failed (status ${err.status ?? '?'}): ${err.stderr?.trim() || err.message}`);
  }
}

test('runs as root', () => {
  assert.equal(process.getuid?.(), 0, `not root ${where}`);
});

test('the kernel has IPVS (/proc/net/ip_vs)', () => {
  assert.ok(fs.existsSync('/proc/net/ip_vs'), `no /proc/net/ip_vs ${where}`);
});

test('lo is up', () => {
  const flags = Number.parseInt(fs.readFileSync('/sys/class/net/lo/flags', 'utf8').trim(), 16);
  assert.ok(flags & 0x1, `lo is down ${where} (IFF_UP missing in flags 0x${flags.toString(16)})`);
  assert.match(run('ip', ['-o', 'link', 'show', 'lo']), /[<,]UP[,>]/);
});

test('ipvsadm can add, save and remove a virtual service', () => {
  const svc = ['-t', '10.0.0.1:80'];
  assert.doesNotMatch(run('ipvsadm', ['-Sn']), /10\.0\.0\.1:80/, 'leftover service 10.0.0.1:80 before the test');
  run('ipvsadm', ['-A', ...svc, '-s', 'rr']);
  try {
    assert.match(run('ipvsadm', ['-Sn']), /^-A -t 10\.0\.0\.1:80 -s rr\b/m);
  } finally {
    run('ipvsadm', ['-C']);
  }
  assert.equal(run('ipvsadm', ['-Sn']).trim(), '', 'ipvsadm -C left services behind');
});

test('a dummy link can be created and deleted', () => {
  const name = 'ivsenv0';
  run('ip', ['link', 'add', name, 'type', 'dummy']);
  try {
    assert.match(run('ip', ['-o', 'link', 'show', name]), new RegExp(`^\\d+: ${name}:`));
    assert.ok(fs.existsSync(`/sys/class/net/${name}`));
  } finally {
    run('ip', ['link', 'del', name]);
  }
  assert.ok(!fs.existsSync(`/sys/class/net/${name}`), `${name} still exists after ip link del`);
});

test('/tmp is writable', () => {
  const dir = fs.mkdtempSync(path.join('/tmp', 'ipvsync-env-'));
  try {
    const file = path.join(dir, 'probe');
    fs.writeFileSync(file, 'ok\n');
    assert.equal(fs.readFileSync(file, 'utf8'), 'ok\n');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
