// Prometheus metrics through prom-client (one registry, its text exposition): kube-proxy's
// metric set (same names, types and buckets) and ipvsync's own — the IPVS writes of each sync,
// the per-virtual-server and per-real-server traffic counters read from the kernel at scrape
// time, the addon's CPU.
import type http from 'node:http';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, exponentialBuckets, linearBuckets } from 'prom-client';
import type { SyncReport } from '../engine/engine.js';
import type { ReloadStats } from './reload-coalescer.js';
import type { SyncRecord, SyncRunner } from './runner.js';
import type { Service } from '../kernel/ipvs.js';
import type { ProxyModel } from '../proxy/ipvs/types.js';
import type { PendingChanges } from '../proxy/proxier.js';
import { addonCpuUsage as nativeAddonCpuUsage, type AddonCpuUsage } from '../native.js';
import { DaemonServer, notFound, type ListenOptions } from './http.js';

export const PROMETHEUS_CONTENT_TYPE: string = Registry.PROMETHEUS_CONTENT_TYPE;

/** kube-proxy's sync-duration buckets (pkg/proxy/metrics). */
export const SYNC_DURATION_BUCKETS: readonly number[] = exponentialBuckets(0.001, 2, 15);

/** kube-proxy's network-programming buckets (pkg/proxy/metrics). */
export const NETWORK_PROGRAMMING_BUCKETS: readonly number[] = [
  ...linearBuckets(0.25, 0.25, 2),
  ...linearBuckets(1, 1, 59),
  ...linearBuckets(60, 5, 12),
  ...linearBuckets(120, 30, 7),
];

/** What a finished sync reports that the metrics take. */
export interface SyncResultForMetrics {
  report: Pick<SyncReport, 'ipvs' | 'errors'>;
  /** Services whose Service or endpoints changed, taken into this sync. */
  serviceChanges: number;
  endpointChanges: number;
  /** When each endpoint change this sync programmed was triggered (ms since the epoch). */
  triggerTimes: readonly number[];
  model: Pick<ProxyModel, 'noLocalEndpointsTotal'>;
}

export interface ProxyMetricsOptions {
  /** Wall clock, ms since the epoch (timestamps, network programming latency). */
  now?: () => number;
  /** The addon's CPU counters, read at every scrape (a test passes its own). */
  addonCpuUsage?: () => AddonCpuUsage;
  /** The pending changes, read at every scrape (from the proxier's trackers, or as its sync
   *  thread last reported them). */
  pending?: () => PendingChanges;
  /** Every IPVS service with its destinations and counters: one dump per scrape. Without it
   *  there are no traffic series. */
  ipvsStats?: () => Promise<readonly Service[]>;
  /** The manifests folder's loads so far, read at every scrape (--manifests only). */
  manifestLoads?: () => ReloadStats;
  /** prom-client's process and Node.js metrics (`process_*`, `nodejs_*`: RSS, CPU, heap, GC,
   *  the event loop's delay since the last scrape), as kube-proxy serves Go's. The daemon turns
   *  them on; each instance that does keeps an event-loop monitor and a GC observer running. */
  runtime?: boolean;
}

/**
 * kube-proxy's metrics (names, types, buckets as pkg/proxy/metrics) and ipvsync's own, in one
 * prom-client registry. The daemon records each sync's result (recordSyncResult), every run of
 * its runner (attachRunner) and every queued sync (recordQueued); what the kernel and the
 * trackers hold (traffic counters, pending changes, the addon's CPU) is read at scrape time.
 */
