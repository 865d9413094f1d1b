// The engine's nftables tables: checked (what the kernel layer would refuse is left out),
// observed (listed, or known from the last clean apply while the ruleset generation has not
// moved), diffed (nft-diff) and committed. Between syncs it keeps the static part (chains,
// rules, set declarations) of the tables last applied without an error, as its own copy, and
// the ruleset generation at which the kernel has exactly those: never their elements. Element
// changes come from the caller (DesiredChanges.nft) or from a listing.
import { NetlinkError } from '../errors.js';
import { NftTransaction, PackedElements, type NftablesApi, type NftOp, type NftRuleset, type SetInfo } from '../kernel/nftables.js';
import type { NftFamily } from '../kernel/nft-types.js';
import { declOf, diffNftSteps, elementKey, staticFromLast, type DesiredNftTable, type ListedElements, type NftDelta, type StaticOps } from './nft-diff.js';
import type { Phase, Planned, PlanScope, Reconciler } from './reconciler.js';
import type { InvalidObject, NftElementChange, SyncReport } from './types.js';
import { checkNftElements, checkNftTable } from './validate.js';

/**
 * An element op of a plain (non-interval) set with more elements than this is queued as pieces
 * of this many: the transaction hands its op stream to the addon's encoder every 256 KiB
 * (NftTransaction), and an op is never split there, so one op of the whole set (~100k elements
 * at 10k services) would be written to the stream and encoded whole at once; in pieces the
 * encoding runs on the thread pool while the rest is queued, and the sync's peak memory is
 * lower.
 */
export const NFT_ELEMENTS_PIECE = 256;

export interface NftReconcilerOptions {
  /** EngineOptions.createNftInTransactionsOf */
  createInTransactionsOf?: number;
}

/** A plan's tables before the kernel is read. */
export interface NftChecked {
  /** The desired tables without what the kernel layer would refuse. */
  tables: DesiredNftTable[];
  invalid: InvalidObject[];
  /** Chains left out, by "family table". */
  droppedChains: ReadonlyMap<string, ReadonlySet<string>>;
  /** The static part's changes from the last clean apply, per table, when element changes are
   *  given on it (the delta is then known without a listing while the kernel is known to have
   *  those tables: an incremental plan, or nothing committed since). */
  known: StaticOps[] | undefined;
  changes: readonly NftElementChange[] | undefined;
  incremental: boolean;
}

/** What a plan read of the tables (nothing: no table): the deltas from the last clean apply
 *  without a listing, or the listed tables' deltas and the generation at which every dump of
 *  the listing saw the kernel (absent: not one). */
export type NftObserved = { elementsOnly?: NftDelta[]; listed?: { deltas: NftDelta[]; genId?: number } };

/** A plan's nftables part. */
export interface NftPlanned extends Planned {
  /** The tables whose static part apply records as applied cleanly when the delta's writes
   *  all succeed (absent: the last one's stays). */
  desired?: DesiredNftTable[];
  /** The ruleset generation at which the plan's view of the tables is exact, when known. */
  base?: number;
}

export class NftReconciler implements Reconciler<NftChecked, NftObserved, NftPlanned> {
  readonly kind = 'nft';
  /** The static part of the tables the last sync applied without an error (a copy: elements
   *  empty). A plan with element changes on it neither lists nor diffs; a plan without them
   *  lists (and so repairs what others changed). */
  private clean: DesiredNftTable[] | undefined;
  /** The ruleset generation at which the owned tables were exactly the last clean apply (known
   *  when they were listed there, or when a commit of ours was the only one since: the
   *  generation moved by exactly its transactions). Any commit by anyone moves it: while it has
   *  not moved, a full plan with element changes takes them instead of listing the tables. */
  private gen: number | undefined;
  /** Whether the static part of the tables last checked had no problem: a plan with element
   *  changes alone (the static part the base's) takes them as they are. */
  private checkedClean = false;

