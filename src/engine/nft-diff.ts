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
type SetDecl = Omit<DesiredSet, 'elements' | 'order' | 'unique'>;

export interface DesiredNftTable {
  family: NftFamily;
  name: string;
  chains: Array<Local<ChainSpec>>;
  sets: Array<
    Local<SetSpec> & {
      elements: SetElement[];
      /**
       * The elements are sorted by this order and unique by it, where it returns 0 exactly for
       * two keys that are the same canonical key (so '6' and 'tcp', or two spellings of one IPv6
       * address, must compare 0 or never both occur). Diffing two sets declared with the same
       * order (an incremental plan from the last clean apply) is then one merge pass that
       * compares element objects and calls `order` only where they differ, instead of a
       * canonical key text per element of both. A listing (a full plan) is compared by the
       * kernel's bytes instead (packedDiff).
       */
      order?: ElementOrder;
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

export interface NftDelta {
  ops: NftOp[];
  /** Why the static part was rebuilt, when it was. */
  rebuilt?: string;
  /** Element changes computed from the last clean apply, without listing the kernel. */
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

/** A set without its elements and their order. */
export function declOf(set: DesiredSet | (Local<SetSpec> & { elements: readonly SetElement[] })): SetDecl {
  const { elements: _, order: _o, unique: _u, ...decl } = set as DesiredSet;
  return decl;
}

/** Everything of the table, in dependency order (chains and sets before what refers to them). */
function build(t: TableSpec, d: DesiredNftTable): NftOp[] {
  const ops: NftOp[] = [{ verb: 'add', kind: 'table', table: t }];
  for (const c of d.chains) ops.push({ verb: 'add', kind: 'chain', chain: full(t, c) });
  for (const set of d.sets) {
    const s = declOf(set);
    const elements = set.order || set.unique ? set.elements : uniqueElements(s, set.elements);
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
    // a plain set's listing compared as listed; an interval set's decoded (its CIDRs rebuilt)
    ops.push(...setElementOps(spec(t, set), set, listed instanceof PackedElements && !h.interval ? { elements: [], packed: listed } : { elements: decoded(listed) }));
    listed = undefined;
  }
  return { ops };
}

/** A listed set's elements, decoded now if they were listed packed. */
function decoded(listed: ListedElements): readonly SetElement[] {
  return listed instanceof PackedElements ? listed.decode() : listed;
}

/**
 * The delta from the table as it was last applied (not from a listing), with no dump at all:
 * the static part's changes (staticFromLast) around the element adds and deletes. Undefined
 * when that part changed in a way only a listing can diff — then the caller lists the kernel
 * and uses diffNft.
 */
export function diffNftFromLast(desired: DesiredNftTable, last: DesiredNftTable): NftDelta | undefined {
  const st = staticFromLast(desired, last);
  if (!st) return undefined;
  const before = new Map(last.sets.map((s) => [s.name, s]));
  const none = { elements: [] as SetElement[] };
  return { ops: [...st.pre, ...elementOps(tableOf(desired), desired, (name) => before.get(name) ?? none), ...st.post] };
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
  const sameChains = desired.chains === last.chains || samePlain(desired.chains, last.chains);
  const sameRules = desired.rules === last.rules || samePlain(desired.rules, last.rules);
  const pre: NftOp[] = [];
  const post: NftOp[] = [];
  const lastSets = new Map(last.sets.map((s) => [s.name, s]));
  const wantSets = new Set<string>();
  for (const set of desired.sets) {
    wantSets.add(set.name);
    const b = lastSets.get(set.name);
    if (!b) pre.push({ verb: 'add', kind: 'set', set: full(t, declOf(set)) });
    else if (b !== set && !samePlain(declOf(set), declOf(b))) return undefined;
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

/** An order of set elements by key: 0 exactly when two keys are the same canonical key. */
export type ElementOrder = (a: SetElement, b: SetElement) => number;

/** The merge of two arrays sorted by `order`: what to delete from `have` and add from `want`. */
function mergeElements(want: readonly SetElement[], have: readonly SetElement[], order: ElementOrder, del: SetElement[], add: SetElement[]): void {
  let i = 0;
  let j = 0;
  while (i < want.length && j < have.length) {
    const a = want[i]!;
    const b = have[j]!;
    if (samePlain(a, b)) {
      i++;
      j++;
      continue;
    }
    const c = order(a, b);
    if (c === 0) {
      if (elementValue(a) !== elementValue(b)) {
        del.push(b);
        add.push(a);
      }
      i++;
      j++;
    } else if (c < 0) {
      add.push(want[i++]!);
    } else {
      del.push(have[j++]!);
    }
  }
  while (i < want.length) add.push(want[i++]!);
  while (j < have.length) del.push(have[j++]!);
}

/** samePlain of two lists of desired tables, a set's elements compared only where the sets
 *  are not the very same objects. */
export function sameNftTables(a: readonly DesiredNftTable[], b: readonly DesiredNftTable[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x === y) continue;
    const { sets: xs, ...xt } = x;
    const { sets: ys, ...yt } = y;
    if (!samePlain(xt, yt) || xs.length !== ys.length) return false;
    for (let j = 0; j < xs.length; j++) if (xs[j] !== ys[j] && !samePlain(xs[j], ys[j])) return false;
  }
  return true;
}

/** A desired set's full spec in table t. */
function spec(t: TableSpec, set: DesiredSet): SetSpec {
  return full(t, declOf(set));
}

/** Every non-dynamic set's element ops against what it had (`had`, by name). */
function elementOps(t: TableSpec, desired: DesiredNftTable, had: (set: string) => SetBefore): NftOp[] {
  const ops: NftOp[] = [];
  // a dynamic set's elements are the packet path's (a rule's dynset), not the desired state's
  for (const set of desired.sets) if (!set.dynamic) ops.push(...setElementOps(spec(t, set), set, had(set.name)));
  return ops;
}

/** What a set had: its elements (with their order, when they are the last clean apply's), or
 *  its listing as the kernel sent it. */
type SetBefore = { readonly elements: readonly SetElement[]; readonly order?: ElementOrder; readonly packed?: PackedElements };

/** One set's elements: by canonical key; a changed value (another verdict/data) is a delete +
 *  add. */
function setElementOps(spec: SetSpec, set: DesiredSet, beforeSet: SetBefore): NftOp[] {
  const ops: NftOp[] = [];
  const s = declOf(set);
  const elements = set.elements;
  const before = beforeSet.elements;
  if (elements === before) return ops;
  const order = set.order;
  if (beforeSet.packed) {
    const add: SetElement[] = [];
    const del: SetElement[] = [];
    packedDiff(s, elements, !set.unique && order === undefined, beforeSet.packed, del, add);
    if (del.length) ops.push({ verb: 'delete', kind: 'elements', set: spec, elements: del });
    if (add.length) ops.push({ verb: 'add', kind: 'elements', set: spec, elements: add });
    return ops;
  }
  if (order !== undefined && beforeSet.order === order) {
    // both sorted by the same order (the last clean apply's): one merge pass, no key texts
    const add: SetElement[] = [];
    const del: SetElement[] = [];
    mergeElements(elements, before, order, del, add);
    if (del.length) ops.push({ verb: 'delete', kind: 'elements', set: spec, elements: del.map(({ key }) => ({ key })) });
    if (add.length) ops.push({ verb: 'add', kind: 'elements', set: spec, elements: add });
    return ops;
  }
  // The elements before by key; a desired element takes its key's entry out, so what is left
  // is what to delete. A key seen twice among the desired elements is a duplicate (the first
  // counts): tracked only for a set declared neither unique nor sorted.
  const have = new Map<string, SetElement>();
  for (const e of before) have.set(elementKey(s, e), e);
  const add: SetElement[] = [];
  const del: SetElement[] = [];
  const seen = set.unique || order !== undefined ? undefined : new Set<string>();
  for (const e of elements) {
    const k = elementKey(s, e);
    if (seen) {
      if (seen.has(k)) continue;
      seen.add(k);
    }
    const h = have.get(k);
    if (!h) add.push(e);
    else {
      have.delete(k);
      if (elementValue(h) !== elementValue(e)) {
        del.push(h);
        add.push(e);
      }
    }
  }
  for (const h of have.values()) del.push(h);
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

/** The table's own identity, for cleanup. */
export function tableOf(d: Pick<DesiredNftTable, 'family' | 'name'>): TableSpec {
  return { family: d.family, name: d.name };
}
