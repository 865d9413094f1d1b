// The sync engine: desired state -> one dump per object kind -> pure diffs -> batched apply.
// plan() reads the kernel and computes every write (no write happens: it is also the dry run);
// apply() performs a plan in a safe order; sync() is both. Each object kind has its own diff
// (ipvs-diff, addresses-diff, routes-diff, ipsets-diff, nft-diff); the engine orders them, keeps what must
// survive between syncs (draining destinations), and reports what it did.
import type { NetlinkError } from '../errors.js';
import type { ConntrackApi } from '../kernel/conntrack.js';
import type { IpSetOp, IpSetsApi } from '../kernel/ipsets.js';
import type { IpvsApi, IpvsOp, Service } from '../kernel/ipvs.js';
import type { LinkOp, LinksApi } from '../kernel/links.js';
import type { NftOp, NftRuleset, NftablesApi } from '../kernel/nftables.js';
import { IPVSYNC_ROUTE_PROTOCOL, type RouteOp, type RoutesApi } from '../kernel/routes.js';
import { diffAddresses, type AddressesDelta, type DesiredVips } from './addresses-diff.js';
import { applyBatch, emptyReport, settle, type KindReport, type Settled } from './apply-batch.js';
import { diffIpSets, memberKey, type DesiredIpSet, type IpSetsDelta } from './ipsets-diff.js';
import type { IpvsDelta } from './ipvs-diff.js';
import { IpvsReconciler, type RecordWrites } from './ipvs-reconciler.js';
import { samePlain, serviceKey, type DesiredService } from './ipvs-model.js';
import type { DesiredNftTable, NftDelta } from './nft-diff.js';
import { NftReconciler, type NftElementChange, type NftPlanned, type NftStart } from './nft-reconciler.js';
import { IPVS_RECORD_SETS, readRecord } from './ownership.js';
import { diffRoutes, type DesiredRoutes, type RoutesDelta } from './routes-diff.js';
import { checkIpSet, checkRoutes, keyable, vipAddressProblem, vipInvalid, vipLinkInvalid } from './validate.js';

export { keyToId } from './ipvs-model.js';
export { IPVS_APPLY_CHUNK } from './ipvs-reconciler.js';
export type { KindReport } from './apply-batch.js';

/**
 * A desired object the kernel layer would refuse (validateDesired): left out of the sync, with
 * what the kernel has under its key left as it is. `object` names it readably ("TCP
 * 10.0.0.1:80", "TCP 10.0.0.1:80 -> 10.244.1.5:8080", "vip 10.0.0.1 on kube-ipvs0", "ipset
 * KUBE-X member 1.2.3.4,tcp:80", "nft ip ipvsync set foo element 1.2.3.4/24"), `field` is the
 * field that is wrong ('address', 'port', 'scheduler', 'weight', 'key', …).
 */
export interface InvalidObject {
  kind: 'ipvs' | 'vip' | 'route' | 'ipset' | 'nft';
  object: string;
  field: string;
  message: string;
}

export interface DesiredState {
  /** IPVS virtual services with their destinations. */
  services: DesiredService[];
  /** VIPs bound on the engine's own link (kube-ipvs0). */
  vips?: DesiredVips;
  /** Routes the engine owns (protocol IPVSYNC_ROUTE_PROTOCOL), e.g. local routes over the
   *  service CIDRs; an empty list removes every owned route. */
  routes?: DesiredRoutes;
  /** ipsets owned through Ownership.ipsetPrefix. */
  ipsets?: DesiredIpSet[];
  /** The engine's own nftables table(s) (e.g. one `ip` and one `ip6` table). */
  nft?: DesiredNftTable | DesiredNftTable[];
}

/**
 * What differs between the desired state of a plan and the one of the last apply() that wrote
 * it without an error (the base), as plain data: `engine.plan(desired, changes)` (or
 * sync) then plans incrementally — it reads and diffs the IPVS services named here (one GET
 * each) and, for nftables, writes the element changes given, instead of comparing every
 * service and element. Everything of `desired` not named here must be as in the base (the
 * engine does not look). Without `changes` a plan is full: every kind is read and compared.
 * VIPs, routes and ipsets are compared with the base in either mode.
 */