export class ProxyMetrics {
  readonly registry = new Registry();
  readonly syncDuration: Histogram;
  readonly lastSyncTimestamp: Gauge;
  readonly lastQueuedTimestamp: Gauge;
  readonly networkProgramming: Histogram;
  readonly serviceChangesTotal: Counter;
  readonly serviceChangesPending: Gauge;
  readonly endpointChangesTotal: Counter;
  readonly endpointChangesPending: Gauge;
  readonly noLocalEndpoints: Gauge;
  readonly healthzTotal: Counter;
  readonly livezTotal: Counter;
  readonly syncFailures: Counter;
  readonly ipvsWrites: Counter;
  readonly virtualServers: Gauge;
  readonly vsConnections: Counter;
  readonly vsPackets: Counter;
  readonly vsBytes: Counter;
  readonly rsConnections: Counter;
  readonly rsPackets: Counter;
  readonly rsBytes: Counter;
  readonly rsActive: Gauge;
  readonly rsInactive: Gauge;
  readonly rsWeight: Gauge;
  readonly addonCpu: Counter;
  readonly manifestLoads: Counter | undefined;
  readonly manifestLoadFailures: Counter | undefined;
  private readonly now: () => number;
  /** The series rebuilt from each scrape's IPVS dump. */
  private readonly traffic: Array<Counter | Gauge>;
  /** The dump of the scrape under way, shared by the traffic metrics' collect(). */
  private statsRound: Promise<void> | undefined;
  /** Scrapes run one after the other: each one's traffic series are its own dump's. */
  private scrapes: Promise<unknown> = Promise.resolve();

  constructor(opts: ProxyMetricsOptions = {}) {
    this.now = opts.now ?? Date.now;
    const registers = [this.registry];
    const counter = (name: string, help: string, labelNames: readonly string[] = [], collect?: () => void | Promise<void>) =>
      new Counter({ name, help, labelNames, registers, ...(collect ? { collect } : {}) });
    const gauge = (name: string, help: string, labelNames: readonly string[] = [], collect?: () => void | Promise<void>) =>
      new Gauge({ name, help, labelNames, registers, ...(collect ? { collect } : {}) });
    const histogram = (name: string, help: string, buckets: readonly number[]) => new Histogram({ name, help, buckets: [...buckets], registers });
    const pending = opts.pending;
    const ipvsStats = opts.ipvsStats;
    const addonCpuUsage = opts.addonCpuUsage ?? nativeAddonCpuUsage;
    // One dump per scrape, whichever traffic metric collects first.
    const traffic = ipvsStats ? () => (this.statsRound ??= ipvsStats().then((s) => this.setIpvsStats(s))) : undefined;

    this.syncDuration = histogram('kubeproxy_sync_proxy_rules_duration_seconds', 'SyncProxyRules latency in seconds', SYNC_DURATION_BUCKETS);
    this.lastSyncTimestamp = gauge('kubeproxy_sync_proxy_rules_last_timestamp_seconds', 'The last time proxy rules were successfully synced');
    this.lastQueuedTimestamp = gauge('kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', 'The last time a sync of proxy rules was queued');
    this.networkProgramming = histogram('kubeproxy_network_programming_duration_seconds', 'In Cluster Network Programming Latency in seconds', NETWORK_PROGRAMMING_BUCKETS);
    this.serviceChangesTotal = counter('kubeproxy_sync_proxy_rules_service_changes_total', 'Cumulative proxy rules Service changes');
    this.serviceChangesPending = gauge('kubeproxy_sync_proxy_rules_service_changes_pending', 'Pending proxy rules Service changes', [], pending && (() => this.serviceChangesPending.set(pending().services)));
    this.endpointChangesTotal = counter('kubeproxy_sync_proxy_rules_endpoint_changes_total', 'Cumulative proxy rules Endpoint changes');
    this.endpointChangesPending = gauge('kubeproxy_sync_proxy_rules_endpoint_changes_pending', 'Pending proxy rules Endpoint changes', [], pending && (() => this.endpointChangesPending.set(pending().endpoints)));
    // A gauge despite its name, as in kube-proxy: set on every sync.
    this.noLocalEndpoints = gauge('kubeproxy_sync_proxy_rules_no_local_endpoints_total', 'Number of services with a Local traffic policy and no endpoints', ['traffic_policy']);
    this.healthzTotal = counter('kubeproxy_proxy_healthz_total', 'Cumulative proxy healthz HTTP status', ['code']);
    this.livezTotal = counter('kubeproxy_proxy_livez_total', 'Cumulative proxy livez HTTP status', ['code']);
    this.syncFailures = counter('ipvsync_sync_failures_total', 'Syncs that failed (retried with backoff)');
    this.ipvsWrites = counter('ipvsync_ipvs_writes_total', 'IPVS writes issued by syncs, by operation', ['op']);
    this.virtualServers = gauge('ipvsync_virtual_servers', 'IPVS virtual servers in the last stats snapshot', [], traffic);
    const vs = ['protocol', 'address', 'port'];
    this.vsConnections = counter('ipvsync_virtual_server_connections_total', 'Connections scheduled by an IPVS virtual server (kernel counter)', vs, traffic);
    this.vsPackets = counter('ipvsync_virtual_server_packets_total', 'Packets through an IPVS virtual server (kernel counter); direction in = client to server', [...vs, 'direction'], traffic);
    this.vsBytes = counter('ipvsync_virtual_server_bytes_total', 'Bytes through an IPVS virtual server (kernel counter); direction in = client to server', [...vs, 'direction'], traffic);
    const rs = [...vs, 'real_address', 'real_port'];
    this.rsConnections = counter('ipvsync_real_server_connections_total', 'Connections scheduled to an IPVS real server (kernel counter)', rs, traffic);
    this.rsPackets = counter('ipvsync_real_server_packets_total', 'Packets to/from an IPVS real server (kernel counter)', [...rs, 'direction'], traffic);
    this.rsBytes = counter('ipvsync_real_server_bytes_total', 'Bytes to/from an IPVS real server (kernel counter)', [...rs, 'direction'], traffic);
    this.rsActive = gauge('ipvsync_real_server_active_connections', 'Active connections of an IPVS real server', rs, traffic);
    this.rsInactive = gauge('ipvsync_real_server_inactive_connections', 'Inactive connections of an IPVS real server', rs, traffic);
    this.rsWeight = gauge('ipvsync_real_server_weight', 'Weight of an IPVS real server (0 while draining)', rs, traffic);
    this.traffic = [this.virtualServers, this.vsConnections, this.vsPackets, this.vsBytes, this.rsConnections, this.rsPackets, this.rsBytes, this.rsActive, this.rsInactive, this.rsWeight];
    const loads = opts.manifestLoads;
    if (loads) {
      this.manifestLoads = counter('ipvsync_manifest_loads_total', 'Loads of the manifests folder (change events coalesced, periodic resyncs)', [], () => {
        this.manifestLoads!.reset();
        this.manifestLoads!.inc(loads().loads);
      });
      this.manifestLoadFailures = counter('ipvsync_manifest_load_failures_total', 'Loads of the manifests folder that failed (the objects of the last good load stay)', [], () => {
        this.manifestLoadFailures!.reset();
        this.manifestLoadFailures!.inc(loads().failures);
      });
    }
    if (opts.runtime) collectDefaultMetrics({ register: this.registry });
    this.addonCpu = counter(
      'ipvsync_addon_cpu_seconds_total',
      'CPU time of the native addon: part js_thread (its calls on the JavaScript thread), pool_user (netlink encoding and decoding on the libuv pool), pool_system (the kernel doing the work asked of it)',
      ['part'],
      () => {
        const c = addonCpuUsage();
        this.addonCpu.reset();
        this.addonCpu.inc({ part: 'js_thread' }, c.jsThreadNs / 1e9);
        this.addonCpu.inc({ part: 'pool_user' }, c.poolUserNs / 1e9);
        this.addonCpu.inc({ part: 'pool_system' }, c.poolSysNs / 1e9);
      },
    );
  }

