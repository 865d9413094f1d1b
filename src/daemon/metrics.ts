// Prometheus metrics: a small registry (counter, gauge, histogram with labels) and the text
// exposition format 0.0.4 — a few hundred lines instead of a dependency — plus kube-proxy's
// metric set (same names, types and buckets) and ipvsync's per-virtual-server and per-real-server
// traffic counters taken from IPVS stats.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { SyncRecord, SyncRunner } from '../engine/runner.js';
import type { Service } from '../kernel/ipvs.js';
import { addonCpuUsage as nativeAddonCpuUsage, type AddonCpuUsage } from '../native.js';

export type Labels = Record<string, string>;
type MetricType = 'counter' | 'gauge' | 'histogram';

const NAME_RE = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_RE = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

function escapeHelp(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

export function formatValue(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

function labelText(names: readonly string[], values: readonly string[], extra?: [string, string]): string {
  const parts = names.map((n, i) => `${n}="${escapeLabel(values[i]!)}"`);
  if (extra) parts.push(`${extra[0]}="${escapeLabel(extra[1])}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}

abstract class Metric {
  protected readonly series = new Map<string, { values: string[] }>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    readonly type: MetricType,
  ) {
    if (!NAME_RE.test(name)) throw new Error(`bad metric name ${name}`);
    for (const l of labelNames) if (!LABEL_RE.test(l) || l === 'le' || l.startsWith('__')) throw new Error(`bad label name ${l} on ${name}`);
  }

  protected key(labels: Labels | undefined): { key: string; values: string[] } {
    const given = Object.keys(labels ?? {});
    if (given.length !== this.labelNames.length || given.some((g) => !this.labelNames.includes(g)))
      throw new Error(`${this.name}: labels must be exactly {${this.labelNames.join(', ')}}, got {${given.join(', ')}}`);
    const values = this.labelNames.map((n) => String(labels![n]));
    return { key: JSON.stringify(values), values };
  }

  /** Drops every series (for metrics rebuilt from a snapshot, like IPVS stats). */
  reset(): void {
    this.series.clear();
  }

  abstract render(): string[];
}

export class Counter extends Metric {
  private readonly v = new Map<string, number>();

  constructor(name: string, help: string, labelNames: readonly string[] = []) {
    super(name, help, labelNames, 'counter');
  }

  inc(labels?: Labels, by = 1): void {
    if (!(by >= 0)) throw new Error(`${this.name}: a counter only goes up (inc by ${by})`);
    const { key, values } = this.key(labels);
    this.series.set(key, { values });
    this.v.set(key, (this.v.get(key) ?? 0) + by);
  }

  /** Sets a counter mirrored from an external monotonic source (kernel counters). */
  setFromSource(labels: Labels | undefined, value: number): void {
    const { key, values } = this.key(labels);
    this.series.set(key, { values });
    this.v.set(key, value);
  }

  get(labels?: Labels): number {
    return this.v.get(this.key(labels).key) ?? 0;
  }

  override reset(): void {
    super.reset();
    this.v.clear();
  }

  render(): string[] {
    return [...this.series].map(([k, s]) => `${this.name}${labelText(this.labelNames, s.values)} ${formatValue(this.v.get(k)!)}`);
  }
}

export class Gauge extends Metric {
  private readonly v = new Map<string, number>();

  constructor(name: string, help: string, labelNames: readonly string[] = []) {
    super(name, help, labelNames, 'gauge');
  }

  set(labels: Labels | undefined, value: number): void {
    const { key, values } = this.key(labels);
    this.series.set(key, { values });
    this.v.set(key, value);
  }

  get(labels?: Labels): number | undefined {
    return this.v.get(this.key(labels).key);
  }

  override reset(): void {
    super.reset();
    this.v.clear();
  }

  render(): string[] {
    return [...this.series].map(([k, s]) => `${this.name}${labelText(this.labelNames, s.values)} ${formatValue(this.v.get(k)!)}`);
  }
}

export class Histogram extends Metric {
  private readonly data = new Map<string, { counts: number[]; sum: number; count: number }>();
  readonly buckets: readonly number[];

  constructor(name: string, help: string, buckets: readonly number[], labelNames: readonly string[] = []) {
    super(name, help, labelNames, 'histogram');
    const b = [...buckets].filter((x) => x !== Infinity);
    for (let i = 1; i < b.length; i++) if (!(b[i]! > b[i - 1]!)) throw new Error(`${name}: buckets must increase`);
    this.buckets = b;
  }

  observe(labels: Labels | undefined, value: number): void {
    const { key, values } = this.key(labels);
    this.series.set(key, { values });
    let d = this.data.get(key);
    if (!d) this.data.set(key, (d = { counts: this.buckets.map(() => 0), sum: 0, count: 0 }));
    for (let i = 0; i < this.buckets.length; i++) if (value <= this.buckets[i]!) d.counts[i]!++;
    d.sum += value;
    d.count++;
  }

  snapshot(labels?: Labels): { counts: number[]; sum: number; count: number } | undefined {
    const d = this.data.get(this.key(labels).key);
    return d && structuredClone(d);
  }

  override reset(): void {
    super.reset();
    this.data.clear();
  }

  render(): string[] {
    const out: string[] = [];
    for (const [k, s] of this.series) {
      const d = this.data.get(k)!;
      this.buckets.forEach((b, i) => out.push(`${this.name}_bucket${labelText(this.labelNames, s.values, ['le', formatValue(b)])} ${d.counts[i]}`));
      out.push(`${this.name}_bucket${labelText(this.labelNames, s.values, ['le', '+Inf'])} ${d.count}`);
      out.push(`${this.name}_sum${labelText(this.labelNames, s.values)} ${formatValue(d.sum)}`);
      out.push(`${this.name}_count${labelText(this.labelNames, s.values)} ${d.count}`);
    }
    return out;
  }
}

export class Registry {
  private readonly metrics = new Map<string, Metric>();

  register<M extends Metric>(m: M): M {
    if (this.metrics.has(m.name)) throw new Error(`metric ${m.name} registered twice`);
    this.metrics.set(m.name, m);
    return m;
  }

  counter(name: string, help: string, labelNames: readonly string[] = []): Counter {
    return this.register(new Counter(name, help, labelNames));
  }

  gauge(name: string, help: string, labelNames: readonly string[] = []): Gauge {
    return this.register(new Gauge(name, help, labelNames));
  }

  histogram(name: string, help: string, buckets: readonly number[], labelNames: readonly string[] = []): Histogram {
    return this.register(new Histogram(name, help, buckets, labelNames));
  }

  /** Text exposition format 0.0.4; metrics in registration order, HELP/TYPE even when empty. */
  render(): string {
    const lines: string[] = [];
    for (const m of this.metrics.values()) {
      lines.push(`# HELP ${m.name} ${escapeHelp(m.help)}`, `# TYPE ${m.name} ${m.type}`, ...m.render());
    }
    return lines.join('\n') + '\n';
  }
}

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** prometheus.ExponentialBuckets. */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start * factor ** i);
}

