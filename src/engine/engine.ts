// The sync engine: desired state -> one read per object kind -> pure diffs -> batched apply.
// plan() reads the kernel and computes every write (no write happens: it is also the dry run);
// apply() performs a plan in a safe order; sync() is both. Each object kind has its reconciler
// (ipvs-, addresses-, routes-, ipsets-, nft-reconciler), all driven through one protocol
// (reconciler.ts: check, observe, diff, apply by phase, settle); the engine orders them, keeps
// each plan's per-kind state to itself, and reports what they did.
import type { ConntrackApi } from '../kernel/conntrack.js';
import type { IpSet, IpSetOp, IpSetsApi } from '../kernel/ipsets.js';
import type { IpvsApi, IpvsOp, Service } from '../kernel/ipvs.js';
import type { LinkOp, LinksApi } from '../kernel/links.js';
import type { NftOp, NftablesApi } from '../kernel/nftables.js';
import type { RouteOp, RoutesApi } from '../kernel/routes.js';
import { AddressReconciler } from './addresses-reconciler.js';
import { emptyReport } from './apply-batch.js';
import { IpSetsReconciler } from './ipsets-reconciler.js';
import { IpvsReconciler } from './ipvs-reconciler.js';
import { serviceKey, type DesiredService } from './ipvs-model.js';
import { NftReconciler } from './nft-reconciler.js';
import type { Planned, PlanPart, PlanReads, Reconciler } from './reconciler.js';
import { RoutesReconciler } from './routes-reconciler.js';
import { keyable } from './validate.js';

export { keyToId } from './ipvs-model.js';
export { IPVS_APPLY_CHUNK } from './ipvs-reconciler.js';
export { NFT_ELEMENTS_PIECE } from './nft-reconciler.js';
export type { KindReport } from './apply-batch.js';
export type { DesiredChanges, DesiredState, InvalidObject, NftElementChange, Ownership, Plan, ReportKind, SyncReport } from './types.js';
export { REPORT_KINDS, reportWrites } from './types.js';
import type { DesiredChanges, DesiredState, Ownership, Plan, SyncReport } from './types.js';

/** Changes naming these service keys, each with the service `services` has under it (a scan
 *  of the list): the form of DesiredChanges for a caller that knows the keys alone. */
export function changesOf(services: readonly DesiredService[], keys: ReadonlySet<string>): DesiredChanges {
  const out = new Map<string, DesiredService | undefined>();
  for (const k of keys) out.set(k, undefined);
  for (const s of services) {
    if (!keyable(s)) continue;
    const k = serviceKey(s);
    if (keys.has(k)) out.set(k, s);
  }
  return { services: out };
}

export interface EngineKernel {
  /** Absent on a kernel without IPVS (an nftables data plane): desired virtual servers are
   *  then refused (SyncReport.invalid), and nothing of IPVS is read or recorded. */
  ipvs?: IpvsApi;
  links?: LinksApi;
  routes?: RoutesApi;
  ipsets?: IpSetsApi;
  nft?: NftablesApi;
  conntrack?: ConntrackApi;
}

export interface EngineOptions extends Ownership {
  /** A draining TCP destination is deleted after this even with connections (default 15 min). */
  drainTimeoutMs?: number;
  /**
   * When a sync creates the owned tables from nothing (none of them in the kernel, as on a
   * node's first sync), their tables, chains, sets and elements go in transactions of at most
   * this much work each (an op or a set element: one unit), and then all their rules in one
   * last transaction. A rule is what makes the glue act, so traffic sees none of it and then
   * all of it, as with one transaction; what it spares is one commit that holds a CPU in the
   * kernel for the whole load (a node's first glue is ~10 set elements per service), keeping the
   * daemon's thread off that CPU meanwhile. Applies only when no base chain of theirs
   * drops by policy (an empty one would drop everything until the rules came). If a
   * transaction fails, the later ones and the rules are not sent: the tables stay inert, and
   * the next sync, finding them, completes them in one transaction. Default: off (one
   * transaction).
   */
  createNftInTransactionsOf?: number;
  now?: () => number;
  /**
   * A full plan reads the kernel's destinations this many services at a time (with an IPVS
   * handle that has destinationsOf), diffing each slice before reading the next: a periodic full
   * resync then holds one slice's destinations, not the whole table's (at 10k services × 10,
   * ~35 MB of objects and native storage). Default 256: a slice's ~2.5k destination objects
   * (well under a MB) are garbage before the young generation is collected, instead of being
   * promoted to the old one, which lowers the daemon's peak RSS during a resync
   * (docs/performance.md).
   */
  observeSlice?: number;
}

export type PlannedWrite =
  | { kind: 'ipvs'; op: IpvsOp }
  | { kind: 'link'; op: LinkOp }
  | { kind: 'route'; op: RouteOp }
  | { kind: 'ipset'; op: IpSetOp }
  | { kind: 'nft'; op: NftOp };

