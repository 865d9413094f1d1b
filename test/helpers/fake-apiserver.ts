// A fake Kubernetes API server for the informer tests: a real HTTP server on 127.0.0.1 that
// speaks the list/watch protocol the way kube-apiserver does for Services, EndpointSlices,
// Nodes and ServiceCIDRs (unless told to serve none, as before Kubernetes 1.33) — one global
// resourceVersion counter (etcd's revision), lists with a consistent resourceVersion and
// limit/continue paging, `?watch=true&resourceVersion=N` as a chunked stream of JSON lines
// (ADDED / MODIFIED / DELETED / BOOKMARK / ERROR) replaying every event after N, a 200 +
// ERROR{code:410, reason:Expired} event for resourceVersions older than the compaction point
// (what the apiserver's watch cache answers), `fieldSelector=metadata.name=…`, `timeoutSeconds`,
// and, when `bookmarkIntervalMs` is set, the watch cache's periodic BOOKMARKs to watches that
// allow them (cacher's bookmarkFrequency, a minute upstream; and one 2 s before the watch's
// deadline, as its nextBookmarkTime). Test controls: create/update/delete, compact, drop
// watches (cleanly or by cutting the connection), make the next watch(es) answer 410, fail
// requests with 500, stop and restart on the same port (state kept, as an apiserver restarting
// over the same etcd). Faults of a server that misbehaves without failing: watches that hang
// (open, and sent nothing: no event, no bookmark, no end at their timeout: stallWatches), lists
// whose connection is reset mid-body (resetNextList), and slow answers (delayResponses).
// Optionally HTTPS (a key and certificate the test makes) and a bearer token it requires, 401
// otherwise, as an API server with a service account's token: a client then proves it used
// the CA and token its kubeconfig names.
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';

export type Resource = 'services' | 'endpointslices' | 'nodes' | 'servicecidrs';

interface ResourceInfo {
  kind: string;
  apiVersion: string;
  namespaced: boolean;
  /** Cluster-wide list/watch path; namespaced ones also answer under /namespaces/{ns}/. */
  prefix: string;
}

const RESOURCES: Record<Resource, ResourceInfo> = {
  services: { kind: 'Service', apiVersion: 'v1', namespaced: true, prefix: '/api/v1' },
  endpointslices: { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', namespaced: true, prefix: '/apis/discovery.k8s.io/v1' },
  nodes: { kind: 'Node', apiVersion: 'v1', namespaced: false, prefix: '/api/v1' },
  servicecidrs: { kind: 'ServiceCIDR', apiVersion: 'networking.k8s.io/v1', namespaced: false, prefix: '/apis/networking.k8s.io/v1' },
};

export type KubeObject = {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; uid?: string; [k: string]: unknown };
  [k: string]: unknown;
};

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface StoredEvent {
  rv: number;
  resource: Resource;
  type: EventType;
  object: KubeObject;
  /** The object before this event (MODIFIED, DELETED), for lists at an older revision. */
  prev?: KubeObject;
}

interface WatchConn {
  resource: Resource;
  namespace?: string;
  name?: string;
  bookmarks: boolean;
  res: http.ServerResponse;
  /** The server-side timeout (timeoutSeconds). */
  timer?: NodeJS.Timeout;
  /** The next periodic bookmark (bookmarkIntervalMs). */
  bookmarkTimer?: NodeJS.Timeout;
  /** When its timeout ends it (ms since the epoch; 0: never). */
  deadline: number;
  /** Hung: sent nothing from now on, not even its end at the timeout; only a cut ends it. */
  stalled: boolean;
  /** Events and bookmarks written to it. */
  sent: number;
}

export interface RequestRecord {
  method: string;
  resource: Resource | '';
  watch: boolean;
  query: Record<string, string>;
  status: number;
  /** The Authorization header, if any. */
  authorization?: string;
  /** A fault injected into the answer: a list whose connection was reset mid-body
   *  (resetNextList), a watch opened hung (stallWatches). */
  fault?: 'reset' | 'stalled';
}

