// The sync engine: desired state -> one read per object kind -> pure diffs -> batched apply.
// plan() reads the kernel and computes every write (no write happens: it is also the dry run);
// apply() performs a plan in a safe order; sync() is both. Each object kind has its reconciler
// (ipvs-, addresses-, routes-, ipsets-, nft-reconciler: check, observe, diff, apply, and what
// it keeps between syncs); the engine orders them and reports what they did.
import type { NetlinkError } from '../errors.js';
import type { ConntrackApi } from '../kernel/conntrack.js';
import type { IpSetOp, IpSetsApi } from '../kernel/ipsets.js';
import type { IpvsApi, IpvsOp, Service } from '../kernel/ipvs.js';
import type { LinkOp, LinksApi } from '../kernel/links.js';
import type { NftOp, NftablesApi } from '../kernel/nftables.js';
import type { RouteOp, RoutesApi } from '../kernel/routes.js';
import type { AddressesDelta, DesiredVips } from './addresses-diff.js';
import { AddressReconciler } from './addresses-reconciler.js';
import { emptyReport, settle, type KindReport } from './apply-batch.js';
import type { IpSetsDelta } from './ipsets-diff.js';
import { IpSetsReconciler } from './ipsets-reconciler.js';
import type { IpvsDelta } from './ipvs-diff.js';
import { IpvsReconciler, type RecordWrites } from './ipvs-reconciler.js';
import { serviceKey, type DesiredService } from './ipvs-model.js';
import type { NftDelta } from './nft-diff.js';
import { NftReconciler, type NftPlanned } from './nft-reconciler.js';
import { readRecord } from './ownership.js';
import type { RoutesDelta } from './routes-diff.js';
import { RoutesReconciler } from './routes-reconciler.js';
import { keyable } from './validate.js';

export { keyToId } from './ipvs-model.js';
export { IPVS_APPLY_CHUNK } from './ipvs-reconciler.js';
export { NFT_ELEMENTS_PIECE } from './nft-reconciler.js';
export type { KindReport } from './apply-batch.js';
export type { DesiredChanges, DesiredState, InvalidObject, NftElementChange, Ownership } from './types.js';
import type { DesiredChanges, DesiredState, InvalidObject, Ownership } from './types.js';

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
  /** Upper bound of work per nftables transaction (an op or a set element each): a delta goes
   *  in transactions of at most this much, each committed on its own, one after the other,
   *  stopping at the first that fails (default: the whole delta is one). */
  maxNftOpsPerTransaction?: number;
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
   * The caller never changes the desired services and VIPs it passed once a plan is made, but
   * for the services array (which the engine does not keep; a model patched from the last one
   * shares its unchanged objects with it): apply() keeps the VIPs as the base of the next
   * incremental plan as they are, and IPVS ops may hold desired services and destinations
   * themselves. Default false: copies (structuredClone). The nftables tables' static part is
   * always copied (it is small) and their elements never kept.
   */
  desiredImmutable?: boolean;
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

/** Every write a sync would make, per kind, in the order they will be made. */
export interface Plan {
  mode: 'full' | 'incremental';
  /** Incremental: the service keys this plan looked at. */
  scope?: string[];
  ipvs: IpvsDelta;
  addresses?: AddressesDelta;
  routes?: RoutesDelta;
  ipsets?: IpSetsDelta;
  nft?: NftDelta;
  observeMs: number;
  diffMs: number;
  /** Incremental: kinds left out because their desired state is the one last applied cleanly. */
  unchanged?: Array<'addresses' | 'nft'>;
  /** Desired objects left out because the kernel layer would refuse them (none: absent). */
  invalid?: InvalidObject[];
  /** @internal what apply() records as cleanly applied when the kind's writes all succeed */
  desired?: { vips?: DesiredVips };
  /** @internal the nftables part as the reconciler planned it (its delta is `nft`) */
  nftPlanned?: NftPlanned;
  /** @internal the ownership record's writes (IpvsReconciler.recordWrites) */
  record?: RecordWrites;
}

