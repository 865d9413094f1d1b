// The record of the IPVS virtual servers the engine owns, held in the kernel so that it
// outlives the process and is the same for `sync`, `proxy` and `cleanup`: two ipsets of the
// engine's own (hash:ip,port, one per family), an element `addr,proto:port` per virtual
// server. The engine records a virtual server before it creates it and forgets it after it
// deleted it, so a crash in between leaves at worst a record without a service (dropped by the
// next full plan), never a service of its own it would not know again.
//
// Firewall-mark services have no address and port: they are recorded in memory only (for the
// process's lifetime), as every service is when the engine has no ipset handle. The IPVS
// reconciler keeps the record (OwnershipRecord) and writes it in its own ipset batches.
import { NetlinkError } from '../errors.js';
import type { IpSet, IpSetMember, IpSetOp, IpSetSpec, IpSetsApi } from '../kernel/ipsets.js';
import type { AddressFamily } from '../kernel/ipvs.js';
import { canonicalAddress } from '../net/address.js';
import { applyBatch, type KindReport } from './apply-batch.js';

/** The record's sets, by family. Never touched by the ipset diff, whatever its prefix. */
export const IPVS_RECORD = { inet: 'ipvsync-ipvs', inet6: 'ipvsync-ipvs6' } as const;
export const IPVS_RECORD_SETS: readonly string[] = [IPVS_RECORD.inet, IPVS_RECORD.inet6];

/** ipset's default (65536) would cap the virtual servers per family below what a large
 *  cluster has; a hash set's memory follows its elements, not this. */
const RECORD_MAXELEM = 1 << 20;

export function recordSpec(family: AddressFamily): IpSetSpec {
  return { name: IPVS_RECORD[family], type: 'hash:ip,port', family, maxelem: RECORD_MAXELEM };
}

/** A service key (serviceKey) as a record element; undefined for a firewall-mark service. */
export function recordMember(key: string): { family: AddressFamily; member: IpSetMember } | undefined {
  const [family, proto, address, port] = key.split('|') as [AddressFamily, string, string, string | undefined];
  if (proto === 'fwmark') return undefined;
  return { family, member: { ip: address, proto: proto as 'tcp' | 'udp' | 'sctp', port: Number(port) } };
}

/** A record element back to its service key. */
export function keyOfMember(family: AddressFamily, m: IpSetMember): string {
  return `${family}|${m.proto ?? 'tcp'}|${canonicalAddress(m.ip!)}|${m.port}`;
}

/** The keys a listing of the record's sets holds (from a dump of every set, or of those two). */
export function recordedKeys(sets: readonly IpSet[]): Set<string> {
  const keys = new Set<string>();
  for (const family of ['inet', 'inet6'] as const) {
    const s = sets.find((x) => x.name === IPVS_RECORD[family]);
    for (const m of s?.members ?? []) keys.add(keyOfMember(family, m));
  }
  return keys;
}

/** The record's sets as the kernel has them (one dump each; a set not there is none). */
export async function readRecord(ipsets: IpSetsApi): Promise<IpSet[]> {
  const one = (name: string) =>
    ipsets.list(name).catch((e: unknown) => {
      if (e instanceof NetlinkError && e.code === 'ENOENT') return [];
      throw e;
    });
  return (await Promise.all(IPVS_RECORD_SETS.map(one))).flat();
}

/** The writes that record `add` (sets created first where the kernel has none, `exist`: a
 *  member already there is no error) and forget `del`, per family. */
export function recordOps(add: readonly string[], del: readonly string[], existing: ReadonlySet<string>): { early: IpSetOp[]; late: IpSetOp[] } {
  const early: IpSetOp[] = [];
  const late: IpSetOp[] = [];
  for (const family of ['inet', 'inet6'] as const) {
    const name = IPVS_RECORD[family];
    const adds = members(add, family);
    if (adds.length) {
      if (!existing.has(name)) early.push({ op: 'create', ...recordSpec(family), exist: true });
      early.push({ op: 'add', name, type: 'hash:ip,port', family, members: adds, exist: true });
    }
    const dels = members(del, family);
    if (dels.length) late.push({ op: 'del', name, type: 'hash:ip,port', family, members: dels, exist: true });
  }
  return { early, late };
}

