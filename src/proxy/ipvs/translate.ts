// The IPVS data plane's half of the proxy: the service model (service-model.ts: kube-proxy's
// semantics, no data plane) → the IPVS table, VIPs and glue kube-proxy's IPVS mode would
// program. Pure: same input, same (sorted) output; bad input becomes a warning, never a throw,
// and the model holds only values the kernel layer accepts, so no one object's value can fail a
// sync's transaction. Every service port yields a list of frontends (cluster IP, external IPs,
// load-balancer IPs, node ports); one loop turns frontends into virtual servers and glue, so the
// four kinds never repeat the same block.
import { field } from '../../kube/fields.js';
import { chooseScheduler, configScheduler, type SchedulerChoice } from './scheduler.js';
import type { ServiceObjects } from '../data-plane.js';
import type { V1EndpointSlice, V1Service } from '../../kube/api-types.js';
import { samePlain, serviceKey, type DesiredService } from '../../engine/ipvs-model.js';
import { compareText, sortByKey } from '../../util/sorted.js';
import { hashParts, KeyIndex } from '../../util/key-index.js';
import type { ServiceOptions } from '../../kernel/ipvs.js';
import { addressProtoPortKey, compareAddressProtoPort, inAny } from '../../kube/address.js';
import { addressKey, compareAddress, isLoopback } from '../../net/address.js';
import { sortSlices, type EndpointInfo } from '../../kube/endpoints.js';
import { objectKey } from '../../kube/change-tracker.js';
import {
  externallyAccessible,
  frontends,
  groupSlices,
  localWithoutEndpoints,
  modelContext,
  notProgrammed,
  serviceModel,
  type Frontend,
  type ModelContext,
  type ServiceModel,
  type ServicePortModel,
} from '../../kube/service-model.js';
import type { HealthCheck, ProxyConfig, TranslateInput } from '../../kube/types.js';
import type { FrontendKind, GlueHairpin, GlueNodePort, GlueSourceRange, GlueVip, ProxyModel } from './types.js';

/** This node and the configuration, the services' slices, and what they translate into. */
interface Context extends ModelContext {
  /** The configuration's scheduler (configScheduler). */
  defaultScheduler: string;
  slicesByService: Map<string, V1EndpointSlice[]>;
  out: Accumulator;
}

/** A virtual server and who has it. */
interface VsEntry {
  /** serviceKey(vs) */
  key: string;
  owner: string;
  service: string;
  kind: FrontendKind;
  bind: boolean;
  address: string;
  vs: DesiredService;
}

/** What services translate into: keyed collections, for one service as it is translated and
 *  for the whole model as the services' translations are merged into it. */
interface Accumulator {
  /** Virtual servers by key: the first service port (in name order) keeps one. */
  services: Map<string, VsEntry>;
  vips: Set<string>;
  glueVips: GlueVip[];
  nodePorts: Map<string, GlueNodePort>;
  sourceRanges: GlueSourceRange[];
  /** One service's hairpin entries, unique (addHairpin). */
  hairpin: GlueHairpin[];
  /** Their hairpinKeys, once there are more than a few (see addHairpin). */
  hairpinKeys: Set<string> | undefined;
  /** Merging: every service's hairpin entries (sorted and made unique at the end, where the
   *  ones more than one service has are counted into hairpinShared, see LastModel). */
  hairpinAll: GlueHairpin[];
  hairpinShared: Map<string, number>;
  localTraffic: Set<string>;
  healthChecks: Map<string, HealthCheck>;
  noLocal: Set<string>;
  noLocalTotal: { internal: number; external: number };
  warnings: Array<{ service: string; message: string }>;
}

/**
 * One service's translation as it is kept (in the cache, until the service changes): lists,
 * not keyed collections, and one shared empty list for what a service has none of — an
 * Accumulator's 7 Maps and Sets per service were ~1.5 KB each, ~15 MB at 10k services.
 */
