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

/** The outcome of a batch: one status per op, a NetlinkError (with `.index`) per failed op. */
export class ApplyResult {
  readonly errors: NetlinkError[];
  readonly sendmsgCalls: number;
  readonly size: number;
  private readonly statuses: Uint8Array;

  constructor(raw: NativeBatchOutcome) {
    this.statuses = raw.statuses;
    this.errors = raw.errors;
    this.sendmsgCalls = raw.sendmsgCalls;
    this.size = raw.statuses.length;
  }

  /** True when every op was applied. */
  get ok(): boolean {
    return this.count('ok') === this.size;
  }

  status(i: number): OpStatus {
    const s = this.statuses[i];
    if (s === undefined) throw new RangeError(`no op ${i}`);
    return STATUS[s]!;
  }

  count(s: OpStatus): number {
    const code = STATUS.indexOf(s);
    let n = 0;
    for (const x of this.statuses) if (x === code) n++;
    return n;
  }

  /** The error of op i, if it failed. */
  errorOf(i: number): NetlinkError | undefined {
    return this.errors.find((e) => e.index === i);
  }
}
