// One benchmark process for ipvsync's proxy path, in-process figures: manifests → Proxier
// (the data plane's step → engine) → the kernel, as `ipvsync sync -f` / `proxy --manifests` run it.
//   node dist/bench/lib/proxy-worker.js --dir DIR [--fake-ipvs] [--link-exists]
// Steps: full sync (timed, event-loop delay monitored, CPU split by thread), no-op resync (full
// path), one endpoint changed through the proxier's incremental path (what the daemon does on an
// EndpointSlice update), another through the engine's incremental path with the IPVS services
// only (VIPs and glue untouched: what an endpoint-only change strictly needs) — before it, the
// proxier's step again with the loop idle before each change (the engine-only step leaves the
// engine's view of the services at its partial list, so the proxier's next sync walks them
// all). Messages counted by the sockets. Prints one line "@@WORKER {json}".
// --sync-thread (with --full-only): the full sync through ThreadedProxier, the proxier on a
// thread of its own as `proxy` runs it; the event-loop delay and GC pauses are
// then the daemon's thread's, the CPU split main (the daemon's thread) / others (the sync
// thread among them), and no socket counts (the handles are the sync thread's).
// --fake-ipvs: the in-memory IPVS (for kernels without IPVS: the host), converting every batch as
// the real handle does (packed, read and encoded by the addon on the main thread, the bytes
// dropped), so only the kernel's IPVS work is missing; everything else is real.
import { readFileSync, readdirSync } from 'node:fs';
import { constants as perfConstants, monitorEventLoopDelay, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import type { EngineKernel, SyncReport } from '../../src/engine/engine.js';
import { loadManifests } from '../../src/kube/manifests.js';
import { changedServices, translate } from '../../src/proxy/ipvs/plane.js';
import { Proxier, type ProxierOptions } from '../../src/proxy/proxier.js';
import { applySysctls, runEstimationSysctl } from '../../src/proxy/sysctl.js';
import { ThreadedProxier } from '../../src/proxy/sync-thread.js';
import { addonCpuUsage, memoryPressure, type AddonCpuUsage } from '../../src/native.js';
import { benchKernel } from './bench-kernel.js';
import { sliceObject } from './manifests.js';
import { medianBy } from './median.js';
import { CLUSTER_CIDR, NODE_IP, NODE_NAME, REPLACEMENT_IP, SERVICE_CIDR, withOneEndpointChanged, workload, changedIndex } from './workload.js';

// CPU per thread from /proc/self/task/*/stat: the main thread runs the JS (translate, diffs,
// N-API conversions); the other threads are libuv's pool (the addon's PromiseWorkers: netlink
// encode/send/receive/parse) and V8's helpers (GC, compiler). All threads are named "node", so
// the two kinds of helper threads cannot be told apart.
const CLK = 100; // USER_HZ

interface ThreadCpu {
  main: { user: number; sys: number };
  others: { user: number; sys: number };
}

function threadCpu(): ThreadCpu {
  const out: ThreadCpu = { main: { user: 0, sys: 0 }, others: { user: 0, sys: 0 } };
  for (const t of readdirSync('/proc/self/task')) {
    let f: string;
    try {
      f = readFileSync(`/proc/self/task/${t}/stat`, 'utf8');
    } catch {
      continue;
    }
    const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
    const user = (Number(fields[11]) * 1000) / CLK;
    const sys = (Number(fields[12]) * 1000) / CLK;
    const k = t === String(process.pid) ? 'main' : 'others';
    out[k].user += user;
    out[k].sys += sys;
  }
  return out;
}

/** The main thread's time waiting on a run queue (ns; schedstat's second field): the event loop
 *  held off by other threads on too few CPUs (the kernel adding VIPs on the addon's thread,
 *  V8's GC helpers), not by JavaScript. undefined where schedstat is missing. */
function runQueueWaitNs(): number | undefined {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[1]);
  } catch {
    return undefined;
  }
}

function cpuDelta(a: ThreadCpu, b: ThreadCpu): ThreadCpu {
  const d = (x: { user: number; sys: number }, y: { user: number; sys: number }) => ({ user: y.user - x.user, sys: y.sys - x.sys });
  return { main: d(a.main, b.main), others: d(a.others, b.others) };
}

/** The addon's CPU between two readings (addonCpuUsage), in ms: on the main thread (its calls and
 *  completions), and on the libuv pool, user (netlink encoding and decoding) and system (the
 *  kernel doing the work). The rest of each thread's time is V8's and node's. */
function addonDelta(a: AddonCpuUsage, b: AddonCpuUsage) {
  return {
    jsThreadMs: (b.jsThreadNs - a.jsThreadNs) / 1e6,
    jsThreadCalls: b.jsThreadCalls - a.jsThreadCalls,
    poolUserMs: (b.poolUserNs - a.poolUserNs) / 1e6,
    poolSysMs: (b.poolSysNs - a.poolSysNs) / 1e6,
    poolTasks: b.poolTasks - a.poolTasks,
  };
}

