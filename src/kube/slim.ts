// What the proxy keeps of a Service or an EndpointSlice: only the fields translate() and the
// change trackers read, in the objects' own shape, so the rest of the proxy reads them as it
// reads the originals. kube-proxy strips managedFields and the like from its informers' objects
// for the same reason: a node agent holds every Service and EndpointSlice of the cluster, and
// most of an object is what the apiserver keeps about it (managedFields, annotations, status
// conditions, targetRefs), not what a proxy programs. Values repeated across endpoints (their
// conditions, node names, port names and protocols) are shared, not kept once per endpoint.
// Wire data is read through fields.ts: a member of the wrong type is kept as it came (translate
// warns about it) or, where a list or a mapping is descended into, the list or mapping is read
// only if it is one; slimming never throws.
import type { V1Endpoint, V1EndpointSlice, V1Service } from './api-types.js';
import { boundedMemo } from '../util/memo.js';
import { arr, field, isMapping, member, obj, str } from './fields.js';
import { ANNOTATION_SCHEDULER, ANNOTATION_SCHEDULER_FLAGS, LABEL_SERVICE_NAME, LABEL_SERVICE_PROXY_NAME } from './types.js';

/** One string object per distinct short value (node names, zones, port names, protocols). */
const intern = boundedMemo((s) => s, 1 << 14);
/** Strings interned, anything else as it came. */
const internOpt = <T>(s: T): T => (typeof s === 'string' ? (intern(s) as T) : s);

type Conditions = NonNullable<NonNullable<V1EndpointSlice['endpoints']>[number]['conditions']>;
/** Endpoint conditions, one frozen object per combination of the three fields translate reads
 *  (each true, false or absent: at most 27, by index; anything else is kept as its own object). */
const conditionsCache: Array<Conditions | undefined> = new Array(27).fill(undefined);
/** A condition's place in the cache's index: absent 0, false 1, true 2; -1 for anything else. */
const flag = (x: unknown): number => (x === undefined ? 0 : x === false ? 1 : x === true ? 2 : -1);
function sharedConditions(c: unknown): Conditions | undefined {
  if (!isMapping(c)) return c as undefined; // absent, null, or the wrong type: translate reads it as absent
  const r = flag(c.ready);
  const s = flag(c.serving);
  const t = flag(c.terminating);
  if (r < 0 || s < 0 || t < 0) return { ready: c.ready, serving: c.serving, terminating: c.terminating } as Conditions;
  const i = r * 9 + s * 3 + t;
  return (conditionsCache[i] ??= Object.freeze({ ready: c.ready, serving: c.serving, terminating: c.terminating }) as Conditions);
}

/** The members `keys` of a label or annotation map, as they came; undefined when it has none
 *  of them. */
export function pick(m: unknown, keys: readonly string[]): Record<string, string> | undefined {
  let out: Record<string, string> | undefined;
  for (const k of keys) {
    const v = member(m, k);
    if (v !== undefined) (out ??= {})[k] = v as string; // a non-string annotation is translate's to warn about
  }
  return out;
}

/** The Service as the proxy reads it (see the file comment). Members the original does not
 *  have are undefined (what the proxy reads them as), so every kept Service has one shape. */
export function slimService(s: V1Service): V1Service {
  const meta = obj(s, 'metadata');
  const spec = obj(s, 'spec');
  const ingress = field(s, 'status', 'loadBalancer', 'ingress');
  const timeoutSeconds = field(spec, 'sessionAffinityConfig', 'clientIP', 'timeoutSeconds');
  const ports = member(spec, 'ports');
  const w = <T>(v: unknown): T => v as T; // kept as it came: translate reads it through fields.ts
  return {
    metadata: meta && {
      name: w(meta.name),
      namespace: w(meta.namespace),
      labels: pick(meta.labels, [LABEL_SERVICE_PROXY_NAME]),
      annotations: pick(meta.annotations, [ANNOTATION_SCHEDULER, ANNOTATION_SCHEDULER_FLAGS]),
    },
    spec: spec && {
      type: internOpt(w(spec.type)),
      clusterIP: w(spec.clusterIP),
      clusterIPs: w(spec.clusterIPs),
      ports: Array.isArray(ports)
        ? ports.map((p: unknown) =>
            isMapping(p) ? { name: internOpt(w(p.name)), protocol: internOpt(w(p.protocol)), port: w(p.port), nodePort: w(p.nodePort) } : w(p),
          )
        : w(ports),
      externalIPs: w(spec.externalIPs),
      sessionAffinity: internOpt(w(spec.sessionAffinity)),
      sessionAffinityConfig: timeoutSeconds === undefined ? undefined : { clientIP: { timeoutSeconds: w(timeoutSeconds) } },
      externalTrafficPolicy: internOpt(w(spec.externalTrafficPolicy)),
      internalTrafficPolicy: internOpt(w(spec.internalTrafficPolicy)),
      healthCheckNodePort: w(spec.healthCheckNodePort),
      loadBalancerSourceRanges: w(spec.loadBalancerSourceRanges),
    },
    status:
      ingress === undefined
        ? undefined
        : { loadBalancer: { ingress: Array.isArray(ingress) ? ingress.map((i: unknown) => (isMapping(i) ? { ip: w(i.ip), ipMode: internOpt(w(i.ipMode)) } : w(i))) : w(ingress) } },
  };
}

