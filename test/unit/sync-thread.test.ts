// ThreadedProxier: the proxier on its own thread gives the same writes, report and model
// summary as an in-process Proxier over the same objects; typed errors cross back as
// NetlinkErrors; a thread that fails to open or dies rejects instead of hanging.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { NetlinkError } from '../../src/errors.js';
import { loadManifests, ManifestFolder } from '../../src/kube/manifests.js';
import { Proxier, type ProxierOptions } from '../../src/proxy/proxier.js';
import { SYNC_THREAD_NICE, SyncThreadError, ThreadedProxier, fromWireReport, toWireReport } from '../../src/proxy/sync-thread.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import { slice, svc } from '../fixtures/kube/builders.js';
import { FakeApiServer, type KubeObject } from '../helpers/fake-apiserver.js';
import { nodeObj, serviceCIDRObj, TEST_OPTS } from '../helpers/informer-harness.js';

const EXAMPLE = join(import.meta.dirname, '../../../test/fixtures/kube/example');
const KERNEL = pathToFileURL(join(import.meta.dirname, '../fixtures/kube/sync-thread-kernel.js')).href;
const proxierOptions: ProxierOptions = {
  node: { name: 'node-a', addresses: ['10.0.0.11'] },
  config: { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] },
  vipLink: 'kube-ipvs0',
  glue: true,
};

function start(fail?: string, nice?: number): Promise<ThreadedProxier> {
  return ThreadedProxier.start({ proxier: proxierOptions, kernel: { glue: true }, kernelModule: fail ? `${KERNEL}?fail=${fail}` : KERNEL, ...(nice !== undefined ? { nice } : {}) });
}

/** A temp folder of manifests (the example folder's when `example`), removed after the test. */
function manifests(t: { after: (f: () => void) => void }, example = false): string {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-thread-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  if (example) cpSync(EXAMPLE, dir, { recursive: true });
  return dir;
}

/** Writes objects into the folder as one manifest file (JSON is YAML). */
function put(dir: string, file: string, objects: object[]): void {
  writeFileSync(join(dir, file), objects.map((o) => JSON.stringify(o)).join('\n---\n'));
}

const WEB = svc('web', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] });

/** A thread's nice value, from /proc/self/task/<tid>/stat (field 19). */
function niceOf(tid: number | string): number {
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
}

test('sync thread: the same writes, report and model summary as an in-process proxier; a resync writes nothing; a delete reaches the thread', async (t) => {
  const set = await loadManifests([EXAMPLE]);
  const local = new Proxier(fakeKernel(), proxierOptions);
  const remote = await start();
  t.after(() => remote.close());
  for (const s of set.services) local.onServiceUpdate(s);
  for (const s of set.endpointSlices) local.onSliceUpdate(s);
  const dir = manifests(t, true);
  await remote.loadManifests(dir);

  const a = await local.sync(true);
  const b = await remote.sync(true);
  assert.deepEqual(b.report.errors, []);
  assert.ok(b.report.ipvs.writes > 0 && b.report.addresses.writes > 0 && b.report.nft.writes > 0, JSON.stringify(b.report));
  for (const k of ['ipvs', 'addresses', 'routes', 'ipsets', 'nft'] as const) assert.deepEqual(b.report[k], a.report[k], k);
  assert.equal(b.report.mode, 'full');
  assert.deepEqual(
    { serviceChanges: b.serviceChanges, endpointChanges: b.endpointChanges },
    { serviceChanges: a.serviceChanges, endpointChanges: a.endpointChanges },
  );
  assert.deepEqual(b.summary, {
    services: a.model!.services.length,
    vips: a.model!.vips.length,
    healthChecks: a.summary.healthChecks,
    noLocalEndpointsTotal: a.summary.noLocalEndpointsTotal,
    warnings: a.summary.warnings,
  });

  const again = await remote.sync(true);
  assert.equal(again.report.ipvs.writes + again.report.addresses.writes + again.report.nft.writes, 0);

  // loaded without waiting just before the request: in that sync (requests keep their order)
  put(dir, 'extra.json', [svc('extra', { clusterIP: '10.96.7.7', ports: [{ port: 80 }] }), slice('extra', 'extra-1', [{ port: 8080 }], [{ ip: '10.244.9.9' }])]);
  void remote.loadManifests(dir);
  const added = await remote.sync(false);
  assert.equal(added.report.mode, 'incremental');
  assert.deepEqual(added.report.ipvs.ops, { addService: 1, addDestination: 1 });
  assert.equal(added.summary.services, a.model!.services.length + 1);
  rmSync(join(dir, 'extra.json'));
  await remote.loadManifests(dir);
  const removed = await remote.sync(false);
  assert.deepEqual(removed.report.ipvs.ops, { deleteService: 1 });
  assert.equal(removed.summary.services, a.model!.services.length);
});