  constructor(
    private readonly nft: NftablesApi | undefined,
    private readonly opts: NftReconcilerOptions = {},
  ) {}

  /** Checks the desired tables (their static part; their elements when a delta writes them),
   *  and finds the static part's changes from the last clean tables when element changes are given. */
  check({ desired, changes, changed }: PlanScope): NftChecked {
    const given = desired.nft === undefined ? [] : [desired.nft].flat();
    const last = this.clean;
    const staticsOf = (ts: readonly DesiredNftTable[]) => {
      if (changes?.nft === undefined || last === undefined || last.length !== ts.length) return undefined;
      const st = ts.map((t, i) => staticFromLast(t, last[i]!));
      return st.every((x): x is StaticOps => x !== undefined) ? st : undefined;
    };
    const givenStatics = staticsOf(given);
    // The last verdict of the static checks holds while the static part is the last one's.
    const { tables, invalid, droppedChains } = this.checkTables(given, givenStatics?.every((st) => !st.pre.length && !st.post.length) ?? false);
    const all = this.nft ? tables : [];
    const known = all.length === given.length && all.every((t, i) => t === given[i]) ? givenStatics : staticsOf(all);
    return { tables: all, invalid, droppedChains, known, changes: changes?.nft, incremental: changed !== undefined };
  }

  /**
   * Nothing when element changes are given on the last clean tables and the kernel is known to
   * have those; else the tables listed and diffed: each table's static part (chains, set
   * declarations, rules) in one listing, then each set's elements when the diff asks for them
   * (diffNftSteps), so one set's listing is alive at a time (a restart over its own tables at
   * 10k services lists ~171k elements, 110k of them in one map). The view is exact at the
   * static listing's generation only if the generation is the same after the last dump: another
   * commit in between leaves the plan's base unknown.
   */
  async observe(c: NftChecked): Promise<NftObserved> {
    // A full plan takes the changes only if no transaction (ours or anyone's) has been
    // committed since the generation at which the tables were exactly the last clean ones: one
    // GETGEN instead of a dump of every element (a periodic resync at 10k services: ~170k).
    const fromClean = c.known !== undefined && c.tables.length > 0 && (c.incremental || (this.gen !== undefined && (await this.nft!.genId()) === this.gen));
    const elementsOnly = fromClean ? elementDeltas(c.tables, c.known!, c.changes!) : undefined;
    if (elementsOnly) return { elementsOnly };
    if (!c.tables.length) return {};
    const nft = this.nft!;
    const statics: NftRuleset[] = [];
    for (const t of c.tables) statics.push(await listOwnedTable(nft, t));
    const deltas: NftDelta[] = [];
    let consistent = true;
    for (let i = 0; i < c.tables.length; i++) {
      const steps = diffNftSteps(c.tables[i]!, statics[i]!);
      let step = steps.next();
      while (!step.done) {
        const { listed, repeats } = await setElements(nft, step.value);
        if (repeats) consistent = false;
        step = steps.next(listed);
        // the diff is done with a set's listing once it asks for the next set or returns
        if (listed instanceof PackedElements) listed.release();
      }
      deltas.push(step.value);
    }
    const gen = statics[0]!.genId;
    const exact = consistent && gen !== 0 && statics.every((r) => r.genId === gen) && (await nft.genId()) === gen;
    return { listed: { deltas, ...(exact ? { genId: gen } : {}) } };
  }

