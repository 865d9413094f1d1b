// The daemon's metrics in their prom-client registry: kube-proxy's metric set (names, types,
// buckets), each fed where the change happens — a sync's result (changes, IPVS writes, network
// programming latency from the trackers' trigger times), the pending changes read from the
// proxier (in process or as its sync thread reports them), the IPVS traffic counters from one
// kernel dump per scrape — and the /metrics server on 127.0.0.1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { V1Service as ClientService } from '@kubernetes/client-node';
import { exponentialBuckets } from 'prom-client';
import type { Service } from '../../src/kernel/ipvs.js';
import type { SyncRecord } from '../../src/daemon/runner.js';
import { ANNOTATION_LAST_CHANGE_TRIGGER_TIME } from '../../src/kube/change-tracker.js';
import { ProxyMetrics, MetricsServer, NETWORK_PROGRAMMING_BUCKETS, PROMETHEUS_CONTENT_TYPE, SYNC_DURATION_BUCKETS, type SyncResultForMetrics } from '../../src/daemon/metrics.js';
import { Proxier, type ProxierOptions } from '../../src/proxy/proxier.js';
import { ThreadedProxier } from '../../src/proxy/sync-thread.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const KERNEL = pathToFileURL(join(import.meta.dirname, '../fixtures/kube/sync-thread-kernel.js')).href;
const OPTIONS: ProxierOptions = { node: { name: 'node-a', addresses: ['10.0.0.11'] }, config: { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] }, vipLink: 'kube-ipvs0', glue: true };

