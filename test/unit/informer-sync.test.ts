// KubeSources against a fake API server speaking the real list/watch protocol: the initial-list
// barrier, live events, the Node field selector, ServiceCIDRs (served or not), plain objects,
// paging, stop.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { NODE, nodeObj, sentinel, serviceCIDRObj, sliceObj, startHarness, svcObj } from '../helpers/informer-harness.js';

async function seeded(): Promise<FakeApiServer> {
  const api = await FakeApiServer.start();
  api.create('services', svcObj('web', '10.96.0.10'));
  api.create('services', svcObj('db', '10.96.0.20', 'prod'));
  api.create('endpointslices', sliceObj('web', 'web-abc', ['10.0.0.1', '10.0.0.2']));
  api.create('nodes', nodeObj(NODE));
  api.create('nodes', nodeObj('node-b'));
  return api;
}

test('initial list: every object once, then synced; lists and watches carry the right parameters', async () => {
  const api = await seeded();
  const h = await startHarness(api);
  try {
    await h.sources.synced();
    assert.equal(h.sources.hasSynced, true);
    // Lists are sorted by namespace/name in the fake; each resource's events come in list order.
    assert.deepEqual(h.events.filter((e) => e.startsWith('svc')), ['svc+ default/web@101', 'svc+ prod/db@102']);
    assert.deepEqual(h.events.filter((e) => e.startsWith('slice')), ['slice+ default/web-abc@103']);
    assert.deepEqual(h.events.filter((e) => e.startsWith('node')), [`node+ ${NODE}@104`], 'only this node');
    assert.equal(h.events.length, 4);

    const lists = api.requests.filter((r) => !r.watch);
    assert.deepEqual(lists.map((r) => r.resource).sort(), ['endpointslices', 'nodes', 'servicecidrs', 'services']);
    assert.equal(lists.find((r) => r.resource === 'nodes')!.query.fieldSelector, `metadata.name=${NODE}`);
    await api.waitFor(() => api.openWatches() === 4, 'four watches');
    const watches = api.requests.filter((r) => r.watch);
    for (const w of watches) {
      assert.equal(w.query.resourceVersion, '105', `${w.resource} watch resumes from the list's resourceVersion`);
      assert.equal(w.query.allowWatchBookmarks, 'true');
      assert.ok(Number(w.query.timeoutSeconds) >= 300 && Number(w.query.timeoutSeconds) < 600, 'client-go style watch timeout');
    }
    assert.equal(watches.find((r) => r.resource === 'nodes')!.query.fieldSelector, `metadata.name=${NODE}`);
  } finally {
    await h.close();
  }
});

test('the barrier waits for every list: a failing EndpointSlice list holds it until it succeeds', async () => {
  const api = await seeded();
  api.failNext(3, { resource: 'endpointslices', watch: false });
  const h = await startHarness(api);
  let synced = false;
  void h.sources.synced().then(() => (synced = true));
  try {
    // Services and the node are listed and watched; slices are still failing.
    await api.waitFor(() => api.openWatches('services') === 1 && api.openWatches('nodes') === 1, 'services and node watches');
    await api.waitFor(() => api.requests.filter((r) => r.resource === 'endpointslices').length >= 2, 'two slice list attempts');
    const sliceLists = () => api.requests.filter((r) => r.resource === 'endpointslices' && !r.watch);
    if (sliceLists().every((r) => r.status !== 200)) {
      assert.equal(synced, false, 'not synced while the slice list fails');
      assert.equal(h.sources.hasSynced, false);
    }
    await h.sources.synced();
    assert.deepEqual(sliceLists().map((r) => r.status), [500, 500, 500, 200]);
    assert.ok(h.events.includes('slice+ default/web-abc@103'), 'the slice was delivered before the barrier opened');
    assert.deepEqual(h.errors.filter((e) => e.resource === 'endpointslices').map((e) => e.retryInMs), [0, 10, 20], 'exponential backoff, first retry at once');
    const st = h.sources.stats().find((s) => s.resource === 'endpointslices')!;
    assert.equal(st.failures, 3);
    assert.equal(st.lists, 1);
  } finally {
    await h.close();
  }
});