interface ServiceOut {
  /** In the order the service's ports and frontends made them; keys unique. */
  services: readonly VsEntry[];
  glueVips: readonly GlueVip[];
  /** Unique by nodePortKey. */
  nodePorts: readonly GlueNodePort[];
  sourceRanges: readonly GlueSourceRange[];
  /** Unique by hairpinKey. */
  hairpin: readonly GlueHairpin[];
  /** The service's name when it has externalTrafficPolicy Local, else ''. */
  localTraffic: string;
  healthCheck: HealthCheck | undefined;
  /** The service's name when a Local policy of it has no local endpoint, else ''. */
  noLocal: string;
  noLocalInternal: number;
  noLocalExternal: number;
  warnings: ReadonlyArray<{ service: string; message: string }>;
}

const NONE: readonly never[] = Object.freeze([]);
const list = <T>(xs: Iterable<T>): readonly T[] => {
  const a = [...xs];
  return a.length ? a : NONE;
};

/** The service's translation in `acc` (one service's) as kept, compact. */
function compact(acc: Accumulator): ServiceOut {
  // A service adds at most one name to localTraffic and noLocal and one health check.
  const one = <T>(c: { size: number; values(): Iterator<T> }, none: T): T => (c.size ? c.values().next().value! : none);
  return {
    services: list(acc.services.values()),
    glueVips: list(acc.glueVips),
    nodePorts: list(acc.nodePorts.values()),
    sourceRanges: list(acc.sourceRanges),
    hairpin: list(acc.hairpin),
    localTraffic: one(acc.localTraffic, ''),
    healthCheck: one(acc.healthChecks, undefined),
    noLocal: one(acc.noLocal, ''),
    noLocalInternal: acc.noLocalTotal.internal,
    noLocalExternal: acc.noLocalTotal.external,
    warnings: list(acc.warnings),
  };
}

/**
 * Per-service translations kept between translate() calls: pass the same cache every time. A
 * service whose Service object and EndpointSlice objects are the very same (===) as last time,
 * under the same node and config, is not translated again, so a sync after one EndpointSlice
 * update translates one service (the change trackers replace the objects that changed and
 * keep the others). The result is identical to translating everything. A model it patched
 * shares the lists of the one before, changed in place (ProxyModel).
 */
export class TranslateCache {
  /** @internal the node and config the entries were made under */
  context = '';
  /** @internal by "namespace/name" */
  readonly entries = new Map<string, CacheEntry>();
  /** @internal entries invalidated since the last call: what those services translated to then */
  readonly invalidated = new Map<string, CacheEntry>();
  /** @internal the last model, and where each of its virtual servers sits in model.services */
  last: LastModel | undefined;
  /** Services translated (not taken from the cache) by the last call. */
  translated = 0;
  /** How the last call built the model: 'patched' when every service that changed only changed
   *  its endpoints (its virtual servers' destinations and its hairpin entries: the last model's
   *  lists with those virtual servers swapped and hairpin entries removed and added in place, no
   *  merge, no sort, no copy of the whole), 'merged' otherwise. */
  get path(): 'patched' | 'merged' {
    return this.patched ? 'patched' : 'merged';
  }
  /** After a 'patched' call: the model it was patched from and what differs from it. */
  patched: ModelPatch | undefined;

  /** Forgets these services ("namespace/name"): the next call translates them again. */
  invalidate(names: Iterable<string>): void {
    for (const n of names) {
      const e = this.entries.get(n);
      if (e === undefined) continue;
      this.entries.delete(n);
      this.invalidated.set(n, e);
    }
  }
}

/** What a patched model changed of the one it was patched from, as plain data. The two
 *  models share their lists: `from`'s hold the patched model's entries now. */
export interface ModelPatch {
  from: ProxyModel;
  /** The virtual servers swapped, by serviceKey, with their new desired objects: exactly those
   *  that can differ from `from`'s. */
  services: ReadonlyMap<string, DesiredService>;
  /** The entries of glue.hairpin that went and came (the rest of the glue is `from`'s). */
  hairpin: { removed: readonly GlueHairpin[]; added: readonly GlueHairpin[] };
}

/** The last model, where each of its virtual servers sits in model.services, and how many
 *  services contribute each hairpin entry (two services may share an endpoint): for the
 *  entries more than one service has, in hairpinShared; every other entry of the model's
 *  hairpin list has one (most have one, and a count per entry was ~5 MB at 10k services).
 *  hairpinAt: where each entry sits in model.glue.hairpin, made by the first patch that
 *  changes the list (a full translation has none: it is not part of its peak memory). */