  /** The plan's nftables part from the deltas observed. */
  diff(c: NftChecked, o: NftObserved): NftPlanned {
    const out: NftPlanned = { shown: {}, invalid: c.invalid };
    if (o.listed) {
      if (o.listed.genId !== undefined) out.base = o.listed.genId;
      const deltas = o.listed.deltas;
      // Every table's delta goes into the same transaction (tables created from nothing: their
      // rules in the last one, see createNftInTransactionsOf): the glue changes all at once.
      const rebuilt = deltas.map((d, i) => (d.rebuilt ? `${c.tables[i]!.family} ${c.tables[i]!.name}: ${d.rebuilt}` : '')).filter(Boolean);
      const created = deltas.every((d) => d.created) && c.tables.every((t) => t.chains.every((ch) => ch.hook?.policy !== 'drop'));
      out.shown.nft = { ops: deltas.flatMap((d) => d.ops), ...(rebuilt.length ? { rebuilt: rebuilt.join('; ') } : {}), ...(created ? { created } : {}) };
      out.desired = c.tables;
    } else if (o.elementsOnly) {
      // the tables are the ones last applied cleanly
      out.unchanged = c.incremental && o.elementsOnly.every((d) => !d.ops.length);
      if (out.unchanged) return out;
      out.shown.nft = { ops: o.elementsOnly.flatMap((d) => d.ops), fromLast: true };
      // the static part to keep, when it changed (a copy of it costs ~1 ms at 10k services)
      if (c.known!.some((st) => st.pre.length > 0 || st.post.length > 0)) out.desired = c.tables;
      if (this.gen !== undefined) out.base = this.gen;
    }
    if (out.shown.nft?.ops.length) out.invalid = [...c.invalid, ...keepNftElements(out.shown.nft, c.droppedChains)];
    return out;
  }

  /** Commits a plan's delta in the main phase; its writes and errors go to the report. */
  async apply(phase: Phase, p: NftPlanned, report: SyncReport): Promise<void> {
    const delta = p.shown.nft;
    if (phase !== 'main' || !delta || !this.nft || !delta.ops.length) return;
    const nft = this.nft;
    // The owned tables stay known exactly only if the generation after this commit is the
    // plan's plus one per transaction of it: no other commit went in since the plan's view.
    this.gen = undefined;
    const res = await this.commitDelta(nft, delta);
    if (p.base !== undefined && !res.errors.length && res.transactions.length > 0 && res.transactions.every((t) => t.committed)) {
      const to = await nft.genId();
      if (to === p.base + res.transactions.length) this.gen = to;
    }
    report.nft.errors.push(...res.errors);
    delta.ops.forEach((o, i) => {
      if (!res.ok(i)) return;
      const name = `${o.verb}-${o.kind}`;
      report.nft.ops[name] = (report.nft.ops[name] ?? 0) + 1;
      report.nft.writes++;
    });
  }

  /** After apply: the static part of what applied cleanly is the base of the next plans with
   *  element changes; with an error the tables are listed again next time. */
  settle(p: NftPlanned, report: SyncReport): void {
    const failed = report.nft.errors.length > 0;
    if (failed) this.clean = undefined;
    else if (p.desired) this.clean = p.desired.map(staticCopy);
    // Found as wanted: exact at the listing's (or the last clean apply's) generation.
    if (!failed && p.shown.nft && !p.shown.nft.ops.length && p.base !== undefined) this.gen = p.base;
    if (!this.clean) this.gen = undefined;
  }

  /** The desired tables without what the kernel layer would refuse (their static part; the
   *  last verdict again when `asLast` and it found nothing). */
  private checkTables(given: readonly DesiredNftTable[], asLast: boolean): Pick<NftChecked, 'tables' | 'invalid' | 'droppedChains'> {
    if (asLast && this.checkedClean) return { tables: [...given], invalid: [], droppedChains: new Map() };
    const invalid: InvalidObject[] = [];
    const tables: DesiredNftTable[] = [];
    const droppedChains = new Map<string, ReadonlySet<string>>();
    for (const t of given) {
      const v = checkNftTable(t);
      invalid.push(...v.invalid);
      if (!v.valid) continue;
      tables.push(v.valid);
      if (v.droppedChains.size) droppedChains.set(`${t.family} ${t.name}`, v.droppedChains);
    }
    this.checkedClean = tables.length === given.length && tables.every((t, i) => t === given[i]) && !droppedChains.size;
    return { tables, invalid, droppedChains };
  }

