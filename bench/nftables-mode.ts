// The nftables data plane at real speed, on the machine's own kernel in a private network
// namespace, against kube-proxy's tools in the same run:
//   node dist/bench/nftables-mode.js [--sizes 1000,5000,10000,20000,50000] [--rounds 3] [--cap 120]
//        [--piece 1000] [--pieces-cap SECONDS] [--change-peer-max 10000] [--conn-sizes 1000,10000]
//        [--out DIR]
//   node dist/bench/nftables-mode.js --daemon-only [--sizes …] [--rounds 3]
//   node dist/bench/nftables-mode.js --render [--from FILE.json] [--out DIR]
// Workload: S services × 10 endpoints (every 10th also a NodePort), as bench/suite.ts.
//
// Each size in a process of its own, in a network namespace of its own (`unshare -n`): no size
// inherits another's heap, JIT, conntrack or tables. In it, --rounds rounds (3; the project's
// rule is ≥ 3, fewer only for a quick look), each round every measurement below once, in this
// order, the tables flushed between them, so ipvsync and every peer are alternated and a busy
// moment of the machine falls on both. Every timed thing is a fresh process per run (the
// daemon's in-process path too: a child per run, so its first sync never meets a JIT warmed by
// the round before); the size's process only orchestrates. The tables give the median of the
// rounds with the spread (min–max), and the load average at the start and end of each size (the
// machine has 2 cores and is shared).
//   ipvsync   `ipvsync sync -f DIR --proxy-mode nftables` as a whole process: the first run on an
//             empty table, a second run of the same objects (nothing to write), one endpoint
//             replaced
//   daemon path  the Proxier of `ipvsync proxy` in a child process, objects already parsed: the
//             first sync, a no-op sync, one endpoint replaced (incremental, the kernel's commit
//             included; the median of 41), a full resync; its writes
//   daemon    `ipvsync proxy --manifests` as a process: (a) its cold first start on an empty
//             table, (b) its restart over the tables (a) left (stopped with SIGTERM, which leaves
//             them): the first sync's duration as the daemon reports it (the runner's, on
//             /metrics: kubeproxy_sync_proxy_rules_duration_seconds; and the "sync" log line's ms:
//             the whole sync, where older builds logged the engine's part), the wall time from
//             spawn to that log line, peak RSS, the event loop's longest block; the restart
//             lists and diffs the tables and must write nothing
//   peers     kube-proxy's iptables-mode ruleset through `iptables-legacy-restore` and through
//             `iptables-nft-restore` (what most distributions run), each on empty tables; its
//             nftables-mode full sync as kube-proxy sends it (bench/lib/nft-mode.ts
//             nftTransaction: `add`/`flush` commands on `nft -f -`), in --piece-service
//             transactions, each its own `nft -f` process, the times summed (the kernel binds a
//             transaction's anonymous vmaps at a cost that grows with the transaction: the pieces
//             measure the ruleset, not that growth), and as the one transaction kube-proxy sends
//             where it fits under the cap. Every peer run capped at --cap seconds (the pieces'
//             sum at --pieces-cap, by default the same): a capped run is a lower bound, never a
//             time, and that peer is not started again, in the later rounds of that size or at a
//             larger size (it would only repeat the bound)
//   peer      kube-proxy's transaction for that one endpoint (`nft -f`), on the pieces' ruleset,
//             up to --change-peer-max services (the median of 10 there and back per round)
//   data      new TCP connections per second to the last service's cluster IP (a pod namespace
//             answering on its endpoints' addresses), one after the other, through ipvsync's
//             tables and through kube-proxy's iptables-legacy ruleset, alternated --rounds times,
//             at --conn-sizes
// Prints the tables with ratios (the peer's median over ipvsync's); writes --out (default
// bench/results)/nftables-mode.json, .md and .svg. `--daemon-only` measures only the daemon
// process (cold first start and restart, alternated) at each size and prints one JSON line per
// size, writing no results (for repeated runs when comparing builds). `--render` draws the .md
// and .svg again from the JSON (also one written before issue 59: its rows are one run each);
// the JSON's shape and the drawing are bench/lib/nftables-mode-report.ts.
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { iptablesRestore, JUMP_RULES } from './lib/iptables.js';
import { manifestFiles, serviceObject, sliceObject, syncFlags } from './lib/manifests.js';
import { nftEndpointChange, nftTransaction, nftTransactionPieces } from './lib/nft-mode.js';
import { median } from './lib/median.js';
import { histogram } from './lib/prom-histogram.js';
import { ms, summarize, type Runs } from './lib/spread.js';
import { CAPPED_PEERS, IPT_NFT, LEGACY, NFT_ONE, NFT_PIECES, renderMarkdown, renderSvg, resultFromJson, type DaemonRuns, type Peer, type Rates, type Result, type Row } from './lib/nftables-mode-report.js';
import { CLI, NODE_ENV_VARS, NODE_FLAGS } from './lib/command-env.js';
import { changedIndex, CLUSTER_CIDR, NODE_IP, NODE_NAME, withOneEndpointChanged, workload, type Workload } from './lib/workload.js';
import { openKernel } from '../src/proxy/kernel.js';
import { Proxier } from '../src/proxy/proxier.js';