interface LastModel {
  model: ProxyModel;
  count: number;
  index: Map<string, number>;
  hairpinShared: Map<string, number>;
  hairpinAt: KeyIndex<GlueHairpin> | undefined;
}

interface CacheEntry {
  svc: V1Service;
  slices: readonly V1EndpointSlice[];
  out: ServiceOut;
}

export function translate(input: TranslateInput, cache?: TranslateCache): ProxyModel {
  const ctx = baseContext(input.node, input.config ?? {}, groupSlices(input.endpointSlices));
  if (cache) {
    const fingerprint = contextFingerprint(input.node, input.config);
    if (cache.context !== fingerprint) {
      cache.entries.clear();
      cache.invalidated.clear();
      cache.last = undefined;
      cache.context = fingerprint;
    }
    cache.translated = 0;
  }
  // Each service translates on its own; only merging them depends on their order (below).
  const services = [...input.services].map((s) => ({ s, name: objectKey(s), out: undefined as unknown as ServiceOut }));
  // Services translated anew, with what they translated to before (undefined: new).
  const changed: Array<{ name: string; before: ServiceOut | undefined; out: ServiceOut }> = [];
  // One service at a time is translated into this, then kept compact.
  const scratch = { ...ctx, out: emptyAccumulator() };
  for (const item of services) {
    const { s, name } = item;
    const slices = ctx.slicesByService.get(name) ?? [];
    const hit = cache?.entries.get(name);
    let out: ServiceOut;
    if (hit && hit.svc === s && sameItems(hit.slices, slices)) {
      out = hit.out;
    } else {
      out = translateOne(s, name, slices, scratch);
      if (cache) {
        changed.push({ name, before: (hit ?? cache.invalidated.get(name))?.out, out });
        cache.entries.set(name, { svc: s, slices, out });
        cache.translated++;
      }
    }
    item.out = out;
  }
  // Merged by name (plain code-unit order: deterministic, and the first of two services
  // claiming the same virtual server keeps it); a patched model needs no order.
  const sortedOuts = () => services.sort((a, b) => compareText(a.name, b.name)).map((x) => x.out);
  if (!cache) return mergeAll(ctx, sortedOuts()).model;
  cache.invalidated.clear();
  if (cache.entries.size > services.length) {
    const names = new Set(services.map((x) => x.name));
    for (const k of cache.entries.keys()) if (!names.has(k)) cache.entries.delete(k);
  }
  const base = cache.last?.model;
  const patched = cache.last && patch(cache.last, services.length, changed, ctx);
  if (patched) {
    cache.patched = { from: base!, services: patched.swapped, hairpin: patched.hairpin };
    cache.last!.model = patched.model;
    return patched.model;
  }
  cache.patched = undefined;
  const outs = sortedOuts();
  const { model, keys } = mergeAll(ctx, outs);
  // What the next call patches from: where each virtual server sits, who has each hairpin entry.
  const index = new Map<string, number>();
  for (let i = 0; i < keys.length; i++) index.set(keys[i]!, i);
  cache.last = { model, count: services.length, index, hairpinShared: ctx.out.hairpinShared, hairpinAt: undefined };
  return model;
}

/**
 * One service's translation, kept compact; `scratch` is empty again after. Whatever one
 * service's objects hold, it never fails the others: an exception translating it (a shape no
 * check foresaw) becomes a warning naming it, and the service contributes nothing else.
 */
function translateOne(svc: V1Service, name: string, slices: readonly V1EndpointSlice[], scratch: Context): ServiceOut {
  let out: ServiceOut;
  try {
    translateService(serviceModel(svc, slices, scratch), chooseScheduler(field(svc, 'metadata', 'annotations'), scratch.defaultScheduler), scratch);
    out = compact(scratch.out);
  } catch (e) {
    clearAccumulator(scratch.out);
    scratch.out.warnings.push({ service: name, message: notProgrammed(e) });
    out = compact(scratch.out);
  }
  clearAccumulator(scratch.out);
  return out;
}

function contextFingerprint(node: TranslateInput['node'], config: ProxyConfig | undefined): string {
  return JSON.stringify([node, config ?? {}]);
}

