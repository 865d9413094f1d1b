// Supervised informers for Services, EndpointSlices, this Node and the ServiceCIDRs, built on a list-watch loop
// (list-watch.ts: @kubernetes/client-node's ListWatch semantics — a re-list deletes what vanished
// and is silent about objects whose resourceVersion did not change; a resumed watch continues from
// the last resourceVersion seen — keeping keys and resourceVersions instead of the objects), with
// what a node proxy needs around it:
//
// - Restart with bounded exponential backoff on any error. The loop itself stops on the first
//   error (it only emits 'error'); a 410 Gone makes it re-list, and a cleanly ended watch makes
//   it re-watch — at once, so a server that keeps failing that way would be hammered: every list
//   and watch therefore waits its turn on one backoff schedule per resource, which only a watch
//   that made progress (an event) or stayed up resets.
// - A watch that can hang (the client's Watch sets none: its AbortSignal.timeout is overwritten
//   by the controller's signal in 1.4.0). We ask the server to end each watch after
//   `timeoutSeconds` (as client-go does), give the connect phase a timeout, and abort a watch the
//   server did not end by then. And a watch that hangs open — a stuck apiserver or proxy in
//   between, a half-open connection whose keep-alives a middlebox answers — is silent: with
//   allowWatchBookmarks the watch cache sends a BOOKMARK about every minute, so a watch with no
//   event and no bookmark for `watchSilenceLimitMs` (150 s) is aborted and resumed from its last
//   resourceVersion, minutes before its timeout would have ended it.
// - Every list and watch request reports its outcome (onRequest: client-go's
//   rest_client_requests_total), and every failure a reason (informerErrorReason).
// - Plain objects, on node:http(s) with the configuration's credentials and TLS settings: lists
//   as raw JSON (the typed list API would hand out class instances with Dates) and watches as
//   the client's Watch reads them, a JSON event per line (its node-fetch cost ~2 MB of heap).
// - An initial-list barrier over all the resources, and a field selector for the Node
//   (makeInformer in 1.4.0 cannot pass one).
// - ServiceCIDRs (networking.k8s.io/v1, Kubernetes 1.33+) are optional: an API server that does
//   not serve them answers the list 404, and the informer then counts as synced with none (the
//   configuration's service CIDRs apply) and stops.
import http from 'node:http';
import https from 'node:https';
import type { KubernetesObject, V1EndpointSlice, V1Node, V1Service, V1ServiceCIDR } from './api-types.js';
import { objectKey } from './change-tracker.js';
import type { ApiAccess } from './kubeconfig.js';
import { KeyedListWatch, type DoneCallback, type ListPage, type WatchCallback } from './list-watch.js';
import type { ObjectHandlers } from './types.js';

/** Where events go; plug-compatible with ServiceTracker / EndpointSliceTracker. Every object is a
 *  plain JSON object; keys are "namespace/name" (a node's key is its name). */
export interface KubeHandlers extends ObjectHandlers {
  onNode(node: V1Node): void;
}

export type ResourceName = 'services' | 'endpointslices' | 'node' | 'servicecidrs';

/** Why a list or watch failed, as the metrics count it: gone (410 Gone: a re-list), http_<code>
 *  (another error status, as an answer or a watch's ERROR event; `status` when it has no code),
 *  connection (refused, reset, cut mid-answer), timeout (no answer, or a watch not ended by its
 *  deadline), silent_watch (no event or bookmark for the silence limit), empty_watch (ended by
 *  the server at once with nothing), decode (an answer that is not the JSON asked for), other. */
export type InformerErrorReason = 'gone' | `http_${number}` | 'status' | 'connection' | 'timeout' | 'silent_watch' | 'empty_watch' | 'decode' | 'other';

export interface InformerError {
  resource: ResourceName;
  error: Error;
  reason: InformerErrorReason;
  /** Delay before the next attempt (0: at once). */
  retryInMs: number;
  consecutiveFailures: number;
}