const SELF = fileURLToPath(import.meta.url);
const RESULTS = join(dirname(SELF), '..', '..', 'bench', 'results');
const { values: a } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1000,5000,10000,20000,50000' },
    rounds: { type: 'string', default: '3' },
    cap: { type: 'string', default: '120' },
    'pieces-cap': { type: 'string' },
    piece: { type: 'string', default: '1000' },
    'change-peer-max': { type: 'string', default: '10000' },
    'conn-sizes': { type: 'string', default: '1000,10000' },
    out: { type: 'string' },
    from: { type: 'string' },
    render: { type: 'boolean', default: false },
    'daemon-only': { type: 'boolean', default: false },
    // the process of one size (in its namespace), and the daemon path's child: this file again
    size: { type: 'string' },
    'row-file': { type: 'string' },
    skip: { type: 'string', multiple: true },
    'daemon-path': { type: 'string' },
  },
});

const CAP_S = Number(a.cap);
/** The pieces' sum has a cap of its own: each piece's `nft -f` reads the table the pieces before
 *  it wrote (its cache), so piece k costs ~0.65 + 0.19·k s here and 50 pieces (50k services) sum
 *  to ~4–5 minutes, past the default cap; --pieces-cap 400 gets that figure. */
const PIECES_CAP_S = Number(a['pieces-cap'] ?? a.cap);
const ROUNDS = Number(a.rounds);
const PIECE = Number(a.piece);
const OUT = a.out ?? RESULTS;
const loadavg = () => os.loadavg().map((x) => Number(x.toFixed(2)));

/** The first sync of `ipvsync proxy` as a process (one run). */
interface DaemonStart {
  /** the runner's duration of the sync (kubeproxy_sync_proxy_rules_duration_seconds, scraped
   *  after it: its only observation) */
  syncMs: number;
  /** the "sync" log line's ms: the whole sync as the daemon waited for it (older builds logged
   *  the engine's part alone: list, diff, commit) */
  logMs: number;
  /** from spawn to the "sync" log line: node's start, the folder's load, the sync */
  wallMs: number;
  writes: number;
  hwmMb: number;
  loopMaxMs: number;
}

/** The daemon path's one run (the child's answer). */
interface DaemonPathRun {
  firstMs: number;
  firstPlanMs: number;
  firstApplyMs: number;
  noopWrites: number;
  oneEndpointMs: number;
  oneEndpointWrites: number;
  oneEndpointOps: Record<string, number>;
  resyncMs: number;
  resyncWrites: number;
}

// ---- the outer process: one process per size ------------------------------------------------