/** What translatePatch needs of a service that changed: its objects now (undefined: deleted). */
/**
 * The model after changes to a few services, from the cache and those services alone: no pass
 * over every service or slice, so a sync after one EndpointSlice update costs the same at 1k
 * and 50k services. `changed` names the services ("namespace/name") whose objects changed
 * since the last call (the change trackers' drain: the caller invalidated them), `objects(name)`
 * gives each one's current Service and slices, `count` is the number of services now. The
 * result is what translate() of every object would give (a property test checks it);
 * undefined when it cannot be had this way — no last model, the node or config changed, a
 * service added or removed, a change beyond endpoints — and translate() is then the way.
 */
export function translatePatch(
  cache: TranslateCache,
  changed: Iterable<string>,
  objects: (name: string) => ServiceObjects,
  count: number,
  node: TranslateInput['node'],
  config: ProxyConfig | undefined,
): ProxyModel | undefined {
  const last = cache.last;
  if (!last || last.count !== count || cache.context !== contextFingerprint(node, config)) return undefined;
  const names = [...changed];
  const now: Array<{ name: string; svc: V1Service; slices: V1EndpointSlice[] }> = [];
  for (const name of names) {
    const o = objects(name);
    // added or deleted: the services are not the same set
    if (!o || (!cache.invalidated.has(name) && !cache.entries.has(name))) return undefined;
    now.push({ name, svc: o.svc, slices: sortSlices(o.slices) });
  }
  const ctx = baseContext(node, config ?? {}, new Map(now.map((x) => [x.name, x.slices])));
  const scratch = { ...ctx, out: emptyAccumulator() };
  const translated: Array<{ name: string; before: ServiceOut | undefined; out: ServiceOut }> = [];
  cache.translated = 0;
  for (const { name, svc, slices } of now) {
    const hit = cache.entries.get(name);
    if (hit && hit.svc === svc && sameItems(hit.slices, slices)) continue;
    const out = translateOne(svc, name, slices, scratch);
    translated.push({ name, before: (hit ?? cache.invalidated.get(name))?.out, out });
    cache.entries.set(name, { svc, slices, out });
    cache.invalidated.delete(name);
    cache.translated++;
  }
  const base = last.model;
  const patched = patch(last, count, translated, ctx);
  if (!patched) {
    // The cache's entries are this translation's now; the last model is not its base any more.
    cache.last = undefined;
    cache.patched = undefined;
    return undefined;
  }
  cache.patched = { from: base, services: patched.swapped, hairpin: patched.hairpin };
  last.model = patched.model;
  return patched.model;
}

function mergeAll(ctx: Context, outs: readonly ServiceOut[]): { model: ProxyModel; keys: string[] } {
  for (const out of outs) merge(ctx.out, out);
  return finish(ctx);
}

/**
 * The last model with the changed services' new destination lists and hairpin entries (none
 * changed: the last model again), when nothing else changed: the same services (none added or
 * removed), each changed one translating to exactly what it did before but for its virtual
 * servers' destinations and its local endpoints (hairpin), under the same node and config (a
 * change of those clears the cache). A new model object (and glue object, when hairpin
 * changed) over the last one's lists, changed in place: virtual servers swapped at their
 * places, hairpin entries removed (the last one filling the hole) and appended — the work of
 * the change, at any number of services. undefined: merge as usual. Updates
 * last.hairpinShared and last.hairpinAt.
 */
