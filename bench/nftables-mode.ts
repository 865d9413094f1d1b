// The nftables data plane at real speed, on the machine's own kernel in a private network
// namespace, against kube-proxy's tools in the same run:
//   node dist/bench/nftables-mode.js [--sizes 1000,5000,10000] [--cap 120]
// Workload: S services × 10 endpoints (every 10th also a NodePort), as bench/suite.ts. Per S:
//   ipvsync   `ipvsync sync -f DIR --proxy-mode nftables` as a whole process (start, JSON,
//             translate, the tables, the kernel): the first run on an empty table, a second run
//             of the same objects (nothing to write), a run with one endpoint replaced
//   peers     `iptables-legacy-restore` of kube-proxy's iptables-mode ruleset, and `nft -f` of its
//             nftables-mode ruleset (a chain per service and per endpoint), each on an empty
//             table, capped at --cap seconds
//   daemon    the daemon's path in this process (the Proxier of `ipvsync proxy`, objects already
//             parsed): the first sync, a no-op sync, one endpoint replaced (incremental, the
//             kernel's commit included; the median of 41), a full resync; its writes; and
//             `ipvsync proxy` as a process: its peak RSS at its first start (empty table) and
//             when it restarts over the tables its first run left (stopped with SIGTERM)
//   peer      kube-proxy nftables mode's transaction for that one endpoint (`nft -f`), on its
//             ruleset loaded in pieces of 1,000 services (one transaction would pass the cap),
//             up to --change-peer-max services
//   data      new TCP connections per second from the node to the last service's cluster IP (a
//             pod namespace answering on its endpoints' addresses), one after the other, with
//             ipvsync's tables and with kube-proxy's iptables-legacy ruleset, at --conn-sizes
// Prints the table with ratios; writes bench/results/nftables-mode.json and .md.
// `--daemon-only` measures only the daemon process (first start and restart) at each size and
// prints one JSON line per size, writing no results (for repeated runs when comparing builds).
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { iptablesRestore, JUMP_RULES } from './lib/iptables.js';
import { manifestFiles, syncFlags } from './lib/manifests.js';
import { nftEndpointChange, nftRuleset, NFT_TABLE } from './lib/nft-mode.js';
import { median } from './lib/median.js';
import { panel, svgDocument, type Series } from './lib/render.js';
import { serviceObject, sliceObject } from './lib/manifests.js';
import { openKernel } from '../src/proxy/kernel.js';
import { Proxier } from '../src/proxy/proxier.js';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { CLI, NODE_ENV_VARS, NODE_FLAGS } from './lib/command-env.js';
import { changedIndex, CLUSTER_CIDR, NODE_IP, NODE_NAME, withOneEndpointChanged, workload, type Workload } from './lib/workload.js';

const here = dirname(fileURLToPath(import.meta.url));
const RESULTS = join(here, '..', '..', 'bench', 'results');
const { values: a } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1000,5000,10000,20000' },
    cap: { type: 'string', default: '120' },
    'change-peer-max': { type: 'string', default: '10000' },
    'conn-sizes': { type: 'string', default: '1000,10000' },
    render: { type: 'boolean', default: false },
    inner: { type: 'boolean', default: false },
    'daemon-only': { type: 'boolean', default: false },
  },
});

