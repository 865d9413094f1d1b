// Which desired objects the kernel layer would refuse, per object: the engine leaves those out of
// a plan (and leaves what the kernel has under their keys as it is) instead of letting one bad
// value reject a whole sync; Engine.plan() lists them (Plan.invalid), so a caller can check
// first. Each reconciler runs the checks of its kind (reconciler.ts). Every check is the kernel
// layer's own: IPVS, address, route and ipset values through src/kernel/op-checks.ts (the addon's
// checks), nftables through the NftTransaction builder and the op stream writer (opChecker).
import { NetlinkError } from '../errors.js';
import type { DestinationConfig } from '../kernel/ipvs.js';
import { NftTransaction, opChecker, type NftOp, type SetElement, type SetSpec } from '../kernel/nftables.js';
import type { NftFamily } from '../kernel/nft-types.js';
import {
  addressProblem,
  ipsetMemberProblem,
  ipsetSpecProblem,
  ipvsDestinationProblem,
  ipvsServiceProblem,
  ipvsServiceV6,
  linkNameProblem,
  routeFieldsProblem,
  type FieldProblem,
} from '../kernel/op-checks.js';
import { addressFamily, canonicalNetwork } from '../net/address.js';
import type { IpSetMember } from '../kernel/ipsets.js';
import { RT_TABLE_LOCAL, RT_TABLE_MAIN } from '../kernel/routes.js';
import type { DesiredVips } from './addresses-diff.js';
import type { InvalidObject } from './types.js';
import { memberKey, type DesiredIpSet } from './ipsets-diff.js';
import { destKey, serviceKey, type DesiredService } from './ipvs-model.js';
import { elementKey, type DesiredNftTable } from './nft-diff.js';
import type { DesiredRoute, DesiredRoutes } from './routes-diff.js';

function invalid(kind: InvalidObject['kind'], object: string, p: FieldProblem): InvalidObject {
  return { kind, object, field: p.field, message: p.message };
}

// ---- IPVS ------------------------------------------------------------------------------------

/** "TCP 10.0.0.1:80", "UDP [fd00::1]:53", "FWM 7": a service as ipvsadm names it. */
export function serviceName(s: DesiredService): string {
  if (typeof s !== 'object' || s === null) return String(s);
  const o = s as unknown as Record<string, unknown>;
  if (o.fwmark !== undefined && o.fwmark !== null) return `FWM ${String(o.fwmark)}`;
  return `${typeof o.protocol === 'string' ? o.protocol.toUpperCase() : String(o.protocol)} ${hostPort(o.address, o.port)}`;
}

function hostPort(address: unknown, port: unknown): string {
  const a = String(address);
  return `${a.includes(':') ? `[${a}]` : a}:${String(port)}`;
}

/** Whether serviceKey() can be made of the service: a firewall mark, or an address. */
export function keyable(s: DesiredService): boolean {
  const o = s as unknown as Record<string, unknown>;
  return (o.fwmark !== undefined && o.fwmark !== null) || addressFamily(o.address) !== 0;
}

const SERVICE_ID_FIELDS = new Set(['fwmark', 'protocol', 'address', 'port', 'family']);
const DEST_ID_FIELDS = new Set(['destination', 'address', 'port', 'family']);

/** A desired service with something the kernel layer refuses. */
export interface ServiceVerdict {
  invalid: InvalidObject[];
  /** What the engine diffs instead: the service with its valid destinations only; undefined
   *  when the service itself is invalid (left out whole). */
  valid: DesiredService | undefined;
  /** The service left out whole, when its identity is valid: the kernel's service with this
   *  key is left as it is (not deleted as stale). */
  key?: string;
  /** Destinations left out whose address and port are valid: the kernel's destinations with
   *  these keys (destKey) are left as they are. */
  destKeys?: string[];
}

