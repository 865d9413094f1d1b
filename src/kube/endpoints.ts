// Endpoints of one service port, from the service's EndpointSlices, and kube-proxy's choice of
// which of them serve cluster-wide and node-local traffic (pkg/proxy/topology.go:
// CategorizeEndpoints, topologyModeFromHints, serving-terminating fallback of KEP-1669).
import type { V1EndpointSlice } from './api-types.js';
import type { AddressFamily, IpvsProtocol } from '../kernel/ipvs.js';
import { compareAddress, ipv4Number, sloppyIp } from '../net/address.js';
import { compareText, insertionSort } from '../util/sorted.js';
import { endpointAddress } from './slim.js';
import { arr, field, int, isMapping, member, present, str } from './fields.js';
import { objectKey } from './change-tracker.js';

export interface EndpointInfo {
  address: string;
  port: number;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  /** endpoint.nodeName is this node. */
  local: boolean;
  zoneHints: ReadonlySet<string>;
  nodeHints: ReadonlySet<string>;
  /** endpointOrderKey(address, port): the sort's number, computed once per endpoint. */
  orderKey: number;
}

/**
 * A number in (address, port) order for an IPv4 endpoint (the address's 32 bits, then the
 * port's 16: below 2^48, exact), NaN for IPv6, whose order compareAddress gives. Sorting a
 * port's endpoints compared their address texts, each parsed again on every comparison (~45 ms
 * of a 10k-service full sync on the host).
 */
export function endpointOrderKey(address: string, port: number): number {
  const n = ipv4Number(address);
  return n < 0 ? NaN : n * 65536 + port;
}

/** The hints of an endpoint without any (shared: never modified). */
const NO_HINTS: ReadonlySet<string> = new Set();

/** Slices sorted by name, so that a duplicated address resolves the same way every time
 *  (the later slice wins, as in kube-proxy's endpointSliceCache). */
export function sortSlices(slices: readonly V1EndpointSlice[]): V1EndpointSlice[] {
  return [...slices].sort((a, b) => compareText(str(a, 'metadata', 'name') ?? '', str(b, 'metadata', 'name') ?? ''));
}

/** A slice port's protocol (absent: TCP; any case, as kube-proxy); undefined for another
 *  protocol or a value that is not a string. */
function protocolOf(p: unknown): IpvsProtocol | undefined {
  if (p === undefined || p === null) return 'tcp';
  if (typeof p !== 'string') return undefined;
  const v = p.toUpperCase();
  return v === 'TCP' ? 'tcp' : v === 'UDP' ? 'udp' : v === 'SCTP' ? 'sctp' : undefined;
}

function sliceFamily(slice: V1EndpointSlice): AddressFamily | undefined {
  const t = member(slice, 'addressType');
  return t === 'IPv4' ? 'inet' : t === 'IPv6' ? 'inet6' : undefined;
}

/** The target port of service port (name, protocol) in one slice: its port by that name (absent
 *  or null: ""; another type names no port) and protocol, 1..65535; else undefined. */
function slicePort(slice: V1EndpointSlice, portName: string, protocol: IpvsProtocol, warn?: (m: string) => void): number | undefined {
  const ports = arr(slice, 'ports');
  if (!ports) return undefined;
  for (let i = 0; i < ports.length; i++) {
    const p = ports[i];
    const name = field(p, 'name');
    const proto = field(p, 'protocol');
    // a protocol of the wrong type (a number): the port serves nothing, and the operator is told
    if (present(proto) && typeof proto !== 'string') warn?.(`EndpointSlice ${objectKey(slice)}: ports[${i}].protocol ${JSON.stringify(proto)} is not a protocol name, port ignored`);
    if ((present(name) ? name : '') !== portName || protocolOf(proto) !== protocol) continue;
    const port = int(p, 'port');
    return port !== undefined && port >= 1 && port <= 65535 ? port : undefined;
  }
  return undefined;
}

/** A condition: absent or null reads as `absent`, a boolean as itself; undefined: not a boolean. */
function condition(c: unknown, k: string, absent: boolean): boolean | undefined {
  const v = member(c, k);
  return v === undefined || v === null ? absent : typeof v === 'boolean' ? v : undefined;
}

/** Topology hints by name (a hint whose name is not a string names nothing). */
function hintNames(list: readonly unknown[] | undefined): ReadonlySet<string> {
  let out: Set<string> | undefined;
  for (const h of list ?? []) {
    const n = str(h, 'name');
    if (n !== undefined) (out ??= new Set()).add(n);
  }
  return out ?? NO_HINTS;
}

/**
 * The endpoints behind service port (name, protocol) of one family: each slice resolves the
 * port by name (so the target port can differ per slice), only the first address of an
 * endpoint counts (as kube-proxy), and addresses of the other family or FQDN slices are skipped.
 * An endpoint whose conditions or nodeName have the wrong type is skipped, told to `warn`
 * (whether it is ready, or local, cannot be known).
 */
