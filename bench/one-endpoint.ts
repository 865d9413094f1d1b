// The IPVS data plane's one-endpoint step at a few sizes, alone: the suite's host rows for
// ipvsync only (bench/lib/proxy-worker.ts on this kernel in a private netns, IPVS in memory,
// a veth for kube-ipvs0), and the IPVS plane's step timed by itself in a process of its own
// (no kernel: the proxier's call before the engine).
//   node dist/bench/one-endpoint.js [--sizes 1000,10000,50000] [--runs 1] [--no-worker]
//                                   [--no-thread] [--no-functions]
// Per size and run: the worker's full sync, its one-endpoint step (median of 21, after the full
// sync / with the loop idle before each), the engine's, its peak RSS; the worker with the
// proxier on its sync thread (full sync only: the daemon's peak RSS); the plane's step (median
// of 41 changes, each after 20 ms idle). Prints one JSON line per
// measurement ("@@ONE {…}") and a table.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import type { V1EndpointSlice, V1Service } from '../src/kube/api-types.js';
import { EndpointSliceTracker, ServiceTracker } from '../src/kube/change-tracker.js';
import { IpvsPlane } from '../src/proxy/ipvs/plane.js';
import { NODE_ENV_VARS, NODE_FLAGS } from './lib/command-env.js';
import { manifestFiles, serviceObject, sliceObject } from './lib/manifests.js';
import { median } from './lib/median.js';
import { CLUSTER_CIDR, NODE_IP, NODE_NAME, REPLACEMENT_IP, changedIndex, withOneEndpointChanged, workload } from './lib/workload.js';

const here = dirname(fileURLToPath(import.meta.url));
const { values: a } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1000,10000' },
    runs: { type: 'string', default: '1' },
    'no-worker': { type: 'boolean', default: false },
    'no-thread': { type: 'boolean', default: false },
    'no-functions': { type: 'boolean', default: false },
    // internal: the functions' timing for one size, in this process
    functions: { type: 'string' },
  },
});

const SAMPLES = 41;

async function functions(S: number): Promise<void> {
  const w = workload(S);
  const services = new ServiceTracker();
  const slices = new EndpointSliceTracker();
  for (const s of w.services) services.update(serviceObject(s) as unknown as V1Service);
  for (const s of w.services) slices.update(sliceObject(s) as unknown as V1EndpointSlice);
  services.drain();
  slices.drain();
  const node = { name: NODE_NAME, addresses: [NODE_IP] };
  const config = { scheduler: 'rr', clusterCIDRs: [CLUSTER_CIDR] };
  const opts = { vipLink: 'kube-ipvs0', glue: true, kubeIpsets: false, bindMode: 'address' as const };
  const plane = new IpvsPlane(opts);
  const src = {
    node,
    config,
    serviceCIDRs: undefined,
    get size() {
      return services.size;
    },
    names: () => [...services.keys()].sort(),
    objectsOf: (n: string) => {
      const svc = services.get(n);
      return svc && { svc, slices: slices.members(n) };
    },
  };
  plane.step(true, new Set(), src);
  plane.applied(true);
  const peers = withOneEndpointChanged(w).services[changedIndex(w)]!;
  const stepMs: number[] = [];
  await sleep(1000);
  for (let k = 0; k < SAMPLES; k++) {
    await sleep(20);
    const changed = { ...peers, endpoints: peers.endpoints.map((e) => (e.ip === REPLACEMENT_IP ? { ...e, ip: `10.127.255.${1 + k}` } : e)) };
    slices.update(sliceObject(changed) as unknown as V1EndpointSlice);
    const names = slices.drain();
    const t0 = performance.now();
    const step = plane.step(false, names, src);
    stepMs.push(performance.now() - t0);
    plane.applied(true);
    if (!step.changes?.services?.size) throw new Error('the plane named no change');
  }
  console.log('@@ONE ' + JSON.stringify({ kind: 'functions', S, planeStepMs: median(stepMs), planeStepSamples: stepMs }));
}

/** The worker over `dir` in a new network namespace with kube-ipvs0 as a veth (the host has no
 *  dummy links), as the suite's host phase runs it. */
function worker(dir: string, args: string[]): any {
  const cmd = [process.execPath, ...NODE_FLAGS, join(here, 'lib', 'proxy-worker.js'), '--dir', dir, '--fake-ipvs', ...args].map((x) => `'${x}'`).join(' ');
  const script = `ip link set lo up && ip link add kube-ipvs0 type veth peer name kipvs0-peer && exec env ${NODE_ENV_VARS.join(' ')} ${cmd}`;
  const r = spawnSync('unshare', ['-n', 'bash', '-c', script], { encoding: 'utf8', maxBuffer: 1 << 28 });
  const line = r.stdout.split('\n').find((l) => l.startsWith('@@WORKER '));
  if (!line) throw new Error(`worker: exit ${r.status}: ${r.stderr.slice(0, 800)}`);
  return JSON.parse(line.slice(9));
}

if (a.functions) {
  await functions(Number(a.functions));
  process.exit(0);
}

const rows: string[] = [];
for (const S of a.sizes!.split(',').map(Number)) {
  const dir = mkdtempSync(join(os.tmpdir(), `ipvsync-one-${S}-`));
  for (const [k, v] of Object.entries(manifestFiles(workload(S).services))) writeFileSync(join(dir, k), v);
  for (let run = 0; run < Number(a.runs); run++) {
    const out: Record<string, unknown> = { S, run };
    if (!a['no-worker']) {
      const r = worker(dir, []);
      Object.assign(out, {
        fullMs: r.full.ms,
        proxierMs: r.oneEndpointProxier.ms,
        proxierIdleMs: r.oneEndpointProxierIdle.ms,
        engineMs: r.oneEndpointEngine.ms,
        messages: r.oneEndpointProxier.messages,
        sendmsg: r.oneEndpointProxier.sendmsg,
        workerHwmMB: r.memory.end.vmHWMkB / 1024,
      });
    }
    if (!a['no-thread']) {
      const r = worker(dir, ['--sync-thread', '--full-only']);
      Object.assign(out, { threadFullMs: r.full.ms, threadHwmMB: r.memory.afterFullSync.vmHWMkB / 1024 });
    }
    if (!a['no-functions']) {
      const r = spawnSync('env', [...NODE_ENV_VARS, process.execPath, ...NODE_FLAGS, fileURLToPath(import.meta.url), '--functions', String(S)], { encoding: 'utf8', maxBuffer: 1 << 28 });
      const line = r.stdout.split('\n').find((l) => l.startsWith('@@ONE '));
      if (!line) throw new Error(`functions: exit ${r.status}: ${r.stderr.slice(0, 800)}`);
      const f = JSON.parse(line.slice(6));
      Object.assign(out, { planeStepMs: f.planeStepMs });
    }
    console.log('@@ONE ' + JSON.stringify(out));
    rows.push(Object.entries(out).map(([k, v]) => `${k} ${typeof v === 'number' && !Number.isInteger(v) ? v.toFixed(2) : v}`).join(', '));
  }
  rmSync(dir, { recursive: true, force: true });
}
console.log(rows.join('\n'));
