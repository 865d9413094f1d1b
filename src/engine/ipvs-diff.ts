// diff(desired, observed) -> the minimal list of IPVS ops, as a pure function. Unchanged
// services and destinations produce no op; changed options become SET_SERVICE / SET_DEST in
// place; removed TCP destinations drain (weight 0) before they are deleted.
import type { DestinationConfig, Destination, IpvsOp, Service, ServiceId } from '../kernel/ipvs.js';
import { serviceId } from '../kernel/ipvs.js';
import { canonicalAddress } from '../net/address.js';
import {
  destKey,
  keyToId,
  sameDestShape,
  sameShape,
  serviceKey,
  serviceShape,
  type DesiredService,
  type KernelServiceId,
  type ServiceShape,
} from './ipvs-model.js';

export interface IpvsDiffInput {
  desired: readonly DesiredService[];
  observed: readonly Service[];
  /** Observed services the engine may change or delete (ones it does not own are never
   *  touched, even when they look stale), given with their key. Desired services are always
   *  managed. */
  owns: (s: Service, key: string) => boolean;
  /** The keys of the virtual servers the engine has recorded as its own (ownership.ts): a
   *  desired one not among them is recorded (delta.record.add) — before it is created, or, when
   *  the kernel already has it, as it is adopted; a deleted one among them is forgotten after
   *  (delta.record.deleted). */
  recorded?: ReadonlySet<string>;
  /** The recorded keys this diff sees all of (a full plan: the whole record; incremental: its
   *  scope): one neither desired nor in the kernel is a record without a service (a crash
   *  between deleting and forgetting it, or someone else's delete), forgotten
   *  (delta.record.dropped). */
  recordScope?: Iterable<string>;
  /** Destinations draining since (ms), keyed by drainKey(); the engine keeps it between syncs. */
  draining: ReadonlyMap<string, number>;
  now: number;
  /** A draining destination is deleted after this even if it still has connections. */
  drainTimeoutMs: number;
  /** @internal Destination lists up to this long are matched pairwise (default 16); tests set
   *  it to compare that with matching by key. */
  pairwiseMax?: number;
}

export interface FlowFlush {
  protocol: 'udp' | 'sctp';
  family: 'inet' | 'inet6';
  service: { address: string; port: number };
  dest: { address: string; port: number };
}

export interface IpvsDelta {
  ops: IpvsOp[];
  /** Keys to record before the ops (desired, not recorded), to forget after their
   *  deleteService (recorded, deleted), and to forget as they have no service (dropped). */
  record: { add: string[]; deleted: string[]; dropped: string[] };
  /** Draining destinations after this delta is applied (replaces the input map). */
  draining: Map<string, number>;
  /** UDP/SCTP destinations removed: their conntrack flows must go (clients stick otherwise). */
  flushFlows: FlowFlush[];
}

/** Destination lists up to this long are matched pairwise; longer ones through key texts. */
const PAIRWISE = 16;

export function drainKey(svc: string, dest: string): string {
  return `${svc}/${dest}`;
}

/** The destination as an op carries it: canonical address; `d` itself when it is already
 *  (ops hold desired objects where they can: at 10k services × 10, 110k objects fewer in a
 *  full plan than copies; a plan's caller changes no desired object before it applied it). */
function destConfig(d: DestinationConfig): DestinationConfig {
  const address = canonicalAddress(d.address);
  return address === d.address ? d : { ...d, address };
}

/** The service as an add/update op carries it (destinations are not read from it). */
function serviceConfig(s: DesiredService): DesiredService {
  if ('fwmark' in s && s.fwmark !== undefined) return s;
  const a = s as { address: string };
  const address = canonicalAddress(a.address);
  return address === a.address ? s : ({ ...s, address } as DesiredService);
}

export function diffIpvs(input: IpvsDiffInput): IpvsDelta {
  const destinations = new Map<string, Destination[]>();
  const observed = indexObserved(input.observed, input.owns, destinations);
  const wanted = byKey(input.desired);
  const parts = diffParts();
  diffWanted(input, parts, wanted, observed, destinations);
  staleServices(parts, wanted, observed, input.recorded, input.recordScope);
  return assemble(parts);
}

/**
 * The kernel's services as a diff reads them: by key, the number of the options it has
 * (scheduler, flags, timeout, netmask, pe; a table has a handful of distinct ones) times two,
 * plus one when the engine owns it. A key and a number, not the listed objects: a full plan
 * keeps this through its whole diff (10k listed services held as objects were ~3 MB more at
 * the daemon's resync peak), and a service's identity is in its key (keyToId).
 */
export interface ObservedIndex {
  byKey: Map<string, number>;
  shapes: ServiceShape[];
}

