// bench/nftables-mode.ts's results: the JSON's shape (every measurement's runs at each size),
// one written before issue 59 read into it, and the markdown tables and the plot drawn from it.
// Pure: no I/O.
/* eslint-disable @typescript-eslint/no-explicit-any */
import { panel, svgDocument, type Series } from './render.js';
import { fmtRuns, ratio, summarize, type Runs } from './spread.js';

/** The names the peers go by in the JSON and the tables. */
export const LEGACY = 'iptables-legacy-restore';
export const IPT_NFT = 'iptables-nft-restore';
export const NFT_PIECES = 'nft -f, in pieces';
export const NFT_ONE = 'nft -f, one transaction';
/** The peers capped at --cap: not started again, at that size or a larger one, once they hit it. */
export const CAPPED_PEERS = [LEGACY, IPT_NFT, NFT_PIECES, NFT_ONE] as const;
export type Peer = (typeof CAPPED_PEERS)[number];

/** Connections/s through the service and straight to an endpoint, measured in turn. */
export interface Rates {
  direct: number;
  service: number;
}

/** One size: every measurement's runs (one per round). */
export interface Row {
  S: number;
  rounds: number;
  startedAt: string;
  loadavg: { start: number[]; end: number[] };
  syncProcess: { first: Runs; noop: Runs; oneEndpoint: Runs; noopWrites: number[]; oneEndpointOps?: Record<string, number> };
  daemonPath?: { first: Runs; firstPlan: Runs; firstApply: Runs; oneEndpoint: Runs; resync: Runs; noopWrites: number[]; oneEndpointWrites: number[]; resyncWrites: number[] };
  daemonCold: DaemonRuns;
  daemonRestart: DaemonRuns;
  peers: Partial<Record<Peer, Runs>>;
  /** the transactions the pieces were (the count) */
  nftPieces?: number;
  kubeProxyChange?: Runs;
  connections?: { nftables: Rates[]; iptablesLegacy: Rates[] };
}

/** The daemon's first syncs over the rounds. */
export interface DaemonRuns {
  sync: Runs;
  log: Runs;
  wall: Runs;
  hwmMb: Runs;
  loopMaxMs: Runs;
  writes: number[];
  failed?: number;
}

export interface Result {
  date: string;
  kernel: string;
  cpu: string;
  capS: number;
  /** the pieces' sum's cap (absent: capS) */
  piecesCapS?: number;
  rounds: number;
  piece: number;
  command: string;
  loadavg: { start: number[]; end: number[] };
  rows: Row[];
}

/** Connection rates' runs (NaN: a round whose connections failed) as Runs. */
const values = (xs: number[]): Runs => ({ runs: xs.filter(Number.isFinite) });

/** The JSON of a run, or one written before issue 59 (one run per row, no iptables-nft, the
 *  nftables-mode peer one declarative `nft -f`) read into today's rows. */
export function resultFromJson(text: string): Result {
  const j = JSON.parse(text) as Result | { date: string; kernel: string; cpu?: string; capS: number; rows: Array<Record<string, any>> };
  if ('rounds' in j) return j;
  const one = (m: { ms: number; timeout?: boolean } | undefined): Runs => (m ? (m.timeout ? { runs: [], timeouts: 1, capS: j.capS } : { runs: [m.ms] }) : { runs: [] });
  const proc = (d: Record<string, number> | undefined): DaemonRuns => ({ sync: { runs: [] }, log: d ? { runs: [d.syncMs!] } : { runs: [] }, wall: { runs: [] }, hwmMb: d ? { runs: [d.hwmMb!] } : { runs: [] }, loopMaxMs: d ? { runs: [d.loopMaxMs!] } : { runs: [] }, writes: d ? [d.writes!] : [] });
  const rows: Row[] = j.rows.map((r) => ({
    S: r.S,
    rounds: 1,
    startedAt: j.date,
    loadavg: { start: [], end: [] },
    syncProcess: { first: one(r.first), noop: one(r.noop), oneEndpoint: one(r.oneEndpoint), noopWrites: [], oneEndpointOps: r.oneEndpointWrites?.ops },
    daemonPath: { first: { runs: [r.daemon.firstMs] }, firstPlan: { runs: [r.daemon.firstPlanMs] }, firstApply: { runs: [r.daemon.firstApplyMs] }, oneEndpoint: { runs: [r.daemon.oneEndpointMs] }, resync: { runs: [r.daemon.resyncMs] }, noopWrites: [r.daemon.noopWrites], oneEndpointWrites: [r.daemon.oneEndpointWrites], resyncWrites: [r.daemon.resyncWrites] },
    daemonCold: proc(r.daemonProcess),
    daemonRestart: proc(r.daemonRestart),
    peers: { [LEGACY]: one(r.iptablesLegacy), [NFT_ONE]: one(r.nftKubeProxy) },
    ...(r.kubeProxyChange ? { kubeProxyChange: one(r.kubeProxyChange) } : {}),
    ...(r.connections ? { connections: { nftables: [r.connections.nftables], iptablesLegacy: [r.connections.iptablesLegacy] } } : {}),
  }));
  return { date: j.date, kernel: j.kernel, cpu: j.cpu ?? '?', capS: j.capS, rounds: 1, piece: 1000, command: 'node dist/bench/nftables-mode.js (before issue 59: one run per size, all sizes in one process; the nftables-mode peer one declarative `nft -f`)', loadavg: { start: [], end: [] }, rows };
}

