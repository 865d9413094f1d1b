// One kind's writes sent to the kernel as batches, every batch continuing past failures: one bad
// object must not hold back the rest, and the next sync retries what failed (the diff starts
// from what the kernel has).
import { NetlinkError } from '../errors.js';

/** One kind's writes in a sync report. */
export interface KindReport {
  /** Writes that succeeded, by op name. */
  ops: Record<string, number>;
  writes: number;
  errors: NetlinkError[];
}

export function emptyReport(): KindReport {
  return { ops: {}, writes: 0, errors: [] };
}

/** An error of a batch that was one chunk of a longer op list, with its index in the list. */
function reindexed(e: NetlinkError, at: number): NetlinkError {
  if (at === 0 || e.index === undefined) return e;
  // its own fields (message is not enumerable on an Error)
  return new NetlinkError({ ...e, message: e.message, index: e.index + at });
}

/**
 * Sends ops[from, to) through `run` in chunks (default: one), counting the writes that
 * succeeded into `r`; errors and the returned predicate index the whole ops list. `ahead`: the
 * next chunk is handed to `run` while this one is in the kernel (its conversion on this thread
 * overlaps the kernel's work on the worker); `run` must send chunks in call order where their
 * order matters, as Ipvs.apply does. A chunk's exception still ends the loop, the chunk after it
 * possibly sent: the next sync diffs from the kernel.
 */
export async function applyBatch<Op extends { op: string }>(
  r: KindReport,
  ops: Op[],
  run: (ops: Op[]) => Promise<{ status(i: number): string; errors: NetlinkError[] }>,
  { chunk = ops.length, from = 0, to = ops.length, ahead = false }: { chunk?: number; from?: number; to?: number; ahead?: boolean } = {},
): Promise<((i: number) => boolean) | undefined> {
  if (from >= to) return undefined;
  const ok = new Uint8Array(ops.length);
  const slice = (at: number): Op[] => (at === 0 && to === ops.length && chunk >= ops.length ? ops : ops.slice(at, Math.min(at + chunk, to)));
  let part = slice(from);
  let sent = run(part);
  for (let at = from; at < to; at += chunk) {
    const nextPart = at + chunk < to ? slice(at + chunk) : undefined;
    let next: typeof sent | undefined;
    if (ahead && nextPart) {
      next = run(nextPart);
      // awaited below, or dropped when this chunk throws: never an unhandled rejection
      next.catch(() => undefined);
    }
    const res = await sent;
    for (const e of res.errors) r.errors.push(reindexed(e, at));
    for (let i = 0; i < part.length; i++) {
      if (res.status(i) !== 'ok') continue;
      ok[at + i] = 1;
      const o = part[i]!;
      r.ops[o.op] = (r.ops[o.op] ?? 0) + 1;
      r.writes++;
    }
    if (nextPart) {
      part = nextPart;
      sent = next ?? run(nextPart);
    }
  }
  return (i) => ok[i] === 1;
}