async function outer(): Promise<void> {
  if (!(ROUNDS >= 1)) throw new Error('--rounds: a count');
  const sizes = a.sizes!.split(',').map(Number);
  const skips = new Map<string, string>();
  const rows: Row[] = [];
  const loadStart = loadavg();
  const date = new Date().toISOString();
  const cmd = `node dist/bench/nftables-mode.js --sizes ${a.sizes} --rounds ${ROUNDS} --cap ${CAP_S}${PIECES_CAP_S !== CAP_S ? ` --pieces-cap ${PIECES_CAP_S}` : ''} --piece ${PIECE} --change-peer-max ${a['change-peer-max']} --conn-sizes ${a['conn-sizes']}`;
  const result = (): Result => ({ date, kernel: os.release(), cpu: `${os.cpus()[0]?.model ?? '?'} × ${os.cpus().length}`, capS: CAP_S, piecesCapS: PIECES_CAP_S, rounds: ROUNDS, piece: PIECE, command: cmd, loadavg: { start: loadStart, end: loadavg() }, rows });
  for (const S of sizes) {
    const rowFile = join(os.tmpdir(), `nftables-mode-row-${process.pid}-${S}.json`);
    const args = [SELF, '--size', String(S), '--row-file', rowFile, '--rounds', String(ROUNDS), '--cap', a.cap!, '--pieces-cap', String(PIECES_CAP_S), '--piece', a.piece!, '--change-peer-max', a['change-peer-max']!, '--conn-sizes', a['conn-sizes']!, ...(a['daemon-only'] ? ['--daemon-only'] : []), ...[...skips].flatMap(([p, why]) => ['--skip', `${p}=${why}`])];
    // every measurement in a namespace of its own making: nothing of the machine's is touched
    const r = spawnSync('unshare', ['-n', 'bash', '-c', 'ip link set lo up && exec "$0" "$@"', process.execPath, ...args], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`the process of S=${S} exited ${r.status} ${r.signal ?? ''}`);
    const row = JSON.parse(readFileSync(rowFile, 'utf8')) as Row;
    unlinkSync(rowFile);
    if (a['daemon-only']) {
      console.log(JSON.stringify({ S, loadavg: row.loadavg, cold: daemonLine(row.daemonCold), restart: daemonLine(row.daemonRestart) }));
      continue;
    }
    rows.push(row);
    // the rows so far after every size: a sweep that fails at 50k keeps 1k–20k
    mkdirSync(OUT, { recursive: true });
    writeFileSync(join(OUT, 'nftables-mode.json'), JSON.stringify(result(), null, 2) + '\n');
    for (const p of CAPPED_PEERS) if (!skips.has(p) && summarize(row.peers[p])?.capped) skips.set(p, `timeout > ${row.peers[p]!.capS} s at ${S} services`);
  }
  if (!a['daemon-only']) render(result());
}

/** The medians of a daemon's runs, for --daemon-only's line. */
function daemonLine(d: DaemonRuns): Record<string, unknown> {
  const m = (r: Runs) => summarize(r) && { median: Number(summarize(r)!.median.toFixed(1)), min: Number(summarize(r)!.min.toFixed(1)), max: Number(summarize(r)!.max.toFixed(1)) };
  return { syncMs: m(d.sync), logMs: m(d.log), wallMs: m(d.wall), hwmMb: m(d.hwmMb), loopMaxMs: m(d.loopMaxMs), writes: d.writes, ...(d.failed ? { failed: d.failed } : {}) };
}

// ---- one size, in its namespace --------------------------------------------------------------

interface Run {
  ms: number;
  timeout?: boolean;
  out?: string;
}

/** A whole process, capped at `capS`; `input`: text written to a file that is its standard input. */
function run(cmd: string, args: string[], input?: string, capS = CAP_S): Run {
  let stdin: number | 'ignore' = 'ignore';
  if (input !== undefined) {
    const f = join(os.tmpdir(), `nft-mode-input-${process.pid}`);
    writeFileSync(f, input);
    stdin = openSync(f, 'r');
    unlinkSync(f);
  }
  const t0 = process.hrtime.bigint();
  const r = spawnSync('timeout', ['-s', 'KILL', String(Math.max(1, Math.ceil(capS))), cmd, ...args], { encoding: 'utf8', maxBuffer: 1 << 30, stdio: [stdin, 'pipe', 'pipe'] });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (typeof stdin === 'number') closeSync(stdin);
  // timeout kills its own process group with the command: it may die of the same SIGKILL
  if (r.status === 137 || r.signal === 'SIGKILL') return { ms, timeout: true };
  if (r.status !== 0) throw new Error(`${cmd} ${args.slice(0, 3).join(' ')} exited ${r.status} ${r.signal ?? ''} ${r.error?.message ?? ''}: ${(r.stderr ?? '').slice(0, 600)}`);
  return { ms, out: r.stdout };
}
const quiet = (cmd: string, ...args: string[]) => void spawnSync(cmd, args);

/** Every table of every tool in this namespace gone: nftables (ipvsync's, kube-proxy's,
 *  iptables-nft's) and iptables-legacy's. */
function flushAll(): void {
  quiet('nft', 'flush', 'ruleset');
  for (const t of ['nat', 'filter']) quiet('iptables-legacy', '-t', t, '-F'), quiet('iptables-legacy', '-t', t, '-X');
}

