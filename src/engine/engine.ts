// The sync engine: desired state -> one dump per object kind -> pure diffs -> batched apply.
// plan() reads the kernel and computes every write (no write happens: it is also the dry run);
// apply() performs a plan in a safe order; sync() is both. Each object kind has its own diff
// (ipvs-diff, addresses-diff, routes-diff, ipsets-diff, nft-diff); the engine orders them, keeps what must
// survive between syncs (draining destinations), and reports what it did.
import { NetlinkError } from '../errors.js';
import type { ConntrackApi } from '../kernel/conntrack.js';
import type { IpSetOp, IpSetsApi } from '../kernel/ipsets.js';
import type { IpvsApi, IpvsOp, Service, ServiceId, Destination } from '../kernel/ipvs.js';
import type { LinkOp, LinksApi } from '../kernel/links.js';
import type { NftablesApi, NftOp, NftRuleset } from '../kernel/nftables.js';
import { IPVSYNC_ROUTE_PROTOCOL, type RouteOp, type RoutesApi } from '../kernel/routes.js';
import { diffAddresses, type AddressesDelta, type DesiredVips } from './addresses-diff.js';
import { anyContains, canonicalAddress, parseCidr, type Cidr } from '../net/address.js';
import { diffIpSets, memberKey, type DesiredIpSet, type IpSetsDelta } from './ipsets-diff.js';
import { IPVS_RECORD_SETS, readRecord, recordedKeys, recordMember, recordOps } from './ownership.js';
import {
  assemble,
  byKey,
  drainKey,
  diffIpvs,
  diffParts,
  diffWanted,
  indexObserved,
  staleServices,
  type FlowFlush,
  type IpvsDelta,
  type IpvsDiffInput,
  type ObservedIndex,
} from './ipvs-diff.js';
import { destKey, keyToId, samePlain, serviceKey, type DesiredService } from './ipvs-model.js';
import type { DesiredNftTable, NftDelta } from './nft-diff.js';
import { NftReconciler, type NftElementChange, type NftPlanned, type NftStart } from './nft-reconciler.js';
import { diffRoutes, type DesiredRoutes, type RoutesDelta } from './routes-diff.js';
import {
  checkIpSet,
  checkRoutes,
  checkService,
  keyable,
  vipAddressProblem,
  vipInvalid,
  vipLinkInvalid,
  type ServiceVerdict,
} from './validate.js';

export { keyToId } from './ipvs-model.js';

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

/** IPVS ops per apply() call: the next batch is converted on this thread while the kernel takes
 *  the one before (Ipvs.apply sends batches in call order), so the conversion of 100k ops
 *  overlaps the kernel's work instead of preceding it. */
export const IPVS_APPLY_CHUNK = 512;

/** VIP address adds per links.apply() call: they run while the rest of the sync applies, the
 *  next converted and handed over while the kernel takes one (the adds are of distinct
 *  addresses: the order they reach the kernel in does not matter). */
export const ADDRESS_APPLY_CHUNK = 256;

/** A promise's outcome as a value: work started now and awaited later, which must not go
 *  unhandled while other work runs; the caller rethrows `thrown` when it gets there. */
type Settled<T> = { value: T } | { thrown: unknown };
function settle<T>(p: Promise<T>): Promise<Settled<T>> {
  return p.then(
    (value) => ({ value }),
    (thrown: unknown) => ({ thrown }),
  );
}

/** An error of a batch that was one chunk of a longer op list, with its index in the list. */
function reindexed(e: NetlinkError, at: number): NetlinkError {
  if (at === 0 || e.index === undefined) return e;
  return withIndex(e, e.index + at);
}

function withIndex(e: NetlinkError, index: number): NetlinkError {
  // its own fields (message is not enumerable on an Error)
  return new NetlinkError({ ...e, message: e.message, index });
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
  /** @internal the ownership record's writes: keys recorded by the first `early` ops of
   *  ipsets.early (before IPVS), keys forgotten by the ops of ipsets.late from `lateFrom`
   *  (after IPVS: those of `deleted` only once their deleteService went, `dropped` at once). */
  record?: { add: string[]; deleted: string[]; dropped: string[]; early: number; lateFrom: number };
}