  /** A run of the runner finished: its duration always, the last-success timestamp when it
   *  succeeded, a failure otherwise. */
  recordSync(r: { durationMs: number; ok: boolean; at?: number }): void {
    this.syncDuration.observe(r.durationMs / 1000);
    if (r.ok) this.lastSyncTimestamp.set((r.at ?? this.now()) / 1000);
    else this.syncFailures.inc();
  }

  /** A sync was queued (a change arrived). */
  recordQueued(): void {
    this.lastQueuedTimestamp.set(this.now() / 1000);
  }

  /**
   * A sync's result, when it returns: the changes it took in, its IPVS writes (those that
   * succeeded, even in a sync that failed), the services with no local endpoints, and — when
   * it programmed everything — the network programming latency of each endpoint change it took.
   * kube-proxy observes those only after a sync that succeeded: a failed one is retried as a
   * full sync, and the changes it took are not measured.
   */
  recordSyncResult(r: SyncResultForMetrics, programmedAtMs = this.now()): void {
    if (r.serviceChanges) this.serviceChangesTotal.inc(r.serviceChanges);
    if (r.endpointChanges) this.endpointChangesTotal.inc(r.endpointChanges);
    for (const [op, n] of Object.entries(r.report.ipvs.ops)) if (n > 0) this.ipvsWrites.inc({ op }, n);
    this.noLocalEndpoints.set({ traffic_policy: 'internal' }, r.model.noLocalEndpointsTotal.internal);
    this.noLocalEndpoints.set({ traffic_policy: 'external' }, r.model.noLocalEndpointsTotal.external);
    if (r.report.errors.length) return;
    for (const t of r.triggerTimes) if (t > 0 && programmedAtMs >= t) this.networkProgramming.observe((programmedAtMs - t) / 1000);
  }

