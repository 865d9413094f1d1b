// Logging format and level filter; preflight with injected checks (and once against this
// machine); ordered shutdown on signals that leaves the data plane alone.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { NetlinkError } from '../../src/errors.js';
import { Ipvs } from '../../src/kernel/ipvs.js';
import { createLogger, toLogValue } from '../../src/daemon/log.js';
import { CAP_NET_ADMIN, exitAfterStop, Lifecycle, PreflightError, hasCapability, preflight, systemChecks, type SignalSource } from '../../src/daemon/lifecycle.js';

test('logger: JSON lines with ts, level, msg and fields; level filter; child fields; reserved names kept apart', () => {
  const lines: string[] = [];
  const log = createLogger({ level: 'info', format: 'json', write: (l) => lines.push(l), now: () => Date.parse('2024-05-01T10:00:00Z') });
  log.debug('hidden');
  log.info('synced', { services: 3, took: 0.5 });
  const child = log.child({ component: 'informer', resource: 'services' });
  child.warn('watch dropped', { msg: 'shadow', resource: 'override' });
  log.error('boom', { error: new NetlinkError({ message: 'IPVS: add service: File exists', code: 'EEXIST', errno: 17, kind: 'kernel', op: 'addService', index: 4 }) });
  assert.equal(lines.length, 3);
  assert.deepEqual(JSON.parse(lines[0]!), { ts: '2024-05-01T10:00:00.000Z', level: 'info', msg: 'synced', services: 3, took: 0.5 });
  assert.deepEqual(JSON.parse(lines[1]!), { ts: '2024-05-01T10:00:00.000Z', level: 'warn', msg: 'watch dropped', component: 'informer', resource: 'override', field_msg: 'shadow' });
  const err = JSON.parse(lines[2]!).error;
  assert.equal(err.name, 'NetlinkError');
  assert.equal(err.message, 'IPVS: add service: File exists');
  assert.equal(err.code, 'EEXIST');
  assert.equal(err.errno, 17);
  assert.equal(err.kind, 'kernel');
  assert.equal(err.op, 'addService');
  assert.equal(err.index, 4);
  assert.equal(log.enabled('debug'), false);
  assert.equal(createLogger({ level: 'debug', write: () => {} }).enabled('debug'), true);
  for (const l of lines) assert.equal(l.includes('\n'), false, 'one line per entry');
});

test("logger: klog's text lines by default, as kube-proxy writes them; the same level filter and fields", () => {
  const lines: string[] = [];
  const log = createLogger({ level: 'info', write: (l) => lines.push(l), now: () => Date.parse('2024-05-01T10:00:02.123Z') });
  log.debug('hidden');
  log.info('sync', { trigger: 'periodic', writes: 0, ok: true, addrs: ['10.0.0.1'] });
  log.child({ resource: 'services' }).warn('watch dropped', { msg: 'shadow' });
  log.error('boom', { error: new NetlinkError({ message: 'File exists', code: 'EEXIST', errno: 17, kind: 'kernel', op: 'addService' }) });
  const pid = String(process.pid).padStart(7);
  assert.deepEqual(lines.slice(0, 2), [
    `I0501 10:00:02.123000 ${pid} ipvsync] "sync" trigger="periodic" writes=0 ok=true addrs=["10.0.0.1"]`,
    `W0501 10:00:02.123000 ${pid} ipvsync] "watch dropped" resource="services" field_msg="shadow"`,
  ]);
  assert.match(lines[2]!, /^E0501 10:00:02\.123000 +\d+ ipvsync\] "boom" error=\{"name":"NetlinkError","message":"File exists","code":"EEXIST",/);
  // the header as klog's parsers read it: severity, mmdd hh:mm:ss.uuuuuu, pid, source]
  for (const l of lines) assert.match(l, /^[IWE]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ [^ \]]+\] "/);
  assert.equal(lines.length, 3);
});