const ipvsync = (dir: string) =>
  run('env', [...NODE_ENV_VARS, process.execPath, ...NODE_FLAGS, CLI, 'sync', '-f', dir, '--proxy-mode', 'nftables', ...syncFlags(NODE_IP), '--json'], undefined, 4 * CAP_S);
const nftReport = (r: Run) => (r.out ? (JSON.parse(r.out) as { report: { nft: { writes: number; ops: Record<string, number> } } }).report.nft : undefined);

/** Runs into a Runs: the finished ones' ms, the capped ones counted. */
function runs(capS = CAP_S): { add(r: Run | undefined): void; value: Runs } {
  const value: Runs = { runs: [] };
  return {
    value,
    add(r) {
      if (!r) return;
      if (r.timeout) {
        value.timeouts = (value.timeouts ?? 0) + 1;
        value.capS = capS;
      } else value.runs.push(r.ms);
    },
  };
}
const values = (xs: Array<number | undefined>): Runs => ({ runs: xs.filter((x): x is number => x !== undefined && Number.isFinite(x)) });

async function oneSize(S: number): Promise<void> {
  const startedAt = new Date().toISOString();
  const loadStart = loadavg();
  const log = (m: string) => console.log(`[S=${S}] ${m}`);
  const skipped = new Map((a.skip ?? []).map((x) => [x.slice(0, x.indexOf('=')), x.slice(x.indexOf('=') + 1)]));
  const w = workload(S);
  const w2 = withOneEndpointChanged(w);
  const dir = mkdtempSync(join(os.tmpdir(), `nft-mode-${S}-`));
  const dirChanged = mkdtempSync(join(os.tmpdir(), `nft-mode-${S}-changed-`));
  for (const [k, v] of Object.entries(manifestFiles(w.services))) writeFileSync(join(dir, k), v);
  for (const [k, v] of Object.entries(manifestFiles(w2.services))) writeFileSync(join(dirChanged, k), v);
  const daemonOnly = a['daemon-only'];

  const cold = daemonRuns();
  const restart = daemonRuns();
  const first = runs();
  const noop = runs();
  const oneEndpoint = runs();
  const noopWrites: number[] = [];
  let oneEndpointOps: Record<string, number> | undefined;
  const path: DaemonPathRun[] = [];
  const peers = new Map<Peer, ReturnType<typeof runs>>(CAPPED_PEERS.map((p) => [p, runs(p === NFT_PIECES ? PIECES_CAP_S : CAP_S)]));
  const change = runs();
  const iptText = daemonOnly ? '' : iptablesRestore(w.services).text;
  const pieces = daemonOnly ? [] : nftTransactionPieces(w.services, PIECE);
  const capped = new Set<Peer>();
  for (const [p] of skipped) capped.add(p as Peer);
  /** A peer's run unless it hit the cap in an earlier round or at a smaller size. */
  const peer = (p: Peer, go: () => Run | undefined) => {
    if (capped.has(p)) return;
    const r = go();
    peers.get(p)!.add(r);
    if (r?.timeout) capped.add(p);
    log(`  ${p}: ${r ? (r.timeout ? `> ${p === NFT_PIECES ? PIECES_CAP_S : CAP_S} s` : ms(r.ms)) : '–'}`);
  };

  for (let round = 1; round <= ROUNDS; round++) {
    log(`round ${round} of ${ROUNDS} (load ${loadavg().join(' ')})`);
    flushAll();
    // (a) the daemon's cold start on an empty table, (b) its restart over what (a) left
    const c = await daemonStart(dir);
    cold.add(c);
    const rs = c && (await daemonStart(dir));
    restart.add(rs);
    log(`  daemon: cold first sync ${c ? `${ms(c.syncMs)} (log ${c.logMs} ms, wall ${ms(c.wallMs)}, ${c.hwmMb.toFixed(0)} MB)` : 'none'}; restart ${rs ? `${ms(rs.syncMs)} (log ${rs.logMs} ms, wall ${ms(rs.wallMs)}, ${rs.writes} writes)` : 'none'}`);
    flushAll();
    if (daemonOnly) continue;

    const f = ipvsync(dir);
    const n = ipvsync(dir);
    const o = ipvsync(dirChanged);
    first.add(f);
    noop.add(n);
    oneEndpoint.add(o);
    noopWrites.push(nftReport(n)?.writes ?? NaN);
    oneEndpointOps = nftReport(o)?.ops;
    log(`  ipvsync sync -f: first ${ms(f.ms)}, no-op ${ms(n.ms)} (${nftReport(n)?.writes} writes), one endpoint ${ms(o.ms)} (${JSON.stringify(oneEndpointOps)})`);
    flushAll();

    const d = daemonPathRun(S);
    if (d) path.push(d);
    log(`  daemon path: ${d ? `first ${ms(d.firstMs)} (plan ${ms(d.firstPlanMs)}, apply ${ms(d.firstApplyMs)}), one endpoint ${ms(d.oneEndpointMs)} (${d.oneEndpointWrites} writes), resync ${ms(d.resyncMs)} (${d.resyncWrites} writes)` : 'failed'}`);
    flushAll();

    // kube-proxy iptables mode: the whole nat and filter tables in one restore, as it writes them
    for (const [p, tool] of [[LEGACY, 'iptables-legacy'], [IPT_NFT, 'iptables-nft']] as const) {
      peer(p, () => {
        for (const j of JUMP_RULES) quiet(tool, ...j);
        return run(`${tool}-restore`, ['--noflush'], iptText);
      });
      flushAll();
    }

    // kube-proxy nftables mode, its full sync in pieces (each a transaction of its own), then
    // its transaction for one endpoint replaced on that ruleset
    let loaded = false;
    peer(NFT_PIECES, () => {
      let sum = 0;
      for (const text of pieces) {
        const r = run('nft', ['-f', '-'], text, PIECES_CAP_S - sum / 1000);
        sum += r.ms;
        if (r.timeout || sum > PIECES_CAP_S * 1000) return { ms: sum, timeout: true };
      }
      loaded = true;
      return { ms: sum };
    });
    if (loaded && S <= Number(a['change-peer-max'])) {
      const original = w.services[changedIndex(w)]!;
      const changed = w2.services[changedIndex(w)]!;
      const rs: Run[] = [];
      for (let i = 0; i < 10; i++) rs.push(run('nft', ['-f', '-'], i % 2 === 0 ? nftEndpointChange(original, changed) : nftEndpointChange(changed, original)));
      const t = rs.find((r) => r.timeout) ?? { ms: median(rs.map((r) => r.ms)) };
      change.add(t);
      log(`  kube-proxy's transaction for one endpoint: ${ms(t.ms)}`);
    }
    flushAll();
    // …and as the one transaction kube-proxy sends (rendered only when it is run)
    peer(NFT_ONE, () => run('nft', ['-f', '-'], nftTransaction(w.services)));
    flushAll();
  }

  let connections: Row['connections'];
  if (!daemonOnly && a['conn-sizes']!.split(',').map(Number).includes(S)) connections = await connectionRates(w, dir, iptText);
  rmSync(dir, { recursive: true, force: true });
  rmSync(dirChanged, { recursive: true, force: true });

  const peerRuns = Object.fromEntries(CAPPED_PEERS.map((p) => [p, skipped.has(p) ? { runs: [], skipped: skipped.get(p)! } : peers.get(p)!.value])) as Row['peers'];
  const row: Row = {
    S,
    rounds: ROUNDS,
    startedAt,
    loadavg: { start: loadStart, end: loadavg() },
    syncProcess: { first: first.value, noop: noop.value, oneEndpoint: oneEndpoint.value, noopWrites, ...(oneEndpointOps ? { oneEndpointOps } : {}) },
    ...(path.length
      ? {
          daemonPath: {
            first: values(path.map((d) => d.firstMs)),
            firstPlan: values(path.map((d) => d.firstPlanMs)),
            firstApply: values(path.map((d) => d.firstApplyMs)),
            oneEndpoint: values(path.map((d) => d.oneEndpointMs)),
            resync: values(path.map((d) => d.resyncMs)),
            noopWrites: path.map((d) => d.noopWrites),
            oneEndpointWrites: path.map((d) => d.oneEndpointWrites),
            resyncWrites: path.map((d) => d.resyncWrites),
          },
        }
      : {}),
    daemonCold: cold.value,
    daemonRestart: restart.value,
    peers: peerRuns,
    nftPieces: pieces.length,
    ...(change.value.runs.length || change.value.timeouts ? { kubeProxyChange: change.value } : {}),
    ...(connections ? { connections } : {}),
  };
  writeFileSync(a['row-file']!, JSON.stringify(row));
}