export interface DesiredChanges {
  /** The IPVS services that may differ from the base, by serviceKey: the desired service now,
   *  or undefined where none is desired under the key any more. */
  services: ReadonlyMap<string, DesiredService | undefined>;
  /** The nftables set elements added and deleted since the base, the tables' chains, rules and
   *  set declarations unchanged ([]: the tables are the base's). Absent: the tables are
   *  compared with the base's. */
  nft?: readonly NftElementChange[];
}

export type { NftElementChange } from './nft-reconciler.js';

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

/**
 * What the engine may change or delete besides what it records itself. An IPVS virtual server
 * is the engine's when it is in its record (ownership.ts: two ipsets of its own, or, without
 * an ipset handle, memory for the process's lifetime), or when an option below says so; never
 * when its address is in excludeCidrs.
 */
export interface Ownership {
  /** IPVS services whose address falls in these CIDRs are the engine's even unrecorded (an
   *  embedder's explicit claim; the proxy passes none)… */
  managedCidrs?: string[];
  /** …and no service whose address falls in one of these is, recorded or not (kube-proxy's
   *  excludeCIDRs). */
  excludeCidrs?: string[];
  /** Firewall-mark services in this range are the engine's even unrecorded (a firewall-mark
   *  service has no address and port to record in the kernel: memory only). */
  managedFwmarks?: { min: number; max: number };
  /** ipsets whose names start with this are the engine's (required to manage ipsets). */
  ipsetPrefix?: string;
}

export interface EngineKernel {
  ipvs: IpvsApi;
  links?: LinksApi;
  routes?: RoutesApi;
  ipsets?: IpSetsApi;
  nft?: NftablesApi;
  conntrack?: ConntrackApi;
}

export interface EngineOptions extends Ownership {
  /** A draining TCP destination is deleted after this even with connections (default 15 min). */
  drainTimeoutMs?: number;
  /** Upper bound of ops per nftables transaction (default: the whole delta is one). */
  maxNftOpsPerTransaction?: number;
  /**
   * When a sync creates the owned tables from nothing (none of them in the kernel, as on a
   * node's first sync), their tables, chains, sets and elements go in transactions of at most
   * this much work each (an op or a set element: one unit), and then all their rules in one
   * last transaction. A rule is what makes the glue act, so traffic sees none of it and then
   * all of it, as with one transaction; what it spares is one commit that holds a CPU in the
   * kernel for the whole load (~100k elements at 10k services; under qemu that held the
   * daemon's thread off a CPU for up to ~85 ms). Applies only when no base chain of theirs
   * drops by policy (an empty one would drop everything until the rules came). If a
   * transaction fails, the later ones and the rules are not sent: the tables stay inert, and
   * the next sync, finding them, completes them in one transaction. Default: off (one
   * transaction).
   */
  createNftInTransactionsOf?: number;
  now?: () => number;
  /**
   * The caller never changes the desired objects it passed once a plan is made (the proxier
   * never does; a model patched from the last one shares its unchanged objects with it):
   * apply() keeps them as the base of the next incremental plan as they are, and IPVS ops may
   * hold desired services and destinations themselves. Default false: it keeps a copy
   * (structuredClone), which at 10k services costs ~100 ms and a second copy of the nftables
   * glue per sync.
   */
  desiredImmutable?: boolean;
  /**
   * A full plan reads the kernel's destinations this many services at a time (with an IPVS
   * handle that has destinationsOf), diffing each slice before reading the next: a periodic full
   * resync then holds one slice's destinations, not the whole table's (at 10k services × 10,
   * ~35 MB of objects and native storage). Default 256: a slice's ~2.5k destination objects
   * (well under a MB) are garbage before the young generation is collected, instead of being
   * promoted to the old one (the daemon's RSS during a resync at 10k: ~205 -> ~175 MB).
   */
  observeSlice?: number;
}