/** The writes of a plan as one flat list (what `--dry-run --json` prints). */
export function planWrites(p: Plan): PlannedWrite[] {
  return [
    ...(p.addresses?.early ?? []).map((op) => ({ kind: 'link' as const, op })),
    ...(p.routes?.early ?? []).map((op) => ({ kind: 'route' as const, op })),
    ...(p.ipsets?.early ?? []).map((op) => ({ kind: 'ipset' as const, op })),
    ...(p.nft?.ops ?? []).map((op) => ({ kind: 'nft' as const, op })),
    ...p.ipvs.ops.map((op) => ({ kind: 'ipvs' as const, op })),
    ...(p.ipsets?.late ?? []).map((op) => ({ kind: 'ipset' as const, op })),
    ...(p.routes?.late ?? []).map((op) => ({ kind: 'route' as const, op })),
    ...(p.addresses?.late ?? []).map((op) => ({ kind: 'link' as const, op })),
  ];
}

/** The kinds' writes as a plan shows them, in write order: an early/late pair two kinds write
 *  (the IPVS record's ipset writes and the ipsets kind's) is the first's early writes, the
 *  second's, then the second's late ones, the first's. */
function inWriteOrder(parts: readonly PlanPart[]): PlanPart {
  const out: Record<string, { early: unknown[]; late: unknown[] }> = {};
  for (const [name, d] of parts.flatMap((p) => Object.entries(p) as Array<[string, { early: unknown[]; late: unknown[] }]>)) {
    const had = out[name];
    out[name] = had ? { early: [...had.early, ...d.early], late: [...d.late, ...had.late] } : d;
  }
  return out as PlanPart;
}

/**
 * The engine: one reconciler per kind (IPVS, VIP addresses, routes, ipsets, nftables), each
 * checking, observing, diffing and writing its kind and keeping what it needs between syncs
 * (reconciler.ts); plan() runs them (the kernel read concurrently) and apply() writes in a
 * safe order.
 */
export class Engine {
  private readonly ipvs: IpvsReconciler;
  /** The kinds in the report's order (SyncReport, invalid objects). */
  private readonly kinds: readonly Reconciler[];
  /** The kinds in write order (Phase): early in this order, main and late in the reverse (the
   *  record before IPVS creates and forgotten after it deleted; nftables' commit started first). */
  private readonly writeOrder: readonly Reconciler[];
  /** Each plan's parts by kind, as the reconcilers planned them (apply's input). */
  private readonly planned = new WeakMap<Plan, Map<Reconciler, Planned>>();

  constructor(
    private readonly kernel: EngineKernel,
    opts: EngineOptions = {},
  ) {
    const ipvs = (this.ipvs = new IpvsReconciler(kernel.ipvs, kernel.ipsets, kernel.conntrack, {
      ...(opts.managedCidrs ? { managedCidrs: opts.managedCidrs } : {}),
      ...(opts.excludeCidrs ? { excludeCidrs: opts.excludeCidrs } : {}),
      ...(opts.managedFwmarks ? { managedFwmarks: opts.managedFwmarks } : {}),
      ...(opts.drainTimeoutMs !== undefined ? { drainTimeoutMs: opts.drainTimeoutMs } : {}),
      ...(opts.now ? { now: opts.now } : {}),
      ...(opts.observeSlice !== undefined ? { observeSlice: opts.observeSlice } : {}),
    }));
    const addresses = new AddressReconciler(kernel.links);
    const routes = new RoutesReconciler(kernel.routes);
    const ipsets = new IpSetsReconciler(kernel.ipsets, opts.ipsetPrefix);
    const nft = new NftReconciler(kernel.nft, {
      ...(opts.createNftInTransactionsOf !== undefined ? { createInTransactionsOf: opts.createNftInTransactionsOf } : {}),
    });
    this.kinds = [ipvs, addresses, routes, ipsets, nft];
    this.writeOrder = [addresses, routes, ipvs, ipsets, nft];
  }

  /** Whether the engine may change or delete an observed IPVS service (`key`: its
   *  serviceKey, when the caller has it): recorded or claimed by an option, and not excluded. */
  owns(s: Service, key: string = serviceKey(s)): boolean {
    return this.ipvs.owns(s, key);
  }

