// Prometheus histograms read from a text exposition, and their quantiles computed as PromQL's
// histogram_quantile() computes them (promql/quantile.go, classic buckets): the bucket the rank
// falls in, linear interpolation between its lower and upper bound; the first bucket's lower
// bound is 0 (when its upper bound is above 0); a rank in the +Inf bucket answers the highest
// finite bound. Pure: no I/O.

export interface Bucket {
  /** The upper bound (`le`), Infinity for +Inf. */
  le: number;
  /** Cumulative count. */
  count: number;
}

export interface HistogramSeries {
  buckets: Bucket[];
  sum: number;
  count: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)/;

function labelsOf(text: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of (text ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) out[m[1]!] = m[2]!;
  return out;
}

const num = (s: string): number => (s === '+Inf' ? Infinity : s === '-Inf' ? -Infinity : Number(s));

/** Every sample of `name` (exact metric name) whose labels include `match`. */
export function samples(text: string, name: string, match: Record<string, string> = {}): Array<{ labels: Record<string, string>; value: number }> {
  const out: Array<{ labels: Record<string, string>; value: number }> = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = LINE.exec(line);
    if (!m || m[1] !== name) continue;
    const labels = labelsOf(m[2]);
    if (Object.entries(match).every(([k, v]) => labels[k] === v)) out.push({ labels, value: num(m[3]!) });
  }
  return out;
}

/** The sum of the samples of `name` matching `match` (a counter or gauge; 0 when absent). */
export function value(text: string, name: string, match: Record<string, string> = {}): number {
  return samples(text, name, match).reduce((a, s) => a + s.value, 0);
}

/** The histogram `name` (its _bucket, _sum, _count series) with the labels `match`. */
export function histogram(text: string, name: string, match: Record<string, string> = {}): HistogramSeries {
  const buckets = samples(text, `${name}_bucket`, match)
    .map((s) => ({ le: num(s.labels.le ?? 'NaN'), count: s.value }))
    .sort((a, b) => a.le - b.le);
  return { buckets, sum: value(text, `${name}_sum`, match), count: value(text, `${name}_count`, match) };
}

/** `after` minus `before`, bucket by bucket (the observations made between two scrapes). */
export function delta(after: HistogramSeries, before: HistogramSeries): HistogramSeries {
  const prev = new Map(before.buckets.map((b) => [b.le, b.count]));
  return {
    buckets: after.buckets.map((b) => ({ le: b.le, count: b.count - (prev.get(b.le) ?? 0) })),
    sum: after.sum - before.sum,
    count: after.count - before.count,
  };
}

/** PromQL's histogram_quantile(q, …) of one series; NaN without observations. */
export function histogramQuantile(q: number, buckets: readonly Bucket[]): number {
  if (buckets.length < 2 || buckets.at(-1)!.le !== Infinity) return NaN;
  const total = buckets.at(-1)!.count;
  if (total === 0) return NaN;
  if (q < 0) return -Infinity;
  if (q > 1) return Infinity;
  const rank = q * total;
  const i = buckets.findIndex((b) => b.count >= rank);
  if (i === buckets.length - 1) return buckets[buckets.length - 2]!.le;
  const b = buckets[i]!;
  if (i === 0 && b.le <= 0) return b.le;
  const start = i === 0 ? 0 : buckets[i - 1]!.le;
  const below = i === 0 ? 0 : buckets[i - 1]!.count;
  return start + (b.le - start) * ((rank - below) / (b.count - below));
}

/** The bucket the quantile's rank falls in: [lower, upper] (what the histogram knows). */
export function quantileBucket(q: number, buckets: readonly Bucket[]): [number, number] | undefined {
  const total = buckets.at(-1)?.count ?? 0;
  if (total === 0) return undefined;
  const i = buckets.findIndex((b) => b.count >= q * total);
  return [i === 0 ? Math.min(0, buckets[0]!.le) : buckets[i - 1]!.le, buckets[i]!.le];
}

/** The q-quantile of samples, nearest rank (the smallest sample with at least q of them at or
 *  below it). */
export function sampleQuantile(xs: readonly number[], q: number): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]!;
}