/** prometheus.LinearBuckets. */
export function linearBuckets(start: number, width: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start + width * i);
}

/** kube-proxy's network-programming buckets (pkg/proxy/metrics). */
const NETWORK_PROGRAMMING_BUCKETS = [
  ...linearBuckets(0.25, 0.25, 2),
  ...linearBuckets(1, 1, 59),
  ...linearBuckets(60, 5, 12),
  ...linearBuckets(120, 30, 7),
];

/** What a virtual server's traffic metrics are labelled with. */
export interface ServiceLabelSource {
  /** "namespace/name:port" of the Kubernetes service port behind an IPVS service, if any. */
  servicePortOf(s: Service): string | undefined;
}

/**
 * kube-proxy's metrics (names, types, buckets as pkg/proxy/metrics) and ipvsync's IPVS traffic
 * counters. The proxier calls the record*() methods; attachRunner() wires a SyncRunner.
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
  readonly virtualServers: Gauge;

  constructor(
    private readonly now: () => number = Date.now,
    /** The addon's CPU counters, read at every render (addonCpuUsage; a test passes its own). */
    private readonly addonCpuUsage: () => AddonCpuUsage = nativeAddonCpuUsage,
  ) {
    const r = this.registry;
    this.syncDuration = r.histogram('kubeproxy_sync_proxy_rules_duration_seconds', 'SyncProxyRules latency in seconds', exponentialBuckets(0.001, 2, 15));
    this.lastSyncTimestamp = r.gauge('kubeproxy_sync_proxy_rules_last_timestamp_seconds', 'The last time proxy rules were successfully synced');
    this.lastQueuedTimestamp = r.gauge('kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', 'The last time a sync of proxy rules was queued');
    this.networkProgramming = r.histogram('kubeproxy_network_programming_duration_seconds', 'In Cluster Network Programming Latency in seconds', NETWORK_PROGRAMMING_BUCKETS);
    this.serviceChangesTotal = r.counter('kubeproxy_sync_proxy_rules_service_changes_total', 'Cumulative proxy rules Service changes');
    this.serviceChangesPending = r.gauge('kubeproxy_sync_proxy_rules_service_changes_pending', 'Pending proxy rules Service changes');
    this.endpointChangesTotal = r.counter('kubeproxy_sync_proxy_rules_endpoint_changes_total', 'Cumulative proxy rules Endpoint changes');
    this.endpointChangesPending = r.gauge('kubeproxy_sync_proxy_rules_endpoint_changes_pending', 'Pending proxy rules Endpoint changes');
    // A gauge despite its name, as in kube-proxy: set on every sync.
    this.noLocalEndpoints = r.gauge('kubeproxy_sync_proxy_rules_no_local_endpoints_total', 'Number of services with a Local traffic policy and no endpoints', ['traffic_policy']);
    this.healthzTotal = r.counter('kubeproxy_proxy_healthz_total', 'Cumulative proxy healthz HTTP status', ['code']);
    this.livezTotal = r.counter('kubeproxy_proxy_livez_total', 'Cumulative proxy livez HTTP status', ['code']);
    this.syncFailures = r.counter('ipvsync_sync_failures_total', 'Syncs that failed (retried with backoff)');
    this.ipvsWrites = r.counter('ipvsync_ipvs_writes_total', 'IPVS writes issued by syncs, by operation', ['op']);
    this.virtualServers = r.gauge('ipvsync_virtual_servers', 'IPVS virtual servers in the last stats snapshot');
    const vs = ['protocol', 'address', 'port', 'service'];
    this.vsConnections = r.counter('ipvsync_virtual_server_connections_total', 'Connections scheduled by an IPVS virtual server (kernel counter)', vs);
    this.vsPackets = r.counter('ipvsync_virtual_server_packets_total', 'Packets through an IPVS virtual server (kernel counter); direction in = client to server', [...vs, 'direction']);
    this.vsBytes = r.counter('ipvsync_virtual_server_bytes_total', 'Bytes through an IPVS virtual server (kernel counter); direction in = client to server', [...vs, 'direction']);
    const rs = [...vs, 'real_address', 'real_port'];
    this.rsConnections = r.counter('ipvsync_real_server_connections_total', 'Connections scheduled to an IPVS real server (kernel counter)', rs);
    this.rsPackets = r.counter('ipvsync_real_server_packets_total', 'Packets to/from an IPVS real server (kernel counter)', [...rs, 'direction']);
    this.rsBytes = r.counter('ipvsync_real_server_bytes_total', 'Bytes to/from an IPVS real server (kernel counter)', [...rs, 'direction']);
    this.rsActive = r.gauge('ipvsync_real_server_active_connections', 'Active connections of an IPVS real server', rs);
    this.rsInactive = r.gauge('ipvsync_real_server_inactive_connections', 'Inactive connections of an IPVS real server', rs);
    this.rsWeight = r.gauge('ipvsync_real_server_weight', 'Weight of an IPVS real server (0 while draining)', rs);
    this.addonCpu = r.counter(
      'ipvsync_addon_cpu_seconds_total',
      'CPU time of the native addon: part js_thread (its calls on the JavaScript thread), pool_user (netlink encoding and decoding on the libuv pool), pool_system (the kernel doing the work asked of it)',
      ['part'],
    );
  }

  /** A sync finished: duration always, last-success timestamp when it succeeded. */
  recordSync(r: { durationMs: number; ok: boolean; at?: number; writes?: Record<string, number> }): void {
    this.syncDuration.observe(undefined, r.durationMs / 1000);
    if (r.ok) {
      this.lastSyncTimestamp.set(undefined, (r.at ?? this.now()) / 1000);
      this.serviceChangesPending.set(undefined, 0);
      this.endpointChangesPending.set(undefined, 0);
    } else this.syncFailures.inc();
    for (const [op, n] of Object.entries(r.writes ?? {})) if (n > 0) this.ipvsWrites.inc({ op }, n);
  }

  /** Changes received from the sources (kube-proxy counts them when they are queued). */
  recordChanges(c: { services?: number; endpoints?: number }): void {
    if (c.services) {
      this.serviceChangesTotal.inc(undefined, c.services);
      this.serviceChangesPending.set(undefined, (this.serviceChangesPending.get() ?? 0) + c.services);
    }
    if (c.endpoints) {
      this.endpointChangesTotal.inc(undefined, c.endpoints);
      this.endpointChangesPending.set(undefined, (this.endpointChangesPending.get() ?? 0) + c.endpoints);
    }
    if (c.services || c.endpoints) this.lastQueuedTimestamp.set(undefined, this.now() / 1000);
  }

  /** Time from an endpoint change (EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time
   *  annotation) to the end of the sync that programmed it. */
  recordNetworkProgramming(triggerTimeMs: number, programmedAtMs = this.now()): void {
    if (triggerTimeMs > 0 && programmedAtMs >= triggerTimeMs) this.networkProgramming.observe(undefined, (programmedAtMs - triggerTimeMs) / 1000);
  }

  setNoLocalEndpoints(n: { internal: number; external: number }): void {
    this.noLocalEndpoints.set({ traffic_policy: 'internal' }, n.internal);
    this.noLocalEndpoints.set({ traffic_policy: 'external' }, n.external);
  }

  /**
   * Replaces the IPVS traffic series with a snapshot (services dumped with stats and
   * destinations): servers that are gone disappear from the output. `names` labels each virtual
   * server with its Kubernetes service port ("" for foreign ones).
   */
  setIpvsStats(services: readonly Service[], names?: ServiceLabelSource): void {
    for (const m of [this.vsConnections, this.vsPackets, this.vsBytes, this.rsConnections, this.rsPackets, this.rsBytes, this.rsActive, this.rsInactive, this.rsWeight]) m.reset();
    this.virtualServers.set(undefined, services.length);
    for (const s of services) {
      const vs = {
        protocol: s.fwmark !== undefined ? 'fwmark' : s.protocol,
        address: s.fwmark !== undefined ? String(s.fwmark) : s.address,
        port: s.fwmark !== undefined ? '0' : String(s.port),
        service: names?.servicePortOf(s) ?? '',
      };
      if (s.stats) {
        this.vsConnections.setFromSource(vs, s.stats.conns);
        this.vsPackets.setFromSource({ ...vs, direction: 'in' }, s.stats.inPackets);
        this.vsPackets.setFromSource({ ...vs, direction: 'out' }, s.stats.outPackets);
        this.vsBytes.setFromSource({ ...vs, direction: 'in' }, s.stats.inBytes);
        this.vsBytes.setFromSource({ ...vs, direction: 'out' }, s.stats.outBytes);
      }
      for (const d of s.destinations ?? []) {
        const rs = { ...vs, real_address: d.address, real_port: String(d.port) };
        this.rsActive.set(rs, d.activeConns);
        this.rsInactive.set(rs, d.inactiveConns);
        this.rsWeight.set(rs, d.weight);
        if (!d.stats) continue;
        this.rsConnections.setFromSource(rs, d.stats.conns);
        this.rsPackets.setFromSource({ ...rs, direction: 'in' }, d.stats.inPackets);
        this.rsPackets.setFromSource({ ...rs, direction: 'out' }, d.stats.outPackets);
        this.rsBytes.setFromSource({ ...rs, direction: 'in' }, d.stats.inBytes);
        this.rsBytes.setFromSource({ ...rs, direction: 'out' }, d.stats.outBytes);
      }
    }
  }

  /** Records every sync of a runner (duration, success timestamp, failures). */
  attachRunner(runner: Pick<SyncRunner, 'onSync'>, wallClock: () => number = this.now): void {
    runner.onSync((rec: SyncRecord) => this.recordSync({ durationMs: rec.durationMs, ok: rec.error === undefined, at: wallClock() }));
  }

  render(): string {
    const c = this.addonCpuUsage();
    this.addonCpu.setFromSource({ part: 'js_thread' }, c.jsThreadNs / 1e9);
    this.addonCpu.setFromSource({ part: 'pool_user' }, c.poolUserNs / 1e9);
    this.addonCpu.setFromSource({ part: 'pool_system' }, c.poolSysNs / 1e9);
    return this.registry.render();
  }
}