function status(): { vmHWMkB: number; vmRSSkB: number } {
  const s = readFileSync('/proc/self/status', 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(s)?.[1] ?? NaN);
  return { vmHWMkB: kb('VmHWM'), vmRSSkB: kb('VmRSS') };
}

const { values: o } = parseArgs({
  options: {
    dir: { type: 'string' },
    'fake-ipvs': { type: 'boolean', default: false },
    'sync-thread': { type: 'boolean', default: false },
    'bind-mode': { type: 'string', default: 'address' },
    'full-only': { type: 'boolean', default: false },
    // net.ipv4.vs.run_estimation in this process's network namespace before anything is synced
    // (0 or 1), as `proxy --[no-]ipvs-run-estimation` writes it
    'ipvs-run-estimation': { type: 'string' },
  },
});
if (o['ipvs-run-estimation'] !== undefined) {
  const v = o['ipvs-run-estimation'];
  if (v !== '0' && v !== '1') throw new Error('--ipvs-run-estimation 0|1');
  const [r] = applySysctls([runEstimationSysctl(v === '1')]);
  if (!r!.ok) throw new Error(`net.ipv4.vs.run_estimation: ${r!.error}`);
}
const bindMode = o['bind-mode'] === 'route' ? 'route' : 'address';
if (!o.dir) throw new Error('--dir required');
if (o['sync-thread'] && !o['full-only']) throw new Error('--sync-thread measures the full sync only: give --full-only');

const t0 = performance.now();
// Dropped once fed to the proxier, as `sync -f` and `proxy --manifests` drop them (the proxier
// keeps only what it reads of each object): held, they would be marked by every GC of the sync.
// With --sync-thread the thread reads the folder itself, as `proxy --manifests`.
let manifests: Awaited<ReturnType<typeof loadManifests>> | undefined = o['sync-thread'] ? undefined : await loadManifests([o.dir]);
let loadMs = performance.now() - t0;

const kernel: EngineKernel | undefined = o['sync-thread'] ? undefined : await benchKernel(!!o['fake-ipvs'], {}, { glue: true });
const handles = (kernel ? [kernel.ipvs, kernel.links, kernel.nft, kernel.conntrack] : []).filter((h): h is NonNullable<typeof h> & { socketStats(): { messagesSent: number; sendmsgCalls: number; recvmsgCalls: number } } =>
  typeof (h as { socketStats?: unknown }).socketStats === 'function',
);
const stats = () =>
  handles.reduce((a, h) => {
    const s = h.socketStats();
    return { messages: a.messages + s.messagesSent, sendmsg: a.sendmsg + s.sendmsgCalls, recvmsg: a.recvmsg + s.recvmsgCalls };
  }, { messages: 0, sendmsg: 0, recvmsg: 0 });

const proxierOptions: ProxierOptions = {
  node: { name: NODE_NAME, addresses: [NODE_IP] },
  config: { scheduler: 'rr', clusterCIDRs: [CLUSTER_CIDR] },
  vipLink: 'kube-ipvs0',
  glue: true,
  // route: one local route per service CIDR instead of a /32 per VIP (bindMode, docs/kube-proxy.md)
  bindMode,
  ...(bindMode === 'route' ? { serviceCidrs: [SERVICE_CIDR] } : {}),
};
const threaded = o['sync-thread']
  ? await ThreadedProxier.start({ proxier: proxierOptions, kernel: { glue: true }, kernelModule: new URL(`./bench-kernel.js${o['fake-ipvs'] ? '?fake-ipvs=1' : ''}`, import.meta.url).href })
  : undefined;
const local = threaded ? undefined : new Proxier(kernel!, proxierOptions);
const proxier = threaded ?? local!;
let S: number;
if (threaded) {
  // Read and taken in by the thread before the clock starts, as the in-process proxier has them.
  const t1 = performance.now();
  S = (await threaded.loadManifests(o.dir)).services;
  loadMs = performance.now() - t1;
  // As the daemon does (runProxy): this thread's startup garbage collected before the sync.
  memoryPressure('critical');
} else {
  S = manifests!.services.length;
  for (const s of manifests!.services) local!.onServiceUpdate(s);
  for (const s of manifests!.endpointSlices) local!.onSliceUpdate(s);
  manifests = undefined;
}
const beforeFull = status();

const writes = (r: SyncReport) => r.ipvs.writes + r.addresses.writes + r.nft.writes + r.ipsets.writes;

/** The GC pauses of the main thread while it runs (perf_hooks 'gc' entries: each one a pause,
 *  the incremental marking steps included): the longest of each kind, and their count and sum.
 *  A pause is one block of the event loop that no slicing of the JavaScript can cut. */
