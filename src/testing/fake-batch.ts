// What the in-memory doubles share: the kernel's errors by name, and a batch's per-op outcome.
import { NetlinkError } from '../errors.js';
import { ApplyResult, type BatchOptions } from '../kernel/batch.js';

const ERRNO: Record<string, number> = { EEXIST: 17, ENOENT: 2, ENODEV: 19, EBUSY: 16, EINVAL: 22, ESRCH: 3, ENETUNREACH: 101 };

export function err(code: string, op: string, index: number): NetlinkError {
  return new NetlinkError({ message: `${op}: ${code}`, code, errno: ERRNO[code] ?? 4100, kind: 'kernel', op, index });
}

/** Runs ops one by one with the kernel's per-op outcome; continues or stops like the real batch. */
export function runBatch<Op>(ops: Op[], opts: BatchOptions, one: (op: Op, index: number) => string | undefined, name: (op: Op) => string): ApplyResult {
  const statuses = new Uint8Array(ops.length);
  const errors: NetlinkError[] = [];
  for (let i = 0; i < ops.length; i++) {
    const code = one(ops[i]!, i);
    if (code) {
      statuses[i] = 2;
      errors.push(err(code, name(ops[i]!), i));
      if (opts.stopOnError ?? true) break;
    } else statuses[i] = 1;
  }
  return new ApplyResult({ statuses, errors, sendmsgCalls: ops.length ? 1 : 0 });
}