/** Indexes the kernel's services (the last of two with one key wins); with `destinations`,
 *  also puts each service's listed destinations there by its key. */
export function indexObserved(
  services: readonly Service[],
  owns: (s: Service, key: string) => boolean,
  destinations?: Map<string, Destination[]>,
): ObservedIndex {
  const byKey = new Map<string, number>();
  const shapes: ServiceShape[] = [];
  const shapeAt = new Map<string, number>();
  for (const s of services) {
    const shape = serviceShape(s);
    const text = `${shape.scheduler}\0${shape.flags}\0${shape.timeout}\0${shape.netmask}\0${shape.pe}`;
    let at = shapeAt.get(text);
    if (at === undefined) {
      at = shapes.length;
      shapes.push(shape);
      shapeAt.set(text, at);
    }
    const key = serviceKey(s);
    byKey.set(key, at * 2 + (owns(s, key) ? 1 : 0));
    destinations?.set(key, s.destinations ?? []);
  }
  return { byKey, shapes };
}

/** What a diff made so far: the ops by kind (put in apply order at the end) and the drains. */
export interface IpvsDiffParts {
  addServices: IpvsOp[];
  setServices: IpvsOp[];
  destOps: IpvsOp[];
  delServices: IpvsOp[];
  draining: Map<string, number>;
  flushFlows: FlowFlush[];
  record: { add: string[]; deleted: string[]; dropped: string[] };
}

export function diffParts(): IpvsDiffParts {
  return { addServices: [], setServices: [], destOps: [], delServices: [], draining: new Map(), flushFlows: [], record: { add: [], deleted: [], dropped: [] } };
}

/** Services by key (the last of two with one key wins): the kernel's services, or the desired
 *  ones. */
export function byKey<S extends ServiceId | Service>(services: readonly S[], keyOf: (s: S) => string = serviceKey): Map<string, S> {
  const out = new Map<string, S>();
  for (const s of services) out.set(keyOf(s), s);
  return out;
}

/**
 * The ops that give these desired services (by key) their options and destinations, against
 * the kernel's services of the same keys (a key it does not have is a service to add) and
 * their destinations. Adds to `parts`; a diff may run it for the wanted services a slice at a
 * time, with `destinations` holding that slice's.
 */
export function diffWanted(
  input: Omit<IpvsDiffInput, 'desired' | 'observed'>,
  parts: IpvsDiffParts,
  wanted: Iterable<[string, DesiredService]>,
  observed: ObservedIndex,
  /** The kernel's destinations of the observed services among `wanted`, by service key. */
  destinations: ReadonlyMap<string, Destination[]>,
): void {
  const { addServices, setServices, destOps, draining, flushFlows } = parts;
  const pairwise = input.pairwiseMax ?? PAIRWISE;
  for (const [key, want] of wanted) {
    if (input.recorded && !input.recorded.has(key)) parts.record.add.push(key);
    const have = observed.byKey.get(key);
    if (have === undefined) {
      addServices.push({ op: 'addService', service: serviceConfig(want) });
    } else if (!sameShape(serviceShape(want), observed.shapes[have >> 1]!)) {
      setServices.push({ op: 'updateService', service: serviceConfig(want) });
    }
    const wantList = want.destinations;
    const haveList = (have !== undefined && destinations.get(key)) || [];
    // The service's id for its destination ops, made when the first one is; the kernel's
    // service (its key's id) for the removals.
    let id: ServiceId | undefined;
    let haveId: KernelServiceId | undefined;
    // Destinations pair up by address and port. Short lists (nearly every service) are
    // searched directly: no key text, Map or Set per destination (at 10k services x 10, ~110k
    // key texts and 22k collections per full plan); longer ones through their key texts.
    const keyed = wantList.length > pairwise || haveList.length > pairwise;
    const haveAt = keyed ? new Map(haveList.map((d, j) => [destKey(d), j])) : undefined;
    const seen = keyed ? new Set<string>() : undefined;
    // which of haveList are matched: bit j of a number (up to 31 of them), else a byte each
    let bits = 0;
    const bytes = haveList.length > 31 ? new Uint8Array(haveList.length) : undefined;
    next: for (let i = 0; i < wantList.length; i++) {
      const d = wantList[i]!;
      let j = -1;
      // a destination listed twice is one destination (adding it twice is EEXIST)
      if (keyed) {
        const dk = destKey(d);
        if (seen!.has(dk)) continue;
        seen!.add(dk);
        j = haveAt!.get(dk) ?? -1;
      } else {
        const a = canonicalAddress(d.address);
        for (let k = 0; k < i; k++) if (wantList[k]!.port === d.port && canonicalAddress(wantList[k]!.address) === a) continue next;
        for (let k = 0; k < haveList.length && j < 0; k++)
          if (!isMatched(bits, bytes, k) && haveList[k]!.port === d.port && canonicalAddress(haveList[k]!.address) === a) j = k;
      }
      const hd = haveList[j];
      if (hd) {
        if (bytes) bytes[j] = 1;
        else bits |= 1 << j;
        if (sameDestShape(d, hd)) continue;
      }
      destOps.push(destOp(d, hd, (id ??= serviceId(want))));
    }
    for (let j = 0; j < haveList.length; j++)
      if (!isMatched(bits, bytes, j)) removeDestination(input, key, (haveId ??= keyToId(key)), haveList[j]!, destOps, draining, flushFlows);
  }
}

