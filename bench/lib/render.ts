// The suite's outputs from its JSON: the markdown tables (times, ratios, targets met or not) and
// an SVG plot (full programming time vs S, log-log, one line per tool, one panel per kernel).
/* eslint-disable @typescript-eslint/no-explicit-any */

export interface Measure {
  ms: number;
  userMs?: number;
  sysMs?: number;
  maxRssMB?: number;
  timeout?: boolean;
  timeoutS?: number;
  skipped?: string;
  runs?: number[];
}

export type DaemonMeasure =
  | {
      peakMB: number;
      rssMB: number;
      laterMB: number;
      syncMs: number;
      watchS?: number;
      resyncs?: number;
      resyncMs?: number;
      watchMaxMB?: number;
      watchMinMB?: number;
      endPeakMB?: number;
    }
  | { error: string };

export interface SizeRow {
  services: number;
  endpoints: number;
  /** When its run started (its environment's date): the qemu phase keeps rows of other sizes
   *  from earlier runs, so one table may hold rows of several runs. */
  measuredAt?: string;
  error?: string;
  sizes: Record<string, number>;
  ipvsyncSyncProcess?: Measure;
  /** The daemon with its proxier in process (`ipvsync proxy --manifests`, the default until
   *  2026-11-27, `--no-sync-thread` since): peak and current RSS after its first full sync;
   *  then over watchS seconds (its periodic full resyncs): the highest and lowest RSS read each
   *  second, the peak (VmHWM) and RSS at the end. Rows of earlier runs have only laterMB (10 s
   *  after the first sync). */
  daemon?: DaemonMeasure;
  /** The same daemon reading the same objects from the API (`proxy --master`, the tests' fake
   *  API server in a process of its own). */
  daemonApi?: DaemonMeasure;
  /** The daemon from the manifests with its proxier on a thread of its own (`--sync-thread`). */
  daemonThread?: DaemonMeasure;
  /** The daemon from the API with the informers and the proxier on its sync thread
   *  (`proxy --master --sync-thread`). */
  daemonApiThread?: DaemonMeasure;
  worker?: any;
  /** The worker's full sync with bindMode route (one local route per service CIDR). */
  workerRoute?: any;
  /** The worker's full sync with the proxier on its sync thread (`--sync-thread --full-only`: the
   *  daemon's default); its event loop is the daemon's thread's. */
  workerThread?: any;
  peers: Record<string, Measure>;
}

export interface PhaseResult {
  environment: Record<string, any>;
  loadavgEnd: string;
  rows: SizeRow[];
}

export interface SuiteResult {
  date: string;
  hostUptime: string;
  hostUptimeEnd?: string;
  phases: { qemu?: PhaseResult; host?: PhaseResult };
}

const ok = (m: Measure | undefined): m is Measure => !!m && !m.timeout && !m.skipped && Number.isFinite(m.ms);

export function fmtMs(m: Measure | undefined): string {
  if (!m) return '–';
  if (m.timeout) return `timeout > ${Math.round(m.timeoutS!)} s`;
  if (m.skipped) return `not run (${m.skipped})`;
  return ms(m.ms);
}
function ms(x: number): string {
  if (!Number.isFinite(x)) return '–';
  if (x >= 10_000) return `${(x / 1000).toFixed(1)} s`;
  if (x >= 100) return `${x.toFixed(0)} ms`;
  if (x >= 1) return `${x.toFixed(1)} ms`;
  return `${x.toFixed(2)} ms`;
}
/** How many times faster ours is than the peer; where the peer hit the cap, a lower bound (the
 *  cap over ours). undefined: nothing to compare. */
function speedup(peer: Measure | undefined, ours: number | undefined): { x: number; lowerBound: boolean } | undefined {
  if (!peer || ours === undefined || !Number.isFinite(ours)) return undefined;
  if (peer.timeout) return { x: (peer.timeoutS! * 1000) / ours, lowerBound: true };
  return ok(peer) ? { x: peer.ms / ours, lowerBound: false } : undefined;
}
function ratio(peer: Measure | undefined, ours: number | undefined): string {
  const s = speedup(peer, ours);
  if (!s) return '–';
  return `${s.lowerBound ? '> ' : ''}${s.x >= 100 ? s.x.toFixed(0) : s.x.toFixed(1)}×`;
}
function sum(...ms: Array<Measure | undefined>): Measure | undefined {
  if (ms.some((m) => !m)) return undefined;
  // A capped part makes the sum a lower bound: the known times plus the caps.
  if (ms.some((m) => m!.timeout)) return { ms: NaN, timeout: true, timeoutS: ms.reduce((a, m) => a + (m!.timeout ? m!.timeoutS! : m!.ms / 1000), 0) };
  return { ms: ms.reduce((a, m) => a + m!.ms, 0) };
}
const k = (S: number) => (S >= 1000 ? `${S / 1000}k` : String(S));