if (!a.inner && !a.render) {
  // Every measurement in a namespace of its own making: nothing of the machine's is touched.
  const r = spawnSync('unshare', ['-n', 'bash', '-c', 'ip link set lo up && exec "$0" "$@"', process.execPath, fileURLToPath(import.meta.url), '--inner', '--sizes', a.sizes!, '--cap', a.cap!, '--change-peer-max', a['change-peer-max']!, '--conn-sizes', a['conn-sizes']!, ...(a['daemon-only'] ? ['--daemon-only'] : [])], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

const CAP_S = Number(a.cap);
interface Run {
  ms: number;
  timeout?: boolean;
  out?: string;
}

/** A whole process, capped; `input`: text written to a file that is its standard input. */
function run(cmd: string, args: string[], input?: string): Run {
  let stdin: number | 'ignore' = 'ignore';
  if (input !== undefined) {
    const f = join(os.tmpdir(), `nft-mode-input-${process.pid}`);
    writeFileSync(f, input);
    stdin = openSync(f, 'r');
    unlinkSync(f);
  }
  const t0 = process.hrtime.bigint();
  const r = spawnSync('timeout', ['-s', 'KILL', String(CAP_S), cmd, ...args], { encoding: 'utf8', maxBuffer: 1 << 30, stdio: [stdin, 'pipe', 'pipe'] });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (typeof stdin === 'number') closeSync(stdin);
  // timeout kills its own process group with the command: it may die of the same SIGKILL
  if (r.status === 137 || r.signal === 'SIGKILL') return { ms, timeout: true };
  if (r.status !== 0) throw new Error(`${cmd} ${args.slice(0, 3).join(' ')} exited ${r.status} ${r.signal ?? ''} ${r.error?.message ?? ''}: ${(r.stderr ?? '').slice(0, 600)}`);
  return { ms, out: r.stdout };
}
const quiet = (cmd: string, ...args: string[]) => void spawnSync(cmd, args);
const ipvsync = (dir: string) =>
  run('env', [...NODE_ENV_VARS, process.execPath, ...NODE_FLAGS, CLI, 'sync', '-f', dir, '--proxy-mode', 'nftables', ...syncFlags(NODE_IP), '--json']);
const nftWrites = (r: Run) => (r.out ? (JSON.parse(r.out) as { report: { nft: { writes: number; ops: Record<string, number> } } }).report.nft : undefined);
const fmt = (r: Run) => (r.timeout ? `> ${CAP_S} s` : r.ms >= 10_000 ? `${(r.ms / 1000).toFixed(1)} s` : `${r.ms.toFixed(0)} ms`);
const ratio = (peer: Run, ours: Run) => (peer.timeout ? `> ${(peer.ms / ours.ms).toFixed(1)}×` : `${(peer.ms / ours.ms).toFixed(1)}×`);

/** The daemon's path in this process: a Proxier in nftables mode on the namespace's kernel. */
interface DaemonRun {
  firstMs: number;
  /** of the first sync: planning (model, tables, diff) and applying (the kernel's commits) */
  firstPlanMs: number;
  firstApplyMs: number;
  noopWrites: number;
  oneEndpointMs: number;
  oneEndpointWrites: number;
  oneEndpointOps: Record<string, number>;
  resyncMs: number;
  resyncWrites: number;
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

async function daemonPath(w: Workload): Promise<DaemonRun> {
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
  return {
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
}

/** `ipvsync proxy --proxy-mode nftables --manifests DIR` as a process, until its first sync: that
 *  sync (from its log: ms, writes), its peak and current RSS after it (all its threads), and the
 *  longest block of its event loop from start to then (its /metrics'
 *  nodejs_eventloop_lag_max_seconds, first scrape). Stopped with SIGTERM, which leaves its
 *  tables programmed. */
interface DaemonProcessRun {
  syncMs: number;
  writes: number;
  hwmMb: number;
  rssMb: number;
  loopMaxMs: number;
}

async function daemonProcess(dir: string): Promise<DaemonProcessRun | undefined> {
  const metricsAt = '127.0.0.1:10249';
  const args = [CLI, 'proxy', '--proxy-mode', 'nftables', '--manifests', dir, '--hostname-override', NODE_NAME, '--node-ip', NODE_IP, '--cluster-cidr', CLUSTER_CIDR, '--healthz-bind-address', '127.0.0.1:0', '--metrics-bind-address', metricsAt, '--logging-format', 'json'];
  const child = spawn('env', [...NODE_ENV_VARS, process.execPath, ...NODE_FLAGS, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  const first = await new Promise<Record<string, unknown> | undefined>((resolve) => {
    const timer = setTimeout(() => resolve(undefined), CAP_S * 1000);
    createInterface({ input: child.stderr! }).on('line', (l) => {
      if (!l.includes('"msg":"sync"')) return;
      clearTimeout(timer);
      resolve(JSON.parse(l) as Record<string, unknown>);
    });
    child.once('exit', () => resolve(undefined));
  });
  // env execs node: the same pid
  const status = spawnSync('cat', [`/proc/${child.pid}/status`], { encoding: 'utf8' }).stdout;
  const scraped = first ? await (await fetch(`http://${metricsAt}/metrics`)).text() : '';
  const loopMaxMs = Number(/^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(scraped)?.[1] ?? NaN) * 1000;
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
  const kb = (k: string) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
  return first && { syncMs: Number(first.ms), writes: Number(first.writes), hwmMb: kb('VmHWM') / 1024, rssMb: kb('VmRSS') / 1024, loopMaxMs };
}

/** The daemon's first start on an empty table, then its restart over the tables that run left:
 *  the restart's first sync is a full plan that lists them and finds nothing to write (its
 *  writes are checked: a table gone at SIGTERM would be written again whole). */
async function daemonStartAndRestart(dir: string): Promise<{ first: DaemonProcessRun | undefined; restart: DaemonProcessRun | undefined }> {
  quiet('nft', 'flush', 'ruleset');
  const first = await daemonProcess(dir);
  const restart = first && (await daemonProcess(dir));
  if (restart && restart.writes !== 0) throw new Error(`the daemon's restart over its own tables wrote ${restart.writes} times (expected none)`);
  return { first, restart };
}

if (a['daemon-only']) {
  for (const S of a.sizes!.split(',').map(Number)) {
    const dir = mkdtempSync(join(os.tmpdir(), `nft-mode-${S}-`));
    for (const [k, v] of Object.entries(manifestFiles(workload(S).services))) writeFileSync(join(dir, k), v);
    const r = await daemonStartAndRestart(dir);
    quiet('nft', 'flush', 'ruleset');
    rmSync(dir, { recursive: true, force: true });
    console.log(JSON.stringify({ S, ...r }));
  }
  process.exit(0);
}

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
 *  and through kube-proxy's iptables-legacy ruleset, each against the rate straight to an
 *  endpoint measured in turn with it (so a busy moment of the machine slows both): the medians
 *  of five runs of 4,000 each. */
async function connectionRate(w: Workload): Promise<Connections> {
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
  const connect = (host: string, port: number, n: number) => {
    quiet('conntrack', '-F');
    return Number(spawnSync(process.execPath, ['-e', CONNECT, host, String(port), String(n)], { encoding: 'utf8' }).stdout.trim());
  };
  // a warm-up run of each first (the server's JIT), then the two in turn: the floor (straight
  // to an endpoint, no service in the way) and through the service
  const rates = (): { direct: number; service: number } => {
    const e = last.endpoints[0]!;
    connect(e.ip, e.port, 500);
    connect(last.clusterIP, last.port, 500);
    const direct: number[] = [];
    const service: number[] = [];
    for (let i = 0; i < 5; i++) {
      direct.push(connect(e.ip, e.port, 4000));
      service.push(connect(last.clusterIP, last.port, 4000));
    }
    return { direct: median(direct), service: median(service) };
  };
  try {
    const p = await proxierWith(w);
    if ((await p.sync(true)).report.errors.length) throw new Error('sync failed');
    const nftables = rates();
    quiet('nft', 'flush', 'ruleset');
    for (const j of JUMP_RULES) quiet('iptables-legacy', ...j);
    run('iptables-legacy-restore', ['--noflush'], iptablesRestore(w.services).text);
    const iptablesLegacy = rates();
    return { nftables, iptablesLegacy };
  } finally {
    server.kill();
    for (const t of ['nat', 'filter']) quiet('iptables-legacy', '-t', t, '-F'), quiet('iptables-legacy', '-t', t, '-X');
    quiet('nft', 'flush', 'ruleset');
    spawnSync('ip', ['netns', 'del', 'cr-pod']);
    spawnSync('ip', ['link', 'del', 'cr0']);
    for (const e of last.endpoints) spawnSync('ip', ['route', 'del', `${e.ip}/32`]);
    spawnSync('ip', ['route', 'del', '172.20.0.0/16']);
  }
}

/** kube-proxy nftables mode's transaction for one endpoint replaced, on its ruleset for `w`
 *  (loaded in pieces of 1,000 services); the median of 5 there and back. */
function kubeProxyChange(w: Workload): Run | undefined {
  const PIECE = 1000;
  for (let i = 0; i < w.services.length; i += PIECE) {
    const r = run('nft', ['-f', '-'], nftRuleset(w.services.slice(i, i + PIECE), CLUSTER_CIDR, { base: i === 0 }).text);
    if (r.timeout) return { ms: CAP_S * 1000, timeout: true };
  }
  const original = w.services[changedIndex(w)]!;
  const changed = withOneEndpointChanged(w).services[changedIndex(w)]!;
  const runs: Run[] = [];
  for (let i = 0; i < 10; i++) runs.push(run('nft', ['-f', '-'], i % 2 === 0 ? nftEndpointChange(original, changed) : nftEndpointChange(changed, original)));
  return runs.find((r) => r.timeout) ?? { ms: median(runs.map((r) => r.ms)) };
}

/** Connections/s through the service and straight to an endpoint, measured in turn. */
interface Rates {
  direct: number;
  service: number;
}
interface Connections {
  nftables: Rates;
  iptablesLegacy: Rates;
}

/** From the smallest to the largest S with connections: how each rate and share moved. */
function connectionSpread(rows: readonly Row[]): string[] {
  const c = rows.filter((r) => r.connections);
  if (c.length < 2) return [];
  const [a, b] = [c[0]!, c[c.length - 1]!];
  const pct = (x: number, y: number) => `${y >= x ? '+' : '−'}${Math.abs((100 * (y - x)) / x).toFixed(0)}%`;
  const share = (x: Rates) => x.service / x.direct;
  const line = (name: string, x: Rates, y: Rates) => `${name} ${pct(x.service, y.service)} (its share ${pct(share(x), share(y))})`;
  return [`From ${a.S} to ${b.S} services: ${line('ipvsync', a.connections!.nftables, b.connections!.nftables)}; ${line('iptables-legacy', a.connections!.iptablesLegacy, b.connections!.iptablesLegacy)}.`, ''];
}

interface Row {
  S: number;
  daemon: DaemonRun;
  daemonProcess: DaemonProcessRun | undefined;
  /** the same daemon started again over the tables its first run left */
  daemonRestart?: DaemonProcessRun | undefined;
  connections?: Connections;
  kubeProxyChange: Run | undefined;
  first: Run;
  noop: Run;
  oneEndpoint: Run;
  oneEndpointWrites: unknown;
  iptablesLegacy: Run;
  nftKubeProxy: Run;
}

if (a.render) {
  // the tables and the plot again from the committed JSON (no measurement)
  const j = JSON.parse(readFileSync(join(RESULTS, 'nftables-mode.json'), 'utf8')) as { date: string; kernel: string; cpu?: string; capS: number; rows: Row[] };
  render(j.rows, { date: j.date, kernel: j.kernel, cpu: j.cpu ?? `${os.cpus()[0]?.model ?? '?'} × ${os.cpus().length}`, capS: j.capS, rendered: true });
  process.exit(0);
}

const rows: Row[] = [];
let nftCapped = false;
for (const S of a.sizes!.split(',').map(Number)) {
  const w = workload(S);
  const dir = mkdtempSync(join(os.tmpdir(), `nft-mode-${S}-`));
  const write = (services: typeof w.services) => {
    for (const [k, v] of Object.entries(manifestFiles(services))) writeFileSync(join(dir, k), v);
  };
  write(w.services);
  quiet('nft', 'flush', 'ruleset');
  const first = ipvsync(dir);
  const noop = ipvsync(dir);
  write(withOneEndpointChanged(w).services);
  const oneEndpoint = ipvsync(dir);
  quiet('nft', 'flush', 'ruleset');
  const daemon = await daemonPath(w);
  write(w.services);
  const { first: proc, restart } = await daemonStartAndRestart(dir);
  quiet('nft', 'flush', 'ruleset');
  const kubeProxy = S <= Number(a['change-peer-max']) ? kubeProxyChange(w) : undefined;
  quiet('nft', 'flush', 'ruleset');
  const connections = a['conn-sizes']!.split(',').map(Number).includes(S) ? await connectionRate(w) : undefined;
  // kube-proxy iptables mode, legacy backend: the whole nat and filter tables in one restore
  for (const t of ['nat', 'filter']) quiet('iptables-legacy', '-t', t, '-F'), quiet('iptables-legacy', '-t', t, '-X');
  for (const j of JUMP_RULES) quiet('iptables-legacy', ...j);
  const iptablesLegacy = run('iptables-legacy-restore', ['--noflush'], iptablesRestore(w.services).text);
  for (const t of ['nat', 'filter']) quiet('iptables-legacy', '-t', t, '-F'), quiet('iptables-legacy', '-t', t, '-X');
  // kube-proxy nftables mode: one transaction of its table (not tried again past a size where
  // it hit the cap)
  const nftKubeProxy: Run = nftCapped ? { ms: CAP_S * 1000, timeout: true } : run('nft', ['-f', '-'], nftRuleset(w.services).text);
  nftCapped ||= !!nftKubeProxy.timeout;
  quiet('nft', 'delete', 'table', 'ip', NFT_TABLE);
  rmSync(dir, { recursive: true, force: true });
  const row = { S, daemon, daemonProcess: proc, daemonRestart: restart, connections, kubeProxyChange: kubeProxy, first, noop, oneEndpoint, oneEndpointWrites: nftWrites(oneEndpoint), iptablesLegacy, nftKubeProxy };
  rows.push(row);
  console.log(
    `S=${S}: ipvsync first ${fmt(first)}, no-op ${fmt(noop)} (writes ${nftWrites(noop)?.writes}), one endpoint ${fmt(oneEndpoint)} (${JSON.stringify(row.oneEndpointWrites)}); ` +
      `iptables-legacy-restore ${fmt(iptablesLegacy)} (${ratio(iptablesLegacy, first)}), nft -f kube-proxy ${fmt(nftKubeProxy)} (${ratio(nftKubeProxy, first)})`,
  );
  console.log(
    `   daemon path: first ${daemon.firstMs.toFixed(0)} ms (plan ${daemon.firstPlanMs.toFixed(0)}, apply ${daemon.firstApplyMs.toFixed(0)}), no-op writes ${daemon.noopWrites}, ` +
      `one endpoint ${daemon.oneEndpointMs.toFixed(2)} ms (${daemon.oneEndpointWrites} writes), resync ${daemon.resyncMs.toFixed(0)} ms (${daemon.resyncWrites} writes); ` +
      `ipvsync proxy peak RSS ${proc ? `${proc.hwmMb.toFixed(0)} MB, event loop max ${proc.loopMaxMs.toFixed(0)} ms` : '-'}, ` +
      `restarted over its tables ${restart ? `${restart.hwmMb.toFixed(0)} MB (first sync ${restart.syncMs} ms)` : '-'}; ` +
      `kube-proxy's transaction for it ${kubeProxy ? fmt(kubeProxy) : '-'}` +
      (connections ? `; new connections/s to the last service: nftables ${connections.nftables.service.toFixed(0)} (straight to an endpoint ${connections.nftables.direct.toFixed(0)}), iptables-legacy ${connections.iptablesLegacy.service.toFixed(0)} (straight ${connections.iptablesLegacy.direct.toFixed(0)})` : ''),
  );
}

render(rows, { date: new Date().toISOString(), kernel: os.release(), cpu: `${os.cpus()[0]?.model ?? '?'} × ${os.cpus().length}`, capS: CAP_S });

/** The markdown tables, the JSON (unless re-rendering it) and the plot. */
function render(rows: Row[], meta: { date: string; kernel: string; cpu: string; capS: number; rendered?: boolean }): void {
  const ms = (x: number) => (x >= 10_000 ? `${(x / 1000).toFixed(1)} s` : x >= 10 ? `${x.toFixed(0)} ms` : `${x.toFixed(2)} ms`);
  const md = [
    `# nftables data plane vs kube-proxy's tools (${meta.kernel}, ${meta.cpu}, ${meta.date.slice(0, 10)})`,
    '',
    '`node dist/bench/nftables-mode.js`, in a private network namespace of the machine\'s own kernel.',
    '',
    "## The daemon's path (the Proxier of `ipvsync proxy`, objects parsed), against the peers",
    '',
    '| S × 10 | first sync (JS + kernel commit) | `iptables-legacy-restore` | ratio | no-op sync | one endpoint replaced | kube-proxy `nft -f` for it | ratio | full resync | `ipvsync proxy` peak RSS (VmHWM, after its first sync) | its event loop: longest block, start to first sync | restarted over its own tables: peak RSS | its first sync (lists and diffs the tables) |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => {
      const d = r.daemon;
      const peer = r.kubeProxyChange;
      return `| ${r.S} | ${ms(d.firstMs)} (${ms(d.firstPlanMs)} + ${ms(d.firstApplyMs)}) | ${fmt(r.iptablesLegacy)} | ${ratio(r.iptablesLegacy, { ms: d.firstMs })} | ${d.noopWrites} writes | ${ms(d.oneEndpointMs)} (${d.oneEndpointWrites} writes) | ${peer ? fmt(peer) : '–'} | ${peer ? `${peer.timeout ? '> ' : ''}${(peer.ms / d.oneEndpointMs).toFixed(0)}×` : '–'} | ${ms(d.resyncMs)} (${d.resyncWrites} writes) | ${r.daemonProcess ? `${r.daemonProcess.hwmMb.toFixed(0)} MB` : '–'} | ${r.daemonProcess ? `${r.daemonProcess.loopMaxMs.toFixed(0)} ms` : '–'} | ${r.daemonRestart ? `${r.daemonRestart.hwmMb.toFixed(0)} MB` : '–'} | ${r.daemonRestart ? ms(r.daemonRestart.syncMs) : '–'} |`;
    }),
    '',
    '## The data plane: new TCP connections per second to the last service, one after the other',
    '',
    'Each through the service in turn with straight to an endpoint (no service in the way), with the same tables loaded: the share cancels what the machine was doing meanwhile.',
    '',
    '| S × 10 | ipvsync (nftables) | straight, in turn | share | kube-proxy iptables-legacy | straight, in turn | share | ipvsync / iptables-legacy |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.flatMap((r) => {
      const c = r.connections;
      if (!c) return [];
      const share = (x: Rates) => `${((100 * x.service) / x.direct).toFixed(0)}%`;
      return [`| ${r.S} | ${c.nftables.service.toFixed(0)} | ${c.nftables.direct.toFixed(0)} | ${share(c.nftables)} | ${c.iptablesLegacy.service.toFixed(0)} | ${c.iptablesLegacy.direct.toFixed(0)} | ${share(c.iptablesLegacy)} | ${(c.nftables.service / c.iptablesLegacy.service).toFixed(2)}× |`];
    }),
    '',
    ...connectionSpread(rows),
    '## Whole processes (`ipvsync sync -f --proxy-mode nftables`: start, JSON, translate, kernel), each on an empty table',
    '',
    '| S × 10 | `ipvsync sync -f --proxy-mode nftables` | no-op rerun | one endpoint replaced (writes) | `iptables-legacy-restore` | ratio | `nft -f` kube-proxy nftables | ratio |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.S} | ${fmt(r.first)} | ${fmt(r.noop)} | ${fmt(r.oneEndpoint)} (${JSON.stringify((r.oneEndpointWrites as { ops?: unknown } | undefined)?.ops ?? {})}) | ${fmt(r.iptablesLegacy)} | ${ratio(r.iptablesLegacy, r.first)} | ${fmt(r.nftKubeProxy)} | ${ratio(r.nftKubeProxy, r.first)} |`,
    ),
    '',
  ];
  console.log(md.join('\n'));
  if (!meta.rendered) writeFileSync(join(RESULTS, 'nftables-mode.json'), JSON.stringify({ date: meta.date, kernel: meta.kernel, cpu: meta.cpu, capS: meta.capS, rows: rows.map(({ first, noop, oneEndpoint, iptablesLegacy, nftKubeProxy, kubeProxyChange, ...r }) => ({ ...r, kubeProxyChange: kubeProxyChange && { ms: kubeProxyChange.ms, timeout: !!kubeProxyChange.timeout }, first: { ms: first.ms }, noop: { ms: noop.ms }, oneEndpoint: { ms: oneEndpoint.ms }, iptablesLegacy: { ms: iptablesLegacy.ms, timeout: !!iptablesLegacy.timeout }, nftKubeProxy: { ms: nftKubeProxy.ms, timeout: !!nftKubeProxy.timeout } })) }, null, 2) + '\n');
  writeFileSync(join(RESULTS, 'nftables-mode.md'), md.join('\n'));
  const point = (S: number, r: Run) => ({ S, ms: r.timeout ? meta.capS * 1000 : r.ms, timeout: !!r.timeout });
  const series: Series[] = [
    { name: 'ipvsync, the daemon path', color: '#d62728', points: rows.map((r) => ({ S: r.S, ms: r.daemon.firstMs, timeout: false })) },
    { name: 'ipvsync sync -f (process)', color: '#e377c2', points: rows.map((r) => point(r.S, r.first)) },
    { name: 'iptables-legacy-restore', color: '#1f77b4', points: rows.map((r) => point(r.S, r.iptablesLegacy)) },
    { name: 'nft -f (kube-proxy nftables)', color: '#ff7f0e', points: rows.map((r) => point(r.S, r.nftKubeProxy)) },
  ];
  writeFileSync(join(RESULTS, 'nftables-mode.svg'), svgDocument(panel(`Full programming, the machine's own kernel (${meta.kernel})`, series, 0, 560, 420), 560, 420, meta.date.slice(0, 10)));
}
