// Health endpoints with kube-proxy's semantics (pkg/proxy/healthcheck):
// - the proxier health server on healthzBindAddress: /healthz and /livez. The proxy is healthy
//   unless an update has been queued (a Service/EndpointSlice change) and not programmed within
//   healthTimeout (kube-proxy: 2 × syncPeriod). /healthz additionally fails while the node is
//   not eligible (being deleted, or tainted ToBeDeletedByClusterAutoscaler) so load balancers
//   drain it; /livez ignores that.
// - per-service health servers on healthCheckNodePorts (externalTrafficPolicy Local): 200 while
//   the service has local endpoints and the proxy is healthy, else 503, with the count.
import http from 'node:http';
import type { V1Node } from '../kube/api-types.js';
import type { HealthCheck } from '../kube/types.js';
import { close, DaemonServer, DEFAULT_HTTP_LIMITS, limitedServer, listen, notFound, type HttpLimits, type ListenOptions } from './http.js';
import type { ProxyMetrics } from './metrics.js';

export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

export interface HealthState {
  healthy: boolean;
  /** Wall-clock ms of the last successful sync, 0 if none yet. */
  lastUpdated: number;
  currentTime: number;
  nodeEligible: boolean;
}

export class ProxierHealth {
  private lastUpdated = 0;
  /** When the oldest update not yet programmed was queued; 0: none pending. */
  private oldestPendingQueued = 0;
  private nodeEligible = true;

  constructor(
    private readonly healthTimeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {
    if (!(healthTimeoutMs > 0)) throw new RangeError('ProxierHealth: healthTimeoutMs must be > 0');
  }

  /** A change arrived that needs programming. */
  queuedUpdate(): void {
    if (this.oldestPendingQueued === 0) this.oldestPendingQueued = this.now();
  }

  /** A sync succeeded: everything queued so far is programmed. */
  updated(): void {
    this.oldestPendingQueued = 0;
    this.lastUpdated = this.now();
  }

  /** Node eligibility from this Node object (undefined: the node was deleted). */
  syncNode(node: V1Node | undefined): void {
    if (!node || node.metadata?.deletionTimestamp) {
      this.nodeEligible = false;
      return;
    }
    this.nodeEligible = !(node.spec?.taints ?? []).some((t) => t.key === TO_BE_DELETED_TAINT);
  }

  /** The proxy's own health, ignoring node eligibility (kube-proxy's IsHealthy). */
  state(): HealthState {
    const currentTime = this.now();
    const healthy = this.oldestPendingQueued === 0 || currentTime - this.oldestPendingQueued < this.healthTimeoutMs;
    return { healthy, lastUpdated: this.lastUpdated, currentTime, nodeEligible: this.nodeEligible };
  }

  isHealthy(): boolean {
    return this.state().healthy;
  }
}

function iso(ms: number): string {
  // Go's zero time when never updated, as kube-proxy prints it.
  return ms === 0 ? '0001-01-01T00:00:00Z' : new Date(ms).toISOString();
}

function jsonHeaders(): http.OutgoingHttpHeaders {
  return { 'content-type': 'application/json', 'x-content-type-options': 'nosniff' };
}

export interface HealthzServerOptions extends ListenOptions {
  metrics?: Pick<ProxyMetrics, 'healthzTotal' | 'livezTotal'>;
}

/** /healthz and /livez (kube-proxy's proxier health server). */
export class HealthzServer extends DaemonServer {
  constructor(
    private readonly health: ProxierHealth,
    private readonly opts: HealthzServerOptions,
  ) {
    super(opts);
  }

  /** Status code and body for a path (the HTTP layer is a thin wrapper: testable without it). */
  answer(path: string): { status: number; body: string } | undefined {
    if (path !== '/healthz' && path !== '/livez') return undefined;
    const s = this.health.state();
    const livez = path === '/livez';
    const ok = livez ? s.healthy : s.healthy && s.nodeEligible;
    // When healthy, lastUpdated is reported as now (kube-proxy keeps this for compatibility:
    // older releases updated it on every sync loop).
    const lastUpdated = iso(ok ? s.currentTime : s.lastUpdated);
    const body = livez
      ? { lastUpdated, currentTime: iso(s.currentTime) }
      : { lastUpdated, currentTime: iso(s.currentTime), nodeEligible: s.nodeEligible };
    const status = ok ? 200 : 503;
    (livez ? this.opts.metrics?.livezTotal : this.opts.metrics?.healthzTotal)?.inc({ code: String(status) });
    return { status, body: JSON.stringify(body) };
  }

