// Runs inside the IPVS-capable VM kernel (test/vm): the first end-to-end slice, cross-checked
// with ipvsadm and /proc.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Ipvs, formatInfo } from '../../src/kernel/ipvs.js';

const HEADER = /^IP Virtual Server version (\d+\.\d+\.\d+) \(size=(\d+)\)$/;

test('ipvsync ipvs info prints what ipvsadm and /proc/net/ip_vs print', () => {
  const ours = execFileSync(process.execPath, ['dist/src/cli/main.js', 'ipvs', 'info'], { encoding: 'utf8' }).trim();
  assert.match(ours, HEADER);
  const ipvsadm = execFileSync('ipvsadm', ['-Ln'], { encoding: 'utf8' }).split('\n')[0];
  assert.equal(ours, ipvsadm);
  const proc = readFileSync('/proc/net/ip_vs', 'utf8').split('\n')[0];
  assert.equal(ours, proc);
});

test('Ipvs.info() over generic netlink: version 1.2.1 and the table size', async () => {
  const ipvs = await Ipvs.open();
  const info = await ipvs.info();
  assert.equal(info.version, '1.2.1');
  assert.equal(info.versionCode, 0x010201);
  const [, , size] = HEADER.exec(readFileSync('/proc/net/ip_vs', 'utf8').split('\n')[0]!)!;
  assert.equal(info.connTableSize, Number(size));
  assert.equal(formatInfo(info), `IP Virtual Server version 1.2.1 (size=${size})`);
});

test('a handle inside another network namespace reaches that namespace\'s IPVS', async () => {
  execFileSync('ip', ['netns', 'add', 'ipvsync-info']);
  try {
    // A virtual server in the other namespace must not show up here, and vice versa.
    execFileSync('ip', ['netns', 'exec', 'ipvsync-info', 'ipvsadm', '-A', '-t', '10.9.9.9:80']);
    const inside = await Ipvs.open({ netns: '/run/netns/ipvsync-info' });
    assert.equal((await inside.info()).version, '1.2.1');
    assert.doesNotMatch(execFileSync('ipvsadm', ['-Ln'], { encoding: 'utf8' }), /10\.9\.9\.9/);
    const r = execFileSync(process.execPath, ['dist/src/cli/main.js', '--netns', '/run/netns/ipvsync-info', 'ipvs', 'info'], {
      encoding: 'utf8',
    });
    assert.match(r.trim(), HEADER);
  } finally {
    execFileSync('ip', ['netns', 'del', 'ipvsync-info']);
  }
});
