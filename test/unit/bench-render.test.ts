// The suite's markdown names the run of each qemu row when the table holds rows of several runs
// (the qemu phase keeps rows of sizes it did not measure again).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderMarkdown, type SuiteResult } from '../../bench/lib/render.js';

const environment = { env: 'qemu', kernel: '6.1', cpu: 'TCG', nproc: 2, memMB: 3000, loadavg: '0', node: 'v20', tools: {}, date: '2026-11-25T12:58:41.564Z' };
const row = (services: number, measuredAt?: string) => ({ services, endpoints: services * 10, sizes: {}, peers: {}, ...(measuredAt ? { measuredAt } : {}) });
/** A worker's full sync of `ms`, and a step of the change table (median of 21 samples). */
const fullSync = (ms: number) => ({
  ms, translateMs: 400, observeMs: 50, diffMs: 150, applyMs: 1300, writes: 1, messages: 10, sendmsg: 2,
  cpu: { userMs: 1, sysMs: 1, threads: { main: { user: 1, sys: 1 }, others: { user: 1, sys: 1 } } }, eventLoop: { maxMs: 20, p99Ms: 5, meanMs: 1, samples: 9 },
});
const step = (ms: number, messages = 5) => ({ ms, messages, samplesMs: Array(21).fill(ms) });

test('the qemu environment line names each row’s run when the rows come from several runs, and only then', () => {
  const mixed: SuiteResult = { date: 'd', hostUptime: 'u', phases: { qemu: { environment, loadavgEnd: '1', rows: [row(1000, '2026-11-25T06:56:03.918Z'), row(10000, '2026-11-25T12:58:41.564Z')] } } };
  const md = renderMarkdown(mixed);
  assert.match(md, /Rows from different runs \(compare within a row\): 1k 2026-11-25T06:56:03\.918Z, 10k 2026-11-25T12:58:41\.564Z/);
  const one: SuiteResult = { date: 'd', hostUptime: 'u', phases: { qemu: { environment, loadavgEnd: '1', rows: [row(1000), row(10000, environment.date)] } } };
  assert.doesNotMatch(renderMarkdown(one), /Rows from different runs/);
});

