// The headline benchmark suite (`npm run bench:suite`): ipvsync's proxy path vs kube-proxy's
// data-plane tools on the same workload (S services × 10 endpoints), each comparison inside one
// kernel in one run.
//   node dist/bench/suite.js [--host-sizes 1000,5000,10000,20000,50000] [--qemu-sizes 1000,10000]
//                            [--timeout 150] [--only host|qemu] [--render]
// (the defaults are the committed sweep: ~52 minutes on a loaded 2-core machine; --only qemu
// with other sizes adds rows to the committed ones; --render re-renders suite.md/svg)
// Two environments:
//   qemu  Debian 6.1 under qemu TCG (everything incl. IPVS; ~10x slow and noisy): ipvsync
//         `sync -f` as a whole process + the in-process worker (bench/lib/proxy-worker.ts), vs
//         iptables-legacy-restore / iptables-nft-restore (full and partial --noflush),
//         ipvsadm -R + ipset restore (+ ip -batch of the VIPs), nft -f.
//   host  the machine's own kernel in a private netns (real speed, no IPVS, no dummy links):
//         the same peers but ipvsadm, and ipvsync's non-IPVS part (VIPs on a veth, nftables
//         glue; IPVS in memory).
// Every peer run is capped (`timeout -s KILL`): a capped run is recorded as a timeout, never as a
// number, and that peer is not started again at larger S. ipvsync's own runs get 4× the cap.
// Cheap runs (< 3 s) are repeated three times and the median kept.
// Writes bench/results/suite.json, suite.md, suite.svg (bench/lib/render.ts).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { iptablesRestore, JUMP_RULES } from './lib/iptables.js';
import { ipBatchVips, IPSET_NAMES, ipsetRestore, ipvsadmRestore } from './lib/ipvs-mode.js';
import { CLI, NODE_ENV_VARS, NODE_FLAGS } from './lib/command-env.js';
import { manifestFiles, syncFlags } from './lib/manifests.js';
import { nftRuleset, NFT_TABLE } from './lib/nft-mode.js';
import { cappedInRows, formatSkip, parseSkip, type CappedAt } from './lib/caps.js';
import { fmtMs, renderMarkdown, renderSvg, type SuiteResult, type PhaseResult, type Measure, type SizeRow } from './lib/render.js';
import { changedIndex, NODE_IP, NODE_NAME, withOneEndpointChanged, workload } from './lib/workload.js';

const here = dirname(fileURLToPath(import.meta.url));
const ROOT = join(here, '..', '..');
const WORKER = join(here, 'lib', 'proxy-worker.js');
const SERVE_OBJECTS = join(here, 'lib', 'serve-objects.js');
const RESULTS = join(ROOT, 'bench', 'results');

const { values: a } = parseArgs({
  options: {
    phase: { type: 'string' },
    'host-sizes': { type: 'string', default: '1000,5000,10000,20000,50000' },
    'qemu-sizes': { type: 'string', default: '1000,10000' },
    sizes: { type: 'string' },
    timeout: { type: 'string', default: '150' },
    only: { type: 'string' },
    'out-file': { type: 'string' },
    render: { type: 'boolean', default: false },
    skip: { type: 'string', multiple: true },
  },
});
const TIMEOUT_S = Number(a.timeout);
const CHEAP_MS = 3000;

// The network namespace the qemu phase's commands run in (`ip netns exec`), a fresh one for
// every IPVS step: the kernel keeps deleted IPVS destinations in a trash list for 2–3 minutes
// and every destination add scans it (ip_vs_trash_get_dest), so after a flush of 100k
// destinations the next 100k adds — by ipvsync or by ipvsadm -R — cost ~10^10 comparisons.
// A new namespace has its own, empty IPVS state. (The host phase has no IPVS: no switching.)
let NETNS: string | undefined;
let netnsCount = 0;
const inNs = (cmd: string, args: string[]): [string, string[]] => (NETNS ? ['ip', ['netns', 'exec', NETNS, cmd, ...args]] : [cmd, args]);

/** How long the daemon is watched after its first sync: two periodic full resyncs (30 s apart,
 *  the default --ipvs-sync-period) and the quiet after them. */