function fullTable(p: PhaseResult, env: 'qemu' | 'host'): string[] {
  const out: string[] = [];
  if (env === 'qemu') {
    out.push(
      '| S × 10 | ipvsync `sync -f` (process) | in-process full sync | iptables-legacy-restore | iptables-nft-restore | ipvsadm -R + ipset restore | + ip -batch VIPs | nft -f (nftables mode) | legacy / ipvsync | nft-restore / ipvsync | ipvsadm+ipset / ipvsync | nft -f / ipvsync |',
      '|---|---|---|---|---|---|---|---|---|---|---|---|',
    );
    for (const r of p.rows) {
      if (r.error) {
        out.push(`| ${k(r.services)} | failed: ${r.error.slice(0, 80)} |||||||||||`);
        continue;
      }
      const ours = ok(r.ipvsyncSyncProcess) ? r.ipvsyncSyncProcess.ms : undefined;
      const ipvsMode = sum(r.peers['ipvsadm -R'], r.peers['ipset restore']);
      const ipvsModeVips = sum(r.peers['ipvsadm -R'], r.peers['ipset restore'], r.peers['ip -batch VIPs']);
      out.push(
        `| ${k(r.services)} | ${fmtMs(r.ipvsyncSyncProcess)} | ${r.worker?.full ? ms(r.worker.full.ms) : '–'} | ${fmtMs(r.peers['iptables-legacy-restore full'])} | ${fmtMs(r.peers['iptables-nft-restore full'])} | ${fmtMs(ipvsMode)} | ${fmtMs(ipvsModeVips)} | ${fmtMs(r.peers['nft -f'])} | ${ratio(r.peers['iptables-legacy-restore full'], ours)} | ${ratio(r.peers['iptables-nft-restore full'], ours)} | ${ratio(ipvsMode, ours)} | ${ratio(r.peers['nft -f'], ours)} |`,
      );
    }
  } else {
    out.push(
      '| S × 10 | ipvsync in-process full sync (VIPs + nftables glue in the kernel; IPVS in memory, each batch converted as for the kernel) | iptables-legacy-restore | iptables-nft-restore | ipset restore | ip -batch VIPs | nft -f (nftables mode) | legacy / ipvsync | nft -f / ipvsync |',
      '|---|---|---|---|---|---|---|---|---|',
    );
    for (const r of p.rows) {
      if (r.error) {
        out.push(`| ${k(r.services)} | failed: ${r.error.slice(0, 80)} ||||||||`);
        continue;
      }
      const ours = r.worker?.full?.ms as number | undefined;
      out.push(
        `| ${k(r.services)} | ${ours !== undefined ? ms(ours) : '–'} | ${fmtMs(r.peers['iptables-legacy-restore full'])} | ${fmtMs(r.peers['iptables-nft-restore full'])} | ${fmtMs(r.peers['ipset restore'])} | ${fmtMs(r.peers['ip -batch VIPs'])} | ${fmtMs(r.peers['nft -f'])} | ${ratio(r.peers['iptables-legacy-restore full'], ours)} | ${ratio(r.peers['nft -f'], ours)} |`,
      );
    }
  }
  return out;
}

/** The full sync with bindMode route (no /32 per VIP) next to address mode and the peers. */
function routeTable(p: PhaseResult): string[] {
  const rows = p.rows.filter((r) => !r.error && r.workerRoute?.full);
  if (!rows.length) return [];
  const out = [
    '| S × 10 | ipvsync full sync, bindMode route (messages) | same, bindMode address | event loop max (route) | iptables-legacy-restore | ipvsadm -R + ipset restore | legacy / route | ipvsadm+ipset / route |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const r of rows) {
    const f = r.workerRoute.full;
    const ipvsMode = sum(r.peers['ipvsadm -R'], r.peers['ipset restore']);
    out.push(
      `| ${k(r.services)} | ${ms(f.ms)} (${f.messages}) | ${r.worker?.full ? ms(r.worker.full.ms) : '–'} | ${f.eventLoop ? `${f.eventLoop.maxMs.toFixed(0)} ms` : '–'} | ${fmtMs(r.peers['iptables-legacy-restore full'])} | ${fmtMs(ipvsMode)} | ${ratio(r.peers['iptables-legacy-restore full'], f.ms)} | ${ratio(ipvsMode, f.ms)} |`,
    );
  }
  return out;
}

