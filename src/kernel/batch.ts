import type { NetlinkError } from '../errors.js';
import type { NativeBatchOutcome } from '../native.js';

export type OpStatus = 'ok' | 'error' | 'not-sent' | 'unknown';
const STATUS: readonly OpStatus[] = ['not-sent', 'ok', 'error', 'unknown'];

export interface BatchOptions {
  /** Stop sending after the first failed request (default true). Requests already handed to
   *  the kernel in the same sendmsg are still processed, and reported as they came out. */
  stopOnError?: boolean;
  /** Upper bound on requests per sendmsg (the socket's buffer may lower it further). */
  maxBatchMessages?: number;
}

/** Per-op outcomes as the addon reports them: a status byte per op (decoded through `names`)
 *  and a NetlinkError (with `.index`) for each failed op. Shared by every batch result. */
export class OpStatuses<S extends string> {
  readonly errors: NetlinkError[];
  readonly sendmsgCalls: number;
  readonly size: number;

  constructor(
    private readonly statuses: Uint8Array,
    errors: NetlinkError[],
    sendmsgCalls: number,
    private readonly names: readonly S[],
  ) {
    this.errors = errors;
    this.sendmsgCalls = sendmsgCalls;
    this.size = statuses.length;
  }

  status(i: number): S {
    const s = this.statuses[i];
    if (s === undefined) throw new RangeError(`no op ${i}`);
    return this.names[s]!;
  }

  count(s: S): number {
    const code = this.names.indexOf(s);
    let n = 0;
    for (const x of this.statuses) if (x === code) n++;
    return n;
  }

  /** The error of op i, if it failed. */
  errorOf(i: number): NetlinkError | undefined {
    return this.errors.find((e) => e.index === i);
  }
}

/** The outcome of a batch: one status per op, a NetlinkError (with `.index`) per failed op. */
export class ApplyResult extends OpStatuses<OpStatus> {
  constructor(raw: NativeBatchOutcome) {
    super(raw.statuses, raw.errors, raw.sendmsgCalls, STATUS);
  }

  /** True when every op was applied. */
  get ok(): boolean {
    return this.count('ok') === this.size;
  }
}