function members(keys: readonly string[], family: AddressFamily): IpSetMember[] {
  const out: IpSetMember[] = [];
  for (const k of keys) {
    const r = recordMember(k);
    if (r && r.family === family) out.push(r.member);
  }
  return out;
}

/** A plan's record changes (keys to record before IPVS creates anything, to forget after it:
 *  those `deleted` once their deleteService went, those `dropped` at once), and the ipset writes
 *  as the plan shows them (`late` forgets every key; absent: the record is memory). */
export type RecordWrites = RecordChanges & { ops?: { early: IpSetOp[]; late: IpSetOp[] } };
type RecordChanges = { add: string[]; deleted: string[]; dropped: string[] };

/** The record as the engine keeps it, and its reads and writes (through `ipsets`; without an
 *  ipset handle it is the process's memory). */
export class OwnershipRecord {
  /** The keys of the virtual servers the engine owns by its record, as of the last read of it
   *  and the record writes since; undefined until it is read (the first plan, and every full
   *  one, dumps it). */
  keys: Set<string> | undefined;
  /** The record's sets the kernel has (created once, when first needed). */
  private sets = new Set<string>();

  constructor(private readonly ipsets: IpSetsApi | undefined) {
    if (!ipsets) this.keys = new Set();
  }

  /** The record's sets as the kernel has them when a plan reads it (a full one, or the first),
   *  from `everySet` (a plan that lists every set anyway) or from the two alone. */
  read(incremental: boolean, everySet: (() => Promise<IpSet[]>) | undefined): Promise<IpSet[]> | undefined {
    if (!this.ipsets || (incremental && this.keys !== undefined)) return undefined;
    return everySet ? everySet() : readRecord(this.ipsets);
  }

  /** Takes the record from the listed sets (its two among them). */
  take(sets: readonly IpSet[]): void {
    const record = sets.filter((x) => IPVS_RECORD_SETS.includes(x.name));
    // firewall-mark services are recorded in memory only: they stay
    const memoryOnly = [...(this.keys ?? [])].filter((key) => recordMember(key) === undefined);
    this.keys = recordedKeys(record);
    for (const key of memoryOnly) this.keys.add(key);
    this.sets = new Set(record.map((x) => x.name));
  }

  /** The writes of a delta's record changes (none without an ipset handle: memory). */
  writes(r: RecordChanges): RecordWrites | undefined {
    if (!r.add.length && !r.deleted.length && !r.dropped.length) return undefined;
    return { ...r, ...(this.ipsets ? { ops: recordOps(r.add, [...r.deleted, ...r.dropped], this.sets) } : {}) };
  }

  /** Writes the records (before IPVS creates): whether they all went in. */
  record(w: RecordWrites, report: KindReport): Promise<boolean> {
    return this.write(w.ops?.early ?? [], report);
  }

  /** Forgets `gone` (after IPVS deleted them) and keeps the record as the writes left it: the
   *  keys recorded (when their records went in) and forgotten (when that went), the sets created. */
  async forget(w: RecordWrites, recorded: boolean, gone: readonly string[], report: KindReport): Promise<void> {
    const forgotten = !this.ipsets || (await this.write(recordOps([], gone, this.sets).late, report)) ? gone : [];
    if (!this.keys) return;
    if (recorded) for (const key of w.add) this.keys.add(key);
    for (const key of forgotten) this.keys.delete(key);
    if (recorded) for (const o of w.ops?.early ?? []) if (o.op === 'create') this.sets.add(o.name);
  }

  private async write(ops: IpSetOp[], report: KindReport): Promise<boolean> {
    const ok = await applyBatch(report, ops, (o) => this.ipsets!.apply(o, { stopOnError: false }));
    return ops.every((_, i) => ok?.(i));
  }
}