/** undefined when the service and every destination of it are valid. */
export function checkService(s: DesiredService): ServiceVerdict | undefined {
  const p =
    typeof s !== 'object' || s === null
      ? { field: 'service', message: 'a service must be an object' }
      : (ipvsServiceProblem(s) ?? (Array.isArray(s.destinations) ? undefined : { field: 'destinations', message: 'destinations must be an array' }));
  if (p) {
    const v: ServiceVerdict = { invalid: [invalid('ipvs', serviceName(s), p)], valid: undefined };
    if (!SERVICE_ID_FIELDS.has(p.field)) v.key = serviceKey(s);
    return v;
  }
  const v6 = ipvsServiceV6(s);
  let bad: Array<{ d: DestinationConfig; p: FieldProblem }> | undefined;
  for (const d of s.destinations) {
    const dp = typeof d !== 'object' || d === null ? { field: 'destination', message: 'a destination must be an object' } : ipvsDestinationProblem(d, v6);
    if (dp) (bad ??= []).push({ d, p: dp });
  }
  if (!bad) return undefined;
  const name = serviceName(s);
  const left = new Set(bad.map((b) => b.d));
  const destinations = s.destinations.filter((d) => !left.has(d));
  const v: ServiceVerdict = {
    invalid: bad.map(({ d, p: dp }) => invalid('ipvs', `${name} -> ${typeof d === 'object' && d ? hostPort(d.address, d.port) : String(d)}`, dp)),
    valid: { ...s, destinations },
  };
  // A destination left out keeps the kernel's of its key, unless a valid one of that key is wanted.
  const wanted = new Set(destinations.map(destKey));
  const keys = bad.filter((b) => !DEST_ID_FIELDS.has(b.p.field)).map((b) => destKey(b.d)).filter((k) => !wanted.has(k));
  if (keys.length) v.destKeys = keys;
  return v;
}

// ---- VIPs ------------------------------------------------------------------------------------

/** The VIP link's name refused: nothing of the VIPs can be applied. */
export function vipLinkInvalid(vips: DesiredVips): InvalidObject | undefined {
  const p = linkNameProblem('link', vips.link);
  return p && invalid('vip', `vip link ${String(vips.link)}`, p);
}

export function vipInvalid(link: string, address: unknown, p: FieldProblem): InvalidObject {
  return invalid('vip', `vip ${String(address)} on ${link}`, p);
}

/** A VIP is a host address: the engine binds it with its host prefix (/32, /128). */
export function vipAddressProblem(a: unknown): FieldProblem | undefined {
  if (addressFamily(a) !== 0) return undefined;
  return addressProblem('address', a) ?? { field: 'address', message: `'${String(a)}' is a network, not a host address (a VIP is bound as /32 or /128)` };
}

// ---- routes ----------------------------------------------------------------------------------

/** The routes without those the kernel layer refuses; `kept`: "table|dst" of the kernel's
 *  routes left as they are (a route left out whose destination and table are valid). */
export function checkRoutes(routes: DesiredRoutes): { invalid: InvalidObject[]; valid: DesiredRoutes; kept: string[] } {
  const invalidOut: InvalidObject[] = [];
  const kept: string[] = [];
  const valid: DesiredRoute[] = [];
  for (const r of routes.routes) {
    let dst: string | undefined;
    let p: FieldProblem | undefined;
    try {
      dst = canonicalNetwork(r.dst);
    } catch (e) {
      p = { field: 'dst', message: (e as Error).message };
    }
    p ??= routeFieldsProblem(r);
    if (!p) {
      valid.push(r);
      continue;
    }
    invalidOut.push(invalid('route', `route ${String(r.type ?? 'unicast')} ${String(r.dst)}${r.table !== undefined ? ` table ${String(r.table)}` : ''}`, p));
    if (dst && p.field !== 'table') kept.push(`${routeTable(r)}|${dst}`);
  }
  return { invalid: invalidOut, valid: invalidOut.length ? { ...routes, routes: valid } : routes, kept };
}

/** The table a desired route goes to (as routes-diff numbers it). */
function routeTable(r: DesiredRoute): number {
  if (typeof r.table === 'number') return r.table;
  if (r.table === 'main') return RT_TABLE_MAIN;
  if (r.table === 'local') return RT_TABLE_LOCAL;
  return r.type === 'local' ? RT_TABLE_LOCAL : RT_TABLE_MAIN;
}

