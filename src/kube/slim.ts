// What the proxy keeps of a Service or an EndpointSlice: only the fields translate() and the
// change trackers read, in the objects' own shape, so the rest of the proxy reads them as it
// reads the originals. kube-proxy strips managedFields and the like from its informers' objects
// for the same reason: a node agent holds every Service and EndpointSlice of the cluster, and
// most of an object is what the apiserver keeps about it (managedFields, annotations, status
// conditions, targetRefs), not what a proxy programs. Values repeated across endpoints (their
// conditions, node names, port names and protocols) are shared, not kept once per endpoint.
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { boundedMemo } from '../engine/memo.js';
import { ANNOTATION_LB_SOURCE_RANGES, ANNOTATION_SCHEDULER, ANNOTATION_SCHEDULER_FLAGS, LABEL_SERVICE_NAME, LABEL_SERVICE_PROXY_NAME } from './types.js';

/** One string object per distinct short value (node names, zones, port names, protocols). */
const intern = boundedMemo((s) => s, 1 << 14);
const internOpt = (s: string | undefined): string | undefined => (typeof s === 'string' ? intern(s) : s);

type Conditions = NonNullable<NonNullable<V1EndpointSlice['endpoints']>[number]['conditions']>;
/** Endpoint conditions, one frozen object per combination of the three fields translate reads
 *  (each true, false or absent: at most 27, by index; anything else is kept as its own object). */
const conditionsCache: Array<Conditions | undefined> = new Array(27).fill(undefined);
/** A condition's place in the cache's index: absent 0, false 1, true 2; -1 for anything else. */
const flag = (x: unknown): number => (x === undefined ? 0 : x === false ? 1 : x === true ? 2 : -1);
function sharedConditions(c: Conditions | undefined): Conditions | undefined {
  if (c === undefined || c === null) return c;
  const r = flag(c.ready);
  const s = flag(c.serving);
  const t = flag(c.terminating);
  if (r < 0 || s < 0 || t < 0) return { ready: c.ready, serving: c.serving, terminating: c.terminating };
  const i = r * 9 + s * 3 + t;
  return (conditionsCache[i] ??= Object.freeze({ ready: c.ready, serving: c.serving, terminating: c.terminating }));
}

/** The members `keys` of a label or annotation map; undefined when it has none of them. */
function pick(m: Record<string, string> | undefined, keys: readonly string[]): Record<string, string> | undefined {
  if (!m) return undefined;
  let out: Record<string, string> | undefined;
  for (const k of keys) if (typeof m[k] === 'string') (out ??= {})[k] = m[k];
  return out;
}

/** The Service as the proxy reads it (see the file comment). Members the original does not
 *  have are undefined (what the proxy reads them as), so every kept Service has one shape. */
export function slimService(s: V1Service): V1Service {
  const meta = s.metadata;
  const spec = s.spec;
  const ingress = s.status?.loadBalancer?.ingress;
  const timeoutSeconds = spec?.sessionAffinityConfig?.clientIP?.timeoutSeconds;
  return {
    metadata: meta && {
      name: meta.name,
      namespace: meta.namespace,
      labels: pick(meta.labels, [LABEL_SERVICE_PROXY_NAME]),
      annotations: pick(meta.annotations, [ANNOTATION_SCHEDULER, ANNOTATION_SCHEDULER_FLAGS, ANNOTATION_LB_SOURCE_RANGES]),
    },
    spec: spec && {
      type: internOpt(spec.type),
      clusterIP: spec.clusterIP,
      clusterIPs: spec.clusterIPs,
      ports: spec.ports?.map((p) => ({ name: internOpt(p.name), protocol: internOpt(p.protocol), port: p.port, nodePort: p.nodePort })),
      externalIPs: spec.externalIPs,
      sessionAffinity: internOpt(spec.sessionAffinity),
      sessionAffinityConfig: timeoutSeconds === undefined ? undefined : { clientIP: { timeoutSeconds } },
      externalTrafficPolicy: internOpt(spec.externalTrafficPolicy),
      internalTrafficPolicy: internOpt(spec.internalTrafficPolicy),
      healthCheckNodePort: spec.healthCheckNodePort,
      loadBalancerSourceRanges: spec.loadBalancerSourceRanges,
    },
    status: ingress && { loadBalancer: { ingress: ingress.map((i) => ({ ip: i.ip, ipMode: internOpt(i.ipMode) })) } },
  };
}

type Endpoint = V1EndpointSlice['endpoints'][number];

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

/** An endpoint's first address (the one that counts), of a SlimEndpoint or a V1 endpoint. */
export function endpointAddress(e: Endpoint): string | undefined {
  return e instanceof SlimEndpoint ? e.address : e.addresses?.[0];
}

/** The EndpointSlice as the proxy reads it (see the file comment), its endpoints SlimEndpoints.
 *  Every kept port has the same three members, absent ones undefined (one object shape). */
export function slimSlice(s: V1EndpointSlice): V1EndpointSlice {
  const meta = s.metadata;
  return {
    metadata: meta && { name: meta.name, namespace: meta.namespace, labels: pick(meta.labels, [LABEL_SERVICE_NAME]) },
    addressType: intern(s.addressType),
    ports: s.ports?.map((p) => ({ name: internOpt(p.name), protocol: internOpt(p.protocol), port: p.port })),
    endpoints: (s.endpoints ?? []).map((e) => {
      const hints = slimHints(e.hints);
      const args = [endpointAddress(e), sharedConditions(e.conditions), internOpt(e.nodeName)] as const;
      return hints ? new SlimEndpointWithHints(...args, hints) : new SlimEndpoint(...args);
    }),
  };
}

type Hints = Endpoint['hints'];
function slimHints(h: Hints): Hints {
  const forZones = h?.forZones?.length ? h.forZones.map((z) => ({ name: intern(z.name) })) : undefined;
  const forNodes = h?.forNodes?.length ? h.forNodes.map((n) => ({ name: intern(n.name) })) : undefined;
  return forZones || forNodes ? { forZones, forNodes } : undefined;
}