/** A value of the exposition: the sample line `name{labels}` (labels as rendered). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const noErrors = { ipvs: { ops: {}, writes: 0, errors: [] }, errors: [] };
function result(r: Partial<SyncResultForMetrics> = {}): SyncResultForMetrics {
  return { report: noErrors, serviceChanges: 0, endpointChanges: 0, triggerTimes: [], model: { noLocalEndpointsTotal: { internal: 0, external: 0 } }, ...r };
}

test('every family has its HELP and TYPE, kube-proxy’s names and bucket layouts', async () => {
  const text = await new ProxyMetrics({ addonCpuUsage: () => ({ jsThreadNs: 0, jsThreadCalls: 0, poolUserNs: 0, poolSysNs: 0, poolTasks: 0 }) }).render();
  const families: Array<[string, string]> = [
    ['kubeproxy_sync_proxy_rules_duration_seconds', 'histogram'],
    ['kubeproxy_sync_proxy_rules_last_timestamp_seconds', 'gauge'],
    ['kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', 'gauge'],
    ['kubeproxy_network_programming_duration_seconds', 'histogram'],
    ['kubeproxy_sync_proxy_rules_service_changes_total', 'counter'],
    ['kubeproxy_sync_proxy_rules_service_changes_pending', 'gauge'],
    ['kubeproxy_sync_proxy_rules_endpoint_changes_total', 'counter'],
    ['kubeproxy_sync_proxy_rules_endpoint_changes_pending', 'gauge'],
    ['kubeproxy_sync_proxy_rules_no_local_endpoints_total', 'gauge'],
    ['kubeproxy_proxy_healthz_total', 'counter'],
    ['kubeproxy_proxy_livez_total', 'counter'],
    ['ipvsync_sync_failures_total', 'counter'],
    ['ipvsync_ipvs_writes_total', 'counter'],
    ['ipvsync_virtual_servers', 'gauge'],
    ['ipvsync_virtual_server_connections_total', 'counter'],
    ['ipvsync_virtual_server_packets_total', 'counter'],
    ['ipvsync_virtual_server_bytes_total', 'counter'],
    ['ipvsync_real_server_connections_total', 'counter'],
    ['ipvsync_real_server_packets_total', 'counter'],
    ['ipvsync_real_server_bytes_total', 'counter'],
    ['ipvsync_real_server_active_connections', 'gauge'],
    ['ipvsync_real_server_inactive_connections', 'gauge'],
    ['ipvsync_real_server_weight', 'gauge'],
    ['ipvsync_addon_cpu_seconds_total', 'counter'],
  ];
  for (const [name, type] of families) {
    assert.match(text, new RegExp(`^# HELP ${name} \\S`, 'm'), name);
    assert.match(text, new RegExp(`^# TYPE ${name} ${type}$`, 'm'), name);
  }
  assert.equal(text.split('\n').filter((l) => l.startsWith('# TYPE ')).length, families.length);
  assert.ok(text.endsWith('\n'));
  // kube-proxy's buckets, each an `le` line, then +Inf, _sum and _count
  assert.deepEqual(SYNC_DURATION_BUCKETS, exponentialBuckets(0.001, 2, 15));
  const les = (name: string) => [...text.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)"\\} 0$`, 'gm'))].map((m) => m[1]);
  assert.deepEqual(les('kubeproxy_sync_proxy_rules_duration_seconds'), [...SYNC_DURATION_BUCKETS.map(String), '+Inf']);
  assert.equal(NETWORK_PROGRAMMING_BUCKETS.length, 2 + 59 + 12 + 7);
  assert.deepEqual(les('kubeproxy_network_programming_duration_seconds').slice(0, 4), ['0.25', '0.5', '1', '2']);
  assert.deepEqual(les('kubeproxy_network_programming_duration_seconds').slice(-3), ['270', '300', '+Inf']);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_count'), 0);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_sum'), 0);
});

test('kube-proxy metrics from the runner and the sync’s result: duration, timestamps, changes, writes, no-local-endpoints, network programming', async () => {
  let now = 1_700_000_000_000;
  const m = new ProxyMetrics({ now: () => now });
  m.recordQueued();
  now += 1500;
  m.recordSync({ durationMs: 12, ok: true });
  m.recordSync({ durationMs: 3000, ok: false });
  m.recordSyncResult(
    result({
      serviceChanges: 2,
      endpointChanges: 5,
      report: { ipvs: { ops: { addService: 3, addDestination: 9, deleteService: 0 }, writes: 12, errors: [] }, errors: [] },
      model: { noLocalEndpointsTotal: { internal: 1, external: 4 } },
      // 2.3 s ago; 0 (no time) and a time in the future are not observed
      triggerTimes: [now - 2300, 0, now + 1000],
    }),
  );
  // A sync that failed: its writes count, its changes count, its trigger times are not observed.
  const failed = new Error('x') as never;
  m.recordSyncResult(result({ endpointChanges: 1, report: { ipvs: { ops: { addDestination: 1 }, writes: 1, errors: [failed] }, errors: [failed] }, triggerTimes: [now - 100] }));
  const text = await m.render();
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="0.016"}'), 1);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="8.192"}'), 2);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_duration_seconds_count'), 2);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds'), 1700000001.5);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds'), 1700000000);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_service_changes_total'), 2);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_total'), 6);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="internal"}'), 0, 'the last sync’s');
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="2"}'), 0);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="3"}'), 1);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_count'), 1);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_sum'), 2.3);
  assert.equal(sample(text, 'ipvsync_sync_failures_total'), 1);
  assert.equal(sample(text, 'ipvsync_ipvs_writes_total{op="addDestination"}'), 10);
  assert.equal(sample(text, 'ipvsync_ipvs_writes_total{op="addService"}'), 3);
  assert.doesNotMatch(text, /op="deleteService"/, 'zero-write ops are not series');
  m.recordSyncResult(result({ model: { noLocalEndpointsTotal: { internal: 1, external: 4 } } }));
  const again = await m.render();
  assert.equal(sample(again, 'kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="internal"}'), 1);
  assert.equal(sample(again, 'kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="external"}'), 4);
});

test('the addon’s CPU: read at every scrape, in seconds, by part; the real counters by default', async () => {
  let c = { jsThreadNs: 1_500_000_000, jsThreadCalls: 9, poolUserNs: 250_000_000, poolSysNs: 3_000_000_000, poolTasks: 4 };
  const m = new ProxyMetrics({ addonCpuUsage: () => c });
  const text = await m.render();
  assert.equal(sample(text, 'ipvsync_addon_cpu_seconds_total{part="js_thread"}'), 1.5);
  assert.equal(sample(text, 'ipvsync_addon_cpu_seconds_total{part="pool_user"}'), 0.25);
  assert.equal(sample(text, 'ipvsync_addon_cpu_seconds_total{part="pool_system"}'), 3);
  c = { ...c, poolSysNs: 4_000_000_000 };
  assert.equal(sample(await m.render(), 'ipvsync_addon_cpu_seconds_total{part="pool_system"}'), 4);
  // the addon's own counters
  const js = sample(await new ProxyMetrics().render(), 'ipvsync_addon_cpu_seconds_total{part="js_thread"}');
  assert.ok(js !== undefined && Number.isFinite(js) && js >= 0);
});

test('the manifests folder’s loads and failed loads: read at every scrape; absent without a folder', async () => {
  const loads = { loads: 3, failures: 1 };
  const m = new ProxyMetrics({ manifestLoads: () => loads });
  let text = await m.render();
  assert.equal(sample(text, 'ipvsync_manifest_loads_total'), 3);
  assert.equal(sample(text, 'ipvsync_manifest_load_failures_total'), 1);
  loads.loads = 5;
  text = await m.render();
  assert.equal(sample(text, 'ipvsync_manifest_loads_total'), 5);
  assert.doesNotMatch(await new ProxyMetrics().render(), /ipvsync_manifest_load/);
});

test('attachRunner records every sync of a SyncRunner', async () => {
  const m = new ProxyMetrics({ now: () => 5000 });
  const listeners: Array<(r: SyncRecord) => void> = [];
  m.attachRunner({ onSync: (fn: (r: SyncRecord) => void) => void listeners.push(fn) });
  listeners[0]!({ trigger: 'request', startedAt: 0, coalesced: 1, durationMs: 2 });
  listeners[0]!({ trigger: 'retry', startedAt: 0, coalesced: 0, durationMs: 4, error: new Error('x') });
  const text = await m.render();
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_duration_seconds_count'), 2);
  assert.equal(sample(text, 'ipvsync_sync_failures_total'), 1);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds'), 5);
});

test('pending changes: rise as changes arrive (not those that change nothing), fall to 0 when a sync takes them; trigger times from the annotation, else the arrival; the initial objects are not measured', async () => {
  const p = new Proxier(fakeKernel(), OPTIONS);
  const m = new ProxyMetrics({ pending: () => p.pendingChanges });
  /** An arrival time: between the wall clock before and after it. */
  const within = (t: number | undefined, from: number, to: number) => assert.ok(t !== undefined && t >= from && t <= to, `${t} not in [${from}, ${to}]`);
  const pending = async () => {
    const t = await m.render();
    return [sample(t, 'kubeproxy_sync_proxy_rules_service_changes_pending'), sample(t, 'kubeproxy_sync_proxy_rules_endpoint_changes_pending')];
  };
  const ports = [{ name: 'http', port: 8080 }];
  for (const n of ['a', 'b']) {
    p.onServiceUpdate(svc(n, { clusterIP: n === 'a' ? '10.96.0.1' : '10.96.0.2', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] }));
    p.onSliceUpdate(slice(n, `${n}-0`, ports, [{ ip: n === 'a' ? '10.244.0.1' : '10.244.0.2', node: 'node-a' }]));
  }
  assert.deepEqual(await pending(), [2, 2]);
  const first = await p.sync(false);
  m.recordSyncResult(first);
  assert.deepEqual(first.triggerTimes, [], 'the initial state is no change to measure');
  assert.deepEqual(await pending(), [0, 0]);

  // a's slice with the controller's trigger time, b's without one (its arrival)
  const annotated = slice('a', 'a-0', ports, [{ ip: '10.244.0.3', node: 'node-a' }]);
  const triggered = Date.parse('2024-05-01T10:00:00.250Z');
  annotated.metadata!.annotations = { [ANNOTATION_LAST_CHANGE_TRIGGER_TIME]: new Date(triggered).toISOString() };
  p.onSliceUpdate(annotated);
  p.onSliceUpdate(annotated); // sent again: the same change
  const before = Date.now();
  p.onSliceUpdate(slice('b', 'b-0', ports, [{ ip: '10.244.0.4', node: 'node-a' }]));
  const after = Date.now();
  assert.deepEqual(await pending(), [0, 2]);
  const second = await p.sync(false);
  const [annotatedAt, arrivedAt] = [...second.triggerTimes].sort((x, y) => x - y);
  assert.equal(second.triggerTimes.length, 2);
  assert.equal(annotatedAt, triggered);
  within(arrivedAt, before, after);
  assert.equal(second.endpointChanges, 2);
  assert.deepEqual(await pending(), [0, 0]);
  // programmed 4 s after the annotated change, and (at most) 2 s after the arrival
  m.recordSyncResult(second, triggered + 4000);
  m.recordSyncResult({ ...second, serviceChanges: 0, endpointChanges: 0, triggerTimes: [arrivedAt!] }, arrivedAt! + 2000);
  const text = await m.render();
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_count'), 2);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_sum'), 6);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="2"}'), 1);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="4"}'), 2);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_total'), 4);
  assert.ok(sample(text, 'ipvsync_ipvs_writes_total{op="addDestination"}')! >= 4);

  // an update that changes nothing programmed is no pending change (as kube-proxy's trackers
  // drop one equal to what was synced), nor one reverted before the sync
  p.onSliceUpdate(slice('b', 'b-0', ports, [{ ip: '10.244.0.4', node: 'node-a' }]));
  const conditionsOnly: ClientService = { ...svc('a', { clusterIP: '10.96.0.1', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] }), status: { conditions: [] } };
  p.onServiceUpdate(conditionsOnly);
  assert.deepEqual(await pending(), [0, 0]);
  p.onSliceUpdate(slice('b', 'b-0', ports, [{ ip: '10.244.0.9', node: 'node-a' }]));
  assert.deepEqual(await pending(), [0, 1]);
  p.onSliceUpdate(slice('b', 'b-0', ports, [{ ip: '10.244.0.4', node: 'node-a' }]));
  assert.deepEqual(await pending(), [0, 0]);
  const third = await p.sync(false);
  assert.deepEqual([third.endpointChanges, third.triggerTimes], [0, []]);
  // a deleted slice counts from when the deletion arrived
  const beforeDelete = Date.now();
  p.onSliceDelete('default/b-0');
  const afterDelete = Date.now();
  p.onSliceDelete('default/b-0');
  const fourth = await p.sync(false);
  assert.equal(fourth.triggerTimes.length, 1);
  within(fourth.triggerTimes[0], beforeDelete, afterDelete);
});

