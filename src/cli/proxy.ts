// `ipvsync sync`, `ipvsync proxy`, `ipvsync cleanup`: the service proxy from the command line.
import { readdirSync, statSync, watch } from 'node:fs';
import { Option, type Command } from 'commander';
import { NetlinkError } from '../errors.js';
import { anyContains, parseCidr } from '../net/address.js';
import { Ipvs } from '../kernel/ipvs.js';
import { Links } from '../kernel/links.js';
import type { FolderLoad, ManifestSet, ManifestWarning } from '../kube/manifests.js';
import { memoryPressure, type HandleOptions } from '../native.js';
import { nodeAddresses } from '../proxy/node-addresses.js';
import { ThreadedProxier } from '../proxy/sync-thread.js';
import type { InformerError, ResourceName } from '../kube/informers.js';
import { applySysctls, proxySysctls } from '../proxy/sysctl.js';
import { SyncRunner } from '../engine/runner.js';
import { CONFIG_FLAGS, loadConfig, nodeName, toProxierOptions, writeConfigTo, type FlagSpec } from '../daemon/config.js';
import { HealthzServer, ProxierHealth, ServiceHealthServers } from '../daemon/healthz.js';
import { Lifecycle, preflight, systemChecks } from '../daemon/lifecycle.js';
import { createLogger } from '../daemon/log.js';
import { MetricsServer, ProxyMetrics } from '../daemon/metrics.js';
import { logSyncFailure, NoticeLog, SyncOpsError } from '../daemon/sync-log.js';
import type { CleanupResult } from '../proxy/cleanup.js';
import { KUBE_IPSET_PREFIX } from '../proxy/ipvs/kube-ipsets.js';

// The proxier, the engine, the manifests reader and the nftables and route handles are loaded
// when a command needs them: with the proxier on its sync thread (which loads its own), the
// daemon's thread never does (~2 MB of resident memory per thread that loads them).
const proxierModule = () => import('../proxy/proxier.js');

function list(v: string, prev: string[] = []): string[] {
  return [...prev, ...v.split(',').map((x) => x.trim()).filter(Boolean)];
}

interface SyncOpts {
  file: string[];
  glue: boolean;
  kubeProxyIpsets?: boolean;
  sysctl: boolean;
  dryRun?: boolean;
  json?: boolean;
}

/** The configuration's flags (`fields`: every one for `proxy`, those marked for `sync`), then
 *  the options both commands have that are not configuration. */
function configOptions(cmd: Command, fields: readonly FlagSpec[]): Command {
  for (const f of fields) {
    const flags = `--${f.flag}${f.kind.arg ? ` ${f.kind.arg}` : ''}`;
    const help = f.alias ? `${f.help}; also --${f.alias}` : f.help;
    if (f.kind.list) cmd.option(flags, help, list);
    else cmd.option(flags, help);
    if (f.alias) cmd.addOption(new Option(flags.replace(f.flag, f.alias)).hideHelp());
    if (f.negatedHelp) cmd.option(`--no-${f.flag}`, f.negatedHelp);
  }
  return cmd
    .option('--no-glue', 'do not program the nftables glue (masquerade, hairpin, source ranges)')
    .option('--kube-proxy-ipsets', "also maintain kube-proxy's ipsets (KUBE-CLUSTER-IP …) for iptables rules that reference them");
}