export interface MetricsServerOptions {
  host: string;
  port: number;
  /** Text of /proxyMode (kube-proxy answers its mode there). */
  proxyMode?: string;
}

/** Serves /metrics (and kube-proxy's /proxyMode) for a registry-like source. */
export class MetricsServer {
  private server: http.Server | undefined;

  constructor(
    private readonly source: { render(): string },
    private readonly opts: MetricsServerOptions,
  ) {}

  async start(): Promise<void> {
    const server = http.createServer((req, res) => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method !== 'GET' && req.method !== 'HEAD') {
        res.writeHead(405, { allow: 'GET, HEAD' }).end();
      } else if (path === '/metrics') {
        res.writeHead(200, { 'content-type': PROMETHEUS_CONTENT_TYPE }).end(req.method === 'HEAD' ? undefined : this.source.render());
      } else if (path === '/proxyMode') {
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(this.opts.proxyMode ?? 'ipvs');
      } else {
        res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('404 page not found\n');
      }
    });
    await listen(server, this.opts.host, this.opts.port);
    this.server = server;
  }

  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? 0;
  }

  async stop(): Promise<void> {
    await close(this.server);
    this.server = undefined;
  }
}

export function listen(server: http.Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error) => reject(e);
    server.once('error', onError);
    server.listen({ host, port }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

export function close(server: http.Server | undefined): Promise<void> {
  if (!server) return Promise.resolve();
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
