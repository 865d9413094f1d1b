// The daemon's sync log: a failed sync (thrown, or completed with writes the kernel refused) is
// exactly one `sync failed` line naming the trigger, the error's own fields, the object, what was
// left unprogrammed and the retry; retries are logged too; an error thrown on the sync thread
// keeps its fields across the thread boundary; translation warnings and refused objects are
// logged once when they appear, not at every resync.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import type { InvalidObject, SyncReport } from '../../src/engine/engine.js';
import { SyncRunner, type SyncTrigger } from '../../src/daemon/runner.js';
import { NetlinkError } from '../../src/errors.js';
import { createLogger } from '../../src/daemon/log.js';
import { MAX_OP_ERROR_LINES, MAX_WARNING_LINES, NoticeLog, SyncOpsError, errorObject, logSyncFailure } from '../../src/daemon/sync-log.js';
import { fromWireError, toWireError } from '../../src/proxy/sync-thread.js';
import { FakeClock } from '../helpers/fake-clock.js';

type Line = Record<string, unknown> & { msg: string; level: string };

function logger() {
  const lines: Line[] = [];
  const log = createLogger({ format: 'json', write: (l) => lines.push(JSON.parse(l) as Line), now: () => 0 });
  return { log, lines, named: (msg: string) => lines.filter((l) => l.msg === msg) };
}

/** A runner whose sync does what `next` says, its failures logged as the daemon logs them. */
function daemon(next: (trigger: SyncTrigger) => Promise<void>) {
  const clock = new FakeClock();
  const { log, lines, named } = logger();
  const runner = new SyncRunner(next, { minIntervalMs: 1000, maxIntervalMs: 30_000, retryInitialMs: 500, retryMaxMs: 4000, clock });
  runner.onSync(logSyncFailure(log));
  return { clock, runner, lines, named };
}

const refused = () =>
  new NetlinkError({
    message: 'RTM_NEWADDR fd00::10/128 dev kube-ipvs0: EACCES (Permission denied): IPv6 is disabled on this device',
    code: 'EACCES',
    errno: 13,
    kind: 'kernel',
    op: 'RTM_NEWADDR fd00::10/128 dev kube-ipvs0',
    extack: 'IPv6 is disabled on this device',
    index: 2,
  });

function report(errors: { ipvs?: NetlinkError[]; nft?: NetlinkError[]; addresses?: NetlinkError[] }, writes: { ipvs?: number; nft?: number; addresses?: number } = {}): SyncReport {
  const kind = (k: 'ipvs' | 'nft' | 'addresses') => ({ ops: {}, writes: writes[k] ?? 0, errors: errors[k] ?? [] });
  const empty = { ops: {}, writes: 0, errors: [] };
  const r: SyncReport = {
    mode: 'full',
    ipvs: kind('ipvs'),
    addresses: kind('addresses'),
    routes: empty,
    ipsets: empty,
    nft: kind('nft'),
    flowsFlushed: 0,
    draining: 0,
    errors: [],
    invalid: [],
    durations: { observeMs: 0, diffMs: 0, applyMs: 0, totalMs: 0 },
  };
  r.errors = [...r.addresses.errors, ...r.nft.errors, ...r.ipvs.errors];
  return r;
}

test('a sync that throws is one `sync failed` line: trigger, the error with code, op, index and extack, the object, what is unprogrammed, the retry; each retry is logged too', async () => {
  let fail = 2;
  const { clock, runner, named, lines } = daemon(async () => {
    if (fail-- > 0) throw refused();
  });
  runner.start();
  await clock.advance(0);
  assert.equal(named('sync failed').length, 1, JSON.stringify(lines));
  const first = named('sync failed')[0]!;
  assert.equal(first.level, 'error');
  assert.equal(first.trigger, 'initial');
  assert.deepEqual(first.error, {
    name: 'NetlinkError',
    message: 'RTM_NEWADDR fd00::10/128 dev kube-ipvs0: EACCES (Permission denied): IPv6 is disabled on this device',
    code: 'EACCES',
    errno: 13,
    kind: 'kernel',
    op: 'RTM_NEWADDR fd00::10/128 dev kube-ipvs0',
    extack: 'IPv6 is disabled on this device',
    index: 2,
  });
  assert.equal(first.object, 'fd00::10/128 dev kube-ipvs0');
  assert.match(String(first.unprogrammed), /had not written/);
  assert.equal(first.retryInMs, 500);

  // the retry fails too: its own line, the delay doubled; then it succeeds: nothing more
  await clock.advance(500);
  assert.deepEqual(
    named('sync failed').map((l) => [l.trigger, l.retryInMs]),
    [
      ['initial', 500],
      ['retry', 1000],
    ],
  );
  await clock.advance(1000);
  assert.equal(runner.stats.consecutiveFailures, 0);
  assert.equal(named('sync failed').length, 2);
  assert.equal(lines.length, 2, 'nothing but the two failures');
});