/** Whether haveList[j] is matched: bit j of `bits`, or byte j of `bytes` for longer lists. */
function isMatched(bits: number, bytes: Uint8Array | undefined, j: number): boolean {
  return bytes ? bytes[j] === 1 : (bits & (1 << j)) !== 0;
}

/** The op for desired destination d, given the kernel's (undefined: none) when it differs.
 *  A destination left at weight 0 (draining, or by a previous run) comes back to its weight
 *  through the same comparison. */
function destOp(d: DestinationConfig, hd: Destination | undefined, service: ServiceId): IpvsOp {
  return hd
    ? { op: 'updateDestination', service, dest: destConfig(d) }
    : { op: 'addDestination', service, dest: destConfig(d) };
}

/** The kernel's services no desired service has, that the engine owns: deleted (their
 *  destinations with them; no destination list needed), and forgotten after when recorded. */
export function staleServices(
  parts: IpvsDiffParts,
  wanted: ReadonlyMap<string, unknown>,
  observed: ObservedIndex,
  recorded?: ReadonlySet<string>,
  recordScope?: Iterable<string>,
): void {
  for (const [key, have] of observed.byKey) {
    if (wanted.has(key) || (have & 1) === 0) continue;
    parts.delServices.push({ op: 'deleteService', service: keyToId(key) });
    if (recorded?.has(key)) parts.record.deleted.push(key);
  }
  if (!recorded || !recordScope) return;
  for (const key of recordScope) {
    if (recorded.has(key) && !wanted.has(key) && !observed.byKey.has(key)) parts.record.dropped.push(key);
  }
}

/** The delta: create before reference, remove references before delete — services first,
 *  then their destinations, then stale services (which take their destinations with them). */
export function assemble(parts: IpvsDiffParts): IpvsDelta {
  const ops: IpvsOp[] = parts.addServices;
  for (const part of [parts.setServices, parts.destOps, parts.delServices]) for (const o of part) ops.push(o);
  return { ops, draining: parts.draining, flushFlows: parts.flushFlows, record: parts.record };
}

function removeDestination(
  input: Pick<IpvsDiffInput, 'draining' | 'now' | 'drainTimeoutMs'>,
  svcKey: string,
  svc: KernelServiceId,
  d: Destination,
  ops: IpvsOp[],
  draining: Map<string, number>,
  flushFlows: FlowFlush[],
): void {
  const dk = drainKey(svcKey, destKey(d));
  const dest = { address: d.address, port: d.port };
  // UDP and SCTP have no connection to finish: delete now and flush their flows. TCP (and
  // fwmark services, whose protocol is unknown) drain first.
  if ('protocol' in svc && (svc.protocol === 'udp' || svc.protocol === 'sctp')) {
    ops.push({ op: 'deleteDestination', service: svc, dest });
    flushFlows.push({
      protocol: svc.protocol,
      family: svc.family,
      service: { address: svc.address, port: svc.port },
      dest,
    });
    return;
  }
  const since = input.draining.get(dk);
  // Nothing to drain when no connection uses it; otherwise weight 0 until the connections are
  // gone or the drain timeout passes.
  const idle = d.activeConns + d.inactiveConns === 0;
  const expired = d.weight === 0 && since !== undefined && input.now - since >= input.drainTimeoutMs;
  if (idle || expired) {
    ops.push({ op: 'deleteDestination', service: svc, dest });
    return;
  }
  if (d.weight !== 0) {
    ops.push({
      op: 'updateDestination',
      service: svc,
      dest: {
        ...dest,
        forward: d.forward,
        weight: 0,
        upperThreshold: d.upperThreshold,
        lowerThreshold: d.lowerThreshold,
        ...(d.tunnel ? { tunnel: d.tunnel } : {}),
      },
    });
  }
  draining.set(dk, since ?? input.now);
}
