// A test-only fault hook at the kernel façades, loaded into a daemon process with
// NODE_OPTIONS=--import=<this file's URL> and KERNEL_FAULTS_DIR=<a folder the test owns>. Node
// runs --import preloads in every thread, the sync thread included, before its own modules, so
// this patches the prototypes of that thread's Nftables, Links, Routes and Conntrack (the same
// dist/src/kernel/*.js URLs the thread imports: one module instance per thread). src/ carries
// no hook of its own.
//
// The plan is files the test writes: `armed/<seq>.json`, {"method": "Nftables.commit"} (and
// optionally "hold": true). The next call of that method on a sync thread claims the file (a
// rename into `fired/`: one call, one thread wins), fails once as the real call fails when the
// kernel refuses it, and appends a line to `faults.log` (the seq, the method, the op and error).
// The failure has the real call's shape: a dump rejects with a NetlinkError of kind 'nobufs'
// (ENOBUFS: the kernel dropped replies); a write returns the result the real call returns for a
// refused op (nftables: the transaction's first op EBUSY and every other op rolled back,
// nothing committed; rtnetlink: the batch's first op ENOMEM, the others sent to the kernel as
// usual); a conntrack delete rejects as its dump overran (ENOBUFS). With "hold", every later
// kernel call of that thread waits until the test creates `release/<seq>`: the test reads the
// kernel between the failure and the retry, with nothing of the daemon in flight.
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { isMainThread, threadId } from 'node:worker_threads';
import { NetlinkError, type NetlinkErrorKind } from '../../src/errors.js';
import { ApplyResult } from '../../src/kernel/batch.js';
import { Conntrack } from '../../src/kernel/conntrack.js';
import { Links } from '../../src/kernel/links.js';
import { NftCommitResult, NftTransaction, Nftables, type NftOp } from '../../src/kernel/nftables.js';
import { Routes } from '../../src/kernel/routes.js';

/** The methods the nftables data plane's sync calls (what can be armed), with the netlink
 *  message each is: reads, then writes. */
export const FAULTABLE = {
  'Nftables.genId': 'NFT_MSG_GETGEN',
  'Nftables.list': 'nftables list',
  'Nftables.listElements': 'nftables list elements',
  'Links.get': 'RTM_GETLINK',
  'Links.addresses': 'RTM_GETADDR',
  'Routes.list': 'RTM_GETROUTE',
  'Nftables.commit': 'nftables commit',
  'Links.apply': 'links apply',
  'Routes.apply': 'routes apply',
  'Conntrack.delete': 'IPCTNL_MSG_CT_DELETE',
} as const;
export type FaultMethod = keyof typeof FAULTABLE;

export interface ArmedFault {
  method: FaultMethod;
  /** Later kernel calls of the thread wait for `release/<seq>`. */
  hold?: boolean;
}

/** A line of faults.log. */
export interface FiredFault {
  seq: string;
  method: FaultMethod;
  thread: number;
  /** The error as the daemon gets it. */
  code: string;
  op: string;
  message: string;
  /** What the call was asked (ops of a write, by op name). */
  asked?: Record<string, number>;
}

/** What the injected errors' messages end with: the test finds them in the daemon's log. */
export const FAULT_MARK = '(fault injected by test/helpers/kernel-faults)';

const ERRNO = { ENOBUFS: 105, EBUSY: 16, ENOMEM: 12 } as const;
const STRERROR = { ENOBUFS: 'No buffer space available', EBUSY: 'Device or resource busy', ENOMEM: 'Cannot allocate memory' } as const;

function fault(op: string, code: keyof typeof ERRNO, kind: NetlinkErrorKind, index?: number): NetlinkError {
  return new NetlinkError({ message: `${op}: ${code} (${STRERROR[code]}) ${FAULT_MARK}`, code, errno: ERRNO[code], kind, op, ...(index !== undefined ? { index } : {}) });
}