/** `ipvsync sync`, `proxy`, `cleanup` */
export function registerProxy(program: Command, handleOptions: () => HandleOptions): void {
  configOptions(
    program
      .command('sync')
      .description('program the kernel once from Service/EndpointSlice/Endpoints manifests (kube-proxy IPVS semantics)')
      .requiredOption('-f, --file <path...>', 'YAML/JSON manifest files or folders'),
    CONFIG_FLAGS.filter((f) => f.sync),
  )
    .option('--no-sysctl', 'do not set the IPVS sysctls kube-proxy sets')
    .option('--dry-run', 'print the writes it would make and change nothing')
    .option('--json', 'machine-readable output')
    .action(async (o: SyncOpts) => {
      const h = handleOptions();
      // The proxy's configuration from the flags: every value checked (CIDRs with host bits
      // cleared, with a warning) and refused before anything is read or opened.
      const { config: cfg, warnings } = loadConfig({ flags: { ...o } });
      for (const w of warnings) console.error(`warning: ${w}`);
      const [{ loadManifests }, { openKernel }, { Proxier, describePlan }, { planWrites }] = await Promise.all([
        import('../kube/manifests.js'),
        import('../proxy/kernel.js'),
        proxierModule(),
        import('../engine/engine.js'),
      ]);
      // Read first (a bad manifest fails before anything is opened); dropped once fed: the
      // proxier keeps only what it reads of each object.
      let manifests: ManifestSet | undefined = await loadManifests(o.file);
      const manifestWarnings = manifests.warnings;
      const kernel = await openKernel(h, { glue: o.glue });
      const addrs = cfg.nodeIPs.length ? cfg.nodeIPs : nodeAddresses(await kernel.links!.addresses(), cfg.vipLink);
      const proxier = new Proxier(kernel, toProxierOptions(cfg, { addresses: addrs, glue: o.glue, kubeIpsets: !!o.kubeProxyIpsets }));
      for (const s of manifests.services) proxier.onServiceUpdate(s);
      for (const s of manifests.endpointSlices) proxier.onSliceUpdate(s);
      manifests = undefined;

      if (o.dryRun) {
        const { plan, model } = await proxier.plan(true);
        if (o.json) {
          console.log(JSON.stringify({ ops: planWrites(plan), warnings: model.warnings, manifestWarnings }, null, 2));
        } else {
          const lines = describePlan(plan);
          for (const l of lines) console.log(l);
          console.log(`# ${lines.length} write(s) planned; nothing changed`);
          printManifestWarnings(manifestWarnings);
          for (const w of model.warnings) console.error(`warning: ${JSON.stringify(w)}`);
        }
        return;
      }
      const sysctls = o.sysctl && !h.netns ? applySysctls(proxySysctls(false)) : [];
      let synced: Awaited<ReturnType<typeof proxier.sync>>;
      try {
        synced = await proxier.sync(true);
      } catch (e) {
        // The sync stopped before it had a model to report: the translation's warnings may say
        // which object it was (a value it let through that the kernel layer refused).
        printManifestWarnings(manifestWarnings);
        for (const w of proxier.model().warnings) console.error(`warning: ${JSON.stringify(w)}`);
        throw e;
      }
      const { report, model } = synced;
      if (o.json) {
        console.log(JSON.stringify({ report: { ...report, errors: report.errors.map(errJson) }, sysctls, warnings: model.warnings, manifestWarnings }, null, 2));
      } else {
        const kinds = (['addresses', 'routes', 'ipsets', 'nft', 'ipvs'] as const).filter((k) => report[k].writes > 0);
        console.log(
          `synced ${model.services.length} virtual services, ${model.vips.length} VIPs: ` +
            (kinds.length ? kinds.map((k) => `${k} ${JSON.stringify(report[k].ops)}`).join(', ') : 'nothing to change') +
            ` (${report.durations.totalMs.toFixed(1)} ms)`,
        );
        for (const s of sysctls.filter((x) => !x.ok)) console.error(`warning: sysctl ${s.name}=${s.value}: ${s.error}`);
        printManifestWarnings(manifestWarnings);
        for (const w of model.warnings) console.error(`warning: ${JSON.stringify(w)}`);
        for (const i of report.invalid) console.error(`refused: ${JSON.stringify(i)}`);
        for (const e of report.errors) console.error(`error: ${e.message}`);
      }
      if (report.errors.length) process.exitCode = 1;
    });

  configOptions(
    program
      .command('proxy')
      .description('run the service proxy (kube-proxy IPVS mode): watch the Kubernetes API, or a manifests folder')
      .option('--manifests <dir>', 'watch this folder of Service/EndpointSlice manifests instead of a cluster')
      .option('--config <file>', 'KubeProxyConfiguration-style YAML (flags override it)')
      .option('--write-config-to <file>', 'write the effective configuration and exit'),
    CONFIG_FLAGS,
  ).action(async (o: Record<string, unknown>) => {
    await runProxy(o, handleOptions());
  });

  program
    .command('cleanup')
    .description('remove everything ipvsync programmed (the virtual servers it recorded, its VIP addresses and routes, its nftables tables, its record) and nothing else')
    .option('--vip-link <name>', 'the dummy link holding the VIPs', 'kube-ipvs0')
    .option('--kube-proxy-ipsets', "also remove kube-proxy's ipsets (KUBE-*), which `proxy --kube-proxy-ipsets` owns")
    .action(async (o: { vipLink: string; kubeProxyIpsets?: boolean }) => {
      const h = handleOptions();
      const r = await cleanup(h, o.vipLink, o.kubeProxyIpsets ? { ipsetPrefix: KUBE_IPSET_PREFIX } : {});
      console.log(
        `removed ${r.services} virtual services, ${r.tables} nftables tables, ${r.link ? `link ${o.vipLink}` : 'no link'}, ${r.addresses} addresses, ${r.routes} routes, ${r.ipsets} ipsets`,
      );
    });
}

