// The proxier on a thread of its own (a worker_threads Worker with its own V8 heap), as the
// daemon always runs it: the daemon's thread keeps /healthz and /metrics and asks for syncs;
// the thread reads the API or the manifests folder itself. A full sync at 10k services is seconds
// of JavaScript and garbage collection; run to the end on the sync thread (its computations are
// plain functions), it blocks only the sync.
//
// The thread opens its own kernel handles (the addon keeps its state per thread), translates,
// diffs and applies as Proxier does, and after a full sync tells its V8 heap to give the memory
// back (memoryPressure). Messages keep their order: a folder loaded before a sync request is in
// that sync.
import { Worker } from 'node:worker_threads';
import type { V1Node } from '../kube/api-types.js';
import { REPORT_KINDS, type ReportKind, type SyncReport } from '../engine/types.js';
import { NetlinkError, type NetlinkErrorFields } from '../errors.js';
import type { InformerError, InformerErrorReason, InformerOptions, ResourceName } from '../kube/informers.js';
import type { KubeConfigSource } from '../kube/kubeconfig.js';
import type { FolderLoad } from '../kube/manifests.js';
import type { HealthCheck, ModelWarning, ServiceSummary } from '../kube/types.js';
import type { HandleOptions } from '../native.js';
import type { KernelOptions } from './kernel.js';
import type { PendingChanges, ProxierOptions } from './proxier.js';

export interface SyncThreadOptions {
  /** Posted to the thread (so no functions): the thread's proxier always collects its heap in
   *  a full sync (ProxierOptions.collectGarbage). */
  proxier: Omit<ProxierOptions, 'collectGarbage'>;
  /** The kernel handles the thread opens (in the namespace `handle` names). */
  kernel: KernelOptions & { handle?: HandleOptions };
  /** A module exporting `openKernel(handle, kernelOptions)` to use instead of the real kernel's
   *  (tests: an in-memory kernel). A file URL or an absolute path. */
  kernelModule?: string;
  /**
   * The thread's nice value (Linux: setpriority of its own thread id; default 5). The daemon's
   * thread stays at the process's: when it wants a CPU the sync's JavaScript keeps busy, the
   * scheduler runs it first, so its event loop (its timers, /healthz, a GC pause of its heap)
   * is held waiting less. 0 leaves the thread as it is.
   */
  nice?: number;
}

/** SyncThreadOptions.nice's default. */
export const SYNC_THREAD_NICE = 5;

/** What a sync thread reports of its model: the daemon's health servers and metrics read these
 *  (the model itself, ~100k destinations at 10k services, stays on the thread). */
export interface ModelSummary {
  services: number;
  vips: number;
  healthChecks: HealthCheck[];
  noLocalEndpointsTotal: ServiceSummary['noLocalEndpointsTotal'];
  warnings: ModelWarning[];
}

export interface ThreadSyncResult {
  report: SyncReport;
  summary: ModelSummary;
  serviceChanges: number;
  endpointChanges: number;
  /** ProxySyncResult.triggerTimes. */
  triggerTimes: number[];
  /** The changes that arrived while it ran. */
  pending: PendingChanges;
}

/** An error as it crosses the thread boundary (a structured clone keeps no class, and of an
 *  Error only its name, message, stack and cause). */
export interface WireError {
  name: string;
  message: string;
  stack?: string;
  netlink?: NetlinkErrorFields;
  /** Any other error's own plain fields (a system error's code, errno, syscall, path …). */
  fields?: Record<string, string | number | boolean>;
  cause?: WireError;
}

export type ToThread =
  | { t: 'loadManifests'; id: number; dir: string }
  | { t: 'sync'; id: number; full: boolean }
  | { t: 'flush'; id: number }
  | { t: 'watchKube'; id: number; source: KubeConfigSource; nodeName: string; informer: ThreadInformerOptions }
  | { t: 'stopKube'; id: number };

