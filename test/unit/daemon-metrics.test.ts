// The metrics registry's text format, kube-proxy's metric set, IPVS stats → traffic counters,
// and the /metrics server on 127.0.0.1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Service } from '../../src/kernel/ipvs.js';
import type { SyncRecord } from '../../src/engine/runner.js';
import { Registry, ProxyMetrics, MetricsServer, PROMETHEUS_CONTENT_TYPE, exponentialBuckets, formatValue } from '../../src/daemon/metrics.js';

test('registry: exposition text for counters, gauges and histograms with labels and escaping', () => {
  const r = new Registry();
  const c = r.counter('requests_total', 'Requests.\nSecond line \\ backslash', ['code', 'path']);
  const g = r.gauge('temperature', 'A gauge');
  const h = r.histogram('latency_seconds', 'Latency', [0.1, 1], ['op']);
  r.gauge('empty', 'Declared, no series');
  c.inc({ code: '200', path: '/a"b\\c\nd' });
  c.inc({ code: '200', path: '/a"b\\c\nd' }, 2);
  c.inc({ path: '/', code: '503' });
  g.set(undefined, -1.5);
  h.observe({ op: 'sync' }, 0.05);
  h.observe({ op: 'sync' }, 0.5);
  h.observe({ op: 'sync' }, 7);
  assert.equal(
    r.render(),
    [
      '# HELP requests_total Requests.\\nSecond line \\\\ backslash',
      '# TYPE requests_total counter',
      'requests_total{code="200",path="/a\\"b\\\\c\\nd"} 3',
      'requests_total{code="503",path="/"} 1',
      '# HELP temperature A gauge',
      '# TYPE temperature gauge',
      'temperature -1.5',
      '# HELP latency_seconds Latency',
      '# TYPE latency_seconds histogram',
      'latency_seconds_bucket{op="sync",le="0.1"} 1',
      'latency_seconds_bucket{op="sync",le="1"} 2',
      'latency_seconds_bucket{op="sync",le="+Inf"} 3',
      'latency_seconds_sum{op="sync"} 7.55',
      'latency_seconds_count{op="sync"} 3',
      '# HELP empty Declared, no series',
      '# TYPE empty gauge',
      '',
    ].join('\n'),
  );
});

test('registry: misuse is rejected', () => {
  const r = new Registry();
  const c = r.counter('x_total', 'x', ['a']);
  assert.throws(() => r.counter('x_total', 'again'), /registered twice/);
  assert.throws(() => c.inc({ b: '1' }), /labels must be exactly \{a\}, got \{b\}/);
  assert.throws(() => c.inc({ a: '1' }, -1), /only goes up/);
  assert.throws(() => r.gauge('bad-name', 'x'), /bad metric name/);
  assert.throws(() => r.gauge('y', 'x', ['le']), /bad label name le/);
  assert.throws(() => r.histogram('h', 'x', [1, 1]), /buckets must increase/);
  assert.equal(formatValue(Infinity), '+Inf');
  assert.equal(formatValue(NaN), 'NaN');
});

