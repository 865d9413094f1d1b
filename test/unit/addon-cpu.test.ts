// The addon's CPU counters (addonCpuUsage): every binding call on the JavaScript thread counts
// once, a call that throws too, and only work on the libuv pool moves the pool's counters (the
// host suite's addon-cpu test runs pool tasks against the kernel). Every method is defined
// through one wrapper (native/addon/method.h), which also turns a C++ exception into the typed
// error: checked here by calling every method the addon exports.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { addonCpuUsage, native } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
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

test('every binding method counts once on the JS thread and fails with a typed error, never a crash: handles, codec hooks, top-level functions', async () => {
  // Handles bound to a namespace that does not exist: any kernel work they queue fails where
  // the socket is opened (a typed error), so calling every method with no arguments touches
  // nothing on this machine.
  const b = native();
  const nowhere = { netns: '/nonexistent/ipvsync-addon-cpu-test' };
  const targets: Array<[string, Record<string, unknown>]> = [
    ['GenlHandle', new b.GenlHandle(nowhere) as unknown as Record<string, unknown>],
    ['IpvsHandle', new b.IpvsHandle(nowhere) as unknown as Record<string, unknown>],
    ['RtnlHandle', new b.RtnlHandle(nowhere) as unknown as Record<string, unknown>],
    ['NftHandle', new b.NftHandle(nowhere) as unknown as Record<string, unknown>],
    ['IpsetHandle', new b.IpsetHandle(nowhere) as unknown as Record<string, unknown>],
    ['ConntrackHandle', new b.ConntrackHandle(nowhere) as unknown as Record<string, unknown>],
    ['NftWireEncoder', new b.NftWireEncoder() as unknown as Record<string, unknown>],
  ];
  const calls: Array<[string, () => unknown]> = [];
  for (const [cls, h] of targets)
    for (const name of Object.getOwnPropertyNames(Object.getPrototypeOf(h)))
      if (name !== 'constructor' && typeof h[name] === 'function') calls.push([`${cls}.${name}`, () => (h[name] as () => unknown).call(h)]);
  const codec = b.codec as unknown as Record<string, unknown>;
  for (const [k, v] of Object.entries(codec)) {
    if (typeof v === 'function') calls.push([`codec.${k}`, v as () => unknown]);
    else if (v && typeof v === 'object')
      for (const [f, fn] of Object.entries(v)) if (typeof fn === 'function') calls.push([`codec.${k}.${f}`, fn as () => unknown]);
  }
  calls.push(['memoryPressure', () => (b.memoryPressure as (l?: string) => void)()]);
  assert.ok(calls.length >= 60, `${calls.length} binding methods`);
  for (const [name, call] of calls) {
    const before = addonCpuUsage().jsThreadCalls;
    let result: unknown;
    let thrown: unknown;
    try {
      result = call();
    } catch (e) {
      thrown = e;
    }
    assert.equal(addonCpuUsage().jsThreadCalls - before, 1, `${name}: counted once`);
    // memoryPressure talks to V8, not the kernel: a bad level is a TypeError (memory-pressure.test)
    const typed = name === 'memoryPressure' ? thrown instanceof TypeError : thrown instanceof NetlinkError;
    if (thrown !== undefined) assert.ok(typed, `${name} threw ${String(thrown)}`);
    if (result instanceof Promise) await result.then(() => undefined, (e: unknown) => assert.ok(e instanceof NetlinkError, `${name} rejected with ${String(e)}`));
  }
});

test('a C++ exception on the JavaScript thread leaves the call as the typed error (NetlinkError), with its kind', () => {
  // an op stream that is not one: the decoder throws nl::Exception (kInvalid) on this thread
  assert.throws(
    () => native().codec.nftables.encodeWire(Buffer.from('nope')),
    (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && e.code === 'EINVAL' && /not an op stream/.test(e.message),
  );
  // an attribute too long for netlink: AttrWriter throws it while the codec hook writes
  assert.throws(
    () => native().codec.writeAttributes([{ type: 1, kind: 'bytes', value: Buffer.alloc(70_000) }]),
    (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && e.op === 'netlink attribute',
  );
});
