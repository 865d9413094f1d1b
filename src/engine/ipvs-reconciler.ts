// The engine's IPVS virtual servers: checked (what the kernel layer would refuse is left out),
// observed (one dump, or one GET per changed service), diffed (ipvs-diff; a full plan reads the
// destinations a slice of services at a time) and written in chunks; it records the services
// it owns (ownership.ts: recorded before created, forgotten after deleted) and keeps between
// syncs that record, the draining destinations and the invalid services' verdicts.
import type { NetlinkError } from '../errors.js';
import { StaleFlows, type ConntrackApi } from '../kernel/conntrack.js';
import type { IpSetsApi } from '../kernel/ipsets.js';
import type { Destination, IpvsApi, IpvsOp, Service, ServiceId } from '../kernel/ipvs.js';
import { anyContains, canonicalAddress, parseCidr, type Cidr } from '../net/address.js';
import { applyBatch } from './apply-batch.js';
import type { IpSetsDelta } from './ipsets-diff.js';
import type { Phase, Planned, PlanReads, PlanScope, Reconciler } from './reconciler.js';
import type { InvalidObject, Ownership, SyncReport } from './types.js';
import {
  assemble,
  byKey,
  diffIpvs,
  diffParts,
  diffWanted,
  drainKey,
  indexObserved,
  staleServices,
  type IpvsDelta,
  type IpvsDiffInput,
  type ObservedIndex,
} from './ipvs-diff.js';
import { destKey, keyToId, serviceKey, type DesiredService } from './ipvs-model.js';
import { OwnershipRecord, type RecordWrites } from './ownership.js';
import { checkService, keyable, type ServiceVerdict } from './validate.js';

/** IPVS ops per apply() call: the next batch is converted on this thread while the kernel takes
 *  the one before (Ipvs.apply sends batches in call order), so the conversion of 100k ops
 *  overlaps the kernel's work instead of preceding it. */
export const IPVS_APPLY_CHUNK = 512;

export interface IpvsReconcilerOptions extends Pick<Ownership, 'managedCidrs' | 'excludeCidrs' | 'managedFwmarks'> {
  drainTimeoutMs?: number;
  now?: () => number;
  observeSlice?: number;
}

/** `sliced`: a full plan reading destinations a slice of services at a time as it diffs;
 *  `everySet`: the plan lists every ipset (it manages them), the record is taken from there. */
type IpvsChecked = CheckedServices & { changed: ReadonlySet<string> | undefined; sliced: boolean; everySet: boolean };

/** `ops`, `recorded`, `ok`: apply's (the ops written, whether the record went in, which went). */
type IpvsPlanned = Planned & { shown: { ipvs: IpvsDelta; ipsets?: IpSetsDelta }; scope: ReadonlySet<string> | undefined; record?: RecordWrites };
type Applying = IpvsPlanned & { ops?: IpvsOp[]; recorded?: boolean; ok?: ((i: number) => boolean) | undefined };

const NO_IPVS = 'the engine has no IPVS handle (a kernel without IPVS): virtual servers cannot be programmed';

export class IpvsReconciler implements Reconciler<IpvsChecked, Service[] | ObservedIndex, Applying> {
  readonly kind = 'ipvs';
  private draining = new Map<string, number>();
  /** The flows of deleted destinations not flushed yet (a failed delete is tried again). */
  private readonly staleFlows = new StaleFlows();
  private readonly managed: Cidr[];
  private readonly excluded: Cidr[];
  private readonly now: () => number;
  /** The virtual servers the engine owns by its record (ownership.ts): in ipsets when it has
   *  an ipset handle, else memory alone. */
  private readonly record: OwnershipRecord;
  /** The invalid desired services by key as of the last plans (a full plan checks every
   *  service, an incremental one those of its changes), and those without a key (a full
   *  plan's). */
  private readonly invalidServices = new Map<string, { s: DesiredService; v: ServiceVerdict }>();
  private invalidKeyless: Array<{ s: DesiredService; v: ServiceVerdict }> = [];