test('sync thread: the pending changes and trigger times cross as plain data', async (t) => {
  const tp = await ThreadedProxier.start({ proxier: OPTIONS, kernel: { glue: true }, kernelModule: KERNEL });
  t.after(() => tp.close());
  const m = new ProxyMetrics({ pending: () => tp.pendingChanges });
  const ports = [{ name: 'http', port: 8080 }];
  tp.onServiceUpdate(svc('a', { clusterIP: '10.96.0.1', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] }));
  tp.onSliceUpdate(slice('a', 'a-0', ports, [{ ip: '10.244.0.1', node: 'node-a' }]));
  await tp.flush();
  assert.deepEqual(tp.pendingChanges, { services: 1, endpoints: 1 });
  assert.equal(sample(await m.render(), 'kubeproxy_sync_proxy_rules_endpoint_changes_pending'), 1);
  const first = await tp.sync(false);
  assert.deepEqual([first.triggerTimes, first.pending, tp.pendingChanges], [[], { services: 0, endpoints: 0 }, { services: 0, endpoints: 0 }]);
  assert.equal(sample(await m.render(), 'kubeproxy_sync_proxy_rules_endpoint_changes_pending'), 0);
  const annotated = slice('a', 'a-0', ports, [{ ip: '10.244.0.2', node: 'node-a' }]);
  annotated.metadata!.annotations = { [ANNOTATION_LAST_CHANGE_TRIGGER_TIME]: '2024-05-01T10:00:00Z' };
  tp.onSliceUpdate(annotated);
  await tp.flush();
  assert.deepEqual(tp.pendingChanges, { services: 0, endpoints: 1 });
  const second = await tp.sync(false);
  assert.deepEqual(second.triggerTimes, [Date.parse('2024-05-01T10:00:00Z')]);
  assert.deepEqual(tp.pendingChanges, { services: 0, endpoints: 0 });
});