export interface InformerOptions {
  /** First backoff step (default 500 ms); doubles per consecutive failure. The first failure
   *  after a healthy period retries at once (a 410 Gone re-lists without waiting). */
  backoffInitialMs?: number;
  /** Backoff cap (default 30 s). */
  backoffMaxMs?: number;
  /** Random extra fraction of each delay (default 0.1), so nodes do not retry in lockstep. */
  jitter?: number;
  /** A watch open this long without failing counts as healthy (default 10 s). */
  healthyAfterMs?: number;
  /** Server-side watch timeout asked for (default: random in [300, 600) s, as client-go). */
  watchTimeoutSeconds?: number;
  /** Time to wait past the server-side timeout before aborting a watch the server did not end
   *  (default 30 s). */
  watchGraceMs?: number;
  /** A watch with no event and no bookmark for this long is aborted and resumed (default
   *  150 s: kube-apiserver's watch cache bookmarks every minute; 0: never). */
  watchSilenceLimitMs?: number;
  /** Timeout of one list page and of a watch's connect phase (default 60 s). */
  requestTimeoutMs?: number;
  /** List page size (default 500; 0: unpaged). */
  listPageSize?: number;
  /** Called for every failure (for logs); never needed for recovery. */
  onError?: (e: InformerError) => void;
  /** Called for every list page and watch request once it has an answer's status, or failed
   *  without one (client-go's request metric: counted at the headers, so a list cut mid-body
   *  is a 200 here and a connection error in onError). */
  onRequest?: (r: ApiRequest) => void;
  /** Called when a handler throws (a bug in the caller); the informer keeps going. */
  onHandlerError?: (resource: ResourceName, error: unknown) => void;
  random?: () => number;
}

/** One request to the API server, as client-go's rest_client_requests_total labels it. */
export interface ApiRequest {
  resource: ResourceName;
  verb: 'list' | 'watch';
  method: 'GET';
  /** The URL's host:port. */
  host: string;
  /** The HTTP status, or '<error>' when the request got no answer (client-go's label). */
  code: string;
}

export interface ResourceStats {
  resource: ResourceName;
  synced: boolean;
  lists: number;
  watches: number;
  failures: number;
  consecutiveFailures: number;
  /** Re-lists forced by 410 Gone. */
  gone: number;
  events: { update: number; delete: number };
  resourceVersion: string;
  lastError?: string;
  /** False: the API server does not serve this (optional) resource. */
  served: boolean;
}

interface ResourceSpec<T extends KubernetesObject> {
  name: ResourceName;
  path: string;
  fieldSelector?: string;
  /** A 404 to the list means the API server does not serve it: synced, with no objects. */
  optional?: boolean;
  onUpdate(obj: T): void;
  onDelete(obj: T): void;
}

class HttpStatusError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** A failure the informer itself decides (a timeout, a silent watch, an answer it cannot read),
 *  with its reason. */
class InformerFailure extends Error {
  constructor(
    readonly reason: InformerErrorReason,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

const CONNECTION_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'ERR_STREAM_PREMATURE_CLOSE']);

/** A failure's reason for the metrics (InformerErrorReason). */
export function informerErrorReason(e: unknown): InformerErrorReason {
  if (e instanceof InformerFailure) return e.reason;
  const status = (e as { statusCode?: number } | null)?.statusCode;
  if (typeof status === 'number') return status === 410 ? 'gone' : status > 0 ? `http_${status}` : 'status';
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return code === 'ETIMEDOUT' ? 'timeout' : 'connection';
  return 'other';
}

/** A request with the client's credentials and TLS settings (a kubeconfig's or the full client's). */
async function get(kc: ApiAccess, url: URL, onResponse: (res: http.IncomingMessage) => void): Promise<http.ClientRequest> {
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const mod = url.protocol === 'http:' ? http : https;
  return mod.request(url, { ...opts, method: 'GET', headers: { ...opts.headers, accept: 'application/json' } }, onResponse);
}

