// Network programming latency under churn (issue 58): `ipvsync proxy --proxy-mode nftables
// --master URL` as deployed, on the machine's own kernel in a private network namespace, fed by
// the tests' fake API server (in this process), while EndpointSlices change at a steady rate:
//   node dist/bench/churn-latency.js [--sizes 10000,1000] [--min-sync 0s,1s] [--repeats 3]
//        [--updates 6000] [--rate 100] [--monitor] [--results-dir DIR] [--out-name churn-latency]
// A --min-sync entry may carry `/nice=N` (`1s/nice=0`): after the first sync every thread of the
// daemon is reniced to N, its sync thread (nice 5 by default) included — an experiment.
// Workload: S services × 10 endpoints (bench/lib/workload.ts). Per run, a fresh daemon: its first
// sync (its JSON log), then `--updates` changes at `--rate` per second on a fixed schedule, each a
// real endpoint change (bench/lib/slice-churn.ts: an address replaced, an endpoint not ready, or
// ready again) with the endpoints controller's last-change-trigger-time annotation set to the
// time of the change (RFC3339Nano). Then, once every change is programmed, /metrics:
//   kubeproxy_network_programming_duration_seconds — p50/p99 as histogram_quantile() computes
//     them (linear interpolation in the bucket; the bucket is given too), and the exact mean
//     (_sum / _count);
//   the syncs the daemon made meanwhile (by trigger, from its log) against the changes
//   (coalescing), its partial syncs' durations, its CPU (/proc, all threads), its RSS;
//   the driver's achieved rate and how late it sent against its schedule.
// Exact latencies besides the bucketed metric: the daemon runs with --v 4, whose "sync details"
// line says how many services' endpoints each sync took; the changes reach it in order (one watch)
// and each sync takes all that arrived, so the k-th change is in the sync where the running total
// passes k, and its latency is that sync's line's arrival minus the change's trigger time (the
// metric's own stamp is taken just before the line). With --monitor, a cross-check independent of
// the daemon: `nft monitor` in the namespace, each change timed from its trigger to the first
// kernel event that adds (or removes) its address. (Costly: nft caches the whole ruleset and
// decodes every event; at 10k it fell minutes behind and took ~40% of a core, so off by default.)
// Each configuration in a fresh daemon, configurations alternating, --repeats times; medians with
// min–max and the load average. Writes bench/results/churn-latency.json and .md (or --results-dir).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { FakeApiServer } from '../test/helpers/fake-apiserver.js';
import { CLI, NODE_ENV_VARS, NODE_FLAGS } from './lib/command-env.js';
import { serviceObject, sliceObject } from './lib/manifests.js';
import { median } from './lib/median.js';
import { delta, histogram, histogramQuantile, quantileBucket, sampleQuantile, value, type HistogramSeries } from './lib/prom-histogram.js';
import { SliceChurn } from './lib/slice-churn.js';
import { CLUSTER_CIDR, NODE_IP, NODE_NAME, workload } from './lib/workload.js';

const here = dirname(fileURLToPath(import.meta.url));
const { values: a } = parseArgs({
  options: {
    sizes: { type: 'string', default: '10000,1000' },
    'min-sync': { type: 'string', default: '0s,1s' },
    repeats: { type: 'string', default: '3' },
    updates: { type: 'string', default: '6000' },
    rate: { type: 'string', default: '100' },
    monitor: { type: 'boolean', default: false },
    'out-name': { type: 'string', default: 'churn-latency' },
    'results-dir': { type: 'string' },
    inner: { type: 'boolean', default: false },
  },
});

const RESULTS = a['results-dir'] ?? join(here, '..', '..', 'bench', 'results');