export type PlannedWrite =
  | { kind: 'ipvs'; op: IpvsOp }
  | { kind: 'link'; op: LinkOp }
  | { kind: 'route'; op: RouteOp }
  | { kind: 'ipset'; op: IpSetOp }
  | { kind: 'nft'; op: NftOp };

export interface SyncReport {
  mode: 'full' | 'incremental';
  ipvs: KindReport;
  addresses: KindReport;
  routes: KindReport;
  ipsets: KindReport;
  nft: KindReport;
  flowsFlushed: number;
  /** Destinations at weight 0 waiting for their connections to end. */
  draining: number;
  /** Every failure of this sync (typed, with the op and its index in its kind's batch). */
  errors: NetlinkError[];
  /** Desired objects this sync left out because the kernel layer would refuse them: every
   *  invalid service, destination, VIP, route, ipset and member, and nftables table, chain, set
   *  and rule; an nftables element when this sync would have written it (an element the
   *  kernel already has as it is wanted, or left out before, is not written again). An
   *  incremental sync checks the services of its changes and reports the others' verdicts of
   *  the plans before. */
  invalid: InvalidObject[];
  durations: { observeMs: number; diffMs: number; applyMs: number; totalMs: number };
}

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

/**
 * The engine: one reconciler per kind (IPVS, VIP addresses, routes, ipsets, nftables), each
 * checking, observing, diffing and writing its kind and keeping what it needs between syncs;
 * plan() runs them (the kernel read concurrently) and apply() writes in a safe order.
 */
export class Engine {
  private readonly ipvs: IpvsReconciler;
  private readonly addresses: AddressReconciler;
  private readonly routes: RoutesReconciler;
  private readonly ipsets: IpSetsReconciler;
  private readonly nft: NftReconciler;