/** An answer other than 200 as an error with its status code (the Status object's message when
 *  the body is one). */
function statusError(what: string, res: http.IncomingMessage, text: string): HttpStatusError {
  const reason = http.STATUS_CODES[res.statusCode ?? 0] ?? '';
  let msg = text.slice(0, 200) || reason;
  try {
    msg = (JSON.parse(text) as { message?: string }).message ?? msg;
  } catch {
    // not a Status object: keep the raw text
  }
  return new HttpStatusError(res.statusCode ?? 0, `${what}: HTTP ${res.statusCode} ${reason}: ${msg}`);
}

/** A connection that failed mid-answer, as a connection error (its cause kept). */
function connectionError(what: string, e: Error): Error {
  if (e instanceof InformerFailure) return e;
  const code = (e as { code?: string }).code;
  return new InformerFailure('connection', `${what}: ${e.message}${code ? ` (${code})` : ''}`, { cause: e });
}

/** A whole answer body as text. */
function readAll(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('error', reject);
    res.on('end', () => resolve(Buffer.concat(chunks).toString()));
  });
}

/** GET returning parsed JSON; `answered` once, with the status or '<error>'. */
async function getJson(kc: ApiAccess, url: URL, timeoutMs: number, answered: (code: string) => void): Promise<unknown> {
  let resolve!: (v: unknown) => void;
  let reject!: (e: Error) => void;
  const answer = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  let status: string | undefined;
  const req = await get(kc, url, (res) => {
    answered((status = String(res.statusCode ?? 0)));
    readAll(res).then((text) => {
      if (res.statusCode !== 200) return reject(statusError(`GET ${url.pathname}`, res, text));
      try {
        resolve(JSON.parse(text));
      } catch (e) {
        reject(new InformerFailure('decode', `GET ${url.pathname}: bad JSON: ${(e as Error).message}`));
      }
    }, (e: Error) => reject(connectionError(`GET ${url.pathname}: answer cut`, e)));
  });
  req.setTimeout(timeoutMs, () => req.destroy(new InformerFailure('timeout', `GET ${url.pathname}: no answer in ${timeoutMs} ms`)));
  req.on('error', (e) => {
    if (status === undefined) answered((status = '<error>'));
    reject(e);
  });
  req.end();
  return answer;
}

/**
 * A watch: GET with watch=true, one JSON event per line, each handed to `callback` as (type,
 * object, event); `done` once, when the stream ends (null), fails, is cut, or is aborted (an
 * error). What the client's Watch does, on node:http(s) instead of node-fetch (which, with the URL
 * library it brings, cost the daemon ~2 MB of heap and 6–8 MB of RSS at load for this one request).
 * `connectTimeoutMs` bounds the wait for the answer's headers; the stream itself may stay
 * silent for as long as the server-side timeout allows (the caller's watchdogs cover it).
 * `answered` once: the status when the headers arrive, or '<error>' if none came. `abort(err)`
 * ends it with that error (default an AbortError).
 */