function changeTable(p: PhaseResult): string[] {
  const out = [
    '| S × 10 | ipvsync proxier incremental, right after the full sync (messages) | same, the loop idle before each change | ipvsync engine incremental, IPVS only (messages) | legacy full restore | legacy partial --noflush | nft-restore full | nft-restore partial | legacy full / engine | legacy partial / engine | legacy full / proxier | no-op resync in-process (messages) |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of p.rows) {
    if (r.error || !r.worker?.full) continue;
    const pr = r.worker.oneEndpointProxier;
    const idle = r.worker.oneEndpointProxierIdle;
    const en = r.worker.oneEndpointEngine;
    out.push(
      `| ${k(r.services)} | ${ms(pr.ms)} (${pr.messages}) | ${idle ? `${ms(idle.ms)} (${idle.messages})` : '–'} | ${ms(en.ms)} (${en.messages}) | ${fmtMs(r.peers['iptables-legacy-restore one endpoint, full'])} | ${fmtMs(r.peers['iptables-legacy-restore one endpoint, partial'])} | ${fmtMs(r.peers['iptables-nft-restore one endpoint, full'])} | ${fmtMs(r.peers['iptables-nft-restore one endpoint, partial'])} | ${ratio(r.peers['iptables-legacy-restore one endpoint, full'], en.ms)} | ${ratio(r.peers['iptables-legacy-restore one endpoint, partial'], en.ms)} | ${ratio(r.peers['iptables-legacy-restore one endpoint, full'], pr.ms)} | ${ms(r.worker.noop.ms)} (${r.worker.noop.messages}) |`,
    );
  }
  return out;
}

function whereTable(p: PhaseResult): string[] {
  const out = [
    '| S × 10 | manifests load | full sync | translate + desired (JS) | observe (dumps) | diff (JS) | apply (netlink) | CPU main thread user / sys | CPU other threads user / sys | of it the addon: main thread / pool user (netlink encode, decode) / pool sys (the kernel) | writes | messages (sendmsg) | netlink floor (messages × 3–6 µs) | event loop max / p99 (main thread’s run-queue wait) | longest GC pause: scavenge / mark-compact (pauses) | worker VmHWM | `sync -f` max RSS | iptables-legacy-restore max RSS |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
  ];
  for (const r of p.rows) {
    if (r.error || !r.worker?.full) continue;
    const f = r.worker.full;
    const t = f.cpu.threads;
    // absent in rows measured before the addon counted its CPU
    const a = f.cpu.addon as { jsThreadMs: number; poolUserMs: number; poolSysMs: number } | undefined;
    const addon = a ? `${a.jsThreadMs.toFixed(0)} / ${a.poolUserMs.toFixed(0)} / ${a.poolSysMs.toFixed(0)} ms` : '–';
    const floor = `${ms(f.messages * 0.003)}–${ms(f.messages * 0.006)}`;
    out.push(
      `| ${k(r.services)} | ${ms(r.worker.manifestsLoadMs)} | ${ms(f.ms)} | ${ms(f.translateMs)} | ${ms(f.observeMs)} | ${ms(f.diffMs)} | ${ms(f.applyMs)} | ${t.main.user.toFixed(0)} / ${t.main.sys.toFixed(0)} ms | ${t.others.user.toFixed(0)} / ${t.others.sys.toFixed(0)} ms | ${addon} | ${f.writes} | ${f.messages} (${f.sendmsg}) | ${floor} | ${f.eventLoop.maxMs.toFixed(0)} / ${f.eventLoop.p99Ms.toFixed(0)} ms${f.cpu.mainRunQueueWaitMs !== undefined ? ` (${f.cpu.mainRunQueueWaitMs.toFixed(0)} ms)` : ''} | ${f.gc ? `${f.gc.scavenge.maxMs.toFixed(0)} / ${f.gc.markCompact.maxMs.toFixed(0)} ms (${f.gc.scavenge.count} / ${f.gc.markCompact.count})` : '–'} | ${(r.worker.memory.afterFullSync.vmHWMkB / 1024).toFixed(0)} MB | ${r.ipvsyncSyncProcess?.maxRssMB !== undefined ? `${r.ipvsyncSyncProcess.maxRssMB.toFixed(0)} MB` : '–'} | ${r.peers['iptables-legacy-restore full']?.maxRssMB !== undefined ? `${r.peers['iptables-legacy-restore full']!.maxRssMB!.toFixed(0)} MB` : '–'} |`,
    );
  }
  return out;
}

