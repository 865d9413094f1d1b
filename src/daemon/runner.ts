// A bounded-frequency runner for sync functions (kube-proxy's BoundedFrequencyRunner, reduced
// to what a proxy needs): bursts of requests coalesce into one sync no sooner than
// `minIntervalMs` after the previous one started, a sync runs at least every `maxIntervalMs`
// (a full one), and, however many partial ones come between, a full one at least every
// `fullSyncPeriodMs` (kube-proxy's FullSyncPeriod, an hour: a node whose endpoints change all
// the time still has its tables compared with the kernel, without a full sync's pause in every
// sync period of its churn),
// a failed sync is retried with exponential backoff, and two syncs never overlap.

export type SyncTrigger = 'initial' | 'request' | 'periodic' | 'retry';

/** Whether a run for this trigger is a full sync (every object compared with the kernel): all
 *  but a change request — the first, the periodic resync, and a retry (a failed sync leaves no
 *  base for an incremental one). The daemon's sync and its metrics (full and partial sync
 *  durations) read triggers so. */
export const fullSync = (trigger: SyncTrigger): boolean => trigger !== 'request';

/** RunnerOptions.fullSyncPeriodMs's default: kube-proxy's FullSyncPeriod. */
export const FULL_SYNC_PERIOD_MS = 3_600_000;

export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    // A pending periodic sync must not keep a finished program alive.
    t.unref?.();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

export interface RunnerOptions {
  /** Requests within this window after a sync started coalesce into one sync. */
  minIntervalMs: number;
  /** A sync runs at least this often even without requests (periodic full resync). */
  maxIntervalMs: number;
  /** First retry delay after a failure (doubles per consecutive failure). Default 1000. */
  retryInitialMs?: number;
  /** Cap of the retry delay. Default maxIntervalMs. */
  retryMaxMs?: number;
  /** A change request's sync is a full one (trigger 'periodic') when the last full sync started
   *  this long ago (default an hour, kube-proxy's FullSyncPeriod). */
  fullSyncPeriodMs?: number;
  clock?: Clock;
}

export interface SyncRecord {
  trigger: SyncTrigger;
  startedAt: number;
  durationMs: number;
  /** Requests that were coalesced into this sync. */
  coalesced: number;
  error?: unknown;
  /** A failed sync: when the runner retries it (undefined: stopped, no retry). */
  retryInMs?: number;
}

export interface RunnerStats {
  syncs: number;
  failures: number;
  consecutiveFailures: number;
  last?: SyncRecord;
  lastSuccessAt?: number;
}

export class SyncRunner {
  private readonly clock: Clock;
  private readonly retryInitial: number;
  private readonly retryMax: number;
  private timer: unknown;
  private timerAt = Infinity;
  private timerTrigger: SyncTrigger = 'request';
  private inFlight: Promise<void> | undefined;
  private pendingRequests = 0;
  private lastStart = -Infinity;
  /** When the last full sync started (fullSync of its trigger). */
  private lastFullStart = -Infinity;
  private stopped = true;
  private readonly listeners: Array<(r: SyncRecord) => void> = [];
  readonly stats: RunnerStats = { syncs: 0, failures: 0, consecutiveFailures: 0 };

  constructor(
    private readonly sync: (trigger: SyncTrigger) => Promise<void>,
    private readonly opts: RunnerOptions,
  ) {
    if (!(opts.minIntervalMs >= 0) || !(opts.maxIntervalMs > 0) || opts.maxIntervalMs < opts.minIntervalMs)
      throw new RangeError('SyncRunner: need 0 <= minIntervalMs <= maxIntervalMs, maxIntervalMs > 0');
    this.clock = opts.clock ?? systemClock;
    this.retryInitial = opts.retryInitialMs ?? 1000;
    this.retryMax = opts.retryMaxMs ?? opts.maxIntervalMs;
  }

  /** Starts with an immediate sync. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.arm(0, 'initial');
  }

  /** Asks for a sync; bursts coalesce. */
  request(): void {
    if (this.stopped) return;
    this.pendingRequests++;
    if (this.inFlight) return; // scheduled when the running sync finishes
    this.arm(Math.max(0, this.lastStart + this.opts.minIntervalMs - this.clock.now()), 'request');
  }

  /** Stops scheduling; resolves when a sync in flight has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.disarm();
    await this.inFlight;
  }

  onSync(fn: (r: SyncRecord) => void): void {
    this.listeners.push(fn);
  }

  /** Sets the timer unless one is already due sooner. */
  private arm(delay: number, trigger: SyncTrigger): void {
    const at = this.clock.now() + delay;
    if (this.timer !== undefined && this.timerAt <= at) return;
    this.disarm();
    this.timerAt = at;
    this.timerTrigger = trigger;
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      void this.run(trigger);
    }, delay);
  }

  private disarm(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  private async run(trigger: SyncTrigger): Promise<void> {
    if (this.stopped || this.inFlight) return;
    if (!fullSync(trigger) && this.clock.now() - this.lastFullStart >= (this.opts.fullSyncPeriodMs ?? FULL_SYNC_PERIOD_MS)) trigger = 'periodic';
    const coalesced = this.pendingRequests;
    this.pendingRequests = 0;
    const startedAt = this.clock.now();
    this.lastStart = startedAt;
    if (fullSync(trigger)) this.lastFullStart = startedAt;
    let error: unknown;
    let failed = false;
    const p = (async () => {
      try {
        await this.sync(trigger);
      } catch (e) {
        failed = true;
        error = e;
      }
    })();
    this.inFlight = p;
    await p;
    this.inFlight = undefined;
    const rec: SyncRecord = { trigger, startedAt, durationMs: this.clock.now() - startedAt, coalesced };
    this.stats.syncs++;
    if (failed) {
      rec.error = error;
      this.stats.failures++;
      this.stats.consecutiveFailures++;
      if (!this.stopped) rec.retryInMs = Math.min(this.retryInitial * 2 ** (this.stats.consecutiveFailures - 1), this.retryMax);
    } else {
      this.stats.consecutiveFailures = 0;
      this.stats.lastSuccessAt = startedAt;
    }
    this.stats.last = rec;
    for (const l of this.listeners) l(rec);
    if (this.stopped) return;
    if (rec.retryInMs !== undefined) this.arm(rec.retryInMs, 'retry');
    if (this.pendingRequests > 0)
      this.arm(Math.max(0, this.lastStart + this.opts.minIntervalMs - this.clock.now()), 'request');
    this.arm(Math.max(0, this.lastStart + this.opts.maxIntervalMs - this.clock.now()), 'periodic');
  }

  /** For tests and metrics: when the next sync is due and why. */
  nextDue(): { at: number; trigger: SyncTrigger } | undefined {
    return this.timer === undefined ? undefined : { at: this.timerAt, trigger: this.timerTrigger };
  }
}