  /**
   * Commits a delta: as one transaction, or, for tables created from nothing with
   * createInTransactionsOf, everything but the rules in transactions of that much work (an op or
   * a set element each) and then the rules in one. Each transaction is a commit of its own, one
   * after the other, stopping at the first that fails; the next one is encoded while the kernel
   * commits one, so at most two transactions' op streams and netlink batches exist at a time
   * (all of a created 10k × 10 table's at once were ~20 MB).
   */
  private async commitDelta(nft: NftablesApi, delta: NftDelta): Promise<Committed> {
    const units = this.opts.createInTransactionsOf;
    const ops = delta.ops;
    if (!delta.created || !units) return committed(nft, queued(ops), ops.length);
    const body: number[] = [];
    const rules: number[] = [];
    ops.forEach((o, i) => (o.kind === 'rule' ? rules : body).push(i));
    const groups = [...inTransactionsOf(ops, body, units), { ops: rules.map((i) => ops[i]!), owner: rules }];
    const ok = new Uint8Array(ops.length).fill(1);
    const errors: NetlinkError[] = [];
    const transactions: Array<{ committed: boolean }> = [];
    const back = (e: NetlinkError, map: readonly number[]) => (e.index === undefined ? e : new NetlinkError({ ...e, message: e.message, index: map[e.index]! }));
    const todo = groups.filter((g) => g.ops.length);
    // One after a failure is queued, and never sent.
    let next: Queued | undefined = todo.length ? queued(todo[0]!.ops) : undefined;
    for (let k = 0; k < todo.length; k++) {
      const g = todo[k]!;
      const sent = committed(nft, next!, g.ops.length);
      next = k + 1 < todo.length ? queued(todo[k + 1]!.ops) : undefined;
      const r = await sent;
      g.ops.forEach((_, j) => r.ok(j) || (ok[g.owner[j]!] = 0));
      errors.push(...r.errors.map((e) => back(e, g.owner)));
      transactions.push(...r.transactions);
      if (r.errors.length > 0 || !r.transactions.every((t) => t.committed)) {
        next?.tx.release();
        for (const later of todo.slice(k + 1)) for (const i of later.owner) ok[i] = 0;
        break;
      }
    }
    return { ok: (i) => ok[i] === 1, errors, transactions };
  }

}

/** A transaction queued from ops, with the index in them of each op it queued. */
interface Queued {
  tx: NftTransaction;
  owner: number[];
}

/** The ops queued as one transaction, an element op of a plain set with more than
 *  NFT_ELEMENTS_PIECE elements as pieces (still one transaction: the kernel gets the same
 *  elements in the same batch). */
function queued(ops: readonly NftOp[]): Queued {
  const tx = new NftTransaction();
  const owner: number[] = [];
  ops.forEach((op, i) => {
    if (op.kind !== 'elements' || op.set.interval || op.elements.length <= NFT_ELEMENTS_PIECE) {
      tx.queue(op);
      owner.push(i);
      return;
    }
    for (let at = 0; at < op.elements.length; at += NFT_ELEMENTS_PIECE) {
      tx.queue({ ...op, elements: op.elements.slice(at, at + NFT_ELEMENTS_PIECE) });
      owner.push(i);
    }
  });
  return { tx, owner };
}

/** A queued transaction committed. Statuses and error indexes are those of its `n` ops: an op
 *  is ok when all its pieces are. */
async function committed(nft: NftablesApi, { tx, owner }: Queued, n: number): Promise<Committed> {
  const res = await nft.commit(tx);
  // The stream's buffer (4 MiB at 10k services) goes now, not after the IPVS writes.
  tx.release();
  const ok = new Uint8Array(n).fill(1);
  for (let j = 0; j < owner.length; j++) if (res.status(j) !== 'ok') ok[owner[j]!] = 0;
  const errors = res.errors.map((e) => (e.index === undefined || owner[e.index] === e.index ? e : new NetlinkError({ ...e, message: e.message, index: owner[e.index]! })));
  return { ok: (i) => ok[i] === 1, errors, transactions: res.transactions };
}