test('a sync that completes with refused writes is one `sync failed` line (its first error, how many, what failed and what applied, by kind), then its other errors, bounded', async () => {
  const ipvsErrors = Array.from({ length: 14 }, (_, i) =>
    new NetlinkError({ message: `IPVS_CMD_NEW_DEST tcp 10.96.0.10:80 -> 10.244.1.${i}:8080: ENOMEM`, code: 'ENOMEM', errno: 12, kind: 'kernel', op: `IPVS_CMD_NEW_DEST tcp 10.96.0.10:80 -> 10.244.1.${i}:8080`, index: i }),
  );
  const nftError = new NetlinkError({ message: 'NFT_MSG_NEWSETELEM ip ipvsync svc: EINVAL', code: 'EINVAL', errno: 22, kind: 'kernel', op: 'NFT_MSG_NEWSETELEM ip ipvsync svc', index: 7, extack: 'bad key' });
  const r = report({ ipvs: ipvsErrors, nft: [nftError], addresses: [refused()] }, { ipvs: 40, addresses: 3 });
  let once = true;
  const { clock, runner, named } = daemon(async () => {
    if (once) {
      once = false;
      throw new SyncOpsError(r);
    }
  });
  runner.start();
  await clock.advance(0);
  const failed = named('sync failed');
  assert.equal(failed.length, 1);
  const l = failed[0]!;
  assert.equal(l.trigger, 'initial');
  assert.equal(l.mode, 'full');
  assert.equal((l.error as { code: string }).code, 'EACCES', 'the first error of the report');
  assert.equal((l.error as { extack: string }).extack, 'IPv6 is disabled on this device');
  assert.equal(l.object, 'fd00::10/128 dev kube-ipvs0');
  assert.equal(l.errors, 16);
  assert.equal(l.errorsNotLogged, 16 - MAX_OP_ERROR_LINES);
  assert.deepEqual(l.failedWrites, { addresses: 1, nft: 1, ipvs: 14 });
  assert.deepEqual(l.appliedWrites, { addresses: 3, ipvs: 40 });
  assert.match(String(l.unprogrammed), /addresses 1, nft 1, ipvs 14/);
  assert.match(String(l.unprogrammed), /nftables transaction with an error commits none of its writes/);
  assert.equal(l.retryInMs, 500);
  assert.ok(!('report' in (l.error as object)), 'the report is not dumped into the line');
  const ops = named('sync op failed');
  assert.equal(ops.length, MAX_OP_ERROR_LINES - 1, 'the first error is on the `sync failed` line');
  assert.deepEqual(ops[0]!.object, 'ip ipvsync svc');
  assert.equal((ops[0]!.error as { index: number }).index, 7);
  assert.equal(ops[1]!.object, 'tcp 10.96.0.10:80 -> 10.244.1.0:8080');
});

test('a sync that throws something other than a NetlinkError (a bug) logs its stack and own fields; a sync stopped meanwhile names no retry', async () => {
  const { clock, runner, named } = daemon(async () => {
    await runner.stop();
    throw Object.assign(new TypeError("Cannot read properties of undefined (reading 'port')"), { detail: 'x' });
  });
  runner.start();
  await clock.advance(0);
  const l = named('sync failed')[0]!;
  const e = l.error as { name: string; message: string; stack: string; detail: string };
  assert.equal(e.name, 'TypeError');
  assert.equal(e.detail, 'x');
  assert.match(e.stack, /daemon-sync-log\.test\.js/);
  assert.equal(l.object, undefined);
  assert.equal(l.retryInMs, undefined);
  assert.equal(l.retry, 'none (stopping)');
});

