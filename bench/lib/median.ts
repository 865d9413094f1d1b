// The median of a run's samples (the upper one of an even count), for the benchmarks.

/** The sample at the middle of `xs` ordered by `key`. */
export function medianBy<T>(xs: readonly T[], key: (x: T) => number): T {
  return [...xs].sort((a, b) => key(a) - key(b))[Math.floor(xs.length / 2)]!;
}

export function median(xs: readonly number[]): number {
  return medianBy(xs, (x) => x);
}
