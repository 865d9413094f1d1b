// ThreadedProxier: the proxier on its own thread gives the same writes, report and model
// summary as an in-process Proxier over the same objects; typed errors cross back as
// NetlinkErrors; a thread that fails to open or dies rejects instead of hanging.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { NetlinkError } from '../../src/errors.js';
import { loadManifests } from '../../src/kube/manifests.js';
import { Proxier, type ProxierOptions } from '../../src/proxy/proxier.js';
import { SyncThreadError, ThreadedProxier, fromWireReport, toWireReport } from '../../src/proxy/sync-thread.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const EXAMPLE = join(import.meta.dirname, '../../../test/fixtures/kube/example');
const KERNEL = pathToFileURL(join(import.meta.dirname, '../fixtures/kube/sync-thread-kernel.js')).href;
const proxierOptions: ProxierOptions = {
  node: { name: 'node-a', addresses: ['10.0.0.11'] },
  config: { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] },
  vipLink: 'kube-ipvs0',
  glue: true,
};

function start(fail?: string): Promise<ThreadedProxier> {
  return ThreadedProxier.start({ proxier: proxierOptions, kernel: { glue: true }, kernelModule: fail ? `${KERNEL}?fail=${fail}` : KERNEL });
}

test('sync thread: the same writes, report and model summary as an in-process proxier; a resync writes nothing; a delete reaches the thread', async (t) => {
  const set = await loadManifests([EXAMPLE]);
  const local = new Proxier(fakeKernel(), proxierOptions);
  const remote = await start();
  t.after(() => remote.close());
  for (const s of set.services) local.onServiceUpdate(s), remote.onServiceUpdate(s);
  for (const s of set.endpointSlices) local.onSliceUpdate(s), remote.onSliceUpdate(s);

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
  assert.deepEqual(b.model, {
    services: a.model.services.length,
    vips: a.model.vips.length,
    healthChecks: a.model.healthChecks,
    noLocalEndpointsTotal: a.model.noLocalEndpointsTotal,
    warnings: a.model.warnings,
  });

  const again = await remote.sync(true);
  assert.equal(again.report.ipvs.writes + again.report.addresses.writes + again.report.nft.writes, 0);

  // posted just before the request: in that sync (messages keep their order)
  const extra = svc('extra', { clusterIP: '10.96.7.7', ports: [{ port: 80 }] });
  remote.onServiceUpdate(extra), local.onServiceUpdate(extra);
  remote.onSliceUpdate(slice('extra', 'extra-1', [{ port: 8080 }], [{ ip: '10.244.9.9' }]));
  const added = await remote.sync(false);
  assert.equal(added.report.mode, 'incremental');
  assert.deepEqual(added.report.ipvs.ops, { addService: 1, addDestination: 1 });
  assert.equal(added.model.services, a.model.services.length + 1);
  remote.onServiceDelete('default/extra');
  const removed = await remote.sync(false);
  assert.deepEqual(removed.report.ipvs.ops, { deleteService: 1 });
  assert.equal(removed.model.services, a.model.services.length);
});

test('sync thread: a failed write comes back as the NetlinkError the engine reported (code, op, index; one object in errors and in its kind)', async (t) => {
  const set = await loadManifests([EXAMPLE]);
  const kernel = fakeKernel();
  kernel.ipvs.failNext = { index: 0, code: 'EEXIST' };
  const local = new Proxier(kernel, proxierOptions);
  const remote = await start('ipvs');
  t.after(() => remote.close());
  for (const s of set.services) local.onServiceUpdate(s), remote.onServiceUpdate(s);
  for (const s of set.endpointSlices) local.onSliceUpdate(s), remote.onSliceUpdate(s);
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
  remote.onServiceUpdate(svc('web', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] }));
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
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(exited, false);
  await assert.rejects(remote.sync(true), /closed/);
});

test('sync thread: flush() resolves once the objects posted before are taken in, without a sync', async (t) => {
  const remote = await start();
  t.after(() => remote.close());
  remote.onServiceUpdate(svc('web', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] }));
  await remote.flush();
  // taken in, not synced: the next sync is the one that programs it
  const r = await remote.sync(false);
  assert.deepEqual(r.report.ipvs.ops, { addService: 1 });
  assert.equal(r.serviceChanges, 1);
});

test('sync thread: a report crosses as plain data and comes back with NetlinkErrors', () => {
  const err = new NetlinkError({ message: 'add dest: ENOENT', code: 'ENOENT', errno: 2, kind: 'kernel', op: 'addDest', index: 4, extack: 'no such service' });
  const k = (errors: NetlinkError[]) => ({ ops: {}, writes: 0, errors });
  const report = { mode: 'full' as const, ipvs: k([err]), addresses: k([]), routes: k([]), ipsets: k([]), nft: k([]), flowsFlushed: 0, draining: 0, errors: [err], durations: { observeMs: 1, diffMs: 2, applyMs: 3, totalMs: 6 } };
  const wire = structuredClone(toWireReport(report));
  const back = fromWireReport(wire);
  const e = back.errors[0]!;
  assert.ok(e instanceof NetlinkError);
  assert.deepEqual({ ...e, message: e.message }, { ...err, message: err.message });
  assert.equal(back.ipvs.errors[0], e);
  assert.deepEqual(back.durations, report.durations);
});