// ---- the daemon as a process -------------------------------------------------------------------

function daemonRuns(): { add(d: DaemonStart | undefined): void; value: DaemonRuns } {
  const value: DaemonRuns = { sync: { runs: [] }, log: { runs: [] }, wall: { runs: [] }, hwmMb: { runs: [] }, loopMaxMs: { runs: [] }, writes: [] };
  return {
    value,
    add(d) {
      if (!d) {
        value.failed = (value.failed ?? 0) + 1;
        return;
      }
      // (NaN: not read, e.g. /metrics had no record of the sync yet; left out)
      const push = (r: Runs, x: number) => Number.isFinite(x) && r.runs.push(x);
      push(value.sync, d.syncMs);
      push(value.log, d.logMs);
      push(value.wall, d.wallMs);
      push(value.hwmMb, d.hwmMb);
      push(value.loopMaxMs, d.loopMaxMs);
      value.writes.push(d.writes);
    },
  };
}

const METRICS_AT = '127.0.0.1:10249';

/** `ipvsync proxy --proxy-mode nftables --manifests DIR` as a process, until its first sync (its
 *  "sync" log line); then its /metrics (the runner's record of that sync is made just after the
 *  line: scraped until it is there) and its peak RSS; stopped with SIGTERM, which leaves its
 *  tables programmed. undefined: no first sync within 4× the cap. */
