// The daemon's event loop during a full sync, with the proxier on the calling thread (as `sync -f`
// runs it) and on a thread of its own (as `proxy` always runs it), in the same
// run, alternating: the longest block of the daemon's loop (max and p99 of monitorEventLoopDelay
// at 1 ms resolution), the full sync's time and the process's peak RSS, with their ratios.
//   node dist/bench/event-loop.js --env host|qemu [--sizes 1000,10000] [--modes route,address] [--rounds 2]
// host: the machine's kernel, each run in a private netns with a veth for kube-ipvs0 and IPVS in
// memory (proxy-worker.ts --fake-ipvs); qemu: run it inside the VM
// (scripts/bench.sh event-loop), the real kernel, each run in a fresh network namespace with a
// dummy kube-ipvs0.
// Both sides are bench/lib/proxy-worker.ts --full-only (with --sync-thread for the thread), under
// the node flags and environment of the ipvsync command (its shebang).
// qemu with --no-estimation: also the sync thread with net.ipv4.vs.run_estimation=0 in its netns.
// Writes bench/results/event-loop-<env>.json and .md.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { NODE_ENV_VARS, NODE_FLAGS } from './lib/command-env.js';
import { eventLoopTable, type EventLoopRow, type Run } from './lib/event-loop-table.js';
import { manifestFiles } from './lib/manifests.js';
import { workload } from './lib/workload.js';

const here = dirname(fileURLToPath(import.meta.url));
const ROOT = join(here, '..', '..');
const WORKER = join(here, 'lib', 'proxy-worker.js');

const { values: a } = parseArgs({
  options: {
    env: { type: 'string' },
    sizes: { type: 'string', default: '1000,10000' },
    modes: { type: 'string', default: 'route,address' },
    rounds: { type: 'string', default: '2' },
    // qemu: a third run per round, the sync thread with net.ipv4.vs.run_estimation=0 (`proxy
    // --no-ipvs-run-estimation`): before Linux 6.2 IPVS's estimation timer walks every service
    // and destination every 2 s in softirq, holding a CPU whoever runs there
    'no-estimation': { type: 'boolean', default: false },
  },
});
if (a.env !== 'host' && a.env !== 'qemu') throw new Error('--env host|qemu');
const env = a.env;
const sizes = a.sizes!.split(',').map(Number);
const modes = a.modes!.split(',');
const rounds = Number(a.rounds);
const noEstimation = a['no-estimation']!;
if (noEstimation && env !== 'qemu') throw new Error('--no-estimation: the host has no IPVS');

function quiet(cmd: string, ...args: string[]): void {
  spawnSync(cmd, args, { stdio: 'ignore' });
}

let netnsCount = 0;
/** qemu: each run in a network namespace of its own with a dummy kube-ipvs0, as the suite runs
 *  its IPVS steps: the kernel keeps an earlier run's deleted destinations in a trash list for
 *  2–3 minutes and every destination add scans it (the same 10k full sync took 24.6 s, then
 *  167–176 s in one namespace). */
