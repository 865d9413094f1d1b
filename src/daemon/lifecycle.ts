// Start and stop: a preflight that refuses to start without what the proxy needs (CAP_NET_ADMIN,
// the data plane) and says what is missing; ordered shutdown on SIGTERM/SIGINT/SIGHUP, from the first line
// of startup on, that stops the sources, the runner and the servers but leaves the data plane
// programmed (traffic keeps flowing while the proxy restarts; `ipvsync cleanup` is the way to
// remove it).
import { readFile } from 'node:fs/promises';
import { NetlinkError } from '../errors.js';
import type { Logger } from './log.js';

/** Linux capability numbers (include/uapi/linux/capability.h). */
export const CAP_NET_ADMIN = 12;

/** Whether the CapEff line of /proc/<pid>/status has capability `cap`. */
export function hasCapability(procStatus: string, cap: number): boolean {
  const m = /^CapEff:\s*([0-9a-fA-F]+)\s*$/m.exec(procStatus);
  if (!m) throw new Error('no CapEff line in /proc/self/status');
  return ((BigInt(`0x${m[1]}`) >> BigInt(cap)) & 1n) === 1n;
}

export interface PreflightChecks {
  /** Resolves true when the process has CAP_NET_ADMIN. */
  capNetAdmin(): Promise<boolean>;
  /** The data plane the proxy programs: 'IPVS' (default) or 'nftables'. */
  plane?: 'IPVS' | 'nftables';
  /** Resolves when the data plane answers (e.g. by opening an Ipvs or Nftables handle);
   *  rejects otherwise. */
  dataPlane(): Promise<void>;
}

export class PreflightError extends Error {
  override readonly name = 'PreflightError';
  /** The process's exit status: 3 when what is missing is the kernel's data plane (the
   *  README's "missing kernel feature"), else 1. */
  readonly exitCode: number;
  constructor(
    readonly problems: string[],
    missingFeature = false,
  ) {
    super(`cannot start:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.exitCode = missingFeature ? 3 : 1;
  }
}

/** The real checks: /proc/self/status and the data plane's handle opened through `open`
 *  (IPVS: a GET_INFO; nftables: a GETGEN). */
export function systemChecks(open: () => Promise<unknown>, plane: 'IPVS' | 'nftables' = 'IPVS'): PreflightChecks {
  return {
    capNetAdmin: async () => hasCapability(await readFile('/proc/self/status', 'utf8'), CAP_NET_ADMIN),
    plane,
    dataPlane: async () => {
      await open();
    },
  };
}

/**
 * Runs every check and throws one PreflightError listing all problems. Without CAP_NET_ADMIN
 * the data plane's check is not run (it would fail with EPERM and say nothing new).
 */
export async function preflight(checks: PreflightChecks): Promise<void> {
  const problems: string[] = [];
  let cap: boolean;
  try {
    cap = await checks.capNetAdmin();
  } catch (e) {
    problems.push(`cannot read the process capabilities: ${(e as Error).message}`);
    cap = false;
  }
  if (!cap && problems.length === 0)
    problems.push('missing CAP_NET_ADMIN: run as root or grant the capability (in Kubernetes: a privileged container, or securityContext.capabilities.add: [NET_ADMIN])');
  let missing = false;
  if (cap) {
    try {
      await checks.dataPlane();
    } catch (e) {
      missing = e instanceof NetlinkError && e.kind === 'unsupported';
      problems.push(dataPlaneProblem(e, checks.plane ?? 'IPVS'));
    }
  }
  if (problems.length) throw new PreflightError(problems, missing);
}

const MISSING = {
  IPVS: 'load the ip_vs module on the node (modprobe ip_vs; in a container mount /lib/modules read-only so the kernel can autoload it) or use a kernel built with CONFIG_IP_VS; or run the nftables data plane, which needs no IPVS: --proxy-mode nftables',
  nftables: 'use a kernel with nf_tables and its NAT (CONFIG_NF_TABLES, CONFIG_NFT_NAT), or load nf_tables on the node',
};

function dataPlaneProblem(e: unknown, plane: 'IPVS' | 'nftables'): string {
  if (e instanceof NetlinkError) {
    if (e.kind === 'unsupported') return `${plane} is not available in this kernel (${e.message}): ${MISSING[plane]}`;
    if (e.code === 'EPERM' || e.code === 'EACCES') return `${plane} refused access (${e.code}): CAP_NET_ADMIN is needed in the network namespace that owns the proxy's network`;
    return `${plane} check failed: ${e.message} (${e.code}, ${e.kind})`;
  }
  return `${plane} check failed: ${(e as Error)?.message ?? String(e)}`;
}

export interface StopStep {
  name: string;
  ok: boolean;
  error?: unknown;
  timedOut?: boolean;
}

export interface StopReport {
  reason: string;
  steps: StopStep[];
}

/**
 * How the process ends after a stop: `undefined` — return normally (the daemon had started and
 * every step ended); otherwise exit now with this code. A step that timed out may still be
 * working (a sync thread mid-write): only the process's exit ends it, so nothing is written
 * after "stopped". A stop during startup exits too: the startup's pending wait never ends.
 */
export function exitAfterStop(r: StopReport, started: boolean): number | undefined {
  if (r.steps.some((s) => s.timedOut)) return 1;
  return started ? undefined : 0;
}

/** Minimal process surface, so tests can send signals to a stand-in. */
export interface SignalSource {
  on(signal: NodeJS.Signals, fn: () => void): unknown;
  off(signal: NodeJS.Signals, fn: () => void): unknown;
}

/** The signals that end the daemon. SIGHUP too: kube-proxy installs no handler for it, so Go's
 *  default kills it; here it stops in order and says so, like the others. */
export const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];