export type FromThread =
  | { t: 'ready'; tid: number; niceError?: string }
  | { t: 'openFailed'; error: WireError }
  | { t: 'synced'; id: number; result: Omit<ThreadSyncResult, 'report'> & { report: WireReport } }
  | { t: 'syncFailed'; id: number; error: WireError }
  | { t: 'flushed'; id: number; pending: PendingChanges }
  | { t: 'loaded'; id: number; load: FolderLoad; pending: PendingChanges }
  | { t: 'loadFailed'; id: number; error: WireError }
  | { t: 'kubeStarted'; id: number }
  | { t: 'kubeFailed'; id: number; error: WireError }
  | { t: 'kubeStopped'; id: number }
  | { t: 'kubeSynced' }
  | { t: 'kubeChanged'; pending: PendingChanges }
  | { t: 'kubeNode'; node: V1Node | undefined }
  | { t: 'kubeError'; resource: ResourceName; error: WireError; reason: InformerErrorReason; retryInMs: number; consecutiveFailures: number }
  | { t: 'kubeRequests'; counts: ApiRequestCount[] }
  | { t: 'kubeHandlerError'; resource: ResourceName; error: WireError };

/** The informers' options that cross to the thread (numbers: no functions). */
export type ThreadInformerOptions = Omit<InformerOptions, 'onError' | 'onHandlerError' | 'onRequest' | 'random'>;

/** The informers' requests so far with one status (or '<error>'), host and method: client-go's
 *  rest_client_requests_total series. */
export interface ApiRequestCount {
  code: string;
  host: string;
  method: string;
  count: number;
}

/** ThreadedProxier.watchKube's options. */
export interface ThreadKubeOptions {
  /** Where the thread finds the API server and its credentials (it loads the configuration
   *  itself, as loadKubeConfig: a kubeconfig file, the pod's service account, or a server URL). */
  source: KubeConfigSource;
  /** This node (its Node object is watched for /healthz's node eligibility). */
  nodeName: string;
  informer?: ThreadInformerOptions;
  /** Objects were taken in (Services or EndpointSlices added, changed or deleted): a sync is
   *  due. Called at most once per batch the thread takes in, not per object. */
  onChange?: () => void;
  /** This node's Node object as watched; undefined once deleted. */
  onNode?: (node: V1Node | undefined) => void;
  /** Every list or watch failure (the informers retry by themselves; for logs). */
  onError?: (e: InformerError) => void;
  /** A handler threw on the thread (a bug; the informers keep going). */
  onHandlerError?: (resource: ResourceName, error: Error) => void;
}

/** The informers running on the sync thread. */
export interface ThreadKube {
  /** Resolves once Services, EndpointSlices and the Node have each been listed and the thread
   *  has taken every listed object in (program nothing before). */
  readonly synced: Promise<void>;
  /** Stops the watches (the proxier keeps what it has). */
  stop(): Promise<void>;
}

/** A SyncReport with its errors as WireErrors; a kind's error that is also in `errors` (all of
 *  them, as the engine reports) goes as its index there. */
export type WireReport = Omit<SyncReport, 'errors' | ReportKind> & { errors: WireError[] } & {
  [K in ReportKind]: Omit<SyncReport[K], 'errors'> & { errors: Array<number | WireError> };
};

export function toWireError(e: unknown, depth = 0): WireError {
  if (e instanceof NetlinkError) {
    const f: NetlinkErrorFields = { message: e.message, code: e.code, errno: e.errno, kind: e.kind, op: e.op };
    if (e.extack !== undefined) f.extack = e.extack;
    if (e.extackOffset !== undefined) f.extackOffset = e.extackOffset;
    if (e.index !== undefined) f.index = e.index;
    if (e.member !== undefined) f.member = e.member;
    return { name: e.name, message: e.message, ...(e.stack ? { stack: e.stack } : {}), netlink: f, ...wireCause(e, depth) };
  }
  if (e instanceof Error) {
    const fields: Record<string, string | number | boolean> = {};
    for (const [k, v] of Object.entries(e)) if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') fields[k] = v;
    return { name: e.name, message: e.message, ...(e.stack ? { stack: e.stack } : {}), ...(Object.keys(fields).length ? { fields } : {}), ...wireCause(e, depth) };
  }
  return { name: 'Error', message: String(e) };
}

/** A cause chain crosses too (a few links: an error's own cause may be a cycle). */
function wireCause(e: Error, depth: number): { cause?: WireError } {
  return e.cause !== undefined && depth < 4 ? { cause: toWireError(e.cause, depth + 1) } : {};
}

export function fromWireError(w: WireError): Error {
  const e = w.netlink ? new NetlinkError(w.netlink) : new Error(w.message);
  if (!w.netlink) {
    e.name = w.name;
    if (w.fields) Object.assign(e, w.fields);
  }
  if (w.stack) e.stack = w.stack;
  if (w.cause) e.cause = fromWireError(w.cause);
  return e;
}