const DAEMON_WATCH_S = 75;

/**
 * The daemon as deployed (`ipvsync proxy`, the command through its shebang), reading the
 * folder's objects from the manifests (`--manifests DIR`) or from the API (`--master URL`: the
 * tests' fake API server, in a process of its own, serving the same objects): started, left to
 * finish its first full sync (its "sync" log line), its peak and current RSS read from /proc;
 * then watched for DAEMON_WATCH_S with its RSS read every second, through its periodic full
 * resyncs (each reads every kernel table again); then stopped with SIGTERM.
 */
function daemonRss(dir: string, from: 'manifests' | 'api'): SizeRow['daemon'] {
  const flags = syncFlags(NODE_IP)
    .filter((f) => f !== '--no-sysctl')
    .map((f) => (f === '--node-name' ? '--hostname-override' : f));
  const source =
    from === 'manifests'
      ? ['src="--manifests $1"']
      : [
          `"${process.execPath}" "${SERVE_OBJECTS}" "$1" '${NODE_NAME}' > "$1.api.log" 2>&1 &`,
          'api=$!',
          'for i in $(seq 1 600); do grep -q "^@@API" "$1.api.log" && break; kill -0 $api 2>/dev/null || break; sleep 0.2; done',
          'src="--master $(sed -n "s/^@@API //p" "$1.api.log")"',
        ];
  const script = [
    ...source,
    `"$0" proxy $src ${flags.map((f) => `'${f}'`).join(' ')} --healthz-bind-address 127.0.0.1:0 --metrics-bind-address 127.0.0.1:0 --logging-format json 2> "$1.daemon.log" &`,
    'pid=$!',
    `for i in $(seq 1 ${4 * TIMEOUT_S * 5}); do grep -q '"msg":"sync"' "$1.daemon.log" && break; kill -0 $pid 2>/dev/null || break; sleep 0.2; done`,
    `grep '"msg":"sync"' "$1.daemon.log" | head -1`,
    'grep -E "VmHWM|VmRSS" /proc/$pid/status',
    `for i in $(seq 1 ${DAEMON_WATCH_S}); do sleep 1; echo "watch $(awk '/VmRSS/{print $2}' /proc/$pid/status)"; done`,
    'echo "end $(awk \'/VmHWM/{print $2}\' /proc/$pid/status) $(awk \'/VmRSS/{print $2}\' /proc/$pid/status)"',
    `grep -c '"trigger":"periodic"' "$1.daemon.log" | sed 's/^/resyncs /'`,
    `grep '"trigger":"periodic"' "$1.daemon.log" | tail -1`,
    'kill -TERM $pid; wait $pid',
    ...(from === 'api' ? ['kill $api; wait $api'] : []),
  ].join('\n');
  const r = sh('bash', ['-c', script, CLI, dir]);
  const hwm = /VmHWM:\s+(\d+)/.exec(r.stdout);
  const rss = /VmRSS:\s+(\d+)/.exec(r.stdout);
  const sync = /"ms":(\d+)/.exec(r.stdout);
  const watch = [...r.stdout.matchAll(/^watch (\d+)$/gm)].map((m) => Number(m[1]));
  const end = /^end (\d+) (\d+)$/m.exec(r.stdout);
  const resyncs = /^resyncs (\d+)$/m.exec(r.stdout);
  const resyncMs = /"trigger":"periodic".*"ms":(\d+)/.exec(r.stdout);
  if (!sync || !hwm || !rss || !end || watch.length === 0) return { error: `no first sync: ${(r.stdout + r.stderr).slice(0, 400)}` };
  const mb = (kb: number) => kb / 1024;
  return {
    peakMB: mb(Number(hwm[1])),
    rssMB: mb(Number(rss[1])),
    syncMs: Number(sync[1]),
    watchS: DAEMON_WATCH_S,
    resyncs: Number(resyncs?.[1] ?? 0),
    ...(resyncMs ? { resyncMs: Number(resyncMs[1]) } : {}),
    watchMaxMB: mb(Math.max(...watch)),
    watchMinMB: mb(Math.min(...watch)),
    endPeakMB: mb(Number(end[1])),
    laterMB: mb(Number(end[2])),
  };
}