test('log values: bigint, Map, Set, Date, cycles, non-finite numbers, causes', () => {
  const cyc: Record<string, unknown> = { a: 1 };
  cyc.self = cyc;
  assert.deepEqual(toLogValue({ n: 2n ** 70n, m: new Map([['k', 1]]), s: new Set([1, 2]), d: new Date(0), c: cyc, inf: Infinity, u: undefined }), {
    n: '1180591620717411303424',
    m: { k: 1 },
    s: [1, 2],
    d: '1970-01-01T00:00:00.000Z',
    c: { a: 1, self: '[Circular]' },
    inf: 'Infinity',
  });
  const e = new Error('outer', { cause: new Error('inner') });
  assert.deepEqual(toLogValue(e), { name: 'Error', message: 'outer', cause: { name: 'Error', message: 'inner' } });
  assert.throws(() => createLogger({ level: 'loud' as never }), /unknown log level/);
});

const STATUS = (capEff: string) => `Name:\tnode\nCapInh:\t0000000000000000\nCapPrm:\t${capEff}\nCapEff:\t${capEff}\nCapBnd:\t000001ffffffffff\n`;

test('CapEff parsing: bit 12 is CAP_NET_ADMIN', () => {
  assert.equal(hasCapability(STATUS('000001ffffffffff'), CAP_NET_ADMIN), true);
  assert.equal(hasCapability(STATUS('0000000000001000'), CAP_NET_ADMIN), true);
  assert.equal(hasCapability(STATUS('00000000a80425fb'), CAP_NET_ADMIN), false, "docker's default set has no NET_ADMIN");
  assert.equal(hasCapability(STATUS('0000000000000000'), CAP_NET_ADMIN), false);
  assert.throws(() => hasCapability('Name:\tx\n', CAP_NET_ADMIN), /no CapEff line/);
});

test('preflight: passes, or names exactly what is missing', async () => {
  let ipvsCalls = 0;
  const ok = { capNetAdmin: async () => true, dataPlane: async () => void ipvsCalls++ };
  await preflight(ok);
  assert.equal(ipvsCalls, 1);

  const noCap = { capNetAdmin: async () => false, dataPlane: async () => void ipvsCalls++ };
  await assert.rejects(preflight(noCap), (e: PreflightError) => {
    assert.equal(e.problems.length, 1);
    assert.match(e.problems[0]!, /^missing CAP_NET_ADMIN: run as root or grant the capability/);
    return true;
  });
  assert.equal(ipvsCalls, 1, 'the IPVS check is not run without the capability');

  const unsupported = new NetlinkError({ message: 'the kernel has no generic netlink family IPVS (kernel module ip_vs is not loaded)', code: 'ENOENT', errno: 2, kind: 'unsupported', op: 'resolve' });
  await assert.rejects(preflight({ capNetAdmin: async () => true, dataPlane: async () => Promise.reject(unsupported) }), (e: PreflightError) => {
    assert.deepEqual(e.problems.length, 1);
    assert.match(e.problems[0]!, /^IPVS is not available in this kernel \(the kernel has no generic netlink family IPVS \(kernel module ip_vs is not loaded\)\): load the ip_vs module/);
    assert.match(e.message, /^cannot start:\n {2}- IPVS is not available/);
    return true;
  });
  const eperm = new NetlinkError({ message: 'Operation not permitted', code: 'EPERM', errno: 1, kind: 'kernel', op: 'info' });
  await assert.rejects(preflight({ capNetAdmin: async () => true, dataPlane: async () => Promise.reject(eperm) }), /IPVS refused access \(EPERM\)/);
  await assert.rejects(preflight({ capNetAdmin: async () => Promise.reject(new Error('EACCES')), dataPlane: async () => {} }), /cannot read the process capabilities: EACCES/);
  // the nftables data plane is named as such, with its own remedy
  const noNft = new NetlinkError({ message: 'nf_tables is not available', code: 'EPROTONOSUPPORT', errno: 93, kind: 'unsupported', op: 'open' });
  await assert.rejects(preflight({ capNetAdmin: async () => true, plane: 'nftables', dataPlane: async () => Promise.reject(noNft) }), /nftables is not available in this kernel \(nf_tables is not available\): use a kernel with nf_tables and its NAT/);
});