test('sync thread: a failed write comes back as the NetlinkError the engine reported (code, op, index; one object in errors and in its kind)', async (t) => {
  const set = await loadManifests([EXAMPLE]);
  const kernel = fakeKernel();
  kernel.ipvs.failNext = { index: 0, code: 'EEXIST' };
  const local = new Proxier(kernel, proxierOptions);
  const remote = await start('ipvs');
  t.after(() => remote.close());
  for (const s of set.services) local.onServiceUpdate(s);
  for (const s of set.endpointSlices) local.onSliceUpdate(s);
  await remote.loadManifests(EXAMPLE);
  const a = await local.sync(true);
  const r = await remote.sync(true);
  assert.ok(a.report.errors.length > 0);
  const fields = (e: NetlinkError) => ({ message: e.message, code: e.code, errno: e.errno, kind: e.kind, op: e.op, index: e.index, extack: e.extack });
  assert.deepEqual(r.report.errors.map(fields), a.report.errors.map(fields));
  const e = r.report.errors[0]!;
  assert.ok(e instanceof NetlinkError, String(e));
  assert.equal(e.code, 'EEXIST');
  assert.equal(e.index, 0);
  assert.equal(r.report.ipvs.errors[0], e);
  assert.deepEqual(r.report.ipvs.ops, a.report.ipvs.ops);
});

test('sync thread: a kernel that cannot be opened rejects start() with its typed error', async () => {
  await assert.rejects(start('open'), (e: unknown) => e instanceof NetlinkError && e.code === 'EPERM' && e.op === 'open');
});

test('sync thread: a thread that dies fails the sync in flight and every later one', async (t) => {
  const remote = await start('exit');
  t.after(() => remote.close());
  await remote.loadManifests(EXAMPLE);
  await assert.rejects(remote.sync(true), (e: unknown) => e instanceof SyncThreadError && /exited \(code 3\)/.test(e.message));
  await assert.rejects(remote.sync(true), SyncThreadError);
  await assert.rejects(remote.flush(), SyncThreadError);
  const e = await remote.exited;
  assert.match(e.message, /exited \(code 3\)/);
});

test('sync thread: close() stops it without reporting it exited', async () => {
  const remote = await start();
  let exited = false;
  void remote.exited.then(() => (exited = true));
  await remote.close();
  // No pause needed: close() resolves on the worker's 'exit' event, after the listener that would
  // report it (registered first) and after that report's then() — nothing later can report it.
  assert.equal(exited, false);
  await assert.rejects(remote.sync(true), /closed/);
});

test('sync thread: flush() resolves with the changes the thread holds, without a sync', async (t) => {
  const remote = await start();
  t.after(() => remote.close());
  const dir = manifests(t);
  put(dir, 'web.json', [WEB]);
  await remote.loadManifests(dir);
  // forget what the load reported: flush reports it again, from the thread
  remote.pendingChanges = { services: 0, endpoints: 0 };
  await remote.flush();
  assert.deepEqual(remote.pendingChanges, { services: 1, endpoints: 0 });
  // taken in, not synced: the next sync is the one that programs it
  const r = await remote.sync(false);
  assert.deepEqual(r.report.ipvs.ops, { addService: 1 });
  assert.equal(r.serviceChanges, 1);
});