/** One run of the proxy worker (bench/lib/proxy-worker.ts) over `dir` with `args` (on the host
 *  with its in-memory IPVS), not capped at the peers' limit: the process's measure, and its
 *  "@@WORKER {json}" line parsed (undefined after a timeout or when it printed none). */
function runWorker(env: 'host' | 'qemu', dir: string, args: string[]): { process: ReturnType<typeof proc>; result?: any } {
  const r = proc('env', [...NODE_ENV_VARS, process.execPath, ...NODE_FLAGS, WORKER, '--dir', dir, ...args, ...(env === 'host' ? ['--fake-ipvs'] : [])], undefined, 4 * TIMEOUT_S);
  const line = r.timeout ? undefined : r.stdout.split('\n').find((l) => l.startsWith('@@WORKER '));
  return { process: r, ...(line ? { result: JSON.parse(line.slice(9)) } : {}) };
}

/** Moves the qemu phase's commands to a new network namespace (lo up). */
function freshNetns(env: 'host' | 'qemu'): void {
  if (env !== 'qemu') return;
  const name = `bench${++netnsCount}`;
  const r = spawnSync('ip', ['netns', 'add', name], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`ip netns add ${name}: ${r.stderr}`);
  NETNS = name;
  quiet('ip', 'link', 'set', 'lo', 'up');
}

function sh(cmd0: string, args0: string[], input?: string): { status: number; stdout: string; stderr: string } {
  const [cmd, args] = inNs(cmd0, args0);
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 30, ...(input !== undefined ? { input } : {}) });
  return { status: r.status ?? -1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}
const quiet = (cmd: string, ...args: string[]) => void sh(cmd, args);

