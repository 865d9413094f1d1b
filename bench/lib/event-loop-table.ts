// bench/event-loop.ts's markdown table: per S and bindMode, each variant's worst loop, p99 and
// peak RSS and its mean full sync; with the run_estimation=0 variant, every run of the two
// threads' loops instead of the in-process / thread ratio.

export interface Run {
  ms: number;
  loopMaxMs: number;
  loopP99Ms: number;
  gcMaxMs: number;
  mainRunQueueWaitMs?: number;
  hwmMB: number;
}

export interface EventLoopRow {
  services: number;
  mode: string;
  inProcess: Run[];
  thread: Run[];
  /** The sync thread with net.ipv4.vs.run_estimation=0 (--no-estimation). */
  threadNoEstimation?: Run[];
}

const max = (rs: Run[], k: keyof Run) => Math.max(...rs.map((r) => r[k] ?? 0));
const mean = (rs: Run[], k: keyof Run) => rs.reduce((n, r) => n + (r[k] ?? 0), 0) / rs.length;
const runs = (rs: Run[]) => rs.map((r) => r.loopMaxMs.toFixed(0)).join(', ');

/** The table's lines (header, separator, one per row); `noEstimation`: the three-variant layout. */
export function eventLoopTable(rows: readonly EventLoopRow[], noEstimation: boolean): string[] {
  const lines = noEstimation
    ? [
        '| S | bindMode | loop max, in process | loop max, sync thread | loop max, sync thread, run_estimation=0 | each run of the thread / with run_estimation=0 | p99 in / thread / run_estimation=0 | full sync in / thread / run_estimation=0 | peak RSS in / thread / run_estimation=0 |',
        '|---|---|---|---|---|---|---|---|---|',
      ]
    : [
        '| S | bindMode | loop max, in process | loop max, sync thread | ratio | p99 in / thread | full sync in / thread | peak RSS in / thread |',
        '|---|---|---|---|---|---|---|---|',
      ];
  for (const r of rows) {
    const threads = noEstimation ? [r.thread, r.threadNoEstimation!] : [r.thread];
    const vs = [r.inProcess, ...threads];
    /** One value per variant, "a / b[ / c]". */
    const each = (f: (rs: Run[]) => string) => vs.map(f).join(' / ');
    const loopMaxes = vs.map((rs) => `${max(rs, 'loopMaxMs').toFixed(0)} ms`).join(' | ');
    const middle = noEstimation ? `${threads.map(runs).join(' / ')} ms` : `${(max(r.inProcess, 'loopMaxMs') / max(r.thread, 'loopMaxMs')).toFixed(1)}×`;
    lines.push(
      `| ${r.services} | ${r.mode} | ${loopMaxes} | ${middle} | ${each((rs) => max(rs, 'loopP99Ms').toFixed(0))} ms | ${each((rs) => (mean(rs, 'ms') / 1e3).toFixed(2))} s | ${each((rs) => max(rs, 'hwmMB').toFixed(0))} MB |`,
    );
  }
  return lines;
}
