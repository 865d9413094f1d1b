// The engine's own nftables table: its static part (chains, rules, set declarations) changes
// rarely and is rebuilt atomically when it differs; set and map elements — the per-service
// part — are diffed element by element. Pure: (desired, observed listing) -> NftOp[], all of
// which go into one transaction (the kernel applies it entirely or not at all).
import { dataValues, mapTypes, PackedElements, sameBytes, type ChainSpec, type NftOp, type NftRuleset, type RuleSpec, type SetElement, type SetInfo, type SetSpec, type TableSpec } from '../kernel/nftables.js';
import { encodeKeyInto, keyLength, type NftFamily } from '../kernel/nft-types.js';
import { canonicalExprs } from '../kernel/nft-expr.js';
import { canonicalAddress } from '../net/address.js';
import { samePlain } from './ipvs-model.js';

type Local<T> = Omit<T, 'family' | 'table'>;
type DesiredSet = DesiredNftTable['sets'][number];
type SetDecl = Omit<DesiredSet, 'elements' | 'unique'>;

export interface DesiredNftTable {
  family: NftFamily;
  name: string;
  chains: Array<Local<ChainSpec>>;
  sets: Array<
    Local<SetSpec> & {
      /** As objects, or as the bytes the kernel holds (a plain set's, PackedElements.fixed). */
      elements: SetElement[] | PackedElements;
      /** The elements are unique by canonical key already (a builder that keeps them so): a
       *  table created from nothing is written without checking. */
      unique?: boolean;
    }
  >;
  /** Rules in order; a chain's rules are compared as one ordered list. */
  rules: Array<Local<RuleSpec>>;
  /**
   * The chains and sets of the table that are the engine's, by name: those named here, those
   * starting with one of the prefixes, and the desired ones. Any other chain or set in the
   * kernel's table, with its rules and elements, is someone else's and survives every sync (as
   * kube-proxy's nftables mode deletes only the chains and sets it names). Without it the
   * whole table is the engine's.
   */
  owned?: { names: readonly string[]; prefixes: readonly string[] };
}

/** Whether a chain or set of the kernel's table is the engine's (DesiredNftTable.owned). */
export function ownsName(desired: DesiredNftTable): (name: string) => boolean {
  const o = desired.owned;
  if (!o) return () => true;
  const names = new Set([...o.names, ...desired.chains.map((c) => c.name), ...desired.sets.map((s) => s.name)]);
  return (name) => names.has(name) || o.prefixes.some((p) => name.startsWith(p));
}

/** Elements added to and deleted from one set of an owned nftables table; the added ones as
 *  objects, or as the bytes the kernel holds (a plain set's, PackedElements.fixed). */
export interface NftElementChange {
  family: NftFamily;
  table: string;
  set: string;
  add: readonly SetElement[] | PackedElements;
  delete: readonly SetElement[];
}

export interface NftDelta {
  ops: NftOp[];
  /** Why the static part was rebuilt, when it was. */
  rebuilt?: string;
  /** Element changes given (DesiredChanges.nft) on the tables last applied cleanly, without
   *  listing the kernel. */
  fromLast?: boolean;
  /** The table is not in the kernel: the ops create it from nothing (build order: table,
   *  chains, sets with their elements, then the rules). */
  created?: boolean;
}

const PROTO: Record<number, string> = { 6: 'tcp', 17: 'udp', 132: 'sctp', 1: 'icmp', 58: 'ipv6-icmp' };

/** One key field in canonical form: addresses canonical, host-length CIDRs bare, protocols named. */
function canonField(v: unknown, interval: boolean): string {
  if (typeof v === 'number') return String(v);
  if (typeof v !== 'string') return JSON.stringify(v);
  const slash = v.indexOf('/');
  if (slash < 0) return canonicalAddress(v);
  const a = canonicalAddress(v.slice(0, slash));
  const len = Number(v.slice(slash + 1));
  const host = a.includes(':') ? 128 : 32;
  return interval && len === host ? a : `${a}/${len}`;
}

