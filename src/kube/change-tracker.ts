// Change trackers, kube-proxy style: they keep the current objects, and for every service touched
// since the last drain the state it had then (as a fingerprint of only what the proxy reads).
// drain() reports the services whose proxy-relevant state differs — so churn that changes
// nothing we program (resourceVersion, managedFields, status conditions, selectors, an endpoint
// moving between two slices of one service, an update reverted before the drain) is dropped.
import type { V1EndpointSlice, V1Service } from './api-types.js';
import {
  ANNOTATION_SCHEDULER,
  ANNOTATION_SCHEDULER_FLAGS,
  LABEL_SERVICE_NAME,
  LABEL_SERVICE_PROXY_NAME,
} from './types.js';
import { compareText } from '../util/sorted.js';
import { endpointAddress, pick, slimService, slimSlice } from './slim.js';
import { arr, field, member, str } from './fields.js';

interface Meta {
  metadata?: { namespace?: string; name?: string; labels?: Record<string, string> };
}

export function objectKey(o: Meta): string {
  return `${str(o, 'metadata', 'namespace') ?? 'default'}/${str(o, 'metadata', 'name') ?? ''}`;
}

/** The service ("namespace/name") an EndpointSlice belongs to (its kubernetes.io/service-name
 *  label), or undefined. */
export function sliceServiceKey(s: unknown): string | undefined {
  const svc = str(s, 'metadata', 'labels', LABEL_SERVICE_NAME);
  return svc ? `${str(s, 'metadata', 'namespace') ?? 'default'}/${svc}` : undefined;
}

/** A member's text in a fingerprint: of the type it should have, as it is (the common case, no
 *  JSON); undefined or null, `absent`; anything else, JSON after a byte no text has, so a port
 *  80 and a port "80" differ. */
function text(v: unknown, absent: string, type: 'string' | 'number'): string {
  return typeof v === type ? String(v) : v === undefined || v === null ? absent : `\u0001${stableJson(v)}`;
}

/** JSON of what translate reads, or, when it cannot be had (a cycle through YAML aliases), a
 *  text equal to no other: the group then counts as changed, which costs a translation only. */
let unserializable = 0;
function stableJson(v: unknown): string {
  try {
    return JSON.stringify(v);
  } catch {
    return `\u0000unserializable ${++unserializable}`;
  }
}

/**
 * Objects grouped by the service they belong to; a group's fingerprint is computed over all
 * its objects, so several objects per service (EndpointSlices) merge before comparing.
 */
class GroupTracker<T extends Meta> {
  private readonly objects = new Map<string, T>();
  /** Group → the keys of its objects: the key itself while it has one (every Service, and
   *  most services' EndpointSlices), a Set from two on (10k Sets are ~3 MB of hash tables). */
  private readonly groups = new Map<string, string | Set<string>>();
  /** Group → fingerprint at the last drain, for groups touched since. */
  private pending = new Map<string, string>();
  /** Groups touched in this round whose state differed from the last drain's when last
   *  counted (pendingCount), and those touched since that count. */
  private differing = new Set<string>();
  private uncounted = new Set<string>();
  /** Every object its own group (Services): `groups` is then `objects`' keys, not kept twice. */
  private readonly byKey: boolean;

  /** `empty(objects)` must hold exactly when `fingerprint(objects)` is '' (what an absent group
   *  fingerprints to): a group that was empty at the last drain — every group on the initial
   *  load — is then compared without fingerprinting it. */
  constructor(
    private readonly groupOf: (o: T) => string | undefined,
    private readonly fingerprint: (objects: T[]) => string,
    private readonly empty: (objects: T[]) => boolean,
    /** What is kept of an object: everything the fingerprint and translate() read. */
    private readonly keep: (o: T) => T,
  ) {
    this.byKey = groupOf === objectKey;
  }

  /** Adds or replaces an object (informer add and update); what is kept of it is `keep(obj)`. */
  update(given: T): void {
    const obj = this.keep(given);
    const key = objectKey(obj);
    const old = this.objects.get(key);
    const oldGroup = old ? this.groupOf(old) : undefined;
    const group = this.groupOf(obj);
    if (oldGroup) this.touch(oldGroup);
    if (group) this.touch(group);
    if (oldGroup && oldGroup !== group) this.removeMember(oldGroup, key);
    this.objects.set(key, obj);
    if (group) this.addMember(group, key);
  }

  /** Removes an object by "namespace/name" or by the object itself (informer delete). */
  delete(keyOrObj: string | T): void {
    const key = typeof keyOrObj === 'string' ? keyOrObj : objectKey(keyOrObj);
    const old = this.objects.get(key);
    if (!old) return;
    const group = this.groupOf(old);
    if (group) this.touch(group);
    this.objects.delete(key);
    if (group) this.removeMember(group, key);
  }