test('preflight against this machine agrees with /proc and with IPVS itself', async () => {
  const cap = hasCapability(readFileSync('/proc/self/status', 'utf8'), CAP_NET_ADMIN);
  let ipvsError: unknown;
  if (cap) {
    try {
      await Ipvs.open();
    } catch (e) {
      ipvsError = e;
    }
  }
  const run = preflight(systemChecks(() => Ipvs.open()));
  if (!cap) await assert.rejects(run, /missing CAP_NET_ADMIN/);
  else if (ipvsError instanceof NetlinkError && ipvsError.kind === 'unsupported') await assert.rejects(run, /IPVS is not available in this kernel .*ip_vs/);
  else if (ipvsError) await assert.rejects(run, PreflightError);
  else await run;
});

class FakeProcess extends EventEmitter implements SignalSource {
  override on(signal: NodeJS.Signals, fn: () => void): this {
    return super.on(signal, fn);
  }
  override off(signal: NodeJS.Signals, fn: () => void): this {
    return super.off(signal, fn);
  }
}

test('lifecycle: SIGTERM stops in reverse order, failures and timeouts reported, second signal forces', async () => {
  const order: string[] = [];
  const lines: string[] = [];
  const lc = new Lifecycle({ log: createLogger({ format: 'json', write: (l) => lines.push(l) }), stepTimeoutMs: 50 });
  lc.onStop('informers', async () => void order.push('informers'));
  lc.onStop('runner', () => {
    order.push('runner');
    throw new Error('runner stuck');
  });
  lc.onStop('healthz', () => new Promise<void>(() => order.push('healthz'))); // never resolves
  lc.onStop('metrics', async () => void order.push('metrics'));
  const proc = new FakeProcess();
  const forced: string[] = [];
  const stopped = new Promise<import('../../src/daemon/lifecycle.js').StopReport>((resolve) => {
    lc.handleSignals({ source: proc, onStopped: resolve, onForce: (s) => forced.push(s) });
  });
  proc.emit('SIGTERM');
  proc.emit('SIGINT');
  const report = await stopped;
  assert.deepEqual(order, ['metrics', 'healthz', 'runner', 'informers']);
  assert.equal(report.reason, 'SIGTERM');
  assert.deepEqual(report.steps.map((s) => [s.name, s.ok, s.timedOut ?? false]), [
    ['metrics', true, false],
    ['healthz', false, true],
    ['runner', false, false],
    ['informers', true, false],
  ]);
  assert.match(String(report.steps[2]!.error), /runner stuck/);
  assert.deepEqual(forced, ['SIGINT']);
  assert.equal(await lc.stop('again'), report, 'idempotent');
  const msgs = lines.map((l) => JSON.parse(l).msg);
  // The second signal arrived synchronously after the first, before any step ran.
  assert.deepEqual(msgs, ['stopping; the data plane stays programmed', 'second signal while stopping: exiting now', 'stop step timed out', 'stop step failed', 'stopped']);
  assert.deepEqual(JSON.parse(lines.at(-1)!).failed, ['healthz', 'runner']);
  // a step that timed out may still be running: the process exits at once, with 1
  assert.equal(exitAfterStop(report, true), 1);
});

test('lifecycle: after a stop the daemon returns when every step ended, exits during startup, exits 1 past a hung step', () => {
  const ok = { reason: 'SIGTERM', steps: [{ name: 'runner', ok: true }] };
  const failed = { reason: 'SIGTERM', steps: [{ name: 'healthz', ok: false, error: new Error('x') }] };
  const hung = { reason: 'SIGTERM', steps: [{ name: 'sync thread', ok: false, timedOut: true }] };
  assert.equal(exitAfterStop(ok, true), undefined);
  assert.equal(exitAfterStop(failed, true), undefined, 'a step that failed has ended');
  assert.equal(exitAfterStop(ok, false), 0);
  assert.equal(exitAfterStop(hung, true), 1);
  assert.equal(exitAfterStop(hung, false), 1);
});

