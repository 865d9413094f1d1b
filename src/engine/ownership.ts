// The record of the IPVS virtual servers the engine owns, held in the kernel so that it
// outlives the process and is the same for `sync`, `proxy` and `cleanup`: two ipsets of the
// engine's own (hash:ip,port, one per family), an element `addr,proto:port` per virtual
// server. The engine records a virtual server before it creates it and forgets it after it
// deleted it, so a crash in between leaves at worst a record without a service (dropped by the
// next full plan), never a service of its own it would not know again.
//
// Firewall-mark services have no address and port: they are recorded in memory only (for the
// process's lifetime), as every service is when the engine has no ipset handle.
import { NetlinkError } from '../errors.js';
import type { IpSet, IpSetMember, IpSetOp, IpSetSpec, IpSetsApi } from '../kernel/ipsets.js';
import type { AddressFamily } from '../kernel/ipvs.js';
import { canonicalAddress } from '../net/address.js';

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