/** Manifest objects skipped for their shape (the rest was read and is programmed). */
function printManifestWarnings(ws: readonly ManifestWarning[]): void {
  for (const w of ws) console.error(`warning: skipped ${w.source}: ${w.message}`);
}

function errJson(e: NetlinkError) {
  return { message: e.message, code: e.code, errno: e.errno, kind: e.kind, op: e.op, index: e.index, extack: e.extack };
}

/** Removes what ipvsync owns, by the rule `sync` and `proxy` follow (README "Ownership"), and
 *  nothing else: proxy/cleanup.ts over this namespace's handles. */
export async function cleanup(h: HandleOptions, vipLink: string, opts: { ipsetPrefix?: string } = {}): Promise<CleanupResult> {
  const [{ Routes }, { Nftables }, { IpSets }, { removeOwned }] = await Promise.all([
    import('../kernel/routes.js'),
    import('../kernel/nftables.js'),
    import('../kernel/ipsets.js'),
    import('../proxy/cleanup.js'),
  ]);
  const nft = await Nftables.open(h).catch((e: unknown) => {
    // A kernel without nftables has no glue to remove.
    if (e instanceof NetlinkError && (e.code === 'EAFNOSUPPORT' || e.code === 'EOPNOTSUPP' || e.kind === 'unsupported')) return undefined;
    throw e;
  });
  return removeOwned(
    { ipvs: await Ipvs.open(h), links: await Links.open(h), routes: await Routes.open(h), ipsets: await IpSets.open(h), ...(nft ? { nft } : {}) },
    vipLink,
    opts,
  );
}

