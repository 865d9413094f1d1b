// The fake API server's faults, seen by a plain HTTP client: hung watches (stallWatches), a list
// whose connection is reset mid-body (resetNextList), slow answers (delayResponses), and the
// watch cache's periodic bookmarks (bookmarkIntervalMs). Each is decided from what arrives on
// the wire; time only bounds a hang.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { svcObj } from '../helpers/informer-harness.js';

/** A watch as a client sees it: its status, every line, and how it ended. */
interface WatchClient {
  status: Promise<number>;
  lines: Array<{ type: string; object: { metadata?: { name?: string; resourceVersion?: string } } }>;
  /** 'end' (the server ended it cleanly) or 'cut' (the connection closed before its end). */
  ended: Promise<'end' | 'cut'>;
  close(): void;
}

function watch(api: FakeApiServer, query: string): WatchClient {
  let setStatus!: (s: number) => void;
  let setEnded!: (how: 'end' | 'cut') => void;
  const status = new Promise<number>((r) => (setStatus = r));
  const ended = new Promise<'end' | 'cut'>((r) => (setEnded = r));
  const lines: WatchClient['lines'] = [];
  const req = http.get(`${api.url}/api/v1/services?watch=true&${query}`, (res) => {
    setStatus(res.statusCode ?? 0);
    res.setEncoding('utf8');
    let rest = '';
    res.on('data', (c: string) => {
      rest += c;
      let nl: number;
      while ((nl = rest.indexOf('\n')) >= 0) {
        lines.push(JSON.parse(rest.slice(0, nl)));
        rest = rest.slice(nl + 1);
      }
    });
    res.on('end', () => setEnded('end'));
    res.on('close', () => setEnded('cut'));
    res.on('error', () => setEnded('cut'));
  });
  req.on('error', () => setEnded('cut'));
  return { status, lines, ended, close: () => req.destroy() };
}

/** A list GET: its status, the bytes that came, the length announced, and whether it was cut. */
function list(api: FakeApiServer): Promise<{ status: number; body: string; length: number; error?: NodeJS.ErrnoException }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${api.url}/api/v1/services`, (res) => {
      const chunks: Buffer[] = [];
      const out = () => ({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), length: Number(res.headers['content-length'] ?? -1) });
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(out()));
      res.on('error', (error: NodeJS.ErrnoException) => resolve({ ...out(), error }));
    });
    req.on('error', reject);
  });
}

test('stallWatches: open watches get nothing (no event, no bookmark, no end at their timeout) until cut; new ones while stalling are hung from their headers; false ends it for new watches only', async () => {
  const api = await FakeApiServer.start();
  try {
    api.create('services', svcObj('a', '10.96.0.1')); // 101
    const hung = watch(api, 'resourceVersion=101&allowWatchBookmarks=true&timeoutSeconds=2');
    assert.equal(await hung.status, 200);
    await api.waitFor(() => api.openWatches() === 1, 'the watch open');
    assert.equal(api.stallWatches(), 1);
    api.create('services', svcObj('b', '10.96.0.2')); // 102
    api.sendBookmarks();
    // Opened while stalling: its headers and nothing else (not even the state it would replay).
    const late = watch(api, 'allowWatchBookmarks=true');
    assert.equal(await late.status, 200);
    await api.waitFor(() => api.openWatches() === 2, 'the late watch open');
    assert.equal(api.requests.at(-1)!.fault, 'stalled');
    assert.equal(api.stallWatches(false), 0);
    // A watch opened after: served, replays what the hung ones never got; its timeout ends it.
    // It was opened after the first hung one with the same timeout: once it ended, the hung
    // one's timeout has run out too.
    const fresh = watch(api, 'resourceVersion=101&allowWatchBookmarks=true&timeoutSeconds=2');
    assert.equal(await fresh.ended, 'end');
    assert.deepEqual(fresh.lines.map((l) => `${l.type} ${l.object.metadata?.name}`), ['ADDED b']);
    assert.equal(api.openWatches(), 2, 'the hung watches outlived their timeout');
    assert.equal(api.dropWatches('abrupt'), 2);
    assert.equal(await hung.ended, 'cut');
    assert.equal(await late.ended, 'cut');
    assert.deepEqual(hung.lines, [], 'nothing reached the hung watch');
    assert.deepEqual(late.lines, [], 'nothing reached the late watch');
  } finally {
    await api.stop();
  }
});

test('resetNextList: the next n lists answer 200 with part of the body (afterBytes, default half) and a reset connection; the one after is whole', async () => {
  const api = await FakeApiServer.start();
  try {
    for (let i = 1; i <= 5; i++) api.create('services', svcObj(`s${i}`, `10.96.0.${i}`));
    api.resetNextList(2, 10);
    for (let i = 0; i < 2; i++) {
      const r = await list(api);
      assert.equal(r.status, 200);
      assert.equal(r.body.length, 10, 'the first 10 bytes');
      assert.ok(r.length > 10, 'the whole length announced');
      assert.ok(r.error, 'the answer failed mid-body');
      assert.equal(r.error.code, 'ECONNRESET');
    }
    api.resetNextList();
    const half = await list(api);
    assert.equal(half.body.length, Math.floor(half.length / 2));
    assert.ok(half.error);
    const whole = await list(api);
    assert.equal(whole.error, undefined);
    assert.equal((JSON.parse(whole.body) as { items: unknown[] }).items.length, 5);
    assert.deepEqual(api.requests.map((r) => [r.status, r.fault]), [[200, 'reset'], [200, 'reset'], [200, 'reset'], [200, undefined]]);
  } finally {
    await api.stop();
  }
});

test('delayResponses: lists and watch headers come no sooner than the delay; 0 ends it', async () => {
  const api = await FakeApiServer.start();
  try {
    api.create('services', svcObj('a', '10.96.0.1'));
    const ms = 300;
    api.delayResponses(ms);
    let t = Date.now();
    assert.equal((await list(api)).status, 200);
    // (only a lower bound: a loaded machine makes it later, never sooner)
    assert.ok(Date.now() - t >= ms - 5, `the list waited (${Date.now() - t} ms)`);
    t = Date.now();
    const w = watch(api, 'resourceVersion=0');
    assert.equal(await w.status, 200);
    assert.ok(Date.now() - t >= ms - 5, `the watch's headers waited (${Date.now() - t} ms)`);
    w.close();
    api.delayResponses(0);
    const answered = api.requests.length;
    assert.equal((await list(api)).status, 200);
    assert.equal(api.requests.length, answered + 1);
  } finally {
    await api.stop();
  }
});