/** The markdown: the tables with spreads and ratios, the load averages. */
export function renderMarkdown(res: Result): string {
  const rows = res.rows;
  const k = (S: number) => (S >= 1000 ? `${S / 1000}k` : String(S));
  const first = (r: Row) => r.daemonPath?.first;
  const sp = (r: Row) => r.syncProcess.first;
  /** the peer, its column, its short name in the ratios' */
  const peerCols: Array<[Peer, string, string]> = [
    [LEGACY, '`iptables-legacy-restore`', 'legacy'],
    [IPT_NFT, '`iptables-nft-restore`', 'nft-restore'],
    [NFT_PIECES, `kube-proxy nftables: \`nft -f\` in ${res.piece.toLocaleString('en')}-service transactions, summed [how many]`, 'nft pieces'],
    [NFT_ONE, 'kube-proxy nftables: `nft -f`, one transaction (as it sends it)', 'nft one'],
  ];
  const writesOf = (xs: number[] | undefined) => (xs?.length ? [...new Set(xs)].join('/') : '–');
  const mb = (x: number) => `${x.toFixed(0)} MB`;
  const load = (r: Row) => (r.loadavg.start.length ? `${r.loadavg.start.join(' ')} → ${r.loadavg.end.join(' ')}` : '–');
  const md = [
    `# nftables data plane vs kube-proxy's tools (${res.kernel}, ${res.cpu}, ${res.date.slice(0, 10)})`,
    '',
    `\`${res.command}\`: in a private network namespace of the machine's own kernel, each size in a process of its own; ${res.rounds} round${res.rounds > 1 ? 's' : ''} per size, each round every measurement once (ipvsync and the peers alternated), every timed thing a fresh process. Each cell: the median of the rounds (min–max). Peers capped at ${res.capS} s${res.piecesCapS && res.piecesCapS !== res.capS ? ` (the pieces' sum at ${res.piecesCapS} s)` : ''} ("> N s": the run hit the cap; a peer that hit it is not started again at that size or larger). Ratios: the peer's median over ipvsync's. Load average (1, 5, 15 min) at the start → end of the run: ${res.loadavg.start.length ? `${res.loadavg.start.join(' ')} → ${res.loadavg.end.join(' ')}` : 'not recorded'}.`,
    '',
    '## Full programming on empty tables',
    '',
    `ipvsync: the daemon's path (the Proxier of \`ipvsync proxy\` in a fresh process, objects parsed; JS + the kernel's commit) and \`ipvsync sync -f --proxy-mode nftables\` as a whole process (start, JSON, translate, kernel). kube-proxy's nftables-mode full sync in ${res.piece.toLocaleString('en')}-service transactions: each piece one \`nft -f\` process, the times summed; kube-proxy sends it as one, whose cost grows faster than the ruleset (the kernel binds every anonymous vmap of a transaction at a cost that grows with it): that column where it finished under the cap.`,
    '',
    `| S × 10 | daemon path | \`sync -f\` process | ${peerCols.map(([, h]) => h).join(' | ')} |`,
    `|---|---|---|${peerCols.map(() => '---|').join('')}`,
    ...rows.map((r) => `| ${k(r.S)} | ${fmtRuns(first(r))} | ${fmtRuns(sp(r))} | ${peerCols.map(([p]) => fmtRuns(r.peers[p]) + (p === NFT_PIECES && r.nftPieces && r.peers[p] && !r.peers[p]!.skipped ? ` [${r.nftPieces}]` : '')).join(' | ')} |`),
    '',
    'Ratios (legacy: `iptables-legacy-restore`, nft-restore: `iptables-nft-restore`, nft pieces / one: kube-proxy nftables in pieces / in one transaction):',
    '',
    `| S × 10 | ${peerCols.map(([, , n]) => `${n} / daemon path`).join(' | ')} | ${peerCols.map(([, , n]) => `${n} / \`sync -f\``).join(' | ')} |`,
    `|---|${peerCols.map(() => '---|---|').join('')}`,
    ...rows.map((r) => `| ${k(r.S)} | ${peerCols.map(([p]) => ratio(r.peers[p], first(r))).join(' | ')} | ${peerCols.map(([p]) => ratio(r.peers[p], sp(r))).join(' | ')} |`),
    '',
    "## The daemon as a process: cold first sync, and restart over its own tables",
    '',
    "`ipvsync proxy --proxy-mode nftables --manifests DIR`, a fresh process each: (a) started on an empty table; (b) started again after SIGTERM left (a)'s tables, so its first sync lists and diffs them (and writes nothing). The first sync as the daemon reports it: the runner's duration (`kubeproxy_sync_proxy_rules_duration_seconds`, its one observation, scraped after it) and the `sync` log line's ms (the whole sync as the daemon waited for it; older builds logged the engine's part alone: list, diff, commit); the process's wall time from spawn to that log line; peak RSS (VmHWM) after it; the event loop's longest block from start to then (`nodejs_eventloop_lag_max_seconds`).",
    '',
    '| S × 10 | cold: first sync | its log ms | wall to first sync | peak RSS | event loop, longest block | restart: first sync | its log ms | wall to first sync | peak RSS | its writes | restart / cold |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => {
      const c = r.daemonCold;
      const s = r.daemonRestart;
      const failed = (d: DaemonRuns) => (d.failed ? ` (${d.failed} without a first sync)` : '');
      return `| ${k(r.S)} | ${fmtRuns(c.sync)}${failed(c)} | ${fmtRuns(c.log)} | ${fmtRuns(c.wall)} | ${fmtRuns(c.hwmMb, mb)} | ${fmtRuns(c.loopMaxMs)} | ${fmtRuns(s.sync)}${failed(s)} | ${fmtRuns(s.log)} | ${fmtRuns(s.wall)} | ${fmtRuns(s.hwmMb, mb)} | ${writesOf(s.writes)} | ${ratio(s.sync.runs.length ? s.sync : s.log, c.sync.runs.length ? c.sync : c.log)} |`;
    }),
    '',
    '## Incremental: one endpoint replaced, a no-op, a full resync',
    '',
    "The daemon's path: one endpoint replaced (an incremental sync with the kernel's commit; each round the median of 41, there and back), against kube-proxy nftables mode's transaction for it (`nft -f` on its ruleset, each round the median of 10 there and back).",
    '',
    "| S × 10 | no-op sync | one endpoint replaced | writes | kube-proxy's `nft -f` for it | ratio | full resync | its writes |",
    '|---|---|---|---|---|---|---|---|',
    ...rows.map((r) => {
      const d = r.daemonPath;
      return `| ${k(r.S)} | ${d ? `${writesOf(d.noopWrites)} writes` : '–'} | ${fmtRuns(d?.oneEndpoint)} | ${writesOf(d?.oneEndpointWrites)} | ${fmtRuns(r.kubeProxyChange)} | ${ratio(r.kubeProxyChange, d?.oneEndpoint)} | ${fmtRuns(d?.resync)} | ${writesOf(d?.resyncWrites)} |`;
    }),
    '',
    '## `ipvsync sync -f --proxy-mode nftables` as a whole process',
    '',
    '| S × 10 | first, empty table | no-op rerun | its writes | one endpoint replaced | its writes |',
    '|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${k(r.S)} | ${fmtRuns(r.syncProcess.first)} | ${fmtRuns(r.syncProcess.noop)} | ${writesOf(r.syncProcess.noopWrites)} | ${fmtRuns(r.syncProcess.oneEndpoint)} | ${JSON.stringify(r.syncProcess.oneEndpointOps ?? {})} |`),
    '',
    '## The data plane: new TCP connections per second to the last service, one after the other',
    '',
    'Each through the service in turn with straight to an endpoint (no service in the way), with the same tables loaded: the share cancels what the machine was doing meanwhile. ipvsync and iptables-legacy alternated each round; medians of the rounds (min–max).',
    '',
    '| S × 10 | ipvsync (nftables) | straight, in turn | share | kube-proxy iptables-legacy | straight, in turn | share | ipvsync / iptables-legacy |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.flatMap((r) => {
      const c = r.connections;
      if (!c) return [];
      const n = (x: number) => x.toFixed(0);
      // a round whose connections failed: NaN, counted
      const failed = (xs: Rates[], f: (x: Rates) => number) => xs.filter((x) => !Number.isFinite(f(x))).length;
      const of = (xs: Rates[], f: (x: Rates) => number) => fmtRuns(values(xs.map(f)), n) + (failed(xs, f) ? ` (${failed(xs, f)} round${failed(xs, f) > 1 ? 's' : ''} failed)` : '');
      const share = (x: Rates) => (100 * x.service) / x.direct;
      const pct = (xs: Rates[]) => fmtRuns(values(xs.map(share)), (x) => `${x.toFixed(0)}%`);
      const m = (xs: Rates[]) => summarize(values(xs.map((x) => x.service)))?.median ?? NaN;
      return [`| ${k(r.S)} | ${of(c.nftables, (x) => x.service)} | ${of(c.nftables, (x) => x.direct)} | ${pct(c.nftables)} | ${of(c.iptablesLegacy, (x) => x.service)} | ${of(c.iptablesLegacy, (x) => x.direct)} | ${pct(c.iptablesLegacy)} | ${(m(c.nftables) / m(c.iptablesLegacy)).toFixed(2)}× |`];
    }),
    '',
    '## Load average per size (start → end of its process)',
    '',
    '| S × 10 | rounds | started | load average |',
    '|---|---|---|---|',
    ...rows.map((r) => `| ${k(r.S)} | ${r.rounds} | ${r.startedAt.slice(0, 19)} | ${load(r)} |`),
    '',
  ];
  return md.join('\n');
}