/** VIP address adds per links.apply() call: they run while the rest of the sync applies, the
 *  next converted and handed over while the kernel takes one (the adds are of distinct
 *  addresses: the order they reach the kernel in does not matter). */
export const ADDRESS_APPLY_CHUNK = 256;

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

export class Engine {
  /** A copy of the VIPs the last sync applied without an error: an incremental plan whose
   *  desired VIPs equal them neither dumps nor diffs them (a full plan always does, and so
   *  repairs what others changed in between). */
  private clean: { vips?: DesiredVips } = {};
  private readonly ipvs: IpvsReconciler;
  private readonly nft: NftReconciler;
  /** The VIPs last checked and their verdict: the invalid ones, and the VIPs without them. */
  private vipCheck: { of: DesiredVips; invalid: InvalidObject[]; valid: DesiredVips } | undefined;

  constructor(
    private readonly kernel: EngineKernel,
    private readonly opts: EngineOptions = {},
  ) {
    this.ipvs = new IpvsReconciler(kernel.ipvs, kernel.ipsets !== undefined, {
      ...(opts.managedCidrs ? { managedCidrs: opts.managedCidrs } : {}),
      ...(opts.excludeCidrs ? { excludeCidrs: opts.excludeCidrs } : {}),
      ...(opts.managedFwmarks ? { managedFwmarks: opts.managedFwmarks } : {}),
      ...(opts.drainTimeoutMs !== undefined ? { drainTimeoutMs: opts.drainTimeoutMs } : {}),
      ...(opts.now ? { now: opts.now } : {}),
      ...(opts.observeSlice !== undefined ? { observeSlice: opts.observeSlice } : {}),
      shareDesired: opts.desiredImmutable === true,
    });
    this.nft = new NftReconciler(kernel.nft, {
      ...(opts.maxNftOpsPerTransaction !== undefined ? { maxOpsPerTransaction: opts.maxNftOpsPerTransaction } : {}),
      ...(opts.createNftInTransactionsOf !== undefined ? { createInTransactionsOf: opts.createNftInTransactionsOf } : {}),
      keepAsGiven: opts.desiredImmutable === true,
    });
  }

  /** Whether the engine may change or delete an observed IPVS service (`key`: its
   *  serviceKey, when the caller has it): recorded or claimed by an option, and not excluded. */
  owns(s: Service, key: string = serviceKey(s)): boolean {
    return this.ipvs.owns(s, key);
  }

  /**
   * The VIPs, routes and ipsets without what the kernel layer would refuse, and what of the
   * kernel's to leave as it is for them. VIPs are checked unless they are the ones last
   * checked; ipsets and routes every time (the nftables tables: NftReconciler).
   */
  private checkDesired(desired: DesiredState): Checked {
    const invalid: InvalidObject[] = [];
    let vips = desired.vips;
    if (vips) {
      const c = this.vipCheck && samePlain(this.vipCheck.of, vips) ? this.vipCheck : checkVips(vips);
      this.vipCheck = c;
      invalid.push(...c.invalid);
      vips = vipLinkInvalid(vips) ? undefined : c.valid;
    }
    let routes = desired.routes;
    const keptRoutes = new Set<string>();
    if (routes) {
      const r = checkRoutes(routes);
      invalid.push(...r.invalid);
      routes = r.valid;
      for (const x of r.kept) keptRoutes.add(x);
    }
    let ipsets = desired.ipsets;
    const droppedIpsets = new Set<string>();
    const keptMembers = new Map<string, Set<string>>();
    if (ipsets) {
      let out: DesiredIpSet[] | undefined;
      for (let i = 0; i < ipsets.length; i++) {
        const set = ipsets[i]!;
        const v = checkIpSet(set, this.opts.ipsetPrefix);
        if (!v) {
          out?.push(set);
          continue;
        }
        out ??= ipsets.slice(0, i);
        invalid.push(...v.invalid);
        if (v.valid) {
          out.push(v.valid);
          if (v.keptMembers) keptMembers.set(set.name, new Set(v.keptMembers));
        } else if (typeof set.name === 'string') droppedIpsets.add(set.name);
      }
      if (out) ipsets = out;
    }
    return {
      invalid,
      desired: routes === desired.routes && ipsets === desired.ipsets ? desired : withRoutesAndSets(desired, routes, ipsets),
      vips,
      keptRoutes,
      droppedIpsets,
      keptMembers,
    };
  }