function patch(
  last: LastModel,
  count: number,
  changed: ReadonlyArray<{ name: string; before: ServiceOut | undefined; out: ServiceOut }>,
  ctx: Context,
): { model: ProxyModel; swapped: Map<string, DesiredService>; hairpin: ModelPatch['hairpin'] } | undefined {
  const base = last.model;
  if (last.count !== count || ctx.out.warnings.length) return undefined;
  for (const c of changed) if (!c.before || !sameButEndpoints(c.before, c.out)) return undefined;
  const services = base.services;
  const swaps = new Map<number, DesiredService>();
  const swapped = new Map<string, DesiredService>();
  const removed = new Map<string, GlueHairpin>();
  const added = new Map<string, GlueHairpin>();
  const shared = last.hairpinShared;
  const at = () => (last.hairpinAt ??= new KeyIndex(base.glue.hairpin, hairpinHash, sameHairpin));
  /** How many services have hairpin entry k (h) at this point of the patch. */
  const refs = (k: string, h: GlueHairpin): number =>
    shared.get(k) ?? (added.has(k) || (!removed.has(k) && at().indexOf(h) >= 0) ? 1 : 0);
  const setRefs = (k: string, n: number) => (n >= 2 ? shared.set(k, n) : shared.delete(k));
  for (const c of changed) {
    // sameButEndpoints: the same virtual servers in the same order
    const before = c.before!.services;
    c.out.services.forEach((e, j) => {
      const i = last.index.get(e.key);
      // A virtual server another service owns (a conflict) stays that one's.
      if (i === undefined || (swaps.get(i) ?? services[i]) !== before[j]!.vs) return;
      swaps.set(i, e.vs); // its destinations sorted (addVirtualServer)
      swapped.set(e.key, e.vs);
    });
    const beforeHairpin = new Map(c.before!.hairpin.map((h) => [hairpinKey(h), h]));
    const outHairpin = new Map(c.out.hairpin.map((h) => [hairpinKey(h), h]));
    for (const [k, h] of beforeHairpin) {
      if (outHairpin.has(k)) continue;
      const n = refs(k, h) - 1;
      setRefs(k, n);
      if (n === 0 && !added.delete(k)) removed.set(k, h);
    }
    for (const [k, h] of outHairpin) {
      if (beforeHairpin.has(k)) continue;
      const n = refs(k, h);
      setRefs(k, n + 1);
      if (n === 0 && !removed.delete(k)) added.set(k, h);
    }
  }
  const hairpin = { removed: [...removed.values()].sort(byVip), added: [...added.values()].sort(byVip) };
  // Nothing of the model changed (the changed services translate as before, or to a conflict
  // another service wins): the last model itself.
  if (!swaps.size && !removed.size && !added.size) return { model: base, swapped, hairpin };
  for (const [i, vs] of swaps) services[i] = vs;
  let model: ProxyModel = { ...base };
  if (removed.size || added.size) {
    const list = at();
    for (const h of hairpin.removed) list.removeAt(list.indexOf(h));
    for (const h of hairpin.added) list.push(h);
    model = { ...model, glue: { ...base.glue } };
  }
  return { model, swapped, hairpin };
}

function hairpinKey(h: GlueHairpin): string {
  return `${h.protocol}|${h.address}|${h.port}`;
}

const hairpinHash = (h: GlueHairpin): number => hashParts(h.address, h.protocol, h.port);
const sameHairpin = (a: GlueHairpin, b: GlueHairpin): boolean => a.port === b.port && a.address === b.address && a.protocol === b.protocol;

const byVip = compareAddressProtoPort;

/** A virtual server's sort key (fwmark services have no address: NaN, left to byVip). */
const vsKey = (vs: DesiredService): number => ('address' in vs && vs.address !== undefined ? addressProtoPortKey(vs as never) : NaN);

/** Two translations of one service that differ at most in their virtual servers' destinations
 *  and their hairpin entries (what an endpoint change can change, besides the conditions below). */
function sameButEndpoints(a: ServiceOut, b: ServiceOut): boolean {
  if (a.services.length !== b.services.length) return false;
  for (let i = 0; i < a.services.length; i++) {
    const ea = a.services[i]!;
    const eb = b.services[i]!;
    if (ea.key !== eb.key || ea.owner !== eb.owner || ea.service !== eb.service || ea.kind !== eb.kind || ea.bind !== eb.bind || ea.address !== eb.address)
      return false;
    if (!samePlain({ ...ea.vs, destinations: undefined }, { ...eb.vs, destinations: undefined })) return false;
  }
  const plain = (o: ServiceOut) => [
    o.glueVips, o.nodePorts, o.sourceRanges, o.localTraffic, o.healthCheck, o.noLocal, o.noLocalInternal, o.noLocalExternal, o.warnings,
  ];
  return samePlain(plain(a), plain(b));
}

function sameItems<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Adds one service's translation to the whole (never modifying the service's: it may be a
 *  cached one). A virtual server another service already has stays that one's. */