test('lifecycle: handlers are removed by the returned function', () => {
  const lc = new Lifecycle();
  const proc = new FakeProcess();
  const off = lc.handleSignals({ source: proc, onStopped: () => {} });
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) assert.equal(proc.listenerCount(sig), 1, sig);
  off();
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) assert.equal(proc.listenerCount(sig), 0, sig);
  assert.equal(lc.isStopping, false);
});

test('lifecycle: SIGHUP stops in order and says so, like SIGTERM', async () => {
  const lines: string[] = [];
  const lc = new Lifecycle({ log: createLogger({ format: 'json', write: (l) => lines.push(l) }) });
  const order: string[] = [];
  lc.onStop('informers', () => void order.push('informers'));
  lc.onStop('runner', () => void order.push('runner'));
  const proc = new FakeProcess();
  const stopped = new Promise<import('../../src/daemon/lifecycle.js').StopReport>((resolve) => lc.handleSignals({ source: proc, onStopped: resolve }));
  proc.emit('SIGHUP');
  const report = await stopped;
  assert.equal(report.reason, 'SIGHUP');
  assert.deepEqual(order, ['runner', 'informers']);
  assert.deepEqual(lines.map((l) => [JSON.parse(l).msg, JSON.parse(l).reason]), [
    ['stopping; the data plane stays programmed', 'SIGHUP'],
    ['stopped', 'SIGHUP'],
  ]);
});

test('lifecycle: a signal during startup stops what has started, cuts the pending wait short, and stops what starts late', async () => {
  const lc = new Lifecycle();
  const order: string[] = [];
  let releaseStep!: () => void;
  lc.onStop('sync thread', () => void order.push('sync thread'));
  // A step still stopping when startup, resumed, registers another one.
  lc.onStop('informers', () => new Promise<void>((r) => (releaseStep = () => (order.push('informers'), r()))));
  const proc = new FakeProcess();
  const stopped = new Promise<import('../../src/daemon/lifecycle.js').StopReport>((resolve) => lc.handleSignals({ source: proc, onStopped: resolve }));

  // Startup waits for its first list under until(); the list never completes before the signal.
  let listed!: (v: string) => void;
  let failLoad!: (e: Error) => void;
  const firstList = new Promise<string>((res) => (listed = res));
  const manifests = new Promise<string>((_res, rej) => (failLoad = rej));
  const afterList: string[] = [];
  const waiting = lc.until(firstList).then((v) => void afterList.push(v), (e: Error) => void afterList.push(`error ${e.message}`));
  void lc.until(manifests).then((v) => void afterList.push(v), (e: Error) => void afterList.push(`error ${e.message}`));
  // A wait already settled before the signal is delivered as usual.
  assert.equal(await lc.until(Promise.resolve('preflight')), 'preflight');

  proc.emit('SIGTERM');
  await new Promise((r) => setImmediate(r));
  lc.onStop('healthz', () => void order.push('healthz')); // started while stopping
  releaseStep();
  const report = await stopped;
  assert.deepEqual(order, ['informers', 'healthz', 'sync thread'], 'the late step runs in the same stop, before what started earlier');
  assert.deepEqual(report.steps.map((s) => s.name), ['informers', 'healthz', 'sync thread']);

  lc.onStop('metrics', () => void order.push('metrics')); // started after the stop ended
  await new Promise((r) => setImmediate(r));
  assert.equal(order.at(-1), 'metrics', 'run at once');

  // The interrupted wait goes no further, whatever its promise does now (a rejection included:
  // no unhandled rejection either).
  listed('listed');
  failLoad(new Error('informers stopped'));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(afterList, []);
  const never = Symbol('pending');
  assert.equal(await Promise.race([waiting.then(() => 'settled'), new Promise((r) => setImmediate(() => r(never)))]), never);
  await assert.rejects(new Lifecycle().until(Promise.reject(new Error('before any stop'))), /before any stop/);
});