  private addMember(group: string, key: string): void {
    if (this.byKey) return;
    const m = this.groups.get(group);
    if (m === undefined) this.groups.set(group, key);
    else if (typeof m !== 'string') m.add(key);
    else if (m !== key) this.groups.set(group, new Set([m, key]));
  }

  private removeMember(group: string, key: string): void {
    if (this.byKey) return;
    const m = this.groups.get(group);
    if (m === undefined) return;
    if (typeof m === 'string') {
      if (m === key) this.groups.delete(group);
      return;
    }
    m.delete(key);
    if (m.size === 1) this.groups.set(group, m.values().next().value!);
  }

  /** Services whose relevant state changed since the last drain, in name order; starts a new
   *  round. */
  drain(): Set<string> {
    const round = this.pending;
    this.pending = new Map();
    this.differing = new Set();
    this.uncounted = new Set();
    const changed = new Set<string>();
    round.forEach((before, group) => {
      const now = this.members(group);
      if (before === '' ? !this.empty(now) : this.fingerprint(now) !== before) changed.add(group);
    });
    return changed.size ? new Set([...changed].sort(compareText)) : changed;
  }

  /** Services whose state differs from the last drain's (kube-proxy's pending changes: an
   *  update that changes nothing programmed, or is reverted, is none). Each group touched
   *  since the last count is compared once, so counting after every batch costs what the
   *  batch touched. */
  get pendingCount(): number {
    for (const group of this.uncounted) {
      const before = this.pending.get(group)!;
      const now = this.members(group);
      if (before === '' ? !this.empty(now) : this.fingerprint(now) !== before) this.differing.add(group);
      else this.differing.delete(group);
    }
    this.uncounted.clear();
    return this.differing.size;
  }

  /** Whether anything was touched since the last drain (it may still drain to no change). */
  get dirty(): boolean {
    return this.pending.size > 0;
  }

  get(key: string): T | undefined {
    return this.objects.get(key);
  }

  /** Objects of one service. */
  members(group: string): T[] {
    if (this.byKey) {
      const o = this.objects.get(group);
      return o === undefined ? [] : [o];
    }
    const m = this.groups.get(group);
    if (m === undefined) return [];
    if (typeof m === 'string') return [this.objects.get(m)!];
    return [...m].map((k) => this.objects.get(k)!);
  }

  list(): T[] {
    return [...this.objects.values()];
  }

  /** The objects' keys. */
  keys(): string[] {
    return [...this.objects.keys()];
  }

  get size(): number {
    return this.objects.size;
  }

  private touch(group: string): void {
    this.uncounted.add(group);
    if (this.pending.has(group)) return;
    const now = this.members(group);
    this.pending.set(group, this.empty(now) ? '' : this.fingerprint(now));
  }
}

/** What translate() reads from a Service; nothing else can change what is programmed. Every
 *  object in it is built here with its keys in a fixed order, so plain JSON is stable. */
export function serviceFingerprint(s: V1Service | undefined): string {
  if (!s) return '';
  const spec = member(s, 'spec');
  const ports = field(spec, 'ports');
  const ingress = field(s, 'status', 'loadBalancer', 'ingress');
  // Values as they came (a wrong type too: its warning names it), lists mapped only if lists.
  return stableJson({
    labels: pick(field(s, 'metadata', 'labels'), [LABEL_SERVICE_PROXY_NAME]),
    annotations: pick(field(s, 'metadata', 'annotations'), [ANNOTATION_SCHEDULER, ANNOTATION_SCHEDULER_FLAGS]),
    type: field(spec, 'type') ?? 'ClusterIP',
    clusterIP: field(spec, 'clusterIP'),
    clusterIPs: field(spec, 'clusterIPs'),
    ports: Array.isArray(ports) ? ports.map((p: unknown) => [field(p, 'name') ?? '', field(p, 'protocol') ?? 'TCP', field(p, 'port'), field(p, 'nodePort') ?? 0]) : ports,
    externalIPs: field(spec, 'externalIPs'),
    sessionAffinity: field(spec, 'sessionAffinity'),
    timeout: field(spec, 'sessionAffinityConfig', 'clientIP', 'timeoutSeconds'),
    externalTrafficPolicy: field(spec, 'externalTrafficPolicy'),
    internalTrafficPolicy: field(spec, 'internalTrafficPolicy'),
    healthCheckNodePort: field(spec, 'healthCheckNodePort'),
    loadBalancerSourceRanges: field(spec, 'loadBalancerSourceRanges'),
    ingress: Array.isArray(ingress) ? ingress.map((i: unknown) => [field(i, 'ip'), field(i, 'ipMode')]) : ingress,
  });
}

