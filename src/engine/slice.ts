// Cooperative time slicing for the long pure computations of a sync (translating 10k services,
// building the glue, diffing 100k destinations): they are written once, as generators that
// `yield` between units of work, and either run to the end at once (runSync: the pure
// functions tests and tools call) or with the event loop let in every `sliceMs` (runSliced:
// what the engine and the proxier run, so health checks, metrics and informer events are not
// held up for the whole sync).

/** A unit of work ended; the driver may pause here. */
export type Steps<T> = Generator<void, T, void>;

/** Elements per unit of work of the list passes below. */
const PER_STEP = 512;

/** `xs` mapped by `f`, leaving out what `f` maps to undefined, in units of PER_STEP elements. */
export function* mapSteps<T, U>(xs: readonly T[], f: (x: T) => U | undefined): Steps<U[]> {
  const out: U[] = [];
  for (let i = 0; i < xs.length; i++) {
    const y = f(xs[i]!);
    if (y !== undefined) out.push(y);
    if (i % PER_STEP === PER_STEP - 1) yield;
  }
  return out;
}

/** Runs to completion without pausing. */
export function runSync<T>(steps: Steps<T>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** Yields to the event loop (a macrotask: timers and I/O run) once `sliceMs` has passed. */
export class TimeSlice {
  private last = performance.now();
  /** Times it yielded. */
  yields = 0;

  constructor(readonly sliceMs = 10) {}

  /** A promise to await when the slice is used up, else undefined (no await, no microtask). */
  tick(): Promise<void> | undefined {
    if (performance.now() - this.last < this.sliceMs) return undefined;
    return new Promise((resolve) =>
      setImmediate(() => {
        this.last = performance.now();
        this.yields++;
        resolve();
      }),
    );
  }
}

/** Runs to completion, letting the event loop in whenever the slice is used up. */
export async function runSliced<T>(steps: Steps<T>, slice: TimeSlice): Promise<T> {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
    const p = slice.tick();
    if (p) await p;
  }
}
