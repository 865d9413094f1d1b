// KubeSources recovering from what a real API server does to watches: dropped connections
// (clean and cut), 410 Gone (in-stream ERROR event and HTTP status), restarts on the same port,
// 500s. Every test asserts the exact event sequence: nothing lost, nothing delivered twice.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { NODE, nodeObj, sentinel, sliceObj, startHarness, svcObj, type Harness } from '../helpers/informer-harness.js';

async function ready(): Promise<Harness> {
  const api = await FakeApiServer.start();
  api.create('services', svcObj('a', '10.96.0.1')); // 101
  api.create('services', svcObj('b', '10.96.0.2')); // 102
  api.create('services', svcObj('c', '10.96.0.3')); // 103
  api.create('endpointslices', sliceObj('a', 'a-1', ['10.0.0.1'])); // 104
  api.create('nodes', nodeObj(NODE)); // 105
  const h = await startHarness(api);
  await h.sources.synced();
  await api.waitFor(() => api.openWatches() === 4, 'four watches');
  assert.equal(h.events.length, 5);
  return h;
}

const svcLists = (h: Harness) => h.api.requests.filter((r) => r.resource === 'services' && !r.watch);
const svcWatches = (h: Harness) => h.api.requests.filter((r) => r.resource === 'services' && r.watch);

for (const how of ['clean', 'abrupt'] as const) {
  test(`a ${how}ly dropped watch resumes from the last resourceVersion: no re-list, no duplicates, nothing lost`, async () => {
    const h = await ready();
    const { api } = h;
    try {
      api.create('services', svcObj('d', '10.96.0.4')); // 106
      await h.waitEvents(6);
      const watchesBefore = svcWatches(h).length;
      assert.equal(api.dropWatches(how), 4);
      // Written while the client is reconnecting: replayed from the resumed resourceVersion.
      api.delete('services', 'a'); // 107
      api.create('services', svcObj('e', '10.96.0.5')); // 108
      const s = await sentinel(h);
      assert.deepEqual(h.events.slice(5), ['svc+ default/d@106', 'svc- default/a', 'svc+ default/e@108', s]);
      assert.equal(svcLists(h).length, 1, 'no re-list');
      const resumed = svcWatches(h).slice(watchesBefore);
      assert.ok(resumed.length >= 1);
      assert.equal(resumed[0]!.query.resourceVersion, '106', 'resumed from the last event seen');
      // The other resources reconnected too and saw nothing new.
      await api.waitFor(() => api.openWatches() === 4, 'four watches again');
      assert.equal(h.events.filter((e) => !e.startsWith('svc')).length, 2);
    } finally {
      await h.close();
    }
  });
}

test('410 Gone in the watch stream → re-list: a delete during the gap is delivered, unchanged objects are silent', async () => {
  const h = await ready();
  const { api } = h;
  try {
    // Keep the client out while the gap happens.
    api.failAllRequests(503);
    api.dropWatches('abrupt');
    await api.waitFor(() => h.errors.length >= 2, 'the client failing to reconnect');
    api.delete('services', 'a'); // 106: while disconnected
    const b = api.get('services', 'b')!;
    (b.spec as { clusterIP: string }).clusterIP = '10.96.0.22';
    api.update('services', b); // 107
    api.create('services', svcObj('f', '10.96.0.6')); // 108
    api.delete('endpointslices', 'a-1'); // 109
    api.compact(); // the history of the gap is gone: resuming from 105 must answer 410
    api.failAllRequests(false);
    const s = await sentinel(h);
    await api.waitFor(() => h.events.includes('slice- default/a-1'), 'slice delete');
    // The re-list: changed and new objects in list order, a page at a time, then deletes of
    // the objects no page had; 'c' (unchanged) produces nothing.
    assert.deepEqual(h.events.slice(5).filter((e) => e.startsWith('svc')), ['svc+ default/b@107', 'svc+ default/f@108', s, 'svc- default/a']);
    assert.deepEqual(h.events.slice(5).filter((e) => e.startsWith('slice')), ['slice- default/a-1']);
    assert.equal(h.events.slice(5).filter((e) => e.startsWith('node')).length, 0, 'the unchanged node is silent');
    const watch410 = svcWatches(h).filter((r) => r.status === 410);
    assert.equal(watch410.length, 1);
    assert.equal(watch410[0]!.query.resourceVersion, '105');
    assert.equal(svcLists(h).filter((r) => r.status === 200).length, 2, 'exactly one re-list');
    assert.equal(h.sources.stats().find((x) => x.resource === 'services')!.gone, 1);
  } finally {
    await h.close();
  }
});

test('410 Gone with nothing changed: the re-list delivers nothing', async () => {
  const h = await ready();
  const { api } = h;
  try {
    api.expireNextWatches(4);
    api.dropWatches('clean');
    await api.waitFor(() => api.requests.filter((r) => !r.watch && r.status === 200).length === 8, 'four re-lists');
    const s = await sentinel(h);
    assert.deepEqual(h.events.slice(5), [s]);
  } finally {
    await h.close();
  }
});

test('410 Gone answered as an HTTP status also re-lists once, without duplicates', async () => {
  const h = await ready();
  const { api } = h;
  try {
    api.failNext(1, { status: 410, resource: 'services', watch: true });
    api.dropWatches('clean');
    api.update('services', api.get('services', 'c')!); // 106
    const s = await sentinel(h);
    assert.deepEqual(h.events.slice(5), ['svc+ default/c@106', s]);
    assert.equal(svcLists(h).length, 2);
  } finally {
    await h.close();
  }
});