function merge(into: Accumulator, from: ServiceOut): void {
  for (const e of from.services) {
    if (into.services.has(e.key)) continue;
    into.services.set(e.key, e);
    if (e.bind) into.vips.add(e.address);
  }
  // The service's own warnings, then its virtual servers that another service had first.
  into.warnings.push(...from.warnings);
  for (const e of from.services) {
    const taken = into.services.get(e.key)!;
    if (taken !== e) into.warnings.push({ service: e.service, message: `${e.kind} ${e.key} already belongs to ${taken.owner}, ignored` });
  }
  into.glueVips.push(...from.glueVips);
  for (const np of from.nodePorts) {
    const k = nodePortKey(np);
    if (!into.nodePorts.has(k)) into.nodePorts.set(k, np);
  }
  into.sourceRanges.push(...from.sourceRanges);
  for (const h of from.hairpin) into.hairpinAll.push(h);
  if (from.localTraffic) into.localTraffic.add(from.localTraffic);
  if (from.healthCheck) into.healthChecks.set(from.healthCheck.service, from.healthCheck);
  if (from.noLocal) into.noLocal.add(from.noLocal);
  into.noLocalTotal.internal += from.noLocalInternal;
  into.noLocalTotal.external += from.noLocalExternal;
}

function nodePortKey(np: GlueNodePort): string {
  return `${np.family}|${np.protocol}|${np.port}`;
}

// ---- setup ----

function emptyAccumulator(): Accumulator {
  return {
    services: new Map(),
    vips: new Set(),
    glueVips: [],
    nodePorts: new Map(),
    sourceRanges: [],
    hairpin: [],
    hairpinKeys: undefined,
    hairpinAll: [],
    hairpinShared: new Map(),
    localTraffic: new Set(),
    healthChecks: new Map(),
    noLocal: new Set(),
    noLocalTotal: { internal: 0, external: 0 },
    warnings: [],
  };
}

/** Empties an accumulator for the next service (compact() copied out what it holds). Only
 *  what holds something: Map/Set clear() allocates a new table even when empty (7 of them per
 *  service, ~1 KB: ~10 MB a 10k-service translation). */
function clearAccumulator(a: Accumulator): void {
  if (a.services.size) a.services.clear();
  if (a.vips.size) a.vips.clear();
  a.glueVips.length = 0;
  if (a.nodePorts.size) a.nodePorts.clear();
  a.sourceRanges.length = 0;
  a.hairpin.length = 0;
  a.hairpinKeys = undefined;
  a.hairpinAll.length = 0;
  if (a.hairpinShared.size) a.hairpinShared.clear();
  if (a.localTraffic.size) a.localTraffic.clear();
  if (a.healthChecks.size) a.healthChecks.clear();
  if (a.noLocal.size) a.noLocal.clear();
  a.noLocalTotal.internal = 0;
  a.noLocalTotal.external = 0;
  a.warnings.length = 0;
}

/** The context of a translation, given its slices by service. */
function baseContext(node: TranslateInput['node'], config: ProxyConfig, slicesByService: Map<string, V1EndpointSlice[]>): Context {
  const out = emptyAccumulator();
  const defaultScheduler = configScheduler(config, out.warnings);
  const ctx = modelContext(node, config);
  out.warnings.push(...ctx.warnings);
  return { ...ctx, defaultScheduler, slicesByService, out };
}

// ---- per service ----

/** One service's model into the accumulator: its warnings, then its ports' virtual servers and
 *  glue. */
function translateService(m: ServiceModel, sched: SchedulerChoice, ctx: Context): void {
  for (const message of m.warnings) ctx.out.warnings.push({ service: m.name, message });
  // a service without ports (headless, no cluster IP) has no virtual server to schedule
  if (m.ports.length) for (const message of sched.warnings) ctx.out.warnings.push({ service: m.name, message });
  if (m.externalLocal) ctx.out.localTraffic.add(m.name);
  for (const p of m.ports) translatePort(p, sched, ctx);
  if (m.healthCheck) ctx.out.healthChecks.set(m.name, m.healthCheck);
}

/** The IPVS options of a service port: its service's scheduler, and ClientIP affinity as
 *  persistence. */
