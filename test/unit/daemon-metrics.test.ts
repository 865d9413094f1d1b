// The daemon's metrics in their prom-client registry: kube-proxy's metric set as v1.33+ serves
// it (names, types, HELP with component-base's stability prefix, buckets, `ip_family` once per
// served family, the families of each mode) and kubernetes_build_info, each fed where the change
// happens — a runner's runs (full or partial), a sync's result (changes, IPVS and nftables
// writes, cleanup failures, network programming latency from the trackers' trigger times), the
// pending changes read from the proxier (in process or as its sync thread reports them), the
// IPVS traffic counters from one kernel dump per scrape — and the /metrics server on 127.0.0.1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { V1Service as ClientService } from '@kubernetes/client-node';
import { exponentialBuckets } from 'prom-client';
import type { Service } from '../../src/kernel/ipvs.js';
import { fullSync, type SyncRecord } from '../../src/daemon/runner.js';
import { NetlinkError } from '../../src/errors.js';
import { ANNOTATION_LAST_CHANGE_TRIGGER_TIME } from '../../src/kube/change-tracker.js';
import {
  ipFamiliesOf,
  ipvsyncBuildInfo,
  ProxyMetrics,
  MetricsServer,
  NETWORK_PROGRAMMING_BUCKETS,
  PROMETHEUS_CONTENT_TYPE,
  SYNC_DURATION_BUCKETS,
  type BuildInfo,
  type SyncResultForMetrics,
} from '../../src/daemon/metrics.js';
import { Proxier, type ProxierOptions } from '../../src/proxy/proxier.js';
import type { InformerError } from '../../src/kube/informers.js';
import { ThreadedProxier } from '../../src/proxy/sync-thread.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { nodeObj, sliceObj, svcObj, TEST_OPTS } from '../helpers/informer-harness.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const KERNEL = pathToFileURL(join(import.meta.dirname, '../fixtures/kube/sync-thread-kernel.js')).href;
const OPTIONS: ProxierOptions = { node: { name: 'node-a', addresses: ['10.0.0.11'] }, config: { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] }, vipLink: 'kube-ipvs0', glue: true };

/** A value of the exposition: the sample line `name{labels}` (labels as rendered). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

const noWrites = { ops: {}, writes: 0, errors: [] };
const noErrors = { ipvs: noWrites, nft: noWrites, errors: [] };
function result(r: Partial<SyncResultForMetrics> = {}): SyncResultForMetrics {
  return { report: noErrors, serviceChanges: 0, endpointChanges: 0, triggerTimes: [], summary: { noLocalEndpointsTotal: { internal: 0, external: 0 } }, ...r };
}
const CPU = { addonCpuUsage: () => ({ jsThreadNs: 0, jsThreadCalls: 0, poolUserNs: 0, poolSysNs: 0, poolTasks: 0 }) };
const BUILD: BuildInfo = { major: '0', minor: '7', git_version: 'v0.7.2', git_commit: '', git_tree_state: '', build_date: '1970-01-01T00:00:00Z', go_version: 'v20.11.1', compiler: 'node', platform: 'linux/amd64' };
/** An nftables write that failed, as the addon reports it. */
const nftError = (op: string) => new NetlinkError({ message: `${op}: No such file or directory`, code: 'ENOENT', errno: 2, kind: 'kernel', op, index: 0 });