test('sync thread: loadManifests reads the folder on the thread (the writes of an in-process proxier fed by the same folder); a reload deletes what disappeared; a folder that does not parse rejects with its ManifestError and changes nothing', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-thread-folder-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  cpSync(EXAMPLE, dir, { recursive: true });
  const local = new Proxier(fakeKernel(), proxierOptions);
  const folder = new ManifestFolder(dir);
  const remote = await start();
  t.after(() => remote.close());

  const counts = await remote.loadManifests(dir);
  assert.deepEqual(counts, await folder.load(local));
  assert.ok(counts.services >= 3 && counts.endpointSlices >= 3, JSON.stringify(counts));
  const a = await local.sync(true);
  const b = await remote.sync(true);
  assert.deepEqual(b.report.errors, []);
  assert.ok(b.report.ipvs.writes > 0, JSON.stringify(b.report.ipvs));
  for (const k of ['ipvs', 'addresses', 'nft'] as const) assert.deepEqual(b.report[k], a.report[k], k);
  assert.equal(b.summary.services, a.model!.services.length);

  // the NodePort service's file goes: its Service and EndpointSlice are deleted on the thread
  rmSync(join(dir, 'nodeport.yaml'));
  const fewer = await remote.loadManifests(dir);
  assert.deepEqual(fewer, await folder.load(local));
  assert.equal(fewer.services, counts.services - 1);
  const gone = await remote.sync(false);
  const goneLocal = await local.sync(false);
  assert.deepEqual(gone.report.ipvs.ops, goneLocal.report.ipvs.ops);
  assert.ok((gone.report.ipvs.ops.deleteService ?? 0) > 0, JSON.stringify(gone.report.ipvs.ops));
  assert.equal(gone.summary.services, goneLocal.model!.services.length);

  // a file that does not parse: the typed error, by name and message, and no change
  writeFileSync(join(dir, 'broken.yaml'), 'kind: Service\nmetadata: [\n');
  await assert.rejects(remote.loadManifests(dir), (e: unknown) => e instanceof Error && e.name === 'ManifestError' && e.message.includes('broken.yaml'));
  const after = await remote.sync(true);
  assert.deepEqual(after.report.errors, []);
  assert.equal(after.report.ipvs.writes + after.report.addresses.writes + after.report.nft.writes, 0);
  assert.equal(after.summary.services, gone.summary.services);
  // and the thread keeps working once the folder parses again
  rmSync(join(dir, 'broken.yaml'));
  assert.deepEqual(await remote.loadManifests(dir), fewer);
});

test('sync thread: the thread runs at a lower priority than the daemon thread (its own nice value; 0 leaves it as is)', async (t) => {
  const mainNice = niceOf(process.pid);
  const dflt = await start();
  t.after(() => dflt.close());
  assert.ok(readdirSync('/proc/self/task').includes(String(dflt.threadId)), `thread ${dflt.threadId}`);
  assert.notEqual(dflt.threadId, process.pid);
  assert.equal(dflt.niceError, undefined);
  assert.ok(SYNC_THREAD_NICE > 0);
  assert.equal(niceOf(dflt.threadId), SYNC_THREAD_NICE);
  // the daemon's thread keeps its own
  assert.equal(niceOf(process.pid), mainNice);
  const seven = await start(undefined, 7);
  t.after(() => seven.close());
  assert.equal(niceOf(seven.threadId), 7);
  const zero = await start(undefined, 0);
  t.after(() => zero.close());
  assert.equal(niceOf(zero.threadId), mainNice);
  // and it still syncs
  const dir = manifests(t);
  put(dir, 'web.json', [WEB]);
  await seven.loadManifests(dir);
  assert.deepEqual((await seven.sync(false)).report.ipvs.ops, { addService: 1 });
  assert.equal(niceOf(process.pid), mainNice);
});

test('sync thread: a report crosses as plain data and comes back with NetlinkErrors', () => {
  const err = new NetlinkError({ message: 'add dest: ENOENT', code: 'ENOENT', errno: 2, kind: 'kernel', op: 'addDest', index: 4, extack: 'no such service' });
  const k = (errors: NetlinkError[]) => ({ ops: {}, writes: 0, errors });
  const report = { mode: 'full' as const, ipvs: k([err]), addresses: k([]), routes: k([]), ipsets: k([]), nft: k([]), flowsFlushed: 0, draining: 0, errors: [err], invalid: [{ kind: 'nft' as const, object: 'ip ipvsync sources', field: 'elements', message: '10.0.0.1/8 has host bits set' }], durations: { observeMs: 1, diffMs: 2, applyMs: 3, totalMs: 6 } };
  const wire = structuredClone(toWireReport(report));
  const back = fromWireReport(wire);
  const e = back.errors[0]!;
  assert.ok(e instanceof NetlinkError);
  assert.deepEqual({ ...e, message: e.message }, { ...err, message: err.message });
  assert.equal(back.ipvs.errors[0], e);
  assert.deepEqual(back.durations, report.durations);
  assert.deepEqual(back.invalid, report.invalid, 'the refused objects cross too (the daemon logs them)');
});