  constructor(
    /** undefined: no IPVS (every desired virtual server is refused, none is read). */
    private readonly ipvs: IpvsApi | undefined,
    /** Where the record is kept (ownership.ts; undefined: in memory). */
    ipsets: IpSetsApi | undefined,
    private readonly conntrack: ConntrackApi | undefined,
    private readonly opts: IpvsReconcilerOptions = {},
  ) {
    this.managed = (opts.managedCidrs ?? []).map(parseCidr);
    this.excluded = (opts.excludeCidrs ?? []).map(parseCidr);
    this.now = opts.now ?? Date.now;
    this.record = new OwnershipRecord(ipvs && ipsets);
  }

  /** Whether the engine may change or delete an observed IPVS service (`key`: its
   *  serviceKey, when the caller has it): recorded or claimed by an option, and not excluded. */
  owns(s: Service, key: string = serviceKey(s)): boolean {
    if (s.fwmark !== undefined) {
      const r = this.opts.managedFwmarks;
      return this.record.keys?.has(key) === true || (r !== undefined && s.fwmark >= r.min && s.fwmark <= r.max);
    }
    const a = canonicalAddress(s.address);
    if (anyContains(this.excluded, a)) return false;
    return this.record.keys?.has(key) === true || anyContains(this.managed, a);
  }

  /** The services a plan diffs: every desired one, or an incremental plan's changed ones;
   *  without an IPVS handle, none (each refused). */
  check({ desired, changes, changed }: PlanScope): IpvsChecked {
    const named = changes?.services ? [...changes.services.values()].filter((s): s is DesiredService => s !== undefined) : desired.services;
    const svcs = this.checkServices(this.ipvs ? named : [], changed);
    if (!this.ipvs) svcs.invalid = named.map((s): InvalidObject => ({ kind: 'ipvs', object: keyable(s) ? serviceKey(s) : '?', field: 'service', message: NO_IPVS }));
    return { ...svcs, changed, sliced: !changed && typeof this.ipvs?.destinationsOf === 'function', everySet: desired.ipsets !== undefined };
  }

  /** The kernel's services: those of `changed` (one GET each, with their destinations), or all
   *  of them (one dump; without destinations when sliced: diff reads them a slice at a time);
   *  and the record (a full plan, or the first). A sliced plan's are indexed by key once the
   *  record is taken: the index, not the listed objects, is held through the diff. */
  async observe(c: IpvsChecked, reads: PlanReads): Promise<Service[] | ObservedIndex> {
    const ipvs = this.ipvs;
    const [observed, own] = await Promise.all([
      !ipvs
        ? []
        : !c.changed
          ? ipvs.services({ withDestinations: !c.sliced })
          : Promise.all([...c.changed].map((key) => ipvs.service(keyToId(key), { withDestinations: true }))).then((l) => l.filter((s): s is Service => s !== null)),
      this.record.read(c.changed !== undefined, c.everySet ? () => reads.everySet() : undefined),
    ]);
    if (own) this.record.take(own);
    return c.sliced ? indexObserved(observed, (s, key) => this.owns(s, key)) : observed;
  }

  /**
   * The IPVS delta of a plan: the checked services diffed against the kernel's (listed, or
   * indexed for a sliced plan), and the record's writes for it. Invalid services are left out,
   * what the kernel has under their keys left as it is; reported: every invalid service known
   * (this plan's verdicts and the earlier plans' of the services it did not look at).
   */
  async diff(c: IpvsChecked, observed: Service[] | ObservedIndex): Promise<IpvsPlanned> {
    const index = Array.isArray(observed) ? undefined : observed;
    const changed = c.changed;
    const draining = changed ? new Map([...this.draining].filter(([key]) => changed.has(key.split('/')[0]!))) : this.draining;
    // The kernel's services of invalid desired services are left as they are: not the engine's
    // to change or delete in this plan.
    const kept = c.keptServices;
    if (kept.size && index) {
      for (const key of kept) {
        const h = index.byKey.get(key);
        if (h !== undefined) index.byKey.set(key, h & ~1);
      }
    }
    const recorded = this.record.keys;
    const input: IpvsDiffInput = {
      desired: c.want,
      observed: Array.isArray(observed) ? observed : [],
      owns: kept.size ? (s: Service, key: string) => this.owns(s, key) && !kept.has(key) : (s: Service, key: string) => this.owns(s, key),
      ...(recorded ? { recorded } : {}),
      ...((changed ?? recorded) ? { recordScope: changed ?? recorded } : {}),
      draining,
      now: this.now(),
      drainTimeoutMs: this.opts.drainTimeoutMs ?? 15 * 60 * 1000,
    };
    const { delta, readMs } = index ? await this.diffSliced(input, index) : { delta: diffIpvs(input), readMs: 0 };
    if (c.keptDests.size) this.keepDestinations(delta, c.keptDests);
    // The record's writes: the records before IPVS creates anything, the forgetting after it deleted.
    const record = this.record.writes(delta.record);
    const shown = { ipvs: delta, ...(record?.ops ? { ipsets: record.ops } : {}) };
    return { shown, invalid: c.invalid, readMs, scope: changed, ...(record ? { record } : {}) };
  }