/** The ops at these indexes in transactions of at most `units` of work (an op, or a set
 *  element: an element op is split where a transaction fills), in order; `owner` maps each
 *  transaction's ops back to their indexes. */
function inTransactionsOf(all: readonly NftOp[], indexes: readonly number[], units: number): Array<{ ops: NftOp[]; owner: number[] }> {
  const out: Array<{ ops: NftOp[]; owner: number[] }> = [];
  let cur = { ops: [] as NftOp[], owner: [] as number[] };
  let room = units;
  const next = () => {
    if (cur.ops.length) out.push(cur);
    cur = { ops: [], owner: [] };
    room = units;
  };
  for (const i of indexes) {
    const op = all[i]!;
    if (op.kind !== 'elements' || op.set.interval || op.elements.length === 0) {
      // one piece (an interval set's elements are never split), alone if it is larger
      const n = op.kind === 'elements' ? op.elements.length : 1;
      if (n > room) next();
      cur.ops.push(op);
      cur.owner.push(i);
      room -= n;
      continue;
    }
    for (let at = 0; at < op.elements.length; ) {
      if (room <= 0) next();
      const n = Math.min(room, op.elements.length - at);
      cur.ops.push({ ...op, elements: op.elements.slice(at, at + n) });
      cur.owner.push(i);
      room -= n;
      at += n;
    }
  }
  next();
  return out;
}

interface Committed {
  ok(i: number): boolean;
  errors: NetlinkError[];
  transactions: ReadonlyArray<{ committed: boolean }>;
}

/** A desired table's static part, as a copy: its sets without elements. */
function staticCopy(t: DesiredNftTable): DesiredNftTable {
  const { sets, ...rest } = t;
  return { ...structuredClone(rest), sets: sets.map((set) => ({ ...structuredClone(declOf(set)), elements: [] })) };
}

/** Each table's delta from the last clean apply: the static part's changes (`statics`, by
 *  staticFromLast) around the element changes given, per change its deletes, then its adds.
 *  undefined when a change names a set that is not among the tables. */
function elementDeltas(tables: readonly DesiredNftTable[], statics: readonly StaticOps[], changes: readonly NftElementChange[]): NftDelta[] | undefined {
  const elements = tables.map((): NftOp[] => []);
  for (const c of changes) {
    const i = tables.findIndex((t) => t.family === c.family && t.name === c.table);
    const set = tables[i]?.sets.find((x) => x.name === c.set);
    if (!set) return undefined;
    const spec = { ...declOf(set), family: c.family, table: c.table };
    if (c.delete.length) elements[i]!.push({ verb: 'delete', kind: 'elements', set: spec, elements: c.delete.map(({ key }) => ({ key })) });
    if (c.add.length) elements[i]!.push({ verb: 'add', kind: 'elements', set: spec, elements: c.add instanceof PackedElements ? c.add : [...c.add] });
  }
  return statics.map((st, i) => ({ ops: [...st.pre, ...elements[i]!, ...st.post] }));
}

/**
 * The element ops of an nftables delta without the elements the façade would refuse: added
 * ones are reported and left out (with any delete of the kernel's element of the same key: it
 * stays as it is); a delete of a key the façade refuses names nothing the kernel can have.
 * Only the delta's elements are checked: the new ones.
 */
