// The daemon (`ipvsync proxy`): its composition — configuration, logging, signals, the proxier
// on its sync thread, the runner, health and metrics servers, the object source — and nothing
// of kernel programming, which is the sync thread's.
import { readdirSync, statSync } from 'node:fs';
import { BadInputError } from '../errors.js';
import { REPORT_KINDS, reportWrites } from '../engine/types.js';
import { anyContains, parseCidr } from '../net/address.js';
import { Ipvs } from '../kernel/ipvs.js';
import { Links } from '../kernel/links.js';
import { affectsManifests } from '../kube/manifest-names.js';
import type { FolderLoad } from '../kube/manifests.js';
import type { InformerError, ResourceName } from '../kube/informers.js';
import { memoryPressure, type HandleOptions } from '../native.js';
import { nodeAddresses } from '../proxy/node-addresses.js';
import { ThreadedProxier } from '../proxy/sync-thread.js';
import { applySysctls, proxySysctls } from '../proxy/sysctl.js';
import { adoptEarlySignal } from './early-signals.js';
import { formatDuration, loadConfig, logLevel, modeSettings, nodeName, toProxierOptions, writeConfigTo } from './config.js';
import { FolderWatch } from './folder-watch.js';
import { HealthzServer, ProxierHealth, ServiceHealthServers } from './healthz.js';
import { exitAfterStop, Lifecycle, preflight, systemChecks } from './lifecycle.js';
import { createLogger } from './log.js';
import { ipFamiliesOf, MetricsServer, ProxyMetrics } from './metrics.js';
import { ReloadCoalescer, type ReloadStats } from './reload-coalescer.js';
import { fullSync, SyncRunner } from './runner.js';
import { logSyncFailure, NoticeLog, SyncOpsError } from './sync-log.js';

/** Runs the daemon until a signal stops it. `o`: the command's options (the configuration's
 *  flags, `config`, `writeConfigTo`, `manifests`, `glue`, `kubeProxyIpsets`). */