export interface FakeApiServerOptions {
  /** Serve HTTPS with this key and certificate (PEM) instead of HTTP. */
  tls?: { key: string | Buffer; cert: string | Buffer };
  /** Every request must carry `Authorization: Bearer <token>`; 401 Unauthorized otherwise. */
  token?: string;
  /** Periodic BOOKMARKs (see the field); default 0: none but those sendBookmarks() sends. */
  bookmarkIntervalMs?: number;
}

export class FakeApiServer {
  private server: http.Server | https.Server | undefined;
  private readonly sockets = new Set<Socket>();
  private readonly watches = new Set<WatchConn>();
  private readonly store = new Map<string, KubeObject>();
  private readonly events: StoredEvent[] = [];
  private rv = 100;
  private uid = 0;
  /** Watches from a resourceVersion below this get 410 Gone. */
  private compactedRv = 0;
  private goneWatches: Array<Resource | undefined> = [];
  private failures: Array<{ status: number; match: (r: { resource: Resource | ''; watch: boolean }) => boolean }> = [];
  private failAll: number | undefined;
  /** Every request, in order. */
  readonly requests: RequestRecord[] = [];
  /** Keep watches open past the timeoutSeconds the client asked for (a hung server). */
  ignoreWatchTimeouts = false;
  /** Answer ServiceCIDRs 404, as an API server before networking.k8s.io/v1 ServiceCIDR. */
  serveServiceCIDRs = true;
  /** Sends every watch that allows bookmarks a BOOKMARK at the current revision this often, and
   *  one 2 s before its deadline, as kube-apiserver's watch cache does (every minute there);
   *  0: none (the default, so a test's events are only its own). Read as each watch opens. */
  bookmarkIntervalMs: number;
  /** New watches open hung (stallWatches). */
  private stalling = false;
  /** Lists still to be answered with a reset mid-body, each after this many bytes (undefined: half). */
  private resets: Array<number | undefined> = [];
  /** Every answer waits this long (delayResponses). */
  private delayMs = 0;
  private readonly delayed = new Set<NodeJS.Timeout>();
  /** Called after each request has been answered (or its watch stream opened). */
  onRequest: ((r: RequestRecord) => void) | undefined;
  private _port = 0;

  constructor(private readonly options: FakeApiServerOptions = {}) {
    this.bookmarkIntervalMs = options.bookmarkIntervalMs ?? 0;
  }

  static async start(port = 0, options: FakeApiServerOptions = {}): Promise<FakeApiServer> {
    const s = new FakeApiServer(options);
    await s.listen(port);
    return s;
  }

  get port(): number {
    return this._port;
  }

  get url(): string {
    return `${this.options.tls ? 'https' : 'http'}://127.0.0.1:${this._port}`;
  }

  /** The current resourceVersion (the revision of the last write). */
  get resourceVersion(): string {
    return String(this.rv);
  }