const stats = (k: number) => ({ conns: k, inPackets: 10 * k, outPackets: 9 * k, inBytes: 1000 * k, outBytes: 2000 * k, cps: 0, inPps: 0, outPps: 0, inBps: 0, outBps: 0 });

test('IPVS traffic: one kernel dump per scrape, its series replace the last ones, none kept between scrapes', async () => {
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
  let table: Service[] = services;
  let dumps = 0;
  const m = new ProxyMetrics({ ipvsStats: async () => (dumps++, table) });
  const text = await m.render();
  assert.equal(dumps, 1, 'one dump for every traffic metric');
  const vs = 'protocol="tcp",address="10.96.0.10",port="80"';
  assert.equal(sample(text, `ipvsync_virtual_server_connections_total{${vs}}`), 3);
  assert.equal(sample(text, `ipvsync_virtual_server_packets_total{${vs},direction="in"}`), 30);
  assert.equal(sample(text, `ipvsync_virtual_server_bytes_total{${vs},direction="out"}`), 6000);
  const rs = `${vs},real_address="10.244.1.5",real_port="8080"`;
  assert.equal(sample(text, `ipvsync_real_server_connections_total{${rs}}`), 2);
  assert.equal(sample(text, `ipvsync_real_server_packets_total{${rs},direction="out"}`), 18);
  assert.equal(sample(text, `ipvsync_real_server_bytes_total{${rs},direction="in"}`), 2000);
  assert.equal(sample(text, `ipvsync_real_server_active_connections{${rs}}`), 2);
  assert.equal(sample(text, `ipvsync_real_server_inactive_connections{${rs}}`), 1);
  assert.equal(sample(text, `ipvsync_real_server_weight{${vs},real_address="10.244.2.7",real_port="8080"}`), 0);
  assert.equal(sample(text, 'ipvsync_virtual_server_connections_total{protocol="udp",address="fd00::a",port="53"}'), 0);
  assert.equal(sample(text, 'ipvsync_virtual_servers'), 3);
  assert.doesNotMatch(text, /address="7"/, 'no stats for the fwmark service: no traffic series');
  // not kept between scrapes (prom-client's store of a metric's series; get() would collect)
  for (const metric of [m.rsConnections, m.rsBytes, m.rsWeight, m.vsPackets]) assert.deepEqual(Object.keys((metric as unknown as { hashMap: object }).hashMap), []);

  table = [{ ...services[0]!, stats: stats(5) }, services[1]!];
  table[0]!.destinations = [services[0]!.destinations![0]!];
  // two scrapes at once: each its own dump, each the whole set
  const [a, b] = await Promise.all([m.render(), m.render()]);
  assert.equal(dumps, 3);
  for (const t of [a, b]) {
    assert.equal(sample(t, `ipvsync_virtual_server_connections_total{${vs}}`), 5);
    assert.doesNotMatch(t, /10\.244\.2\.7/, 'a vanished real server leaves the output');
    assert.equal(sample(t, 'ipvsync_virtual_servers'), 2);
  }
});

