// The addon's CPU counters against the kernel (scripts/host-tests.sh's private namespace): an
// address batch runs as pool tasks whose system time is the kernel adding the addresses, all of
// it inside what the process used (getrusage RUSAGE_SELF over the same span), and `ip -o addr`
// confirms the work was done.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { Links } from '../../src/kernel/links.js';
import { addonCpuUsage } from '../../src/native.js';

after(() => void spawnSync('ip', ['link', 'del', 'vcpu0']));

test('an address batch: pool tasks counted, their system time the kernel’s, within the process’s CPU; JS-thread calls counted', async () => {
  const l = await Links.open();
  assert.ok((await l.apply([{ op: 'addLink', name: 'vcpu0', kind: 'bridge' }, { op: 'setLink', name: 'vcpu0', up: true }])).ok);
  const addrs = Array.from({ length: 5000 }, (_, i) => `10.97.${i >> 8}.${i & 255}`).filter((a) => !a.endsWith('.0'));
  const a = addonCpuUsage();
  const u0 = process.cpuUsage();
  const r = await l.apply(addrs.map((address) => ({ op: 'addAddr', link: 'vcpu0', address })), { stopOnError: false });
  const u1 = process.cpuUsage(u0);
  const b = addonCpuUsage();
  assert.deepEqual(r.errors, []);
  const lines = execFileSync('ip', ['-o', '-4', 'addr', 'show', 'dev', 'vcpu0'], { encoding: 'utf8' }).trim().split('\n');
  assert.equal(lines.length, addrs.length);
  assert.ok(b.poolTasks > a.poolTasks);
  assert.ok(b.jsThreadCalls > a.jsThreadCalls);
  const poolNs = b.poolUserNs - a.poolUserNs + (b.poolSysNs - a.poolSysNs);
  // thousands of address adds: the kernel's share is most of the task's time, and many ticks long
  assert.ok(b.poolSysNs > a.poolSysNs, `pool system time ${b.poolSysNs - a.poolSysNs} ns`);
  assert.ok(poolNs > 0);
  // every thread's exact runtime is in RUSAGE_SELF (µs granularity: 1 ms of slack for rounding)
  const processNs = (u1.user + u1.system) * 1000;
  assert.ok(poolNs + (b.jsThreadNs - a.jsThreadNs) <= processNs + 1e6, `addon ${poolNs + b.jsThreadNs - a.jsThreadNs} ns, process ${processNs} ns`);
});
