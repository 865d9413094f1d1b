// The sync thread's side of ThreadedProxier (sync-thread.ts): opens the kernel handles, keeps a
// Proxier fed by the manifests folder or the API informers it runs, and answers each request in
// order.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import type { EngineKernel } from '../engine/engine.js';
import type { ApiRequest } from '../kube/informers.js';
import { ManifestFolder } from '../kube/manifests.js';
import { memoryPressure } from '../native.js';
import { openKernel as openRealKernel } from './kernel.js';
import { Proxier, type ProxySyncResult } from './proxier.js';
import { SYNC_THREAD_NICE, toWireError, toWireReport, type ApiRequestCount, type FromThread, type ModelSummary, type SyncThreadOptions, type ToThread } from './sync-thread.js';

const port = parentPort!;
const opts = workerData as SyncThreadOptions;
const send = (m: FromThread) => port.postMessage(m);

function summary(r: ProxySyncResult): ModelSummary {
  const m = r.summary;
  return { services: r.model?.services.length ?? 0, vips: r.model?.vips.length ?? 0, healthChecks: m.healthChecks, noLocalEndpointsTotal: m.noLocalEndpointsTotal, warnings: m.warnings };
}

// This thread's id ("<pid>/task/<tid>"), and its nice value: a thread's own, on Linux. Only
// this thread's: the libuv pool's threads (its kernel work) at the same value made full syncs
// longer and the daemon's loop no better (docs/performance.md).
const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
let niceError: string | undefined;
const nice = opts.nice ?? SYNC_THREAD_NICE;
if (nice !== 0) {
  try {
    setPriority(tid, nice);
  } catch (e) {
    niceError = (e as Error).message;
  }
}

let kernel: EngineKernel;
try {
  const open: typeof openRealKernel = opts.kernelModule ? (await import(opts.kernelModule)).openKernel : openRealKernel;
  kernel = await open(opts.kernel.handle ?? {}, opts.kernel);
} catch (e) {
  send({ t: 'openFailed', error: toWireError(e) });
  // nothing else to do: the daemon's thread terminates this one
  await new Promise(() => {});
}
// A full sync of the IPVS data plane collects this thread's heap before its diff and before its
// apply (the option's comment): a lower peak; the collections hold only this thread.
const proxier = new Proxier(kernel!, { ...opts.proxier, collectGarbage: () => memoryPressure('critical') });

// One sync or folder load at a time, in the order requested (the daemon's runner never
// overlaps syncs anyway).
let queue: Promise<void> = Promise.resolve();
/** The manifests folders this thread reads itself, by path (each remembers what it gave). */
const folders = new Map<string, ManifestFolder>();
/** The API informers, once asked for (watchKube). */
let sources: { stop(): Promise<void> } | undefined;
/** A 'kubeChanged' is posted once per batch of objects taken in (the objects of one list page,
 *  or the watch events of one read), not once per object. */
let changePosted = false;
const changed = () => {
  if (changePosted) return;
  changePosted = true;
  setImmediate(() => {
    changePosted = false;
    send({ t: 'kubeChanged', pending: proxier.pendingChanges });
  });
};

/** The informers' requests by status, host and method, cumulative; posted whole, once per turn
 *  of the event loop that answered requests (a list's pages, a round of re-watches), never per
 *  watch event — and before any failure report, so the daemon's thread never sees a failure
 *  before the request that had it. */
const requestCounts = new Map<string, ApiRequestCount>();
let requestsDue = false;
const postRequests = () => {
  if (!requestsDue) return;
  requestsDue = false;
  send({ t: 'kubeRequests', counts: [...requestCounts.values()] });
};
const requested = ({ code, host, method }: ApiRequest) => {
  const key = `${code}\t${host}\t${method}`;
  let c = requestCounts.get(key);
  if (!c) requestCounts.set(key, (c = { code, host, method, count: 0 }));
  c.count++;
  if (requestsDue) return;
  requestsDue = true;
  setImmediate(postRequests);
};

