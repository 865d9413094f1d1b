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
// Prints the table with ratios; writes bench/results/nftables-mode.json and .md. Timings are
// wall clock of whole processes; the one-endpoint run still compares every element in
// JavaScript (the daemon's incremental path is not written for this data plane yet).
import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { iptablesRestore, JUMP_RULES } from './lib/iptables.js';
import { manifestFiles, syncFlags } from './lib/manifests.js';
import { nftRuleset, NFT_TABLE } from './lib/nft-mode.js';
import { CLI, NODE_ENV_VARS, NODE_FLAGS } from './lib/command-env.js';
import { NODE_IP, withOneEndpointChanged, workload } from './lib/workload.js';

const here = dirname(fileURLToPath(import.meta.url));
const RESULTS = join(here, '..', '..', 'bench', 'results');
const { values: a } = parseArgs({ options: { sizes: { type: 'string', default: '1000,5000,10000' }, cap: { type: 'string', default: '120' }, inner: { type: 'boolean', default: false } } });

if (!a.inner) {
  // Every measurement in a namespace of its own making: nothing of the machine's is touched.
  const r = spawnSync('unshare', ['-n', 'bash', '-c', 'ip link set lo up && exec "$0" "$@"', process.execPath, fileURLToPath(import.meta.url), '--inner', '--sizes', a.sizes!, '--cap', a.cap!], { stdio: 'inherit' });
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

interface Row {
  S: number;
  first: Run;
  noop: Run;
  oneEndpoint: Run;
  oneEndpointWrites: unknown;
  iptablesLegacy: Run;
  nftKubeProxy: Run;
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
  const row = { S, first, noop, oneEndpoint, oneEndpointWrites: nftWrites(oneEndpoint), iptablesLegacy, nftKubeProxy };
  rows.push(row);
  console.log(
    `S=${S}: ipvsync first ${fmt(first)}, no-op ${fmt(noop)} (writes ${nftWrites(noop)?.writes}), one endpoint ${fmt(oneEndpoint)} (${JSON.stringify(row.oneEndpointWrites)}); ` +
      `iptables-legacy-restore ${fmt(iptablesLegacy)} (${ratio(iptablesLegacy, first)}), nft -f kube-proxy ${fmt(nftKubeProxy)} (${ratio(nftKubeProxy, first)})`,
  );
}

const md = [
  `# nftables data plane vs kube-proxy's tools (${os.release()}, ${os.cpus()[0]?.model ?? '?'} × ${os.cpus().length}, ${new Date().toISOString().slice(0, 10)})`,
  '',
  'Whole processes, wall clock, each on an empty table; `node dist/bench/nftables-mode.js`.',
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
writeFileSync(join(RESULTS, 'nftables-mode.json'), JSON.stringify({ date: new Date().toISOString(), kernel: os.release(), capS: CAP_S, rows: rows.map(({ first, noop, oneEndpoint, iptablesLegacy, nftKubeProxy, ...r }) => ({ ...r, first: { ms: first.ms }, noop: { ms: noop.ms }, oneEndpoint: { ms: oneEndpoint.ms }, iptablesLegacy: { ms: iptablesLegacy.ms, timeout: !!iptablesLegacy.timeout }, nftKubeProxy: { ms: nftKubeProxy.ms, timeout: !!nftKubeProxy.timeout } })) }, null, 2) + '\n');
writeFileSync(join(RESULTS, 'nftables-mode.md'), md.join('\n'));