function targets(res: SuiteResult): string[] {
  const q = res.phases.qemu;
  const out = ['| target (same run, same kernel) | measured | met |', '|---|---|---|'];
  const row = (S: number) => q?.rows.find((r) => r.services === S && !r.error);
  const r10 = row(10_000);
  const yes = (b: boolean | undefined) => (b === undefined ? 'not measured' : b ? 'yes' : '**no**');
  // ipvsync `target`× faster than the peer: a lower bound (the peer hit the cap) at or past the
  // target proves it met; below it, nothing.
  const faster = (peer: Measure | undefined, ours: number | undefined, target: number): string => {
    const s = ours !== undefined && ours > 0 ? speedup(peer, ours) : undefined;
    if (!s) return yes(undefined);
    if (s.lowerBound) return s.x >= target ? 'yes (a lower bound: the peer hit the cap)' : yes(undefined);
    return yes(s.x >= target);
  };
  const ours = ok(r10?.ipvsyncSyncProcess) ? r10!.ipvsyncSyncProcess!.ms : undefined;
  const leg = r10?.peers['iptables-legacy-restore full'];
  out.push(`| full programming 10k×10: ≥ 10× faster than iptables-legacy-restore (qemu) | ${ratio(leg, ours)} | ${faster(leg, ours, 10)} |`);
  const ipvsMode = r10 ? sum(r10.peers['ipvsadm -R'], r10.peers['ipset restore']) : undefined;
  out.push(`| full programming 10k×10: ≥ 5× faster than ipvsadm -R + ipset restore (qemu) | ${ratio(ipvsMode, ours)} | ${faster(ipvsMode, ours, 5)} |`);
  const inproc = r10?.worker?.full?.ms as number | undefined;
  out.push(`| same two, ipvsync's in-process full sync (no process start, no manifest parsing) | legacy ${ratio(leg, inproc)}, ipvsadm+ipset ${ratio(ipvsMode, inproc)} | ${faster(leg, inproc, 10)} / ${faster(ipvsMode, inproc, 5)} |`);
  const en = r10?.worker?.oneEndpointEngine?.ms as number | undefined;
  const pr = r10?.worker?.oneEndpointProxier?.ms as number | undefined;
  const legOne = r10?.peers['iptables-legacy-restore one endpoint, full'];
  out.push(`| one endpoint at 10k: ≥ 100× faster than a full iptables-restore — engine incremental path | ${ratio(legOne, en)} | ${faster(legOne, en, 100)} |`);
  out.push(`| same — the proxier's incremental sync (what the daemon runs on a slice update) | ${ratio(legOne, pr)} | ${faster(legOne, pr, 100)} |`);
  const msgs = (q?.rows ?? []).filter((r) => r.worker?.oneEndpointEngine).map((r) => `${k(r.services)}: ${r.worker.oneEndpointEngine.messages}`);
  const flat = (q?.rows ?? []).filter((r) => r.worker?.oneEndpointEngine).map((r) => r.worker.oneEndpointEngine.messages as number);
  out.push(`| one endpoint: flat in S (same message count) — engine incremental | ${msgs.join(', ')} | ${yes(flat.length > 1 ? new Set(flat).size === 1 : undefined)} |`);
  const pmsgs = (q?.rows ?? []).filter((r) => r.worker?.oneEndpointProxier).map((r) => r.worker.oneEndpointProxier.messages as number);
  out.push(`| same — proxier incremental sync | ${(q?.rows ?? []).filter((r) => r.worker?.oneEndpointProxier).map((r) => `${k(r.services)}: ${r.worker.oneEndpointProxier.messages}`).join(', ')} | ${yes(pmsgs.length > 1 ? new Set(pmsgs).size === 1 : undefined)} |`);
  const qIdle = flatInTime(q);
  if (qIdle) out.push(qIdle);
  const rss = r10?.ipvsyncSyncProcess?.maxRssMB;
  out.push(`| RSS at 10k×10 ≤ 150 MB (\`sync -f\` peak) | ${rss !== undefined ? `${rss.toFixed(0)} MB` : '–'} | ${yes(rss === undefined ? undefined : rss <= 150)} |`);
  const dm = r10?.daemon && 'peakMB' in r10.daemon ? r10.daemon : undefined;
  // A daemon watched through its periodic resyncs: its first sync's peak, then its peak and RSS
  // range over the watch; `what` names it, `close` ends the description.
  const watched = (what: string, d: Extract<DaemonMeasure, { peakMB: number }>, close: string) =>
    `| ${what}: peak through its first full sync; then over ${d.watchS} s with ${d.resyncs} periodic full resyncs: peak, and RSS between ${d.watchMinMB!.toFixed(0)} and ${d.watchMaxMB!.toFixed(0)} MB${close} | ${d.peakMB.toFixed(0)} MB; ${d.endPeakMB!.toFixed(0)} MB | ${yes(Math.max(d.peakMB, d.endPeakMB ?? 0, d.watchMaxMB ?? 0) <= 150)} |`;
  if (dm?.watchS !== undefined) {
    out.push(watched('RSS at 10k×10 ≤ 150 MB (the daemon in process, `proxy --manifests --no-sync-thread`', dm, ')'));
  } else {
    out.push(`| RSS at 10k×10 ≤ 150 MB (the daemon in process, \`proxy --manifests\`: peak through its first full sync; 10 s later) | ${dm ? `${dm.peakMB.toFixed(0)} MB; ${dm.laterMB.toFixed(0)} MB` : '–'} | ${yes(dm ? Math.max(dm.peakMB, dm.laterMB) <= 150 : undefined)} |`);
  }
  const da = r10?.daemonApi && 'peakMB' in r10.daemonApi ? r10.daemonApi : undefined;
  if (da) out.push(watched('same — the daemon from the API in process (`proxy --master --no-sync-thread`, a fake API server serving the same objects)', da, ''));
  const dt = r10?.daemonThread && 'peakMB' in r10.daemonThread ? r10.daemonThread : undefined;
  if (dt) out.push(watched('same — the daemon from the manifests, its proxier on a thread of its own (`--sync-thread`, the default)', dt, ''));
  const dat = r10?.daemonApiThread && 'peakMB' in r10.daemonApiThread ? r10.daemonApiThread : undefined;
  if (dat) out.push(watched('same — the daemon from the API, the informers and the proxier on its sync thread (`--master`, the default)', dat, ''));
  const loops = (q?.rows ?? []).filter((r) => r.worker?.full?.eventLoop).map((r) => r.worker.full.eventLoop.maxMs as number);
  // The longest GC pause beside it, where measured: a block of the loop no slicing can cut.
  const gcNote = (rows: SizeRow[]) => {
    const g = rows.filter((r) => r.worker?.full?.eventLoop && r.worker.full.gc).map((r) => `${k(r.services)}: ${Math.max(r.worker.full.gc.scavenge.maxMs, r.worker.full.gc.markCompact.maxMs).toFixed(0)} ms`);
    return g.length ? ` (the longest GC pause alone ${g.join(', ')})` : '';
  };
  out.push(`| event loop never blocked > 50 ms during a full sync (qemu), the proxier in process (\`--no-sync-thread\`) | max ${loops.map((x) => `${x.toFixed(0)} ms`).join(', ')}${gcNote(q?.rows ?? [])} | ${yes(loops.length ? loops.every((x) => x <= 50) : undefined)} |`);
  // The daemon's default: the daemon's thread's loop while its sync thread runs the full sync.
  const threadLoops = (q?.rows ?? []).filter((r) => r.workerThread?.full?.eventLoop);
  if (threadLoops.length) {
    const ms = threadLoops.map((r) => r.workerThread.full.eventLoop.maxMs as number);
    out.push(`| same, the proxier on its sync thread (the daemon's default) | max ${threadLoops.map((r) => `${k(r.services)}: ${(r.workerThread.full.eventLoop.maxMs as number).toFixed(0)} ms`).join(', ')} (full sync ${threadLoops.map((r) => `${k(r.services)}: ${((r.workerThread.full.ms as number) / 1000).toFixed(1)} s`).join(', ')}) | ${yes(ms.every((x) => x <= 50))} |`);
  }
  // The same targets at real speed (the host: no IPVS in that kernel, so ipvsync's IPVS part
  // runs in its in-memory double and its kernel time is not in these figures).
  const h = res.phases.host;
  const h10 = h?.rows.find((r) => r.services === 10_000 && !r.error);
  if (h10?.worker) {
    const hFull = h10.worker.full?.ms as number | undefined;
    const hLeg = h10.peers['iptables-legacy-restore full'];
    out.push(`| full programming 10k×10 ≥ 10× vs iptables-legacy-restore — host, IPVS in memory | ${ratio(hLeg, hFull)} | ${faster(hLeg, hFull, 10)} |`);
    const hRoute = h10.workerRoute?.full?.ms as number | undefined;
    if (hRoute !== undefined)
      out.push(`| same, bindMode route — host, IPVS in memory | ${ratio(hLeg, hRoute)} | ${faster(hLeg, hRoute, 10)} |`);
    const hOne = h10.peers['iptables-legacy-restore one endpoint, full'];
    const hPr = h10.worker.oneEndpointProxier?.ms as number | undefined;
    out.push(`| one endpoint at 10k ≥ 100× vs a full iptables-restore, proxier — host | ${ratio(hOne, hPr)} | ${faster(hOne, hPr, 100)} |`);
    // Flat in S up to the largest size run here (50k where it ran): the proxier's messages and time.
    const hOnes = (h?.rows ?? []).filter((r) => r.worker?.oneEndpointProxier);
    const hMsgs = hOnes.map((r) => r.worker.oneEndpointProxier.messages as number);
    out.push(`| one endpoint: flat in S (same message count; time) — proxier, host | ${hOnes.map((r) => `${k(r.services)}: ${r.worker.oneEndpointProxier.messages} (${(r.worker.oneEndpointProxier.ms as number).toFixed(1)} ms)`).join(', ')} | ${yes(hMsgs.length > 1 ? new Set(hMsgs).size === 1 : undefined)} |`);
    const hIdle = flatInTime(h);
    if (hIdle) out.push(hIdle);
    const hLoops = (h?.rows ?? []).filter((r) => r.worker?.full?.eventLoop).map((r) => `${k(r.services)}: ${(r.worker.full.eventLoop.maxMs as number).toFixed(0)} ms`);
    const hMax = (h?.rows ?? []).filter((r) => r.worker?.full?.eventLoop).map((r) => r.worker.full.eventLoop.maxMs as number);
    out.push(`| event loop never blocked > 50 ms during a full sync — host, the proxier in process (\`--no-sync-thread\`) | max ${hLoops.join(', ')}${gcNote(h?.rows ?? [])} | ${yes(hMax.length ? hMax.every((x) => x <= 50) : undefined)} |`);
    const hThread = (h?.rows ?? []).filter((r) => r.workerThread?.full?.eventLoop);
    if (hThread.length) {
      out.push(`| same — host, the proxier on its sync thread (the daemon's default) | max ${hThread.map((r) => `${k(r.services)}: ${(r.workerThread.full.eventLoop.maxMs as number).toFixed(0)} ms`).join(', ')} | ${yes(hThread.every((r) => (r.workerThread.full.eventLoop.maxMs as number) <= 50))} |`);
    }
    const hw = h10.worker.memory?.afterFullSync?.vmHWMkB as number | undefined;
    out.push(`| RSS at 10k×10 ≤ 150 MB — host worker peak after the full sync (incl. the IPVS double) | ${hw ? `${(hw / 1024).toFixed(0)} MB` : '–'} | ${yes(hw ? hw / 1024 <= 150 : undefined)} |`);
  }
  return out;
}