export async function runProxy(o: Record<string, unknown>, h: HandleOptions): Promise<void> {
  const { config: cfg, warnings } = loadConfig({ ...(typeof o.config === 'string' ? { file: o.config } : {}), flags: o });
  if (typeof o.writeConfigTo === 'string') {
    for (const w of warnings) console.error(`warning: ${w}`);
    await writeConfigTo(o.writeConfigTo, cfg);
    return;
  }
  // Bad input is refused first, as `sync -f` refuses a missing file (exit 2), before anything is
  // opened; the folder's contents are read (and watched) once the proxier runs.
  if (typeof o.manifests === 'string') {
    const problem = folderProblem(o.manifests);
    if (problem) throw new BadInputError(`--manifests ${o.manifests}: ${problem}`);
  }
  const log = createLogger({ level: logLevel(cfg), format: cfg.logging.format });
  for (const w of warnings) log.warn('config', { warning: w });
  log.debug('configuration', { config: cfg });
  // Signals first: one during startup stops what has started so far, and the process exits,
  // since the wait it interrupted (lc.until) never ends.
  const lc = new Lifecycle({ log });
  let started = false;
  const stopped = new Promise<void>((resolve) => {
    lc.handleSignals({
      onStopped: (r) => {
        log.info('stopped; the data plane stays in place', { ok: r.steps.every((x) => x.ok), duringStartup: !started });
        const code = exitAfterStop(r, started);
        if (code === undefined) resolve();
        else process.exit(code);
      },
      onForce: () => process.exit(1),
      // a signal that came while the command loaded: stop now, in order and logged
      caughtBefore: adoptEarlySignal,
    });
  });
  const nftMode = cfg.mode === 'nftables';
  // (nftables loaded here only in its mode: the proxier's modules are the sync thread's)
  await preflight(nftMode ? systemChecks(async () => (await import('../kernel/nftables.js')).Nftables.open(h), 'nftables') : systemChecks(() => Ipvs.open(h)));

  const glue = o.glue !== false;
  const kubeIpsets = o.kubeProxyIpsets === true;
  // The proxier runs on its own thread, which opens its own handles: this thread needs only
  // the links (the node's addresses) and, in IPVS mode, IPVS (its timeouts and counters).
  const ipvs = nftMode ? undefined : await Ipvs.open(h);
  const links = await Links.open(h);
  const addrs = cfg.nodeIPs.length ? cfg.nodeIPs : nodeAddresses(await links.addresses(), cfg.vipLink);
  const proxierOptions = toProxierOptions(cfg, { addresses: addrs, glue, kubeIpsets });
  const proxier = await lc.until(ThreadedProxier.start({ proxier: proxierOptions, kernel: { glue, mode: cfg.mode, handle: h } }));
  if (!h.netns) {
    for (const r of applySysctls(proxySysctls(cfg.ipvs.strictARP, cfg.ipvs.runEstimation, cfg.mode))) if (!r.ok) log.warn('sysctl', { ...r });
  }
  const timeouts = { tcp: cfg.ipvs.tcpTimeoutMs / 1000, tcpFin: cfg.ipvs.tcpFinTimeoutMs / 1000, udp: cfg.ipvs.udpTimeoutMs / 1000 };
  if (ipvs && (timeouts.tcp || timeouts.tcpFin || timeouts.udp)) {
    const set = Object.fromEntries(Object.entries(timeouts).filter(([, v]) => v > 0));
    await ipvs.setTimeouts(set);
  }

  const periods = modeSettings(cfg);
  const health = new ProxierHealth(2 * periods.syncPeriodMs);
  // The traffic counters, when asked for (ipvs.statsMetrics): one dump of every virtual server
  // (with its real servers for 'all') per scrape, on this thread's IPVS handle.
  const stats = cfg.ipvs.statsMetrics;
  let manifestLoads: ReloadStats = { loads: 0, failures: 0 };
  const metrics = new ProxyMetrics({
    runtime: true,
    mode: cfg.mode,
    ipFamilies: ipFamiliesOf(addrs),
    pending: () => proxier.pendingChanges,
    apiRequests: () => proxier.apiRequests,
    ...(ipvs && stats !== 'none' ? { ipvsStats: () => ipvs.services({ withDestinations: stats === 'all', stats: true }) } : {}),
    ...(typeof o.manifests === 'string' ? { manifestLoads: () => manifestLoads } : {}),
  });
  // As kube-proxy: on the node's addresses in nodePortAddresses when it is set, else on all.
  const nodePortCidrs = cfg.nodePortAddresses.map(parseCidr);
  const serviceHealth = new ServiceHealthServers({
    proxyHealth: health,
    ...(nodePortCidrs.length ? { addresses: addrs.filter((a) => anyContains(nodePortCidrs, a)) } : {}),
  });
  const notices = new NoticeLog(log);
  /** Reads the source again before a periodic resync (the manifests folder: its watch can miss
   *  a change, e.g. one written through a hard link elsewhere; informers need nothing). */
  let rereadSource: (() => Promise<void>) | undefined;
  const runner = new SyncRunner(
    async (trigger) => {
      if (trigger === 'periodic' && rereadSource) {
        await rereadSource();
        // (the re-read ends early at a stop: no sync after it)
        if (lc.isStopping) return;
      }
      const t0 = performance.now();
      const r = await proxier.sync(fullSync(trigger));
      // the whole sync as the daemon waited for it: the data plane's step, the engine's plan
      // and apply, and the sync thread's hand-over (report.durations: the engine's part)
      const ms = Math.round(performance.now() - t0);
      metrics.recordSyncResult(r);
      notices.update(r.summary.warnings, r.report.invalid);
      await serviceHealth.sync(r.summary.healthChecks);
      const writes = reportWrites(r.report);
      log.info('sync', { trigger, mode: r.report.mode, writes, errors: r.report.errors.length, ms });
      if (log.enabled('debug')) {
        const ops = Object.fromEntries(REPORT_KINDS.filter((k) => r.report[k].writes).map((k) => [k, r.report[k].ops]));
        log.debug('sync details', { trigger, full: fullSync(trigger), serviceChanges: r.serviceChanges, endpointChanges: r.endpointChanges, ops });
      }
      // logged by the runner's listener (logSyncFailure), with the retry
      if (r.report.errors.length) throw new SyncOpsError(r.report);
      health.updated();
    },
    { minIntervalMs: Math.max(periods.minSyncPeriodMs, 1), maxIntervalMs: periods.syncPeriodMs },
  );
  metrics.attachRunner(runner);
  runner.onSync(logSyncFailure(log));
  const request = () => {
    health.queuedUpdate();
    metrics.recordQueued();
    runner.request();
  };

  if (proxier.niceError) log.warn('sync thread runs at the daemon thread\'s priority', { error: proxier.niceError });
  // registered first, so it stops last (after the runner)
  lc.onStop('sync thread', () => proxier.close());
  // Every sync would fail from now on: exit, to be restarted, rather than serve a stale plane.
  void proxier.exited.then((e) => {
    log.error('sync thread ended; exiting', { error: e });
    process.exit(1);
  });
  if (cfg.healthzBindAddress) {
    const hz = new HealthzServer(health, { host: cfg.healthzBindAddress.host, port: cfg.healthzBindAddress.port, metrics });
    await hz.start();
    lc.onStop('healthz', () => hz.stop());
  }
  if (cfg.metricsBindAddress) {
    const ms = new MetricsServer(metrics, { host: cfg.metricsBindAddress.host, port: cfg.metricsBindAddress.port, proxyMode: cfg.mode });
    await ms.start();
    lc.onStop('metrics', () => ms.stop());
  }
  lc.onStop('service health servers', () => serviceHealth.sync([]).then(() => undefined));
  // Registered before the source's step: the source stops first, so nothing new is asked of
  // the runner while it waits for the sync under way.
  lc.onStop('runner', () => runner.stop());

  if (typeof o.manifests === 'string') {
    const dir = o.manifests;
    // The sync thread reads the folder itself: parsed here and posted, every object would be
    // held twice while it crossed (the parsed folder on this thread, its copy on that one).
    // Then this thread's own startup garbage is collected, before the first sync (the command
    // runs without V8's memory reducer, which collected this idle heap in the middle of syncs:
    // main.ts).
    const read = (): Promise<FolderLoad> => proxier.loadManifests(dir).then((l) => (memoryPressure('critical'), l));
    const notLoaded = (e: unknown) => log.warn('manifests not reloaded', { dir, error: e });
    const reloads = new ReloadCoalescer({
      load: () => read().then((l) => notices.manifests(l.warnings)),
      onChangeLoaded: request,
      onChangeFailed: notLoaded,
    });
    manifestLoads = reloads.stats;
    // Only names the reader reads: an atomic writer's temporary file is four events of its own.
    const watch = new FolderWatch(dir, { relevant: affectsManifests, onChange: () => reloads.changed(), onError: (e) => log.warn('manifests folder watch failed', { dir, error: e }) });
    lc.onStop('manifests watch', () => (reloads.stop(), watch.close()));
    // Watched before the first load: a change while it reads the folder is followed by another.
    watch.start();
    await lc.until(reloads.now());
    if (!statSync(dir).isDirectory() || readdirSync(dir).length === 0) log.warn('manifests folder is empty', { dir });
    rereadSource = () => {
      watch.recheck();
      return reloads.now().catch(notLoaded);
    };
  } else {
    // The same source and the same logging whether the informers run here or on the sync thread.
    const source = { ...(cfg.kubeconfig ? { kubeconfig: cfg.kubeconfig } : {}), ...(cfg.master ? { server: cfg.master } : {}) };
    const onError = (e: InformerError) => {
      metrics.recordInformerError(e.resource, e.reason);
      log.warn('informer', { resource: e.resource, reason: e.reason, error: e.error, retryInMs: e.retryInMs });
    };
    const onHandlerError = (resource: ResourceName, e: unknown) => log.error('informer handler failed', { resource, error: e });
    // The thread lists and watches the API itself: the objects go from the parsed answers
    // straight into its proxier, and this thread hears only of changes and of its Node.
    // Retries back off to half a sync period at most (within 5–30 s): an API server back after
    // an outage is listed again, and its changes synced, within about one sync period.
    const backoffMaxMs = Math.min(30_000, Math.max(5_000, periods.syncPeriodMs / 2));
    const informer = { ...(cfg.apiWatch.timeoutMs ? { watchTimeoutSeconds: cfg.apiWatch.timeoutMs / 1000 } : {}), watchSilenceLimitMs: cfg.apiWatch.silenceLimitMs, backoffMaxMs };
    const kube = await proxier.watchKube({ source, nodeName: nodeName(cfg), informer, onChange: request, onNode: (n) => health.syncNode(n), onError, onHandlerError });
    lc.onStop('informers', () => kube.stop());
    // Never program from an empty cache: wait for every first list. Then this thread's own
    // startup garbage is collected, before the first sync (as after a folder's load).
    await lc.until(kube.synced);
    memoryPressure('critical');
  }
  runner.start();
  started = true;
  log.info('proxy started', {
    mode: cfg.mode,
    node: proxierOptions.node.name,
    nodeAddresses: addrs,
    source: typeof o.manifests === 'string' ? `manifests ${o.manifests}` : 'kubernetes',
    // the mode's own section's, as kube-proxy reads them
    syncPeriod: formatDuration(periods.syncPeriodMs),
    minSyncPeriod: formatDuration(periods.minSyncPeriodMs),
    masqueradeAll: periods.masqueradeAll,
  });
  await stopped;
}

/** What keeps `dir` from being a manifests folder, if anything. */
function folderProblem(dir: string): string | undefined {
  try {
    return statSync(dir).isDirectory() ? undefined : 'not a folder';
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such folder' : (e as Error).message;
  }
}