type Endpoint = V1Endpoint;

/**
 * An endpoint as the proxy keeps it: only its first address counts (as in kube-proxy), so that
 * one is kept as a string instead of a one-element list (100k endpoints: ~5.6 MB of lists).
 * `addresses` still reads as the V1 list; the proxy's own readers take `address` through
 * endpointAddress(). Every kept endpoint has the same three members, absent ones undefined: one
 * object shape, its members inside the object.
 */
export class SlimEndpoint implements Endpoint {
  constructor(
    readonly address: string | undefined,
    readonly conditions: Endpoint['conditions'],
    readonly nodeName: string | undefined,
  ) {}

  get addresses(): string[] {
    return this.address === undefined ? [] : [this.address];
  }

  /** Topology hints: few endpoints have them, those are SlimEndpointWithHints. */
  get hints(): Endpoint['hints'] {
    return undefined;
  }
}

/** A SlimEndpoint with topology hints (a member of its own, not a slot in every endpoint). */
export class SlimEndpointWithHints extends SlimEndpoint {
  constructor(
    address: string | undefined,
    conditions: Endpoint['conditions'],
    nodeName: string | undefined,
    private readonly topologyHints: NonNullable<Endpoint['hints']>,
  ) {
    super(address, conditions, nodeName);
  }

  override get hints(): Endpoint['hints'] {
    return this.topologyHints;
  }
}

/** An endpoint's first address (the one that counts), of a SlimEndpoint or a V1 endpoint;
 *  undefined when it has none or it is not a string. */
export function endpointAddress(e: Endpoint): string | undefined {
  if (e instanceof SlimEndpoint) return e.address;
  const a = arr(e, 'addresses')?.[0];
  return typeof a === 'string' ? a : undefined;
}

/** The EndpointSlice as the proxy reads it (see the file comment), its endpoints SlimEndpoints.
 *  Every kept port has the same three members, absent ones undefined (one object shape). */
export function slimSlice(s: V1EndpointSlice): V1EndpointSlice & { endpoints: V1Endpoint[] } {
  const meta = obj(s, 'metadata');
  const ports = member(s, 'ports');
  const w = <T>(v: unknown): T => v as T; // kept as it came: translate reads it through fields.ts
  return {
    metadata: meta && { name: w(meta.name), namespace: w(meta.namespace), labels: pick(meta.labels, [LABEL_SERVICE_NAME]) },
    addressType: internOpt(w(member(s, 'addressType'))),
    ports: Array.isArray(ports)
      ? ports.map((p: unknown) => (isMapping(p) ? { name: internOpt(w(p.name)), protocol: internOpt(w(p.protocol)), port: w(p.port) } : w(p)))
      : w(ports),
    // an endpoint that is not a mapping has no address: it is no endpoint
    endpoints: (arr(s, 'endpoints') ?? []).filter(isMapping).map((e) => {
      const hints = slimHints(e.hints);
      // conditions and nodeName of the wrong type are kept: translate skips such an endpoint
      const args = [endpointAddress(e as unknown as Endpoint), sharedConditions(e.conditions), internOpt(e.nodeName as string | undefined)] as const;
      return hints ? new SlimEndpointWithHints(...args, hints) : new SlimEndpoint(...args);
    }),
  };
}

type Hints = Endpoint['hints'];
/** Hints: only those with a string name count (a hint without one names no zone or node). */
function slimHints(h: unknown): Hints {
  if (h === undefined) return undefined; // most endpoints: nothing to allocate
  const names = (list: readonly unknown[] | undefined) => {
    const out: Array<{ name: string }> = [];
    for (const x of list ?? []) {
      const n = str(x, 'name');
      if (n !== undefined) out.push({ name: intern(n) });
    }
    return out.length ? out : undefined;
  };
  const forZones = names(arr(h, 'forZones'));
  const forNodes = names(arr(h, 'forNodes'));
  return forZones || forNodes ? { forZones, forNodes } : undefined;
}