// ---- ipsets ----------------------------------------------------------------------------------

function memberText(m: IpSetMember): string {
  if (typeof m !== 'object' || m === null) return String(m);
  const ip = m.ip === undefined ? '' : `${String(m.ip)}${m.cidr !== undefined ? `/${String(m.cidr)}` : ''}`;
  const port = m.port === undefined ? '' : `${m.proto !== undefined ? `${String(m.proto)}:` : ''}${String(m.port)}`;
  const ip2 = m.ip2 === undefined ? '' : `${String(m.ip2)}${m.cidr2 !== undefined ? `/${String(m.cidr2)}` : ''}`;
  return [ip, port, ip2].filter((x) => x !== '').join(',');
}

const MEMBER_ID_FIELDS = new Set(['member', 'type', 'ip', 'cidr', 'port', 'proto', 'ip2', 'cidr2']);

/** A desired ipset with something the kernel layer refuses (undefined: none). `valid`: the set
 *  with its valid members, undefined when the set itself is invalid (left out whole, the
 *  kernel's set of that name left as it is); `keptMembers`: memberKey of members left out whose
 *  identity is valid (the kernel's of that key are kept). */
export function checkIpSet(
  set: DesiredIpSet,
  prefix: string | undefined,
): { invalid: InvalidObject[]; valid: DesiredIpSet | undefined; keptMembers?: string[] } | undefined {
  const name = `ipset ${String(set.name)}`;
  const p =
    ipsetSpecProblem(set) ??
    (prefix !== undefined && !set.name.startsWith(prefix) ? { field: 'name', message: `ipset ${set.name} does not carry the owned prefix ${prefix}` } : undefined) ??
    (Array.isArray(set.members) ? undefined : { field: 'members', message: 'members must be an array' });
  if (p) return { invalid: [invalid('ipset', name, p)], valid: undefined };
  let bad: Array<{ m: IpSetMember; p: FieldProblem }> | undefined;
  for (const m of set.members) {
    const mp = ipsetMemberProblem(set, m);
    if (mp) (bad ??= []).push({ m, p: mp });
  }
  if (!bad) return undefined;
  const left = new Set(bad.map((b) => b.m));
  const members = set.members.filter((m) => !left.has(m));
  const kept = bad.filter((b) => !MEMBER_ID_FIELDS.has(b.p.field)).map((b) => memberKey(set.type, b.m));
  return {
    invalid: bad.map((b) => invalid('ipset', `${name} member ${memberText(b.m)}`, b.p)),
    valid: { ...set, members },
    ...(kept.length ? { keptMembers: kept } : {}),
  };
}

// ---- nftables --------------------------------------------------------------------------------

/** A NetlinkError.invalid's reason (its message without the op in front). */
function reason(e: unknown): string {
  if (e instanceof NetlinkError && e.message.startsWith(`${e.op}: `)) return e.message.slice(e.op.length + 2);
  return e instanceof Error ? e.message : String(e);
}

/** The field a refusal of the façade names (its texts say it), by the words that say it, in
 *  order; `fallback` when none does. */
const TABLE_FIELDS: Array<[string, string]> = [['family', 'family']];
const CHAIN_FIELDS: Array<[string, string]> = [['family', 'family'], ['hook', 'hook'], ['priority', 'priority'], ['policy', 'policy'], ['type', 'type']];
const SET_FIELDS: Array<[string, string]> = [['family', 'family'], ['interval', 'interval'], ['map', 'map'], ['timeout', 'timeout'], ['comment', 'comment'], ['key', 'key'], ['datatype', 'key']];
const RULE_FIELDS: Array<[string, string]> = [['family', 'family'], ['chain', 'chain'], ['comment', 'comment']];
const ELEMENT_FIELDS: Array<[string, string]> = [['verdict', 'verdict'], ['data', 'data'], ['not a map', 'data'], ['timeout', 'timeout'], ['comment', 'comment']];