test('metrics server on 127.0.0.1: /metrics, HEAD without a dump, a failed dump is a 500, /proxyMode, 404, 405', async () => {
  let fail = false;
  let dumps = 0;
  const m = new ProxyMetrics({
    ipvsStats: async () => {
      dumps++;
      if (fail) throw new Error('IPVS dump failed: ENOMEM');
      return [];
    },
  });
  m.recordSyncResult(result({ serviceChanges: 1 }));
  const srv = new MetricsServer(m, { host: '127.0.0.1', port: 0 });
  await srv.start();
  try {
    const base = `http://127.0.0.1:${srv.port}`;
    const r = await fetch(`${base}/metrics`);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-type'), PROMETHEUS_CONTENT_TYPE);
    assert.equal(PROMETHEUS_CONTENT_TYPE, 'text/plain; version=0.0.4; charset=utf-8');
    const body = await r.text();
    assert.equal(sample(body, 'kubeproxy_sync_proxy_rules_service_changes_total'), 1);
    assert.equal(dumps, 1);
    const head = await fetch(`${base}/metrics`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(dumps, 1, 'HEAD reads nothing');
    fail = true;
    const bad = await fetch(`${base}/metrics`);
    assert.equal(bad.status, 500);
    assert.match(await bad.text(), /IPVS dump failed: ENOMEM/);
    fail = false;
    assert.equal((await fetch(`${base}/metrics`)).status, 200, 'the next scrape dumps again');
    assert.equal(await (await fetch(`${base}/proxyMode`)).text(), 'ipvs');
    assert.equal((await fetch(`${base}/nope`)).status, 404);
    assert.equal((await fetch(`${base}/metrics`, { method: 'POST' })).status, 405);
  } finally {
    await srv.stop();
  }
});