/** A fake API server holding the example folder's Services and EndpointSlices and this node. */
async function exampleApi(): Promise<{ api: FakeApiServer; set: Awaited<ReturnType<typeof loadManifests>> }> {
  const set = await loadManifests([EXAMPLE]);
  const api = await FakeApiServer.start();
  for (const s of set.services) api.create('services', s as unknown as KubeObject);
  for (const s of set.endpointSlices) api.create('endpointslices', s as unknown as KubeObject);
  api.create('nodes', nodeObj('node-a'));
  return { api, set };
}

test('sync thread: watchKube lists and watches the API on the thread (the writes of an in-process proxier fed the same objects); a watched add and delete each reach the thread and signal a change; the Node crosses; stop() closes the watches', async (t) => {
  const { api, set } = await exampleApi();
  t.after(() => api.stop());
  const local = new Proxier(fakeKernel(), proxierOptions);
  for (const s of set.services) local.onServiceUpdate(s);
  for (const s of set.endpointSlices) local.onSliceUpdate(s);
  const remote = await start();
  t.after(() => remote.close());
  let changes = 0;
  const nodes: Array<string | undefined> = [];
  const errors: string[] = [];
  const kube = await remote.watchKube({
    source: { server: api.url },
    nodeName: 'node-a',
    informer: TEST_OPTS,
    onChange: () => changes++,
    onNode: (n) => nodes.push(n?.metadata?.name),
    onError: (e) => errors.push(`${e.resource}: ${e.error.message}`),
  });
  await kube.synced;
  // the thread made the requests: this thread holds no informer
  assert.deepEqual(api.requests.filter((r) => !r.watch).map((r) => r.resource).sort(), ['endpointslices', 'nodes', 'servicecidrs', 'services']);
  await api.waitFor(() => nodes.length === 1, 'the node');
  assert.deepEqual(nodes, ['node-a']);
  // the change signal and the synced answer are separate messages from the thread: either may come first
  await api.waitFor(() => changes >= 1, 'the first lists signal a change');
  // a change signal per batch, not per object
  assert.ok(changes < set.services.length + set.endpointSlices.length, `${changes} signals`);

  const a = await local.sync(true);
  const b = await remote.sync(true);
  assert.deepEqual(b.report.errors, []);
  assert.ok(b.report.ipvs.writes > 0, JSON.stringify(b.report.ipvs));
  for (const k of ['ipvs', 'addresses', 'routes', 'ipsets', 'nft'] as const) assert.deepEqual(b.report[k], a.report[k], k);
  assert.equal(b.summary.services, a.model!.services.length);

  // watched: an added service and its slice
  const before = changes;
  api.create('services', svc('extra', { clusterIP: '10.96.7.7', ports: [{ port: 80 }] }) as unknown as KubeObject);
  api.create('endpointslices', slice('extra', 'extra-1', [{ port: 8080 }], [{ ip: '10.244.9.9' }]) as unknown as KubeObject);
  await api.waitFor(() => changes > before, 'a change signal');
  let added = await remote.sync(false);
  // the slice may come in a later batch than its service
  if (added.report.ipvs.ops.addDestination === undefined) {
    await api.waitFor(() => changes > before + 1, 'the slice');
    const more = await remote.sync(false);
    added = { ...more, report: { ...more.report, ipvs: { ...more.report.ipvs, ops: { ...added.report.ipvs.ops, ...more.report.ipvs.ops } } } };
  }
  assert.deepEqual(added.report.ipvs.ops, { addService: 1, addDestination: 1 });
  assert.equal(added.summary.services, a.model!.services.length + 1);

  // watched: a delete
  const beforeDelete = changes;
  api.delete('services', 'extra');
  await api.waitFor(() => changes > beforeDelete, 'the delete');
  assert.deepEqual((await remote.sync(false)).report.ipvs.ops, { deleteService: 1 });

  // the node's update crosses too
  api.update('nodes', nodeObj('node-a', 'z2'));
  await api.waitFor(() => nodes.length === 2, 'the node update');
  assert.deepEqual(errors, []);

  // stop: the watches close, and a later change does not reach the proxier
  await kube.stop();
  await api.waitFor(() => api.openWatches() === 0, 'no watch open');
  const stopped = changes;
  api.create('services', svc('late', { clusterIP: '10.96.8.8', ports: [{ port: 80 }] }) as unknown as KubeObject);
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(changes, stopped);
  assert.deepEqual((await remote.sync(false)).report.ipvs.ops, {});
});