test('the where-the-time-goes table shows the main thread’s run-queue wait beside the event loop when the worker measured it', () => {
  const threads = { main: { user: 1200, sys: 50 }, others: { user: 30, sys: 900 } };
  const one = { ms: 2.5, messages: 8 };
  // gc: the worker's GC pauses; qemu: a qemu phase too (the targets table comes with one)
  const res = (cpu: Record<string, unknown>, gc?: Record<string, unknown>, qemu = false): SuiteResult => ({
    date: 'd', hostUptime: 'u',
    phases: {
      ...(qemu ? { qemu: { environment, loadavgEnd: '1', rows: [row(10000)] } } : {}),
      host: {
        environment: { ...environment, env: 'host' }, loadavgEnd: '1',
        rows: [{
          ...row(10000),
          worker: {
            manifestsLoadMs: 900, oneEndpointProxier: one, oneEndpointEngine: one, noop: one, memory: { afterFullSync: { vmHWMkB: 150000, vmRSSkB: 1 } },
            full: {
              ms: 2300, translateMs: 400, observeMs: 50, diffMs: 150, applyMs: 1300, writes: 1, messages: 10, sendmsg: 2,
              cpu: { userMs: 1, sysMs: 1, threads, ...cpu }, eventLoop: { maxMs: 111.2, p99Ms: 40.4, meanMs: 12, samples: 900 }, ...(gc ? { gc } : {}),
            },
          },
        }],
      },
    },
  });
  assert.match(renderMarkdown(res({ mainRunQueueWaitMs: 512.6 })), /\| 111 \/ 40 ms \(513 ms\) \| – \|/);
  // the longest GC pauses beside it, when the worker observed them
  const gc = { scavenge: { maxMs: 88.6, count: 412, totalMs: 9000 }, markCompact: { maxMs: 61.2, count: 7, totalMs: 200 }, other: { maxMs: 1, count: 3, totalMs: 2 } };
  assert.match(renderMarkdown(res({}, gc)), /\| 111 \/ 40 ms \| 89 \/ 61 ms \(412 \/ 7\) \| 146 MB \|/);
  // and in the targets table, where the event loop's maximum is judged
  const targets = renderMarkdown(res({}, gc, true));
  assert.match(targets, /\| event loop never blocked > 50 ms during a full sync — host, the proxier in process \(`--no-sync-thread`\) \| max 10k: 111 ms \(the longest GC pause alone 10k: 89 ms\) \| \*\*no\*\* \|/);
  const without = renderMarkdown(res({}));
  assert.match(without, /\| 111 \/ 40 ms \|/);
  assert.doesNotMatch(without, /111 \/ 40 ms \(/);
});

test('the where-the-time-goes table shows the addon’s CPU (main thread / pool user / pool sys) when the worker counted it, a dash before', () => {
  const res = (addon?: Record<string, number>): SuiteResult => ({
    date: 'd', hostUptime: 'u',
    phases: {
      host: {
        environment: { ...environment, env: 'host' }, loadavgEnd: '1',
        rows: [{
          ...row(10000),
          worker: {
            manifestsLoadMs: 900, oneEndpointProxier: step(2), oneEndpointEngine: step(1), noop: step(50), memory: { afterFullSync: { vmHWMkB: 150000, vmRSSkB: 1 } },
            full: { ...fullSync(2300), cpu: { userMs: 1, sysMs: 1, threads: { main: { user: 1600, sys: 40 }, others: { user: 1500, sys: 1200 } }, ...(addon ? { addon } : {}) } },
          },
        }],
      },
    },
  });
  const md = renderMarkdown(res({ jsThreadMs: 212.4, jsThreadCalls: 900, poolUserMs: 95.6, poolSysMs: 1130.2, poolTasks: 410 }));
  assert.match(md, /\| 1600 \/ 40 ms \| 1500 \/ 1200 ms \| 212 \/ 96 \/ 1130 ms \| 1 \|/);
  assert.match(renderMarkdown(res()), /\| 1600 \/ 40 ms \| 1500 \/ 1200 ms \| – \| 1 \|/);
});

test('one endpoint after the loop was idle: a column of the change table, and flat in S in time judged from it', () => {
  const worker = (idleMs: number | undefined) => ({
    manifestsLoadMs: 900, full: fullSync(2300), oneEndpointProxier: step(9.8), oneEndpointEngine: step(1.1), noop: step(50),
    ...(idleMs !== undefined ? { oneEndpointProxierIdle: step(idleMs) } : {}),
    memory: { afterFullSync: { vmHWMkB: 150000, vmRSSkB: 1 } },
  });
  const res = (idle1k: number | undefined, idle50k: number | undefined): SuiteResult => ({
    date: 'd', hostUptime: 'u',
    // the targets table comes with a qemu phase (here one without a worker: its rows say nothing)
    phases: { qemu: { environment, loadavgEnd: '1', rows: [row(10000)] }, host: { environment: { ...environment, env: 'host' }, loadavgEnd: '1', rows: [{ ...row(1000), worker: worker(idle1k) }, { ...row(10000), worker: worker(undefined) }, { ...row(50000), worker: worker(idle50k) }] } },
  });
  const flat = renderMarkdown(res(1.8, 2.2));
  assert.match(flat, /\| 1k \| 9\.8 ms \(5\) \| 1\.8 ms \(5\) \| 1\.1 ms \(5\) \|/);
  assert.match(flat, /\| 10k \| 9\.8 ms \(5\) \| – \| 1\.1 ms \(5\) \|/);
  assert.match(flat, /flat in S in time — proxier, the loop idle before each change \(median of 21; host; [^|]*\) \| 1k: 1\.8 ms, 50k: 2\.2 ms \(50k \/ 1k: 1\.22×\) \| yes \|/);
  assert.match(renderMarkdown(res(1.8, 4.0)), /\(50k \/ 1k: 2\.22×\) \| \*\*no\*\* \|/);
  // one size alone proves nothing flat: no row
  assert.doesNotMatch(renderMarkdown(res(undefined, 2.2)), /flat in S in time/);
});

test('a target against a peer that hit the cap: met when the cap alone proves it, not measured when it does not', () => {
  const worker = { manifestsLoadMs: 900, full: fullSync(40_000), oneEndpointProxier: step(50, 13), oneEndpointEngine: step(30, 8), noop: step(500, 5), memory: { afterFullSync: { vmHWMkB: 150000, vmRSSkB: 1 } } };
  const res = (ipsetMs: number | 'cap', legacy: { ms: number; timeout?: boolean; timeoutS?: number }): SuiteResult => ({
    date: 'd', hostUptime: 'u',
    phases: {
      qemu: {
        environment, loadavgEnd: '1',
        rows: [{
          ...row(10000),
          peers: {
            'iptables-legacy-restore full': legacy,
            'ipvsadm -R': { ms: 118_000 },
            'ipset restore': ipsetMs === 'cap' ? { ms: 150_000, timeout: true, timeoutS: 150 } : { ms: ipsetMs },
          },
          ipvsyncSyncProcess: { ms: 60_000 },
          worker,
        }],
      },
    },
  });
  const line = (md: string, start: string) => md.split('\n').find((l) => l.startsWith(start))!;
  // 118 s + the 150 s cap = 268 s: > 5x the in-process 40 s (6.7x), not > 5x sync -f's 60 s (4.5x)
  const capped = renderMarkdown(res('cap', { ms: 105_000 }));
  assert.match(line(capped, '| same two, ipvsync'), /legacy 2\.6×, ipvsadm\+ipset > 6\.7× \| \*\*no\*\* \/ yes \(a lower bound: the peer hit the cap\) \|$/);
  assert.match(line(capped, '| full programming 10k×10: ≥ 5×'), /> 4\.5× \| not measured \|$/);
  // measured: the ratio decides either way
  const measured = renderMarkdown(res(200_000, { ms: 105_000 }));
  assert.match(line(measured, '| same two, ipvsync'), /\| \*\*no\*\* \/ yes \|$/);
  assert.match(line(measured, '| full programming 10k×10: ≥ 5×'), /5\.3× \| yes \|$/);
  // a capped legacy restore whose cap is below 10x ours proves nothing: not a "no"
  const legCapped = renderMarkdown(res(200_000, { ms: 150_000, timeout: true, timeoutS: 150 }));
  assert.match(line(legCapped, '| full programming 10k×10: ≥ 10×'), /> 2\.5× \| not measured \|$/);
});

test('the daemon’s memory: a table of peak RSS per S for sync -f and the daemon’s four variants, and a target row for each variant on its sync thread', () => {
  const d = (peakMB: number, endPeakMB: number, watchMaxMB: number) => ({ peakMB, rssMB: 100, laterMB: 100, syncMs: 9000, watchS: 75, resyncs: 3, watchMaxMB, watchMinMB: 110, endPeakMB });
  const res: SuiteResult = {
    date: 'd', hostUptime: 'u',
    phases: {
      qemu: {
        environment, loadavgEnd: '1',
        rows: [
          { ...row(1000), ipvsyncSyncProcess: { ms: 1, maxRssMB: 71.2 }, daemon: d(72, 72, 70), daemonApi: d(79, 80, 78), daemonThread: { error: 'no first sync: boom' } },
          { ...row(10000), ipvsyncSyncProcess: { ms: 1, maxRssMB: 139.4 }, daemon: d(138, 138, 130), daemonApi: d(143, 143, 142), daemonThread: d(147.2, 147.4, 146), daemonApiThread: d(150.4, 151.2, 149) },
        ],
      },
    },
  };
  const md = renderMarkdown(res);
  assert.match(md, /### The daemon's memory \(peak RSS, VmHWM\)/);
  assert.match(md, /\| S × 10 \| `sync -f` \| daemon from manifests, in process \(`--no-sync-thread`\) \| from the API, in process \| from manifests, on its sync thread \(the default\) \| from the API, on its sync thread \|/);
  assert.match(md, /\| 1k \| 71 MB \| 72 \/ 72 MB \| 79 \/ 80 MB \| error: no first sync: boom \| – \|/);
  assert.match(md, /\| 10k \| 139 MB \| 138 \/ 138 MB \| 143 \/ 143 MB \| 147 \/ 147 MB \| 150 \/ 151 MB \|/);
  // the targets: met on the thread from the manifests, not from the API (151 MB over the watch)
  assert.match(md, /\| same — the daemon from the manifests, its proxier on a thread of its own \(`--sync-thread`, the default\): peak through its first full sync; then over 75 s with 3 periodic full resyncs: peak, and RSS between 110 and 146 MB \| 147 MB; 147 MB \| yes \|/);
  assert.match(md, /\| same — the daemon from the API, the informers and the proxier on its sync thread \(`--master`, the default\): [^|]* \| 150 MB; 151 MB \| \*\*no\*\* \|/);
  // no daemon measured: no table
  assert.doesNotMatch(renderMarkdown({ date: 'd', hostUptime: 'u', phases: { qemu: { environment, loadavgEnd: '1', rows: [row(1000)] } } }), /The daemon's memory/);
});

test('the event-loop target on the sync thread (the daemon’s default): a row of its own when the suite ran the worker there', () => {
  const one = { ms: 2.5, messages: 8, samplesMs: [2.5] };
  const loop = (maxMs: number) => ({
    manifestsLoadMs: 900, oneEndpointProxier: one, oneEndpointEngine: one, noop: one, memory: { afterFullSync: { vmHWMkB: 150000, vmRSSkB: 1 } },
    full: { ...fullSync(9000), eventLoop: { maxMs, p99Ms: 5, meanMs: 1, samples: 9 } },
  });
  const res = (threadMs?: number[]): SuiteResult => ({
    date: 'd', hostUptime: 'u',
    phases: { qemu: { environment, loadavgEnd: '1', rows: [1000, 10000].map((S, i) => ({ ...row(S), worker: loop(150), ...(threadMs ? { workerThread: loop(threadMs[i]!) } : {}) })) } },
  });
  const md = renderMarkdown(res([12.4, 27.6]));
  assert.match(md, /\| event loop never blocked > 50 ms during a full sync \(qemu\), the proxier in process \(`--no-sync-thread`\) \| max 150 ms, 150 ms[^|]*\| \*\*no\*\* \|/);
  assert.match(md, /\| same, the proxier on its sync thread \(the daemon's default\) \| max 1k: 12 ms, 10k: 28 ms \(full sync 1k: 9\.0 s, 10k: 9\.0 s\) \| yes \|/);
  assert.match(renderMarkdown(res([12.4, 61])), /\| same, the proxier on its sync thread \(the daemon's default\) \| max 1k: 12 ms, 10k: 61 ms [^|]*\| \*\*no\*\* \|/);
  assert.doesNotMatch(renderMarkdown(res()), /on its sync thread \(the daemon's default\) \| max/);
});

test('the qemu heading, the plot and the slowdown section follow the guest’s accelerator (TCG when the run did not record one)', async () => {
  const { renderSvg } = await import('../../bench/lib/render.js');
  // a row with the legacy restore's time: a point in the plot, a line in the slowdown section
  const legacy = (services: number, ms: number) => ({ ...row(services, environment.date), peers: { 'iptables-legacy-restore full': { ms } } });
  const res = (accel?: string): SuiteResult => ({
    date: 'd', hostUptime: 'u',
    phases: {
      qemu: { environment: { ...environment, cpu: 'AMD EPYC', ...(accel ? { accel } : {}) }, loadavgEnd: '1', rows: [legacy(1000, 3070)] },
      host: { environment: { ...environment, env: 'host', cpu: 'AMD EPYC' }, loadavgEnd: '1', rows: [legacy(1000, 204)] },
    },
  });
  for (const r of [res(), res('tcg')]) {
    assert.match(renderMarkdown(r), /## Same kernel, everything \(Debian 6\.1 under qemu TCG/);
    assert.match(renderSvg(r), /qemu 6\.1, TCG/);
    assert.match(renderMarkdown(r), /### qemu TCG \/ host slowdown[^]*- 1k: iptables-legacy-restore 15×/);
  }
  const kvm = res('kvm');
  assert.match(renderMarkdown(kvm), /## Same kernel, everything \(Debian 6\.1 under qemu with KVM\)\n\nkernel 6\.1 \(qemu, KVM\), AMD EPYC × 2/);
  // no TCG heading, no slowdown section (KVM's guest runs at about the host's speed)
  assert.doesNotMatch(renderMarkdown(kvm), /TCG|slowdown/);
  assert.match(renderSvg(kvm), /qemu 6\.1, KVM/);
});