test('an error thrown on the sync thread keeps its fields across the boundary (a structured clone, as postMessage): a NetlinkError its code, op, index, extack and stack; another its own fields and cause', () => {
  const cross = (e: unknown) => fromWireError(structuredClone(toWireError(e)));
  const n = refused();
  const back = cross(n);
  assert.ok(back instanceof NetlinkError);
  for (const k of ['message', 'code', 'errno', 'kind', 'op', 'extack', 'index', 'stack'] as const) assert.equal(back[k], n[k], k);
  assert.equal(errorObject(back), 'fd00::10/128 dev kube-ipvs0');

  let sys: NodeJS.ErrnoException | undefined;
  try {
    readFileSync('/nonexistent/ipvsync');
  } catch (e) {
    sys = e as NodeJS.ErrnoException;
  }
  const wrapped = new Error('load failed', { cause: sys });
  const w = cross(wrapped);
  assert.equal(w.message, 'load failed');
  assert.equal(w.stack, wrapped.stack);
  const cause = w.cause as NodeJS.ErrnoException;
  assert.equal(cause.message, sys!.message);
  assert.equal(cause.code, 'ENOENT');
  assert.equal(cause.errno, sys!.errno);
  assert.equal(cause.syscall, 'open');
  assert.equal(cause.path, '/nonexistent/ipvsync');

  // and its log line is the one a local error gives
  const a = logger();
  const b = logger();
  logSyncFailure(a.log)({ trigger: 'periodic', startedAt: 0, durationMs: 1, coalesced: 0, error: n, retryInMs: 500 });
  logSyncFailure(b.log)({ trigger: 'periodic', startedAt: 0, durationMs: 1, coalesced: 0, error: back, retryInMs: 500 });
  assert.deepEqual(b.lines, a.lines);
});

test('translation warnings and refused objects are logged once when they appear, not at every resync; again when one goes and comes back; bounded per sync', () => {
  const { log, named } = logger();
  const notices = new NoticeLog(log);
  const bad = { service: 'default/bad', message: 'loadBalancerSourceRanges: "10.0.0.1/33" is not a CIDR, ignored' };
  const other = { service: 'default/other', message: 'port 70000 out of range, ignored' };
  const inv: InvalidObject = { kind: 'ipvs', object: 'tcp 10.96.0.9:80', field: 'scheduler', message: 'unknown scheduler "xx"' };
  notices.update([bad, bad], []);
  notices.update([bad], []);
  notices.update([bad], []);
  assert.deepEqual(named('translation warning').map((l) => [l.service, l.message]), [[bad.service, bad.message]], 'once across resyncs, duplicates too');
  notices.update([other], [inv]);
  notices.update([other], [inv]);
  notices.update([bad, other], [inv]);
  assert.deepEqual(
    named('translation warning').map((l) => l.service),
    ['default/bad', 'default/other', 'default/bad'],
    'the one that went and came back is logged again',
  );
  assert.deepEqual(
    named('object refused').map(({ kind, object, field, message, level }) => ({ kind, object, field, message, level })),
    [{ ...inv, level: 'warn' }],
  );

  const many = Array.from({ length: MAX_WARNING_LINES + 5 }, (_, i) => ({ service: `default/s${i}`, message: 'bad' }));
  notices.update(many, []);
  assert.equal(named('translation warning').length, 3 + MAX_WARNING_LINES);
  assert.deepEqual(named('more new warnings not logged').map((l) => l.count), [5]);
  notices.update(many, []);
  assert.equal(named('translation warning').length, 3 + MAX_WARNING_LINES, 'a resync logs none of them');
});

test('manifest objects skipped for their shape are logged once per appearance across folder reloads, apart from the translation warnings', () => {
  const { log, named } = logger();
  const notices = new NoticeLog(log);
  const w = { source: 'svc.yaml: document 2', message: 'Service default/web: spec.ports must be a list' };
  notices.manifests([w]);
  notices.update([{ service: 'default/x', message: 'm' }], []);
  notices.manifests([w]);
  assert.deepEqual(named('manifest object skipped').map((l) => [l.source, l.message, l.level]), [[w.source, w.message, 'warn']], 'once while it stays');
  notices.manifests([]);
  notices.manifests([w]);
  assert.equal(named('manifest object skipped').length, 2, 'again after it was fixed and broke again');
  assert.equal(named('translation warning').length, 1, 'the two lists are apart');
});