test('kube-proxy metrics: sync duration/timestamp, changes and pending, no-local-endpoints, network programming', () => {
  let now = 1_700_000_000_000;
  const m = new ProxyMetrics(() => now);
  m.recordChanges({ services: 2, endpoints: 5 });
  assert.equal(m.serviceChangesPending.get(), 2);
  assert.equal(m.endpointChangesPending.get(), 5);
  assert.equal(m.lastQueuedTimestamp.get(), 1_700_000_000);
  now += 1500;
  m.recordSync({ durationMs: 12, ok: true, writes: { addService: 3, addDestination: 9, deleteService: 0 } });
  m.recordSync({ durationMs: 3000, ok: false });
  m.setNoLocalEndpoints({ internal: 1, external: 4 });
  m.recordNetworkProgramming(now - 2300);
  m.recordNetworkProgramming(0); // no trigger time: not observed
  const text = m.render();
  assert.match(text, /^kubeproxy_sync_proxy_rules_duration_seconds_bucket\{le="0.016"\} 1$/m);
  assert.match(text, /^kubeproxy_sync_proxy_rules_duration_seconds_bucket\{le="8.192"\} 2$/m);
  assert.match(text, /^kubeproxy_sync_proxy_rules_duration_seconds_count 2$/m);
  assert.match(text, /^kubeproxy_sync_proxy_rules_last_timestamp_seconds 1700000001.5$/m);
  assert.match(text, /^kubeproxy_sync_proxy_rules_service_changes_total 2$/m);
  assert.match(text, /^kubeproxy_sync_proxy_rules_endpoint_changes_total 5$/m);
  assert.match(text, /^kubeproxy_sync_proxy_rules_service_changes_pending 0$/m, 'a successful sync clears pending');
  assert.match(text, /^kubeproxy_sync_proxy_rules_no_local_endpoints_total\{traffic_policy="internal"\} 1$/m);
  assert.match(text, /^kubeproxy_sync_proxy_rules_no_local_endpoints_total\{traffic_policy="external"\} 4$/m);
  assert.match(text, /^kubeproxy_network_programming_duration_seconds_bucket\{le="2"\} 0$/m);
  assert.match(text, /^kubeproxy_network_programming_duration_seconds_bucket\{le="3"\} 1$/m);
  assert.match(text, /^kubeproxy_network_programming_duration_seconds_count 1$/m);
  assert.match(text, /^ipvsync_sync_failures_total 1$/m);
  assert.match(text, /^ipvsync_ipvs_writes_total\{op="addDestination"\} 9$/m);
  assert.doesNotMatch(text, /op="deleteService"/, 'zero-write ops are not series');
  // kube-proxy's bucket layouts.
  assert.deepEqual(m.syncDuration.buckets, exponentialBuckets(0.001, 2, 15));
  assert.equal(m.networkProgramming.buckets.length, 2 + 59 + 12 + 7);
  assert.equal(m.networkProgramming.buckets.at(-1), 300);
});

