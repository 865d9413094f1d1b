// What the daemon logs of its syncs beyond the `sync` summary line. A failed sync (it threw, or
// it completed with writes the kernel refused) is one `sync failed` error line: the trigger,
// the error with its own fields (a NetlinkError's code, op, index, extack), the object the
// failing write was for when the error names one, what was left unprogrammed and when the runner
// retries. A failure that is only counted in a metric leaves an operator with a 503 from
// /healthz a minute later and nothing to read. The translation's warnings (a Service skipped, a
// bad value ignored) and the objects the engine refused are logged once when they appear, not
// at every resync.
import type { InvalidObject, KindReport, SyncReport } from '../engine/engine.js';
import { REPORT_KINDS } from '../engine/types.js';
import type { SyncRecord } from './runner.js';
import { NetlinkError } from '../errors.js';
import type { ManifestWarning } from '../kube/manifests.js';
import type { ModelWarning } from '../kube/types.js';
import { toLogValue, type Fields, type Logger } from './log.js';

/** The per-op errors logged after a `sync failed` line, at most (the rest are counted). */
export const MAX_OP_ERROR_LINES = 10;
/** New warnings logged per sync, at most (the rest are counted). */
export const MAX_WARNING_LINES = 20;

/** A sync that completed with per-op errors: what the daemon's sync throws, so that its runner
 *  counts the failure and retries. The report stays with it for the log. */
export class SyncOpsError extends Error {
  override readonly name = 'SyncOpsError';
  constructor(readonly report: SyncReport) {
    super(`${report.errors.length} write(s) failed, the first: ${report.errors[0]?.message ?? '(none)'}`);
  }
}

/** The object a failed write was for, as the error's op names it ("IPVS_CMD_NEW_DEST TCP
 *  10.96.0.10:80 -> 10.244.1.2:8080": the command, then its object); undefined when it names
 *  none. */
export function errorObject(e: unknown): string | undefined {
  if (!(e instanceof NetlinkError)) return undefined;
  const at = e.op.indexOf(' ');
  return at > 0 ? e.op.slice(at + 1) : undefined;
}

/** An error for a log line: its own fields (toLogValue), and the stack of one that is not a
 *  NetlinkError (a bug: where it was thrown is what there is to read). */
function errorFields(e: unknown): unknown {
  if (e instanceof Error && !(e instanceof NetlinkError) && e.stack) return { ...(toLogValue(e) as Fields), stack: e.stack };
  return e;
}

function count(kinds: Record<string, number>): string {
  return Object.entries(kinds).map(([k, n]) => `${k} ${n}`).join(', ');
}

/** What a completed sync with errors left unprogrammed. */
function unprogrammedOf(r: SyncReport): Fields {
  const failed: Record<string, number> = {};
  const applied: Record<string, number> = {};
  let perKind = 0;
  for (const k of REPORT_KINDS) {
    const kr: KindReport = r[k];
    if (kr.errors.length) failed[k] = kr.errors.length;
    if (kr.writes) applied[k] = kr.writes;
    perKind += kr.errors.length;
  }
  // what the engine reports beside its kinds: stale flows it could not flush
  if (r.errors.length > perKind) failed.conntrack = r.errors.length - perKind;
  const text =
    `the failed writes (${count(failed)})` +
    (failed.nft ? '; an nftables transaction with an error commits none of its writes' : '') +
    `; ${Object.keys(applied).length ? `applied: ${count(applied)}` : 'nothing else applied'}`;
  return { unprogrammed: text, failedWrites: failed, appliedWrites: applied };
}

/** Logs the runner's failed syncs: one `sync failed` line each, then their per-op errors
 *  (bounded). Attach with `runner.onSync(logSyncFailure(log))`. */
export function logSyncFailure(log: Logger): (rec: SyncRecord) => void {
  return (rec) => {
    if (rec.error === undefined) return;
    const retry = rec.retryInMs === undefined ? { retry: 'none (stopping)' } : { retryInMs: rec.retryInMs };
    if (rec.error instanceof SyncOpsError) {
      const r = rec.error.report;
      const [first, ...rest] = r.errors;
      const object = errorObject(first);
      const listed = rest.slice(0, MAX_OP_ERROR_LINES - 1);
      log.error('sync failed', {
        trigger: rec.trigger,
        mode: r.mode,
        error: first,
        ...(object !== undefined ? { object } : {}),
        errors: r.errors.length,
        ...(rest.length > listed.length ? { errorsNotLogged: rest.length - listed.length } : {}),
        ...unprogrammedOf(r),
        ...retry,
      });
      for (const e of listed) {
        const o = errorObject(e);
        log.error('sync op failed', { error: e, ...(o !== undefined ? { object: o } : {}) });
      }
      return;
    }
    const object = errorObject(rec.error);
    log.error('sync failed', {
      trigger: rec.trigger,
      error: errorFields(rec.error),
      ...(object !== undefined ? { object } : {}),
      // Thrown: the sync stopped there. Nothing is written while planning; while applying, the
      // writes before the error may have gone in. The next sync reads the kernel again.
      unprogrammed: 'everything the sync had not written when it stopped at this error',
      ...retry,
    });
  };
}

/**
 * The translation's warnings and the engine's refused objects, each distinct one logged once
 * when it first appears (not again at every resync while it stays), and again if it goes and
 * comes back. At most MAX_WARNING_LINES new ones a sync; the rest counted in one line.
 */
export class NoticeLog {
  private seen = new Set<string>();
  private seenManifests = new Set<string>();

  constructor(private readonly log: Logger) {}

  /** After a sync that translated (completed, with or without failed writes). */
  update(warnings: readonly ModelWarning[], invalid: readonly InvalidObject[]): void {
    this.seen = this.logNew(this.seen, [
      ...warnings.map((w) => ({ key: `w\0${w.service}\0${w.message}`, msg: 'translation warning', fields: { service: w.service, message: w.message } })),
      ...invalid.map((i) => ({ key: `i\0${i.kind}\0${i.object}\0${i.field}\0${i.message}`, msg: 'object refused', fields: { kind: i.kind, object: i.object, field: i.field, message: i.message } })),
    ]);
  }

  /** After a manifests folder was read: the objects skipped for their shape. */
  manifests(warnings: readonly ManifestWarning[]): void {
    this.seenManifests = this.logNew(
      this.seenManifests,
      warnings.map((w) => ({ key: `${w.source}\0${w.message}`, msg: 'manifest object skipped', fields: { source: w.source, message: w.message } })),
    );
  }

  /** Logs the notices not in `seen` (bounded); returns the set of these notices. */
  private logNew(seen: ReadonlySet<string>, notices: ReadonlyArray<{ key: string; msg: string; fields: Fields }>): Set<string> {
    const now = new Set<string>();
    let logged = 0;
    let unlogged = 0;
    for (const n of notices) {
      if (now.has(n.key)) continue;
      now.add(n.key);
      if (seen.has(n.key)) continue;
      if (logged < MAX_WARNING_LINES) logged++, this.log.warn(n.msg, n.fields);
      else unlogged++;
    }
    if (unlogged) this.log.warn('more new warnings not logged', { count: unlogged, logged });
    return now;
  }
}