function gcPauses() {
  const entries: PerformanceEntry[] = [];
  const obs = new PerformanceObserver((l) => void entries.push(...l.getEntries()));
  obs.observe({ entryTypes: ['gc'] });
  return () => {
    entries.push(...obs.takeRecords());
    obs.disconnect();
    const out = { scavenge: { maxMs: 0, count: 0, totalMs: 0 }, markCompact: { maxMs: 0, count: 0, totalMs: 0 }, other: { maxMs: 0, count: 0, totalMs: 0 } };
    for (const e of entries) {
      const kind = ((e as unknown as { detail?: { kind?: number } }).detail)?.kind;
      const k = kind === perfConstants.NODE_PERFORMANCE_GC_MINOR ? out.scavenge : kind === perfConstants.NODE_PERFORMANCE_GC_MAJOR ? out.markCompact : out.other;
      k.maxMs = Math.max(k.maxMs, e.duration);
      k.count++;
      k.totalMs += e.duration;
    }
    return out;
  };
}

async function measure<T>(fn: () => Promise<T>, loop = false) {
  const h = loop ? monitorEventLoopDelay({ resolution: 1 }) : undefined;
  const gcEnd = loop ? gcPauses() : undefined;
  const c0 = threadCpu();
  const n0 = addonCpuUsage();
  const w0 = runQueueWaitNs();
  const u0 = process.cpuUsage();
  const s0 = stats();
  // The loop is watched over the sync alone, not over this function's own readings (a dozen
  // /proc files: tens of ms under qemu).
  h?.enable();
  const a = performance.now();
  const value = await fn();
  const ms = performance.now() - a;
  h?.disable();
  const s1 = stats();
  const u1 = process.cpuUsage(u0);
  const c1 = threadCpu();
  const n1 = addonCpuUsage();
  const w1 = runQueueWaitNs();
  const gc = gcEnd?.();
  return {
    value,
    ms,
    messages: s1.messages - s0.messages,
    sendmsg: s1.sendmsg - s0.sendmsg,
    recvmsg: s1.recvmsg - s0.recvmsg,
    cpu: { userMs: u1.user / 1000, sysMs: u1.system / 1000, threads: cpuDelta(c0, c1), addon: addonDelta(n0, n1), ...(w0 !== undefined && w1 !== undefined ? { mainRunQueueWaitMs: (w1 - w0) / 1e6 } : {}) },
    ...(h ? { eventLoop: { maxMs: h.max / 1e6, p99Ms: h.percentile(99) / 1e6, meanMs: h.mean / 1e6, samples: h.count } } : {}),
    ...(gc ? { gc } : {}),
  };
}

const step = (r: Awaited<ReturnType<typeof measure<{ report: SyncReport }>>>) => ({
  ms: r.ms,
  observeMs: r.value.report.durations.observeMs,
  diffMs: r.value.report.durations.diffMs,
  applyMs: r.value.report.durations.applyMs,
  // translate + desired state: the sync's time outside the engine
  translateMs: r.ms - r.value.report.durations.totalMs,
  writes: writes(r.value.report),
  ops: { ipvs: r.value.report.ipvs.writes, addresses: r.value.report.addresses.writes, nft: r.value.report.nft.writes },
  errors: r.value.report.errors.length,
  messages: r.messages,
  sendmsg: r.sendmsg,
  recvmsg: r.recvmsg,
  cpu: r.cpu,
  ...(r.eventLoop ? { eventLoop: r.eventLoop } : {}),
  ...(r.gc ? { gc: r.gc } : {}),
});

const full = await measure<{ report: SyncReport }>(() => proxier.sync(true), true);
if (full.value.report.errors.length) throw new Error(`full sync: ${full.value.report.errors[0]!.message}`);
const afterFull = status();
if (o['full-only']) {
  console.log('@@WORKER ' + JSON.stringify({ services: S, bindMode, syncThread: !!threaded, full: step(full), memory: { beforeFullSync: beforeFull, afterFullSync: afterFull } }));
  process.exit(0);
}
if (!(proxier instanceof Proxier)) throw new Error('unreachable: --sync-thread is full-only');
const noop = await measure(() => proxier.sync(true));
if (writes(noop.value.report) !== 0) throw new Error(`no-op resync wrote ${writes(noop.value.report)}`);