test('live events arrive once each, in order; other nodes are filtered out', async () => {
  const api = await seeded();
  const h = await startHarness(api);
  try {
    await h.sources.synced();
    await api.waitFor(() => api.openWatches() === 4, 'four watches');
    const before = h.events.length;
    const web = api.get('services', 'web')!;
    (web.spec as { clusterIP: string }).clusterIP = '10.96.0.11';
    api.update('services', web); // 106
    api.create('services', svcObj('api', '10.96.0.30', 'prod')); // 107
    api.delete('services', 'db', 'prod'); // 108
    api.update('endpointslices', sliceObj('web', 'web-abc', ['10.0.0.1'])); // 109
    api.update('nodes', nodeObj('node-b', 'z9')); // 110: not ours
    api.update('nodes', nodeObj(NODE, 'z2')); // 111
    api.delete('endpointslices', 'web-abc'); // 112
    const s1 = await sentinel(h);
    const s2 = await sentinel(h, 'endpointslices');
    await api.waitFor(() => h.events.includes(`node+ ${NODE}@111`), 'node update');
    const live = h.events.slice(before);
    assert.deepEqual(live.filter((e) => e.startsWith('svc')), ['svc+ default/web@106', 'svc+ prod/api@107', 'svc- prod/db', s1]);
    assert.deepEqual(live.filter((e) => e.startsWith('slice')), ['slice+ default/web-abc@109', 'slice- default/web-abc', s2]);
    assert.deepEqual(live.filter((e) => e.startsWith('node')), [`node+ ${NODE}@111`]);
    assert.equal(live.length, 8);
  } finally {
    await h.close();
  }
});

test('handlers get plain JSON objects from lists and from watch events', async () => {
  const api = await seeded();
  const h = await startHarness(api);
  try {
    await h.sources.synced();
    await api.waitFor(() => api.openWatches() === 4, 'four watches');
    api.create('services', svcObj('later', '10.96.0.40'));
    await h.waitEvents(5);
    for (const o of h.objects) {
      assert.equal(Object.getPrototypeOf(o), Object.prototype, `${o.metadata?.name} is a plain object`);
      assert.doesNotThrow(() => structuredClone(o));
    }
    const listed = h.objects.find((o) => o.metadata?.name === 'web')!;
    const watched = h.objects.find((o) => o.metadata?.name === 'later')!;
    assert.equal(typeof (listed.metadata as Record<string, unknown>).creationTimestamp, 'string', 'timestamps stay strings (the typed list API would make Dates)');
    assert.equal(typeof (watched.metadata as Record<string, unknown>).creationTimestamp, 'string');
  } finally {
    await h.close();
  }
});

test('paged lists: every page is fetched and the snapshot resourceVersion is kept', async () => {
  const api = await FakeApiServer.start();
  for (let i = 0; i < 7; i++) api.create('services', svcObj(`s${i}`, `10.96.1.${i}`));
  api.create('nodes', nodeObj(NODE));
  const h = await startHarness(api, { listPageSize: 3 });
  try {
    await h.sources.synced();
    assert.deepEqual(h.events.filter((e) => e.startsWith('svc')), [0, 1, 2, 3, 4, 5, 6].map((i) => `svc+ default/s${i}@${101 + i}`));
    const svcLists = api.requests.filter((r) => r.resource === 'services' && !r.watch);
    assert.equal(svcLists.length, 3);
    assert.deepEqual(svcLists.map((r) => r.query.limit), ['3', '3', '3']);
    assert.equal(svcLists[0]!.query.continue, undefined);
    assert.ok(svcLists[1]!.query.continue && svcLists[2]!.query.continue);
    await api.waitFor(() => api.openWatches('services') === 1, 'services watch');
    assert.equal(api.requests.find((r) => r.resource === 'services' && r.watch)!.query.resourceVersion, '108');
  } finally {
    await h.close();
  }
});

test('a paged list is delivered a page at a time: each page reaches the handlers before the next is asked for', async () => {
  const api = await FakeApiServer.start();
  for (let i = 0; i < 7; i++) api.create('services', svcObj(`s${i}`, `10.96.1.${i}`));
  api.create('nodes', nodeObj(NODE));
  const deliveredAtRequest: number[] = [];
  let h: Awaited<ReturnType<typeof startHarness>> | undefined;
  // (the first request reaches the server after startHarness has returned: it needs socket I/O)
  api.onRequest = (r) => {
    if (r.resource === 'services' && !r.watch) deliveredAtRequest.push(h!.events.filter((e) => e.startsWith('svc')).length);
  };
  h = await startHarness(api, { listPageSize: 3 });
  try {
    await h.sources.synced();
    assert.deepEqual(deliveredAtRequest, [0, 3, 6]);
  } finally {
    await h.close();
  }
});