function nftField(message: string, words: ReadonlyArray<[string, string]>, fallback: string): string {
  for (const [w, f] of words) if (new RegExp(`\\b${w}\\b`).test(message)) return f;
  return fallback;
}

/** The first problem the façade finds with one builder call, or undefined. */
function nftProblem(build: (tx: NftTransaction) => void, words: ReadonlyArray<[string, string]>, fallback: string): FieldProblem | undefined {
  try {
    build(new NftTransaction({ keepOps: false }));
    return undefined;
  } catch (e) {
    const message = reason(e);
    return { field: nftField(message, words, fallback), message };
  }
}

type SetDecl = Omit<DesiredNftTable['sets'][number], 'elements'>;

/** A set's declaration with its table, without its elements. */
function specOf(table: { family: NftFamily; name: string }, set: SetDecl & { elements?: unknown }): SetSpec {
  const { elements: _, unique: _u, ...decl } = set;
  return { ...decl, family: table.family, table: table.name } as SetSpec;
}

/** Sets and chains a rule names: lookups' sets, jumps' and gotos' chains (any expression field
 *  `set`, any verdict's `chain`). */
function ruleRefs(exprs: unknown): { sets: string[]; chains: string[] } {
  const sets: string[] = [];
  const chains: string[] = [];
  for (const e of Array.isArray(exprs) ? (exprs as Array<Record<string, unknown>>) : []) {
    if (typeof e !== 'object' || e === null) continue;
    if (typeof e.set === 'string') sets.push(e.set);
    const v = e.verdict as { chain?: unknown } | undefined;
    if (v && typeof v.chain === 'string') chains.push(v.chain);
  }
  return { sets, chains };
}

export interface NftTableVerdict {
  /** The table's chains, set declarations and rules the façade refuses, and what is left out
   *  with them (elements are checked apart: checkNftElements). */
  invalid: InvalidObject[];
  /** The table without them (the very table when nothing is wrong); undefined when the table
   *  itself is invalid. */
  valid: DesiredNftTable | undefined;
  /** Chains left out: a verdict map element that jumps to one is left out too. */
  droppedChains: ReadonlySet<string>;
}

const NONE: ReadonlySet<string> = new Set();

/** The static part of a desired table (table, chains, set declarations, rules) checked. */
export function checkNftTable(t: DesiredNftTable): NftTableVerdict {
  const tname = `nft ${String(t.family)} ${String(t.name)}`;
  const tp = nftProblem((tx) => tx.addTable({ family: t.family, name: t.name }), TABLE_FIELDS, 'name');
  if (tp) return { invalid: [invalid('nft', tname, tp)], valid: undefined, droppedChains: NONE };
  const o = t.owned as { names?: unknown; prefixes?: unknown } | null | undefined;
  const names = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === 'string' && x.length > 0);
  if (o !== undefined && (o === null || typeof o !== 'object' || !names(o.names) || !names(o.prefixes)))
    return { invalid: [invalid('nft', tname, { field: 'owned', message: 'owned must be { names: string[], prefixes: string[] } of non-empty names' })], valid: undefined, droppedChains: NONE };
  const out: InvalidObject[] = [];
  const droppedChains = new Set<string>();
  const droppedSets = new Set<string>();
  const chains = t.chains.filter((c) => {
    const p = nftProblem((tx) => tx.addChain({ ...c, family: t.family, table: t.name }), CHAIN_FIELDS, 'name');
    if (p) {
      out.push(invalid('nft', `${tname} chain ${String(c.name)}`, p));
      droppedChains.add(c.name);
    }
    return !p;
  });
  const sets = t.sets.filter((s) => {
    const p = nftProblem((tx) => tx.addSet(specOf(t, s)), SET_FIELDS, 'name');
    if (p) {
      out.push(invalid('nft', `${tname} set ${String(s.name)}`, p));
      droppedSets.add(s.name);
    }
    return !p;
  });
  const dependents = droppedChains.size > 0 || droppedSets.size > 0;
  const at = new Map<string, number>();
  const rules = t.rules.filter((r) => {
    let p: FieldProblem | undefined;
    if (dependents) {
      const refs = ruleRefs(r.exprs);
      const set = refs.sets.find((x) => droppedSets.has(x));
      const chain = refs.chains.find((x) => droppedChains.has(x));
      if (droppedChains.has(r.chain)) p = { field: 'chain', message: `its chain ${r.chain} is left out` };
      else if (set !== undefined) p = { field: 'exprs', message: `it looks up set ${set}, which is left out` };
      else if (chain !== undefined) p = { field: 'exprs', message: `it jumps to chain ${chain}, which is left out` };
    }
    p ??= nftProblem((tx) => tx.addRule({ ...r, family: t.family, table: t.name }), RULE_FIELDS, 'exprs');
    if (p) {
      const n = at.get(r.chain) ?? 0;
      out.push(invalid('nft', `${tname} chain ${String(r.chain)} rule ${n}`, p));
    }
    // a rule's number in its chain, as the desired table lists them
    at.set(r.chain, (at.get(r.chain) ?? 0) + 1);
    return !p;
  });
  if (!out.length) return { invalid: [], valid: t, droppedChains: NONE };
  return { invalid: out, valid: { ...t, chains, sets, rules }, droppedChains };
}