if (!a.inner) {
  // Every measurement in a namespace of its own making: nothing of the machine's is touched.
  const passed = process.argv.slice(2);
  const r = spawnSync('unshare', ['-n', 'bash', '-c', 'ip link set lo up && exec "$0" "$@"', process.execPath, fileURLToPath(import.meta.url), '--inner', ...passed], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

const METRICS_AT = '127.0.0.1:10249';
const NPL = 'kubeproxy_network_programming_duration_seconds';
const IPV4 = { ip_family: 'IPv4' };
const FIRST_SYNC_CAP_MS = 300_000;
/** After the last change: how long the daemon may take to program what is left. */
const DRAIN_CAP_MS = 60_000;

const quiet = (cmd: string, ...args: string[]) => void spawnSync(cmd, args);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
/** Wall clock in ms with sub-ms resolution (the trigger times and the monitor's arrivals). */
const wall = () => performance.timeOrigin + performance.now();
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').trim().split(' ').slice(0, 3).join(' ');
const ticks = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
/** A process's CPU seconds so far, all its threads (user + system). */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / ticks;
}
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
const scrape = async () => (await fetch(`http://${METRICS_AT}/metrics`)).text();

interface SyncLine {
  /** When its line arrived (wall ms). */
  at: number;
  trigger: string;
  ms: number;
  writes: number;
  errors: number;
  /** From the "sync details" line that follows it (--v 4). */
  endpointChanges?: number;
}

interface Quantiles {
  p50: number;
  p99: number;
  max?: number;
  mean: number;
  n: number;
}

interface Run {
  S: number;
  minSync: string;
  rep: number;
  loadStart: string;
  loadEnd: string;
  firstSyncMs: number;
  /** The driver: changes sent, their span, the rate achieved, lateness against the schedule. */
  driver: { updates: number; spanS: number; rate: number; lateP50Ms: number; lateP99Ms: number; lateMaxMs: number };
  /** kubeproxy_network_programming_duration_seconds over the churn (delta of two scrapes). */
  metric: { count: number; sumS: number; meanS: number; p50S: number; p99S: number; p50Bucket: [number, number] | undefined; p99Bucket: [number, number] | undefined; buckets: Array<[number, number]> };
  /** Each change's trigger → the end of the sync that took it (from the sync log), exact (s);
   *  `unassigned`: changes the syncs' counts did not reach (0 unless a count is off). */
  exact: Quantiles & { unassigned: number; syncedChanges: number };
  /** nft monitor: trigger → the kernel's event, exact (s); `unmatched`: changes never seen. */
  kernel?: Quantiles & { unmatched: number };
  syncs: { request: number; periodic: number; other: number; failed: number; changesPerPartialSync: number; partialMs: Quantiles; fullMs: number[] };
  /** Endpoint changes the daemon counted (kubeproxy_sync_proxy_rules_endpoint_changes_total). */
  endpointChanges: number;
  cpu: { seconds: number; wallS: number; percentOfOneCore: number };
  rssEndMb: number;
  warnings: string[];
}

function quantiles(xs: readonly number[]): Quantiles {
  return { p50: sampleQuantile(xs, 0.5), p99: sampleQuantile(xs, 0.99), max: xs.length ? Math.max(...xs) : NaN, mean: xs.reduce((s, x) => s + x, 0) / (xs.length || 1), n: xs.length };
}

/** `nft monitor` of element events, each line with its arrival time. */
function startMonitor(onLine: (line: string, at: number) => void): ChildProcess {
  // stdbuf: nft writes to a pipe through stdio, which would hold lines back in its buffer
  const m = spawn('stdbuf', ['-oL', 'nft', 'monitor', 'elements'], { stdio: ['ignore', 'pipe', 'ignore'] });
  createInterface({ input: m.stdout! }).on('line', (l) => onLine(l, wall()));
  return m;
}

async function runOnce(S: number, minSync: string, rep: number, updates: number, rate: number, monitor: boolean): Promise<Run> {
  quiet('nft', 'flush', 'ruleset');
  const w = workload(S);
  const api = await FakeApiServer.start();
  for (const s of w.services) api.create('services', serviceObject(s));
  for (const s of w.services) api.create('endpointslices', sliceObject(s));
  api.create('nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE_NAME } });
  const loadStart = loadavg();
  const [minSyncPeriod, option] = minSync.split('/');
  const renice = option?.startsWith('nice=') ? option.slice(5) : undefined;
  const args = [CLI, 'proxy', '--proxy-mode', 'nftables', '--master', api.url, '--hostname-override', NODE_NAME, '--node-ip', NODE_IP, '--cluster-cidr', CLUSTER_CIDR, '--iptables-min-sync-period', minSyncPeriod!, '--v', '4', '--healthz-bind-address', '127.0.0.1:0', '--metrics-bind-address', METRICS_AT, '--logging-format', 'json'];
  const t0 = wall();
  const daemon = spawn('env', [...NODE_ENV_VARS, process.execPath, ...NODE_FLAGS, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  const syncs: SyncLine[] = [];
  const warnings: string[] = [];
  let firstSync: (() => void) | undefined;
  const synced = new Promise<void>((resolve, reject) => {
    firstSync = resolve;
    daemon.once('exit', (code, sig) => reject(new Error(`daemon exited (${code ?? sig}) before its first sync: ${warnings.join(' | ')}`)));
    setTimeout(() => reject(new Error('no first sync')), FIRST_SYNC_CAP_MS).unref();
  });
  createInterface({ input: daemon.stderr! }).on('line', (l) => {
    const at = wall();
    let j: Record<string, unknown>;
    try {
      j = JSON.parse(l) as Record<string, unknown>;
    } catch {
      if (warnings.length < 20) warnings.push(l.slice(0, 300));
      return;
    }
    if (j.msg === 'sync') {
      syncs.push({ at, trigger: String(j.trigger), ms: Number(j.ms), writes: Number(j.writes), errors: Number(j.errors) });
      firstSync?.();
    } else if (j.msg === 'sync details') {
      const s = syncs.at(-1);
      if (s) s.endpointChanges = Number(j.endpointChanges);
    } else if (j.level === 'warn' || j.level === 'error') {
      if (warnings.length < 20) warnings.push(l.slice(0, 300));
    }
  });
  await synced;
  const firstSyncMs = wall() - t0;
  // an experiment (`--min-sync 0s/nice=0`): every thread of the daemon, the sync thread (nice 5
  // by default) included, to this nice value
  if (renice !== undefined) for (const tid of readdirSync(`/proc/${daemon.pid}/task`)) quiet('renice', '-n', renice, '-p', tid);
  // the first sync's garbage collected, its memory handed back: the steady state
  await sleep(3000);

  // the kernel's side: each change's address, added or removed, from its trigger time
  const pending = new Map<string, number>();
  const kernelLatencies: number[] = [];
  const mon = monitor
    ? startMonitor((line, at) => {
        const effect = line.startsWith('add element') ? 'add' : line.startsWith('delete element') ? 'delete' : undefined;
        if (!effect) return;
        for (const ip of line.match(/\b\d{1,3}(?:\.\d{1,3}){3}\b/g) ?? []) {
          const key = `${effect} ${ip}`;
          const t = pending.get(key);
          if (t === undefined) continue;
          pending.delete(key);
          kernelLatencies.push((at - t) / 1000);
        }
      })
    : undefined;
  if (mon) await sleep(500);

  const before = await scrape();
  const cpu0 = cpuSeconds(daemon.pid!);
  const churn = new SliceChurn(w);
  const period = 1000 / rate;
  const late: number[] = [];
  const triggers: number[] = [];
  const syncsBefore = syncs.length;
  const start = wall() + 20;
  let first = 0;
  let last = 0;
  for (let k = 0; k < updates; k++) {
    const due = start + k * period;
    const wait = due - wall();
    if (wait > 0) await sleep(wait);
    const now = wall();
    const c = churn.next(k, now);
    api.update('endpointslices', c.slice as never);
    if (mon) pending.set(`${c.effect} ${c.address}`, now);
    late.push(now - due);
    triggers.push(now);
    if (k === 0) first = now;
    last = now;
  }
  // every change programmed: the metric has counted them all (or the cap)
  const base = histogram(before, NPL, IPV4);
  let after = before;
  const drainEnd = wall() + DRAIN_CAP_MS;
  let allCounted: number | undefined;
  for (;;) {
    await sleep(250);
    after = await scrape();
    if (histogram(after, NPL, IPV4).count - base.count >= updates) allCounted ??= wall();
    // the monitor may lag the kernel: a few seconds more for it, no more
    if (allCounted !== undefined && (!mon || pending.size === 0 || wall() > allCounted + 10_000)) break;
    if (wall() > drainEnd) break;
  }
  const end = wall();
  const cpu1 = cpuSeconds(daemon.pid!);
  const rssEnd = rssMb(daemon.pid!);
  const loadEnd = loadavg();
  daemon.kill('SIGTERM');
  await new Promise((r) => daemon.once('exit', r));
  mon?.kill('SIGTERM');
  await api.stop();

  const h: HistogramSeries = delta(histogram(after, NPL, IPV4), base);
  // each change to the sync that took it, in order
  const exact: number[] = [];
  let k = 0;
  for (const s of syncs.slice(syncsBefore)) {
    for (let i = 0; i < (s.endpointChanges ?? 0) && k < triggers.length; i++, k++) exact.push((s.at - triggers[k]!) / 1000);
  }
  const syncedChanges = syncs.slice(syncsBefore).reduce((x, s) => x + (s.endpointChanges ?? 0), 0);
  const during = syncs.filter((s) => s.at >= first && s.at <= end);
  const partial = during.filter((s) => s.trigger === 'request');
  const hist = (name: string) => delta(histogram(after, name, IPV4), histogram(before, name, IPV4));
  const partialHist = hist('kubeproxy_sync_partial_proxy_rules_duration_seconds');
  const endpointChanges = value(after, 'kubeproxy_sync_proxy_rules_endpoint_changes_total') - value(before, 'kubeproxy_sync_proxy_rules_endpoint_changes_total');
  const spanS = (last - first) / 1000;
  return {
    S,
    minSync,
    rep,
    loadStart,
    loadEnd,
    firstSyncMs,
    driver: { updates, spanS, rate: (updates - 1) / spanS, lateP50Ms: sampleQuantile(late, 0.5), lateP99Ms: sampleQuantile(late, 0.99), lateMaxMs: Math.max(...late) },
    metric: {
      count: h.count,
      sumS: h.sum,
      meanS: h.sum / h.count,
      p50S: histogramQuantile(0.5, h.buckets),
      p99S: histogramQuantile(0.99, h.buckets),
      p50Bucket: quantileBucket(0.5, h.buckets),
      p99Bucket: quantileBucket(0.99, h.buckets),
      buckets: h.buckets.filter((b, i) => i === 0 || b.count !== h.buckets[i - 1]!.count).map((b) => [b.le, b.count]),
    },
    exact: { ...quantiles(exact), unassigned: triggers.length - exact.length, syncedChanges },
    ...(mon ? { kernel: { ...quantiles(kernelLatencies), unmatched: pending.size } } : {}),
    syncs: {
      request: partial.length,
      periodic: during.filter((s) => s.trigger === 'periodic').length,
      other: during.filter((s) => s.trigger !== 'request' && s.trigger !== 'periodic').length,
      failed: during.filter((s) => s.errors > 0).length,
      changesPerPartialSync: updates / (partialHist.count || partial.length || 1),
      partialMs: { ...quantiles(partial.map((s) => s.ms)), mean: (partialHist.sum / (partialHist.count || 1)) * 1000, n: partialHist.count },
      fullMs: during.filter((s) => s.trigger !== 'request').map((s) => s.ms),
    },
    endpointChanges,
    cpu: { seconds: cpu1 - cpu0, wallS: (end - first) / 1000, percentOfOneCore: ((cpu1 - cpu0) / ((end - first) / 1000)) * 100 },
    rssEndMb: rssEnd,
    warnings,
  };
}

// ---- the runs ----
const sizes = a.sizes!.split(',').map(Number);
const configs = a['min-sync']!.split(',');
const repeats = Number(a.repeats);
const updates = Number(a.updates);
const rate = Number(a.rate);
const monitor = a.monitor!;
const meta = {
  date: new Date().toISOString(),
  kernel: os.release(),
  cpu: os.cpus()[0]?.model ?? '?',
  nproc: os.cpus().length,
  node: process.version,
  nft: spawnSync('nft', ['--version'], { encoding: 'utf8' }).stdout.trim(),
  loadStart: loadavg(),
  updates,
  rate,
  monitor,
};
const runs: Run[] = [];
const fmtS = (s: number) => (s < 1 ? `${(s * 1000).toFixed(0)} ms` : `${s.toFixed(2)} s`);
for (const S of sizes) {
  for (let rep = 1; rep <= repeats; rep++) {
    for (const minSync of configs) {
      const r = await runOnce(S, minSync, rep, updates, rate, monitor);
      runs.push(r);
      console.log(
        `S=${S} minSync=${minSync} #${rep}: metric p50 ${fmtS(r.metric.p50S)} p99 ${fmtS(r.metric.p99S)} (buckets ${JSON.stringify(r.metric.p50Bucket)} ${JSON.stringify(r.metric.p99Bucket)}), mean ${fmtS(r.metric.meanS)}, n ${r.metric.count}` +
          (r.kernel ? `; kernel p50 ${fmtS(r.kernel.p50)} p99 ${fmtS(r.kernel.p99)} max ${fmtS(r.kernel.max!)} unmatched ${r.kernel.unmatched}` : '') +
          `; exact p50 ${fmtS(r.exact.p50)} p99 ${fmtS(r.exact.p99)} max ${fmtS(r.exact.max!)} (unassigned ${r.exact.unassigned}, synced ${r.exact.syncedChanges})` +
          `; syncs ${r.syncs.request} partial + ${r.syncs.periodic} periodic (${r.syncs.changesPerPartialSync.toFixed(1)} changes each), partial p50 ${r.syncs.partialMs.p50} ms p99 ${r.syncs.partialMs.p99} ms; CPU ${r.cpu.percentOfOneCore.toFixed(0)}%; rate ${r.driver.rate.toFixed(1)}/s (late p99 ${r.driver.lateP99Ms.toFixed(1)} ms); load ${r.loadStart} → ${r.loadEnd}` +
          (r.warnings.length ? `; warnings: ${r.warnings.length}` : ''),
      );
    }
  }
}
quiet('nft', 'flush', 'ruleset');

// ---- summary ----
interface Summary {
  S: number;
  minSync: string;
  runs: number;
  targetS: number;
  metricP50: number[];
  metricP99: number[];
  metricMean: number[];
  exactP50: number[];
  exactP99: number[];
  exactMax: number[];
  kernelP50: number[];
  kernelP99: number[];
  kernelMax: number[];
  partialSyncs: number[];
  changesPerPartialSync: number[];
  partialP50Ms: number[];
  partialP99Ms: number[];
  periodic: number[];
  cpuPercent: number[];
  rate: number[];
  lateP99Ms: number[];
  load: string[];
}
const seconds = (config: string) => {
  const x = config.split('/')[0]!;
  return x.endsWith('ms') ? Number(x.slice(0, -2)) / 1000 : x.endsWith('s') ? Number(x.slice(0, -1)) : Number(x);
};
const summaries: Summary[] = [];
for (const S of sizes)
  for (const minSync of configs) {
    const rs = runs.filter((r) => r.S === S && r.minSync === minSync);
    summaries.push({
      S,
      minSync,
      runs: rs.length,
      targetS: seconds(minSync) + 0.2,
      metricP50: rs.map((r) => r.metric.p50S),
      metricP99: rs.map((r) => r.metric.p99S),
      metricMean: rs.map((r) => r.metric.meanS),
      exactP50: rs.map((r) => r.exact.p50),
      exactP99: rs.map((r) => r.exact.p99),
      exactMax: rs.map((r) => r.exact.max!),
      kernelP50: rs.flatMap((r) => (r.kernel ? [r.kernel.p50] : [])),
      kernelP99: rs.flatMap((r) => (r.kernel ? [r.kernel.p99] : [])),
      kernelMax: rs.flatMap((r) => (r.kernel ? [r.kernel.max!] : [])),
      partialSyncs: rs.map((r) => r.syncs.request),
      changesPerPartialSync: rs.map((r) => r.syncs.changesPerPartialSync),
      partialP50Ms: rs.map((r) => r.syncs.partialMs.p50),
      partialP99Ms: rs.map((r) => r.syncs.partialMs.p99),
      periodic: rs.map((r) => r.syncs.periodic),
      cpuPercent: rs.map((r) => r.cpu.percentOfOneCore),
      rate: rs.map((r) => r.driver.rate),
      lateP99Ms: rs.map((r) => r.driver.lateP99Ms),
      load: rs.map((r) => `${r.loadStart} → ${r.loadEnd}`),
    });
  }

const out = a['out-name']!;
writeFileSync(join(RESULTS, `${out}.json`), JSON.stringify({ ...meta, loadEnd: loadavg(), summaries, runs }, null, 2) + '\n');

/** "median (min–max)" of a run's figures. */
const mm = (xs: readonly number[], f: (x: number) => string) => (xs.length ? `${f(median(xs))} (${f(Math.min(...xs))}–${f(Math.max(...xs))})` : '–');
const sec = (s: number) => (Number.isNaN(s) ? '–' : s < 1 ? `${(s * 1000).toFixed(0)} ms` : `${s.toFixed(2)} s`);
const met = (xs: readonly number[], target: number) => (xs.every((x) => x <= target) ? 'yes, every run' : xs.some((x) => x <= target) ? 'in some runs' : 'no');
const md = [
  `# Network programming latency under churn (${meta.kernel}, ${meta.nproc} × ${meta.cpu}, ${meta.date.slice(0, 10)})`,
  '',
  `\`node dist/bench/churn-latency.js --sizes ${a.sizes} --min-sync ${a['min-sync']} --repeats ${repeats} --updates ${updates} --rate ${rate}${monitor ? ' --monitor' : ''}\`: \`ipvsync proxy --proxy-mode nftables --master … --v 4\` (a fresh process per run) fed by the tests' fake API server, S services × 10 endpoints; after its first sync, ${updates} EndpointSlice changes at ${rate}/s on a fixed schedule, each annotated with its trigger time. Medians of ${repeats} runs (min–max), configurations alternating (S × 10 / minSyncPeriod …, repeated). Load average at the start: ${meta.loadStart}.`,
  '',
  '- `metric`: `kubeproxy_network_programming_duration_seconds{ip_family="IPv4"}` over the churn (the difference of two scrapes), p50/p99 as `histogram_quantile` computes them: linear within the bucket. kube-proxy\'s buckets are 0, 0.25, 0.5, 1, 2, 3 … s: every figure under 0.25 s is an interpolation, and the bucket is all the histogram knows. Its mean (`_sum / _count`) is exact.',
  '- `exact`: each change\'s latency from the trigger time to the end of the sync that took it (the daemon\'s sync log with its per-sync change counts; the metric stamps the same moment), not bucketed. The target is judged on it.',
  ...(monitor ? ['- `kernel`: `nft monitor` in the namespace, from the trigger time to the first kernel event adding (or removing) the change\'s address.'] : []),
  '',
  `| S × 10 | minSyncPeriod | target p99 | metric p50 | metric p99 | metric mean | exact p50 | exact p99 | exact max | target met (exact p99) |${monitor ? ' kernel p50 | kernel p99 |' : ''} partial syncs | changes per partial sync | partial sync p50 / p99 | periodic full syncs | daemon CPU (% of one core) | driver rate |`,
  `|---|---|---|---|---|---|---|---|---|---|${monitor ? '---|---|' : ''}---|---|---|---|---|---|`,
  ...summaries.map(
    (s) =>
      `| ${s.S / 1000}k | ${s.minSync} | ≤ ${sec(s.targetS)} | ${mm(s.metricP50, sec)} | ${mm(s.metricP99, sec)} | ${mm(s.metricMean, sec)} | ${mm(s.exactP50, sec)} | ${mm(s.exactP99, sec)} | ${mm(s.exactMax, sec)} | ${met(s.exactP99, s.targetS)} |${monitor ? ` ${mm(s.kernelP50, sec)} | ${mm(s.kernelP99, sec)} |` : ''} ${mm(s.partialSyncs, (x) => x.toFixed(0))} | ${mm(s.changesPerPartialSync, (x) => x.toFixed(1))} | ${mm(s.partialP50Ms, (x) => `${x.toFixed(0)}`)} / ${mm(s.partialP99Ms, (x) => `${x.toFixed(0)}`)} ms | ${mm(s.periodic, (x) => x.toFixed(0))} | ${mm(s.cpuPercent, (x) => `${x.toFixed(0)}%`)} | ${mm(s.rate, (x) => `${x.toFixed(1)}/s`)} |`,
  ),
  '',
  '## Runs',
  '',
  `| S | minSync | # | metric p50 [bucket] | metric p99 [bucket] | metric mean | n | exact p50 / p99 / max | changes the syncs counted |${monitor ? ' kernel p50 / p99 / max (unmatched) |' : ''} syncs: partial + periodic | partial sync ms p50 / p99 / max | periodic sync ms | daemon CPU | first sync | driver rate, late p99 / max | RSS at the end | load average, start → end |`,
  `|---|---|---|---|---|---|---|---|---|${monitor ? '---|' : ''}---|---|---|---|---|---|---|---|`,
  ...runs.map(
    (r) =>
      `| ${r.S} | ${r.minSync} | ${r.rep} | ${sec(r.metric.p50S)} [${r.metric.p50Bucket?.join(', ')}] | ${sec(r.metric.p99S)} [${r.metric.p99Bucket?.join(', ')}] | ${sec(r.metric.meanS)} | ${r.metric.count} | ${sec(r.exact.p50)} / ${sec(r.exact.p99)} / ${sec(r.exact.max!)} | ${r.exact.syncedChanges} |${monitor ? ` ${r.kernel ? `${sec(r.kernel.p50)} / ${sec(r.kernel.p99)} / ${sec(r.kernel.max!)} (${r.kernel.unmatched})` : '–'} |` : ''} ${r.syncs.request} + ${r.syncs.periodic} | ${r.syncs.partialMs.p50} / ${r.syncs.partialMs.p99} / ${r.syncs.partialMs.max} | ${r.syncs.fullMs.join(', ') || '–'} | ${r.cpu.percentOfOneCore.toFixed(0)}% | ${(r.firstSyncMs / 1000).toFixed(1)} s | ${r.driver.rate.toFixed(1)}/s, ${r.driver.lateP99Ms.toFixed(1)} / ${r.driver.lateMaxMs.toFixed(0)} ms | ${r.rssEndMb.toFixed(0)} MB | ${r.loadStart} → ${r.loadEnd} |`,
  ),
  '',
];
writeFileSync(join(RESULTS, `${out}.md`), md.join('\n'));
console.log(md.join('\n'));