/** Flat in S in time: the proxier's one-endpoint sync with the loop idle before each change
 *  (the steady state: the samples right after a full sync carry the GC's finishing of the mark
 *  the full sync started), at the smallest and largest S of the phase — met when the largest's
 *  median is within twice the smallest's. undefined without such samples at two sizes. */
function flatInTime(p: PhaseResult | undefined): string | undefined {
  const rows = (p?.rows ?? []).filter((r) => !r.error && r.worker?.oneEndpointProxierIdle);
  if (rows.length < 2) return undefined;
  const t = (r: (typeof rows)[number]) => r.worker.oneEndpointProxierIdle.ms as number;
  const small = rows.reduce((a, b) => (b.services < a.services ? b : a));
  const large = rows.reduce((a, b) => (b.services > a.services ? b : a));
  const met = t(large) <= 2 * t(small);
  return `| one endpoint: flat in S in time — proxier, the loop idle before each change (median of ${rows[0]!.worker.oneEndpointProxierIdle.samplesMs?.length ?? '?'}; ${p!.environment.env}; met when the largest S is within 2× of the smallest) | ${rows.map((r) => `${k(r.services)}: ${ms(t(r))}`).join(', ')} (${k(large.services)} / ${k(small.services)}: ${(t(large) / t(small)).toFixed(2)}×) | ${met ? 'yes' : '**no**'} |`;
}