test('bookmarkIntervalMs: periodic BOOKMARKs at the current revision to watches that allow them, none to others; one 2 s before the deadline', async () => {
  const api = await FakeApiServer.start(0, { bookmarkIntervalMs: 20 });
  try {
    api.create('services', svcObj('a', '10.96.0.1')); // 101
    const withBookmarks = watch(api, 'resourceVersion=101&allowWatchBookmarks=true');
    const without = watch(api, 'resourceVersion=101');
    await api.waitFor(() => withBookmarks.lines.length >= 3, 'three bookmarks');
    assert.deepEqual(new Set(withBookmarks.lines.map((l) => `${l.type}@${l.object.metadata?.resourceVersion}`)), new Set(['BOOKMARK@101']));
    api.create('services', svcObj('b', '10.96.0.2')); // 102
    await api.waitFor(() => without.lines.length >= 1 && withBookmarks.lines.some((l) => l.type === 'ADDED'), 'the event on both');
    await api.waitFor(() => withBookmarks.lines.at(-1)!.type === 'BOOKMARK', 'a bookmark after the event');
    assert.equal(withBookmarks.lines.at(-1)!.object.metadata?.resourceVersion, '102', 'at the current revision');
    assert.deepEqual(without.lines.map((l) => l.type), ['ADDED'], 'no bookmark to a watch that did not ask');
    withBookmarks.close();
    without.close();
    // The pre-deadline bookmark: with a minute between periodic ones, the only one a 3 s watch
    // gets is 2 s before its end.
    api.bookmarkIntervalMs = 60_000;
    const short = watch(api, 'resourceVersion=102&allowWatchBookmarks=true&timeoutSeconds=3');
    assert.equal(await short.ended, 'end');
    assert.deepEqual(short.lines.map((l) => `${l.type}@${l.object.metadata?.resourceVersion}`), ['BOOKMARK@102']);
  } finally {
    await api.stop();
  }
});
