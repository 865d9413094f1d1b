import { NetlinkError } from '../errors.js';
import type { NativeBatchOutcome, SocketStats } from '../native.js';

export type OpStatus = 'ok' | 'error' | 'not-sent' | 'unknown';
const STATUS: readonly OpStatus[] = ['not-sent', 'ok', 'error', 'unknown'];

export interface BatchOptions {
  /** Stop at the first failed op (default true): nothing after it reaches the kernel, and every
   *  later op is 'not-sent'. The kernel runs every message of a sendmsg whatever the earlier ones
   *  answered, so this sends one request at a time and reads its answer before the next; false
   *  pipelines many requests per sendmsg and applies every op it can. One ipset add/del of many
   *  members is one op over few messages: the kernel stops inside a message at its failing
   *  member (the error's `member`), those before it applied. */
  stopOnError?: boolean;
  /** Upper bound on requests per sendmsg when `stopOnError` is false (the socket's buffer may
   *  lower it further); with `stopOnError` every request goes alone. */
  maxBatchMessages?: number;
}

/** Dumps redone when the kernel says its object set changed during one (NLM_F_DUMP_INTR). */
export const DUMP_ATTEMPTS = 5;

/**
 * A dump, redone while the kernel reports it interrupted (NLM_F_DUMP_INTR: the objects changed
 * while it ran, so the listing may miss or repeat some): what every listing of the handles
 * does, so a caller never sees a half-consistent table. After DUMP_ATTEMPTS the error stands.
 */
export async function redoInterrupted<T>(dump: () => Promise<T>, attempts = DUMP_ATTEMPTS): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await dump();
    } catch (e) {
      if (i >= attempts || !(e instanceof NetlinkError) || e.kind !== 'dump-interrupted') throw e;
    }
  }
}

/**
 * The ops argument of a batch call, checked before anything is read from it: not an array, or
 * an element that is not an object, is refused with a NetlinkError of kind 'invalid' (naming
 * the op's `index`). A call that returns a promise rejects with it.
 */
export function checkOpList(ops: unknown, what: string): asserts ops is object[] {
  if (!Array.isArray(ops)) throw NetlinkError.invalid(what, 'expected an array of ops');
  for (let i = 0; i < ops.length; i++) {
    const o: unknown = ops[i];
    if (o === null || typeof o !== 'object') throw NetlinkError.invalid(`op ${i}`, `must be an object (got ${o === null ? 'null' : typeof o})`, { index: i });
  }
}

/** Per-op outcomes as the addon reports them: a status byte per op (decoded through `names`)
 *  and a NetlinkError (with `.index`) for each failed op. Shared by every batch result. */
export abstract class OpStatuses<S extends string> {
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

  /** True when everything was applied. */
  abstract get ok(): boolean;

  /** This result when `ok`; otherwise throws its first error (one of kind 'nobufs' when ops
   *  got no answer and none failed). For callers that want a kernel rejection as an exception:
   *  `(await h.apply(ops)).orThrow()`. */
  orThrow(): this {
    if (this.ok) return this;
    throw this.errors[0] ?? new NetlinkError({ message: 'apply: some ops got no reply; their outcome is unknown', code: 'ENOBUFS', errno: 105, kind: 'nobufs', op: 'apply' });
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

/** A kernel façade over one addon handle, which owns its netlink socket(s) (per namespace). */
export abstract class HandleFacade<H extends { close(): Promise<void>; stats(): S }, S = SocketStats> {
  protected constructor(protected readonly h: H) {}

  /** Closes the handle's socket(s) once the calls made before it are done; every later call
   *  rejects with a NetlinkError of kind 'invalid', code 'EBADF'. */
  close(): Promise<void> {
    return this.h.close();
  }

  /** Counters of this handle's socket(s): how many syscalls and messages it has cost. */
  socketStats(): S {
    return this.h.stats();
  }
}