test('API server restart on the same port: the client backs off, reconnects and resumes exactly', async () => {
  const h = await ready();
  const { api } = h;
  try {
    await api.stop();
    await api.waitFor(() => h.errors.filter((e) => e.resource === 'services').length >= 3, 'failed reconnects while down');
    // Writes that reached etcd while this apiserver was down (through another one).
    api.delete('services', 'b'); // 106
    api.create('services', svcObj('g', '10.96.0.7')); // 107
    api.update('endpointslices', sliceObj('a', 'a-1', ['10.0.0.1', '10.0.0.2'])); // 108
    await api.listen();
    const s = await sentinel(h);
    const s2 = await sentinel(h, 'endpointslices');
    assert.deepEqual(h.events.slice(5).filter((e) => e.startsWith('svc')), ['svc- default/b', 'svc+ default/g@107', s]);
    assert.deepEqual(h.events.slice(5).filter((e) => e.startsWith('slice')), ['slice+ default/a-1@108', s2]);
    assert.equal(svcLists(h).length, 1, 'the history was still there: resumed, not re-listed');
    // Backoff grew while the server was down (0, then doubling from 10 ms, capped at 80 ms).
    const delays = h.errors.filter((e) => e.resource === 'services').map((e) => e.retryInMs);
    assert.deepEqual(delays.slice(0, 3), [0, 10, 20]);
    assert.ok(delays.every((d) => d <= 80));
    assert.equal(h.sources.stats().find((x) => x.resource === 'services')!.consecutiveFailures, 0, 'reset by the events after recovery');
  } finally {
    await h.close();
  }
});

test('500s on watches: exponential backoff up to the cap, then recovery without duplicates', async () => {
  const h = await ready();
  const { api } = h;
  try {
    api.failNext(6, { resource: 'services', watch: true });
    api.dropWatches('clean');
    api.create('services', svcObj('h', '10.96.0.8')); // 106
    const s = await sentinel(h);
    assert.deepEqual(h.events.slice(5), ['svc+ default/h@106', s]);
    const errs = h.errors.filter((e) => e.resource === 'services');
    // The clean drop (closed with no events) is the first failure, then six 500s.
    assert.deepEqual(errs.map((e) => e.retryInMs), [0, 10, 20, 40, 80, 80, 80]);
    assert.match(errs[1]!.error.message, /Internal Server Error/);
    assert.equal(svcLists(h).length, 1, 'a watch error keeps the resourceVersion: no re-list');
    assert.deepEqual(
      svcWatches(h).slice(1).map((r) => [r.status, r.query.resourceVersion]),
      [...Array.from({ length: 6 }, () => [500, '105']), [200, '105']],
    );
  } finally {
    await h.close();
  }
});

test('500s on lists after a 410: re-list retried with backoff; the barrier stays open', async () => {
  const h = await ready();
  const { api } = h;
  try {
    api.failNext(2, { resource: 'services', watch: false });
    api.expireNextWatches(1, 'services');
    api.delete('services', 'c'); // 106
    api.dropWatches('abrupt');
    const s = await sentinel(h);
    assert.deepEqual(h.events.slice(5).filter((e) => e.startsWith('svc')), [s, 'svc- default/c'], 'the delete after the last page');
    assert.equal(h.sources.hasSynced, true);
    assert.deepEqual(svcLists(h).map((r) => r.status), [200, 500, 500, 200]);
    await api.waitFor(() => api.openWatches('services') === 1, 'the services watch after the re-list');
    const w = svcWatches(h).map((r) => [r.status, r.query.resourceVersion]);
    assert.deepEqual(w.slice(0, 2), [[200, '105'], [410, '105']]);
    assert.equal(w.length, 3);
    assert.equal(w[2]![0], 200);
    assert.ok(Number(w[2]![1]) >= 106, 'watching from the re-list, not from before the gap');
  } finally {
    await h.close();
  }
});

test('BOOKMARKs advance the resume point without delivering anything', async () => {
  const h = await ready();
  const { api } = h;
  try {
    api.create('nodes', nodeObj('node-z')); // 106: not ours, but moves the revision
    api.sendBookmarks();
    await api.waitFor(() => h.sources.stats().every((x) => x.resourceVersion === '106'), 'bookmarks seen');
    const watchesBefore = svcWatches(h).length;
    api.dropWatches('clean');
    const s = await sentinel(h);
    assert.deepEqual(h.events.slice(5), [s]);
    assert.equal(svcWatches(h)[watchesBefore]!.query.resourceVersion, '106', 'resumed from the bookmark');
  } finally {
    await h.close();
  }
});

test('a watch the server never ends is aborted after timeoutSeconds + grace and resumed', async () => {
  const api = await FakeApiServer.start();
  api.create('services', svcObj('a', '10.96.0.1'));
  api.create('nodes', nodeObj(NODE));
  api.ignoreWatchTimeouts = true;
  const h = await startHarness(api, { watchTimeoutSeconds: 1, watchGraceMs: 50 });
  try {
    await h.sources.synced();
    await api.waitFor(() => svcWatches(h).length >= 2, 'a second services watch after the watchdog');
    api.create('services', svcObj('b', '10.96.0.2'));
    const s = await sentinel(h);
    assert.deepEqual(h.events.filter((e) => e.startsWith('svc')), ['svc+ default/a@101', 'svc+ default/b@103', s]);
    assert.equal(svcLists(h).length, 1);
    assert.match(h.errors.find((e) => e.resource === 'services')!.error.message, /abort/i);
  } finally {
    await h.close();
  }
});