async function watchKube(m: Extract<ToThread, { t: 'watchKube' }>): Promise<void> {
  const { KubeSources } = await import('../kube/informers.js');
  // The client (an optional peer) is loaded only for a kubeconfig user with an exec plugin or an
  // auth provider (kubeconfig.ts); a manifests folder and the library never load this module.
  const { loadKubeConfig } = await import('../kube/kubeconfig.js');
  const kubeConfig = loadKubeConfig(m.source);
  // a client that is missing or cannot load fails the start, not every request after it
  await kubeConfig.ready();
  const s = new KubeSources({
    ...m.informer,
    kubeConfig,
    nodeName: m.nodeName,
    handlers: {
      onServiceUpdate: (x) => (proxier.onServiceUpdate(x), changed()),
      onServiceDelete: (k) => (proxier.onServiceDelete(k), changed()),
      onSliceUpdate: (x) => (proxier.onSliceUpdate(x), changed()),
      onSliceDelete: (k) => (proxier.onSliceDelete(k), changed()),
      // The zone of topology hints is the node's label: a new zone is a change to sync.
      onNode: (node) => {
        if (proxier.onNode(node)) changed();
        send({ t: 'kubeNode', node });
      },
      onNodeDelete: (name) => {
        if (proxier.onNodeDelete(name)) changed();
        send({ t: 'kubeNode', node: undefined });
      },
      // The service CIDRs: traffic to their unallocated addresses is dropped (nftables mode).
      onServiceCIDR: (o) => proxier.onServiceCIDR(o) && changed(),
      onServiceCIDRDelete: (name) => proxier.onServiceCIDRDelete(name) && changed(),
    },
    onError: (e) => (postRequests(), send({ t: 'kubeError', resource: e.resource, error: toWireError(e.error), reason: e.reason, retryInMs: e.retryInMs, consecutiveFailures: e.consecutiveFailures })),
    onRequest: requested,
    onHandlerError: (resource, e) => send({ t: 'kubeHandlerError', resource, error: toWireError(e) }),
  });
  s.start();
  sources = s;
  // after every object of the first lists was taken in (the handlers run as each page arrives)
  s.synced().then(() => send({ t: 'kubeSynced' }), () => undefined);
}
port.on('message', (m: ToThread) => {
  switch (m.t) {
    case 'flush':
      return send({ t: 'flushed', id: m.id, pending: proxier.pendingChanges });
    case 'watchKube':
      if (sources) return send({ t: 'kubeFailed', id: m.id, error: toWireError(new Error('the thread already watches the API')) });
      watchKube(m).then(
        () => send({ t: 'kubeStarted', id: m.id }),
        (e: unknown) => send({ t: 'kubeFailed', id: m.id, error: toWireError(e) }),
      );
      return;
    case 'stopKube':
      void (sources?.stop() ?? Promise.resolve()).then(() => send({ t: 'kubeStopped', id: m.id }));
      return;
    case 'loadManifests':
      queue = queue.then(async () => {
        try {
          let folder = folders.get(m.dir);
          if (!folder) folders.set(m.dir, (folder = new ManifestFolder(m.dir)));
          // The parsed folder is garbage once loaded (the proxier keeps only what it reads of
          // each object). Not collected here: the sync's first collections take it, and the
          // heap it grew is room the sync allocates in (collected at once, the full sync took
          // longer and peaked no lower: docs/performance.md).
          const load = await folder.load(proxier);
          send({ t: 'loaded', id: m.id, load, pending: proxier.pendingChanges });
        } catch (e) {
          send({ t: 'loadFailed', id: m.id, error: toWireError(e) });
        }
      });
      return;
    case 'sync':
      queue = queue.then(async () => {
        try {
          const r = await proxier.sync(m.full);
          send({
            t: 'synced',
            id: m.id,
            result: { report: toWireReport(r.report), summary: summary(r), serviceChanges: r.serviceChanges, endpointChanges: r.endpointChanges, triggerTimes: r.triggerTimes, pending: proxier.pendingChanges },
          });
          // A full sync read every kernel table and dropped it: give that memory back now, not
          // at the heap's next limit (an incremental collection; this thread's heap only).
          if (r.report.mode === 'full') memoryPressure('moderate');
        } catch (e) {
          send({ t: 'syncFailed', id: m.id, error: toWireError(e) });
        }
      });
      return;
  }
});
send({ t: 'ready', tid, ...(niceError ? { niceError } : {}) });