function keepNftElements(delta: NftDelta, droppedChains: ReadonlyMap<string, ReadonlySet<string>>): InvalidObject[] {
  const invalid: InvalidObject[] = [];
  const kept = new Map<string, Set<string>>();
  const out: Array<NftOp | undefined> = delta.ops.slice();
  let changed = false;
  const setKey = (s: { family: string; table: string; name: string }) => `${s.family} ${s.table} ${s.name}`;
  // the adds first: the deletes they hold back come before them in the delta
  for (const verb of ['add', 'delete'] as const) {
    for (let i = 0; i < out.length; i++) {
      const o = out[i];
      // elements as bytes were encoded by their builder: nothing the façade would refuse
      if (o?.kind !== 'elements' || o.verb !== verb || !Array.isArray(o.elements)) continue;
      const t = { family: o.set.family, name: o.set.table };
      const r = checkNftElements(t, o.set, o.elements, verb, droppedChains.get(`${t.family} ${t.name}`));
      const keep = verb === 'delete' ? kept.get(setKey(o.set)) : undefined;
      if (!r.bad.size && !keep) continue;
      if (verb === 'add') {
        invalid.push(...r.invalid);
        if (r.keptKeys.length) {
          let ks = kept.get(setKey(o.set));
          if (!ks) kept.set(setKey(o.set), (ks = new Set()));
          for (const x of r.keptKeys) ks.add(x);
        }
      }
      const elements = o.elements.filter((e, j) => !r.bad.has(j) && !keep?.has(elementKey(o.set, e)));
      if (elements.length === o.elements.length) continue;
      out[i] = elements.length ? { ...o, elements } : undefined;
      changed = true;
    }
  }
  if (changed) delta.ops = out.filter((o): o is NftOp => o !== undefined);
  return invalid;
}

/** Dumps of a set whose keys repeat (PackedElements.repeatedKeys) before its listing is taken as it is. */
export const NFT_LISTING_TRIES = 3;

/**
 * A listed set's elements, as the kernel has them now. A set gone since the static listing
 * (someone committed: the generation moved, so the plan's base is unknown) has none. A listing
 * that repeats keys was dumped while the kernel resized the set's hash table (it misses as many
 * elements as it repeats): dumped again, NFT_LISTING_TRIES times at most; `repeats` when the last
 * one still does (the diff compares it, and the plan's view of the table is not exact).
 */
async function setElements(nft: NftablesApi, set: SetInfo): Promise<{ listed: ListedElements; repeats: boolean }> {
  const { handle: _h, elements: _e, ...spec } = set;
  for (let tries = 1; ; tries++) {
    let listed: PackedElements;
    try {
      listed = await nft.listElements(spec);
    } catch (e) {
      if ((e as NetlinkError)?.code === 'ENOENT') return { listed: [], repeats: false };
      throw e;
    }
    // an interval set's start and end elements may share a key; its tree is never resized
    const repeats = !set.interval && listed.repeatedKeys().length > 0;
    if (!repeats || tries >= NFT_LISTING_TRIES) return { listed, repeats };
    listed.release();
  }
}

/**
 * One owned table as the kernel has it, without its sets' elements (setElements lists them).
 * A table that is not there lists as an empty ruleset
 * at the generation it was found absent at: listed twice with that same generation read in
 * between (the listing of a missing table carries none), else at generation 0, which the
 * kernel never has (not known). (A table-filtered listing of a missing table fails with
 * ENOENT: the kernel's filtered dumps look the table up first.)
 */
async function listOwnedTable(nft: NftablesApi, t: { family: NftFamily; name: string }): Promise<NftRuleset> {
  const absent = (genId: number): NftRuleset => ({ genId, tables: [], chains: [], sets: [], rules: [] });
  const list = () =>
    nft.list({ family: t.family, table: t.name, elements: false }).then(
      (r) => r,
      (e: unknown) => {
        if ((e as NetlinkError)?.code === 'ENOENT') return undefined;
        throw e;
      },
    );
  const first = await list();
  if (first) return first;
  const gen = await nft.genId();
  const again = await list();
  if (again) return again;
  return absent((await nft.genId()) === gen ? gen : 0);
}