  /**
   * Early: the record of the services to create. Main: the ops, in chunks of IPVS_APPLY_CHUNK
   * handed over ahead, without the creation of services whose record did not go in (one not
   * recorded would be someone else's to the next run; a service the kernel has, desired and not
   * recorded, is still converged: the next sync records it). Late: the record forgets the
   * services whose deleteService went (or found the service gone), and those without a service.
   */
  async apply(phase: Phase, p: Applying, report: SyncReport): Promise<void> {
    const rec = p.record;
    if (phase === 'early') {
      p.recorded = rec ? await this.record.record(rec, report.ipsets) : true;
      p.ops = p.recorded || !rec ? p.shown.ipvs.ops : withoutUnrecorded(p.shown.ipvs.ops, new Set(rec.add));
    } else if (phase === 'main') {
      const ipvs = this.ipvs;
      // without IPVS, check left every service out: no op
      p.ok = ipvs ? await applyBatch(report.ipvs, p.ops!, (o) => ipvs.apply(o, { stopOnError: false }), { chunk: IPVS_APPLY_CHUNK, ahead: true }) : undefined;
    } else if (rec) {
      const gone = [...goneServices(p.ops!, p.ok, report.ipvs.errors, new Set(rec.deleted)), ...rec.dropped];
      await this.record.forget(rec, p.recorded!, gone, report.ipsets);
    }
  }

  /** After the writes: the drain state (what this plan saw, plus, incremental, what it did not
   *  look at) and the stale UDP/SCTP flows of destinations whose delete succeeded flushed. */
  async settle(p: Applying, report: SyncReport): Promise<void> {
    const delta = p.shown.ipvs;
    if (p.scope) for (const [key, v] of this.draining) if (!p.scope.has(key.split('/')[0]!)) delta.draining.set(key, v);
    this.draining = delta.draining;
    const deleted = new Set<string>();
    p.ops!.forEach((o, i) => {
      if (o.op === 'deleteDestination' && p.ok?.(i)) deleted.add(`${serviceKey(o.service)}/${o.dest.address}/${o.dest.port}`);
    });
    const flows = delta.flushFlows.filter((f) =>
      deleted.has(`${serviceKey({ protocol: f.protocol, address: f.service.address, port: f.service.port, family: f.family })}/${f.dest.address}/${f.dest.port}`),
    );
    // clients stop using a dead backend instead of waiting for the flow to time out
    this.staleFlows.add(flows.map((f) => ({ family: f.family, proto: f.protocol, origDst: f.service.address, origDport: f.service.port, replySrc: f.dest.address, replySport: f.dest.port })));
    report.flowsFlushed = this.staleFlows.size && this.conntrack ? await this.staleFlows.flush(this.conntrack, report.errors) : 0;
    report.draining = this.draining.size;
  }

  /**
   * The delta of a full plan from the kernel's services without their destinations: the
   * desired services are diffed a slice (observeSlice) at a time, each slice's destinations
   * read just before (destinationsOf) and dropped after, so the whole table's destinations are
   * never held at once. The same delta as diffIpvs over the table read whole.
   */
  private async diffSliced(input: IpvsDiffInput, observed: ObservedIndex): Promise<{ delta: IpvsDelta; readMs: number }> {
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
      const dests = have.length ? await this.ipvs!.destinationsOf!(have.map(keyToId)) : [];
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
}

/** A plan's services to diff without what the kernel layer would refuse (IpvsReconciler.check). */
interface CheckedServices {
  /** Invalid ones left out, those with invalid destinations without them. */
  want: readonly DesiredService[];
  invalid: InvalidObject[];
  /** Keys of the kernel's services to leave as they are. */
  keptServices: Set<string>;
  /** Service key -> destKeys of the kernel's destinations to leave as they are. */
  keptDests: Map<string, Set<string>>;
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