/** Peak RSS per S: `sync -f`, and the daemon (`ipvsync proxy`) from the manifests and from the
 *  API, in process and on its sync thread — each "through its first full sync / over the watch
 *  of its periodic resyncs after it". */
function memoryTable(p: PhaseResult): string[] {
  const rows = p.rows.filter((r) => r.daemon || r.daemonApi || r.daemonThread || r.daemonApiThread);
  if (!rows.length) return [];
  const cell = (d: DaemonMeasure | undefined): string => {
    if (!d) return '–';
    if (!('peakMB' in d)) return `error: ${d.error.slice(0, 80)}`;
    return `${d.peakMB.toFixed(0)} / ${Math.max(d.endPeakMB ?? d.peakMB, d.watchMaxMB ?? 0).toFixed(0)} MB`;
  };
  return [
    '| S × 10 | `sync -f` | daemon from manifests, in process (`--no-sync-thread`) | from the API, in process | from manifests, on its sync thread (the default) | from the API, on its sync thread |',
    '|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${k(r.services)} | ${r.ipvsyncSyncProcess?.maxRssMB !== undefined ? `${r.ipvsyncSyncProcess.maxRssMB.toFixed(0)} MB` : '–'} | ${cell(r.daemon)} | ${cell(r.daemonApi)} | ${cell(r.daemonThread)} | ${cell(r.daemonApiThread)} |`),
    '',
    'Each daemon cell: peak through its first full sync / peak over the watch of its periodic full resyncs after it.',
  ];
}

function envLine(p: PhaseResult): string {
  const e = p.environment;
  const line = `kernel ${e.kernel} (${e.env}${e.accel ? `, ${String(e.accel).toUpperCase()}` : ''}), ${e.cpu} × ${e.nproc}, ${e.memMB} MB, node ${e.node}; load average at start ${e.loadavg}, at end ${p.loadavgEnd}; ${Object.entries(e.tools as Record<string, string>).map(([k2, v]) => `${k2}: ${v}`).join('; ')}; ${e.date}`;
  const dates = new Set(p.rows.map((r) => r.measuredAt ?? e.date));
  if (dates.size < 2) return line;
  // rows of several runs: say which run each size is from (each run's own ratios hold)
  return `${line}. Rows from different runs (compare within a row): ${p.rows.map((r) => `${k(r.services)} ${r.measuredAt ?? e.date}`).join(', ')}`;
}

/** How the qemu phase's guest ran (its environment's accel; rows from before it was recorded: TCG). */
function accelName(p: PhaseResult): 'TCG' | 'KVM' {
  return p.environment.accel === 'kvm' ? 'KVM' : 'TCG';
}

