// The engine's IPVS virtual servers: checked (what the kernel layer would refuse is left out),
// observed (one dump, or one GET per changed service), diffed (ipvs-diff; a full plan reads the
// destinations a slice of services at a time) and written in chunks; between syncs it keeps the
// ownership record (ownership.ts), the draining destinations and the invalid services' verdicts.
import type { NetlinkError } from '../errors.js';
import { StaleFlows, type ConntrackApi } from '../kernel/conntrack.js';
import type { IpSet, IpSetOp } from '../kernel/ipsets.js';
import type { Destination, IpvsApi, IpvsOp, Service, ServiceId } from '../kernel/ipvs.js';
import { anyContains, canonicalAddress, parseCidr, type Cidr } from '../net/address.js';
import { applyBatch, type KindReport } from './apply-batch.js';
import type { InvalidObject, Ownership } from './types.js';
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
import { IPVS_RECORD_SETS, recordedKeys, recordMember, recordOps } from './ownership.js';
import { checkService, keyable, type ServiceVerdict } from './validate.js';

/** IPVS ops per apply() call: the next batch is converted on this thread while the kernel takes
 *  the one before (Ipvs.apply sends batches in call order), so the conversion of 100k ops
 *  overlaps the kernel's work instead of preceding it. */
export const IPVS_APPLY_CHUNK = 512;

export interface IpvsReconcilerOptions extends Pick<Ownership, 'managedCidrs' | 'excludeCidrs' | 'managedFwmarks'> {
  drainTimeoutMs?: number;
  now?: () => number;
  observeSlice?: number;
  /** EngineOptions.desiredImmutable: ops may hold desired objects themselves. */
  shareDesired?: boolean;
}

/** The ownership record's writes of a plan: keys recorded by the first `early` ops of the
 *  ipset writes (before IPVS), keys forgotten by the late ones from `lateFrom` (after IPVS:
 *  those of `deleted` only once their deleteService went, `dropped` at once). */
export interface RecordWrites {
  add: string[];
  deleted: string[];
  dropped: string[];
  early: number;
  lateFrom: number;
}

const NO_IPVS = 'the engine has no IPVS handle (a kernel without IPVS): virtual servers cannot be programmed';

export class IpvsReconciler {
  private draining = new Map<string, number>();
  /** The flows of deleted destinations not flushed yet (a failed delete is tried again). */
  private readonly staleFlows = new StaleFlows();
  private readonly managed: Cidr[];
  private readonly excluded: Cidr[];
  private readonly now: () => number;
  /** The keys of the virtual servers the engine owns by its record (ownership.ts), as of the
   *  last read of it and the record writes since; undefined until it is read (the first plan,
   *  and every full one, dumps it). Without an ipset handle, memory alone. */
  private recorded: Set<string> | undefined;
  /** The record's sets the kernel has (created once, when first needed). */
  private recordSets = new Set<string>();
  /** The invalid desired services by key as of the last plans (a full plan checks every
   *  service, an incremental one those of its changes), and those without a key (a full
   *  plan's). */
  private readonly invalidServices = new Map<string, { s: DesiredService; v: ServiceVerdict }>();
  private invalidKeyless: Array<{ s: DesiredService; v: ServiceVerdict }> = [];

