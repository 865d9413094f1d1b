// Repeated runs of one measurement and what a results table says of them: the median with the
// spread (min–max), runs that hit a cap counted above every finished one. Pure: no I/O.
import { median } from './median.js';

/** The runs of one measurement at one size: finished runs' values, how many hit the cap (and
 *  the cap), or why it was not run at all. */
export interface Runs {
  runs: number[];
  /** runs stopped at the cap (their value unknown: above capS) */
  timeouts?: number;
  capS?: number;
  /** not run (a smaller size hit the cap, or it does not apply at this size) */
  skipped?: string;
}

export interface Summary {
  median: number;
  min: number;
  max: number;
  /** the median is a capped run: known only to be above the cap */
  capped: boolean;
  n: number;
}

/** The median and spread of the runs, a capped run counted as +∞ (so the median is a lower
 *  bound, "> cap", when half the runs or more hit it). undefined: nothing was run. */
export function summarize(r: Runs | undefined): Summary | undefined {
  if (!r || r.skipped) return undefined;
  const capMs = (r.capS ?? NaN) * 1000;
  const all = [...r.runs, ...Array<number>(r.timeouts ?? 0).fill(Infinity)];
  if (!all.length) return undefined;
  const m = median(all);
  const finite = (x: number) => (x === Infinity ? capMs : x);
  return { median: finite(m), min: finite(Math.min(...all)), max: finite(Math.max(...all)), capped: m === Infinity, n: all.length };
}

/** A time in ms as the tables print it. */
export function ms(x: number): string {
  if (!Number.isFinite(x)) return '–';
  if (x >= 10_000) return `${(x / 1000).toFixed(1)} s`;
  if (x >= 100) return `${x.toFixed(0)} ms`;
  if (x >= 1) return `${x.toFixed(1)} ms`;
  return `${x.toFixed(2)} ms`;
}

/** "median (min–max)", "> cap" where the median hit it, the reason where not run. */
export function fmtRuns(r: Runs | undefined, f: (x: number) => string = ms): string {
  if (r?.skipped) return `not run (${r.skipped})`;
  const s = summarize(r);
  if (!s) return '–';
  if (s.capped) return `> ${r!.capS} s${s.n > 1 ? ` (${s.n - (r!.timeouts ?? 0)} of ${s.n} under it)` : ''}`;
  const capped = (r!.timeouts ?? 0) > 0 ? `, ${r!.timeouts} over ${r!.capS} s` : '';
  return s.n === 1 ? f(s.median) : `${f(s.median)} (${f(s.min)}–${s.max === (r!.capS ?? NaN) * 1000 ? `> ${r!.capS} s` : f(s.max)}${capped})`;
}

/** How many times the peer's median is ours ("> N×" where the peer's median hit the cap). */
export function ratio(peer: Runs | undefined, ours: Runs | undefined): string {
  const p = summarize(peer);
  const o = summarize(ours);
  if (!p || !o || o.capped || !(o.median > 0)) return '–';
  const x = p.median / o.median;
  return `${p.capped ? '> ' : ''}${x >= 100 ? x.toFixed(0) : x.toFixed(1)}×`;
}