  /**
   * The kernel's side of a plan: every kind listed concurrently (independent sockets), the
   * ownership record read (a full plan, or the first), the small kinds diffed, and for a
   * sliced plan the IPVS services indexed by key (ObservedIndex). Returns the deltas, the index
   * (or the listed services) and the tables' listing, not the other listings: a full plan's IPVS
   * diff runs for a while after this (at 10k services ~1 s, ~10 s under emulation) and they were
   * its memory peak. (A separate function because a suspended async function can keep what its
   * finished statements held.)
   */
  private async observe(
    desired: DesiredState,
    changed: ReadonlySet<string> | undefined,
    o: { sliced: boolean; wantVips: DesiredVips | undefined; wantIpsets: boolean; nft: NftStart },
  ): Promise<{
    ipvs: Service[] | ReturnType<IpvsReconciler['index']>;
    ruleset: NftRuleset[];
    t1: number;
    addresses?: AddressesDelta;
    routes?: RoutesDelta;
    ipsets?: IpSetsDelta;
  }> {
    const k = this.kernel;
    const { wantVips } = o;
    // The record: taken from the listing of every set when the engine manages ipsets, else
    // its two sets alone.
    const readOwn = this.ipvs.readsRecord(!!changed);
    const [observed, link, addrs, routes, sets, ruleset, own] = await Promise.all([
      this.ipvs.observe(changed, o.sliced),
      wantVips ? k.links!.get(wantVips.link) : undefined,
      wantVips ? k.links!.addresses({ link: wantVips.link }).catch(noLink) : undefined,
      desired.routes && k.routes ? k.routes.list({ protocol: IPVSYNC_ROUTE_PROTOCOL }) : undefined,
      o.wantIpsets ? k.ipsets!.list() : undefined,
      this.nft.observe(o.nft),
      readOwn && !o.wantIpsets ? readRecord(k.ipsets!) : undefined,
    ]);
    const t1 = performance.now();
    if (readOwn) this.ipvs.takeRecord(own ?? sets!);
    return {
      ipvs: o.sliced ? this.ipvs.index(observed) : observed,
      ruleset,
      t1,
      ...(wantVips ? { addresses: diffAddresses(wantVips, { linkExists: link !== null, addresses: addrs ?? [] }) } : {}),
      ...(desired.routes && k.routes ? { routes: diffRoutes(desired.routes, routes ?? []) } : {}),
      // the record's sets are never the ipset diff's, whatever its prefix
      ...(o.wantIpsets ? { ipsets: diffIpSets(desired.ipsets!, sets!.filter((x) => !IPVS_RECORD_SETS.includes(x.name)), this.opts.ipsetPrefix!) } : {}),
    };
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
    const changed: ReadonlySet<string> | undefined = ch && new Set(ch.services.keys());
    const k = this.kernel;
    // What the kernel layer would refuse is left out of what is diffed (and reported).
    // Incremental: a kind whose desired state is what was last applied cleanly is left alone.
    const vipsSame = !!changed && !!desired.vips && this.clean.vips !== undefined && samePlain(this.clean.vips, desired.vips);
    const checked = this.checkDesired(desired);
    const nftStart = await this.nft.start(desired.nft === undefined ? [] : [desired.nft].flat(), { incremental: !!changed, ...(ch?.nft ? { changes: ch.nft } : {}) });
    const wantIpsets = desired.ipsets && k.ipsets;
    const wantVips = checked.vips && k.links && !vipsSame ? checked.vips : undefined;
    if (desired.ipsets && !this.opts.ipsetPrefix) throw new RangeError('managing ipsets needs Ownership.ipsetPrefix');
    // A full plan reads the destinations a slice of services at a time, as it diffs (below).
    const sliced = !changed && typeof k.ipvs.destinationsOf === 'function';
    const obs = await this.observe(checked.desired, changed, { sliced, wantVips, wantIpsets: !!wantIpsets, nft: nftStart });
    keepRoutesAndSets(obs, checked);
    // The tables' diff, then their listing goes (at a first sync ~70k elements at 10k services).
    const ruleset = obs.ruleset;
    obs.ruleset = [];
    const nftPlanned = this.nft.diff(nftStart, ruleset);

    const named = ch ? [...ch.services.values()].filter((s): s is DesiredService => s !== undefined) : desired.services;
    const { delta: ipvs, readMs, invalid: invalidServices } = await this.ipvs.plan(obs.ipvs, named, changed);
    const plan: Plan = { mode: changed ? 'incremental' : 'full', ipvs, observeMs: obs.t1 - t0 + readMs, diffMs: 0, desired: {} };
    if (changed) plan.scope = [...changed];
    const unchanged: Plan['unchanged'] = [];
    if (vipsSame) unchanged.push('addresses');
    if (nftPlanned.unchanged) unchanged.push('nft');
    if (unchanged.length) plan.unchanged = unchanged;
    if (obs.addresses) {
      plan.addresses = obs.addresses;
      // as given: the VIPs left out stay out as long as the desired VIPs are these
      plan.desired!.vips = desired.vips;
    }
    if (obs.routes) plan.routes = obs.routes;
    const { record, ipsets } = this.ipvs.recordWrites(ipvs, obs.ipsets);
    if (record) plan.record = record;
    if (ipsets) plan.ipsets = ipsets;
    plan.nftPlanned = nftPlanned;
    if (nftPlanned.delta) plan.nft = nftPlanned.delta;
    const invalid = [...invalidServices, ...checked.invalid, ...nftStart.invalid, ...nftPlanned.invalid];
    if (invalid.length) plan.invalid = invalid;
    plan.diffMs = performance.now() - obs.t1 - readMs;
    return plan;
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
    // Every batch continues past failures (applyBatch).
    const batch = applyBatch;
    // The link first; its address adds then run on their own socket while the rest applies (the
    // kernel's cost of an IPv4 address add grows with the addresses already on the link: at 10k
    // VIPs they are the longest single step of a full sync).
    let vipAdds: Promise<Settled<unknown>> | undefined;
    if (plan.addresses && k.links) {
      const early = plan.addresses.early;
      let split = 0;
      while (split < early.length && early[split]!.op !== 'addAddr') split++;
      const run = (o: LinkOp[]) => k.links!.apply(o, { stopOnError: false });
      await batch(report.addresses, early, run, { to: split });
      // settled here, rethrown below: a failure must not go unhandled while the rest applies
      vipAdds = settle(batch(report.addresses, early, run, { from: split, chunk: ADDRESS_APPLY_CHUNK, ahead: true }));
    }
    // After the link: a route may name it.
    if (plan.routes && k.routes) await batch(report.routes, plan.routes.early, (o) => k.routes!.apply(o, { stopOnError: false }));
    const rec = plan.record;
    let setsOk: ((i: number) => boolean) | undefined;
    if (plan.ipsets && k.ipsets) setsOk = await batch(report.ipsets, plan.ipsets.early, (o) => k.ipsets!.apply(o, { stopOnError: false }));
    const recorded = !rec || rec.early === 0 || (setsOk !== undefined && Array.from({ length: rec.early }, (_, i) => setsOk!(i)).every(Boolean));
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
    if (plan.ipsets && k.ipsets) {
      let late = plan.ipsets.late;
      if (rec) late = [...late.slice(0, rec.lateFrom), ...this.ipvs.forgetOps(forgotten)];
      const lateOk = await batch(report.ipsets, late, (o) => k.ipsets!.apply(o, { stopOnError: false }));
      if (rec && !Array.from({ length: late.length - rec.lateFrom }, (_, i) => lateOk?.(rec.lateFrom + i)).every(Boolean)) forgotten = [];
    }
    if (rec) this.ipvs.remember(rec, recorded, forgotten, plan.ipsets?.early ?? []);
    if (plan.routes && k.routes) await batch(report.routes, plan.routes.late, (o) => k.routes!.apply(o, { stopOnError: false }));
    if (plan.addresses && k.links) await batch(report.addresses, plan.addresses.late, (o) => k.links!.apply(o, { stopOnError: false }));

    // Drain state; stale UDP/SCTP flows of destinations whose delete succeeded.
    const after = await this.ipvs.settle(plan.ipvs, plan.scope, ipvsOps, ipvsOk, k.conntrack, report.errors);
    report.draining = after.draining;
    report.flowsFlushed = after.flowsFlushed;

    // What applied cleanly is the base of the next incremental plans (a copy, as callers may
    // reuse and change their desired objects, unless desiredImmutable); a kind with an error
    // is observed again next time.
    if (plan.desired?.vips)
      this.clean.vips = report.addresses.errors.length ? undefined : this.opts.desiredImmutable ? plan.desired.vips : structuredClone(plan.desired.vips);
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

/** A plan's desired state but its services without what the kernel layer would refuse
 *  (Engine.checkDesired). */
interface Checked {
  invalid: InvalidObject[];
  /** What observe() reads: the routes and ipsets without invalid ones. */
  desired: DesiredState;
  vips: DesiredVips | undefined;
  /** "table|dst" of the kernel's owned routes to leave as they are. */
  keptRoutes: ReadonlySet<string>;
  /** ipsets left out whole: the kernel's of these names are not destroyed. */
  droppedIpsets: ReadonlySet<string>;
  /** Set name -> memberKeys of the kernel's members to leave as they are. */
  keptMembers: ReadonlyMap<string, ReadonlySet<string>>;
}

/** `desired` with other routes and ipsets. */
function withRoutesAndSets(desired: DesiredState, routes: DesiredRoutes | undefined, ipsets: DesiredIpSet[] | undefined): DesiredState {
  return { ...desired, routes, ipsets };
}

/** Leaves the kernel's routes and ipset members that stand for invalid desired ones (and the
 *  owned sets of invalid desired sets) as they are: their deletes go from the deltas. */
function keepRoutesAndSets(obs: { routes?: RoutesDelta; ipsets?: IpSetsDelta }, c: Checked): void {
  if (obs.routes && c.keptRoutes.size)
    obs.routes.late = obs.routes.late.filter((o) => !(o.op === 'delRoute' && c.keptRoutes.has(`${String(o.table)}|${o.dst}`)));
  if (obs.ipsets && (c.droppedIpsets.size || c.keptMembers.size)) {
    obs.ipsets.late = obs.ipsets.late.filter((o) => !(o.op === 'destroy' && c.droppedIpsets.has(o.name)));
    obs.ipsets.early = obs.ipsets.early.flatMap((o) => {
      const keep = o.op === 'del' ? c.keptMembers.get(o.name) : undefined;
      if (!keep || o.op !== 'del') return [o];
      const members = o.members.filter((m) => !keep.has(memberKey(o.type!, m)));
      return members.length ? [{ ...o, members }] : [];
    });
  }
}

/** The VIPs checked: the invalid ones (and the link, if it is), and the VIPs without them. */
function checkVips(vips: DesiredVips): { of: DesiredVips; invalid: InvalidObject[]; valid: DesiredVips } {
  const link = vipLinkInvalid(vips);
  if (link) return { of: vips, invalid: [link], valid: vips };
  const invalid: InvalidObject[] = [];
  const bad = new Set<number>();
  vips.addresses.forEach((a, i) => {
    const p = vipAddressProblem(a);
    if (!p) return;
    invalid.push(vipInvalid(vips.link, a, p));
    bad.add(i);
  });
  return { of: vips, invalid, valid: bad.size ? { ...vips, addresses: vips.addresses.filter((_, i) => !bad.has(i)) } : vips };
}

/** A missing link has no addresses (the plan creates it). */
function noLink(e: unknown): Array<{ address: string; prefixlen: number }> {
  if ((e as NetlinkError)?.code === 'ENODEV' || (e as NetlinkError)?.code === 'ENOENT') return [];
  throw e;
}
