// Prometheus metrics through prom-client (one registry, its text exposition): kube-proxy's
// metric set as v1.33+ serves it (same names, types, labels, buckets and HELP, `ip_family` on
// the families it labels, the nftables-mode families in nftables mode) with component-base's
// kubernetes_build_info, and ipvsync's own — the writes of each sync, the per-virtual-server
// and per-real-server traffic counters read from the kernel at scrape time (IPVS mode), the
// addon's CPU, the informers' failures by reason — and client-go's rest_client_requests_total for
// the informers' list and watch requests.
import { readFileSync } from 'node:fs';
import type http from 'node:http';
import { endianness } from 'node:os';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry, exponentialBuckets, linearBuckets } from 'prom-client';
import type { SyncReport } from '../engine/engine.js';
import { addressFamily } from '../net/address.js';
import type { ProxyMode } from './config.js';
import type { ReloadStats } from './reload-coalescer.js';
import { fullSync, type SyncRecord, type SyncRunner } from './runner.js';
import type { Service } from '../kernel/ipvs.js';
import type { ServiceSummary } from '../kube/types.js';
import type { PendingChanges } from '../proxy/proxier.js';
import type { ApiRequestCount } from '../proxy/sync-thread.js';
import { addonCpuUsage as nativeAddonCpuUsage, type AddonCpuUsage } from '../native.js';
import { DaemonServer, notFound, type ListenOptions } from './http.js';

export const PROMETHEUS_CONTENT_TYPE: string = Registry.PROMETHEUS_CONTENT_TYPE;

/** kube-proxy's sync-duration buckets (pkg/proxy/metrics). */
export const SYNC_DURATION_BUCKETS: readonly number[] = exponentialBuckets(0.001, 2, 15);

/** kube-proxy's network-programming buckets (pkg/proxy/metrics): component-base's
 *  MergeBuckets starts its result with a 0 bucket, so there are 81 finite ones, 0 first. */
export const NETWORK_PROGRAMMING_BUCKETS: readonly number[] = [
  0,
  ...linearBuckets(0.25, 0.25, 2),
  ...linearBuckets(1, 1, 59),
  ...linearBuckets(60, 5, 12),
  ...linearBuckets(120, 30, 7),
];

/** kube-proxy's `ip_family` label values (string(v1.IPFamily)). */
export type IpFamilyName = 'IPv4' | 'IPv6';

/** The families a node serves, from its addresses: IPv4 if it has an IPv4 address, IPv6 if
 *  an IPv6 one; no address: IPv4 (kube-proxy's default primary family). */
export function ipFamiliesOf(addresses: readonly string[]): IpFamilyName[] {
  const f = new Set(addresses.map(addressFamily));
  const out: IpFamilyName[] = [];
  if (f.has(4)) out.push('IPv4');
  if (f.has(6)) out.push('IPv6');
  return out.length ? out : ['IPv4'];
}

/** component-base's version.Info as kubernetes_build_info labels it. */
export interface BuildInfo {
  major: string;
  minor: string;
  git_version: string;
  git_commit: string;
  git_tree_state: string;
  build_date: string;
  go_version: string;
  compiler: string;
  platform: string;
}

/** Go's GOARCH for Node's process.arch where the names differ. */
function goArch(arch: string): string {
  if (arch === 'x64') return 'amd64';
  if (arch === 'ia32') return '386';
  if (arch === 'ppc64' && endianness() === 'LE') return 'ppc64le';
  return arch;
}

/**
 * ipvsync's build as kubernetes_build_info labels kube-proxy's: its package version (`v` and
 * the version as git_version, major and minor from it), the runtime it runs on as go_version
 * (process.version: component-base puts runtime.Version() there), compiler `node`, platform
 * `linux/amd64` style (Go's arch names). A package carries no commit, tree state or build
 * date: git_commit and git_tree_state are empty, build_date is component-base's unstamped
 * `1970-01-01T00:00:00Z`.
 */