/** The plot: full programming against S, the iptables-mode peers in one panel and the
 *  nftables-mode ones in the other, each with ipvsync's two paths (medians; a triangle: capped). */
export function renderSvg(res: Result): string {
  const rows = res.rows;
  const first = (r: Row) => r.daemonPath?.first;
  const sp = (r: Row) => r.syncProcess.first;
  const point = (S: number, r: Runs | undefined) => {
    const s = summarize(r);
    return s ? [{ S, ms: s.median, timeout: s.capped }] : [];
  };
  const line = (name: string, color: string, get: (r: Row) => Runs | undefined): Series => ({ name, color, points: rows.flatMap((r) => point(r.S, get(r))) });
  const ours = [line("ipvsync, the daemon's path", '#d62728', first), line('ipvsync sync -f (process)', '#e377c2', sp)];
  const W = 480;
  const H = 420;
  const parts = [
    ...panel(`vs kube-proxy iptables mode (${res.kernel})`, [...ours, line('iptables-legacy-restore', '#1f77b4', (r) => r.peers[LEGACY]), line('iptables-nft-restore', '#9467bd', (r) => r.peers[IPT_NFT])], 0, W, H),
    ...panel('vs kube-proxy nftables mode', [...ours, line(`nft -f in ${res.piece}-service transactions, summed`, '#ff7f0e', (r) => r.peers[NFT_PIECES]), line('nft -f, one transaction (as kube-proxy sends it)', '#8c564b', (r) => r.peers[NFT_ONE])], W, W, H),
  ];
  return svgDocument(parts, 2 * W, H, `medians of ${res.rounds} rounds; ${res.date.slice(0, 10)}`);
}
