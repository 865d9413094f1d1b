// The informers against an API server that misbehaves without failing: a watch that stays open
// and sends nothing (aborted after the silence limit, resumed from its last resourceVersion, a
// re-list if that is gone), a list whose connection is reset mid-body, slow answers. Every
// test decides from events (the error reported, the object delivered); the silence limit is
// short only so the test is.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { informerErrorReason } from '../../src/kube/informers.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { NODE, nodeObj, sentinel, sliceObj, startHarness, svcObj } from '../helpers/informer-harness.js';

const SILENCE_MS = 1500;

async function started(api: FakeApiServer) {
  api.create('services', svcObj('a', '10.96.0.1')); // 101
  api.create('endpointslices', sliceObj('a', 'a-1', ['10.0.0.1'])); // 102
  api.create('nodes', nodeObj(NODE)); // 103
  const h = await startHarness(api, { watchSilenceLimitMs: SILENCE_MS });
  await h.sources.synced();
  await api.waitFor(() => api.openWatches() === 4, 'four watches');
  return h;
}

const watches = (api: FakeApiServer, resource: string) => api.requests.filter((r) => r.resource === resource && r.watch);
const lists = (api: FakeApiServer, resource: string) => api.requests.filter((r) => r.resource === resource && !r.watch);

test('a hung watch (open, silent: no event, no bookmark) is aborted after the silence limit and resumed from its resourceVersion: what changed during the stall arrives once, no re-list', async () => {
  // Periodic bookmarks as kube-apiserver's watch cache sends them (here far more often than the
  // limit): a healthy quiet watch is not silent.
  const api = await FakeApiServer.start(0, { bookmarkIntervalMs: 100 });
  const h = await started(api);
  try {
    const rv = api.resourceVersion;
    const before = watches(api, 'services').length;
    assert.equal(api.stallWatches(), 4);
    api.stallWatches(false); // only the open ones hang
    api.create('services', svcObj('b', '10.96.0.2')); // written during the stall
    api.delete('endpointslices', 'a-1');
    await api.waitFor(() => h.errors.some((e) => e.resource === 'services' && e.reason === 'silent_watch'), 'the services watch taken for hung');
    const e = h.errors.find((x) => x.resource === 'services' && x.reason === 'silent_watch')!;
    assert.match(e.error.message, new RegExp(`^watch /api/v1/services: silent for ${SILENCE_MS / 1000} s \\(no event, no bookmark\\)`));
    assert.equal(informerErrorReason(e.error), 'silent_watch');
    const s = await sentinel(h);
    await api.waitFor(() => h.events.includes('slice- default/a-1'), 'the slice delete');
    assert.deepEqual(h.events.slice(3).filter((x) => x.startsWith('svc')), ['svc+ default/b@104', s]);
    assert.deepEqual(h.events.slice(3).filter((x) => x.startsWith('slice')), ['slice- default/a-1']);
    assert.equal(lists(api, 'services').length, 1, 'no re-list');
    assert.equal(watches(api, 'services')[before]!.query.resourceVersion, rv, 'resumed from where the hung watch was');
    assert.ok(api.requests.filter((r) => r.watch).every((r) => r.query.allowWatchBookmarks === 'true'), 'every watch asks for bookmarks');
  } finally {
    await h.close();
  }
});

test('a hung watch whose history was compacted meanwhile: the resumed watch gets 410 and the informer re-lists; nothing lost, a delete included', async () => {
  const api = await FakeApiServer.start(0, { bookmarkIntervalMs: 100 });
  const h = await started(api);
  try {
    api.stallWatches();
    api.stallWatches(false);
    api.delete('services', 'a');
    api.create('services', svcObj('c', '10.96.0.3'));
    api.compact();
    await api.waitFor(() => h.errors.some((e) => e.resource === 'services' && e.reason === 'gone'), 'the 410 after the silent watch');
    const s = await sentinel(h);
    await api.waitFor(() => h.events.includes('svc- default/a'), 'the delete');
    assert.deepEqual(new Set(h.events.slice(3).filter((x) => x.startsWith('svc'))), new Set(['svc- default/a', 'svc+ default/c@105', s]));
    assert.equal(h.events.filter((x) => x === 'svc+ default/c@105').length, 1);
    assert.ok(h.errors.some((e) => e.resource === 'services' && e.reason === 'silent_watch'));
    assert.equal(lists(api, 'services').filter((r) => r.status === 200).length, 2, 'one re-list');
  } finally {
    await h.close();
  }
});

test('a list reset mid-body is a connection error, retried: the objects arrive whole, once', async () => {
  const api = await FakeApiServer.start();
  api.create('services', svcObj('a', '10.96.0.1'));
  api.create('services', svcObj('b', '10.96.0.2'));
  api.create('nodes', nodeObj(NODE));
  api.resetNextList(3);
  const h = await startHarness(api);
  try {
    await h.sources.synced();
    const resets = api.requests.filter((r) => r.fault === 'reset');
    assert.equal(resets.length, 3);
    const byReset = h.errors.filter((e) => e.reason === 'connection');
    assert.equal(byReset.length, 3, JSON.stringify(h.errors.map((e) => [e.resource, e.reason, e.error.message])));
    assert.deepEqual(h.events.filter((x) => x.startsWith('svc')), ['svc+ default/a@101', 'svc+ default/b@102']);
  } finally {
    await h.close();
  }
});

test('slow answers (lists and watch headers delayed) delay the informers, not break them', async () => {
  const api = await FakeApiServer.start(0, { bookmarkIntervalMs: 100 });
  api.create('services', svcObj('a', '10.96.0.1'));
  api.create('nodes', nodeObj(NODE));
  api.delayResponses(200);
  // the silence limit starts at a watch's headers: a slow connect is not a silent watch
  const h = await startHarness(api, { watchSilenceLimitMs: 150 });
  try {
    await h.sources.synced();
    await api.waitFor(() => api.openWatches() === 4, 'four watches');
    api.create('services', svcObj('b', '10.96.0.2'));
    await api.waitFor(() => h.events.includes('svc+ default/b@103'), 'the event');
    api.delayResponses(0);
    assert.deepEqual(h.events.filter((x) => x.startsWith('svc')), ['svc+ default/a@101', 'svc+ default/b@103']);
  } finally {
    await h.close();
  }
});