function ipvsOptions(sp: ServicePortModel, sched: SchedulerChoice): ServiceOptions {
  const options: ServiceOptions = { scheduler: sched.scheduler };
  const sticky = sp.affinityTimeout > 0;
  const flags = [...(sticky ? (['persistent'] as const) : []), ...sched.flags];
  if (flags.length) options.flags = flags;
  if (sticky) options.timeout = sp.affinityTimeout;
  return options;
}


// ---- per service port ----

function translatePort(sp: ServicePortModel, sched: SchedulerChoice, ctx: Context): void {
  for (const fe of frontends(sp, ctx)) {
    addVirtualServer(sp, fe, realServers(sp, fe), sched, ctx);
    addGlue(sp, fe, ctx);
  }
  addHairpin(sp, sp.nodeLocal, ctx);
  countNoLocal(sp, ctx);
}

/**
 * A frontend's real servers as kube-proxy's IPVS mode chooses them (syncEndpoint): its traffic
 * policy's endpoints, and for a Local policy without an endpoint on this node the Cluster
 * policy's (kubernetes#97081: pods here reach the service; traffic from elsewhere is forwarded
 * and its reply lost) — for the cluster IP only when the port is externally accessible, as
 * kube-proxy has no Cluster endpoints for a port that never uses them. (The nftables data plane
 * follows kube-proxy's nftables mode instead: docs/kube-proxy.md.)
 */
function realServers(sp: ServicePortModel, fe: Frontend): readonly EndpointInfo[] {
  if (!fe.localOnly) return sp.cluster;
  if (sp.local.length) return sp.local;
  return fe.kind !== 'clusterIP' || externallyAccessible(sp) ? sp.cluster : sp.local;
}

/** Bound on kube-ipvs0: the cluster IP, and external and load-balancer IPs that are no node
 *  address (those are local already); NodePorts are on node addresses. */
function binds(fe: Frontend, ctx: Context): boolean {
  return fe.kind === 'clusterIP' || (fe.kind !== 'nodePort' && !ctx.nodeAddresses.has(fe.address));
}

function addVirtualServer(sp: ServicePortModel, fe: Frontend, endpoints: readonly EndpointInfo[], sched: SchedulerChoice, ctx: Context): void {
  const vs: DesiredService = {
    protocol: sp.protocol,
    address: fe.address,
    port: fe.port,
    ...ipvsOptions(sp, sched),
    // sorted by address and port, as endpointsForPort gives them (filtering keeps the order)
    destinations: endpoints.map((e) => ({ address: e.address, port: e.port, forward: 'masq', weight: 1 })),
  };
  // no two virtual servers share the flags array
  if (vs.flags) vs.flags = [...vs.flags];
  const key = serviceKey(vs);
  const taken = ctx.out.services.get(key);
  if (taken) {
    ctx.out.warnings.push({ service: sp.service, message: `${fe.kind} ${key} already belongs to ${taken.owner}, ignored` });
    return;
  }
  ctx.out.services.set(key, { key, owner: sp.name, service: sp.service, kind: fe.kind, bind: binds(fe, ctx), address: fe.address, vs });
}

function addGlue(sp: ServicePortModel, fe: Frontend, ctx: Context): void {
  const { protocol, name: servicePort } = sp;
  if (fe.kind === 'nodePort') {
    const np: GlueNodePort = { protocol, port: fe.port, family: sp.family, localOnly: fe.localOnly, servicePort };
    const key = nodePortKey(np);
    if (!ctx.out.nodePorts.has(key)) ctx.out.nodePorts.set(key, np);
    return;
  }
  ctx.out.glueVips.push({ kind: fe.kind, address: fe.address, protocol, port: fe.port, localOnly: fe.localOnly, bound: binds(fe, ctx), servicePort });
  if (fe.kind === 'loadBalancer' && sp.sourceRanges.cidrs.length) {
    const allowFromNode = [...ctx.nodeAddresses].some((a) => !isLoopback(a) && inAny(sp.sourceRanges, a));
    ctx.out.sourceRanges.push({ address: fe.address, protocol, port: fe.port, cidrs: [...sp.sourceRanges.texts].sort(), allowFromNode, servicePort });
  }
}

/** Node-local endpoints may reach themselves through a VIP: they need masquerade (every one,
 *  whatever its conditions, as kube-proxy's KUBE-LOOP-BACK). */