function canonKeyValue(v: unknown, isProto: boolean, interval: boolean): string {
  if (isProto && PROTO[Number(v)]) return PROTO[Number(v)]!;
  return canonField(v, interval);
}

export function elementKey(set: Pick<SetSpec, 'key' | 'interval'>, e: SetElement): string {
  return e.key.map((v, i) => canonKeyValue(v, set.key[i] === 'inet_proto', !!set.interval)).join(' . ');
}

/** An element's value (its verdict or data) as one text, '' for a plain set's: two elements
 *  of one key are the same element when these are equal. */
export function elementValue(e: SetElement): string {
  if (e.verdict) return stableStringify(e.verdict);
  if (e.data !== undefined) return stableStringify(e.data);
  return '';
}

function specSignature(s: Local<SetSpec>): string {
  return stableStringify([s.key, s.map ?? null, !!s.interval, s.timeout ?? 0, !!s.timeoutFlag, !!s.dynamic]);
}

function chainSignature(c: Local<ChainSpec>): string {
  return stableStringify(c.hook ? [c.hook.type, c.hook.hook, c.hook.priority, c.hook.policy ?? 'accept'] : null);
}

/** JSON with object keys sorted: the kernel's listing and a builder order keys differently. */
export function stableStringify(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableStringify).join(',')}]`;
  if (v && typeof v === 'object' && !Buffer.isBuffer(v) && !(v instanceof Uint8Array)) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableStringify(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

function ruleSignature(r: Local<RuleSpec>): string {
  return stableStringify([canonicalExprs(r.exprs), r.comment ?? '']);
}

function full<T extends object>(t: TableSpec, x: T): T & TableRef {
  return { ...x, family: t.family, table: t.name };
}
type TableRef = { family: NftFamily; table: string };

/** A set without its elements. */
export function declOf(set: DesiredSet | (Local<SetSpec> & { elements: readonly SetElement[] | PackedElements })): SetDecl {
  const { elements: _, unique: _u, ...decl } = set as DesiredSet;
  return decl;
}

/** Everything of the table, in dependency order (chains and sets before what refers to them). */
function build(t: TableSpec, d: DesiredNftTable): NftOp[] {
  const ops: NftOp[] = [{ verb: 'add', kind: 'table', table: t }];
  for (const c of d.chains) ops.push({ verb: 'add', kind: 'chain', chain: full(t, c) });
  for (const set of d.sets) {
    const s = declOf(set);
    const elements = set.unique || set.elements instanceof PackedElements ? set.elements : uniqueElements(s, set.elements);
    ops.push({ verb: 'add', kind: 'set', set: full(t, s) });
    if (elements.length) ops.push({ verb: 'add', kind: 'elements', set: full(t, s), elements });
  }
  for (const r of d.rules) ops.push({ verb: 'add', kind: 'rule', rule: full(t, r) });
  return ops;
}

function uniqueElements(s: Pick<SetSpec, 'key' | 'interval'>, elements: readonly SetElement[]): SetElement[] {
  const seen = new Set<string>();
  const out: SetElement[] = [];
  for (const e of elements) {
    const k = elementKey(s, e);
    if (!seen.has(k)) {
      seen.add(k);
      out.push(e);
    }
  }
  return out;
}

/** A listed set's elements, as a diff step is answered: as the kernel sent them
 *  (Nftables.listElements), or decoded. */
export type ListedElements = PackedElements | readonly SetElement[];

/**
 * The delta from a listing of the table, its sets' elements asked for one set at a time: the
 * steps yield a listed set whose elements the diff needs next and take them as the answer, so
 * a caller can list each set's elements when asked and let them go once the next set is asked
 * for (a restart over 10k services lists ~171k elements, 110k in one map). Pure: the caller
 * lists.
 */
export function* diffNftSteps(desired: DesiredNftTable, observed: NftRuleset): Generator<SetInfo, NftDelta, ListedElements> {
  const t: TableSpec = { family: desired.family, name: desired.name };
  const owns = ownsName(desired);
  const inTable = (x: { family: NftFamily; table: string }) => x.family === t.family && x.table === t.name;
  // the engine's objects of the table; the rest (another owner's chains and sets) is not looked at
  const mine = (x: { family: NftFamily; table: string; name?: string; chain?: string }) => inTable(x) && owns(x.name ?? x.chain!);
  if (!observed.tables.some((x) => x.family === t.family && x.name === t.name)) return { ops: build(t, desired), created: true };

  // Static part: chains (with hooks), set declarations, and each chain's rule list.
  const ownChains = observed.chains.filter(mine);
  const ownSets = observed.sets.filter(mine);
  const foreign = observed.chains.some((c) => inTable(c) && !owns(c.name)) || observed.sets.some((x) => inTable(x) && !owns(x.name));
  const haveChains = new Map(ownChains.map((c) => [c.name, chainSignature(c)]));
  const haveSets = new Map(ownSets.map((s) => [s.name, s]));
  const haveRules = new Map<string, string[]>();
  for (const r of observed.rules.filter(mine)) {
    const list = haveRules.get(r.chain) ?? [];
    list.push(ruleSignature(r));
    haveRules.set(r.chain, list);
  }
  const wantRules = rulesByChain(desired.rules);

  let why: string | undefined;
  if (haveChains.size !== desired.chains.length) why = 'chains differ';
  for (const c of desired.chains) if (!why && haveChains.get(c.name) !== chainSignature(c)) why = `chain ${c.name} differs`;
  if (!why && haveSets.size !== desired.sets.length) why = 'sets differ';
  for (const s of desired.sets) {
    const h = haveSets.get(s.name);
    if (!why && (!h || specSignature(h) !== specSignature(s))) why = `set ${s.name} differs`;
  }
  if (why) {
    // Rebuild the whole table in the same transaction: delete + add commit together.
    if (!foreign) return { ops: [{ verb: 'delete', kind: 'table', table: t }, ...build(t, desired)], rebuilt: why };
    // Someone else's chains or sets are in it: rebuild only the engine's. Its chains flushed
    // (no rule of theirs still refers to a set or jumps to a chain), its maps emptied (no
    // element still jumps to a chain), then its sets and chains deleted, and all built again.
    const ops: NftOp[] = [];
    for (const c of ownChains) if (haveRules.has(c.name)) ops.push({ verb: 'flush', kind: 'chain', chain: full(t, { name: c.name }) });
    for (const x of ownSets) {
      if (x.map !== 'verdict') continue;
      const listed = decoded(yield x);
      if (listed.length) ops.push({ verb: 'delete', kind: 'elements', set: full(t, declOf(x)), elements: listed.map(({ key }) => ({ key })) });
    }
    for (const x of ownSets) ops.push({ verb: 'delete', kind: 'set', set: full(t, declOf(x)) });
    for (const c of ownChains) ops.push({ verb: 'delete', kind: 'chain', chain: full(t, { name: c.name }) });
    return { ops: [...ops, ...build(t, desired)], rebuilt: why };
  }

  const ops: NftOp[] = [];
  // Chains whose rule list differs: flush and re-add (sets and chains are unchanged here).
  for (const c of desired.chains) {
    const want = (wantRules.get(c.name) ?? []).map(ruleSignature);
    const have = haveRules.get(c.name) ?? [];
    if (want.length === have.length && want.every((w, i) => w === have[i])) continue;
    if (have.length) ops.push({ verb: 'flush', kind: 'chain', chain: full(t, c) });
    for (const r of wantRules.get(c.name) ?? []) ops.push({ verb: 'add', kind: 'rule', rule: full(t, r) });
  }
  for (const set of desired.sets) {
    if (set.dynamic) continue;
    const h = haveSets.get(set.name)!;
    // one set's listing at a time: this step's answer is dropped before the next is asked for
    let listed: ListedElements | undefined = yield h;
    ops.push(...setElementOps(spec(t, set), set, listed, !!h.interval));
    listed = undefined;
  }
  return { ops };
}

/** A listed set's elements, decoded now if they were listed packed. */
function decoded(listed: ListedElements): readonly SetElement[] {
  return listed instanceof PackedElements ? listed.decode() : listed;
}

/**
 * The element changes from one version of a caller's desired tables to the next, as
 * DesiredChanges.nft names them: per set of `after` (a dynamic set's elements are the packet
 * path's), the elements whose key `before` lacks or holds with another value, and those of
 * `before` whose key `after` lacks. Keys are compared as given (a builder that spells one key
 * one way); a set of `before` that `after` lacks goes with its declaration (the static part).
 */
export function elementChanges(before: readonly DesiredNftTable[], after: readonly DesiredNftTable[]): NftElementChange[] {
  const out: NftElementChange[] = [];
  for (const t of after) {
    const b = before.find((x) => x.family === t.family && x.name === t.name);
    const had = new Map((b?.sets ?? []).map((s) => [s.name, s.elements]));
    for (const set of t.sets) {
      if (set.dynamic) continue;
      const add: SetElement[] = [];
      const del: SetElement[] = [];
      const was = had.get(set.name) ?? [];
      if (set.elements instanceof PackedElements && was instanceof PackedElements) {
        const added = bytesDiff(set.elements, was, del);
        add.push(...(added.length === set.elements.length ? set.elements.decode() : added.map((i) => elementAt(set.elements as PackedElements, i))));
      } else diffByKey(decoded(set.elements), decoded(was), keyAsGiven, false, del, add);
      if (add.length || del.length) out.push({ family: t.family, table: t.name, set: set.name, add, delete: del });
    }
  }
  return out;
}

/**
 * The one element diff by key: `want` against `have` (a caller's last elements, or a listing
 * decoded), keys by `keyOf`: the elements whose key `have` lacks or holds with another value are
 * added (and the other value deleted), those of `have` whose key `want` lacks deleted.
 * `dedupe`: `want` may repeat a key (the first counts).
 */
function diffByKey(want: readonly SetElement[], have: readonly SetElement[], keyOf: (e: SetElement) => string, dedupe: boolean, del: SetElement[], add: SetElement[]): void {
  const byKey = new Map<string, SetElement>();
  for (const e of have) byKey.set(keyOf(e), e);
  const seen = dedupe ? new Set<string>() : undefined;
  for (const e of want) {
    const k = keyOf(e);
    if (seen) {
      if (seen.has(k)) continue;
      seen.add(k);
    }
    const h = byKey.get(k);
    if (h === undefined) add.push(e);
    else {
      byKey.delete(k);
      if (!sameElementValue(h, e)) {
        del.push(h);
        add.push(e);
      }
    }
  }
  for (const h of byKey.values()) del.push(h);
}

/** An element's key parts as one text (a key part never holds a NUL). */
function keyAsGiven(e: SetElement): string {
  return e.key.length === 1 ? String(e.key[0]) : e.key.join('\u0000');
}

/** Two elements of one key hold the same verdict or data. */
export function sameElementValue(a: SetElement, b: SetElement): boolean {
  if (a.verdict || b.verdict) return !!a.verdict && !!b.verdict && a.verdict.code === b.verdict.code && (a.verdict.chain ?? '') === (b.verdict.chain ?? '');
  if (Array.isArray(a.data) && Array.isArray(b.data)) return a.data.length === b.data.length && a.data.every((v, i) => v === (b.data as unknown[])[i]);
  return a.data === b.data || elementValue(a) === elementValue(b);
}

/** The static part's ops from the table as last applied: `pre` before the element ops, `post`
 *  after them. */
export interface StaticOps {
  pre: NftOp[];
  post: NftOp[];
}

/**
 * How the static part differs from the table as last applied: chains and sets added (pre);
 * a chain whose rule list differs flushed and refilled (pre: no rule handle needed); chains and
 * then sets gone deleted (post, after the element deletes that referred to them: a chain is
 * flushed first, and its delete fails while a verdict element still jumps to it).
 * Undefined when another table, a kept chain's hook or a kept set's declaration differs.
 */
export function staticFromLast(desired: DesiredNftTable, last: DesiredNftTable): StaticOps | undefined {
  if (desired.family !== last.family || desired.name !== last.name) return undefined;
  const t = tableOf(desired);
  const sameChains = samePlain(desired.chains, last.chains);
  const sameRules = samePlain(desired.rules, last.rules);
  const pre: NftOp[] = [];
  const post: NftOp[] = [];
  const lastSets = new Map(last.sets.map((s) => [s.name, s]));
  const wantSets = new Set<string>();
  for (const set of desired.sets) {
    wantSets.add(set.name);
    const b = lastSets.get(set.name);
    if (!b) pre.push({ verb: 'add', kind: 'set', set: full(t, declOf(set)) });
    else if (!samePlain(declOf(set), declOf(b))) return undefined;
  }
  if (sameChains && sameRules) {
    for (const s of last.sets) if (!wantSets.has(s.name)) post.push({ verb: 'delete', kind: 'set', set: full(t, declOf(s)) });
    return { pre, post };
  }
  const lastChains = new Map(last.chains.map((c) => [c.name, c]));
  const lastRules = rulesByChain(last.rules);
  const wantRules = rulesByChain(desired.rules);
  const refill: NftOp[] = [];
  for (const c of desired.chains) {
    const b = lastChains.get(c.name);
    if (!b) pre.push({ verb: 'add', kind: 'chain', chain: full(t, c) });
    else if (chainSignature(b) !== chainSignature(c)) return undefined;
    const want = wantRules.get(c.name) ?? [];
    const had = lastRules.get(c.name) ?? [];
    if (b && samePlain(want, had)) continue;
    if (b && had.length) refill.push({ verb: 'flush', kind: 'chain', chain: full(t, c) });
    for (const r of want) refill.push({ verb: 'add', kind: 'rule', rule: full(t, r) });
  }
  pre.push(...refill);
  const wantChains = new Set(desired.chains.map((c) => c.name));
  for (const c of last.chains) {
    if (wantChains.has(c.name)) continue;
    if (lastRules.get(c.name)?.length) post.push({ verb: 'flush', kind: 'chain', chain: full(t, c) });
    post.push({ verb: 'delete', kind: 'chain', chain: full(t, c) });
  }
  for (const s of last.sets) if (!wantSets.has(s.name)) post.push({ verb: 'delete', kind: 'set', set: full(t, declOf(s)) });
  return { pre, post };
}

/** A table's rules by chain, each chain's in order. */
function rulesByChain(rules: DesiredNftTable['rules']): Map<string, DesiredNftTable['rules']> {
  const m = new Map<string, DesiredNftTable['rules']>();
  for (const r of rules) {
    const list = m.get(r.chain);
    if (list) list.push(r);
    else m.set(r.chain, [r]);
  }
  return m;
}

/** A desired set's full spec in table t. */
function spec(t: TableSpec, set: DesiredSet): SetSpec {
  return full(t, declOf(set));
}

/**
 * One set's elements against its listing: a plain set's as the kernel sent them (packedDiff), an
 * interval set's decoded (its CIDRs rebuilt), by canonical key; a changed value (another
 * verdict or data) is a delete and an add.
 */
function setElementOps(spec: SetSpec, set: DesiredSet, listed: ListedElements, interval: boolean): NftOp[] {
  const s = declOf(set);
  let add: SetElement[] | PackedElements = [];
  const del: SetElement[] = [];
  const want = set.elements;
  if (want instanceof PackedElements && listed instanceof PackedElements && !interval) {
    const added = bytesDiff(want, listed, del);
    // all of them (a set someone emptied): as they are
    add = added.length === want.length ? want : added.map((i) => elementAt(want, i));
  } else if (listed instanceof PackedElements && !interval) packedDiff(s, decoded(want), !set.unique, listed, del, add);
  else diffByKey(decoded(want), decoded(listed), (e) => elementKey(s, e), !set.unique, del, add);
  const ops: NftOp[] = [];
  if (del.length) ops.push({ verb: 'delete', kind: 'elements', set: spec, elements: del.map(({ key }) => ({ key })) });
  if (add.length) ops.push({ verb: 'add', kind: 'elements', set: spec, elements: add });
  return ops;
}

/**
 * A plain set's desired elements against its listing as the kernel handed it over: each desired
 * key and value encoded into one scratch buffer, as a commit would write it, and looked up among
 * the listed keys by a hash of their bytes. No object or text per listed element (a resync at
 * 10k services lists a map of ~110k endpoints); a listed element is decoded only to delete it.
 * `dedupe`: the desired elements may repeat a key (the first counts).
 */
function packedDiff(s: SetDecl, want: readonly SetElement[], dedupe: boolean, have: PackedElements, del: SetElement[], add: SetElement[]): void {
  const { bytes, count } = have;
  const map = s.map !== 'verdict' ? s.map : undefined;
  const dataTypes = map && mapTypes(map);
  const klen = keyLength(s.key);
  const scratch = Buffer.alloc(klen + (dataTypes ? keyLength(dataTypes) : 0));
  const sameValue = (i: number, e: SetElement): boolean => {
    if (s.map === 'verdict') {
      const v = have.verdict(i);
      return v === undefined ? !e.verdict : !!e.verdict && v.code === e.verdict.code && (v.chain ?? '') === (e.verdict.chain ?? '');
    }
    if (e.verdict) return false;
    const dlen = have.dataLength(i);
    if (!map || !dataTypes || e.data === undefined) return e.data === undefined && dlen === 0;
    try {
      const n = encodeKeyInto(dataTypes, dataValues(map, e.data), scratch, klen);
      return n === dlen && sameBytes(bytes, have.dataAt(i), scratch, klen, n);
    } catch {
      return false;
    }
  };
  const matched = new Uint8Array(count);
  // a key listed twice is the kernel's one element: the first listing of it is compared
  for (const i of have.repeatedKeys()) matched[i] = 1;
  const seen = dedupe ? new Set<string>() : undefined;
  for (const e of want) {
    if (seen) {
      const k = elementKey(s, e);
      if (seen.has(k)) continue;
      seen.add(k);
    }
    let i = -1;
    try {
      encodeKeyInto(s.key, e.key, scratch, 0);
      i = have.indexOfKey(scratch, 0, klen);
    } catch {
      // not a key the kernel could hold: added, and the kernel layer's checks report it
    }
    if (i < 0) add.push(e);
    else if (!matched[i]) {
      matched[i] = 1;
      if (!sameValue(i, e)) {
        del.push({ key: have.key(i) });
        add.push(e);
      }
    }
  }
  for (let i = 0; i < count; i++) if (!matched[i]) del.push({ key: have.key(i) });
}

/**
 * Elements as bytes against a packed `have` (a listing, or the last step's bytes), by the bytes
 * of their keys: the indexes of `want`'s elements whose key `have` lacks or holds with another
 * value (that one goes to `del`), and `have`'s elements whose key `want` lacks into `del`. No
 * object per element: only what changed is decoded.
 */
function bytesDiff(want: PackedElements, have: PackedElements, del: SetElement[]): number[] {
  const added: number[] = [];
  const matched = new Uint8Array(have.count);
  // a key listed twice is the kernel's one element: the first listing of it is compared
  for (const i of have.repeatedKeys()) matched[i] = 1;
  const wb = want.bytes;
  for (let i = 0; i < want.count; i++) {
    const j = have.indexOfKey(wb, want.keyAt(i), want.keyLength(i));
    if (j < 0) {
      added.push(i);
      continue;
    }
    if (matched[j]) continue;
    matched[j] = 1;
    const n = want.dataLength(i);
    if (n !== have.dataLength(j) || have.verdict(j) !== undefined || !sameBytes(wb, want.dataAt(i), have.bytes, have.dataAt(j), n)) {
      del.push({ key: have.key(j) });
      added.push(i);
    }
  }
  for (let j = 0; j < have.count; j++) if (!matched[j]) del.push({ key: have.key(j) });
  return added;
}

/** Element i of packed elements, decoded. */
function elementAt(p: PackedElements, i: number): SetElement {
  return p.slice(i, i + 1).decode()[0]!;
}

/** The table's own identity, for cleanup. */
export function tableOf(d: Pick<DesiredNftTable, 'family' | 'name'>): TableSpec {
  return { family: d.family, name: d.name };
}