  protected handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const a = this.answer((req.url ?? '/').split('?')[0]!);
    if (!a) return notFound(res);
    res.writeHead(a.status, jsonHeaders()).end(a.body);
  }
}

interface ServiceServer {
  nodePort: number;
  service: string;
  localEndpoints: number;
  servers: http.Server[];
}

export interface ServiceHealthSyncResult {
  started: number[];
  stopped: number[];
  /** Ports whose server could not be started this time (retried on the next sync). */
  failed: Array<{ nodePort: number; service: string; error: Error }>;
}

export interface ServiceHealthOptions {
  /** Addresses to listen on (kube-proxy: the nodePortAddresses IPs, or all). Default ['0.0.0.0']. */
  addresses?: string[];
  /** Every service answers 503 while the proxy itself is unhealthy (kube-proxy
   *  since kubernetes#115825: serviceProxyHealthy in the body), so a load balancer drains a node
   *  whose rules are stale. */
  proxyHealth: Pick<ProxierHealth, 'isHealthy'>;
  /** Per server (one per port and address). */
  limits?: HttpLimits;
}

/**
 * The healthCheckNodePort servers of externalTrafficPolicy Local services, managed from the
 * translate() output: sync() starts servers for new ports, stops those no longer listed, and
 * updates the endpoint counts of the others without restarting them.
 */
export class ServiceHealthServers {
  private readonly byPort = new Map<number, ServiceServer>();

  constructor(private readonly opts: ServiceHealthOptions) {}

  async sync(checks: readonly HealthCheck[]): Promise<ServiceHealthSyncResult> {
    const result: ServiceHealthSyncResult = { started: [], stopped: [], failed: [] };
    const wanted = new Map<number, HealthCheck>();
    for (const c of checks) wanted.set(c.nodePort, c);
    for (const [port, s] of this.byPort) {
      if (wanted.has(port)) continue;
      this.byPort.delete(port);
      await Promise.all(s.servers.map(close));
      result.stopped.push(port);
    }
    for (const [port, c] of wanted) {
      const cur = this.byPort.get(port);
      if (cur) {
        cur.service = c.service;
        cur.localEndpoints = c.localEndpoints;
        continue;
      }
      const entry: ServiceServer = { nodePort: port, service: c.service, localEndpoints: c.localEndpoints, servers: [] };
      try {
        for (const host of this.opts.addresses ?? ['0.0.0.0']) {
          const server = limitedServer(this.opts.limits ?? DEFAULT_HTTP_LIMITS, (_req, res) => this.serve(entry, res));
          await listen(server, host, port);
          entry.servers.push(server);
        }
        this.byPort.set(port, entry);
        result.started.push(port);
      } catch (e) {
        await Promise.all(entry.servers.map(close));
        result.failed.push({ nodePort: port, service: c.service, error: e as Error });
      }
    }
    result.started.sort((a, b) => a - b);
    result.stopped.sort((a, b) => a - b);
    return result;
  }

  /** Ports served now, with what they answer. */
  list(): HealthCheck[] {
    return [...this.byPort.values()]
      .map((s) => ({ nodePort: s.nodePort, service: s.service, localEndpoints: s.localEndpoints }))
      .sort((a, b) => a.nodePort - b.nodePort);
  }

  async stop(): Promise<void> {
    const all = [...this.byPort.values()];
    this.byPort.clear();
    await Promise.all(all.flatMap((s) => s.servers.map(close)));
  }

  private serve(entry: ServiceServer, res: http.ServerResponse): void {
    const [namespace, name] = splitKey(entry.service);
    const count = entry.localEndpoints;
    const proxyHealthy = this.opts.proxyHealth.isHealthy();
    res.writeHead(count > 0 && proxyHealthy ? 200 : 503, {
      ...jsonHeaders(),
      'x-load-balancing-endpoint-weight': String(count),
    });
    res.end(JSON.stringify({ service: { namespace, name }, localEndpoints: count, serviceProxyHealthy: proxyHealthy }, null, '\t'));
  }
}

function splitKey(key: string): [string, string] {
  const i = key.indexOf('/');
  return i < 0 ? ['', key] : [key.slice(0, i), key.slice(i + 1)];
}
