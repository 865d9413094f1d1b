// kube-proxy's health semantics: /healthz and /livez from queued/updated timestamps and node
// eligibility; per-service healthCheckNodePort servers managed from a list. Real HTTP on 127.0.0.1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { HealthzServer, ProxierHealth, ServiceHealthServers, TO_BE_DELETED_TAINT } from '../../src/daemon/healthz.js';
import { DEFAULT_HTTP_LIMITS } from '../../src/daemon/http.js';
import { MetricsServer, ProxyMetrics } from '../../src/daemon/metrics.js';

const T0 = Date.parse('2024-05-01T10:00:00Z');

test('ProxierHealth: healthy at start, while an update is younger than the timeout, and after a sync', () => {
  let now = T0;
  const h = new ProxierHealth(60_000, () => now);
  assert.deepEqual(h.state(), { healthy: true, lastUpdated: 0, currentTime: T0, nodeEligible: true });
  h.queuedUpdate();
  now += 59_999;
  assert.equal(h.isHealthy(), true, 'pending but not late');
  h.queuedUpdate(); // the oldest pending one counts
  now += 1;
  assert.equal(h.isHealthy(), false, 'pending for the whole timeout');
  h.updated();
  assert.deepEqual(h.state(), { healthy: true, lastUpdated: T0 + 60_000, currentTime: T0 + 60_000, nodeEligible: true });
  now += 10 * 60_000;
  assert.equal(h.isHealthy(), true, 'no pending update: healthy however long ago the last sync was');
  assert.throws(() => new ProxierHealth(0), /healthTimeoutMs/);
});

test('node eligibility: deletion timestamp or the autoscaler taint; a deleted node', () => {
  const h = new ProxierHealth(1000, () => T0);
  h.syncNode({ metadata: { name: 'n' }, spec: { taints: [{ key: 'other', effect: 'NoSchedule' }] } });
  assert.equal(h.state().nodeEligible, true);
  h.syncNode({ metadata: { name: 'n' }, spec: { taints: [{ key: TO_BE_DELETED_TAINT, effect: 'NoSchedule' }] } });
  assert.equal(h.state().nodeEligible, false);
  h.syncNode({ metadata: { name: 'n' } });
  assert.equal(h.state().nodeEligible, true);
  h.syncNode({ metadata: { name: 'n', deletionTimestamp: new Date(T0) } });
  assert.equal(h.state().nodeEligible, false);
  h.syncNode(undefined);
  assert.equal(h.state().nodeEligible, false);
});

test('/healthz and /livez over HTTP: status codes, JSON bodies, headers, counters', async () => {
  let now = T0;
  const health = new ProxierHealth(60_000, () => now);
  const metrics = new ProxyMetrics();
  const srv = new HealthzServer(health, { host: '127.0.0.1', port: 0, metrics });
  await srv.start();
  const get = async (path: string) => {
    const r = await fetch(`http://127.0.0.1:${srv.port}${path}`);
    return { status: r.status, body: await r.text(), type: r.headers.get('content-type'), nosniff: r.headers.get('x-content-type-options') };
  };
  try {
    const nowIso = () => new Date(now).toISOString();
    let r = await get('/healthz');
    assert.deepEqual(r, { status: 200, body: JSON.stringify({ lastUpdated: nowIso(), currentTime: nowIso(), nodeEligible: true }), type: 'application/json', nosniff: 'nosniff' });
    health.updated();
    const synced = now;
    health.queuedUpdate();
    now += 61_000;
    r = await get('/healthz');
    assert.equal(r.status, 503);
    assert.deepEqual(JSON.parse(r.body), { lastUpdated: new Date(synced).toISOString(), currentTime: nowIso(), nodeEligible: true }, 'stale: the real last update');
    r = await get('/livez');
    assert.equal(r.status, 503);
    assert.deepEqual(JSON.parse(r.body), { lastUpdated: new Date(synced).toISOString(), currentTime: nowIso() });
    health.updated();
    health.syncNode({ metadata: { name: 'n' }, spec: { taints: [{ key: TO_BE_DELETED_TAINT, effect: 'NoSchedule' }] } });
    r = await get('/healthz');
    assert.equal(r.status, 503, 'an ineligible node fails /healthz');
    assert.equal(JSON.parse(r.body).nodeEligible, false);
    r = await get('/livez');
    assert.equal(r.status, 200, '…but not /livez');
    assert.deepEqual(JSON.parse(r.body), { lastUpdated: nowIso(), currentTime: nowIso() });
    assert.equal((await get('/other')).status, 404);
    const text = await metrics.render();
    assert.match(text, /^kubeproxy_proxy_healthz_total\{code="200"\} 1$/m);
    assert.match(text, /^kubeproxy_proxy_healthz_total\{code="503"\} 2$/m);
    assert.match(text, /^kubeproxy_proxy_livez_total\{code="503"\} 1$/m);
    assert.match(text, /^kubeproxy_proxy_livez_total\{code="200"\} 1$/m);
    // Never synced and unhealthy: Go's zero time.
    const h2 = new ProxierHealth(10, () => now);
    h2.queuedUpdate();
    now += 11;
    assert.equal(JSON.parse(new HealthzServer(h2, { host: '127.0.0.1', port: 0 }).answer('/healthz')!.body).lastUpdated, '0001-01-01T00:00:00Z');
  } finally {
    await srv.stop();
  }
});