  /** Starts listening (again, after stop(): on the same port unless told otherwise). */
  async listen(port = this._port): Promise<void> {
    if (this.server) throw new Error('fake apiserver: already listening');
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => this.handle(req, res);
    const tls = this.options.tls;
    const server = tls ? https.createServer({ key: tls.key, cert: tls.cert }, handler) : http.createServer(handler);
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port }, () => resolve());
    });
    this.server = server;
    this._port = (server.address() as AddressInfo).port;
  }

  /** Stops accepting and cuts every connection (watches included). Objects are kept. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    for (const w of this.watches) this.clearTimers(w);
    this.watches.clear();
    for (const t of this.delayed) clearTimeout(t);
    this.delayed.clear();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  /** An apiserver restart: every connection cut, the same port, the same objects and revision. */
  async restart(): Promise<void> {
    await this.stop();
    await this.listen(this._port);
  }

  // ---- objects ----

  create(resource: Resource, obj: KubeObject): KubeObject {
    const key = this.key(resource, obj);
    if (this.store.has(key)) throw new Error(`fake apiserver: ${key} exists`);
    const o = structuredClone(obj);
    o.metadata = { ...o.metadata, uid: o.metadata?.uid ?? `uid-${++this.uid}`, resourceVersion: String(++this.rv) };
    if (RESOURCES[resource].namespaced) o.metadata.namespace ??= 'default';
    this.store.set(key, o);
    this.emit({ rv: this.rv, resource, type: 'ADDED', object: o });
    return structuredClone(o);
  }

  update(resource: Resource, obj: KubeObject): KubeObject {
    const key = this.key(resource, obj);
    const old = this.store.get(key);
    if (!old) throw new Error(`fake apiserver: ${key} not found`);
    const o = structuredClone(obj);
    o.metadata = { ...o.metadata, namespace: old.metadata?.namespace, uid: old.metadata?.uid, resourceVersion: String(++this.rv) };
    if (!RESOURCES[resource].namespaced) delete o.metadata.namespace;
    this.store.set(key, o);
    this.emit({ rv: this.rv, resource, type: 'MODIFIED', object: o, prev: old });
    return structuredClone(o);
  }

  delete(resource: Resource, name: string, namespace = 'default'): void {
    const key = this.key(resource, { metadata: { name, namespace } });
    const old = this.store.get(key);
    if (!old) throw new Error(`fake apiserver: ${key} not found`);
    this.store.delete(key);
    // The DELETED event carries the object's last state at the deletion's revision.
    const o = structuredClone(old);
    o.metadata!.resourceVersion = String(++this.rv);
    this.emit({ rv: this.rv, resource, type: 'DELETED', object: o, prev: old });
  }

  get(resource: Resource, name: string, namespace = 'default'): KubeObject | undefined {
    const o = this.store.get(this.key(resource, { metadata: { name, namespace } }));
    return o && structuredClone(o);
  }

  // ---- faults ----

  /** Forgets the event history: a watch from any older resourceVersion gets 410 Gone. */
  compact(): void {
    this.compactedRv = this.rv;
    this.events.length = 0;
  }

  /** The next `n` watch requests (of `resource`, default any) answer 410 Gone whatever their
   *  resourceVersion. */
  expireNextWatches(n = 1, resource?: Resource): void {
    for (let i = 0; i < n; i++) this.goneWatches.push(resource);
  }

  /** Ends every open watch: cleanly (terminating chunk, as a server-side timeout) or by cutting
   *  the TCP connection mid-stream. */
  /** Whether every open watch has been sent an event or a bookmark: ended cleanly now, none
   *  is one the server closed "at once with nothing" (the informer's empty_watch). */
  everyWatchHeard(): boolean {
    return [...this.watches].every((w) => w.sent > 0);
  }

  dropWatches(how: 'clean' | 'abrupt' = 'clean'): number {
    const n = this.watches.size;
    for (const w of [...this.watches]) this.endWatch(w, how);
    return n;
  }

  /** The next `n` requests matching (default: any) answer with `status` (default 500). */
  failNext(n: number, opts: { status?: number; resource?: Resource; watch?: boolean } = {}): void {
    const match = (r: { resource: Resource | ''; watch: boolean }) =>
      (opts.resource === undefined || r.resource === opts.resource) && (opts.watch === undefined || r.watch === opts.watch);
    for (let i = 0; i < n; i++) this.failures.push({ status: opts.status ?? 500, match });
  }

  /** Every request answers `status` until called with false. */
  failAllRequests(status: number | false = 500): void {
    this.failAll = status === false ? undefined : status;
  }

  /**
   * Hangs the open watches, and (on, until called with false) every watch opened from now on:
   * each stays open and is sent nothing — not the events the server takes meanwhile, not a
   * bookmark, not its end when its timeoutSeconds run out — until the connection is cut
   * (dropWatches, stop) or the client gives up. A watch opened hung gets its headers only.
   * `false` ends the hanging of new watches; the hung ones stay silent. Returns how many open
   * watches this hung.
   */
  stallWatches(on = true): number {
    this.stalling = on;
    if (!on) return 0;
    let n = 0;
    for (const w of this.watches) {
      if (w.stalled) continue;
      this.stall(w);
      n++;
    }
    return n;
  }

  /** The next `n` lists (of any resource; each page is one) answer 200 with part of their
   *  body — `afterBytes` of it, default half — and then their TCP connection is reset. */
  resetNextList(n = 1, afterBytes?: number): void {
    for (let i = 0; i < n; i++) this.resets.push(afterBytes);
  }

  /** Every answer from now on (a list's, a watch's headers, a failure's) waits `ms` before
   *  it is served, as a slow API server's; 0 ends it (answers already waiting still wait). */
  delayResponses(ms: number): void {
    this.delayMs = Math.max(0, ms);
  }

  /** Sends a BOOKMARK at the current revision to every watch that asked for bookmarks (hung
   *  watches excepted). */
  sendBookmarks(): void {
    for (const w of this.watches) this.bookmark(w);
  }

  /** Open watch connections (optionally of one resource). */
  openWatches(resource?: Resource): number {
    let n = 0;
    for (const w of this.watches) if (!resource || w.resource === resource) n++;
    return n;
  }

  /** Resolves when `pred` holds, checking after every request and event. `ms` only bounds a
   *  hang, generously (a few seconds failed tests on a loaded machine, issue #58): how fast the
   *  condition comes never decides anything. */
  async waitFor(pred: () => boolean, what: string, ms = 60_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > deadline) throw new Error(`fake apiserver: timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  // ---- protocol ----

  private key(resource: Resource, o: KubeObject): string {
    const ns = RESOURCES[resource].namespaced ? (o.metadata?.namespace ?? 'default') : '';
    return `${resource}/${ns}/${o.metadata?.name ?? ''}`;
  }

  private emit(e: StoredEvent): void {
    this.events.push(e);
    for (const w of this.watches) if (this.matches(w, e.resource, e.object)) this.write(w, { type: e.type, object: e.object });
  }

  private matches(f: { resource: Resource; namespace?: string; name?: string }, resource: Resource, o: KubeObject): boolean {
    if (f.resource !== resource) return false;
    if (f.namespace !== undefined && o.metadata?.namespace !== f.namespace) return false;
    if (f.name !== undefined && o.metadata?.name !== f.name) return false;
    return true;
  }

  private write(w: WatchConn, ev: unknown): void {
    if (w.stalled) return;
    w.res.write(JSON.stringify(ev) + '\n');
    w.sent++;
  }

  private bookmark(w: WatchConn): void {
    if (!w.bookmarks || w.stalled) return;
    const info = RESOURCES[w.resource];
    this.write(w, { type: 'BOOKMARK', object: { kind: info.kind, apiVersion: info.apiVersion, metadata: { resourceVersion: String(this.rv) } } });
  }

  /** The next periodic bookmark: after the interval, or 2 s before the deadline if sooner (the
   *  cacher's nextBookmarkTime), so a watch about to end has a fresh resourceVersion. */
  private scheduleBookmark(w: WatchConn, interval: number, preSent = false): void {
    let delay = interval;
    // (once: a timer may fire a millisecond before Date.now() says it is due)
    const pre = w.deadline && !preSent ? w.deadline - 2000 - Date.now() : 0;
    const isPre = pre > 0 && pre < delay;
    if (isPre) delay = pre;
    w.bookmarkTimer = setTimeout(() => {
      this.bookmark(w);
      this.scheduleBookmark(w, interval, preSent || isPre);
    }, delay);
    w.bookmarkTimer.unref();
  }

  private stall(w: WatchConn): void {
    w.stalled = true;
    this.clearTimers(w);
  }

  private clearTimers(w: WatchConn): void {
    clearTimeout(w.timer);
    clearTimeout(w.bookmarkTimer);
  }

  private endWatch(w: WatchConn, how: 'clean' | 'abrupt'): void {
    this.clearTimers(w);
    this.watches.delete(w);
    if (how === 'clean') w.res.end();
    else w.res.socket?.destroy();
  }

  private route(pathname: string): { resource: Resource; namespace?: string } | undefined {
    for (const [resource, info] of Object.entries(RESOURCES) as Array<[Resource, ResourceInfo]>) {
      if (resource === 'servicecidrs' && !this.serveServiceCIDRs) continue;
      if (pathname === `${info.prefix}/${resource}`) return { resource };
      if (info.namespaced) {
        const m = pathname.startsWith(`${info.prefix}/namespaces/`) && pathname.slice(info.prefix.length).match(/^\/namespaces\/([^/]+)\/([^/]+)$/);
        if (m && m[2] === resource) return { resource, namespace: decodeURIComponent(m[1]!) };
      }
    }
    return undefined;
  }

  private status(res: http.ServerResponse, code: number, reason: string, message: string): void {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code }));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    if (this.delayMs > 0) {
      const t = setTimeout(() => {
        this.delayed.delete(t);
        // the client gave up meanwhile (its timeout): nothing to answer
        if (res.destroyed || req.destroyed) return;
        this.answer(req, res);
      }, this.delayMs);
      this.delayed.add(t);
      return;
    }
    this.answer(req, res);
  }

  private answer(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.serve(req, res);
    const rec = this.requests.at(-1);
    if (rec && this.onRequest) this.onRequest(rec);
  }

  private serve(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    const query = Object.fromEntries(url.searchParams);
    const r = this.route(url.pathname);
    const watch = query.watch === 'true' || query.watch === '1';
    const rec: RequestRecord = { method: req.method ?? '', resource: r?.resource ?? '', watch, query, status: 200 };
    if (req.headers.authorization) rec.authorization = req.headers.authorization;
    this.requests.push(rec);
    const fail = (code: number, reason: string, message: string) => {
      rec.status = code;
      this.status(res, code, reason, message);
    };
    if (this.options.token !== undefined && req.headers.authorization !== `Bearer ${this.options.token}`) {
      return fail(401, 'Unauthorized', 'Unauthorized');
    }
    if (this.failAll !== undefined) return fail(this.failAll, 'InternalError', 'injected failure');
    const i = this.failures.findIndex((f) => f.match({ resource: rec.resource, watch }));
    if (i >= 0) {
      const [f] = this.failures.splice(i, 1);
      return fail(f!.status, 'InternalError', 'injected failure');
    }
    if (req.method !== 'GET') return fail(405, 'MethodNotAllowed', `${req.method} not supported`);
    if (!r) return fail(404, 'NotFound', `no resource at ${url.pathname}`);
    let name: string | undefined;
    if (query.fieldSelector) {
      const m = query.fieldSelector.match(/^metadata\.name=(.*)$/);
      if (!m) return fail(400, 'BadRequest', `unsupported field selector ${query.fieldSelector}`);
      name = m[1];
    }
    const filter = { resource: r.resource, namespace: r.namespace, name };
    if (watch) this.serveWatch(req, res, rec, filter, query);
    else this.serveList(res, rec, filter, query);
  }

  /** A list's answer, or (resetNextList) its first bytes and a reset connection. */
  private sendList(res: http.ServerResponse, rec: RequestRecord, body: string): void {
    if (this.resets.length === 0) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
      return;
    }
    const after = this.resets.shift();
    const bytes = Buffer.from(body);
    const n = Math.max(1, Math.min(bytes.length - 1, after ?? Math.floor(bytes.length / 2)));
    rec.fault = 'reset';
    // The length of the whole body: the client knows the answer was cut, as from a real one.
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': bytes.length });
    res.write(bytes.subarray(0, n), () => {
      const socket = res.socket;
      if (!socket) return;
      // an RST where the platform has it (ECONNRESET at the client), else a plain close
      if (typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy();
      else socket.destroy();
    });
  }

  private serveList(res: http.ServerResponse, rec: RequestRecord, f: { resource: Resource; namespace?: string; name?: string }, q: Record<string, string>): void {
    const info = RESOURCES[f.resource];
    let items: KubeObject[];
    let listRv: number;
    let offset = 0;
    if (q.continue) {
      // Continue token: the snapshot's revision and the offset. A snapshot older than the
      // compaction point is gone, as etcd's compacted revisions are.
      const [rvText, offText] = Buffer.from(q.continue, 'base64').toString().split(':');
      listRv = Number(rvText);
      offset = Number(offText);
      if (!(listRv >= this.compactedRv) || !(listRv <= this.rv) || !Number.isInteger(offset)) {
        rec.status = 410;
        return this.status(res, 410, 'Expired', 'The provided continue parameter is too old');
      }
      items = this.snapshotAt(f, listRv);
    } else {
      listRv = this.rv;
      items = this.snapshotAt(f, listRv);
    }
    const limit = q.limit ? Number(q.limit) : 0;
    const page = limit > 0 ? items.slice(offset, offset + limit) : items.slice(offset);
    const more = limit > 0 && offset + limit < items.length;
    const metadata: Record<string, string> = { resourceVersion: String(listRv) };
    if (more) metadata.continue = Buffer.from(`${listRv}:${offset + limit}`).toString('base64');
    this.sendList(res, rec, JSON.stringify({ kind: `${info.kind}List`, apiVersion: info.apiVersion, metadata, items: page }));
  }

  /** Objects as they were at revision `rv`: the current store rolled back over later events. */
  private snapshotAt(f: { resource: Resource; namespace?: string; name?: string }, rv: number): KubeObject[] {
    const state = new Map<string, KubeObject>();
    for (const [k, o] of this.store) if (k.startsWith(`${f.resource}/`)) state.set(k, o);
    for (let i = this.events.length - 1; i >= 0 && this.events[i]!.rv > rv; i--) {
      const e = this.events[i]!;
      if (e.resource !== f.resource) continue;
      const k = this.key(e.resource, e.object);
      if (e.type === 'ADDED') state.delete(k);
      else state.set(k, e.prev!);
    }
    return [...state.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, o]) => o)
      .filter((o) => this.matches(f, f.resource, o));
  }

  private serveWatch(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    rec: RequestRecord,
    f: { resource: Resource; namespace?: string; name?: string },
    q: Record<string, string>,
  ): void {
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    const w: WatchConn = { ...f, bookmarks: q.allowWatchBookmarks === 'true', res, deadline: 0, stalled: false, sent: 0 };
    if (this.stalling) {
      // hung from the start: its headers, and nothing after them
      rec.fault = 'stalled';
      this.stall(w);
      this.watches.add(w);
      req.on('close', () => this.watches.delete(w));
      return;
    }
    const from = q.resourceVersion ?? '';
    const fromRv = Number(from);
    const forced = this.goneWatches.findIndex((r) => r === undefined || r === f.resource);
    if (forced >= 0 || (from !== '' && from !== '0' && (!Number.isInteger(fromRv) || fromRv < this.compactedRv))) {
      if (forced >= 0) this.goneWatches.splice(forced, 1);
      rec.status = 410;
      // What the apiserver does for an expired resourceVersion: 200, one ERROR event, end.
      this.write(w, {
        type: 'ERROR',
        object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${from} (${this.compactedRv})`, reason: 'Expired', code: 410 },
      });
      res.end();
      return;
    }
    if (from === '' || from === '0') {
      // No resourceVersion: synthetic ADDED for the current state, then live events.
      for (const o of this.snapshotAt(f, this.rv)) this.write(w, { type: 'ADDED', object: o });
    } else {
      for (const e of this.events) if (e.rv > fromRv && this.matches(f, e.resource, e.object)) this.write(w, { type: e.type, object: e.object });
    }
    this.watches.add(w);
    const timeout = Number(q.timeoutSeconds);
    if (timeout > 0 && !this.ignoreWatchTimeouts) {
      w.deadline = Date.now() + timeout * 1000;
      w.timer = setTimeout(() => this.endWatch(w, 'clean'), timeout * 1000);
      w.timer.unref();
    }
    if (this.bookmarkIntervalMs > 0 && w.bookmarks) this.scheduleBookmark(w, this.bookmarkIntervalMs);
    req.on('close', () => {
      this.clearTimers(w);
      this.watches.delete(w);
    });
  }
}