async function daemonStart(dir: string): Promise<DaemonStart | undefined> {
  const args = [CLI, 'proxy', '--proxy-mode', 'nftables', '--manifests', dir, '--hostname-override', NODE_NAME, '--node-ip', NODE_IP, '--cluster-cidr', CLUSTER_CIDR, '--healthz-bind-address', '127.0.0.1:0', '--metrics-bind-address', METRICS_AT, '--logging-format', 'json'];
  const t0 = performance.now();
  const child = spawn('env', [...NODE_ENV_VARS, process.execPath, ...NODE_FLAGS, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise((r) => child.once('exit', r));
  const first = await new Promise<{ line: Record<string, unknown>; at: number } | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), 4 * CAP_S * 1000);
    createInterface({ input: child.stderr! }).on('line', (l) => {
      if (!l.includes('"msg":"sync"')) return;
      clearTimeout(timer);
      resolve({ line: JSON.parse(l) as Record<string, unknown>, at: performance.now() });
    });
    void exited.then(() => resolve(undefined));
  });
  // env execs node: the same pid
  const status = spawnSync('cat', [`/proc/${child.pid}/status`], { encoding: 'utf8' }).stdout;
  let scraped = '';
  for (let i = 0; first && i < 100; i++) {
    scraped = await fetch(`http://${METRICS_AT}/metrics`).then((r) => r.text(), () => '');
    if (histogram(scraped, 'kubeproxy_sync_proxy_rules_duration_seconds').count >= 1) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  child.kill('SIGTERM');
  await exited;
  if (!first) return undefined;
  const h = histogram(scraped, 'kubeproxy_sync_proxy_rules_duration_seconds');
  const loopMaxMs = Number(/^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(scraped)?.[1] ?? NaN) * 1000;
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
  return {
    // its only observation so far; a second (a periodic resync already) would blur it
    syncMs: h.count === 1 ? h.sum * 1000 : NaN,
    logMs: Number(first.line.ms),
    wallMs: first.at - t0,
    writes: Number(first.line.writes),
    hwmMb: kb('VmHWM') / 1024,
    loopMaxMs,
  };
}

// ---- the daemon path: the Proxier in a child process of its own per run ------------------------

function daemonPathRun(S: number): DaemonPathRun | undefined {
  const r = spawnSync('env', [...NODE_ENV_VARS, process.execPath, ...NODE_FLAGS, SELF, '--daemon-path', String(S)], { encoding: 'utf8', maxBuffer: 1 << 26, timeout: 4 * CAP_S * 1000 });
  const line = r.stdout?.split('\n').find((l) => l.startsWith('@@DAEMON-PATH '));
  if (!line) {
    console.error(`daemon path at ${S} printed no result (exit ${r.status} ${r.signal ?? ''}): ${(r.stderr ?? '').slice(0, 600)}`);
    return undefined;
  }
  return JSON.parse(line.slice('@@DAEMON-PATH '.length)) as DaemonPathRun;
}

/** The daemon's Proxier in nftables mode on this namespace's kernel, holding the workload's
 *  objects (not synced yet). */