  /**
   * Reads the kernel (one dump per object kind; with `changes`, one GET per changed IPVS
   * service instead of the IPVS dump, see DesiredChanges) and computes every write. Writes
   * nothing. `changes` may also be the keys of the changed services alone: their desired
   * services are then found by a scan of desired.services (changesOf). The plan's ops may hold
   * the desired objects themselves: change none of them before the plan is applied (the engine
   * keeps its own copy of what it keeps between syncs).
   */
  async plan(desired: DesiredState, changes?: DesiredChanges | ReadonlySet<string>): Promise<Plan> {
    const t0 = performance.now();
    const ch = changes === undefined ? undefined : changes instanceof Set ? changesOf(desired.services, changes) : (changes as DesiredChanges);
    const changed: ReadonlySet<string> | undefined = ch?.services && new Set(ch.services.keys());
    // Each kind checked (what the kernel layer would refuse is left out of what is diffed, and
    // reported) and what to read decided. Incremental: a kind whose desired state is what was
    // last applied cleanly is left alone.
    const scope = { desired, ...(ch ? { changes: ch } : {}), ...(changed ? { changed } : {}) };
    const checked = this.kinds.map((k) => k.check(scope));
    const observed = await this.observe(checked);
    const t1 = performance.now();
    // Diffed IPVS last (it runs for a while: about a second at 10k services), each kind's
    // listing let go once it is diffed.
    const planned = new Map<Reconciler, Planned>();
    for (let i = this.kinds.length - 1; i >= 0; i--) {
      const k = this.kinds[i]!;
      planned.set(k, await k.diff(checked[i], observed[i]));
      observed[i] = undefined;
    }
    const readMs = [...planned.values()].reduce((n, p) => n + (p.readMs ?? 0), 0);
    const shown = inWriteOrder(this.writeOrder.map((k) => planned.get(k)!.shown));
    const plan: Plan = { mode: changed ? 'incremental' : 'full', ...shown, ipvs: shown.ipvs!, observeMs: t1 - t0 + readMs, diffMs: 0 };
    if (changed) plan.scope = [...changed];
    const unchanged = this.kinds.filter((k) => planned.get(k)!.unchanged).map((k) => k.kind) as NonNullable<Plan['unchanged']>;
    if (unchanged.length) plan.unchanged = unchanged;
    const invalid = this.kinds.flatMap((k) => planned.get(k)!.invalid);
    if (invalid.length) plan.invalid = invalid;
    plan.diffMs = performance.now() - t1 - readMs;
    this.planned.set(plan, planned);
    return plan;
  }

  /** Every kind read concurrently (independent sockets; every ipset listed once for the kinds
   *  that take it). A separate function, as a suspended async function can keep what its
   *  finished statements held: the IPVS diff runs for a while after this. */
  private async observe(checked: unknown[]): Promise<unknown[]> {
    let sets: Promise<IpSet[]> | undefined;
    const reads: PlanReads = { everySet: () => (sets ??= this.kernel.ipsets!.list()) };
    return Promise.all(this.kinds.map((k, i) => k.observe(checked[i], reads)));
  }

  /** Performs a plan: link, route, record and set creation, then the nftables transaction and
   *  the IPVS writes together (the VIP address adds meanwhile), then removals (routes before
   *  addresses) and flow flushes. */
  async apply(plan: Plan): Promise<SyncReport> {
    const t0 = performance.now();
    const planned = this.planned.get(plan);
    if (!planned) throw new RangeError('not a plan of this engine');
    const report: SyncReport = {
      mode: plan.mode,
      ipvs: emptyReport(),
      addresses: emptyReport(),
      routes: emptyReport(),
      ipsets: emptyReport(),
      nft: emptyReport(),
      flowsFlushed: 0,
      draining: 0,
      errors: [],
      invalid: plan.invalid ?? [],
      durations: { observeMs: plan.observeMs, diffMs: plan.diffMs, applyMs: 0, totalMs: 0 },
    };
    // Every batch continues past failures: one bad object must not hold back the rest, and the
    // next sync retries what failed (the diff starts from what the kernel has).
    // The link first, its address adds then running while the rest applies; after the link the
    // routes (a route may name it); the record before a virtual server is created.
    for (const k of this.writeOrder) await k.apply('early', planned.get(k)!, report);
    // The nftables transaction and the IPVS writes go together: neither names the other's
    // objects, and while the kernel commits the glue (one transaction, ~100k elements at 10k
    // services) this thread converts the IPVS batches instead of waiting. All settled before
    // anything throws: none may go unhandled, or still run, when apply() rejects.
    const backwards = [...this.writeOrder].reverse();
    const main = await Promise.allSettled(backwards.map((k) => k.apply('main', planned.get(k)!, report)));
    for (const m of main) if (m.status === 'rejected') throw m.reason;
    // The removals (the record forgets a deleted virtual server only once its delete went).
    for (const k of backwards) await k.apply('late', planned.get(k)!, report);
    // Drain state, stale UDP/SCTP flows of destinations whose delete succeeded. What applied
    // cleanly is the base of the next incremental plans (the engine's own copy of what it
    // keeps: callers may reuse and change their desired objects once apply() returned); a kind
    // with an error is observed again next time.
    for (const k of this.kinds) await k.settle?.(planned.get(k)!, report);

    report.errors.unshift(...report.addresses.errors, ...report.routes.errors, ...report.ipsets.errors, ...report.nft.errors, ...report.ipvs.errors);
    const t1 = performance.now();
    report.durations.applyMs = t1 - t0;
    report.durations.totalMs = plan.observeMs + plan.diffMs + (t1 - t0);
    return report;
  }

  /** Full reconcile (or, with `changes`, incremental: see DesiredChanges): plan + apply. */
  async sync(desired: DesiredState, changes?: DesiredChanges | ReadonlySet<string>): Promise<SyncReport> {
    return this.apply(await this.plan(desired, changes));
  }
}