test('the addon’s CPU: read at every render, in seconds, by part; the real counters by default', () => {
  let c = { jsThreadNs: 1_500_000_000, jsThreadCalls: 9, poolUserNs: 250_000_000, poolSysNs: 3_000_000_000, poolTasks: 4 };
  const m = new ProxyMetrics(() => 0, () => c);
  const text = m.render();
  assert.match(text, /^# TYPE ipvsync_addon_cpu_seconds_total counter$/m);
  assert.match(text, /^ipvsync_addon_cpu_seconds_total\{part="js_thread"\} 1.5$/m);
  assert.match(text, /^ipvsync_addon_cpu_seconds_total\{part="pool_user"\} 0.25$/m);
  assert.match(text, /^ipvsync_addon_cpu_seconds_total\{part="pool_system"\} 3$/m);
  c = { ...c, poolSysNs: 4_000_000_000 };
  assert.match(m.render(), /^ipvsync_addon_cpu_seconds_total\{part="pool_system"\} 4$/m);
  // the addon's own counters
  const real = new ProxyMetrics().render();
  const js = Number(/^ipvsync_addon_cpu_seconds_total\{part="js_thread"\} (\S+)$/m.exec(real)?.[1]);
  assert.ok(Number.isFinite(js) && js >= 0);
});

test('attachRunner records every sync of a SyncRunner', () => {
  const m = new ProxyMetrics(() => 5000);
  const listeners: Array<(r: SyncRecord) => void> = [];
  m.attachRunner({ onSync: (fn: (r: SyncRecord) => void) => void listeners.push(fn) });
  listeners[0]!({ trigger: 'request', startedAt: 0, coalesced: 1, durationMs: 2 });
  listeners[0]!({ trigger: 'retry', startedAt: 0, coalesced: 0, durationMs: 4, error: new Error('x') });
  assert.equal(m.syncDuration.snapshot()!.count, 2);
  assert.equal(m.syncFailures.get(), 1);
  assert.equal(m.lastSyncTimestamp.get(), 5);
});

const stats = (k: number) => ({ conns: k, inPackets: 10 * k, outPackets: 9 * k, inBytes: 1000 * k, outBytes: 2000 * k, cps: 0, inPps: 0, outPps: 0, inBps: 0, outBps: 0 });

test('IPVS stats → per-virtual-server and per-real-server series; a snapshot replaces the previous one', () => {
  const m = new ProxyMetrics();
  const services: Service[] = [
    {
      family: 'inet', protocol: 'tcp', address: '10.96.0.10', port: 80, scheduler: 'rr', flags: [], timeout: 0, netmask: '255.255.255.255',
      stats: stats(3),
      destinations: [
        { family: 'inet', address: '10.244.1.5', port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, activeConns: 2, inactiveConns: 1, persistentConns: 0, stats: stats(2) },
        { family: 'inet', address: '10.244.2.7', port: 8080, forward: 'masq', weight: 0, upperThreshold: 0, lowerThreshold: 0, activeConns: 1, inactiveConns: 0, persistentConns: 0, stats: stats(1) },
      ],
    },
    { family: 'inet6', protocol: 'udp', address: 'fd00::a', port: 53, scheduler: 'rr', flags: [], timeout: 0, netmask: 128, stats: stats(0), destinations: [] },
    { family: 'inet', fwmark: 7, scheduler: 'wlc', flags: [], timeout: 0, netmask: '255.255.255.255' },
  ];
  m.setIpvsStats(services, { servicePortOf: (s) => (s.address === '10.96.0.10' ? 'default/web:http' : undefined) });
  const text = m.render();
  const vs = 'protocol="tcp",address="10.96.0.10",port="80",service="default/web:http"';
  assert.match(text, new RegExp(`^ipvsync_virtual_server_connections_total\\{${vs}\\} 3$`, 'm'));
  assert.match(text, new RegExp(`^ipvsync_virtual_server_packets_total\\{${vs},direction="in"\\} 30$`, 'm'));
  assert.match(text, new RegExp(`^ipvsync_virtual_server_bytes_total\\{${vs},direction="out"\\} 6000$`, 'm'));
  const rs = `${vs},real_address="10.244.1.5",real_port="8080"`;
  assert.match(text, new RegExp(`^ipvsync_real_server_connections_total\\{${rs}\\} 2$`, 'm'));
  assert.match(text, new RegExp(`^ipvsync_real_server_bytes_total\\{${rs},direction="in"\\} 2000$`, 'm'));
  assert.match(text, new RegExp(`^ipvsync_real_server_active_connections\\{${rs}\\} 2$`, 'm'));
  assert.match(text, new RegExp(`^ipvsync_real_server_weight\\{${vs},real_address="10.244.2.7",real_port="8080"\\} 0$`, 'm'));
  assert.match(text, /^ipvsync_virtual_server_connections_total\{protocol="udp",address="fd00::a",port="53",service=""\} 0$/m);
  assert.match(text, /^ipvsync_virtual_servers 3$/m);
  assert.doesNotMatch(text, /address="7"/, 'no stats requested for the fwmark service: no traffic series');

  m.setIpvsStats([services[1]!]);
  const after = m.render();
  assert.doesNotMatch(after, /10\.96\.0\.10/, 'a vanished virtual server leaves the output');
  assert.match(after, /^ipvsync_virtual_servers 1$/m);
});

test('metrics server on 127.0.0.1: /metrics, /proxyMode, 404, 405', async () => {
  const m = new ProxyMetrics();
  m.recordChanges({ services: 1 });
  const srv = new MetricsServer(m, { host: '127.0.0.1', port: 0 });
  await srv.start();
  try {
    const base = `http://127.0.0.1:${srv.port}`;
    const r = await fetch(`${base}/metrics`);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), PROMETHEUS_CONTENT_TYPE);
    const body = await r.text();
    assert.equal(body, m.render());
    assert.match(body, /^kubeproxy_sync_proxy_rules_service_changes_total 1$/m);
    assert.equal(await (await fetch(`${base}/proxyMode`)).text(), 'ipvs');
    assert.equal((await fetch(`${base}/nope`)).status, 404);
    assert.equal((await fetch(`${base}/metrics`, { method: 'POST' })).status, 405);
  } finally {
    await srv.stop();
  }
});