async function proxierWith(w: Workload): Promise<Proxier> {
  const p = new Proxier(await openKernel({}, { glue: true, mode: 'nftables' }), { mode: 'nftables', node: { name: NODE_NAME, addresses: [NODE_IP] }, config: { clusterCIDRs: [CLUSTER_CIDR] } });
  for (const svc of w.services) {
    p.onServiceUpdate(serviceObject(svc) as unknown as V1Service);
    p.onSliceUpdate(sliceObject(svc) as unknown as V1EndpointSlice);
  }
  return p;
}

async function daemonPathChild(S: number): Promise<void> {
  const w = workload(S);
  const p = await proxierWith(w);
  const now = () => performance.now();
  let t = now();
  const first = await p.sync(true);
  const firstMs = now() - t;
  if (first.report.errors.length) throw first.report.errors[0];
  const noop = await p.sync(false);
  // one endpoint replaced and put back, alternately: each an incremental sync
  const changed = withOneEndpointChanged(w).services[changedIndex(w)]!;
  const original = w.services[changedIndex(w)]!;
  const samples: number[] = [];
  let last = first;
  for (let i = 0; i < 41; i++) {
    p.onSliceUpdate(sliceObject(i % 2 === 0 ? changed : original) as unknown as V1EndpointSlice);
    t = now();
    last = await p.sync(false);
    samples.push(now() - t);
    if (last.report.errors.length) throw last.report.errors[0];
  }
  t = now();
  const resync = await p.sync(true);
  const resyncMs = now() - t;
  const out: DaemonPathRun = {
    firstMs,
    firstPlanMs: firstMs - first.report.durations.applyMs,
    firstApplyMs: first.report.durations.applyMs,
    noopWrites: noop.report.nft.writes,
    oneEndpointMs: median(samples),
    oneEndpointWrites: last.report.nft.writes,
    oneEndpointOps: last.report.nft.ops,
    resyncMs,
    resyncWrites: resync.report.nft.writes,
  };
  console.log(`@@DAEMON-PATH ${JSON.stringify(out)}`);
}

// ---- the data plane: new connections per second --------------------------------------------

/** New connections, one after the other, each opened and closed; prints connections/s. */
const CONNECT = `
const net = require('node:net');
const [host, port, n] = [process.argv[1], +process.argv[2], +process.argv[3]];
let i = 0;
const t0 = process.hrtime.bigint();
const one = () => {
  if (i++ >= n) return console.log(n / (Number(process.hrtime.bigint() - t0) / 1e9));
  const c = net.connect(port, host);
  c.on('connect', () => c.destroy()).on('close', one).on('error', (e) => (console.error(e.message), process.exit(1)));
};
one();
`;

/** New TCP connections per second to the last service's cluster IP through ipvsync's tables
 *  (`ipvsync sync -f`) and through kube-proxy's iptables-legacy ruleset, the two alternated
 *  --rounds times; each time against the rate straight to an endpoint measured in turn with it
 *  (so a busy moment of the machine slows both): the medians of five runs of 4,000 each. */
