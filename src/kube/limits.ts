// The API server's size and count limits on the fields the proxy reads, as kube-apiserver's
// validation applies them (k8s.io/apimachinery/pkg/util/validation: IsDNS1035Label,
// IsDNS1123Label, IsDNS1123Subdomain, IsQualifiedName, IsValidLabelValue; apimachinery's
// ValidateAnnotations; pkg/apis/core/validation: ValidateService, ValidateEndpoints;
// pkg/apis/discovery/validation: maxEndpoints, maxAddresses, maxPorts, maxZoneHints). An object
// the API server holds is within them; one from a file may not be, and a file is read whole
// before anything is checked, so these are checked before the object is read any further.
// Only lengths and counts: the characters of a name are not checked here.
import { isMapping, member } from './fields.js';

/** The lengths (in characters) and counts. */
export const LIMITS = {
  dns1035Label: 63,
  dns1123Label: 63,
  dns1123Subdomain: 253,
  /** A label key's name part (after the optional `prefix/`): a qualified name's. */
  qualifiedName: 63,
  labelValue: 63,
  /** Annotations: keys and values together (TotalAnnotationSizeLimitB, 256 KiB). */
  annotationsTotal: 256 * 1024,
  /** EndpointSlice (discovery/validation). */
  sliceEndpoints: 1000,
  endpointAddresses: 100,
  slicePorts: 20000,
  zoneHints: 8,
  nodeHints: 8,
  /** Service spec.clusterIPs and spec.ipFamilies: one per family. */
  families: 2,
} as const;

/** Per kind: its name's limit, and whether it has a namespace (Nodes and ServiceCIDRs do not). */
const NAME = {
  Service: ['dns1035Label', 'a DNS-1035 label', true],
  EndpointSlice: ['dns1123Subdomain', 'a DNS-1123 subdomain', true],
  Endpoints: ['dns1123Subdomain', 'a DNS-1123 subdomain', true],
  Node: ['dns1123Subdomain', 'a DNS-1123 subdomain', false],
  ServiceCIDR: ['dns1123Subdomain', 'a DNS-1123 subdomain', false],
} as const;

export type LimitedKind = keyof typeof NAME;

type Problem = string | undefined;

/** A string at `path` longer than `max`: the problem, naming the field; else undefined (a
 *  value that is not a string is the shape checks' to report). */
function tooLong(v: unknown, path: string, max: number, what: string): Problem {
  return typeof v === 'string' && v.length > max ? `${path} must be no more than ${max} characters (${what}), not ${v.length}` : undefined;
}

function tooMany(v: unknown, path: string, max: number): Problem {
  return Array.isArray(v) && v.length > max ? `${path} must have at most ${max} items, not ${v.length}` : undefined;
}

/** As ValidateLabels: each key a qualified name (`prefix/name`: a DNS-1123 subdomain prefix,
 *  a name of at most 63), each value at most 63. */
function labels(m: unknown, path: string): Problem {
  if (!isMapping(m)) return undefined;
  for (const k in m) {
    if (!Object.hasOwn(m, k)) continue;
    const slash = k.lastIndexOf('/');
    const name = slash < 0 ? k : k.slice(slash + 1);
    if (slash >= 0 && slash > LIMITS.dns1123Subdomain) return `${path} key prefix must be no more than ${LIMITS.dns1123Subdomain} characters (a DNS-1123 subdomain), not ${slash}`;
    if (name.length > LIMITS.qualifiedName) return `${path} key name must be no more than ${LIMITS.qualifiedName} characters (a qualified name), not ${name.length}`;
    const p = tooLong(m[k], `${path}["${k}"]`, LIMITS.labelValue, 'a label value');
    if (p) return p;
  }
  return undefined;
}

/** As ValidateAnnotations: keys and values at most 256 KiB together. */
function annotations(m: unknown, path: string): Problem {
  if (!isMapping(m)) return undefined;
  let total = 0;
  for (const k in m) {
    if (!Object.hasOwn(m, k)) continue;
    const v = m[k];
    total += k.length + (typeof v === 'string' ? v.length : 0);
  }
  return total > LIMITS.annotationsTotal ? `${path} must have at most ${LIMITS.annotationsTotal} characters, all keys and values together, not ${total}` : undefined;
}

/**
 * The object's first field over the API server's limits for its kind, or undefined. Names and
 * namespace first (cheap, and nothing else of an object with a 10 MB name is worth reading).
 * Values of the wrong type are not this function's: the shape checks and translate report them.
 */