/** A rtnetlink op as the addon names it in its errors. */
function rtnlOpText(o: Record<string, unknown>): string {
  switch (o.op) {
    case 'delAddr':
      return `RTM_DELADDR ${String(o.address)} dev ${String(o.link ?? o.index)}`;
    case 'addAddr':
      return `RTM_NEWADDR ${String(o.address)} dev ${String(o.link ?? o.index)}`;
    case 'delRoute':
      return `RTM_DELROUTE ${String(o.dst)} table ${String(o.table ?? 'main')}`;
    case 'addRoute':
      return `RTM_NEWROUTE ${String(o.dst)} table ${String(o.table ?? 'main')}`;
    default:
      return `rtnetlink ${String(o.op)}`;
  }
}

/** An nftables op as its netlink message and object ("NFT_MSG_NEWSETELEM ip ipvsync/cluster-ips"). */
function nftOpText(o: NftOp): string {
  const verb = o.verb === 'delete' || o.verb === 'destroy' ? 'DEL' : 'NEW';
  switch (o.kind) {
    case 'table':
      return `NFT_MSG_${verb}TABLE ${o.table.family} ${o.table.name}`;
    case 'chain':
      return `NFT_MSG_${verb}CHAIN ${o.chain.family} ${o.chain.table}/${o.chain.name}`;
    case 'set':
      return `NFT_MSG_${verb}SET ${o.set.family} ${o.set.table}/${o.set.name}`;
    case 'elements':
      return `NFT_MSG_${verb}SETELEM ${o.set.family} ${o.set.table}/${o.set.name}`;
    case 'rule':
      return `NFT_MSG_${verb}RULE ${o.rule.family} ${o.rule.table}/${o.rule.chain}`;
  }
}