async function watchStream(
  kc: ApiAccess,
  url: URL,
  connectTimeoutMs: number,
  callback: WatchCallback,
  done: DoneCallback,
  answered: (code: string) => void,
): Promise<{ abort(err?: Error): void }> {
  let req: http.ClientRequest | undefined;
  let ended = false;
  let status: string | undefined;
  const finish = (err: Error | null) => {
    if (ended) return;
    ended = true;
    if (status === undefined) answered((status = '<error>'));
    clearTimeout(connect);
    req?.destroy();
    done(err);
  };
  const line = (text: string) => {
    if (ended || !text.trim()) return;
    let event: { type?: string; object?: unknown };
    try {
      event = JSON.parse(text) as typeof event;
    } catch {
      return; // as the client's Watch: a line that is not JSON is skipped
    }
    callback(event.type ?? '', event.object, event);
  };
  const onResponse = (res: http.IncomingMessage) => {
    clearTimeout(connect);
    answered((status = String(res.statusCode ?? 0)));
    if (res.statusCode !== 200) {
      readAll(res).then((text) => finish(statusError(`watch ${url.pathname}`, res, text)), finish);
      return;
    }
    res.socket.setKeepAlive(true, 30_000);
    res.setEncoding('utf8');
    let rest = '';
    res.on('data', (chunk: string) => {
      rest += chunk;
      let nl: number;
      while ((nl = rest.indexOf('\n')) >= 0) {
        const text = rest.slice(0, nl);
        rest = rest.slice(nl + 1);
        line(text);
      }
    });
    res.on('error', (e) => finish(connectionError(`watch ${url.pathname}`, e)));
    res.on('end', () => {
      line(rest);
      finish(null);
    });
    // Closed before its end: the connection was cut.
    res.on('close', () => finish(new InformerFailure('connection', `watch ${url.pathname}: connection closed mid-stream`)));
  };
  const connect = setTimeout(() => finish(new InformerFailure('timeout', `watch ${url.pathname}: no answer in ${connectTimeoutMs} ms`)), connectTimeoutMs);
  try {
    req = await get(kc, url, onResponse);
  } catch (e) {
    finish(e as Error);
    return { abort: () => undefined };
  }
  if (ended) {
    // the connect timeout ran out while the credentials were being read
    req.destroy();
    return { abort: () => undefined };
  }
  req.on('error', finish);
  req.end();
  return { abort: (err?: Error) => finish(err ?? Object.assign(new Error(`watch ${url.pathname}: aborted`), { name: 'AbortError' })) };
}

interface ListResult<T> {
  metadata?: { resourceVersion?: string; continue?: string };
  items: T[];
}

/** One resource: a list-watch loop, supervised. */
export class ResourceInformer<T extends KubernetesObject> {
  private readonly lw: KeyedListWatch<T>;
  private stopped = true;
  private nextAttemptAt = 0;
  private readonly sleepers = new Set<{ timer: NodeJS.Timeout; resolve: () => void }>();
  private resolveSynced!: () => void;
  private rejectSynced!: (e: Error) => void;
  /** Resolves after the first complete list has been delivered to the handlers. */
  readonly synced: Promise<void>;
  readonly stats: ResourceStats;