export function overLimits(kind: LimitedKind, o: Record<string, unknown>): Problem {
  const meta = o.metadata;
  const [nameLimit, nameWhat, namespaced] = NAME[kind];
  const p =
    tooLong(member(meta, 'name'), 'metadata.name', LIMITS[nameLimit], nameWhat) ??
    (namespaced ? tooLong(member(meta, 'namespace'), 'metadata.namespace', LIMITS.dns1123Label, 'a DNS-1123 label') : undefined) ??
    labels(member(meta, 'labels'), 'metadata.labels') ??
    annotations(member(meta, 'annotations'), 'metadata.annotations');
  if (p) return p;
  switch (kind) {
    case 'Service':
      return service(o.spec);
    case 'EndpointSlice':
      return slice(o);
    case 'Endpoints':
      return endpoints(o);
    default:
      return undefined;
  }
}

function each(list: unknown, check: (x: unknown, i: number) => Problem): Problem {
  if (!Array.isArray(list)) return undefined;
  for (let i = 0; i < list.length; i++) {
    const p = check(list[i], i);
    if (p) return p;
  }
  return undefined;
}

function service(spec: unknown): Problem {
  return (
    tooMany(member(spec, 'clusterIPs'), 'spec.clusterIPs', LIMITS.families) ??
    tooMany(member(spec, 'ipFamilies'), 'spec.ipFamilies', LIMITS.families) ??
    // ValidateService: a port's name is a DNS-1123 label (IANA_SVC_NAME, 15, is a container port's)
    each(member(spec, 'ports'), (p, i) => tooLong(member(p, 'name'), `spec.ports[${i}].name`, LIMITS.dns1123Label, 'a DNS-1123 label'))
  );
}

function slice(o: Record<string, unknown>): Problem {
  const eps = o.endpoints;
  return (
    tooMany(eps, 'endpoints', LIMITS.sliceEndpoints) ??
    each(eps, (e, i) => {
      const at = `endpoints[${i}]`;
      const addresses = member(e, 'addresses');
      const hints = member(e, 'hints');
      return (
        tooMany(addresses, `${at}.addresses`, LIMITS.endpointAddresses) ??
        // an IP is shorter; an FQDN at most a subdomain's 253
        each(addresses, (a, j) => tooLong(a, `${at}.addresses[${j}]`, LIMITS.dns1123Subdomain, 'an IP address or a domain name')) ??
        tooLong(member(e, 'hostname'), `${at}.hostname`, LIMITS.dns1123Label, 'a DNS-1123 label') ??
        tooLong(member(e, 'nodeName'), `${at}.nodeName`, LIMITS.dns1123Subdomain, 'a node name') ??
        tooMany(member(hints, 'forZones'), `${at}.hints.forZones`, LIMITS.zoneHints) ??
        each(member(hints, 'forZones'), (z, k) => tooLong(member(z, 'name'), `${at}.hints.forZones[${k}].name`, LIMITS.labelValue, 'a label value')) ??
        tooMany(member(hints, 'forNodes'), `${at}.hints.forNodes`, LIMITS.nodeHints) ??
        each(member(hints, 'forNodes'), (z, k) => tooLong(member(z, 'name'), `${at}.hints.forNodes[${k}].name`, LIMITS.dns1123Subdomain, 'a node name'))
      );
    }) ??
    tooMany(o.ports, 'ports', LIMITS.slicePorts) ??
    each(o.ports, (p, i) => tooLong(member(p, 'name'), `ports[${i}].name`, LIMITS.dns1123Label, 'a DNS-1123 label'))
  );
}

/** Legacy Endpoints (ValidateEndpoints): no counts, the names of hosts, nodes and ports. */
function endpoints(o: Record<string, unknown>): Problem {
  return each(o.subsets, (s, i) => {
    const addresses = (f: string) =>
      each(member(s, f), (a, j) => {
        const at = `subsets[${i}].${f}[${j}]`;
        return (
          tooLong(member(a, 'ip'), `${at}.ip`, LIMITS.dns1123Subdomain, 'an IP address') ??
          tooLong(member(a, 'hostname'), `${at}.hostname`, LIMITS.dns1123Label, 'a DNS-1123 label') ??
          tooLong(member(a, 'nodeName'), `${at}.nodeName`, LIMITS.dns1123Subdomain, 'a node name')
        );
      });
    return (
      addresses('addresses') ??
      addresses('notReadyAddresses') ??
      each(member(s, 'ports'), (p, j) => tooLong(member(p, 'name'), `subsets[${i}].ports[${j}].name`, LIMITS.dns1123Label, 'a DNS-1123 label'))
    );
  });
}