function addHairpin(sp: ServicePortModel, local: readonly EndpointInfo[], ctx: Context): void {
  for (const e of local) {
    const acc = ctx.out;
    const list = acc.hairpin;
    // Unique: a service's few entries by a scan (no key text per local endpoint), more by key.
    if (!acc.hairpinKeys && list.length < 16) {
      if (!list.some((x) => x.port === e.port && x.address === e.address && x.protocol === sp.protocol)) list.push({ address: e.address, protocol: sp.protocol, port: e.port });
      continue;
    }
    acc.hairpinKeys ??= new Set(list.map(hairpinKey));
    const h: GlueHairpin = { address: e.address, protocol: sp.protocol, port: e.port };
    const k = hairpinKey(h);
    if (acc.hairpinKeys.has(k)) continue;
    acc.hairpinKeys.add(k);
    list.push(h);
  }
}

function countNoLocal(sp: ServicePortModel, ctx: Context): void {
  const n = localWithoutEndpoints(sp);
  if (n.internal) ctx.out.noLocalTotal.internal++;
  if (n.external) ctx.out.noLocalTotal.external++;
  if (n.internal || n.external) ctx.out.noLocal.add(sp.service);
}

// ---- output ----

/** The model from the accumulated translation, sorted throughout, and its virtual servers'
 *  keys in the model's order. */
function finish(ctx: Context): { model: ProxyModel; keys: string[] } {
  const o = ctx.out;
  // The long lists (one entry per service or endpoint) sort by a number per entry where it has
  // one (the comparators parse addresses on every call). Destinations come sorted
  // (addVirtualServer).
  const entries = sortByKey([...o.services.values()], (e) => vsKey(e.vs), (a, b) => byVip(a.vs as never, b.vs as never));
  const services = entries.map((e) => e.vs);
  const healthChecks = [...o.healthChecks.values()].sort((a, b) => a.nodePort - b.nodePort);
  const vips = sortByKey([...o.vips], addressKey, compareAddress);
  const glueVips = sortByKey(o.glueVips, addressProtoPortKey, (a, b) => byVip(a, b) || compareText(a.kind, b.kind));
  const hairpin = uniqueHairpin(o.hairpinAll, o.hairpinShared);
  const model: ProxyModel = {
    services,
    vips,
    glue: {
      clusterCIDRs: [...ctx.clusterCIDRs],
      masqueradeAll: ctx.config.masqueradeAll ?? false,
      vips: glueVips,
      nodePorts: [...o.nodePorts.values()].sort((a, b) => compareText(a.family, b.family) || compareText(a.protocol, b.protocol) || a.port - b.port),
      nodePortAddresses: [...ctx.nodePortAddresses.inet, ...ctx.nodePortAddresses.inet6],
      sourceRanges: o.sourceRanges.sort(byVip),
      hairpin,
      localTrafficServices: [...o.localTraffic].sort(),
      healthCheckNodePorts: healthChecks.map((h) => h.nodePort),
    },
    healthChecks,
    noLocalEndpoints: [...o.noLocal].sort(),
    noLocalEndpointsTotal: { ...o.noLocalTotal },
    warnings: uniqueWarnings(o.warnings),
  };
  return { model, keys: entries.map((e) => e.key) };
}

/** The merged hairpin entries sorted, one per entry (each service's are unique, so a run of
 *  equal ones is that many services sharing it: counted into `shared`). Sorting the list
 *  needs no key text per entry, as a Map by key would. */
function uniqueHairpin(all: GlueHairpin[], shared: Map<string, number>): GlueHairpin[] {
  sortByKey(all, addressProtoPortKey, byVip);
  const out: GlueHairpin[] = [];
  for (let i = 0; i < all.length; ) {
    let j = i + 1;
    while (j < all.length && byVip(all[i]!, all[j]!) === 0) j++;
    out.push(all[j - 1]!);
    if (j - i > 1) shared.set(hairpinKey(all[i]!), j - i);
    i = j;
  }
  return out;
}

/** The same problem found on every port of a service is reported once. */
function uniqueWarnings(ws: Accumulator['warnings']): Accumulator['warnings'] {
  const seen = new Set<string>();
  return ws.filter((w) => {
    const k = `${w.service}\n${w.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