// One endpoint replaced (a pod rescheduled), through the proxier's incremental sync: SAMPLES
// changes of the same endpoint (the first is the peers' change, REPLACEMENT_IP; then other
// addresses), the median kept — one sample of a ~10–100 ms step under emulation is at the
// mercy of a GC or the host's scheduler (the engine's 20 ms at 10k read 88 ms in one run). 21,
// not 5: the first syncs after a full sync at 50k run while the mark the full sync's heap growth
// started finishes (~560 ms of steps at real speed); 5 samples read 1.2 ms in one host run and
// 8.8 ms in the next for the same code (samples 48.9, 18.1, 8.8, 8.0, 6.3 ms).
const SAMPLES = 21;
const w = workload(S);
const peersChange = withOneEndpointChanged(w).services[changedIndex(w)]!;
let changed = peersChange;
const incrSamples = [];
for (let k = 0; k < SAMPLES; k++) {
  changed = { ...peersChange, endpoints: peersChange.endpoints.map((e) => (e.ip === REPLACEMENT_IP ? { ...e, ip: `10.127.255.${1 + k}` } : e)) };
  proxier.onSliceUpdate(sliceObject(changed) as unknown as V1EndpointSlice);
  const r = await measure(() => proxier.sync(false));
  if (r.value.report.errors.length || r.value.report.ipvs.writes === 0) throw new Error(`incremental sync: ${JSON.stringify(r.value.report.ipvs)}`);
  incrSamples.push(r);
}
const incr = medianBy(incrSamples, (r) => r.ms);

// The same endpoint changed through the proxier again, each change arriving after the loop has
// been idle (IDLE_FIRST_MS before the first, IDLE_MS before each other; not timed): what a
// daemon sees once the full sync is behind it — the samples above run while the GC finishes the
// mark the full sync's heap growth started, which at 20k–50k services is most of their time.
const IDLE_FIRST_MS = 1000;
const IDLE_MS = 100;
const idleSamples = [];
await sleep(IDLE_FIRST_MS);
for (let k = 0; k < SAMPLES; k++) {
  if (k > 0) await sleep(IDLE_MS);
  changed = { ...peersChange, endpoints: peersChange.endpoints.map((e) => (e.ip === REPLACEMENT_IP ? { ...e, ip: `10.127.253.${1 + k}` } : e)) };
  proxier.onSliceUpdate(sliceObject(changed) as unknown as V1EndpointSlice);
  const r = await measure(() => proxier.sync(false));
  if (r.value.report.errors.length || r.value.report.ipvs.writes === 0) throw new Error(`incremental sync after idle: ${JSON.stringify(r.value.report.ipvs)}`);
  idleSamples.push(r);
}
const idle = medianBy(idleSamples, (r) => r.ms);

// Another endpoint changed, through the engine's incremental path with the IPVS services only
// (what changed found by translating the changed service alone, before and after).
const engineSamples = [];
const name = `${peersChange.namespace}/${peersChange.name}`;
const modelOf = () => translate({ services: [proxier.services.get(name)!], endpointSlices: proxier.slices.members(name), node: proxier.node, config: proxierOptions.config });
for (let k = 0; k < SAMPLES; k++) {
  const before = modelOf();
  const changed2 = { ...changed, endpoints: changed.endpoints.map((e, i) => (i === 1 ? { ...e, ip: `10.127.254.${1 + k}` } : e)) };
  proxier.onSliceUpdate(sliceObject(changed2) as unknown as V1EndpointSlice);
  const model = modelOf();
  const services = changedServices(before.services, model.services);
  // the services alone, with what changed
  const r = await measure(() => proxier.engine.sync({ services: model.services }, { services }));
  if (r.value.errors.length || r.value.ipvs.writes === 0) throw new Error('engine incremental sync failed');
  engineSamples.push({ ...r, scope: services.size });
}
const engineIncr = medianBy(engineSamples, (r) => r.ms);

const fullModel = (full.value as Awaited<ReturnType<Proxier['sync']>>).model!;
const result = {
  services: S,
  virtualServers: fullModel.services.length,
  destinations: fullModel.services.reduce((n, s) => n + s.destinations.length, 0),
  fakeIpvs: o['fake-ipvs'],
  manifestsLoadMs: loadMs,
  full: step(full),
  noop: step(noop),
  oneEndpointProxier: { ...step(incr), samplesMs: incrSamples.map((r) => r.ms) },
  oneEndpointProxierIdle: { ...step(idle), samplesMs: idleSamples.map((r) => r.ms), idleFirstMs: IDLE_FIRST_MS, idleMs: IDLE_MS },
  oneEndpointEngine: {
    ms: engineIncr.ms,
    samplesMs: engineSamples.map((r) => r.ms),
    writes: writes(engineIncr.value),
    messages: engineIncr.messages,
    sendmsg: engineIncr.sendmsg,
    scope: engineIncr.scope,
    observeMs: engineIncr.value.durations.observeMs,
    applyMs: engineIncr.value.durations.applyMs,
  },
  memory: { afterFullSync: afterFull, end: status() },
};
console.log('@@WORKER ' + JSON.stringify(result));
process.exit(0);