export function endpointsForPort(
  slices: readonly V1EndpointSlice[],
  portName: string,
  protocol: IpvsProtocol,
  family: AddressFamily,
  nodeName: string,
  warn?: (m: string) => void,
): EndpointInfo[] {
  const out: EndpointInfo[] = [];
  for (const slice of slices) {
    if (sliceFamily(slice) !== family) continue;
    const port = slicePort(slice, portName, protocol, warn);
    if (port === undefined) continue;
    const endpoints = arr(slice, 'endpoints');
    if (!endpoints) continue;
    for (const ep of endpoints) {
      const address = sloppyIp(endpointAddress(ep as never));
      // a valid address: IPv6 exactly when it has a colon
      if (!address || (address.includes(':') ? 'inet6' : 'inet') !== family) continue;
      const c = member(ep, 'conditions');
      const ready = condition(c, 'ready', true);
      // absent: true, as kube-proxy's endpoint slice cache reads it (the API's default)
      const serving = condition(c, 'serving', true);
      const terminating = condition(c, 'terminating', false);
      const node = member(ep, 'nodeName');
      if (ready === undefined || serving === undefined || terminating === undefined || (present(node) && typeof node !== 'string') || (present(c) && !isMapping(c))) {
        warn?.(`EndpointSlice ${objectKey(slice)}: endpoint ${address} has conditions or nodeName of the wrong type, ignored`);
        continue;
      }
      const hints = member(ep, 'hints');
      out.push({
        address,
        port,
        ready,
        serving,
        terminating,
        local: node === nodeName,
        zoneHints: hints === undefined ? NO_HINTS : hintNames(arr(hints, 'forZones')),
        nodeHints: hints === undefined ? NO_HINTS : hintNames(arr(hints, 'forNodes')),
        orderKey: endpointOrderKey(address, port),
      });
    }
  }
  return sortUniqueEndpoints(out);
}

/** By address, then port: by the keys when both are IPv4 (a NaN key fails both tests; equal
 *  keys are the same address and port). */
const byAddressPort = (a: EndpointInfo, b: EndpointInfo): number => {
  const x = a.orderKey;
  const y = b.orderKey;
  if (x < y) return -1;
  if (x > y) return 1;
  if (x === y) return 0;
  return compareAddress(a.address, b.address) || a.port - b.port;
};

/**
 * Sorted by address and port, one per address and port, in place: as kube-proxy's
 * endpointSliceCache, a later slice's entry replaces an earlier one unless it is terminating (a
 * pod's address reused while the old pod terminates: the new pod's entry is the one kept,
 * whichever slice is named later). A service's few endpoints sort by insertion —
 * no key text per endpoint, no Map, and not Array.prototype.sort, which allocates work space on
 * every call (~1 KB each for 10k services' ten endpoints: 9 MB a translation).
 */
function sortUniqueEndpoints(a: EndpointInfo[]): EndpointInfo[] {
  if (a.length > 32) a.sort(byAddressPort); // stable, as the insertion sort
  else insertionSort(a, 0, a.length, byAddressPort);
  // Equal ones are adjacent, in the order given: keep each run's last that is not terminating
  // (its first when all are).
  let n = 0;
  for (let i = 0; i < a.length; i++) {
    if (n > 0 && byAddressPort(a[n - 1]!, a[i]!) === 0) {
      if (!a[i]!.terminating) a[n - 1] = a[i]!;
    } else a[n++] = a[i]!;
  }
  a.length = n;
  return a;
}

export type TopologyMode = '' | 'PreferSameNode' | 'PreferSameZone';

/** kube-proxy's topologyModeFromHints: hints only count when EVERY ready endpoint has one and
 *  at least one names this node (zone); node hints win over zone hints. */
export function topologyMode(endpoints: readonly EndpointInfo[], nodeName: string, zone: string | undefined): TopologyMode {
  let allNode = true;
  let forNode = false;
  let allZone = true;
  let forZone = false;
  for (const e of endpoints) {
    if (!e.ready) continue;
    if (e.nodeHints.size === 0) allNode = false;
    else if (e.nodeHints.has(nodeName)) forNode = true;
    if (e.zoneHints.size === 0) allZone = false;
    else if (zone && e.zoneHints.has(zone)) forZone = true;
  }
  if (allNode && forNode) return 'PreferSameNode';
  if (allZone && forZone) return 'PreferSameZone';
  return '';
}

function availableForTopology(e: EndpointInfo, mode: TopologyMode, nodeName: string, zone: string | undefined): boolean {
  if (mode === 'PreferSameNode') return e.nodeHints.has(nodeName);
  if (mode === 'PreferSameZone') return zone !== undefined && e.zoneHints.has(zone);
  return true;
}

const servingTerminating = (e: EndpointInfo): boolean => e.serving && e.terminating;

/** No endpoints (shared: never modified). */
const NO_ENDPOINTS: readonly EndpointInfo[] = Object.freeze([]);

/** Endpoints for Cluster traffic policy: ready ones (topology-filtered), else serving-terminating.
 *  The list given itself when every endpoint qualifies (the common case: no copy per service
 *  port); the result is never modified. */
export function clusterEndpoints(endpoints: readonly EndpointInfo[], nodeName: string, zone: string | undefined): readonly EndpointInfo[] {
  const mode = topologyMode(endpoints, nodeName, zone);
  const take = (e: EndpointInfo) => e.ready && availableForTopology(e, mode, nodeName, zone);
  if (endpoints.every(take)) return endpoints.length ? endpoints : NO_ENDPOINTS;
  const ready = endpoints.filter(take);
  return ready.length ? ready : endpoints.filter(servingTerminating);
}

/** Endpoints for Local traffic policy: ready node-local ones, else serving-terminating node-local
 *  (one shared empty list for a port without node-local endpoints, the common case). */
export function localEndpoints(endpoints: readonly EndpointInfo[]): readonly EndpointInfo[] {
  if (!endpoints.some((e) => e.local)) return NO_ENDPOINTS;
  const ready = endpoints.filter((e) => e.local && e.ready);
  return ready.length ? ready : endpoints.filter((e) => e.local && servingTerminating(e));
}