test('sync thread: watchKube reports list failures as they retry and syncs once the API answers; a configuration that does not load rejects with its KubeConfigError; one watch per thread', async (t) => {
  const { api } = await exampleApi();
  t.after(() => api.stop());
  api.failNext(2, { resource: 'services', watch: false, status: 503 });
  const remote = await start();
  t.after(() => remote.close());
  const errors: Array<{ resource: string; message: string; retryInMs: number }> = [];
  const kube = await remote.watchKube({
    source: { server: api.url },
    nodeName: 'node-a',
    informer: TEST_OPTS,
    onError: (e) => errors.push({ resource: e.resource, message: e.error.message, retryInMs: e.retryInMs }),
  });
  t.after(() => kube.stop());
  await kube.synced;
  assert.equal(errors.length, 2, JSON.stringify(errors));
  for (const e of errors) {
    assert.equal(e.resource, 'services');
    assert.match(e.message, /HTTP 503/);
  }
  assert.ok((await remote.sync(true)).report.ipvs.writes > 0);
  await assert.rejects(remote.watchKube({ source: { server: api.url }, nodeName: 'node-a' }), SyncThreadError);

  const other = await start();
  t.after(() => other.close());
  await assert.rejects(
    other.watchKube({ source: { kubeconfig: '/nonexistent/kubeconfig' }, nodeName: 'node-a' }),
    (e: unknown) => e instanceof Error && e.name === 'KubeConfigError' && e.message.includes('/nonexistent/kubeconfig'),
  );
});