export function toWireReport(r: SyncReport): WireReport {
  const index = new Map(r.errors.map((e, i) => [e, i]));
  const out = { ...r, errors: r.errors.map(toWireError) } as unknown as WireReport;
  for (const k of REPORT_KINDS) out[k] = { ...r[k], errors: r[k].errors.map((e) => index.get(e) ?? toWireError(e)) };
  return out;
}

/** The report back with NetlinkErrors: an error listed both in a kind and in `errors` is one
 *  object again, as in the thread. */
export function fromWireReport(w: WireReport): SyncReport {
  const all = w.errors.map(fromWireError) as NetlinkError[];
  const out = { ...w, errors: all } as unknown as SyncReport;
  for (const k of REPORT_KINDS) out[k] = { ...w[k], errors: w[k].errors.map((e) => (typeof e === 'number' ? all[e]! : (fromWireError(e) as NetlinkError))) };
  return out;
}

export class SyncThreadError extends Error {
  override readonly name = 'SyncThreadError';
}

/**
 * A Proxier on its own thread, fed by a manifests folder (loadManifests) or the API server
 * (watchKube) that the thread reads itself, with a sync that resolves with the report and a
 * summary of the model. `start()` resolves once the thread has opened its kernel handles (or
 * rejects with the reason it could not).
 */
export class ThreadedProxier {
  private nextId = 1;
  /** Requests awaiting their answer (syncs and flushes), by id. */
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  /** Why the thread is gone (every later request rejects with it). */
  private dead: SyncThreadError | undefined;
  private closing = false;
  private onExited: (e: SyncThreadError) => void = () => {};
  /** Resolves if the thread ends on its own (crashed, exited): every sync fails from then on, so
   *  a daemon should exit and be restarted. Never resolves after close(). */
  readonly exited: Promise<SyncThreadError> = new Promise((resolve) => (this.onExited = resolve));

  /** The changes the thread has received and no sync has taken yet, as it last reported them
   *  (after each batch of objects it takes in, each folder load, flush and sync). */
  pendingChanges: PendingChanges = { services: 0, endpoints: 0 };

  /** The informers' requests so far, by status, host and method, as the thread last reported
   *  them (at most once per turn of its event loop, after requests answered): cumulative, so a
   *  scrape reads exact counts of what the thread has reported. */
  apiRequests: readonly ApiRequestCount[] = [];

  /** The thread's Linux thread id (its /proc/self/task entry). */
  threadId = 0;
  /** Why the thread's nice value could not be set (the thread runs at the process's), if so. */
  niceError: string | undefined;
  /** The informers on the thread, once watchKube has started them. */
  private kube: { opts: ThreadKubeOptions; synced: { resolve: () => void; reject: (e: Error) => void } } | undefined;

  private constructor(private readonly worker: Worker) {
    worker.on('message', (m: FromThread) => this.onMessage(m));
    worker.on('error', (e) => this.fail(new SyncThreadError(`sync thread failed: ${e.message}`, { cause: e })));
    worker.on('exit', (code) => {
      const e = new SyncThreadError(`sync thread exited (code ${code})`);
      this.fail(e);
      if (!this.closing) this.onExited(this.dead ?? e);
    });
  }

  static async start(opts: SyncThreadOptions): Promise<ThreadedProxier> {
    const worker = new Worker(new URL('./sync-thread-worker.js', import.meta.url), { workerData: opts });
    const p = new ThreadedProxier(worker);
    await new Promise<void>((resolve, reject) => {
      const onMessage = (m: FromThread) => {
        if (m.t === 'ready') {
          p.threadId = m.tid;
          p.niceError = m.niceError;
          done(), resolve();
        } else if (m.t === 'openFailed') done(), void worker.terminate(), reject(fromWireError(m.error));
      };
      const onExit = (code: number) => (done(), reject(p.dead ?? new SyncThreadError(`sync thread exited (code ${code}) before it was ready`)));
      const done = () => (worker.off('message', onMessage), worker.off('exit', onExit));
      worker.on('message', onMessage);
      worker.on('exit', onExit);
    });
    return p;
  }

  private post(m: ToThread): void {
    this.worker.postMessage(m);
  }

  /** Plans and applies on the thread (`full`: compare every IPVS service, as Proxier.sync). */
  sync(full: boolean): Promise<ThreadSyncResult> {
    return this.request((id) => ({ t: 'sync', id, full }));
  }