/**
 * Ordered shutdown: steps run in reverse registration order (what started last stops first),
 * one at a time, each bounded by `stepTimeoutMs`; a failing step is reported and the rest still
 * run. stop() is idempotent: every caller gets the same report.
 *
 * A stop can come in the middle of startup: a step registered while stopping is run by the
 * same stop, one registered after it is run at once, so what started late is stopped too; and
 * until() lets startup drop a wait that the stop has made pointless.
 */
export class Lifecycle {
  private readonly steps: Array<{ name: string; fn: () => Promise<void> | void }> = [];
  private stopping: Promise<StopReport> | undefined;
  private report: StopReport | undefined;

  constructor(private readonly opts: { log?: Logger; stepTimeoutMs?: number } = {}) {}

  onStop(name: string, fn: () => Promise<void> | void): void {
    this.steps.push({ name, fn });
    // Registered after the stop ran its last step: nothing else would run it.
    if (this.report) void this.runSteps(this.report);
  }

  get isStopping(): boolean {
    return this.stopping !== undefined;
  }

  stop(reason: string): Promise<StopReport> {
    this.stopping ??= this.run(reason);
    return this.stopping;
  }

  /**
   * `p`'s outcome, unless a stop begins first: then a promise that never settles (and `p`'s
   * later outcome, rejection included, is dropped), so the code awaiting it goes no further.
   */
  until<T>(p: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      p.then(
        (v) => this.isStopping || resolve(v),
        (e: unknown) => this.isStopping || reject(e),
      );
    });
  }

  private async run(reason: string): Promise<StopReport> {
    const log = this.opts.log;
    log?.info('stopping; the data plane stays programmed', { reason });
    const report: StopReport = { reason, steps: [] };
    await this.runSteps(report);
    this.report = report;
    log?.info('stopped', { reason, failed: report.steps.filter((s) => !s.ok).map((s) => s.name) });
    return report;
  }

  /** Pops and runs steps until none is left (the last registered first). */
  private async runSteps(report: StopReport): Promise<void> {
    const log = this.opts.log;
    const timeout = this.opts.stepTimeoutMs ?? 10_000;
    for (let s = this.steps.pop(); s; s = this.steps.pop()) {
      let timer: NodeJS.Timeout | undefined;
      try {
        const timedOut = await Promise.race([
          Promise.resolve().then(s.fn).then(() => false),
          new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), timeout))),
        ]);
        report.steps.push(timedOut ? { name: s.name, ok: false, timedOut: true } : { name: s.name, ok: true });
        if (timedOut) log?.warn('stop step timed out', { step: s.name, timeoutMs: timeout });
      } catch (error) {
        report.steps.push({ name: s.name, ok: false, error });
        log?.error('stop step failed', { step: s.name, error });
      } finally {
        clearTimeout(timer);
      }
    }
  }

  /**
   * STOP_SIGNALS → stop(); `onStopped` gets the report (the caller exits). A second signal
   * while stopping calls `onForce` (exit at once). Returns a function that removes the handlers.
   * Install it before anything starts: until then a signal kills the process without a word.
   */
  handleSignals(opts: {
    source?: SignalSource;
    signals?: readonly NodeJS.Signals[];
    onStopped: (r: StopReport) => void;
    onForce?: (signal: NodeJS.Signals) => void;
    /** Called once the handlers are in place: a signal caught before them (by the command
     *  line's early-signals.ts), handled now as if it had come just then. */
    caughtBefore?: () => NodeJS.Signals | undefined;
  }): () => void {
    const source = opts.source ?? process;
    const signals = opts.signals ?? STOP_SIGNALS;
    const handlers = signals.map((sig) => {
      const fn = () => {
        if (this.isStopping) {
          this.opts.log?.warn('second signal while stopping: exiting now', { signal: sig });
          opts.onForce?.(sig);
          return;
        }
        void this.stop(sig).then(opts.onStopped);
      };
      source.on(sig, fn);
      return [sig, fn] as const;
    });
    const early = opts.caughtBefore?.();
    if (early) handlers.find(([sig]) => sig === early)?.[1]();
    return () => {
      for (const [sig, fn] of handlers) source.off(sig, fn);
    };
  }
}