function freshNetns(): string {
  const name = `loop${process.pid}-${++netnsCount}`;
  for (const args of [['netns', 'add', name], ['-n', name, 'link', 'set', 'lo', 'up'], ['-n', name, 'link', 'add', 'kube-ipvs0', 'type', 'dummy']]) {
    const r = spawnSync('ip', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
  }
  return name;
}

type Variant = 'inProcess' | 'thread' | 'threadNoEstimation';
const LABEL: Record<Variant, string> = { inProcess: 'in process ', thread: 'sync thread', threadNoEstimation: 'sync thread, run_estimation=0' };

function runWorker(dir: string, mode: string, variant: Variant): Run {
  const thread = variant !== 'inProcess';
  const worker = [
    ...NODE_ENV_VARS, process.execPath, ...NODE_FLAGS, WORKER, '--dir', dir, '--bind-mode', mode, '--full-only',
    ...(thread ? ['--sync-thread'] : []), ...(variant === 'threadNoEstimation' ? ['--ipvs-run-estimation', '0'] : []),
  ];
  let r;
  if (env === 'host') {
    // a fresh netns per run: nothing of the last run left, a veth standing in for the dummy link
    r = spawnSync('unshare', ['-n', 'bash', '-c', 'ip link set lo up && ip link add kube-ipvs0 type veth peer name kipvs0-peer && exec env "$@"', 'sh', ...worker, '--fake-ipvs'], { encoding: 'utf8', maxBuffer: 1 << 28 });
  } else {
    const ns = freshNetns();
    r = spawnSync('ip', ['netns', 'exec', ns, 'env', ...worker], { encoding: 'utf8', maxBuffer: 1 << 28 });
    quiet('ip', 'netns', 'del', ns);
  }
  const line = (r.stdout ?? '').split('\n').find((l) => l.startsWith('@@WORKER '));
  if (r.status !== 0 || !line) throw new Error(`worker (${mode}, ${LABEL[variant]}) exited ${r.status}: ${(r.stderr ?? '').slice(0, 800)}`);
  const j = JSON.parse(line.slice(9));
  const f = j.full;
  const gc = f.gc ?? {};
  return {
    ms: f.ms,
    loopMaxMs: f.eventLoop.maxMs,
    loopP99Ms: f.eventLoop.p99Ms,
    gcMaxMs: Math.max(gc.scavenge?.maxMs ?? 0, gc.markCompact?.maxMs ?? 0, gc.other?.maxMs ?? 0),
    ...(f.cpu.mainRunQueueWaitMs !== undefined ? { mainRunQueueWaitMs: f.cpu.mainRunQueueWaitMs } : {}),
    hwmMB: j.memory.afterFullSync.vmHWMkB / 1024,
  };
}

const f0 = (x: number) => x.toFixed(0);
const variants: Variant[] = noEstimation ? ['inProcess', 'thread', 'threadNoEstimation'] : ['inProcess', 'thread'];
const rows: EventLoopRow[] = [];
for (const S of sizes) {
  const dir = mkdtempSync(join(os.tmpdir(), `ipvsync-loop-${S}-`));
  for (const [k, v] of Object.entries(manifestFiles(workload(S).services))) writeFileSync(join(dir, k), v);
  for (const mode of modes) {
    const row = { services: S, mode, inProcess: [] as Run[], thread: [] as Run[], ...(noEstimation ? { threadNoEstimation: [] as Run[] } : {}) };
    for (let i = 0; i < rounds; i++) {
      // alternating, the in-process run first in odd rounds and last in even ones
      for (const variant of i % 2 === 0 ? variants : [...variants].reverse()) {
        const run = runWorker(dir, mode, variant);
        row[variant]!.push(run);
        console.log(`[${env} S=${S} ${mode}] ${LABEL[variant]}: full ${f0(run.ms)} ms, event loop max ${run.loopMaxMs.toFixed(1)} ms (p99 ${run.loopP99Ms.toFixed(1)}), longest GC pause of the loop's heap ${run.gcMaxMs.toFixed(1)} ms, run-queue wait ${run.mainRunQueueWaitMs?.toFixed(0) ?? '?'} ms, peak RSS ${run.hwmMB.toFixed(0)} MB`);
      }
    }
    rows.push(row);
  }
}

const lines = [
  `Event loop during a full sync, ${env} (${os.release()}, ${os.cpus().length} CPUs), ${rounds} run(s) each, alternating; ${new Date().toISOString()}`,
  '',
  ...eventLoopTable(rows, noEstimation),
];
lines.push('', 'loop max / p99 / peak RSS: the worst of the runs; full sync: their mean.');
const md = lines.join('\n');
console.log(`\n${md}`);
// Inside the VM the checkout is read-only: the results go through its output window.
const results = process.env.IPVSYNC_RESULTS_DIR ?? join(ROOT, 'bench', 'results');
mkdirSync(results, { recursive: true });
writeFileSync(join(results, `event-loop-${env}.json`), JSON.stringify({ env, kernel: os.release(), nproc: os.cpus().length, node: process.version, date: new Date().toISOString(), rounds, rows }, null, 2) + '\n');
writeFileSync(join(results, `event-loop-${env}.md`), md + '\n');