export function renderMarkdown(res: SuiteResult): string {
  const out: string[] = [`# ipvsync benchmark suite — ${res.date}`, '', `Host: \`${res.hostUptime}\`${res.hostUptimeEnd ? ` → \`${res.hostUptimeEnd}\`` : ''}`, ''];
  if (res.phases.qemu) {
    const p = res.phases.qemu;
    out.push(
      accelName(p) === 'TCG'
        ? '## Same kernel, everything (Debian 6.1 under qemu TCG — absolute times ~10× slow and noisy: read the ratios)'
        : '## Same kernel, everything (Debian 6.1 under qemu with KVM)',
      '',
      envLine(p),
      '',
    );
    out.push('### Targets', '', ...targets(res), '');
    out.push('### Full programming (S services × 10 endpoints, empty kernel → programmed)', '', ...fullTable(p, 'qemu'), '');
    const rt = routeTable(p);
    if (rt.length) out.push('### Full programming with bindMode route (one local route per service CIDR instead of a /32 per VIP; in-process)', '', ...rt, '');
    out.push('### One endpoint changed, and a no-op resync', '', ...changeTable(p), '');
    out.push('### Where ipvsync\'s full sync goes (in-process worker)', '', ...whereTable(p), '');
    const mt = memoryTable(p);
    if (mt.length) out.push('### The daemon\'s memory (peak RSS, VmHWM)', '', ...mt, '');
  }
  const q = res.phases.qemu;
  const h = res.phases.host;
  if (q && h && accelName(q) === 'TCG') {
    // How much slower each side runs under TCG than on the host; a row kept from an earlier run
    // says which runs it compares (the host's own speed varies from hour to hour).
    const lines: string[] = [];
    for (const rq of q.rows) {
      const rh = h.rows.find((r) => r.services === rq.services);
      if (!rh || rq.error || rh.error) continue;
      const leg = (r: SizeRow) => r.peers['iptables-legacy-restore full'];
      const cpu = (r: SizeRow) => (r.worker?.full ? r.worker.full.cpu.threads.main.user : undefined);
      const parts: string[] = [];
      if (ok(leg(rq)) && ok(leg(rh))) parts.push(`iptables-legacy-restore ${(leg(rq)!.ms / leg(rh)!.ms).toFixed(0)}×`);
      if (cpu(rq) && cpu(rh)) parts.push(`ipvsync's main-thread CPU in the full sync ${(cpu(rq)! / cpu(rh)!).toFixed(0)}× (host: IPVS in memory)`);
      if (rq.worker?.manifestsLoadMs && rh.worker?.manifestsLoadMs) parts.push(`manifest loading ${(rq.worker.manifestsLoadMs / rh.worker.manifestsLoadMs).toFixed(0)}×`);
      const at = (r: SizeRow, ph: PhaseResult) => r.measuredAt ?? ph.environment.date;
      const apart = Math.abs(Date.parse(at(rq, q)) - Date.parse(at(rh, h))) > 3600e3;
      const when = apart ? ` (different runs: qemu ${at(rq, q).slice(0, 16).replace('T', ' ')}, host ${at(rh, h).slice(0, 16).replace('T', ' ')})` : '';
      if (parts.length) lines.push(`- ${k(rq.services)}: ${parts.join(', ')}${when}`);
    }
    if (lines.length) out.push('### qemu TCG / host slowdown', '', 'TCG emulates every instruction; JIT-compiled JavaScript suffers more than the C tools, so the qemu table is harder on ipvsync than real hardware would be:', '', ...lines, '');
  }
  if (res.phases.host) {
    const p = res.phases.host;
    out.push('## Real speed, no IPVS (the machine\'s own kernel, private netns; ipvsync\'s IPVS writes go to an in-memory double that converts each batch as the real handle does: the kernel\'s IPVS work is NOT included)', '', envLine(p), '');
    out.push('### Full programming', '', ...fullTable(p, 'host'), '');
    const rt = routeTable(p);
    if (rt.length) out.push('### Full programming with bindMode route (IPVS in memory)', '', ...rt, '');
    out.push('### One endpoint changed (ipvsync: VIPs + glue observed in the kernel; IPVS in memory, so the engine path sends 0 messages here — see the qemu table for its messages)', '', ...changeTable(p), '');
    out.push('### Where the time goes', '', ...whereTable(p), '');
  }
  return out.join('\n') + '\n';
}

// ---- SVG ----
export interface Series {
  name: string;
  color: string;
  points: Array<{ S: number; ms: number; timeout: boolean }>;
}

function series(p: PhaseResult, env: 'qemu' | 'host'): Series[] {
  const pick = (name: string, color: string, get: (r: SizeRow) => Measure | undefined): Series => ({
    name,
    color,
    points: p.rows.flatMap((r) => {
      const m = get(r);
      if (!m || m.skipped || (!m.timeout && !Number.isFinite(m.ms))) return [];
      return [{ S: r.services, ms: m.timeout ? m.timeoutS! * 1000 : m.ms, timeout: !!m.timeout }];
    }),
  });
  const out: Series[] = [];
  if (env === 'qemu') out.push(pick('ipvsync sync -f', '#d62728', (r) => r.ipvsyncSyncProcess));
  else out.push(pick('ipvsync (IPVS in memory)', '#d62728', (r) => (r.worker?.full ? { ms: r.worker.full.ms } : undefined)));
  out.push(pick('iptables-legacy-restore', '#1f77b4', (r) => r.peers['iptables-legacy-restore full']));
  out.push(pick('iptables-nft-restore', '#9467bd', (r) => r.peers['iptables-nft-restore full']));
  if (env === 'qemu') out.push(pick('ipvsadm -R + ipset restore', '#2ca02c', (r) => sum(r.peers['ipvsadm -R'], r.peers['ipset restore'])));
  out.push(pick('nft -f (nftables mode)', '#ff7f0e', (r) => r.peers['nft -f']));
  return out.filter((s) => s.points.length);
}