/** Every family of an exposition: its TYPE by name, and its HELP text. */
function families(text: string): Map<string, { type: string; help: string }> {
  const out = new Map<string, { type: string; help: string }>();
  for (const m of text.matchAll(/^# HELP (\S+) (.*)\n# TYPE \1 (\S+)$/gm)) out.set(m[1]!, { help: m[2]!, type: m[3]! });
  assert.equal(out.size, text.split('\n').filter((l) => l.startsWith('# TYPE ')).length, 'every TYPE has its HELP');
  return out;
}

const KUBE_PROXY_ALL_MODES: Array<[string, string]> = [
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
  ['kubernetes_build_info', 'gauge'],
  // client-go's, which kube-proxy serves
  ['rest_client_requests_total', 'counter'],
];
const KUBE_PROXY_NFTABLES: Array<[string, string]> = [
  ['kubeproxy_sync_full_proxy_rules_duration_seconds', 'histogram'],
  ['kubeproxy_sync_partial_proxy_rules_duration_seconds', 'histogram'],
  ['kubeproxy_sync_proxy_rules_nftables_sync_failures_total', 'counter'],
  ['kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total', 'counter'],
];
const IPVSYNC_ALL_MODES: Array<[string, string]> = [
  ['ipvsync_sync_failures_total', 'counter'],
  ['ipvsync_nft_writes_total', 'counter'],
  ['ipvsync_addon_cpu_seconds_total', 'counter'],
  ['ipvsync_informer_errors_total', 'counter'],
];
const IPVSYNC_IPVS: Array<[string, string]> = [
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
];

test('the families per mode, as kube-proxy’s RegisterMetrics: full/partial and the nftables failure counters in nftables mode only, the IPVS families in IPVS mode only', async () => {
  for (const [mode, expected] of [
    ['ipvs', [...KUBE_PROXY_ALL_MODES, ...IPVSYNC_ALL_MODES, ...IPVSYNC_IPVS]],
    ['nftables', [...KUBE_PROXY_ALL_MODES, ...KUBE_PROXY_NFTABLES, ...IPVSYNC_ALL_MODES]],
  ] as const) {
    const text = await new ProxyMetrics({ mode, ...CPU }).render();
    const got = families(text);
    assert.deepEqual(new Map([...got].map(([name, f]) => [name, f.type])), new Map(expected), mode);
    assert.ok(text.endsWith('\n'));
  }
  // the default is IPVS mode
  assert.ok(families(await new ProxyMetrics(CPU).render()).has('ipvsync_ipvs_writes_total'));
  assert.equal(new ProxyMetrics(CPU).mode, 'ipvs');
  // nftables mode reads no IPVS, even when given a dump
  let dumps = 0;
  const nft = new ProxyMetrics({ mode: 'nftables', ipvsStats: async () => (dumps++, []), ...CPU });
  assert.doesNotMatch(await nft.render(), /ipvsync_(ipvs|virtual|real)_/);
  assert.equal(dumps, 0);
  assert.equal(nft.ipvsTraffic, undefined);
});

test('HELP: kube-proxy’s text (and kubernetes_build_info’s) after component-base’s "[ALPHA] ", ipvsync’s own without it', async () => {
  const got = families(await new ProxyMetrics({ mode: 'nftables', ...CPU }).render());
  const help = (name: string) => got.get(name)!.help;
  assert.equal(help('kubeproxy_sync_proxy_rules_duration_seconds'), '[ALPHA] SyncProxyRules latency in seconds');
  assert.equal(help('kubeproxy_sync_full_proxy_rules_duration_seconds'), '[ALPHA] SyncProxyRules latency in seconds for full resyncs');
  assert.equal(help('kubeproxy_sync_partial_proxy_rules_duration_seconds'), '[ALPHA] SyncProxyRules latency in seconds for partial resyncs');
  assert.equal(help('kubeproxy_sync_proxy_rules_last_timestamp_seconds'), '[ALPHA] The last time proxy rules were successfully synced');
  assert.equal(help('kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds'), '[ALPHA] The last time a sync of proxy rules was queued');
  assert.equal(help('kubeproxy_network_programming_duration_seconds'), '[ALPHA] In Cluster Network Programming Latency in seconds');
  assert.equal(help('kubeproxy_sync_proxy_rules_no_local_endpoints_total'), '[ALPHA] Number of services with a Local traffic policy and no endpoints');
  assert.equal(help('kubeproxy_sync_proxy_rules_nftables_sync_failures_total'), '[ALPHA] Cumulative proxy nftables sync failures');
  assert.equal(help('kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total'), '[ALPHA] Cumulative proxy nftables cleanup failures');
  assert.equal(help('kubeproxy_proxy_healthz_total'), '[ALPHA] Cumulative proxy healthz HTTP status');
  assert.equal(
    help('kubernetes_build_info'),
    "[ALPHA] A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
  );
  assert.equal(help('rest_client_requests_total'), '[ALPHA] Number of HTTP requests, partitioned by status code, method, and host.');
  for (const [name, f] of got) assert.equal(f.help.startsWith('[ALPHA] '), name.startsWith('kubeproxy_') || name === 'kubernetes_build_info' || name.startsWith('rest_client_'), name);
});

test('kube-proxy’s bucket layouts: sync durations ExponentialBuckets(0.001, 2, 15); network programming MergeBuckets’ leading 0 and 81 finite buckets', async () => {
  const m = new ProxyMetrics({ mode: 'nftables', now: () => 10_000, ...CPU });
  m.recordSync({ durationMs: 3, ok: true, full: true });
  m.recordSync({ durationMs: 3, ok: true, full: false });
  // a change programmed the moment it was triggered: the 0 bucket
  m.recordSyncResult(result({ triggerTimes: [10_000] }), 10_000);
  const text = await m.render();
  const les = (name: string) => [...text.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)",ip_family="IPv4"\\} \\d+$`, 'gm'))].map((x) => x[1]);
  assert.deepEqual(SYNC_DURATION_BUCKETS, exponentialBuckets(0.001, 2, 15));
  for (const name of ['kubeproxy_sync_proxy_rules_duration_seconds', 'kubeproxy_sync_full_proxy_rules_duration_seconds', 'kubeproxy_sync_partial_proxy_rules_duration_seconds'])
    assert.deepEqual(les(name), [...SYNC_DURATION_BUCKETS.map(String), '+Inf'], name);
  assert.equal(NETWORK_PROGRAMMING_BUCKETS.length, 1 + 2 + 59 + 12 + 7);
  const np = les('kubeproxy_network_programming_duration_seconds');
  assert.deepEqual(np.slice(0, 5), ['0', '0.25', '0.5', '1', '2']);
  assert.deepEqual(np.slice(-3), ['270', '300', '+Inf']);
  assert.equal(np.length, 81 + 1);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="0",ip_family="IPv4"}'), 1);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"}'), 1);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv4"}'), 0);
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
      report: { ipvs: { ops: { addService: 3, addDestination: 9, deleteService: 0 }, writes: 12, errors: [] }, nft: { ops: { 'add-elements': 2 }, writes: 2, errors: [] }, errors: [] },
      summary: { noLocalEndpointsTotal: { internal: 1, external: 4 } },
      // 2.3 s ago; 0 (no time) and a time in the future are not observed
      triggerTimes: [now - 2300, 0, now + 1000],
    }),
  );
  // A sync that failed: its writes count, its changes count, its trigger times are not
  // observed, and the no-local-endpoints gauges keep the last successful sync's.
  const failed = new Error('x') as never;
  m.recordSyncResult(
    result({
      endpointChanges: 1,
      report: { ipvs: { ops: { addDestination: 1 }, writes: 1, errors: [failed] }, nft: noWrites, errors: [failed] },
      triggerTimes: [now - 100],
      summary: { noLocalEndpointsTotal: { internal: 7, external: 7 } },
    }),
  );
  const text = await m.render();
  const v4 = 'ip_family="IPv4"';
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="0.016",${v4}}`), 1);
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="8.192",${v4}}`), 2);
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_duration_seconds_count{${v4}}`), 2);
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_last_timestamp_seconds{${v4}}`), 1700000001.5);
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{${v4}}`), 1700000000);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_service_changes_total'), 2);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_total'), 6);
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_no_local_endpoints_total{${v4},traffic_policy="internal"}`), 1, 'the last successful sync’s');
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_no_local_endpoints_total{${v4},traffic_policy="external"}`), 4);
  assert.equal(sample(text, `kubeproxy_network_programming_duration_seconds_bucket{le="2",${v4}}`), 0);
  assert.equal(sample(text, `kubeproxy_network_programming_duration_seconds_bucket{le="3",${v4}}`), 1);
  assert.equal(sample(text, `kubeproxy_network_programming_duration_seconds_count{${v4}}`), 1);
  assert.equal(sample(text, `kubeproxy_network_programming_duration_seconds_sum{${v4}}`), 2.3);
  assert.equal(sample(text, 'ipvsync_sync_failures_total'), 1);
  assert.equal(sample(text, 'ipvsync_ipvs_writes_total{op="addDestination"}'), 10);
  assert.equal(sample(text, 'ipvsync_ipvs_writes_total{op="addService"}'), 3);
  assert.doesNotMatch(text, /op="deleteService"/, 'zero-write ops are not series');
  assert.equal(sample(text, 'ipvsync_nft_writes_total{op="add-elements"}'), 2, 'IPVS mode: the glue’s nftables writes');
  assert.doesNotMatch(text, /ip_family="IPv6"/, 'single stack: IPv4 only');
  m.recordSyncResult(result({ summary: { noLocalEndpointsTotal: { internal: 0, external: 3 } } }));
  const again = await m.render();
  assert.equal(sample(again, `kubeproxy_sync_proxy_rules_no_local_endpoints_total{${v4},traffic_policy="internal"}`), 0);
  assert.equal(sample(again, `kubeproxy_sync_proxy_rules_no_local_endpoints_total{${v4},traffic_policy="external"}`), 3);
});

test('ip_family: each observation once per served family — IPv6 alone, or both for a dual-stack node; the families from the node’s addresses', async () => {
  assert.deepEqual(ipFamiliesOf(['10.0.0.1', '192.168.1.2']), ['IPv4']);
  assert.deepEqual(ipFamiliesOf(['fd00::1']), ['IPv6']);
  assert.deepEqual(ipFamiliesOf(['fd00::1', '10.0.0.1']), ['IPv4', 'IPv6']);
  assert.deepEqual(ipFamiliesOf([]), ['IPv4']);

  const v6 = new ProxyMetrics({ ipFamilies: ['IPv6'], now: () => 2000 });
  v6.recordQueued();
  v6.recordSync({ durationMs: 5, ok: true });
  const v6text = await v6.render();
  assert.equal(sample(v6text, 'kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6"}'), 1);
  assert.equal(sample(v6text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"}'), 2);
  assert.doesNotMatch(v6text, /ip_family="IPv4"/);

  let now = 1_000_000;
  const m = new ProxyMetrics({ mode: 'nftables', ipFamilies: ['IPv4', 'IPv6'], now: () => now });
  m.recordQueued();
  now += 4000;
  m.recordSync({ durationMs: 20, ok: true, full: true });
  m.recordSync({ durationMs: 40, ok: false, full: false });
  m.recordSyncResult(result({ triggerTimes: [now - 1000], summary: { noLocalEndpointsTotal: { internal: 2, external: 1 } } }));
  const text = await m.render();
  for (const f of ['IPv4', 'IPv6']) {
    const ipf = `ip_family="${f}"`;
    assert.equal(sample(text, `kubeproxy_sync_proxy_rules_duration_seconds_count{${ipf}}`), 2, f);
    assert.equal(sample(text, `kubeproxy_sync_proxy_rules_duration_seconds_sum{${ipf}}`), 0.06, f);
    assert.equal(sample(text, `kubeproxy_sync_full_proxy_rules_duration_seconds_count{${ipf}}`), 1, f);
    assert.equal(sample(text, `kubeproxy_sync_partial_proxy_rules_duration_seconds_count{${ipf}}`), 1, f);
    assert.equal(sample(text, `kubeproxy_sync_proxy_rules_last_timestamp_seconds{${ipf}}`), 1004, f);
    assert.equal(sample(text, `kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{${ipf}}`), 1000, f);
    assert.equal(sample(text, `kubeproxy_network_programming_duration_seconds_count{${ipf}}`), 1, f);
    assert.equal(sample(text, `kubeproxy_network_programming_duration_seconds_sum{${ipf}}`), 1, f);
    // the model's counts are the node's: each family's series carries them
    assert.equal(sample(text, `kubeproxy_sync_proxy_rules_no_local_endpoints_total{${ipf},traffic_policy="internal"}`), 2, f);
    assert.equal(sample(text, `kubeproxy_sync_proxy_rules_no_local_endpoints_total{${ipf},traffic_policy="external"}`), 1, f);
    assert.equal(sample(text, `kubeproxy_sync_proxy_rules_nftables_sync_failures_total{${ipf}}`), 1, f);
  }
  assert.equal(sample(text, 'ipvsync_sync_failures_total'), 1, 'one failed sync, whatever the families');
  // families without a label stay as they were
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_service_changes_total'), 0);
});

test('nftables mode: each run in exactly one of full and partial (a change request is partial; the first, periodic and retry runs are full); the failure counters', async () => {
  const m = new ProxyMetrics({ mode: 'nftables', now: () => 5000 });
  const listeners: Array<(r: SyncRecord) => void> = [];
  m.attachRunner({ onSync: (fn: (r: SyncRecord) => void) => void listeners.push(fn) });
  const run = (trigger: SyncRecord['trigger'], durationMs: number, error?: unknown) => listeners[0]!({ trigger, startedAt: 0, coalesced: 0, durationMs, ...(error ? { error } : {}) });
  const v4 = 'ip_family="IPv4"';
  // the series exist from the start, at 0
  let text = await m.render();
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_nftables_sync_failures_total{${v4}}`), 0);
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{${v4}}`), 0);
  // (durations sum exactly in binary floating point)
  run('initial', 500);
  run('request', 125);
  run('request', 250, new Error('ENOENT'));
  run('retry', 1000);
  run('periodic', 2000);
  text = await m.render();
  assert.equal(sample(text, `kubeproxy_sync_full_proxy_rules_duration_seconds_count{${v4}}`), 3);
  assert.equal(sample(text, `kubeproxy_sync_full_proxy_rules_duration_seconds_sum{${v4}}`), 3.5);
  assert.equal(sample(text, `kubeproxy_sync_partial_proxy_rules_duration_seconds_count{${v4}}`), 2);
  assert.equal(sample(text, `kubeproxy_sync_partial_proxy_rules_duration_seconds_sum{${v4}}`), 0.375);
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_duration_seconds_count{${v4}}`), 5);
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_nftables_sync_failures_total{${v4}}`), 1);
  assert.equal(sample(text, 'ipvsync_sync_failures_total'), 1);
  assert.equal(sample(text, `kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{${v4}}`), 0, 'a failed sync is no cleanup failure');
  assert.equal(fullSync('request'), false);
  for (const t of ['initial', 'periodic', 'retry'] as const) assert.equal(fullSync(t), true, t);

  // Cleanup: a failed deletion of a table, chain or set (or map); not of a rule or an element
  // (the sync's own programming), nor an add.
  const cleanup = async (...ops: string[]) => {
    const errors = ops.map(nftError);
    const before = sample(await m.render(), `kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{${v4}}`)!;
    m.recordSyncResult(result({ report: { ipvs: noWrites, nft: { ops: { 'add-elements': 1 }, writes: 1, errors }, errors } }));
    return sample(await m.render(), `kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total{${v4}}`)! - before;
  };
  assert.equal(await cleanup('NFT_MSG_DELCHAIN ip ipvsync svc-web-80'), 1);
  assert.equal(await cleanup('NFT_MSG_DESTROYSET ip6 ipvsync endpoints-3'), 1);
  assert.equal(await cleanup('NFT_MSG_DELTABLE inet ipvsync'), 1);
  assert.equal(await cleanup('NFT_MSG_DELSET ip ipvsync a', 'NFT_MSG_DELCHAIN ip ipvsync b'), 1, 'one sync, one failure');
  assert.equal(await cleanup('NFT_MSG_DELSETELEM ip ipvsync endpoints-3 (2 elements)'), 0);
  assert.equal(await cleanup('NFT_MSG_DELRULE ip ipvsync services handle 7'), 0);
  assert.equal(await cleanup('NFT_MSG_NEWCHAIN ip ipvsync svc-web-80'), 0);
  assert.equal(sample(await m.render(), 'ipvsync_nft_writes_total{op="add-elements"}'), 7, 'the writes that succeeded, in a failed sync too');

  // IPVS mode: none of these families, and a failed deletion of the glue counts nowhere
  const ipvs = new ProxyMetrics({ now: () => 5000 });
  const errors = [nftError('NFT_MSG_DELCHAIN ip ipvsync x')];
  ipvs.recordSyncResult(result({ report: { ipvs: noWrites, nft: { ops: {}, writes: 0, errors }, errors } }));
  ipvs.recordSync({ durationMs: 1, ok: false, full: false });
  assert.doesNotMatch(await ipvs.render(), /nftables_|_full_|_partial_/);
});

test('kubernetes_build_info: 1, labelled with ipvsync’s version, the runtime, compiler node and Go’s platform names', async () => {
  const text = await new ProxyMetrics({ build: BUILD, ...CPU }).render();
  assert.equal(
    sample(text, 'kubernetes_build_info{build_date="1970-01-01T00:00:00Z",compiler="node",git_commit="",git_tree_state="",git_version="v0.7.2",go_version="v20.11.1",major="0",minor="7",platform="linux/amd64"}'),
    1,
  );
  assert.deepEqual(ipvsyncBuildInfo('1.34.0-rc.1', { version: 'v22.1.0', platform: 'linux', arch: 'arm64' }), {
    major: '1', minor: '34', git_version: 'v1.34.0-rc.1', git_commit: '', git_tree_state: '', build_date: '1970-01-01T00:00:00Z', go_version: 'v22.1.0', compiler: 'node', platform: 'linux/arm64',
  });
  assert.equal(ipvsyncBuildInfo('0.1.0', { version: 'v20.0.0', platform: 'linux', arch: 'x64' }).platform, 'linux/amd64');
  // by default: the package's version and this process's runtime
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  const own = ipvsyncBuildInfo();
  assert.equal(own.git_version, `v${pkg.version}`);
  assert.deepEqual([own.major, own.minor], pkg.version.split('.').slice(0, 2));
  assert.equal(own.go_version, process.version);
  assert.equal(own.platform, `linux/${process.arch === 'x64' ? 'amd64' : process.arch}`);
  assert.match(await new ProxyMetrics(CPU).render(), new RegExp(`^kubernetes_build_info\\{.*git_version="v${pkg.version.replace(/\./g, '\\.')}".*\\} 1$`, 'm'));
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

test('attachRunner records every sync of a SyncRunner, and a queued sync as it attaches (kube-proxy’s SyncLoop start)', async () => {
  let now = 3000;
  const m = new ProxyMetrics({ now: () => now });
  assert.doesNotMatch(await m.render(), /^kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds\{/m);
  const listeners: Array<(r: SyncRecord) => void> = [];
  m.attachRunner({ onSync: (fn: (r: SyncRecord) => void) => void listeners.push(fn) });
  assert.equal(sample(await m.render(), 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"}'), 3);
  now = 5000;
  listeners[0]!({ trigger: 'request', startedAt: 0, coalesced: 1, durationMs: 2 });
  listeners[0]!({ trigger: 'retry', startedAt: 0, coalesced: 0, durationMs: 4, error: new Error('x') });
  const text = await m.render();
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"}'), 2);
  assert.equal(sample(text, 'ipvsync_sync_failures_total'), 1);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}'), 5);
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
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"}'), 2);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv4"}'), 6);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="2",ip_family="IPv4"}'), 1);
  assert.equal(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="4",ip_family="IPv4"}'), 2);
  assert.equal(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_total'), 4);
  assert.ok(sample(text, 'ipvsync_ipvs_writes_total{op="addDestination"}')! >= 4);
  // IPVS mode: the glue's nftables writes are writes too
  assert.equal(sample(text, 'ipvsync_nft_writes_total{op="add-table"}'), first.report.nft.ops['add-table']);
  assert.ok(first.report.nft.ops['add-table']! > 0);

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
  // the thread reads the objects from a manifests folder (JSON is YAML)
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-metrics-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const service = svc('a', { clusterIP: '10.96.0.1', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] });
  const load = async (s: object) => {
    writeFileSync(join(dir, 'a.json'), `${JSON.stringify(service)}\n---\n${JSON.stringify(s)}`);
    await tp.loadManifests(dir);
    await tp.flush();
  };
  await load(slice('a', 'a-0', ports, [{ ip: '10.244.0.1', node: 'node-a' }]));
  assert.deepEqual(tp.pendingChanges, { services: 1, endpoints: 1 });
  assert.equal(sample(await m.render(), 'kubeproxy_sync_proxy_rules_endpoint_changes_pending'), 1);
  const first = await tp.sync(false);
  assert.deepEqual([first.triggerTimes, first.pending, tp.pendingChanges], [[], { services: 0, endpoints: 0 }, { services: 0, endpoints: 0 }]);
  assert.equal(sample(await m.render(), 'kubeproxy_sync_proxy_rules_endpoint_changes_pending'), 0);
  const annotated = slice('a', 'a-0', ports, [{ ip: '10.244.0.2', node: 'node-a' }]);
  annotated.metadata!.annotations = { [ANNOTATION_LAST_CHANGE_TRIGGER_TIME]: '2024-05-01T10:00:00Z' };
  await load(annotated);
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
  for (const metric of [m.ipvsTraffic!.rsConnections, m.ipvsTraffic!.rsBytes, m.ipvsTraffic!.rsWeight, m.ipvsTraffic!.vsPackets]) assert.deepEqual(Object.keys((metric as unknown as { hashMap: object }).hashMap), []);

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

test('the API path through the sync thread: rest_client_requests_total{code,host,method} counts every list page and watch the informers made (a 410 in a watch stream is a 200, a refused connection "<error>"); ipvsync_informer_errors_total{resource,reason} every failure by reason', async (t) => {
  const api = await FakeApiServer.start(0, { bookmarkIntervalMs: 100 });
  t.after(() => api.stop());
  api.create('services', svcObj('a', '10.96.0.1'));
  api.create('endpointslices', sliceObj('a', 'a-1', ['10.0.0.1']));
  api.create('nodes', nodeObj('node-a'));
  const tp = await ThreadedProxier.start({ proxier: OPTIONS, kernel: { glue: true }, kernelModule: KERNEL });
  t.after(() => tp.close());
  const m = new ProxyMetrics({ apiRequests: () => tp.apiRequests, ...CPU });
  const errors: InformerError[] = [];
  const onError = (e: InformerError) => (errors.push(e), m.recordInformerError(e.resource, e.reason));
  const has = (resource: string, reason: string) => errors.some((e) => e.resource === resource && e.reason === reason);
  // a 500 to the first services list, and a list (whichever comes next) reset mid-body
  api.failNext(1, { status: 500, resource: 'services', watch: false });
  api.resetNextList(1);
  const kube = await tp.watchKube({ source: { server: api.url }, nodeName: 'node-a', informer: { ...TEST_OPTS, watchSilenceLimitMs: 1500 }, onError });
  t.after(() => kube.stop());
  await kube.synced;
  await api.waitFor(() => api.openWatches() === 4, 'four watches');
  assert.ok(has('services', 'http_500'));
  await api.waitFor(() => errors.some((e) => e.reason === 'connection'), 'the reset list reported');
  // a hung services watch
  api.stallWatches();
  api.stallWatches(false);
  await api.waitFor(() => has('services', 'silent_watch'), 'the services watch taken for hung');
  // a 410 in the next services watch's stream
  await api.waitFor(() => api.openWatches('services') === 1, 'the services watch again');
  api.expireNextWatches(1, 'services');
  api.dropWatches('clean');
  await api.waitFor(() => has('services', 'gone'), '410 Gone');
  await api.waitFor(() => api.openWatches() === 4, 'four watches after the re-list');
  // the server gone: refused connections, no status
  await api.stop();
  await api.waitFor(() => errors.some((e) => (e.error as { code?: string }).code === 'ECONNREFUSED'), 'a refused connection');
  await api.listen();
  await api.waitFor(() => api.openWatches() === 4, 'four watches after the restart');

  // What the server answered, as the client counted it: an expired watch is a 200 with an ERROR
  // event, a reset list a 200 cut short. The thread's counts are exact once it has reported them.
  const expected = () => {
    const byCode = new Map<string, number>();
    for (const r of api.requests) {
      const code = r.watch && r.status === 410 ? '200' : String(r.status);
      byCode.set(code, (byCode.get(code) ?? 0) + 1);
    }
    return byCode;
  };
  const counted = () => new Map(tp.apiRequests.filter((r) => r.code !== '<error>').map((r) => [r.code, r.count]));
  await api.waitFor(() => [...counted().values()].reduce((a, b) => a + b, 0) === api.requests.length, 'the thread\'s counts of every answered request');
  const answered = expected();
  const refused = errors.filter((e) => (e.error as { code?: string }).code === 'ECONNREFUSED').length;
  assert.deepEqual(counted(), answered);
  assert.deepEqual(new Set(tp.apiRequests.map((r) => `${r.host} ${r.method}`)), new Set([`127.0.0.1:${api.port} GET`]));
  const text = await m.render();
  const host = `127.0.0.1:${api.port}`;
  for (const [code, n] of answered) assert.equal(sample(text, `rest_client_requests_total{code="${code}",host="${host}",method="GET"}`), n, code);
  // (a request cut by the stop before its answer's headers counts there too)
  assert.ok(refused >= 1 && sample(text, `rest_client_requests_total{code="<error>",host="${host}",method="GET"}`)! >= refused);
  assert.ok(answered.get('500')! >= 1 && answered.get('200')! > 4);
  // every failure under its reason, exactly as reported; the reason crosses on the error too (logged with it)
  assert.ok(errors.every((e) => (e.error as { reason?: string }).reason === e.reason));
  const byLabel = new Map<string, number>();
  for (const e of errors) byLabel.set(`resource="${e.resource}",reason="${e.reason}"`, (byLabel.get(`resource="${e.resource}",reason="${e.reason}"`) ?? 0) + 1);
  for (const [labels, n] of byLabel) assert.equal(sample(text, `ipvsync_informer_errors_total{${labels}}`), n, labels);
  for (const reason of ['http_500', 'silent_watch', 'gone']) assert.ok(byLabel.has(`resource="services",reason="${reason}"`), reason);
  assert.ok([...byLabel.keys()].some((k) => k.endsWith('reason="connection"')), 'the reset list, the cut watches, the refused connections');
});