  /**
   * The thread reads a manifests folder itself (ManifestFolder: every object, and deletes of
   * those gone since its last load of `dir`), so this thread never holds the parsed objects.
   * In order with the syncs requested: a sync asked for after it has the folder's objects.
   * A folder that does not load rejects with its ManifestError (by name and message) and
   * changes nothing on the thread.
   */
  loadManifests(dir: string): Promise<FolderLoad> {
    return this.request((id) => ({ t: 'loadManifests', id, dir }));
  }

  /** Resolves once the thread has handled every message sent to it before (no sync);
   *  pendingChanges is then what the thread holds. */
  flush(): Promise<void> {
    return this.request((id) => ({ t: 'flush', id }));
  }

  /**
   * Runs the API informers (Services, EndpointSlices, this Node: KubeSources) on the thread:
   * it lists and watches the API server itself, and each object goes from the parsed answer
   * straight into the proxier, so this thread never parses, holds or copies them (posted from
   * here, the first lists crossed the threads object by object, every one held on both sides
   * while in flight). This thread hears of changes (`onChange`, once per batch), of its Node,
   * and of failures. Resolves once the informers have started, or rejects with the error that
   * kept them from it (a KubeConfigError, by name and message). One per thread.
   */
  async watchKube(opts: ThreadKubeOptions): Promise<ThreadKube> {
    if (this.kube) throw new SyncThreadError('watchKube: the thread already watches the API');
    let resolve!: () => void;
    let reject!: (e: Error) => void;
    const synced = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
    synced.catch(() => undefined); // a caller that never awaits it is not an unhandled rejection
    this.kube = { opts, synced: { resolve, reject } };
    try {
      await this.request((id) => ({ t: 'watchKube', id, source: opts.source, nodeName: opts.nodeName, informer: opts.informer ?? {} }));
    } catch (e) {
      this.kube = undefined;
      throw e;
    }
    return {
      synced,
      stop: async () => {
        reject(new SyncThreadError('informers stopped before the first lists'));
        if (this.dead) return;
        await this.request((id) => ({ t: 'stopKube', id }));
      },
    };
  }

  private request<T>(message: (id: number) => ToThread): Promise<T> {
    if (this.dead) return Promise.reject(this.dead);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.post(message(id));
    });
  }

  /** Stops the thread; the data plane stays as the last sync left it. */
  async close(): Promise<void> {
    this.closing = true;
    this.fail(new SyncThreadError('sync thread closed'));
    await this.worker.terminate();
  }

  private onMessage(m: FromThread): void {
    if (m.t === 'ready' || m.t === 'openFailed') return;
    if ('pending' in m) this.pendingChanges = m.pending;
    if (m.t === 'kubeRequests') return void (this.apiRequests = m.counts);
    if (m.t === 'kubeSynced' || m.t === 'kubeChanged' || m.t === 'kubeNode' || m.t === 'kubeError' || m.t === 'kubeHandlerError') return this.onKube(m);
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (m.t === 'synced') {
      this.pendingChanges = m.result.pending;
      p.resolve({ ...m.result, report: fromWireReport(m.result.report) });
    } else if (m.t === 'flushed') p.resolve(undefined);
    else if (m.t === 'loaded') p.resolve(m.load);
    else if (m.t === 'kubeStarted' || m.t === 'kubeStopped') p.resolve(undefined);
    else p.reject(fromWireError(m.error));
  }

  private onKube(m: Extract<FromThread, { t: 'kubeSynced' | 'kubeChanged' | 'kubeNode' | 'kubeError' | 'kubeHandlerError' }>): void {
    const k = this.kube;
    if (!k) return;
    switch (m.t) {
      case 'kubeSynced':
        return k.synced.resolve();
      case 'kubeChanged':
        return k.opts.onChange?.();
      case 'kubeNode':
        return k.opts.onNode?.(m.node);
      case 'kubeError':
        return k.opts.onError?.({ resource: m.resource, error: fromWireError(m.error), reason: m.reason, retryInMs: m.retryInMs, consecutiveFailures: m.consecutiveFailures });
      case 'kubeHandlerError':
        return k.opts.onHandlerError?.(m.resource, fromWireError(m.error));
    }
  }

  private fail(e: SyncThreadError): void {
    this.dead ??= e;
    this.kube?.synced.reject(e);
    for (const p of this.pending.values()) p.reject(this.dead);
    this.pending.clear();
  }
}