  /**
   * Replaces the traffic series with one dump's (services with stats and destinations): servers
   * that are gone disappear from the output.
   */
  private setIpvsStats(services: readonly Service[]): void {
    for (const m of this.traffic) m.reset();
    this.virtualServers.set(services.length);
    for (const s of services) {
      const vs = {
        protocol: s.fwmark !== undefined ? 'fwmark' : s.protocol!,
        address: s.fwmark !== undefined ? String(s.fwmark) : s.address!,
        port: s.fwmark !== undefined ? '0' : String(s.port),
      };
      if (s.stats) {
        this.vsConnections.inc(vs, s.stats.conns);
        this.vsPackets.inc({ ...vs, direction: 'in' }, s.stats.inPackets);
        this.vsPackets.inc({ ...vs, direction: 'out' }, s.stats.outPackets);
        this.vsBytes.inc({ ...vs, direction: 'in' }, s.stats.inBytes);
        this.vsBytes.inc({ ...vs, direction: 'out' }, s.stats.outBytes);
      }
      for (const d of s.destinations ?? []) {
        const rs = { ...vs, real_address: d.address, real_port: String(d.port) };
        this.rsActive.set(rs, d.activeConns);
        this.rsInactive.set(rs, d.inactiveConns);
        this.rsWeight.set(rs, d.weight);
        if (!d.stats) continue;
        this.rsConnections.inc(rs, d.stats.conns);
        this.rsPackets.inc({ ...rs, direction: 'in' }, d.stats.inPackets);
        this.rsPackets.inc({ ...rs, direction: 'out' }, d.stats.outPackets);
        this.rsBytes.inc({ ...rs, direction: 'in' }, d.stats.inBytes);
        this.rsBytes.inc({ ...rs, direction: 'out' }, d.stats.outBytes);
      }
    }
  }

  /** Records every sync of a runner (duration, success timestamp, failures). */
  attachRunner(runner: Pick<SyncRunner, 'onSync'>, wallClock: () => number = this.now): void {
    runner.onSync((rec: SyncRecord) => this.recordSync({ durationMs: rec.durationMs, ok: rec.error === undefined, at: wallClock() }));
  }

  /** The text exposition. The traffic series live only while one is built: at 10k services
   *  they are ~100k real servers' worth, not kept between scrapes. */
  render(): Promise<string> {
    const scrape = this.scrapes.then(async () => {
      try {
        return await this.registry.metrics();
      } finally {
        this.statsRound = undefined;
        for (const m of this.traffic) m.reset();
      }
    });
    this.scrapes = scrape.catch(() => undefined);
    return scrape;
  }
}

export interface MetricsServerOptions extends ListenOptions {
  /** Text of /proxyMode (kube-proxy answers its mode there). */
  proxyMode?: string;
}

/** Serves /metrics (and kube-proxy's /proxyMode) for a registry-like source. */
export class MetricsServer extends DaemonServer {
  constructor(
    private readonly source: { render(): Promise<string> },
    private readonly opts: MetricsServerOptions,
  ) {
    super(opts);
  }

  protected handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
    } else if (path === '/metrics') {
      if (req.method === 'HEAD') return void res.writeHead(200, { 'content-type': PROMETHEUS_CONTENT_TYPE }).end();
      this.source.render().then(
        (text) => res.writeHead(200, { 'content-type': PROMETHEUS_CONTENT_TYPE }).end(text),
        // The scrape fails as a whole (Prometheus marks the target down) rather than
        // serve the metrics without the series it could not read.
        (e: unknown) => res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(`${e instanceof Error ? e.message : String(e)}\n`),
      );
    } else if (path === '/proxyMode') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(this.opts.proxyMode ?? 'ipvs');
    } else {
      notFound(res);
    }
  }
}