/** Elements checked together (written as one op into a buffer reused for every block: a set's
 *  ~100k elements in one stream were ~12 MB at once). */
const ELEMENT_BLOCK = 256;

/**
 * The elements of one (valid) set the façade refuses, for an add (`verb` 'add': key, value,
 * timeout, comment) or a delete ('delete': the key alone). `bad`: their indexes; `keptKeys`:
 * elementKey of refused elements whose key alone is valid (the kernel's element of that key is
 * left as it is). Block by block, then element by element in a block that fails.
 */
export function checkNftElements(
  table: { family: NftFamily; name: string },
  set: SetDecl,
  elements: readonly SetElement[],
  verb: 'add' | 'delete',
  droppedChains: ReadonlySet<string> = NONE,
): { invalid: InvalidObject[]; bad: Set<number>; keptKeys: string[] } {
  const spec = specOf(table, set);
  const jumps = droppedChains.size > 0 && spec.map === 'verdict';
  const keySpec = { family: spec.family, table: spec.table, name: spec.name, key: spec.key, interval: spec.interval } as SetSpec;
  const check = opChecker();
  const out: InvalidObject[] = [];
  const bad = new Set<number>();
  const keptKeys: string[] = [];
  for (let i = 0; i < elements.length; i++) {
    // a block at a time, element by element only in a block that fails
    if (i % ELEMENT_BLOCK === 0 && !jumps && elementsProblem(check, spec, elements.slice(i, i + ELEMENT_BLOCK), verb) === undefined) {
      i += ELEMENT_BLOCK - 1;
      continue;
    }
    const e = elements[i]!;
    let p = elementsProblem(check, spec, [e], verb);
    const chain = jumps && e?.verdict?.chain;
    if (!p && chain && droppedChains.has(chain)) p = { field: 'verdict', message: `it jumps to chain ${chain}, which is left out` };
    if (!p) continue;
    bad.add(i);
    const keyBad = verb === 'delete' || elementsProblem(check, keySpec, [{ key: e?.key } as SetElement], 'delete') !== undefined;
    if (!keyBad) keptKeys.push(elementKey(spec, e));
    else p = { field: 'key', message: p.message };
    out.push(invalid('nft', `nft ${table.family} ${table.name} set ${spec.name} element ${Array.isArray(e?.key) ? e.key.join(' . ') : String(e?.key)}`, p));
  }
  return { invalid: out, bad, keptKeys };
}

function elementsProblem(check: (op: NftOp) => void, spec: SetSpec, elements: readonly SetElement[], verb: 'add' | 'delete'): FieldProblem | undefined {
  try {
    check({ verb, kind: 'elements', set: spec, elements: elements as SetElement[] });
    return undefined;
  } catch (e) {
    const message = reason(e);
    return { field: nftField(message, ELEMENT_FIELDS, 'key'), message };
  }
}
