// Months on a node, compressed (issue 58): `ipvsync proxy --master` in nftables mode on the
// machine's kernel, with every endpoint update its own sync (minSyncPeriod 0), EndpointSlices
// churning at 100 updates a second (200 in CI's short form). At quiet points the kernel's
// tables must equal what a fresh `ipvsync sync -f` of the API server's objects programs
// (nothing lost, nothing stale), and the process's RSS, heap, fds and threads must show no
// growth trend after warm-up.
// CI runs the short form (1,000 services, 6,000 updates); IPVSYNC_SOAK=long runs the long one
// (10,000 services × 10 endpoints, 150,000 updates). The process's RSS grows while its heaps and
// the allocator's arenas warm up (at 1,000 services from 94 to 132 MB over the first 20,000
// updates, then flat: docs/performance.md), so samples count from the warm-up's end.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { assertFlat, ChurningCluster, converged, SoakDaemon, type ProcessSample } from '../helpers/api-daemon.js';

const LONG = process.env.IPVSYNC_SOAK === 'long';
const FORM = LONG
  ? { services: 10_000, endpoints: 10, updates: 150_000, quietEvery: 30_000, sampleEvery: 2_000, warmup: 30_000 }
  : { services: 1_000, endpoints: 4, updates: 6_000, quietEvery: 2_000, sampleEvery: 100, warmup: 3_000 };
/** Updates a second: the 100 in the long form; twice that in CI's, to fit its time. */
const RATE = LONG ? 100 : 200;

test(`soak: ${FORM.updates} endpoint updates at ${RATE}/s across ${FORM.services} services, each its own sync; tables equal a fresh sync at every quiet point; memory, fds and threads flat`, { timeout: LONG ? 4 * 3600_000 : 900_000 }, async (t) => {
  const cluster = await ChurningCluster.start({ services: FORM.services, endpoints: FORM.endpoints });
  const d = SoakDaemon.start(cluster, '--iptables-min-sync-period', '0s', '--iptables-sync-period', '30s');
  t.after(async () => {
    await d.stop();
    await cluster.close();
    spawnSync('nft', ['flush', 'ruleset']);
  });
  await d.started();
  t.diagnostic(`first sync: ${JSON.stringify(d.syncs()[0])}`);

  const samples: ProcessSample[] = [];
  const convergence: number[] = [];
  let done = 0;
  const churnRates: number[] = [];
  while (done < FORM.updates) {
    const n = Math.min(FORM.quietEvery, FORM.updates - done);
    const base = done;
    const r = await cluster.churn(n, RATE, async (k) => {
      const total = base + k;
      // the history compacted, as kube-apiserver has etcd do every 5 minutes (30,000 updates at
      // 100/s): a live watch goes on, and the fake server's memory stays bounded
      if (total % 10_000 === 0) cluster.api.compact();
      if (total > FORM.warmup && total % FORM.sampleEvery === 0) samples.push(await d.sample());
    });
    churnRates.push(r.rate);
    done += n;
    // a quiet point: everything the server accepted is programmed, and nothing else
    convergence.push(await converged(cluster, d));
  }

  const syncs = d.syncs();
  const failures = d.lines().filter((l) => l.level === 'error' || /fail/i.test(String(l.msg)));
  assert.deepEqual(failures, [], 'no sync failed');
  assert.ok(syncs.every((s) => s.errors === 0));
  const metrics = await d.metrics();
  assert.equal(SoakDaemon.metric(metrics, 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total'), 0);
  const incremental = syncs.filter((s) => s.trigger === 'request').length;
  // the updates arrived as changes, not as re-lists: nothing here asked for one
  assert.equal(cluster.api.requests.filter((r) => !r.watch && r.resource === 'endpointslices' && !r.query.continue).length, 1, 'one list of the slices (its pages)');
  // the bound: the last third's peak within 16 MB of RSS and 8 MB of heap of the first third's
  assertFlat(samples, { rssKb: 16 << 10, heapBytes: 8 << 20 });
  const figure = (k: keyof ProcessSample) => `${Math.min(...samples.map((s) => s[k]))}–${Math.max(...samples.map((s) => s[k]))}`;
  t.diagnostic(
    `updates ${cluster.updates} at ${churnRates.map((x) => x.toFixed(0)).join('/')} per s; syncs ${syncs.length} (incremental ${incremental}); ` +
      `convergence at quiet points ${convergence.map((x) => x.toFixed(0)).join(', ')} ms; ` +
      `RSS ${figure('rssKb')} kB, heap ${figure('heapBytes')} B, fds ${figure('fds')}, threads ${figure('threads')} (${samples.length} samples)`,
  );
});
