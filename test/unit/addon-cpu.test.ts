// The addon's CPU counters (addonCpuUsage): every binding call on the JavaScript thread counts
// once, a call that throws too, and only work on the libuv pool moves the pool's counters (the
// host suite's addon-cpu test runs pool tasks against the kernel).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addonCpuUsage, native } from '../../src/native.js';
import { packIpvsOps } from '../../src/kernel/ipvs-pack.js';
import type { IpvsOp, ServiceConfig } from '../../src/kernel/ipvs.js';

const svc: ServiceConfig = { protocol: 'tcp', address: '10.96.0.1', port: 80, scheduler: 'rr' };

test('a binding call counts once on the JS thread with its CPU time; the counters only grow; the pool is untouched', () => {
  const ops: IpvsOp[] = [
    { op: 'addService', service: svc },
    ...Array.from({ length: 20_000 }, (_, i): IpvsOp => ({ op: 'addDestination', service: svc, dest: { address: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, port: 8080 } })),
  ];
  const packed = packIpvsOps(ops);
  const a = addonCpuUsage();
  const bytes = native().codec.ipvs.convertOps(packed, 0x1c);
  const b = addonCpuUsage();
  assert.ok(bytes > 20_000 * 40);
  assert.equal(b.jsThreadCalls - a.jsThreadCalls, 1);
  // converting 20k ops takes milliseconds of CPU; the thread's CPU clock counts nanoseconds
  assert.ok(b.jsThreadNs > a.jsThreadNs, `${b.jsThreadNs} > ${a.jsThreadNs}`);
  assert.equal(b.poolTasks, a.poolTasks);
  assert.equal(b.poolUserNs, a.poolUserNs);
  assert.equal(b.poolSysNs, a.poolSysNs);
  // reading the counters is not itself counted
  const c = addonCpuUsage();
  assert.equal(c.jsThreadCalls, b.jsThreadCalls);
  for (const k of ['jsThreadNs', 'jsThreadCalls', 'poolUserNs', 'poolSysNs', 'poolTasks'] as const) assert.ok(Number.isInteger(c[k]) && c[k] >= 0, k);
});

test('a binding call that throws still counts', () => {
  const bad = packIpvsOps([{ op: 'addDestination', service: svc, dest: { address: 'nope', port: 1 } }]);
  const a = addonCpuUsage();
  assert.throws(() => native().codec.ipvs.convertOps(bad, 0x1c), /address/);
  const b = addonCpuUsage();
  assert.equal(b.jsThreadCalls - a.jsThreadCalls, 1);
  assert.ok(b.jsThreadNs >= a.jsThreadNs);
});

test('every binding method of the addon starts with a JsThreadCpuScope (the counters miss no call of substance: the one-line socket-counter readers and the handles\' constructors aside)', async () => {
  const { readdirSync, readFileSync } = await import('node:fs');
  const dir = new URL('../../../native/addon/', import.meta.url);
  const files = readdirSync(dir).filter((f) => f.endsWith('_binding.cc') && f !== 'cpu_binding.cc');
  assert.ok(files.length >= 8, files.join(' '));
  let methods = 0;
  for (const f of files) {
    const lines = readFileSync(new URL(f, dir), 'utf8').split('\n');
    lines.forEach((l, i) => {
      if (!/^\s*(static )?(Napi::Value|void) \w+\(const Napi::CallbackInfo& info\) \{$/.test(l)) return;
      methods++;
      assert.match(lines[i + 1] ?? '', /^\s*JsThreadCpuScope cpu;$/, `${f}:${i + 1}: ${l.trim()}`);
    });
  }
  assert.ok(methods >= 70, `${methods} binding methods`);
});