test('an expired continue token restarts the list from scratch', async () => {
  const api = await FakeApiServer.start();
  for (let i = 0; i < 4; i++) api.create('services', svcObj(`s${i}`, `10.96.1.${i}`));
  api.create('nodes', nodeObj(NODE));
  // Compact right after the first page: its continue token now names a gone revision.
  let compacted = false;
  api.onRequest = (r) => {
    if (compacted || r.resource !== 'services' || r.watch) return;
    compacted = true;
    api.create('services', svcObj('s9', '10.96.1.9'));
    api.compact();
  };
  const h = await startHarness(api, { listPageSize: 2 });
  try {
    await h.sources.synced();
    const svcLists = api.requests.filter((r) => r.resource === 'services' && !r.watch);
    assert.deepEqual(svcLists.map((r) => r.status), [200, 410, 200, 200, 200]);
    // Nothing from the abandoned first page was delivered twice; the final list is complete.
    assert.deepEqual(h.events.filter((e) => e.startsWith('svc')), ['svc+ default/s0@101', 'svc+ default/s1@102', 'svc+ default/s2@103', 'svc+ default/s3@104', 'svc+ default/s9@106']);
  } finally {
    await h.close();
  }
});

test('stop: no more events, no open watches, and synced() rejects when it never synced', async () => {
  const api = await seeded();
  const h = await startHarness(api);
  await h.sources.synced();
  await api.waitFor(() => api.openWatches() === 4, 'four watches');
  await h.sources.stop();
  await api.waitFor(() => api.openWatches() === 0, 'watches closed by the client');
  const n = h.events.length;
  api.create('services', svcObj('after', '10.96.0.50'));
  // Only the server side can be observed: nothing may reconnect after stop.
  const requests = api.requests.length;
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(api.requests.length, requests, 'no request after stop');
  assert.equal(h.events.length, n);
  await api.stop();

  const down = await FakeApiServer.start();
  down.failAllRequests(503);
  const h2 = await startHarness(down);
  await down.waitFor(() => down.requests.length >= 3, 'first attempts');
  await h2.sources.stop();
  await assert.rejects(h2.sources.synced(), /stopped before the initial list completed/);
  await down.stop();
});

test('a throwing handler is reported and does not stop the informer', async () => {
  const api = await seeded();
  const h = await startHarness(api);
  try {
    await h.sources.synced();
    await api.waitFor(() => api.openWatches() === 4, 'four watches');
    // Replace the slice handler with one that throws once.
    const sources = h.sources as unknown as { endpointSlices: { spec: { onUpdate: (o: unknown) => void } } };
    const orig = sources.endpointSlices.spec.onUpdate;
    let thrown = false;
    sources.endpointSlices.spec.onUpdate = (o) => {
      if (!thrown) {
        thrown = true;
        throw new Error('handler bug');
      }
      orig(o);
    };
    api.create('endpointslices', sliceObj('web', 'web-2', ['10.0.0.9']));
    const s = await sentinel(h, 'endpointslices');
    assert.equal(h.handlerErrors.length, 1);
    assert.match(String(h.handlerErrors[0]), /handler bug/);
    assert.equal(h.events.at(-1), s, 'later events still arrive');
  } finally {
    await h.close();
  }
});

test('ServiceCIDRs: listed and watched (created, changed, deleted) like the other resources', async () => {
  const api = await seeded();
  api.create('servicecidrs', serviceCIDRObj('kubernetes', ['10.96.0.0/12']));
  const h = await startHarness(api);
  try {
    await h.sources.synced();
    assert.deepEqual(h.events.filter((e) => e.startsWith('cidr')), ['cidr+ kubernetes@106']);
    await api.waitFor(() => api.openWatches('servicecidrs') === 1, 'the ServiceCIDR watch');
    api.create('servicecidrs', serviceCIDRObj('extra', ['10.100.0.0/16', 'fd00:100::/108']));
    api.delete('servicecidrs', 'kubernetes');
    await h.waitEvents(h.events.length + 2);
    assert.deepEqual(h.events.filter((e) => e.startsWith('cidr')), ['cidr+ kubernetes@106', 'cidr+ extra@107', 'cidr- kubernetes']);
    assert.equal(h.sources.stats().find((s) => s.resource === 'servicecidrs')!.served, true);
  } finally {
    await h.close();
  }
});

test('ServiceCIDRs not served (an API server before networking.k8s.io/v1 ServiceCIDR): synced with none, asked once, no failure', async () => {
  const api = await seeded();
  api.serveServiceCIDRs = false;
  const h = await startHarness(api);
  try {
    await h.sources.synced();
    await api.waitFor(() => api.openWatches() === 3, 'the three other watches');
    // the others keep working
    const s = await sentinel(h);
    assert.ok(h.events.includes(s));
    const asked = api.requests.filter((r) => r.query && r.status === 404);
    assert.equal(asked.length, 1, 'one list, answered 404, never retried or watched');
    const stats = h.sources.stats().find((x) => x.resource === 'servicecidrs')!;
    assert.equal(stats.served, false);
    assert.equal(stats.synced, true);
    assert.deepEqual(h.errors, [], 'not a failure: the configuration applies');
    assert.equal(h.events.filter((e) => e.startsWith('cidr')).length, 0);
  } finally {
    await h.close();
  }
});