  constructor(
    private readonly kc: ApiAccess,
    private readonly spec: ResourceSpec<T>,
    private readonly opts: InformerOptions = {},
  ) {
    this.stats = {
      resource: spec.name,
      synced: false,
      lists: 0,
      watches: 0,
      failures: 0,
      consecutiveFailures: 0,
      gone: 0,
      events: { update: 0, delete: 0 },
      resourceVersion: '',
      served: true,
    };
    this.synced = new Promise((resolve, reject) => {
      this.resolveSynced = resolve;
      this.rejectSynced = reject;
    });
    this.synced.catch(() => undefined); // a stop before sync rejects; callers that care await it
    this.lw = new KeyedListWatch<T>(spec.path, { watch: this.watch.bind(this) }, () => this.listPages(), {
      update: (o) => this.deliver('update', o),
      delete: (o) => this.deliver('delete', o as T),
      listed: () => this.listed(),
      error: (e) => this.onListWatchError(e),
    }, spec.fieldSelector);
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.lw.start();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const s of this.sleepers) {
      clearTimeout(s.timer);
      s.resolve();
    }
    this.sleepers.clear();
    this.lw.stop();
    if (!this.stats.synced) this.rejectSynced(new Error(`${this.spec.name}: stopped before the initial list completed`));
  }

  private deliver(kind: 'update' | 'delete', o: T): void {
    if (this.stopped) return;
    this.stats.events[kind]++;
    try {
      if (kind === 'update') this.spec.onUpdate(o);
      else this.spec.onDelete(o);
    } catch (e) {
      this.opts.onHandlerError?.(this.spec.name, e);
    }
  }

  /** The list, a page at a time (each page is delivered before the next is asked for). */
  private async *listPages(): AsyncGenerator<ListPage<T>> {
    await this.waitTurn();
    if (this.stopped) throw new Error('stopped');
    const pageSize = this.opts.listPageSize ?? 500;
    let rv: string | undefined;
    let cont: string | undefined;
    // Bounded: a list cannot have more pages than objects; 1e6 pages is a broken server.
    for (let page = 0; page < 1_000_000; page++) {
      const url = this.url(this.spec.path, {
        fieldSelector: this.spec.fieldSelector || undefined,
        limit: pageSize > 0 ? String(pageSize) : undefined,
        continue: cont || undefined,
      });
      let body: ListResult<T>;
      try {
        body = (await getJson(this.kc, url, this.opts.requestTimeoutMs ?? 60_000, (code) => this.request('list', url, code))) as ListResult<T>;
      } catch (e) {
        if (this.spec.optional && page === 0 && (e as { statusCode?: number }).statusCode === 404) {
          this.stats.served = false;
          this.listed();
        }
        throw e;
      }
      if (this.stopped) throw new Error('stopped');
      rv ??= body.metadata?.resourceVersion;
      if (!rv) throw new InformerFailure('decode', `list ${this.spec.path}: no resourceVersion in the answer`);
      cont = body.metadata?.continue;
      yield { items: body.items ?? [], resourceVersion: rv };
      if (!cont) break;
    }
    this.stats.lists++;
  }

  private request(verb: 'list' | 'watch', url: URL, code: string): void {
    this.opts.onRequest?.({ resource: this.spec.name, verb, method: 'GET', host: url.host, code });
  }

  /** The API server's URL for `path` with these query parameters (undefined ones left out). */
  private url(path: string, params: Record<string, string | undefined>): URL {
    const cluster = this.kc.getCurrentCluster();
    if (!cluster) throw new Error('no current cluster in the kubeconfig');
    const url = new URL(cluster.server + path);
    for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
    return url;
  }

  /** A complete list has been delivered to the handlers. */
  private listed(): void {
    if (this.stats.synced) return;
    this.stats.synced = true;
    this.resolveSynced();
  }

  /** The watch the loop starts for every (re)connection, right after a list or a watch ended. */
  private async watch(path: string, query: Record<string, string>, callback: WatchCallback, done: DoneCallback): Promise<{ abort(): void }> {
    const ctl = { aborted: false, inner: undefined as { abort(err?: Error): void } | undefined, abort(err?: Error): void {
      this.aborted = true;
      this.inner?.abort(err);
    } };
    await this.waitTurn();
    if (this.stopped) return ctl;
    this.stats.resourceVersion = query.resourceVersion ?? '';
    const timeoutSeconds = this.opts.watchTimeoutSeconds ?? Math.floor(300 * (1 + (this.opts.random ?? Math.random)()));
    const params = { ...query, allowWatchBookmarks: 'true', timeoutSeconds: String(timeoutSeconds) };
    const startedAt = Date.now();
    let events = 0;
    let finished = false;
    const graceMs = this.opts.watchGraceMs ?? 30_000;
    const watchdog = setTimeout(
      () => ctl.abort(new InformerFailure('timeout', `watch ${path}: aborted, not ended by the server ${graceMs / 1000} s after its ${timeoutSeconds} s timeout`)),
      timeoutSeconds * 1000 + graceMs,
    );
    watchdog.unref();
    // The silence watchdog: re-armed by every line the server sends (an event or a bookmark),
    // armed once the answer's headers are in (the connect phase has its own timeout).
    const silenceMs = this.opts.watchSilenceLimitMs ?? 150_000;
    let silence: NodeJS.Timeout | undefined;
    // (one timer per watch, pushed back per line: no timer made per event)
    const heard = () => {
      if (silenceMs <= 0 || finished) return;
      if (silence) return void silence.refresh();
      silence = setTimeout(
        () => ctl.abort(new InformerFailure('silent_watch', `watch ${path}: silent for ${silenceMs / 1000} s (no event, no bookmark): resuming from resourceVersion ${this.stats.resourceVersion || '(none)'}`)),
        silenceMs,
      );
      silence.unref();
    };
    const wrappedCallback: WatchCallback = (phase, obj, raw) => {
      if (this.stopped || ctl.aborted || finished) return;
      heard();
      if (phase === 'ERROR') {
        const code = (obj as { code?: number } | undefined)?.code;
        if (code === 410) this.stats.gone++;
        this.fail(new HttpStatusError(code ?? 0, `watch ${path}: ${(obj as { message?: string })?.message ?? 'ERROR event'}`));
      } else {
        events++;
        this.healthy();
      }
      callback(phase, obj, raw);
      if (phase !== 'ERROR' && obj?.metadata?.resourceVersion) this.stats.resourceVersion = obj.metadata.resourceVersion;
    };
    const wrappedDone: DoneCallback = (err) => {
      clearTimeout(watchdog);
      clearTimeout(silence);
      if (finished) return;
      finished = true;
      if (this.stopped) return;
      if (err) {
        // A 410 answered as an HTTP status: the loop re-lists by itself; others reach 'error'.
        if ((err as { statusCode?: number }).statusCode === 410) {
          this.stats.gone++;
          this.fail(err as Error);
        }
      } else if (events === 0 && Date.now() - startedAt < (this.opts.healthyAfterMs ?? 10_000)) {
        this.fail(new InformerFailure('empty_watch', `watch ${path}: closed by the server with no events`));
      } else if (Date.now() - startedAt >= (this.opts.healthyAfterMs ?? 10_000)) {
        this.healthy();
      }
      done(err);
    };
    this.stats.watches++;
    const url = this.url(path, { watch: 'true', ...params });
    ctl.inner = await watchStream(this.kc, url, this.opts.requestTimeoutMs ?? 60_000, wrappedCallback, wrappedDone, (code) => {
      this.request('watch', url, code);
      if (code === '200') heard();
    });
    if (this.stopped || ctl.aborted) ctl.inner.abort();
    return ctl;
  }

  private onListWatchError(e: unknown): void {
    if (this.stopped) return;
    // not served (listPages): nothing to watch
    if (!this.stats.served) return void this.stop();
    const err = e instanceof Error ? e : new Error(String(e));
    this.fail(err);
    // The loop is idle after an error: start it again once the backoff allows (start()
    // re-lists when its resourceVersion was reset, else resumes the watch from it). Deferred to
    // a new task so the failing call chain has fully unwound.
    setTimeout(() => {
      if (!this.stopped) void this.lw.start();
    }, 0).unref();
  }

  private fail(error: Error): void {
    this.stats.failures++;
    this.stats.consecutiveFailures++;
    this.stats.lastError = error.message;
    const n = this.stats.consecutiveFailures;
    const initial = this.opts.backoffInitialMs ?? 500;
    const base = n <= 1 ? 0 : Math.min(initial * 2 ** (n - 2), this.opts.backoffMaxMs ?? 30_000);
    const delay = Math.round(base * (1 + (this.opts.jitter ?? 0.1) * (this.opts.random ?? Math.random)()));
    this.nextAttemptAt = Date.now() + delay;
    const reason = informerErrorReason(error);
    // on the error too (an own field: it crosses threads and is logged with it), whoever made it
    if ((error as { reason?: unknown }).reason === undefined) Object.assign(error, { reason });
    this.opts.onError?.({ resource: this.spec.name, error, reason, retryInMs: delay, consecutiveFailures: n });
  }

  private healthy(): void {
    this.stats.consecutiveFailures = 0;
  }

  private waitTurn(): Promise<void> {
    const ms = this.nextAttemptAt - Date.now();
    if (ms <= 0 || this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const s = { timer: setTimeout(() => {
        this.sleepers.delete(s);
        resolve();
      }, ms), resolve };
      this.sleepers.add(s);
    });
  }
}

