// The informers' watch stream (node:http, one JSON event per line) against a raw HTTP server that
// writes its answer in awkward pieces: an event split across writes, a UTF-8 character split
// between its bytes, a line that is not JSON, a last event with no newline before the end, and
// a server that never answers the watch (the connect timeout).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { V1Service } from '@kubernetes/client-node';
import { KubeSources, type InformerError } from '../../src/kube/informers.js';
import { loadKubeConfig } from '../../src/kube/kubeconfig.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function svc(name: string, rv: string, label: string): object {
  return { metadata: { name, namespace: 'default', resourceVersion: rv, labels: { team: label } }, spec: { clusterIP: '10.96.0.1' } };
}

/** Lists are empty at resourceVersion 1; `watch(res, query)` answers each services watch. */
async function server(watch: (res: http.ServerResponse, query: URLSearchParams, n: number) => void): Promise<{ url: string; watches: URLSearchParams[]; close(): Promise<void> }> {
  const watches: URLSearchParams[] = [];
  const s = http.createServer((req, res) => {
    const u = new URL(req.url ?? '/', 'http://x');
    if (u.searchParams.get('watch') !== 'true') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ metadata: { resourceVersion: '1' }, items: [] }));
    } else if (u.pathname === '/api/v1/services') {
      watches.push(u.searchParams);
      watch(res, u.searchParams, watches.length);
    } // other watches stay open and silent
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
    watches,
    close: () => {
      s.closeAllConnections();
      return new Promise((r) => s.close(() => r()));
    },
  };
}

function sources(url: string, opts: { requestTimeoutMs?: number } = {}) {
  const got: Array<{ name: string; team: string; rv: string }> = [];
  const errors: InformerError[] = [];
  const src = new KubeSources({
    kubeConfig: loadKubeConfig({ server: url, env: {} }),
    nodeName: 'n',
    backoffInitialMs: 10,
    backoffMaxMs: 20,
    jitter: 0,
    onError: (e) => errors.push(e),
    handlers: {
      onServiceUpdate: (o: V1Service) => got.push({ name: o.metadata!.name!, team: o.metadata!.labels!.team!, rv: o.metadata!.resourceVersion! }),
      onServiceDelete: () => undefined,
      onSliceUpdate: () => undefined,
      onSliceDelete: () => undefined,
      onNode: () => undefined,
    },
    ...opts,
  });
  return { src, got, errors };
}

/** Waits for `cond`; `ms` only bounds a hang (a 5-s deadline was a race on a loaded machine). */
async function until(what: string, cond: () => boolean, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

test('watch events split across writes and inside a UTF-8 character, a junk line, a last line without newline', async () => {
  const first = JSON.stringify({ type: 'ADDED', object: svc('a', '2', 'zürich') });
  const cut = Buffer.from(first).indexOf(Buffer.from('ü')) + 1; // between the two bytes of ü
  const srv = await server((res, _q, n) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    if (n > 1) return; // the resumed watch: stays open
    const bytes = Buffer.from(`${first}\n`);
    void (async () => {
      res.write(bytes.subarray(0, cut));
      await sleep(20);
      res.write(bytes.subarray(cut, cut + 10));
      await sleep(20);
      res.write(Buffer.concat([bytes.subarray(cut + 10), Buffer.from('not json\n\n')]));
      await sleep(20);
      res.end(JSON.stringify({ type: 'MODIFIED', object: svc('b', '3', 'ñandú') })); // no newline
    })();
  });
  const { src, got, errors } = sources(srv.url);
  try {
    src.start();
    await src.synced();
    await until('two events', () => got.length === 2);
    assert.deepEqual(got, [
      { name: 'a', team: 'zürich', rv: '2' },
      { name: 'b', team: 'ñandú', rv: '3' },
    ]);
    // Ended cleanly after events: resumed from the last one, no error.
    await until('the resumed watch', () => srv.watches.length === 2);
    assert.equal(srv.watches[1]!.get('resourceVersion'), '3');
    assert.equal(srv.watches[0]!.get('allowWatchBookmarks'), 'true');
    assert.deepEqual(errors, []);
  } finally {
    await src.stop();
    await srv.close();
  }
});

/** The first services watch answered by `first`, the next one delivering an event: the one
 *  error reported, once the retry has delivered, and the resourceVersions the watches asked for. */
async function failedFirstWatch(first: (res: http.ServerResponse) => void, opts: { requestTimeoutMs?: number } = {}): Promise<{ message: string; from: Array<string | null> }> {
  const srv = await server((res, _q, n) => {
    if (n === 1) return first(res);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(`${JSON.stringify({ type: 'ADDED', object: svc('c', '5', 'x') })}\n`);
  });
  const { src, got, errors } = sources(srv.url, opts);
  try {
    src.start();
    await src.synced();
    await until('the event from the second watch', () => got.length === 1);
    const e = errors.filter((x) => x.resource === 'services');
    assert.equal(e.length, 1);
    return { message: e[0]!.error.message, from: srv.watches.map((q) => q.get('resourceVersion')) };
  } finally {
    await src.stop();
    await srv.close();
  }
}

test('a watch that gets no answer fails after the request timeout and is retried from the same resourceVersion', async () => {
  // The timeout is the thing under test, on the real clock; it also bounds every other request
  // (the lists, the second watch), which the server answers at once: 2 s, not 200 ms, so a
  // loaded machine does not make one of those time out too (one more error than asserted).
  const r = await failedFirstWatch(() => undefined, { requestTimeoutMs: 2_000 });
  assert.match(r.message, /watch \/api\/v1\/services: no answer in 2000 ms/);
  assert.deepEqual(r.from, ['1', '1']);
});

test('a watch answered with an error status fails with the Status message and is retried', async () => {
  const r = await failedFirstWatch((res) => {
    res.writeHead(403, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', status: 'Failure', message: 'services is forbidden: User "x" cannot watch', code: 403 }));
  });
  assert.equal(r.message, 'watch /api/v1/services: HTTP 403 Forbidden: services is forbidden: User "x" cannot watch');
  assert.deepEqual(r.from, ['1', '1']);
});