test("the daemon's command loads neither the proxier nor the engine until it runs one in process (the sync thread loads its own)", () => {
  const register = join(import.meta.dirname, '../helpers/load-recorder-register.js');
  const loaded = (code: string): string[] => {
    const dir = mkdtempSync(join(tmpdir(), 'ipvsync-loads-'));
    try {
      const log = join(dir, 'loads');
      writeFileSync(log, '');
      const r = spawnSync(process.execPath, ['--import', register, '--input-type=module', '-e', code], { env: { ...process.env, LOAD_LOG: log, LOAD_MATCH: '/dist/src/' }, encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return readFileSync(log, 'utf8').split('\n').filter(Boolean).map((u) => u.replace(/^.*\/dist\/src\//, ''));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  const src = (m: string) => JSON.stringify(pathToFileURL(join(import.meta.dirname, '../../src', m)).href);
  const heavy = ['proxy/proxier.js', 'engine/engine.js', 'proxy/ipvs/plane.js', 'kernel/nftables.js', 'kube/manifests.js', 'proxy/kernel.js'];
  const daemon = loaded(`await import(${src('cli/proxy.js')}); await import(${src('proxy/sync-thread.js')});`);
  assert.ok(daemon.includes('cli/proxy.js') && daemon.includes('kernel/ipvs.js') && daemon.includes('proxy/node-addresses.js'), daemon.join(' '));
  assert.deepEqual(heavy.filter((m) => daemon.includes(m)), []);
  // the recorder sees them when they are loaded
  const inProcess = loaded(`await import(${src('proxy/proxier.js')}); await import(${src('kube/manifests.js')}); await import(${src('proxy/kernel.js')});`);
  assert.deepEqual(heavy.filter((m) => !inProcess.includes(m)), []);
});

test("sync thread: the API's Node gives the zone of topology hints; a new zone label is a change signal, and the sync after it programs that zone's endpoints", async (t) => {
  const api = await FakeApiServer.start();
  t.after(() => api.stop());
  api.create('services', svc('web', { clusterIP: '10.96.5.5', ports: [{ port: 80 }] }) as unknown as KubeObject);
  api.create('endpointslices', slice('web', 'web-1', [{ port: 8080 }], [
    { ip: '10.244.1.1', node: 'node-b', zones: ['z1'] },
    { ip: '10.244.1.2', node: 'node-b', zones: ['z2'] },
    { ip: '10.244.1.3', node: 'node-b', zones: ['z1'] },
  ]) as unknown as KubeObject);
  api.create('nodes', nodeObj('node-a', 'z1'));
  const remote = await start();
  t.after(() => remote.close());
  let changes = 0;
  const nodesSeen: unknown[] = [];
  const kube = await remote.watchKube({ source: { server: api.url }, nodeName: 'node-a', informer: TEST_OPTS, onChange: () => changes++, onNode: (n) => nodesSeen.push(n) });
  t.after(() => kube.stop());
  await kube.synced;
  // the Node may come after the first lists' change signal: sync once it did
  await api.waitFor(() => changes >= 1, 'the first change signal');
  let first = await remote.sync(true);
  if (first.report.ipvs.ops.addDestination !== 2) {
    await api.waitFor(() => changes >= 2, 'the node');
    first = await remote.sync(true);
  }
  // z1's two endpoints, not z2's
  assert.deepEqual(first.report.ipvs.ops, { addService: 1, addDestination: 2 });
  const before = changes;
  api.update('nodes', nodeObj('node-a', 'z2'));
  await api.waitFor(() => changes > before, 'the zone change signal');
  assert.deepEqual((await remote.sync(false)).report.ipvs.ops, { addDestination: 1, deleteDestination: 2 });
  // a change of another label is no change to sync
  const same = changes;
  api.update('nodes', { ...nodeObj('node-a', 'z2'), metadata: { name: 'node-a', labels: { 'topology.kubernetes.io/zone': 'z2', tier: 'edge' } } });
  // Events, not a pause: the thread took the update in once its Node comes back here; a change
  // signal for it would have been posted (setImmediate) before the thread reads the flush posted
  // after that, and the thread's messages arrive in order — so once flush() resolves, a signal
  // for this update would have been counted.
  await api.waitFor(() => nodesSeen.some((n) => (n as { metadata?: { labels?: Record<string, string> } } | undefined)?.metadata?.labels?.tier === 'edge'), 'the label update on the thread');
  await remote.flush();
  assert.equal(changes, same);
});

test('sync thread: the API\'s ServiceCIDRs give the nftables plane its service CIDRs; a change of one is a change signal, and the sync after it writes only that set\'s elements', async (t) => {
  const api = await FakeApiServer.start();
  t.after(() => api.stop());
  api.create('services', svc('web', { clusterIP: '10.96.5.5', ports: [{ port: 80 }] }) as unknown as KubeObject);
  api.create('servicecidrs', serviceCIDRObj('kubernetes', ['10.96.0.0/16']));
  const remote = await ThreadedProxier.start({ proxier: { ...proxierOptions, mode: 'nftables' }, kernel: { glue: true }, kernelModule: KERNEL });
  t.after(() => remote.close());
  let changes = 0;
  const kube = await remote.watchKube({ source: { server: api.url }, nodeName: 'node-a', informer: TEST_OPTS, onChange: () => changes++ });
  t.after(() => kube.stop());
  await kube.synced;
  assert.deepEqual((await remote.sync(true)).report.errors, []);
  const before = changes;
  api.update('servicecidrs', serviceCIDRObj('kubernetes', ['10.97.0.0/16']));
  await api.waitFor(() => changes > before, 'the ServiceCIDR change signal');
  const moved = await remote.sync(false);
  assert.deepEqual(moved.report.errors, []);
  assert.deepEqual(moved.report.nft.ops, { 'add-elements': 1, 'delete-elements': 1 }, 'the old range out of service-cidrs, the new one in');
  const gone = changes;
  api.delete('servicecidrs', 'kubernetes');
  await api.waitFor(() => changes > gone, 'the ServiceCIDR delete signal');
  assert.deepEqual((await remote.sync(false)).report.nft.ops, { 'delete-elements': 1 }, 'no object and no configured range: none');
});