async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: n }, () => new Promise<net.Server>((resolve) => {
      const s = net.createServer();
      s.listen(0, '127.0.0.1', () => resolve(s));
    })),
  );
  const ports = servers.map((s) => (s.address() as net.AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  return ports;
}

async function probe(port: number): Promise<{ status: number; body: unknown; weight: string | null } | 'refused'> {
  try {
    const r = await fetch(`http://127.0.0.1:${port}/`);
    return { status: r.status, body: JSON.parse(await r.text()), weight: r.headers.get('x-load-balancing-endpoint-weight') };
  } catch {
    return 'refused';
  }
}

test('service health servers: started, updated in place, stopped as the list changes', async () => {
  const [p1, p2, p3] = await freePorts(3);
  let proxyHealthy = true;
  const mgr = new ServiceHealthServers({ addresses: ['127.0.0.1'], proxyHealth: { isHealthy: () => proxyHealthy } });
  try {
    let r = await mgr.sync([
      { nodePort: p1!, service: 'default/web', localEndpoints: 2 },
      { nodePort: p2!, service: 'prod/api', localEndpoints: 0 },
    ]);
    assert.deepEqual(r, { started: [p1, p2].sort((a, b) => a! - b!), stopped: [], failed: [] });
    assert.deepEqual(await probe(p1!), { status: 200, body: { service: { namespace: 'default', name: 'web' }, localEndpoints: 2, serviceProxyHealthy: true }, weight: '2' });
    assert.deepEqual(await probe(p2!), { status: 503, body: { service: { namespace: 'prod', name: 'api' }, localEndpoints: 0, serviceProxyHealthy: true }, weight: '0' });

    r = await mgr.sync([
      { nodePort: p1!, service: 'default/web', localEndpoints: 0 },
      { nodePort: p3!, service: 'default/lb', localEndpoints: 1 },
    ]);
    assert.deepEqual(r, { started: [p3], stopped: [p2], failed: [] });
    assert.equal((await probe(p1!) as { status: number }).status, 503, 'count updated without a restart');
    assert.equal(await probe(p2!), 'refused');
    assert.equal((await probe(p3!) as { status: number }).status, 200);
    proxyHealthy = false;
    const unhealthy = await probe(p3!);
    assert.deepEqual(unhealthy, { status: 503, body: { service: { namespace: 'default', name: 'lb' }, localEndpoints: 1, serviceProxyHealthy: false }, weight: '1' });
    assert.deepEqual(mgr.list(), [
      { nodePort: p1, service: 'default/web', localEndpoints: 0 },
      { nodePort: p3, service: 'default/lb', localEndpoints: 1 },
    ].sort((a, b) => a.nodePort! - b.nodePort!));
  } finally {
    await mgr.stop();
  }
  assert.equal(await probe(p1!), 'refused');
  assert.equal(await probe(p3!), 'refused');
});

test('service health servers: a port that cannot be bound is reported and retried on the next sync', async () => {
  const [port] = await freePorts(1);
  const blocker = net.createServer();
  await new Promise<void>((r) => blocker.listen(port, '127.0.0.1', () => r()));
  const mgr = new ServiceHealthServers({ addresses: ['127.0.0.1'], proxyHealth: { isHealthy: () => true } });
  try {
    const checks = [{ nodePort: port!, service: 'default/web', localEndpoints: 1 }];
    let r = await mgr.sync(checks);
    assert.equal(r.started.length, 0);
    assert.equal(r.failed.length, 1);
    assert.equal(r.failed[0]!.nodePort, port);
    assert.equal((r.failed[0]!.error as NodeJS.ErrnoException).code, 'EADDRINUSE');
    assert.deepEqual(mgr.list(), []);
    await new Promise((res) => blocker.close(res));
    r = await mgr.sync(checks);
    assert.deepEqual(r, { started: [port], stopped: [], failed: [] });
    assert.equal((await probe(port!) as { status: number }).status, 200);
  } finally {
    await mgr.stop();
    if (blocker.listening) blocker.close();
  }
});

/** Opens a connection to 127.0.0.1:port and writes `payload`; resolves with all it received
 *  once the server closed it (or after `idleMs` without data, when it stays open). */
function rawExchange(port: number, payload: string, idleMs = 2_000): Promise<{ text: string; closedByServer: boolean }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const c = net.connect(port, '127.0.0.1', () => c.write(payload));
    let idle: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(() => {
        c.destroy();
        resolve({ text: Buffer.concat(chunks).toString('latin1'), closedByServer: false });
      }, idleMs);
    };
    arm();
    c.on('data', (d: Buffer) => (chunks.push(d), arm()));
    c.on('error', () => {});
    c.on('close', () => {
      clearTimeout(idle);
      resolve({ text: Buffer.concat(chunks).toString('latin1'), closedByServer: true });
    });
  });
}

