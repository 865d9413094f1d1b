// The sync thread's side of ThreadedProxier (sync-thread.ts): opens the kernel handles, keeps a
// Proxier, applies the posted objects in order and answers each sync request.
import { parentPort, workerData } from 'node:worker_threads';
import type { EngineKernel } from '../engine/engine.js';
import { memoryPressure } from '../native.js';
import { openKernel as openRealKernel } from './kernel.js';
import { Proxier, type ProxySyncResult } from './proxier.js';
import { toWireError, toWireReport, type FromThread, type ModelSummary, type SyncThreadOptions, type ToThread } from './sync-thread.js';

const port = parentPort!;
const opts = workerData as SyncThreadOptions;
const send = (m: FromThread) => port.postMessage(m);

function summary(r: ProxySyncResult): ModelSummary {
  const m = r.model;
  return { services: m.services.length, vips: m.vips.length, healthChecks: m.healthChecks, noLocalEndpointsTotal: m.noLocalEndpointsTotal, warnings: m.warnings };
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
const proxier = new Proxier(kernel!, opts.proxier);

// One sync at a time, in the order requested (the daemon's runner never overlaps them anyway).
let queue: Promise<void> = Promise.resolve();
port.on('message', (m: ToThread) => {
  switch (m.t) {
    case 'service':
      return proxier.onServiceUpdate(m.obj);
    case 'serviceDelete':
      return proxier.onServiceDelete(m.key);
    case 'slice':
      return proxier.onSliceUpdate(m.obj);
    case 'sliceDelete':
      return proxier.onSliceDelete(m.key);
    case 'flush':
      return send({ t: 'flushed', id: m.id });
    case 'sync':
      queue = queue.then(async () => {
        try {
          const r = await proxier.sync(m.full);
          send({ t: 'synced', id: m.id, result: { report: toWireReport(r.report), model: summary(r), serviceChanges: r.serviceChanges, endpointChanges: r.endpointChanges } });
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
send({ t: 'ready' });
