// When a watched source (the manifests folder) is loaded again. A burst of change events waits
// for one load: `debounceMs` after the last event, at most `maxDelayMs` after the first one
// no load has served yet. One load runs at a time, and an event during a load is followed by
// one more load that starts after that one has ended: each load reads the whole source, so the
// last load reads its last state, and no older read can land after a newer one.
import { systemClock, type Clock } from './runner.js';

export interface ReloadCoalescerOptions {
  /** Reads the source and hands its objects over (rejects: nothing was changed). */
  load: () => Promise<void>;
  /** A load that change events asked for has succeeded. Not called once stopped. */
  onChangeLoaded: () => void;
  /** A load that change events asked for has failed. Not called once stopped. */
  onChangeFailed: (error: unknown) => void;
  /** Default 200. */
  debounceMs?: number;
  /** Default 2000: a source that keeps changing is still loaded this often. */
  maxDelayMs?: number;
  clock?: Clock;
}

export interface ReloadStats {
  loads: number;
  failures: number;
}

export class ReloadCoalescer {
  private readonly clock: Clock;
  private readonly debounceMs: number;
  private readonly maxDelayMs: number;
  private timer: unknown;
  /** When the first change no load has started since came (undefined: none). */
  private changedSince: number | undefined;
  /** The load under way, settled once its end is handled. */
  private inFlight: Promise<void> | undefined;
  private stopped = false;
  /** Resolves at stop(). */
  private readonly halted: Promise<void>;
  private halt: () => void = () => undefined;
  readonly stats: ReloadStats = { loads: 0, failures: 0 };

  constructor(private readonly opts: ReloadCoalescerOptions) {
    this.clock = opts.clock ?? systemClock;
    this.debounceMs = opts.debounceMs ?? 200;
    this.maxDelayMs = opts.maxDelayMs ?? 2000;
    this.halted = new Promise((resolve) => (this.halt = resolve));
  }

  /** The source changed: a load follows, after the debounce and after the load under way. */
  changed(): void {
    if (this.stopped) return;
    this.changedSince ??= this.clock.now();
    if (!this.inFlight) this.arm();
  }

  /**
   * Loads now, once the load under way has ended (it may have read the source before the
   * caller's reason to read it again), and serves the changes so far. Rejects with the load's
   * error; resolves at once, loading nothing, when stopped (a stop while it waits included).
   */
  async now(): Promise<void> {
    while (this.inFlight && !this.stopped) await Promise.race([this.inFlight, this.halted]);
    if (this.stopped) return;
    this.disarm();
    return Promise.race([this.run(false), this.halted]);
  }

  /** No load starts from now on; changes are dropped, and the end of a load under way is not
   *  reported. */
  stop(): void {
    this.stopped = true;
    this.disarm();
    this.changedSince = undefined;
    this.halt();
  }

  private arm(): void {
    this.disarm();
    const now = this.clock.now();
    const at = Math.min(now + this.debounceMs, this.changedSince! + this.maxDelayMs);
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      // (reported through onChangeFailed)
      this.run(true).catch(() => undefined);
    }, Math.max(0, at - now));
  }

  private disarm(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private run(forChanges: boolean): Promise<void> {
    this.changedSince = undefined;
    this.stats.loads++;
    const p = this.opts.load();
    const ended = (report: () => void) => {
      this.inFlight = undefined;
      if (this.stopped) return;
      if (forChanges) report();
      if (this.changedSince !== undefined) this.arm();
    };
    this.inFlight = p.then(
      () => ended(() => this.opts.onChangeLoaded()),
      (e: unknown) => {
        this.stats.failures++;
        ended(() => this.opts.onChangeFailed(e));
      },
    );
    return p;
  }
}
