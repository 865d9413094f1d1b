// ipsets the engine owns (a name prefix): created when missing, members diffed, sets whose
// declaration changed refilled through a temporary set and an atomic swap, stale owned sets
// destroyed. Foreign sets are never touched. Pure.
import type { IpSet, IpSetMember, IpSetOp, IpSetSpec } from '../kernel/ipsets.js';
import { canonicalAddress, networkText, parseCidr } from '../net/address.js';

export type DesiredIpSet = IpSetSpec & { members: IpSetMember[] };

export interface IpSetsDelta {
  /** Creates, member adds/dels, refills: before IPVS. */
  early: IpSetOp[];
  /** Destroys of stale sets: last. */
  late: IpSetOp[];
}

const NET_TYPES = /net/;

/** Canonical member text: the fields that make a member's identity in its set. */
export function memberKey(type: string, m: IpSetMember): string {
  const proto = m.proto === undefined ? '' : String(m.proto);
  return [memberAddress(m.ip, m.cidr, NET_TYPES.test(type)), proto, m.port ?? '', memberAddress(m.ip2, m.cidr2, /net$/.test(type))].join(',');
}

/** One address of a member: canonical; of a net dimension, as the network the kernel stores
 *  (10.1.2.3/16 is 10.1.0.0/16) with its length. */
function memberAddress(ip: string | undefined, len: number | undefined, net: boolean): string {
  if (!ip) return '';
  const a = canonicalAddress(ip);
  if (!net) return a;
  const bits = len ?? (a.includes(':') ? 128 : 32);
  try {
    return `${networkText(parseCidr(`${a}/${bits}`))}/${bits}`;
  } catch {
    return `${a}/${bits}`; // not an address: the handle rejects it (typed) when the op is built
  }
}

/** Members with distinct keys (the first of duplicates): adding one twice is an error. */
function unique(type: string, members: readonly IpSetMember[]): IpSetMember[] {
  const seen = new Set<string>();
  return members.filter((m) => {
    const k = memberKey(type, m);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** Only the fields that name a member (a del carries no counters or timeouts). */
function identity(m: IpSetMember): IpSetMember {
  const out: IpSetMember = {};
  for (const k of ['ip', 'cidr', 'proto', 'port', 'ip2', 'cidr2'] as const) if (m[k] !== undefined) (out as Record<string, unknown>)[k] = m[k];
  return out;
}

function declaration(s: IpSetSpec): string {
  return JSON.stringify([s.type, s.family ?? 'inet', s.maxelem ?? 65536, s.timeout ?? 0, !!s.counters, !!s.comment, s.range ?? null]);
}

export function diffIpSets(desired: readonly DesiredIpSet[], observed: readonly IpSet[], prefix: string): IpSetsDelta {
  const early: IpSetOp[] = [];
  const late: IpSetOp[] = [];
  const have = new Map(observed.filter((s) => s.name.startsWith(prefix)).map((s) => [s.name, s]));
  for (const want of desired) {
    if (!want.name.startsWith(prefix)) throw new RangeError(`ipset ${want.name} does not carry the owned prefix ${prefix}`);
    const { members: listed, ...spec } = want;
    const members = unique(want.type, listed);
    const h = have.get(want.name);
    if (!h) {
      early.push({ op: 'create', ...spec });
      if (members.length) early.push({ op: 'add', name: want.name, type: want.type, family: want.family, members });
      continue;
    }
    if (declaration(h) !== declaration(spec)) {
      // Refill atomically: a temporary set of the new declaration, swapped in, then destroyed.
      const tmp = `${want.name.slice(0, 26)}-tmp`;
      early.push({ op: 'create', ...spec, name: tmp });
      if (members.length) early.push({ op: 'add', name: tmp, type: want.type, family: want.family, members });
      early.push({ op: 'swap', name: tmp, with: want.name }, { op: 'destroy', name: tmp });
      continue;
    }
    const haveKeys = new Map((h.members ?? []).map((m) => [memberKey(want.type, m), m]));
    const wantKeys = new Set<string>();
    const add: IpSetMember[] = [];
    for (const m of members) {
      const k = memberKey(want.type, m);
      wantKeys.add(k);
      if (!haveKeys.has(k)) add.push(m);
    }
    const del = [...haveKeys].filter(([k]) => !wantKeys.has(k)).map(([, m]) => identity(m));
    if (del.length) early.push({ op: 'del', name: want.name, type: want.type, family: want.family, members: del });
    if (add.length) early.push({ op: 'add', name: want.name, type: want.type, family: want.family, members: add });
  }
  const wanted = new Set(desired.map((s) => s.name));
  for (const name of have.keys()) if (!wanted.has(name)) late.push({ op: 'destroy', name });
  return { early, late };
}