/** What translate() reads from the EndpointSlices of one service, order-independent. */
export function endpointSlicesFingerprint(slices: readonly V1EndpointSlice[]): string {
  const rows: string[] = [];
  for (const sl of slices) {
    const ports = (arr(sl, 'ports') ?? []).map((p) => `${text(field(p, 'name'), '', 'string')}/${text(field(p, 'protocol'), 'TCP', 'string')}/${text(field(p, 'port'), '', 'number')}`).sort().join(',');
    const addressType = field(sl, 'addressType');
    for (const e of arr(sl, 'endpoints') ?? []) {
      // Absent conditions mean what kube-proxy reads them as.
      const ready = field(e, 'conditions', 'ready') ?? true;
      const c = { ready, serving: field(e, 'conditions', 'serving') ?? ready, terminating: field(e, 'conditions', 'terminating') ?? false };
      const names = (list: readonly unknown[] | undefined, tag: string) => (list ?? []).map((h) => `${tag}:${stableJson(field(h, 'name'))}`);
      const hints = [...names(arr(e, 'hints', 'forZones'), 'z'), ...names(arr(e, 'hints', 'forNodes'), 'n')].sort();
      rows.push(stableJson([addressType, ports, endpointAddress(e as never), c.ready, c.serving, c.terminating, field(e, 'nodeName'), hints]));
    }
  }
  // Sorted rows without slice names: an endpoint moving between two slices with the same ports
  // is no change.
  return rows.sort().join('\n');
}

/** Keeps of each Service what the proxy reads (slimService). */
export class ServiceTracker extends GroupTracker<V1Service> {
  constructor() {
    super(objectKey, (objs) => serviceFingerprint(objs[0]), (objs) => objs.length === 0, slimService);
  }
}

/** When the change behind this version of an EndpointSlice happened (set by the endpoints
 *  controller); kube-proxy measures network programming latency from it. */
export const ANNOTATION_LAST_CHANGE_TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';

/** EndpointSlices merged per service ("namespace/<kubernetes.io/service-name>"); keeps of each
 *  what the proxy reads (slimSlice). Remembers when each change was triggered, for the
 *  network programming latency of the sync that takes it (lastTriggerTimes). */
export class EndpointSliceTracker extends GroupTracker<V1EndpointSlice> {
  /** Per service touched since the last drain, when its changes were triggered (ms since the
   *  epoch): the slice's last-change-trigger-time, else when it was received. */
  private triggers = new Map<string, number[]>();
  /** The objects before the first drain are the initial state, not changes to measure (as
   *  kube-proxy ignores trigger times from before it started). */
  private drainedOnce = false;
  /** The trigger times of the changes the last drain reported. */
  lastTriggerTimes: number[] = [];

  constructor(private readonly now: () => number = Date.now) {
    super(sliceServiceKey, endpointSlicesFingerprint, (slices) => slices.every((sl) => !arr(sl, 'endpoints')?.length), slimSlice);
  }

  override update(given: V1EndpointSlice): void {
    const key = objectKey(given);
    const old = this.drainedOnce ? this.get(key) : undefined;
    super.update(given);
    const group = this.drainedOnce ? sliceServiceKey(given) : undefined;
    if (!group) return;
    // A slice the same as the one held (a source that sends every object again) is no change
    // to time, as kube-proxy times only the updates its cache says change something.
    if (old && sliceServiceKey(old) === group && endpointSlicesFingerprint([old]) === endpointSlicesFingerprint([this.get(key)!])) return;
    const t = Date.parse(str(given, 'metadata', 'annotations', ANNOTATION_LAST_CHANGE_TRIGGER_TIME) ?? '');
    const times = this.triggers.get(group);
    const at = Number.isNaN(t) ? this.now() : t;
    if (times) times.push(at);
    else this.triggers.set(group, [at]);
  }

  /** A deletion's annotation is the last update's time, not the deletion's (kube-proxy drops
   *  the service's trigger times then): the deletion counts from when it was received. */
  override delete(keyOrObj: string | V1EndpointSlice): void {
    const old = this.get(typeof keyOrObj === 'string' ? keyOrObj : objectKey(keyOrObj));
    super.delete(keyOrObj);
    const group = this.drainedOnce && old ? sliceServiceKey(old) : undefined;
    if (group) this.triggers.set(group, [this.now()]);
  }

  override drain(): Set<string> {
    const triggers = this.triggers;
    this.triggers = new Map();
    const changed = super.drain();
    this.drainedOnce = true;
    this.lastTriggerTimes = [];
    for (const group of changed) for (const t of triggers.get(group) ?? []) this.lastTriggerTimes.push(t);
    return changed;
  }
}