  constructor(
    private readonly kernel: EngineKernel,
    opts: EngineOptions = {},
  ) {
    this.ipvs = new IpvsReconciler(kernel.ipvs, kernel.ipsets !== undefined && kernel.ipvs !== undefined, {
      ...(opts.managedCidrs ? { managedCidrs: opts.managedCidrs } : {}),
      ...(opts.excludeCidrs ? { excludeCidrs: opts.excludeCidrs } : {}),
      ...(opts.managedFwmarks ? { managedFwmarks: opts.managedFwmarks } : {}),
      ...(opts.drainTimeoutMs !== undefined ? { drainTimeoutMs: opts.drainTimeoutMs } : {}),
      ...(opts.now ? { now: opts.now } : {}),
      ...(opts.observeSlice !== undefined ? { observeSlice: opts.observeSlice } : {}),
      shareDesired: opts.desiredImmutable === true,
    });
    this.addresses = new AddressReconciler(kernel.links, opts.desiredImmutable === true);
    this.routes = new RoutesReconciler(kernel.routes);
    this.ipsets = new IpSetsReconciler(kernel.ipsets, opts.ipsetPrefix);
    this.nft = new NftReconciler(kernel.nft, {
      ...(opts.maxNftOpsPerTransaction !== undefined ? { maxOpsPerTransaction: opts.maxNftOpsPerTransaction } : {}),
      ...(opts.createNftInTransactionsOf !== undefined ? { createInTransactionsOf: opts.createNftInTransactionsOf } : {}),
    });
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
   * services are then found by a scan of desired.services (changesOf).
   */
  async plan(desired: DesiredState, changes?: DesiredChanges | ReadonlySet<string>): Promise<Plan> {
    const t0 = performance.now();
    const ch = changes === undefined ? undefined : changes instanceof Set ? changesOf(desired.services, changes) : (changes as DesiredChanges);
    const changed: ReadonlySet<string> | undefined = ch?.services && new Set(ch.services.keys());
    // Each kind checked (what the kernel layer would refuse is left out of what is diffed, and
    // reported) and what to read decided. Incremental: a kind whose desired state is what was
    // last applied cleanly is left alone.
    const addresses = this.addresses.start(desired.vips, !!changed);
    const routes = this.routes.start(desired.routes);
    const ipsets = this.ipsets.start(desired.ipsets);
    const nft = await this.nft.start(desired.nft === undefined ? [] : [desired.nft].flat(), { incremental: !!changed, ...(ch?.nft ? { changes: ch.nft } : {}) });
    // A full plan reads the destinations a slice of services at a time, as it diffs (below).
    const sliced = !changed && typeof this.kernel.ipvs?.destinationsOf === 'function';
    const obs = await this.observe(changed, sliced, ipsets.want !== undefined, { addresses, routes, ipsets, nft });
    const t1 = obs.t1;
    const named = ch?.services ? [...ch.services.values()].filter((s): s is DesiredService => s !== undefined) : desired.services;
    const { delta: ipvs, readMs, invalid: invalidServices } = await this.ipvs.plan(obs.ipvs, named, changed);
    const plan: Plan = { mode: changed ? 'incremental' : 'full', ipvs, observeMs: t1 - t0 + readMs, diffMs: 0, desired: {} };
    if (changed) plan.scope = [...changed];
    const unchanged: Plan['unchanged'] = [];
    if (addresses.same) unchanged.push('addresses');
    if (obs.nft.unchanged) unchanged.push('nft');
    if (unchanged.length) plan.unchanged = unchanged;
    if (obs.addresses) {
      plan.addresses = obs.addresses;
      // as given: the VIPs left out stay out as long as the desired VIPs are these
      plan.desired!.vips = desired.vips;
    }
    if (obs.routes) plan.routes = obs.routes;
    const { record, ipsets: setWrites } = this.ipvs.recordWrites(ipvs, obs.ipsets);
    if (record) plan.record = record;
    if (setWrites) plan.ipsets = setWrites;
    plan.nftPlanned = obs.nft;
    if (obs.nft.delta) plan.nft = obs.nft.delta;
    const invalid = [...invalidServices, ...addresses.invalid, ...routes.invalid, ...ipsets.invalid, ...nft.invalid, ...obs.nft.invalid];
    if (invalid.length) plan.invalid = invalid;
    plan.diffMs = performance.now() - t1 - readMs;
    return plan;
  }

  /**
   * The kernel's side of a plan: every kind read concurrently (independent sockets), the
   * ownership record taken (a full plan, or the first), the small kinds and the tables diffed,
   * and for a sliced plan the IPVS services indexed by key. Returns the deltas and the IPVS
   * services (or their index), not the listings: a full plan's IPVS diff runs for a while after
   * this (about a second at 10k services) and they were its memory peak. (A
   * separate function because a suspended async function can keep what its finished
   * statements held.)
   */
  private async observe(
    changed: ReadonlySet<string> | undefined,
    sliced: boolean,
    listsSets: boolean,
    s: {
      addresses: ReturnType<AddressReconciler['start']>;
      routes: ReturnType<RoutesReconciler['start']>;
      ipsets: ReturnType<IpSetsReconciler['start']>;
      nft: Awaited<ReturnType<NftReconciler['start']>>;
    },
  ): Promise<{ t1: number; ipvs: Service[] | ReturnType<IpvsReconciler['index']>; addresses?: AddressesDelta; routes?: RoutesDelta; ipsets?: IpSetsDelta; nft: NftPlanned }> {
    // The record: taken from the listing of every set when the engine manages ipsets, else
    // its two sets alone.
    const readOwn = this.ipvs.readsRecord(!!changed);
    const [observed, addresses, routes, sets, nftListed, own] = await Promise.all([
      this.ipvs.observe(changed, sliced),
      this.addresses.observe(s.addresses),
      this.routes.observe(s.routes),
      this.ipsets.observe(s.ipsets),
      this.nft.observe(s.nft),
      readOwn && !listsSets ? readRecord(this.kernel.ipsets!) : undefined,
    ]);
    const t1 = performance.now();
    if (readOwn) this.ipvs.takeRecord(own ?? sets!);
    const out = {
      t1,
      ipvs: sliced ? this.ipvs.index(observed) : observed,
      ...(addresses ? { addresses } : {}),
      nft: this.nft.diff(s.nft, nftListed),
    };
    const r = this.routes.diff(s.routes, routes);
    const i = this.ipsets.diff(s.ipsets, sets);
    return { ...out, ...(r ? { routes: r } : {}), ...(i ? { ipsets: i } : {}) };
  }

  /** Performs a plan: link, route and set creation, then the nftables transaction and the IPVS
   *  writes together (the VIP address adds meanwhile), then removals (routes before addresses)
   *  and flow flushes. */
  async apply(plan: Plan): Promise<SyncReport> {
    const t0 = performance.now();
    const k = this.kernel;
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
    // The link first, its address adds then running while the rest applies.
    const vipAdds = (await this.addresses.applyEarly(plan.addresses, report.addresses)).adds;
    // After the link: a route may name it.
    await this.routes.applyEarly(plan.routes, report.routes);
    const rec = plan.record;
    const setsOk = plan.ipsets ? await this.ipsets.apply(plan.ipsets.early, report.ipsets) : undefined;
    const recorded = !rec || rec.early === 0 || (setsOk !== undefined && Array.from({ length: rec.early }, (_, i) => setsOk(i)).every(Boolean));
    // A virtual server is created only once it is recorded.
    const ipvsOps = this.ipvs.opsToWrite(plan.ipvs, rec, recorded);
    // The nftables transaction and the IPVS writes go together: neither names the other's
    // objects, and while the kernel commits the glue (one transaction, ~100k elements at 10k
    // services) this thread converts the IPVS batches instead of waiting.
    const nftDone = settle(this.nft.apply(plan.nft, plan.nftPlanned?.base, report.nft));
    // settled before anything throws: neither may go unhandled while the other runs
    const ipvsDone = settle(this.ipvs.write(ipvsOps, report.ipvs));
    const nftOut = await nftDone;
    const ipvsOut = await ipvsDone;
    if ('thrown' in nftOut) throw nftOut.thrown;
    if ('thrown' in ipvsOut) throw ipvsOut.thrown;
    const ipvsOk = ipvsOut.value;
    const added = await vipAdds;
    if (added && 'thrown' in added) throw added.thrown;
    // A deleted virtual server is forgotten only once its delete went (or found it gone).
    let forgotten = rec ? this.ipvs.forgotten(rec, ipvsOps, ipvsOk, report.ipvs.errors) : [];
    if (plan.ipsets) {
      let late = plan.ipsets.late;
      if (rec) late = [...late.slice(0, rec.lateFrom), ...this.ipvs.forgetOps(forgotten)];
      const lateOk = await this.ipsets.apply(late, report.ipsets);
      if (rec && !Array.from({ length: late.length - rec.lateFrom }, (_, i) => lateOk?.(rec.lateFrom + i)).every(Boolean)) forgotten = [];
    }
    if (rec) this.ipvs.remember(rec, recorded, forgotten, plan.ipsets?.early ?? []);
    await this.routes.applyLate(plan.routes, report.routes);
    await this.addresses.applyLate(plan.addresses, report.addresses);

    // Drain state; stale UDP/SCTP flows of destinations whose delete succeeded.
    const after = await this.ipvs.settle(plan.ipvs, plan.scope, ipvsOps, ipvsOk, k.conntrack, report.errors);
    report.draining = after.draining;
    report.flowsFlushed = after.flowsFlushed;

    // What applied cleanly is the base of the next incremental plans (a copy, as callers may
    // reuse and change their desired objects, unless desiredImmutable); a kind with an error
    // is observed again next time.
    this.addresses.settle(plan.desired?.vips, report.addresses.errors.length > 0);
    this.nft.settle(plan.nftPlanned, report.nft.errors.length > 0);

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