/** One whole-process run: wall time measured here, user/sys/max RSS from GNU time. */
function proc(cmd: string, args: string[], stdinFile?: string, capS = TIMEOUT_S): Measure & { stdout: string } {
  const full = ['-f', '@@TIME %U %S %M', 'timeout', '-s', 'KILL', String(capS), cmd, ...args];
  const [c, ca] = inNs('/usr/bin/time', full);
  const t0 = process.hrtime.bigint();
  const r = spawnSync(c, ca, { encoding: 'utf8', maxBuffer: 1 << 30, input: stdinFile ? readFileSync(stdinFile) : '' });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const m = /@@TIME (\S+) (\S+) (\d+)/.exec(r.stderr ?? '');
  const base = m ? { userMs: Number(m[1]) * 1000, sysMs: Number(m[2]) * 1000, maxRssMB: Number(m[3]) / 1024 } : {};
  if (r.status === 137 || r.status === 124) return { ms, timeout: true, timeoutS: capS, stdout: '' };
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${(r.stderr ?? '').slice(0, 800)}`);
  return { ms, ...base, stdout: r.stdout ?? '' };
}

/** Runs a measurement once; cheap ones three times (prepare() before each), median kept. */
function median(prepare: () => void, run: () => Measure & { stdout?: string }): Measure {
  prepare();
  const first = run();
  if (first.timeout || first.ms >= CHEAP_MS) return strip(first, [first.ms]);
  const runs = [first];
  for (let i = 0; i < 2; i++) {
    prepare();
    runs.push(run());
  }
  const sorted = [...runs].sort((x, y) => x.ms - y.ms);
  return strip(sorted[1]!, runs.map((r) => r.ms));
}
function strip(m: Measure & { stdout?: string }, runs: number[]): Measure {
  const { stdout: _o, ...rest } = m;
  void _o;
  return { ...rest, runs };
}

function iptFlush(tool: string): void {
  for (const t of ['nat', 'filter']) {
    quiet(tool, '-t', t, '-F');
    quiet(tool, '-t', t, '-X');
  }
}
function iptPrepare(tool: string): void {
  iptFlush(tool);
  for (const j of JUMP_RULES) quiet(tool, ...j);
}

function ipvsyncCleanup(): void {
  quiet('ipvsadm', '-C');
  quiet('ip', 'link', 'del', 'kube-ipvs0');
  quiet('nft', 'delete', 'table', 'ip', 'ipvsync');
  quiet('nft', 'delete', 'table', 'ip6', 'ipvsync');
  quiet('ip', 'route', 'flush', 'table', 'local', 'proto', '249'); // bindMode route's local routes
}
function ipvsModeCleanup(): void {
  quiet('ipvsadm', '-C');
  quiet('ip', 'link', 'del', 'kube-ipvs0');
  for (const s of IPSET_NAMES) quiet('ipset', 'destroy', s);
}
function vipLink(env: 'host' | 'qemu'): void {
  // The host kernel has no dummy links: a veth stands in for kube-ipvs0 there.
  const r = env === 'qemu' ? sh('ip', ['link', 'add', 'kube-ipvs0', 'type', 'dummy']) : sh('ip', ['link', 'add', 'kube-ipvs0', 'type', 'veth', 'peer', 'name', 'kipvs0-peer']);
  if (r.status !== 0) throw new Error(`ip link add kube-ipvs0: ${r.stderr}`);
}

function environment(env: string): Record<string, unknown> {
  const v = (cmd: string, ...args: string[]) => {
    const r = sh(cmd, args);
    return (r.stdout + r.stderr).trim().split('\n')[0] ?? '';
  };
  return {
    env,
    // the guest's accelerator (test/vm sets it): TCG slows everything ~10x, KVM hardly
    ...(env === 'qemu' ? { accel: process.env.IPVSYNC_VM_ACCEL ?? 'tcg' } : {}),
    kernel: os.release(),
    cpu: os.cpus()[0]?.model ?? '?',
    nproc: os.cpus().length,
    memMB: Math.round(os.totalmem() / 2 ** 20),
    loadavg: readFileSync('/proc/loadavg', 'utf8').trim(),
    node: process.version,
    tools: {
      'iptables-legacy-restore': v('iptables-legacy-restore', '--version'),
      'iptables-nft-restore': v('iptables-nft-restore', '--version'),
      ipvsadm: env === 'qemu' ? v('ipvsadm', '--version') : 'n/a (no IPVS)',
      ipset: v('ipset', '--version'),
      nft: v('nft', '--version'),
    },
    date: new Date().toISOString(),
  };
}

/** Peers that hit the cap at a smaller S (in this run, or in a kept row of an earlier one) are
 *  not started again at a larger one: by name, the S and the cap they hit. */
const cappedAt = new Map<string, CappedAt>();
function capped(name: string, run: () => Measure, S: number): Measure {
  const at = cappedAt.get(name);
  if (at !== undefined) return { ms: NaN, skipped: `timeout > ${at.capS} s already at ${at.S} services`, timeout: false };
  const m = run();
  if (m.timeout) cappedAt.set(name, { S, capS: m.timeoutS ?? TIMEOUT_S });
  return m;
}


function runSize(env: 'host' | 'qemu', S: number): SizeRow {
  const log = (m: string) => console.log(`[${env} S=${S}] ${m}`);
  const dir = mkdtempSync(join(os.tmpdir(), `ipvsync-suite-${S}-`));
  const w = workload(S);
  const w2 = withOneEndpointChanged(w);
  for (const [k, v] of Object.entries(manifestFiles(w.services))) writeFileSync(join(dir, k), v);
  const ipt = iptablesRestore(w.services);
  const iptChanged = iptablesRestore(w2.services);
  const iptPartial = iptablesRestore(w2.services, {}, new Set([changedIndex(w)]));
  const ipvsadm = ipvsadmRestore(w.services);
  const ipset = ipsetRestore(w.services);
  const nft = nftRuleset(w.services);
  const files: Record<string, string> = {
    'ipt-full.txt': ipt.text,
    'ipt-full-changed.txt': iptChanged.text,
    'ipt-partial.txt': iptPartial.text,
    'ipvsadm.txt': ipvsadm.text,
    'ipset.txt': ipset.text,
    'ip-batch.txt': ipBatchVips(w.services),
    'ruleset.nft': nft.text,
  };
  const scratch = join(dir, 'inputs');
  mkdirSync(scratch);
  for (const [k, v] of Object.entries(files)) writeFileSync(join(scratch, k), v);
  const f = (k: string) => join(scratch, k);
  const row: SizeRow = {
    services: S,
    endpoints: S * w.endpointsPerService,
    sizes: {
      iptablesNatRules: ipt.natRules,
      iptablesNatChains: ipt.natChains,
      iptablesBytes: ipt.text.length,
      iptablesPartialBytes: iptPartial.text.length,
      ipvsVirtualServers: ipvsadm.virtualServers,
      ipvsDestinations: ipvsadm.destinations,
      ipsetMembers: ipset.members,
      nftChains: nft.chains,
      nftRules: nft.rules,
    },
    peers: {},
  };

  // ipvsync (every IPVS step from an empty IPVS state: a fresh netns in qemu, see freshNetns)
  const fresh = () => {
    ipvsyncCleanup();
    freshNetns(env);
  };
  fresh();
  if (env === 'qemu') {
    log('ipvsync sync -f (whole process)');
    const flags = [...syncFlags(NODE_IP), '--json'];
    // the installed command as a user runs it (through its shebang, with its node flags)
    row.ipvsyncSyncProcess = median(fresh, () => proc(CLI, ['sync', '-f', dir, ...flags], undefined, 4 * TIMEOUT_S));
    log(`  ${row.ipvsyncSyncProcess.ms.toFixed(0)} ms`);
    fresh();
  } else {
    vipLink(env);
  }
  if (env === 'qemu') {
    log('ipvsync proxy --manifests (the daemon, its proxier on its sync thread)');
    row.daemonThread = daemonRss(dir, 'manifests');
    log(`  ${JSON.stringify(row.daemonThread)}`);
    fresh();
    log('ipvsync proxy --master (from the API: a fake API server serving the same objects; the informers and the proxier on the sync thread)');
    row.daemonApiThread = daemonRss(dir, 'api');
    log(`  ${JSON.stringify(row.daemonApiThread)}`);
    fresh();
  }
  log('ipvsync in-process worker');
  // ipvsync itself is not capped at the peers' limit
  const wr = runWorker(env, dir, []);
  if (wr.process.timeout) row.worker = { timeout: true, timeoutS: 4 * TIMEOUT_S };
  else {
    if (!wr.result) throw new Error('worker printed no result');
    row.worker = { ...wr.result, processMaxRssMB: wr.process.maxRssMB, processMs: wr.process.ms };
    log(`  full ${row.worker.full.ms.toFixed(0)} ms, no-op ${row.worker.noop.ms.toFixed(0)} ms, one endpoint (median of ${row.worker.oneEndpointProxier.samplesMs.length}) ${row.worker.oneEndpointProxier.ms.toFixed(1)} ms, the loop idle before each ${row.worker.oneEndpointProxierIdle.ms.toFixed(1)} ms / engine ${row.worker.oneEndpointEngine.ms.toFixed(2)} ms (samples ${row.worker.oneEndpointProxier.samplesMs.map((x: number) => x.toFixed(0)).join(' ')} / ${row.worker.oneEndpointEngine.samplesMs.map((x: number) => x.toFixed(1)).join(' ')} ms)`);
  }
  fresh();
  if (env === 'host') vipLink(env);
  log('ipvsync in-process worker, bindMode route (full sync only)');
  row.workerRoute = runWorker(env, dir, ['--bind-mode', 'route', '--full-only']).result;
  if (row.workerRoute) log(`  full ${row.workerRoute.full.ms.toFixed(0)} ms`);
  fresh();
  if (env === 'host') vipLink(env);
  // The daemon's default: the proxier on its sync thread (the thread reads the folder); the
  // event loop and GC pauses measured are then the daemon's thread's.
  log('ipvsync worker, the proxier on its sync thread (the daemon\'s default; full sync only)');
  row.workerThread = runWorker(env, dir, ['--sync-thread', '--full-only']).result;
  if (row.workerThread) log(`  full ${row.workerThread.full.ms.toFixed(0)} ms, the daemon's loop max ${row.workerThread.full.eventLoop.maxMs.toFixed(0)} ms`);
  ipvsyncCleanup();

  // kube-proxy iptables mode
  for (const tool of ['iptables-legacy', 'iptables-nft']) {
    const restore = `${tool}-restore`;
    log(`${restore} full`);
    const full = capped(restore, () => median(() => iptPrepare(tool), () => proc(restore, ['--noflush'], f('ipt-full.txt'))), S);
    row.peers[`${restore} full`] = full;
    log(`  ${fmtMs(full)}`);
    if (!full.timeout && !full.skipped) {
      // The table holds the full ruleset now: kube-proxy's two ways to apply one endpoint change.
      row.peers[`${restore} one endpoint, full`] = median(() => undefined, () => proc(restore, ['--noflush'], f('ipt-full-changed.txt')));
      row.peers[`${restore} one endpoint, partial`] = median(() => undefined, () => proc(restore, ['--noflush'], f('ipt-partial.txt')));
      log(`  one endpoint: full ${row.peers[`${restore} one endpoint, full`]!.ms.toFixed(0)} ms, partial ${row.peers[`${restore} one endpoint, partial`]!.ms.toFixed(0)} ms`);
    } else {
      row.peers[`${restore} one endpoint, full`] = { ms: NaN, skipped: 'the full restore hit the cap' };
      row.peers[`${restore} one endpoint, partial`] = { ms: NaN, skipped: 'the full restore hit the cap' };
    }
    iptFlush(tool);
  }

  // kube-proxy IPVS mode's tools
  ipvsModeCleanup();
  if (env === 'qemu') {
    log('ipvsadm -R');
    row.peers['ipvsadm -R'] = median(() => freshNetns(env), () => proc('ipvsadm', ['-R'], f('ipvsadm.txt')));
  }
  log('ipset restore');
  row.peers['ipset restore'] = median(() => {
    for (const s of IPSET_NAMES) quiet('ipset', 'destroy', s);
  }, () => proc('ipset', ['restore'], f('ipset.txt')));
  log('ip -batch (VIPs)');
  row.peers['ip -batch VIPs'] = median(() => {
    quiet('ip', 'link', 'del', 'kube-ipvs0');
    vipLink(env);
  }, () => proc('ip', ['-batch', f('ip-batch.txt')]));
  ipvsModeCleanup();

  // kube-proxy nftables mode (shape)
  log('nft -f');
  row.peers['nft -f'] = capped('nft -f', () => median(() => quiet('nft', 'delete', 'table', 'ip', NFT_TABLE), () => proc('nft', ['-f', f('ruleset.nft')])), S);
  log(`  ${fmtMs(row.peers['nft -f'])}`);
  quiet('nft', 'delete', 'table', 'ip', NFT_TABLE);
  rmSync(dir, { recursive: true, force: true });
  return row;
}