async function connectionRates(w: Workload, dir: string, iptText: string): Promise<NonNullable<Row['connections']>> {
  const last = w.services[w.services.length - 1]!;
  const ip = (...args: string[]) => {
    const r = spawnSync('ip', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`ip ${args.join(' ')}: ${r.stderr}`);
  };
  // ~45k connections from one address to one service within TCP's TIME_WAIT (60 s): without
  // reuse and the whole port range, connect() runs out of ports and the rates measure that.
  // (This bench's own network namespace: the machine's settings are untouched.)
  quiet('sysctl', '-qw', 'net.ipv4.tcp_tw_reuse=1');
  quiet('sysctl', '-qw', 'net.ipv4.ip_local_port_range=1024 65535');
  spawnSync('ip', ['netns', 'del', 'cr-pod']);
  ip('netns', 'add', 'cr-pod');
  ip('link', 'add', 'cr0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', 'cr-pod');
  ip('addr', 'add', '10.255.9.1/24', 'dev', 'cr0');
  ip('link', 'set', 'cr0', 'up');
  ip('-n', 'cr-pod', 'addr', 'add', '10.255.9.2/24', 'dev', 'eth0');
  for (const e of last.endpoints) {
    ip('-n', 'cr-pod', 'addr', 'add', `${e.ip}/32`, 'dev', 'eth0');
    ip('route', 'add', `${e.ip}/32`, 'via', '10.255.9.2');
  }
  ip('-n', 'cr-pod', 'link', 'set', 'eth0', 'up');
  ip('-n', 'cr-pod', 'link', 'set', 'lo', 'up');
  ip('-n', 'cr-pod', 'route', 'add', 'default', 'via', '10.255.9.1');
  // a node routes its service range (locally made packets are routed before the nat hook)
  ip('route', 'add', '172.20.0.0/16', 'dev', 'cr0');
  const server = spawn('ip', ['netns', 'exec', 'cr-pod', process.execPath, '-e', `require('node:net').createServer((s) => s.end()).listen(${last.endpoints[0]!.port}, () => console.log('ready'))`], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise((r) => server.stdout!.once('data', r));
  // each run on an empty conntrack table: a run straight to the endpoint after one through the
  // service would otherwise meet the last run's TIME_WAIT entries with the same reply tuples
  // NaN: a connection failed (the tables do not take the service to its endpoints)
  const connect = (host: string, port: number, n: number) => {
    quiet('conntrack', '-F');
    const r = spawnSync(process.execPath, ['-e', CONNECT, host, String(port), String(n)], { encoding: 'utf8' });
    if (r.status !== 0) console.error(`connections to ${host}:${port}: ${r.stderr.trim().slice(0, 200)}`);
    return r.status === 0 ? Number(r.stdout.trim()) : NaN;
  };
  // a warm-up run of each first (the server's JIT), then the two in turn: the floor (straight
  // to an endpoint, no service in the way) and through the service
  const rates = (): Rates => {
    const e = last.endpoints[0]!;
    connect(e.ip, e.port, 500);
    connect(last.clusterIP, last.port, 500);
    const direct: number[] = [];
    const service: number[] = [];
    for (let i = 0; i < 5; i++) {
      direct.push(connect(e.ip, e.port, 4000));
      service.push(connect(last.clusterIP, last.port, 4000));
    }
    const m = (xs: number[]) => (xs.every(Number.isFinite) ? median(xs) : NaN);
    return { direct: m(direct), service: m(service) };
  };
  const out: NonNullable<Row['connections']> = { nftables: [], iptablesLegacy: [] };
  try {
    for (let round = 0; round < ROUNDS; round++) {
      flushAll();
      run('env', [...NODE_ENV_VARS, process.execPath, ...NODE_FLAGS, CLI, 'sync', '-f', dir, '--proxy-mode', 'nftables', ...syncFlags(NODE_IP)], undefined, 4 * CAP_S);
      out.nftables.push(rates());
      flushAll();
      for (const j of JUMP_RULES) quiet('iptables-legacy', ...j);
      run('iptables-legacy-restore', ['--noflush'], iptText, 4 * CAP_S);
      out.iptablesLegacy.push(rates());
      console.log(`[S=${w.services.length}] connections/s, round ${round + 1}: ipvsync ${out.nftables.at(-1)!.service.toFixed(0)} (straight ${out.nftables.at(-1)!.direct.toFixed(0)}), iptables-legacy ${out.iptablesLegacy.at(-1)!.service.toFixed(0)} (straight ${out.iptablesLegacy.at(-1)!.direct.toFixed(0)})`);
    }
    return out;
  } finally {
    server.kill();
    flushAll();
    spawnSync('ip', ['netns', 'del', 'cr-pod']);
    spawnSync('ip', ['link', 'del', 'cr0']);
    for (const e of last.endpoints) spawnSync('ip', ['route', 'del', `${e.ip}/32`]);
    spawnSync('ip', ['route', 'del', '172.20.0.0/16']);
  }
}

// ---- the tables, the JSON's plot -------------------------------------------------------------

/** The markdown (also printed) and the plot, written to --out. */
function render(res: Result): void {
  const md = renderMarkdown(res);
  console.log(md);
  mkdirSync(OUT, { recursive: true });
  writeFileSync(join(OUT, 'nftables-mode.md'), md);
  writeFileSync(join(OUT, 'nftables-mode.svg'), renderSvg(res));
}


// (last: every function's constants above are initialised by now)
if (a['daemon-path']) await daemonPathChild(Number(a['daemon-path']));
else if (a.render) render(resultFromJson(readFileSync(a.from ?? join(OUT, 'nftables-mode.json'), 'utf8')));
else if (a.size) await oneSize(Number(a.size));
else await outer();
process.exit(0);