export function ipvsyncBuildInfo(version: string = packageVersion(), runtime: { version: string; platform: string; arch: string } = process): BuildInfo {
  const [, major = '', minor = ''] = /^(\d+)\.(\d+)/.exec(version) ?? [];
  return {
    major,
    minor,
    git_version: `v${version}`,
    git_commit: '',
    git_tree_state: '',
    build_date: '1970-01-01T00:00:00Z',
    go_version: runtime.version,
    compiler: 'node',
    platform: `${runtime.platform}/${goArch(runtime.arch)}`,
  };
}

function packageVersion(): string {
  // dist/src/daemon/metrics.js -> the package's package.json
  return (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/** An nftables write that deletes an object (a table, chain, set or map), as the kernel's
 *  error names it ("NFT_MSG_DELCHAIN ip ipvsync svc-…"): kube-proxy's cleanup is the deletion
 *  of chains no longer used; a deleted rule or element is the sync's own programming. */
const NFT_OBJECT_DELETE = /^NFT_MSG_(?:DEL|DESTROY)(?:TABLE|CHAIN|SET)(?: |$)/;

/** What a finished sync reports that the metrics take. */
export interface SyncResultForMetrics {
  report: Pick<SyncReport, 'ipvs' | 'nft' | 'errors'>;
  /** Services whose Service or endpoints changed, taken into this sync. */
  serviceChanges: number;
  endpointChanges: number;
  /** When each endpoint change this sync programmed was triggered (ms since the epoch). */
  triggerTimes: readonly number[];
  summary: Pick<ServiceSummary, 'noLocalEndpointsTotal'>;
}

export interface ProxyMetricsOptions {
  /** The data plane (default 'ipvs'): kube-proxy registers per mode (RegisterMetrics), and the
   *  IPVS families exist only in IPVS mode. */
  mode?: ProxyMode;
  /** The families this proxy serves (default ['IPv4']): each observation is recorded once
   *  under each, as a dual-stack kube-proxy's two proxiers each observe theirs (ipvsync
   *  programs both in one sync). */
  ipFamilies?: readonly IpFamilyName[];
  /** kubernetes_build_info's labels (default: ipvsyncBuildInfo()). */
  build?: BuildInfo;
  /** Wall clock, ms since the epoch (timestamps, network programming latency). */
  now?: () => number;
  /** The addon's CPU counters, read at every scrape (a test passes its own). */
  addonCpuUsage?: () => AddonCpuUsage;
  /** The pending changes, read at every scrape (from the proxier's trackers, or as its sync
   *  thread last reported them). */
  pending?: () => PendingChanges;
  /** Every IPVS service with its destinations and counters: one dump per scrape. Without it
   *  (or in nftables mode) there are no traffic series. */
  ipvsStats?: () => Promise<readonly Service[]>;
  /** The informers' requests so far by status, host and method, read at every scrape (as their
   *  sync thread last reported them): rest_client_requests_total. */
  apiRequests?: () => readonly ApiRequestCount[];
  /** The manifests folder's loads so far, read at every scrape (--manifests only). */
  manifestLoads?: () => ReloadStats;
  /** prom-client's process and Node.js metrics (`process_*`, `nodejs_*`: RSS, CPU, heap, GC,
   *  the event loop's delay since the last scrape), as kube-proxy serves Go's. The daemon turns
   *  them on; each instance that does keeps an event-loop monitor and a GC observer running. */
  runtime?: boolean;
}

/** The IPVS traffic series (IPVS mode): rebuilt from each scrape's dump, gone after it. */
export interface IpvsTrafficMetrics {
  virtualServers: Gauge;
  vsConnections: Counter;
  vsPackets: Counter;
  vsBytes: Counter;
  rsConnections: Counter;
  rsPackets: Counter;
  rsBytes: Counter;
  rsActive: Gauge;
  rsInactive: Gauge;
  rsWeight: Gauge;
}

/** component-base prints a metric's stability level before its HELP text. */
const alpha = (help: string) => `[ALPHA] ${help}`;

/**
 * kube-proxy's metrics (names, types, labels, buckets and HELP as pkg/proxy/metrics, registered
 * per mode as its RegisterMetrics), kubernetes_build_info, and ipvsync's own, in one prom-client
 * registry. The daemon records each sync's result (recordSyncResult), every run of its runner
 * (attachRunner) and every queued sync (recordQueued); what the kernel and the trackers hold
 * (traffic counters, pending changes, the addon's CPU) is read at scrape time.
 */
export class ProxyMetrics {
  readonly registry = new Registry();
  readonly mode: ProxyMode;
  readonly ipFamilies: readonly IpFamilyName[];
  readonly syncDuration: Histogram;
  /** nftables mode: each run in one of the two, by whether it was a full sync. */
  readonly syncFullDuration: Histogram | undefined;
  readonly syncPartialDuration: Histogram | undefined;
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
  /** nftables mode. */
  readonly nftSyncFailures: Counter | undefined;
  readonly nftCleanupFailures: Counter | undefined;
  readonly buildInfo: Gauge;
  readonly syncFailures: Counter;
  /** IPVS mode. */
  readonly ipvsWrites: Counter | undefined;
  readonly nftWrites: Counter;
  /** IPVS mode. */
  readonly ipvsTraffic: IpvsTrafficMetrics | undefined;
  readonly addonCpu: Counter;
  readonly manifestLoads: Counter | undefined;
  /** client-go's request counter (kube-proxy serves it): the informers' list and watch requests. */
  readonly restClientRequests: Counter;
  readonly informerErrors: Counter;
  readonly manifestLoadFailures: Counter | undefined;
  private readonly now: () => number;
  /** The dump of the scrape under way, shared by the traffic metrics' collect(). */
  private statsRound: Promise<void> | undefined;
  /** Scrapes run one after the other: each one's traffic series are its own dump's. */
  private scrapes: Promise<unknown> = Promise.resolve();

  constructor(opts: ProxyMetricsOptions = {}) {
    this.now = opts.now ?? Date.now;
    this.mode = opts.mode ?? 'ipvs';
    this.ipFamilies = [...new Set(opts.ipFamilies?.length ? opts.ipFamilies : (['IPv4'] as const))];
    const nft = this.mode === 'nftables';
    const registers = [this.registry];
    const counter = (name: string, help: string, labelNames: readonly string[] = [], collect?: () => void | Promise<void>) =>
      new Counter({ name, help, labelNames, registers, ...(collect ? { collect } : {}) });
    const gauge = (name: string, help: string, labelNames: readonly string[] = [], collect?: () => void | Promise<void>) =>
      new Gauge({ name, help, labelNames, registers, ...(collect ? { collect } : {}) });
    const histogram = (name: string, help: string, buckets: readonly number[]) => new Histogram({ name, help, buckets: [...buckets], labelNames: ['ip_family'], registers });
    const pending = opts.pending;
    const ipvsStats = opts.ipvsStats;
    const addonCpuUsage = opts.addonCpuUsage ?? nativeAddonCpuUsage;
    const ipf = ['ip_family'];

    this.syncDuration = histogram('kubeproxy_sync_proxy_rules_duration_seconds', alpha('SyncProxyRules latency in seconds'), SYNC_DURATION_BUCKETS);
    this.syncFullDuration = nft ? histogram('kubeproxy_sync_full_proxy_rules_duration_seconds', alpha('SyncProxyRules latency in seconds for full resyncs'), SYNC_DURATION_BUCKETS) : undefined;
    this.syncPartialDuration = nft ? histogram('kubeproxy_sync_partial_proxy_rules_duration_seconds', alpha('SyncProxyRules latency in seconds for partial resyncs'), SYNC_DURATION_BUCKETS) : undefined;
    this.lastSyncTimestamp = gauge('kubeproxy_sync_proxy_rules_last_timestamp_seconds', alpha('The last time proxy rules were successfully synced'), ipf);
    this.lastQueuedTimestamp = gauge('kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', alpha('The last time a sync of proxy rules was queued'), ipf);
    this.networkProgramming = histogram('kubeproxy_network_programming_duration_seconds', alpha('In Cluster Network Programming Latency in seconds'), NETWORK_PROGRAMMING_BUCKETS);
    this.serviceChangesTotal = counter('kubeproxy_sync_proxy_rules_service_changes_total', alpha('Cumulative proxy rules Service changes'));
    this.serviceChangesPending = gauge('kubeproxy_sync_proxy_rules_service_changes_pending', alpha('Pending proxy rules Service changes'), [], pending && (() => this.serviceChangesPending.set(pending().services)));
    this.endpointChangesTotal = counter('kubeproxy_sync_proxy_rules_endpoint_changes_total', alpha('Cumulative proxy rules Endpoint changes'));
    this.endpointChangesPending = gauge('kubeproxy_sync_proxy_rules_endpoint_changes_pending', alpha('Pending proxy rules Endpoint changes'), [], pending && (() => this.endpointChangesPending.set(pending().endpoints)));
    // A gauge despite its name, as in kube-proxy: set after every sync that succeeded.
    this.noLocalEndpoints = gauge('kubeproxy_sync_proxy_rules_no_local_endpoints_total', alpha('Number of services with a Local traffic policy and no endpoints'), ['traffic_policy', 'ip_family']);
    this.healthzTotal = counter('kubeproxy_proxy_healthz_total', alpha('Cumulative proxy healthz HTTP status'), ['code']);
    this.livezTotal = counter('kubeproxy_proxy_livez_total', alpha('Cumulative proxy livez HTTP status'), ['code']);
    this.nftSyncFailures = nft ? counter('kubeproxy_sync_proxy_rules_nftables_sync_failures_total', alpha('Cumulative proxy nftables sync failures'), ipf) : undefined;
    this.nftCleanupFailures = nft ? counter('kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total', alpha('Cumulative proxy nftables cleanup failures'), ipf) : undefined;
    // Each served family's series from the start (0), as the unlabelled counters were before
    // v1.33: a rate or an alert on them has a series before the first failure.
    for (const ip_family of this.ipFamilies) for (const c of [this.nftSyncFailures, this.nftCleanupFailures]) c?.inc({ ip_family }, 0);
    const build = opts.build ?? ipvsyncBuildInfo();
    this.buildInfo = gauge(
      'kubernetes_build_info',
      alpha('A metric with a constant \'1\' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.'),
      ['major', 'minor', 'git_version', 'git_commit', 'git_tree_state', 'build_date', 'go_version', 'compiler', 'platform'],
    );
    // labels in client_golang's output order (sorted by name)
    const { build_date, compiler, git_commit, git_tree_state, git_version, go_version, major, minor, platform } = build;
    this.buildInfo.set({ build_date, compiler, git_commit, git_tree_state, git_version, go_version, major, minor, platform }, 1);
    this.syncFailures = counter('ipvsync_sync_failures_total', 'Syncs that failed (retried with backoff)');
    this.ipvsWrites = nft ? undefined : counter('ipvsync_ipvs_writes_total', 'IPVS writes issued by syncs, by operation', ['op']);
    this.nftWrites = counter('ipvsync_nft_writes_total', 'nftables writes issued by syncs, by operation (verb-kind)', ['op']);
    if (!nft) {
      // One dump per scrape, whichever traffic metric collects first.
      const traffic = ipvsStats ? () => (this.statsRound ??= ipvsStats().then((s) => this.setIpvsStats(s))) : undefined;
      const vs = ['protocol', 'address', 'port'];
      const rs = [...vs, 'real_address', 'real_port'];
      this.ipvsTraffic = {
        virtualServers: gauge('ipvsync_virtual_servers', 'IPVS virtual servers in the last stats snapshot', [], traffic),
        vsConnections: counter('ipvsync_virtual_server_connections_total', 'Connections scheduled by an IPVS virtual server (kernel counter)', vs, traffic),
        vsPackets: counter('ipvsync_virtual_server_packets_total', 'Packets through an IPVS virtual server (kernel counter); direction in = client to server', [...vs, 'direction'], traffic),
        vsBytes: counter('ipvsync_virtual_server_bytes_total', 'Bytes through an IPVS virtual server (kernel counter); direction in = client to server', [...vs, 'direction'], traffic),
        rsConnections: counter('ipvsync_real_server_connections_total', 'Connections scheduled to an IPVS real server (kernel counter)', rs, traffic),
        rsPackets: counter('ipvsync_real_server_packets_total', 'Packets to/from an IPVS real server (kernel counter)', [...rs, 'direction'], traffic),
        rsBytes: counter('ipvsync_real_server_bytes_total', 'Bytes to/from an IPVS real server (kernel counter)', [...rs, 'direction'], traffic),
        rsActive: gauge('ipvsync_real_server_active_connections', 'Active connections of an IPVS real server', rs, traffic),
        rsInactive: gauge('ipvsync_real_server_inactive_connections', 'Inactive connections of an IPVS real server', rs, traffic),
        rsWeight: gauge('ipvsync_real_server_weight', 'Weight of an IPVS real server (0 while draining)', rs, traffic),
      };
    }
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
    const apiRequests = opts.apiRequests;
    // client-go's (k8s.io/client-go/tools/metrics via component-base's restclient metrics): one
    // per request once its status is in, code "<error>" for one that got none.
    this.restClientRequests = counter('rest_client_requests_total', alpha('Number of HTTP requests, partitioned by status code, method, and host.'), ['code', 'host', 'method'], apiRequests && (() => {
      this.restClientRequests.reset();
      for (const r of apiRequests()) this.restClientRequests.inc({ code: r.code, host: r.host, method: r.method }, r.count);
    }));
    this.informerErrors = counter(
      'ipvsync_informer_errors_total',
      'API list and watch failures of the informers (each retried): reason gone (410, a re-list), http_<code> or status (an error status), connection (refused, reset, cut), timeout, silent_watch (no event or bookmark for the silence limit), empty_watch, decode, other',
      ['resource', 'reason'],
    );
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

  /**
   * A run of the runner finished: its duration always (nftables mode: also as a full or a
   * partial sync; `full` defaults to true, a caller without partial syncs), the last-success
   * timestamp when it succeeded, a failure otherwise. Each once per served family.
   */
  recordSync(r: { durationMs: number; ok: boolean; full?: boolean; at?: number }): void {
    const seconds = r.durationMs / 1000;
    const at = (r.at ?? this.now()) / 1000;
    const byKind = r.full === false ? this.syncPartialDuration : this.syncFullDuration;
    for (const ip_family of this.ipFamilies) {
      this.syncDuration.observe({ ip_family }, seconds);
      byKind?.observe({ ip_family }, seconds);
      if (r.ok) this.lastSyncTimestamp.set({ ip_family }, at);
      else this.nftSyncFailures?.inc({ ip_family });
    }
    if (!r.ok) this.syncFailures.inc();
  }

  /** An informer's list or watch failed (InformerError's resource and reason). */
  recordInformerError(resource: string, reason: string): void {
    this.informerErrors.inc({ resource, reason });
  }

  /** A sync was queued (a change arrived, or the runner's loop started). */
  recordQueued(): void {
    const at = this.now() / 1000;
    for (const ip_family of this.ipFamilies) this.lastQueuedTimestamp.set({ ip_family }, at);
  }

  /**
   * A sync's result, when it returns: the changes it took in, its IPVS and nftables writes (those
   * that succeeded, even in a sync that failed), in nftables mode a cleanup failure when a write
   * that failed deleted a table, chain or set; and — when it programmed everything — the services
   * with no local endpoints and the network programming latency of each endpoint change it took.
   * kube-proxy records those only after a sync that succeeded: a failed one is retried as a full
   * sync, and the changes it took are not measured.
   *
   * Per family: the model counts services with no local endpoint across both families, so each
   * served family's no_local_endpoints series carries that count (on a single-stack node,
   * kube-proxy's exactly).
   */
  recordSyncResult(r: SyncResultForMetrics, programmedAtMs = this.now()): void {
    if (r.serviceChanges) this.serviceChangesTotal.inc(r.serviceChanges);
    if (r.endpointChanges) this.endpointChangesTotal.inc(r.endpointChanges);
    if (this.ipvsWrites) for (const [op, n] of Object.entries(r.report.ipvs.ops)) if (n > 0) this.ipvsWrites.inc({ op }, n);
    for (const [op, n] of Object.entries(r.report.nft.ops)) if (n > 0) this.nftWrites.inc({ op }, n);
    if (this.nftCleanupFailures && r.report.nft.errors.some((e) => NFT_OBJECT_DELETE.test(e.op))) for (const ip_family of this.ipFamilies) this.nftCleanupFailures.inc({ ip_family });
    if (r.report.errors.length) return;
    const { internal, external } = r.summary.noLocalEndpointsTotal;
    const latencies = r.triggerTimes.filter((t) => t > 0 && programmedAtMs >= t).map((t) => (programmedAtMs - t) / 1000);
    for (const ip_family of this.ipFamilies) {
      this.noLocalEndpoints.set({ ip_family, traffic_policy: 'internal' }, internal);
      this.noLocalEndpoints.set({ ip_family, traffic_policy: 'external' }, external);
      for (const s of latencies) this.networkProgramming.observe({ ip_family }, s);
    }
  }

  /**
   * Replaces the traffic series with one dump's (services with stats and destinations): servers
   * that are gone disappear from the output.
   */
  private setIpvsStats(services: readonly Service[]): void {
    const m = this.ipvsTraffic!;
    for (const x of Object.values(m)) x.reset();
    m.virtualServers.set(services.length);
    for (const s of services) {
      const vs = {
        protocol: s.fwmark !== undefined ? 'fwmark' : s.protocol!,
        address: s.fwmark !== undefined ? String(s.fwmark) : s.address!,
        port: s.fwmark !== undefined ? '0' : String(s.port),
      };
      if (s.stats) {
        m.vsConnections.inc(vs, s.stats.conns);
        m.vsPackets.inc({ ...vs, direction: 'in' }, s.stats.inPackets);
        m.vsPackets.inc({ ...vs, direction: 'out' }, s.stats.outPackets);
        m.vsBytes.inc({ ...vs, direction: 'in' }, s.stats.inBytes);
        m.vsBytes.inc({ ...vs, direction: 'out' }, s.stats.outBytes);
      }
      for (const d of s.destinations ?? []) {
        const rs = { ...vs, real_address: d.address, real_port: String(d.port) };
        m.rsActive.set(rs, d.activeConns);
        m.rsInactive.set(rs, d.inactiveConns);
        m.rsWeight.set(rs, d.weight);
        if (!d.stats) continue;
        m.rsConnections.inc(rs, d.stats.conns);
        m.rsPackets.inc({ ...rs, direction: 'in' }, d.stats.inPackets);
        m.rsPackets.inc({ ...rs, direction: 'out' }, d.stats.outPackets);
        m.rsBytes.inc({ ...rs, direction: 'in' }, d.stats.inBytes);
        m.rsBytes.inc({ ...rs, direction: 'out' }, d.stats.outBytes);
      }
    }
  }

  /**
   * Records every sync of a runner (duration, full or partial by its trigger, success timestamp,
   * failures), and marks a sync queued now: kube-proxy's SyncLoop sets the last-queued time as it
   * starts, while the informers sync, so it is never 0.
   */
  attachRunner(runner: Pick<SyncRunner, 'onSync'>, wallClock: () => number = this.now): void {
    this.recordQueued();
    runner.onSync((rec: SyncRecord) => this.recordSync({ durationMs: rec.durationMs, ok: rec.error === undefined, full: fullSync(rec.trigger), at: wallClock() }));
  }

  /** The text exposition. The traffic series live only while one is built: at 10k services
   *  they are ~100k real servers' worth, not kept between scrapes. */
  render(): Promise<string> {
    const scrape = this.scrapes.then(async () => {
      try {
        return await this.registry.metrics();
      } finally {
        this.statsRound = undefined;
        if (this.ipvsTraffic) for (const m of Object.values(this.ipvsTraffic)) m.reset();
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