function runPhase(env: 'host' | 'qemu', sizes: number[]): PhaseResult {
  const environmentStart = environment(env);
  const rows: SizeRow[] = [];
  for (const S of sizes) {
    try {
      rows.push(runSize(env, S));
    } catch (e) {
      console.error(`[${env} S=${S}] failed: ${(e as Error).message}`);
      rows.push({ services: S, endpoints: S * 10, error: (e as Error).message, peers: {}, sizes: {} });
    }
  }
  return { environment: environmentStart, loadavgEnd: readFileSync('/proc/loadavg', 'utf8').trim(), rows };
}

const sizesOf = (s: string) => s.split(',').filter(Boolean).map(Number);

function writeOutputs(result: SuiteResult): void {
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(join(RESULTS, 'suite.json'), JSON.stringify(result, null, 2) + '\n');
  const md = renderMarkdown(result);
  writeFileSync(join(RESULTS, 'suite.md'), md);
  writeFileSync(join(RESULTS, 'suite.svg'), renderSvg(result));
  console.log(md);
}

if (a.phase === 'host' || a.phase === 'qemu') {
  for (const x of a.skip ?? []) cappedAt.set(...parseSkip(x, TIMEOUT_S));
  const r = runPhase(a.phase, sizesOf(a.sizes ?? ''));
  writeFileSync(a['out-file']!, JSON.stringify({ ...r, capped: [...cappedAt] }) + '\n');
} else if (a.render) {
  writeOutputs(JSON.parse(readFileSync(join(RESULTS, 'suite.json'), 'utf8')) as SuiteResult);
} else {
  const result: SuiteResult = { date: new Date().toISOString(), hostUptime: sh('uptime', []).stdout.trim(), phases: {} };
  const prev = existsSync(join(RESULTS, 'suite.json')) ? (JSON.parse(readFileSync(join(RESULTS, 'suite.json'), 'utf8')) as SuiteResult) : undefined;
  const scratch = join(ROOT, '.vm', 'suite-out');
  mkdirSync(scratch, { recursive: true });
  if (a.only !== 'host') {
    // One VM per size: a size that fails or runs away costs only itself. Peers capped at a
    // smaller size are passed on (--skip) so they are not started again.
    const sizes = sizesOf(a['qemu-sizes']!);
    // Earlier rows of other sizes are kept (a size can be added in a later run).
    const kept = (prev?.phases.qemu?.rows ?? [])
      .filter((r) => !sizes.includes(r.services) && !r.error)
      .map((r) => ({ ...r, measuredAt: r.measuredAt ?? prev!.phases.qemu!.environment.date }));
    if (kept.length) result.phases.qemu = { ...prev!.phases.qemu!, rows: kept };
    // A peer a kept row has at the cap is not started again at a larger size either.
    const skip = cappedInRows(kept, Math.min(...sizes), TIMEOUT_S);
    for (const S of sizes) {
      const out = join(scratch, `qemu-${S}.json`);
      rmSync(out, { force: true });
      const cmd = `node dist/bench/suite.js --phase qemu --sizes ${S} --timeout ${TIMEOUT_S} ${[...skip].map(([name, at]) => `--skip '${formatSkip(name, at)}'`).join(' ')} --out-file "$IPVSYNC_VM_OUT/qemu-${S}.json"`;
      const r = spawnSync(process.execPath, [join(ROOT, 'dist', 'test', 'vm', 'cli.js'), '--kernel', 'qemu', '--mem', '3072', '--timeout', String(Math.max(3600, 10 * TIMEOUT_S)), '--out', scratch, '--', cmd], { stdio: 'inherit', cwd: ROOT });
      if (r.status !== 0 || !existsSync(out)) {
        console.error(`qemu S=${S} failed (exit ${r.status})`);
        (result.phases.qemu ??= { environment: {}, loadavgEnd: '', rows: [] }).rows.push({ services: S, endpoints: S * 10, error: `VM run failed (exit ${r.status})`, peers: {}, sizes: {} });
        continue;
      }
      const ph = JSON.parse(readFileSync(out, 'utf8')) as PhaseResult & { capped: Array<[string, CappedAt]> };
      for (const row of ph.rows) row.measuredAt = ph.environment.date;
      for (const [name, at] of ph.capped) if (!skip.has(name)) skip.set(name, at);
      if (!result.phases.qemu?.rows.length) result.phases.qemu = { environment: ph.environment, loadavgEnd: ph.loadavgEnd, rows: ph.rows };
      else {
        result.phases.qemu.rows.push(...ph.rows);
        result.phases.qemu.rows.sort((x, y) => x.services - y.services);
        // the latest run's environment (each row keeps its own date)
        result.phases.qemu.environment = ph.environment;
        result.phases.qemu.loadavgEnd = ph.loadavgEnd;
      }
      writeOutputs(result);
    }
  } else if (prev?.phases.qemu) result.phases.qemu = prev.phases.qemu;
  if (a.only !== 'qemu') {
    const out = join(scratch, 'host.json');
    const r = spawnSync('unshare', ['-n', 'bash', '-c', `ip link set lo up && exec "$0" "$@"`, process.execPath, join(here, 'suite.js'), '--phase', 'host', '--sizes', a['host-sizes']!, '--timeout', String(TIMEOUT_S), '--out-file', out], { stdio: 'inherit', cwd: ROOT });
    if (r.status !== 0 || !existsSync(out)) throw new Error(`host phase failed (exit ${r.status})`);
    result.phases.host = JSON.parse(readFileSync(out, 'utf8')) as PhaseResult;
  } else if (prev?.phases.host) result.phases.host = prev.phases.host;
  result.hostUptimeEnd = sh('uptime', []).stdout.trim();
  writeOutputs(result);
}