export type PlannedWrite =
  | { kind: 'ipvs'; op: IpvsOp }
  | { kind: 'link'; op: LinkOp }
  | { kind: 'route'; op: RouteOp }
  | { kind: 'ipset'; op: IpSetOp }
  | { kind: 'nft'; op: NftOp };

export interface KindReport {
  /** Writes that succeeded, by op name. */
  ops: Record<string, number>;
  writes: number;
  errors: NetlinkError[];
}

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

function emptyReport(): KindReport {
  return { ops: {}, writes: 0, errors: [] };
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
  private draining = new Map<string, number>();
  private readonly managed: Cidr[];
  private readonly excluded: Cidr[];
  private readonly now: () => number;
  /** The keys of the virtual servers the engine owns by its record (ownership.ts), as of the
   *  last read of it and the record writes since; undefined until it is read (the first plan,
   *  and every full one, dumps it). Without an ipset handle, memory alone. */
  private recorded: Set<string> | undefined;
  /** The record's sets the kernel has (created once, when first needed). */
  private recordSets = new Set<string>();
  /** A copy of the VIPs the last sync applied without an error: an incremental plan whose
   *  desired VIPs equal them neither dumps nor diffs them (a full plan always does, and so
   *  repairs what others changed in between). */
  private clean: { vips?: DesiredVips } = {};
  private readonly nft: NftReconciler;
  /** The invalid desired services by key as of the last plans (a full plan checks every
   *  service, an incremental one those of its changes), and those without a key (a full
   *  plan's). */
  private readonly invalidServices = new Map<string, { s: DesiredService; v: ServiceVerdict }>();
  private invalidKeyless: Array<{ s: DesiredService; v: ServiceVerdict }> = [];
  /** The VIPs last checked and their verdict: the invalid ones, and the VIPs without them. */
  private vipCheck: { of: DesiredVips; invalid: InvalidObject[]; valid: DesiredVips } | undefined;

  constructor(
    private readonly kernel: EngineKernel,
    private readonly opts: EngineOptions = {},
  ) {
    this.managed = (opts.managedCidrs ?? []).map(parseCidr);
    this.excluded = (opts.excludeCidrs ?? []).map(parseCidr);
    this.now = opts.now ?? Date.now;
    if (!kernel.ipsets) this.recorded = new Set();
    this.nft = new NftReconciler(kernel.nft, {
      ...(opts.maxNftOpsPerTransaction !== undefined ? { maxOpsPerTransaction: opts.maxNftOpsPerTransaction } : {}),
      ...(opts.createNftInTransactionsOf !== undefined ? { createInTransactionsOf: opts.createNftInTransactionsOf } : {}),
      keepAsGiven: opts.desiredImmutable === true,
    });
  }

  /** Whether the engine may change or delete an observed IPVS service (`key`: its
   *  serviceKey, when the caller has it): recorded or claimed by an option, and not excluded. */
  owns(s: Service, key: string = serviceKey(s)): boolean {
    if (s.fwmark !== undefined) {
      const r = this.opts.managedFwmarks;
      return this.recorded?.has(key) === true || (r !== undefined && s.fwmark >= r.min && s.fwmark <= r.max);
    }
    const a = canonicalAddress(s.address);
    if (anyContains(this.excluded, a)) return false;
    return this.recorded?.has(key) === true || anyContains(this.managed, a);
  }

  /**
   * The IPVS delta of a full plan from the kernel's services without their destinations: the
   * desired services are diffed a slice (observeSlice) at a time, each slice's destinations
   * read just before (destinationsOf) and dropped after, so the whole table's destinations are
   * never held at once. The same delta as diffIpvs over the table read whole.
   */
  private async diffIpvsSliced(input: IpvsDiffInput, observed: ObservedIndex): Promise<{ delta: IpvsDelta; readMs: number }> {
    const wanted = byKey(input.desired);
    const parts = diffParts();
    const per = Math.max(1, this.opts.observeSlice ?? 256);
    const it = wanted.entries();
    let readMs = 0;
    for (let more = true; more; ) {
      const slice: Array<[string, DesiredService]> = [];
      while (slice.length < per) {
        const r = it.next();
        if (r.done) {
          more = false;
          break;
        }
        slice.push(r.value);
      }
      // the slice's services the kernel has
      const have = slice.filter(([key]) => observed.byKey.has(key)).map(([key]) => key);
      const t = performance.now();
      const dests = have.length ? await this.kernel.ipvs.destinationsOf!(have.map(keyToId)) : [];
      readMs += performance.now() - t;
      const destinations = new Map<string, Destination[]>();
      for (let i = 0; i < have.length; i++) destinations.set(have[i]!, dests[i]!);
      diffWanted(input, parts, slice, observed, destinations);
    }
    staleServices(parts, wanted, observed, input.recorded, input.recordScope);
    return { delta: assemble(parts), readMs };
  }

  /**
   * The services a plan diffs (`want`) without what the kernel layer would refuse, and what of
   * the kernel's to leave as it is for them. `want` is checked now: a full plan's is every
   * service (the verdicts kept are replaced), an incremental one's the services of its changes
   * (the verdicts of their keys replaced). Reported: every invalid service kept.
   */
  private checkServices(want: readonly DesiredService[], scope: ReadonlySet<string> | undefined): CheckedServices {
    if (!scope) {
      this.invalidServices.clear();
      this.invalidKeyless = [];
    } else for (const k of scope) this.invalidServices.delete(k);
    const sub = new Map<DesiredService, DesiredService | undefined>();
    const out: CheckedServices = { want, invalid: [], keptServices: new Set(), keptDests: new Map() };
    for (const s of want) {
      const v = checkService(s);
      if (!v) continue;
      if (keyable(s)) this.invalidServices.set(serviceKey(s), { s, v });
      else this.invalidKeyless.push({ s, v });
      sub.set(s, v.valid);
      if (v.key !== undefined) out.keptServices.add(v.key);
      if (v.destKeys) out.keptDests.set(serviceKey(s), new Set(v.destKeys));
    }
    for (const { v } of [...this.invalidKeyless, ...this.invalidServices.values()]) out.invalid.push(...v.invalid);
    if (sub.size) out.want = want.flatMap((s) => (!sub.has(s) ? [s] : sub.get(s) ? [sub.get(s)!] : []));
    return out;
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

  /** Leaves the kernel's destinations of these keys (service key -> destKeys: desired ones left
   *  out as invalid) as they are: no op, no drain, no flush for them. */
  private keepDestinations(delta: IpvsDelta, kept: ReadonlyMap<string, ReadonlySet<string>>): void {
    // a service's destination ops share its id object
    const keys = new Map<object, string>();
    const held = (service: ServiceId, dest: { address: string; port: number }) => {
      let k = keys.get(service);
      if (k === undefined) keys.set(service, (k = serviceKey(service)));
      return kept.get(k)?.has(destKey(dest)) === true;
    };
    delta.ops = delta.ops.filter(
      (o) => !((o.op === 'addDestination' || o.op === 'updateDestination' || o.op === 'deleteDestination') && held(o.service, o.dest)),
    );
    delta.flushFlows = delta.flushFlows.filter(
      (f) => !kept.get(serviceKey({ protocol: f.protocol, address: f.service.address, port: f.service.port, family: f.family }))?.has(destKey(f.dest)),
    );
    for (const [svc, dests] of kept)
      for (const d of dests) {
        const dk = drainKey(svc, d);
        const since = this.draining.get(dk);
        if (since === undefined) delta.draining.delete(dk);
        else delta.draining.set(dk, since);
      }
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
    ipvs: Service[] | ObservedIndex;
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
    const readOwn = k.ipsets !== undefined && (!changed || this.recorded === undefined);
    const [observed, link, addrs, routes, sets, ruleset, own] = await Promise.all([
      changed
        ? Promise.all([...changed].map((key) => k.ipvs.service(keyToId(key), { withDestinations: true }))).then((l) =>
            l.filter((s): s is Service => s !== null),
          )
        : k.ipvs.services({ withDestinations: !o.sliced }),
      wantVips ? k.links!.get(wantVips.link) : undefined,
      wantVips ? k.links!.addresses({ link: wantVips.link }).catch(noLink) : undefined,
      desired.routes && k.routes ? k.routes.list({ protocol: IPVSYNC_ROUTE_PROTOCOL }) : undefined,
      o.wantIpsets ? k.ipsets!.list() : undefined,
      this.nft.observe(o.nft),
      readOwn && !o.wantIpsets ? readRecord(k.ipsets!) : undefined,
    ]);
    const t1 = performance.now();
    if (readOwn) {
      const record = (own ?? sets!).filter((x) => IPVS_RECORD_SETS.includes(x.name));
      // firewall-mark services are recorded in memory only: they stay
      const memoryOnly = [...(this.recorded ?? [])].filter((key) => recordMember(key) === undefined);
      this.recorded = recordedKeys(record);
      for (const key of memoryOnly) this.recorded.add(key);
      this.recordSets = new Set(record.map((x) => x.name));
    }
    return {
      ipvs: o.sliced ? indexObserved(observed, (s, key) => this.owns(s, key)) : observed,
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
    const svcs = this.checkServices(named, changed);
    const want = svcs.want;
    const draining = changed ? new Map([...this.draining].filter(([key]) => changed.has(key.split('/')[0]!))) : this.draining;
    // The kernel's services of invalid desired services are left as they are: not the engine's
    // to change or delete in this plan.
    const kept = svcs.keptServices;
    if (kept.size && !Array.isArray(obs.ipvs)) {
      for (const key of kept) {
        const h = obs.ipvs.byKey.get(key);
        if (h !== undefined) obs.ipvs.byKey.set(key, h & ~1);
      }
    }
    const diffInput = {
      desired: want,
      observed: Array.isArray(obs.ipvs) ? obs.ipvs : [],
      owns: kept.size ? (s: Service, key: string) => this.owns(s, key) && !kept.has(key) : (s: Service, key: string) => this.owns(s, key),
      recorded: this.recorded,
      recordScope: changed ?? this.recorded,
      draining,
      now: this.now(),
      drainTimeoutMs: this.opts.drainTimeoutMs ?? 15 * 60 * 1000,
      shareDesired: this.opts.desiredImmutable === true,
    };
    let readMs = 0;
    let ipvs: IpvsDelta;
    if (!Array.isArray(obs.ipvs)) {
      const r = await this.diffIpvsSliced(diffInput, obs.ipvs);
      ipvs = r.delta;
      readMs = r.readMs;
    } else {
      ipvs = diffIpvs(diffInput);
    }
    if (svcs.keptDests.size) this.keepDestinations(ipvs, svcs.keptDests);
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
    if (obs.ipsets) plan.ipsets = obs.ipsets;
    this.planRecord(plan);
    plan.nftPlanned = nftPlanned;
    if (nftPlanned.delta) plan.nft = nftPlanned.delta;
    const invalid = [...svcs.invalid, ...checked.invalid, ...nftStart.invalid, ...nftPlanned.invalid];
    if (invalid.length) plan.invalid = invalid;
    plan.diffMs = performance.now() - obs.t1 - readMs;
    return plan;
  }

  /** Puts the ownership record's writes into the plan's ipset writes: the records first (so
   *  before IPVS creates anything), the forgetting last (after IPVS deleted). Without an ipset
   *  handle the record is memory: nothing to write, apply() keeps it. */
  private planRecord(plan: Plan): void {
    const { add, deleted, dropped } = plan.ipvs.record;
    if (!add.length && !deleted.length && !dropped.length) return;
    if (!this.kernel.ipsets) {
      plan.record = { add, deleted, dropped, early: 0, lateFrom: 0 };
      return;
    }
    const ipsets = plan.ipsets ?? { early: [], late: [] };
    const ops = recordOps(add, [...deleted, ...dropped], this.recordSets);
    plan.record = { add, deleted, dropped, early: ops.early.length, lateFrom: ipsets.late.length };
    plan.ipsets = { early: [...ops.early, ...ipsets.early], late: [...ipsets.late, ...ops.late] };
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
    // ops[from, to) in chunks; errors and the returned predicate index the whole ops list.
    // `ahead`: the next chunk is handed to `run` while this one is in the kernel (its
    // conversion on the main thread overlaps the kernel's work on the worker); `run` must send
    // chunks in call order where their order matters, as Ipvs.apply does (the VIP adds' does
    // not: distinct addresses, each added once). A chunk's exception still ends the loop, the
    // chunk after it possibly sent: the next sync diffs from the kernel.
    const batch = async <Op extends { op: string }>(
      r: KindReport,
      ops: Op[],
      run: (ops: Op[]) => Promise<{ status(i: number): string; errors: NetlinkError[] }>,
      { chunk = ops.length, from = 0, to = ops.length, ahead = false }: { chunk?: number; from?: number; to?: number; ahead?: boolean } = {},
    ): Promise<((i: number) => boolean) | undefined> => {
      if (from >= to) return undefined;
      const ok = new Uint8Array(ops.length);
      const slice = (at: number): Op[] => (at === 0 && to === ops.length && chunk >= ops.length ? ops : ops.slice(at, Math.min(at + chunk, to)));
      let part = slice(from);
      let sent = run(part);
      for (let at = from; at < to; at += chunk) {
        const nextPart = at + chunk < to ? slice(at + chunk) : undefined;
        let next: typeof sent | undefined;
        if (ahead && nextPart) {
          next = run(nextPart);
          // awaited below, or dropped when this chunk throws: never an unhandled rejection
          next.catch(() => undefined);
        }
        const res = await sent;
        for (const e of res.errors) r.errors.push(reindexed(e, at));
        for (let i = 0; i < part.length; i++) {
          if (res.status(i) !== 'ok') continue;
          ok[at + i] = 1;
          const o = part[i]!;
          r.ops[o.op] = (r.ops[o.op] ?? 0) + 1;
          r.writes++;
        }
        if (nextPart) {
          part = nextPart;
          sent = next ?? run(nextPart);
        }
      }
      return (i) => ok[i] === 1;
    };

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
    // A virtual server is created only once it is recorded: one that is not would be someone
    // else's to the next run. (A service the kernel has, desired and not recorded, is still
    // converged: the next sync records it.)
    let ipvsOps = plan.ipvs.ops;
    if (!recorded) ipvsOps = withoutUnrecorded(ipvsOps, new Set(rec!.add));
    // The nftables transaction and the IPVS writes go together: neither names the other's
    // objects, and while the kernel commits the glue (one transaction, ~100k elements at 10k
    // services) this thread converts the IPVS batches instead of waiting.
    const nftDone = settle(this.nft.apply(plan.nft, plan.nftPlanned?.base, report.nft));
    // settled before anything throws: neither may go unhandled while the other runs
    const ipvsDone = settle(batch(report.ipvs, ipvsOps, (o) => k.ipvs.apply(o, { stopOnError: false }), { chunk: IPVS_APPLY_CHUNK, ahead: true }));
    const nftOut = await nftDone;
    const ipvsOut = await ipvsDone;
    if ('thrown' in nftOut) throw nftOut.thrown;
    if ('thrown' in ipvsOut) throw ipvsOut.thrown;
    const ipvsOk = ipvsOut.value;
    const added = await vipAdds;
    if (added && 'thrown' in added) throw added.thrown;
    // A deleted virtual server is forgotten only once its delete went (or found it gone).
    const gone = rec ? goneServices(ipvsOps, ipvsOk, report.ipvs.errors, new Set(rec.deleted)) : [];
    let forgotten = rec ? [...gone, ...rec.dropped] : [];
    if (plan.ipsets && k.ipsets) {
      let late = plan.ipsets.late;
      if (rec) late = [...late.slice(0, rec.lateFrom), ...recordOps([], forgotten, this.recordSets).late];
      const lateOk = await batch(report.ipsets, late, (o) => k.ipsets!.apply(o, { stopOnError: false }));
      if (rec && !Array.from({ length: late.length - rec.lateFrom }, (_, i) => lateOk?.(rec.lateFrom + i)).every(Boolean)) forgotten = [];
    }
    if (rec && this.recorded) {
      if (recorded) for (const key of rec.add) this.recorded.add(key);
      for (const key of forgotten) this.recorded.delete(key);
      if (recorded && rec.early) for (const o of plan.ipsets!.early.slice(0, rec.early)) if (o.op === 'create') this.recordSets.add(o.name);
    }
    if (plan.routes && k.routes) await batch(report.routes, plan.routes.late, (o) => k.routes!.apply(o, { stopOnError: false }));
    if (plan.addresses && k.links) await batch(report.addresses, plan.addresses.late, (o) => k.links!.apply(o, { stopOnError: false }));

    // Drain state: what this plan saw, plus (incremental) what it did not look at.
    if (plan.scope) {
      const looked = new Set(plan.scope);
      for (const [key, v] of this.draining) if (!looked.has(key.split('/')[0]!)) plan.ipvs.draining.set(key, v);
    }
    this.draining = plan.ipvs.draining;
    report.draining = this.draining.size;

    // Stale UDP/SCTP flows of destinations whose delete succeeded.
    const deleted = new Set<string>();
    ipvsOps.forEach((o, i) => {
      if (o.op === 'deleteDestination' && ipvsOk?.(i)) deleted.add(`${serviceKey(o.service)}/${o.dest.address}/${o.dest.port}`);
    });
    const flows = plan.ipvs.flushFlows.filter((f) =>
      deleted.has(`${serviceKey({ protocol: f.protocol, address: f.service.address, port: f.service.port, family: f.family })}/${f.dest.address}/${f.dest.port}`),
    );
    if (flows.length && k.conntrack) report.flowsFlushed = await flushFlows(k.conntrack, flows, report.errors);

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

/** A plan's services to diff without what the kernel layer would refuse (Engine.checkServices). */
interface CheckedServices {
  /** Invalid ones left out, those with invalid destinations without them. */
  want: readonly DesiredService[];
  invalid: InvalidObject[];
  /** Keys of the kernel's services to leave as they are. */
  keptServices: Set<string>;
  /** Service key -> destKeys of the kernel's destinations to leave as they are. */
  keptDests: Map<string, Set<string>>;
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

/** The ops without those that create the services of `keys` (addService) or give them
 *  destinations (addDestination) where the service is created. */
function withoutUnrecorded(ops: IpvsOp[], keys: ReadonlySet<string>): IpvsOp[] {
  const created = new Set<string>();
  for (const o of ops) if (o.op === 'addService' && keys.has(serviceKey(o.service))) created.add(serviceKey(o.service));
  return ops.filter((o) => !((o.op === 'addService' || o.op === 'addDestination') && created.has(serviceKey(o.service))));
}

/** The keys of `keys` whose deleteService among `ops` succeeded or found the service gone. */
function goneServices(ops: readonly IpvsOp[], ok: ((i: number) => boolean) | undefined, errors: readonly NetlinkError[], keys: ReadonlySet<string>): string[] {
  if (!keys.size) return [];
  const missing = new Set(errors.filter((e) => e.code === 'ESRCH').map((e) => e.index));
  const out: string[] = [];
  ops.forEach((o, i) => {
    if (o.op !== 'deleteService' || !(ok?.(i) || missing.has(i))) return;
    const key = serviceKey(o.service);
    if (keys.has(key)) out.push(key);
  });
  return out;
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

/** Deletes the conntrack flows of removed UDP/SCTP destinations: clients stop using a dead
 *  backend instead of waiting for the flow to time out. */
async function flushFlows(ct: ConntrackApi, flows: FlowFlush[], errors: NetlinkError[]): Promise<number> {
  let n = 0;
  for (const f of flows) {
    try {
      const r = await ct.delete({ family: f.family, proto: f.protocol, origDst: f.service.address, origDport: f.service.port, replySrc: f.dest.address, replySport: f.dest.port });
      n += r.deleted;
      errors.push(...r.errors);
    } catch (e) {
      errors.push(e as NetlinkError);
    }
  }
  return n;
}