export interface KubeSourcesOptions extends InformerOptions {
  /** loadKubeConfig()'s result (or the client's own KubeConfig, which has the same members). */
  kubeConfig: ApiAccess;
  /** This node's name (kube-proxy's hostnameOverride or the hostname). */
  nodeName: string;
  handlers: KubeHandlers;
}

/** Services (all namespaces), EndpointSlices (discovery.k8s.io/v1, all namespaces), this Node
 *  and the ServiceCIDRs (networking.k8s.io/v1, when served). */
export class KubeSources {
  readonly services: ResourceInformer<V1Service>;
  readonly endpointSlices: ResourceInformer<V1EndpointSlice>;
  readonly node: ResourceInformer<V1Node>;
  readonly serviceCIDRs: ResourceInformer<V1ServiceCIDR>;
  private readonly all: Array<ResourceInformer<KubernetesObject>>;
  private readonly syncedAll: Promise<void>;

  constructor(opts: KubeSourcesOptions) {
    const { kubeConfig: kc, handlers: h } = opts;
    if (!opts.nodeName) throw new Error('KubeSources: nodeName is required');
    this.services = new ResourceInformer<V1Service>(kc, {
      name: 'services',
      path: '/api/v1/services',
      onUpdate: (o) => h.onServiceUpdate(o),
      onDelete: (o) => h.onServiceDelete(objectKey(o)),
    }, opts);
    this.endpointSlices = new ResourceInformer<V1EndpointSlice>(kc, {
      name: 'endpointslices',
      path: '/apis/discovery.k8s.io/v1/endpointslices',
      onUpdate: (o) => h.onSliceUpdate(o),
      onDelete: (o) => h.onSliceDelete(objectKey(o)),
    }, opts);
    this.node = new ResourceInformer<V1Node>(kc, {
      name: 'node',
      path: '/api/v1/nodes',
      fieldSelector: `metadata.name=${opts.nodeName}`,
      onUpdate: (o) => h.onNode(o),
      onDelete: (o) => h.onNodeDelete?.(o.metadata?.name ?? ''),
    }, opts);
    this.serviceCIDRs = new ResourceInformer<V1ServiceCIDR>(kc, {
      name: 'servicecidrs',
      path: '/apis/networking.k8s.io/v1/servicecidrs',
      optional: true,
      onUpdate: (o) => h.onServiceCIDR?.(o),
      onDelete: (o) => h.onServiceCIDRDelete?.(o.metadata?.name ?? ''),
    }, opts);
    this.all = [this.services, this.endpointSlices, this.node, this.serviceCIDRs] as Array<ResourceInformer<KubernetesObject>>;
    this.syncedAll = Promise.all(this.all.map((i) => i.synced)).then(() => undefined);
    this.syncedAll.catch(() => undefined);
  }

  start(): void {
    for (const i of this.all) i.start();
  }

  /** Resolves once Services, EndpointSlices, the Node and the ServiceCIDRs have each completed a
   *  first list and delivered it (or, ServiceCIDRs, been found not served); rejects if stopped
   *  before. Program nothing before this. */
  synced(): Promise<void> {
    return this.syncedAll;
  }

  get hasSynced(): boolean {
    return this.all.every((i) => i.stats.synced);
  }

  async stop(): Promise<void> {
    await Promise.all(this.all.map((i) => i.stop()));
  }

  stats(): ResourceStats[] {
    return this.all.map((i) => structuredClone(i.stats));
  }
}