  constructor(
    /** undefined: no IPVS (every desired virtual server is refused, none is read). */
    private readonly ipvs: IpvsApi | undefined,
    /** Whether the record is kept in ipsets (an ipset handle), else in memory. */
    private readonly recordInSets: boolean,
    private readonly opts: IpvsReconcilerOptions = {},
  ) {
    this.managed = (opts.managedCidrs ?? []).map(parseCidr);
    this.excluded = (opts.excludeCidrs ?? []).map(parseCidr);
    this.now = opts.now ?? Date.now;
    if (!recordInSets) this.recorded = new Set();
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

  /** Whether a plan reads the ownership record from the kernel: a full one, or the first. */
  readsRecord(incremental: boolean): boolean {
    return this.recordInSets && (!incremental || this.recorded === undefined);
  }

  /** The kernel's services: those of `changed` (one GET each, with their destinations), or all
   *  of them (one dump; without destinations when `sliced`: diff reads them a slice at a time). */
  observe(changed: ReadonlySet<string> | undefined, sliced: boolean): Promise<Service[]> {
    const ipvs = this.ipvs;
    if (!ipvs) return Promise.resolve([]);
    if (!changed) return ipvs.services({ withDestinations: !sliced });
    return Promise.all([...changed].map((key) => ipvs.service(keyToId(key), { withDestinations: true }))).then((l) =>
      l.filter((s): s is Service => s !== null),
    );
  }

  /** Takes the record from the listed sets (its two among them). */
  takeRecord(sets: readonly IpSet[]): void {
    const record = sets.filter((x) => IPVS_RECORD_SETS.includes(x.name));
    // firewall-mark services are recorded in memory only: they stay
    const memoryOnly = [...(this.recorded ?? [])].filter((key) => recordMember(key) === undefined);
    this.recorded = recordedKeys(record);
    for (const key of memoryOnly) this.recorded.add(key);
    this.recordSets = new Set(record.map((x) => x.name));
  }

  /** The kernel's services of a sliced (full) plan indexed by key, after the record is taken:
   *  the index, not the listed objects, is held through the diff (ObservedIndex). */
  index(observed: readonly Service[]): ObservedIndex {
    return indexObserved(observed, (s, key) => this.owns(s, key));
  }

  /**
   * The IPVS delta of a plan: `named` (every desired service, or an incremental plan's changed
   * ones, `changed` their keys) checked and diffed against the kernel's (listed, or indexed for
   * a sliced plan). Invalid services are left out, what the kernel has under their keys left as
   * it is; reported: every invalid service known (this plan's verdicts and the earlier plans'
   * of the services it did not look at).
   */
  async plan(
    observed: Service[] | ObservedIndex,
    named: readonly DesiredService[],
    changed: ReadonlySet<string> | undefined,
  ): Promise<{ delta: IpvsDelta; readMs: number; invalid: InvalidObject[] }> {
    const index = Array.isArray(observed) ? undefined : observed;
    if (!this.ipvs && named.length) {
      const invalid = named.map((s): InvalidObject => ({ kind: 'ipvs', object: keyable(s) ? serviceKey(s) : '?', field: 'service', message: NO_IPVS }));
      return { ...(await this.plan(observed, [], changed)), invalid };
    }
    const svcs = this.check(named, changed);
    const draining = changed ? new Map([...this.draining].filter(([key]) => changed.has(key.split('/')[0]!))) : this.draining;
    // The kernel's services of invalid desired services are left as they are: not the engine's
    // to change or delete in this plan.
    const kept = svcs.keptServices;
    if (kept.size && index) {
      for (const key of kept) {
        const h = index.byKey.get(key);
        if (h !== undefined) index.byKey.set(key, h & ~1);
      }
    }
    const input: IpvsDiffInput = {
      desired: svcs.want,
      observed: Array.isArray(observed) ? observed : [],
      owns: kept.size ? (s: Service, key: string) => this.owns(s, key) && !kept.has(key) : (s: Service, key: string) => this.owns(s, key),
      ...(this.recorded ? { recorded: this.recorded } : {}),
      ...((changed ?? this.recorded) ? { recordScope: changed ?? this.recorded } : {}),
      draining,
      now: this.now(),
      drainTimeoutMs: this.opts.drainTimeoutMs ?? 15 * 60 * 1000,
      shareDesired: this.opts.shareDesired === true,
    };
    let readMs = 0;
    let delta: IpvsDelta;
    if (index) {
      const r = await this.diffSliced(input, index);
      delta = r.delta;
      readMs = r.readMs;
    } else delta = diffIpvs(input);
    if (svcs.keptDests.size) this.keepDestinations(delta, svcs.keptDests);
    return { delta, readMs, invalid: svcs.invalid };
  }

  /** The record's writes for a delta, put into the plan's ipset writes: the records first (so
   *  before IPVS creates anything), the forgetting last (after IPVS deleted). Without an ipset
   *  handle the record is memory: nothing to write, apply keeps it. */
  recordWrites(delta: IpvsDelta, ipsets: { early: IpSetOp[]; late: IpSetOp[] } | undefined): { record?: RecordWrites; ipsets?: { early: IpSetOp[]; late: IpSetOp[] } } {
    const { add, deleted, dropped } = delta.record;
    if (!add.length && !deleted.length && !dropped.length) return ipsets ? { ipsets } : {};
    if (!this.recordInSets) return { record: { add, deleted, dropped, early: 0, lateFrom: 0 }, ...(ipsets ? { ipsets } : {}) };
    const base = ipsets ?? { early: [], late: [] };
    const ops = recordOps(add, [...deleted, ...dropped], this.recordSets);
    return {
      record: { add, deleted, dropped, early: ops.early.length, lateFrom: base.late.length },
      ipsets: { early: [...ops.early, ...base.early], late: [...base.late, ...ops.late] },
    };
  }

  /** The delta's ops to write: without the creation of services whose record did not go in
   *  (`recordedOk` false): one that is not recorded would be someone else's to the next run. (A
   *  service the kernel has, desired and not recorded, is still converged: the next sync
   *  records it.) */
  opsToWrite(delta: IpvsDelta, record: RecordWrites | undefined, recordedOk: boolean): IpvsOp[] {
    return recordedOk || !record ? delta.ops : withoutUnrecorded(delta.ops, new Set(record.add));
  }

  /** Writes the ops, in chunks of IPVS_APPLY_CHUNK handed over ahead. */
  write(ops: IpvsOp[], report: KindReport): Promise<((i: number) => boolean) | undefined> {
    const ipvs = this.ipvs;
    if (!ipvs) return Promise.resolve(undefined); // plan() left every service out: no op
    return applyBatch(report, ops, (o) => ipvs.apply(o, { stopOnError: false }), { chunk: IPVS_APPLY_CHUNK, ahead: true });
  }

  /** The record's keys to forget after the writes: those whose deleteService went (or found the
   *  service gone), and those without a service. */
  forgotten(record: RecordWrites, ops: readonly IpvsOp[], ok: ((i: number) => boolean) | undefined, errors: readonly NetlinkError[]): string[] {
    return [...goneServices(ops, ok, errors, new Set(record.deleted)), ...record.dropped];
  }

  /** The late ipset ops that forget `keys` from the record. */
  forgetOps(keys: readonly string[]): IpSetOp[] {
    return recordOps([], keys, this.recordSets).late;
  }

  /** The record as the writes left it: the keys recorded (when their records went in) and
   *  forgotten, the record's sets created. */
  remember(record: RecordWrites, recordedOk: boolean, forgotten: readonly string[], earlyOps: readonly IpSetOp[]): void {
    if (!this.recorded) return;
    if (recordedOk) for (const key of record.add) this.recorded.add(key);
    for (const key of forgotten) this.recorded.delete(key);
    if (recordedOk && record.early) for (const o of earlyOps.slice(0, record.early)) if (o.op === 'create') this.recordSets.add(o.name);
  }

  /** After the writes: the drain state (what this plan saw, plus, incremental, what it did not
   *  look at) and the stale UDP/SCTP flows of destinations whose delete succeeded flushed.
   *  Returns the destinations draining and the flows flushed. */
  async settle(
    delta: IpvsDelta,
    scope: readonly string[] | undefined,
    ops: readonly IpvsOp[],
    ok: ((i: number) => boolean) | undefined,
    conntrack: ConntrackApi | undefined,
    errors: NetlinkError[],
  ): Promise<{ draining: number; flowsFlushed: number }> {
    if (scope) {
      const looked = new Set(scope);
      for (const [key, v] of this.draining) if (!looked.has(key.split('/')[0]!)) delta.draining.set(key, v);
    }
    this.draining = delta.draining;
    const deleted = new Set<string>();
    ops.forEach((o, i) => {
      if (o.op === 'deleteDestination' && ok?.(i)) deleted.add(`${serviceKey(o.service)}/${o.dest.address}/${o.dest.port}`);
    });
    const flows = delta.flushFlows.filter((f) =>
      deleted.has(`${serviceKey({ protocol: f.protocol, address: f.service.address, port: f.service.port, family: f.family })}/${f.dest.address}/${f.dest.port}`),
    );
    // clients stop using a dead backend instead of waiting for the flow to time out
    this.staleFlows.add(flows.map((f) => ({ family: f.family, proto: f.protocol, origDst: f.service.address, origDport: f.service.port, replySrc: f.dest.address, replySport: f.dest.port })));
    const flowsFlushed = this.staleFlows.size && conntrack ? await this.staleFlows.flush(conntrack, errors) : 0;
    return { draining: this.draining.size, flowsFlushed };
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
  private check(want: readonly DesiredService[], scope: ReadonlySet<string> | undefined): CheckedServices {
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