function countOps(ops: ReadonlyArray<{ op?: unknown; verb?: unknown; kind?: unknown }>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const o of ops) {
    const k = typeof o.op === 'string' ? o.op : `${String(o.verb)}-${String(o.kind)}`;
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

const dir = process.env.KERNEL_FAULTS_DIR;
// Only sync threads: the proxier programs from there (the daemon's thread opens no handle of the
// nftables data plane), and an armed fault must be taken by the call it was armed for.
if (dir && !isMainThread) install(dir);

function install(root: string): void {
  const armed = join(root, 'armed');
  const fired = join(root, 'fired');
  const release = join(root, 'release');
  for (const d of [armed, fired, release]) mkdirSync(d, { recursive: true });
  /** The seq whose release this thread's kernel calls wait for. */
  let held: string | undefined;

  /** The armed fault for `method` this call claims, if any (oldest first). */
  function claim(method: FaultMethod): { seq: string; spec: ArmedFault } | undefined {
    for (const f of readdirSync(armed).sort()) {
      if (!f.endsWith('.json')) continue;
      let spec: ArmedFault;
      try {
        spec = JSON.parse(readFileSync(join(armed, f), 'utf8')) as ArmedFault;
      } catch {
        continue; // claimed meanwhile, or being written (the test renames it in whole)
      }
      if (spec.method !== method) continue;
      try {
        renameSync(join(armed, f), join(fired, f));
      } catch {
        continue; // another call claimed it
      }
      return { seq: f.slice(0, -'.json'.length), spec };
    }
    return undefined;
  }

  async function gate(): Promise<void> {
    while (held !== undefined && !existsSync(join(release, held))) await new Promise((r) => setTimeout(r, 10));
    held = undefined;
  }

  function record(seq: string, spec: ArmedFault, e: NetlinkError, asked?: Record<string, number>): void {
    const line: FiredFault = { seq, method: spec.method, thread: threadId, code: e.code, op: e.op, message: e.message, ...(asked ? { asked } : {}) };
    appendFileSync(join(root, 'faults.log'), `${JSON.stringify(line)}\n`);
    if (spec.hold) held = seq;
  }

  type Failing = (args: unknown[], seq: string, spec: ArmedFault, real: (...a: unknown[]) => Promise<unknown>) => Promise<unknown>;
  function patch(proto: object, cls: string, name: string, failing: Failing): void {
    const method = `${cls}.${name}` as FaultMethod;
    const p = proto as Record<string, (...a: unknown[]) => Promise<unknown>>;
    const real = p[name]!;
    if (typeof real !== 'function') throw new Error(`kernel-faults: ${method} is not a method`);
    p[name] = async function (this: unknown, ...args: unknown[]): Promise<unknown> {
      await gate();
      const c = claim(method);
      const bound = (...a: unknown[]) => real.apply(this, a);
      return c ? failing(args, c.seq, c.spec, bound) : real.apply(this, args);
    };
  }

  // Dumps: the kernel dropped replies (the socket's buffer overran): the call rejects.
  const dump =
    (op: string): Failing =>
    async (_args, seq, spec) => {
      const e = fault(op, 'ENOBUFS', 'nobufs');
      record(seq, spec, e);
      throw e;
    };
  for (const [m, op] of Object.entries(FAULTABLE)) {
    const [cls, name] = m.split('.') as [string, string];
    if (!['genId', 'list', 'listElements', 'get', 'addresses'].includes(name)) continue;
    const proto = { Nftables: Nftables.prototype, Links: Links.prototype, Routes: Routes.prototype }[cls]!;
    patch(proto, cls, name, dump(op));
  }

  // The nftables commit: the kernel refused the transaction's first op, so it rolled back every
  // op of it; nothing is committed (the real call resolves with that result, it never throws).
  patch(Nftables.prototype, 'Nftables', 'commit', async (args, seq, spec) => {
    const tx = args[0] as NftTransaction | readonly NftOp[];
    const ops: readonly NftOp[] = tx instanceof NftTransaction ? tx.ops : tx;
    const n = tx instanceof NftTransaction ? tx.size : tx.length;
    const statuses = new Uint8Array(n).fill(4); // 'rolled-back'
    if (n) statuses[0] = 2; // 'error'
    const e = fault(ops[0] ? nftOpText(ops[0]) : 'nftables commit op 0', 'EBUSY', 'kernel', 0);
    record(seq, spec, e, ops.length ? countOps(ops) : { ops: n });
    return new NftCommitResult({ statuses, errors: [e], transactions: [{ firstOp: 0, endOp: n, sent: true, committed: false }], sendmsgCalls: 1 });
  });

  // rtnetlink writes: the kernel refused the first op (ENOMEM) and applied the others (a batch
  // continues past a failed message): the others go to the kernel for real.
  for (const [cls, proto] of [['Links', Links.prototype], ['Routes', Routes.prototype]] as const) {
    patch(proto, cls, 'apply', async (args, seq, spec, real) => {
      const ops = args[0] as Array<Record<string, unknown>>;
      const opts = args[1];
      const e = fault(rtnlOpText(ops[0] ?? {}), 'ENOMEM', 'kernel', 0);
      record(seq, spec, e, countOps(ops));
      const rest = ops.length > 1 ? ((await real(ops.slice(1), opts)) as ApplyResult) : undefined;
      const statuses = new Uint8Array(ops.length);
      statuses[0] = 2; // 'error'
      const code = { 'not-sent': 0, ok: 1, error: 2, unknown: 3 } as const;
      for (let i = 1; i < ops.length; i++) statuses[i] = code[rest!.status(i - 1)];
      const errors = [e, ...(rest?.errors ?? []).map((x) => new NetlinkError({ ...x, message: x.message, index: (x.index ?? 0) + 1 }))];
      return new ApplyResult({ statuses, errors, sendmsgCalls: 1 + (rest?.sendmsgCalls ?? 0) });
    });
  }

  // A conntrack delete is a filtered dump, then deletes: its dump overran.
  patch(Conntrack.prototype, 'Conntrack', 'delete', async (args, seq, spec) => {
    const f = args[0] as { proto?: string; origDst?: string; origDport?: number; replySrc?: string; replySport?: number };
    const e = fault(`IPCTNL_MSG_CT_DELETE ${f.proto ?? 'proto'} ${f.origDst ?? '*'}:${f.origDport ?? '*'} reply from ${f.replySrc ?? '*'}:${f.replySport ?? '*'}`, 'ENOBUFS', 'nobufs');
    record(seq, spec, e);
    throw e;
  });
}