const statusLines = (text: string) => text.match(/^HTTP\/1\.1 \d+/gm) ?? [];

test('a pipelined flood gets at most the per-connection cap of answers, then the connection is closed', async () => {
  const health = new ProxierHealth(60_000);
  const cap = 5;
  const srv = new HealthzServer(health, { host: '127.0.0.1', port: 0, limits: { ...DEFAULT_HTTP_LIMITS, maxRequestsPerSocket: cap } });
  await srv.start();
  try {
    const flood = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(10_000);
    // Four connections, each writing 10,000 requests at once: the parser runs a whole socket
    // read of them in one turn, so what bounds the loop's work is that a connection past its
    // cap is destroyed and the rest of its write is never read.
    const results = await Promise.all([1, 2, 3, 4].map(() => rawExchange(srv.port, flood)));
    for (const r of results) {
      assert.equal(r.closedByServer, true, 'the server closes a flooding connection');
      const answers = statusLines(r.text);
      assert.ok(answers.length <= cap, `${answers.length} answers on one connection, cap ${cap}`);
      assert.ok(answers.every((l) => l === 'HTTP/1.1 200'));
    }
    // A well-behaved client pipelining exactly the cap gets every answer, the last one with
    // Connection: close, and the server ends the connection.
    const polite = await rawExchange(srv.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(cap));
    assert.equal(statusLines(polite.text).length, cap);
    assert.equal(polite.closedByServer, true);
    assert.equal((polite.text.match(/^connection: close\r$/gim) ?? []).length, 1, 'only the last answer says close');
    assert.equal((await fetch(`http://127.0.0.1:${srv.port}/healthz`)).status, 200, 'still serving after the flood');
  } finally {
    await srv.stop();
  }
});

test('connections over the cap are closed on accept; those under it are served', async () => {
  const health = new ProxierHealth(60_000);
  const srv = new HealthzServer(health, { host: '127.0.0.1', port: 0, limits: { ...DEFAULT_HTTP_LIMITS, maxConnections: 2 } });
  await srv.start();
  const open: net.Socket[] = [];
  try {
    // Two kept-alive connections, each answered once and left open.
    for (let i = 0; i < 2; i++) {
      const c = net.connect(srv.port, '127.0.0.1');
      open.push(c);
      const first = await new Promise<string>((resolve) => {
        c.once('data', (d: Buffer) => resolve(d.toString('latin1')));
        c.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
      });
      assert.match(first, /^HTTP\/1\.1 200/);
    }
    const third = await rawExchange(srv.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.deepEqual({ closed: third.closedByServer, text: third.text }, { closed: true, text: '' }, 'the third connection is dropped unanswered');
    open.pop()!.destroy();
    // The server hears of the close asynchronously: poll until a new connection is served.
    let served = false;
    for (let i = 0; i < 50 && !served; i++) {
      const r = await rawExchange(srv.port, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      served = /^HTTP\/1\.1 200/.test(r.text);
      if (!served) await new Promise((res) => setTimeout(res, 20));
    }
    assert.equal(served, true, 'a freed slot is served again');
  } finally {
    for (const c of open) c.destroy();
    await srv.stop();
  }
});

test('/metrics is served under the same bounds: a pipelined flood gets the cap of answers, connections over the cap are dropped', async () => {
  const metrics = new ProxyMetrics();
  const srv = new MetricsServer(metrics, { host: '127.0.0.1', port: 0, limits: { ...DEFAULT_HTTP_LIMITS, maxRequestsPerSocket: 3, maxConnections: 1 } });
  await srv.start();
  let held: net.Socket | undefined;
  try {
    const flood = await rawExchange(srv.port, 'GET /proxyMode HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(10_000));
    assert.equal(flood.closedByServer, true);
    assert.ok(statusLines(flood.text).length <= 3, flood.text.slice(0, 300));
    const polite = await rawExchange(srv.port, 'GET /proxyMode HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(3));
    assert.deepEqual(statusLines(polite.text), ['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 200']);
    assert.equal(polite.closedByServer, true, 'closed after the last answer of the cap');
    // one connection held open: the next is closed unanswered
    held = net.connect(srv.port, '127.0.0.1');
    await new Promise<void>((resolve) => held!.once('connect', () => resolve()));
    await new Promise((res) => setTimeout(res, 50));
    const over = await rawExchange(srv.port, 'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n');
    assert.deepEqual({ closed: over.closedByServer, text: over.text }, { closed: true, text: '' });
  } finally {
    held?.destroy();
    await srv.stop();
  }
});