export function panel(title: string, ss: Series[], x0: number, W: number, H: number): string[] {
  const all = ss.flatMap((s) => s.points);
  if (!all.length) return [];
  const Ss = all.map((p) => p.S);
  const Ms = all.map((p) => p.ms);
  const lx0 = Math.log10(Math.min(...Ss)) - 0.05;
  const lx1 = Math.log10(Math.max(...Ss)) + 0.05;
  const ly0 = Math.floor(Math.log10(Math.min(...Ms)));
  const ly1 = Math.ceil(Math.log10(Math.max(...Ms)));
  const L = 60;
  const T = 40;
  const PW = W - L - 20;
  const PH = H - T - 120;
  const X = (S: number) => x0 + L + ((Math.log10(S) - lx0) / (lx1 - lx0)) * PW;
  const Y = (m: number) => T + PH - ((Math.log10(m) - ly0) / (ly1 - ly0 || 1)) * PH;
  const o: string[] = [`<text x="${x0 + L + PW / 2}" y="22" text-anchor="middle" font-weight="bold">${esc(title)}</text>`];
  o.push(`<rect x="${x0 + L}" y="${T}" width="${PW}" height="${PH}" fill="none" stroke="#888"/>`);
  for (let e = ly0; e <= ly1; e++) {
    const y = Y(10 ** e);
    o.push(`<line x1="${x0 + L}" x2="${x0 + L + PW}" y1="${y}" y2="${y}" stroke="#ddd"/>`, `<text x="${x0 + L - 6}" y="${y + 4}" text-anchor="end">${ms(10 ** e)}</text>`);
  }
  for (const S of [...new Set(Ss)].sort((p, q) => p - q)) o.push(`<text x="${X(S)}" y="${T + PH + 16}" text-anchor="middle">${k(S)}</text>`);
  o.push(`<text x="${x0 + L + PW / 2}" y="${T + PH + 34}" text-anchor="middle">services × 10 endpoints (log)</text>`);
  ss.forEach((s, i) => {
    const pts = s.points.sort((p, q) => p.S - q.S);
    o.push(`<polyline fill="none" stroke="${s.color}" stroke-width="2" points="${pts.map((p) => `${X(p.S).toFixed(1)},${Y(p.ms).toFixed(1)}`).join(' ')}"/>`);
    for (const p of pts) {
      o.push(
        p.timeout
          ? `<g><title>${esc(s.name)}: timeout &gt; ${ms(p.ms)}</title><path d="M${X(p.S) - 5},${Y(p.ms) + 4} L${X(p.S)},${Y(p.ms) - 5} L${X(p.S) + 5},${Y(p.ms) + 4} Z" fill="white" stroke="${s.color}" stroke-width="2"/></g>`
          : `<circle cx="${X(p.S)}" cy="${Y(p.ms)}" r="3.5" fill="${s.color}"><title>${esc(s.name)}: ${ms(p.ms)}</title></circle>`,
      );
    }
    const ly = T + PH + 52 + i * 14;
    o.push(`<line x1="${x0 + L}" x2="${x0 + L + 20}" y1="${ly - 4}" y2="${ly - 4}" stroke="${s.color}" stroke-width="2"/>`, `<text x="${x0 + L + 26}" y="${ly}">${esc(s.name)}</text>`);
  });
  return o;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function renderSvg(res: SuiteResult): string {
  const W = 480;
  const H = 420;
  const parts: string[] = [];
  let x = 0;
  if (res.phases.qemu) {
    parts.push(...panel(`Full programming, same kernel (qemu 6.1, ${accelName(res.phases.qemu)})`, series(res.phases.qemu, 'qemu'), x, W, H));
    x += W;
  }
  if (res.phases.host) {
    parts.push(...panel('Real speed, host 6.18 (no IPVS: ipvsync with IPVS in memory)', series(res.phases.host, 'host'), x, W, H));
    x += W;
  }
  return svgDocument(parts, x, H, res.date);
}

/** Panels (panel()) as one SVG document, with the legend of capped runs and the date. */
export function svgDocument(parts: string[], width: number, height: number, date: string): string {
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    ...parts,
    `<text x="6" y="${height - 6}" fill="#666">hollow triangle: the run hit the time cap (the real time is longer). ${esc(date)}</text>`,
    '</svg>',
    '',
  ].join('\n');
}