async function runProxy(o: Record<string, unknown>, h: HandleOptions): Promise<void> {
  const { config: cfg, warnings } = loadConfig({ ...(typeof o.config === 'string' ? { file: o.config } : {}), flags: o });
  if (typeof o.writeConfigTo === 'string') {
    await writeConfigTo(o.writeConfigTo, cfg);
    return;
  }
  const log = createLogger({ level: cfg.logLevel });
  for (const w of warnings) log.warn('config', { warning: w });
  // Signals first: one during startup stops what has started so far, and the process exits,
  // since the wait it interrupted (lc.until) never ends.
  const lc = new Lifecycle({ log });
  let started = false;
  const stopped = new Promise<void>((resolve) => {
    lc.handleSignals({
      onStopped: (r) => {
        log.info('stopped; the data plane stays in place', { ok: r.steps.every((x) => x.ok), duringStartup: !started });
        if (started) resolve();
        else process.exit(0);
      },
      onForce: () => process.exit(1),
    });
  });
  await preflight(systemChecks(() => Ipvs.open(h)));

  const glue = o.glue !== false;
  const kubeIpsets = o.kubeProxyIpsets === true;
  // The proxier runs on its own thread, which opens its own handles: this thread needs only
  // IPVS (its timeouts) and the links (the node's addresses).
  const ipvs = await Ipvs.open(h);
  const links = await Links.open(h);
  const addrs = cfg.nodeIPs.length ? cfg.nodeIPs : nodeAddresses(await links.addresses(), cfg.vipLink);
  const proxierOptions = toProxierOptions(cfg, { addresses: addrs, glue, kubeIpsets });
  const proxier = await lc.until(ThreadedProxier.start({ proxier: proxierOptions, kernel: { glue, handle: h } }));
  if (!h.netns) {
    for (const r of applySysctls(proxySysctls(cfg.ipvs.strictARP, cfg.ipvs.runEstimation))) if (!r.ok) log.warn('sysctl', { ...r });
  }
  const timeouts = { tcp: cfg.ipvs.tcpTimeoutMs / 1000, tcpFin: cfg.ipvs.tcpFinTimeoutMs / 1000, udp: cfg.ipvs.udpTimeoutMs / 1000 };
  if (timeouts.tcp || timeouts.tcpFin || timeouts.udp) {
    const set = Object.fromEntries(Object.entries(timeouts).filter(([, v]) => v > 0));
    await ipvs.setTimeouts(set);
  }

  const health = new ProxierHealth(2 * cfg.ipvs.syncPeriodMs);
  // The traffic counters, when asked for (ipvs.statsMetrics): one dump of every virtual server
  // (with its real servers for 'all') per scrape, on this thread's IPVS handle.
  const stats = cfg.ipvs.statsMetrics;
  const metrics = new ProxyMetrics({
    pending: () => proxier.pendingChanges,
    ...(stats !== 'none' ? { ipvsStats: () => ipvs.services({ withDestinations: stats === 'all', stats: true }) } : {}),
  });
  // As kube-proxy: on the node's addresses in nodePortAddresses when it is set, else on all.
  const nodePortCidrs = cfg.nodePortAddresses.map(parseCidr);
  const serviceHealth = new ServiceHealthServers({
    proxyHealth: health,
    ...(nodePortCidrs.length ? { addresses: addrs.filter((a) => anyContains(nodePortCidrs, a)) } : {}),
  });
  const notices = new NoticeLog(log);
  const runner = new SyncRunner(
    async (trigger) => {
      const r = await proxier.sync(trigger !== 'request');
      metrics.recordSyncResult(r);
      notices.update(r.model.warnings, r.report.invalid);
      await serviceHealth.sync(r.model.healthChecks);
      const writes = r.report.ipvs.writes + r.report.addresses.writes + r.report.routes.writes + r.report.nft.writes + r.report.ipsets.writes;
      log.info('sync', { trigger, mode: r.report.mode, writes, errors: r.report.errors.length, ms: Math.round(r.report.durations.totalMs) });
      // logged by the runner's listener (logSyncFailure), with the retry
      if (r.report.errors.length) throw new SyncOpsError(r.report);
      health.updated();
    },
    { minIntervalMs: Math.max(cfg.ipvs.minSyncPeriodMs, 1), maxIntervalMs: cfg.ipvs.syncPeriodMs },
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
    const ms = new MetricsServer(metrics, { host: cfg.metricsBindAddress.host, port: cfg.metricsBindAddress.port, proxyMode: 'ipvs' });
    await ms.start();
    lc.onStop('metrics', () => ms.stop());
  }
  lc.onStop('service health servers', () => serviceHealth.sync([]).then(() => undefined));

  if (typeof o.manifests === 'string') {
    const dir = o.manifests;
    // The sync thread reads the folder itself: parsed here and posted, every object would be
    // held twice while it crossed (the parsed folder on this thread, its copy on that one).
    // Then this thread's own startup garbage is collected, before the first sync (the command
    // runs without V8's memory reducer, which collected this idle heap in the middle of syncs:
    // main.ts).
    const read = (): Promise<FolderLoad> => proxier.loadManifests(dir).then((l) => (memoryPressure('critical'), l));
    const load = () => read().then((l) => notices.manifests(l.warnings));
    await lc.until(load());
    if (!statSync(dir).isDirectory() || readdirSync(dir).length === 0) log.warn('manifests folder is empty', { dir });
    const w = watch(dir, () => {
      load().then(request, (e: unknown) => log.warn('manifests not reloaded', { error: e }));
    });
    lc.onStop('manifests watch', () => w.close());
  } else {
    // The same source and the same logging whether the informers run here or on the sync thread.
    const source = { ...(cfg.kubeconfig ? { kubeconfig: cfg.kubeconfig } : {}), ...(cfg.master ? { server: cfg.master } : {}) };
    const onError = (e: InformerError) => log.warn('informer', { resource: e.resource, error: e.error, retryInMs: e.retryInMs });
    const onHandlerError = (resource: ResourceName, e: unknown) => log.error('informer handler failed', { resource, error: e });
    // The thread lists and watches the API itself: the objects go from the parsed answers
    // straight into its proxier, and this thread hears only of changes and of its Node.
    const kube = await proxier.watchKube({ source, nodeName: nodeName(cfg), onChange: request, onNode: (n) => health.syncNode(n), onError, onHandlerError });
    lc.onStop('informers', () => kube.stop());
    // Never program from an empty cache: wait for every first list. Then this thread's own
    // startup garbage is collected, before the first sync (as after a folder's load).
    await lc.until(kube.synced);
    memoryPressure('critical');
  }
  lc.onStop('runner', () => runner.stop());
  runner.start();
  started = true;
  log.info('proxy started', { node: proxierOptions.node.name, nodeAddresses: addrs, source: typeof o.manifests === 'string' ? `manifests ${o.manifests}` : 'kubernetes' });
  await stopped;
}
