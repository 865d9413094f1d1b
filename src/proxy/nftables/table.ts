// The nftables data plane: the service model → one table per family that does what
// kube-proxy's iptables and nftables modes do (DNAT of every frontend to an endpoint chosen at
// random, masquerade, hairpin, reject) with a fixed set of rules. Everything per service or per
// endpoint is an element of a data map or a plain set, never a rule, a chain or a jump: adding,
// removing or changing a service or an endpoint commits element changes only, which the kernel
// applies without re-validating the table (a jump/goto element or a rule with a nat or verdict
// expression makes every commit walk the whole jump graph, docs/ARCHITECTURE.md). The rules
// that grow are one per distinct endpoint count, not per service.
//
//   nat prerouting/output -> services:
//       mark 0x4000 (masquerade) for a cluster IP from outside the cluster CIDRs (or all of it
//       with masqueradeAll) and for external frontends (externalTrafficPolicy Cluster);
//       then on to the frontend's shard: `jhash daddr . dport mod SHARDS vmap @service-shards`
//       jumps to chain `services-S`, which has, for each endpoint count N in use, one rule: dnat
//       to the address and port map `endpoints-N-S` gives daddr . l4proto . dport . (numgen
//       random mod N). A frontend with N endpoints has its N elements (one per endpoint) in that
//       map only, so the rules of the other counts miss it, and each new connection picks one
//       of its endpoints evenly. The sets that grow with the endpoints (these maps and the
//       hairpin set) are split into SHARDS by a hash the kernel computes too: listing a hash
//       set costs the kernel ~n² (its dump walks the set from the start for every message), so
//       a restart that lists the tables lists sixteen sets of n/16.
//       An external frontend of an externalTrafficPolicy Local service serves only this node's
//       endpoints, except to pods (sources in the cluster CIDRs) and to the node itself (`fib
//       saddr type local`, masqueraded), which reach every endpoint as kube-proxy's
//       "short-circuit" has it: those endpoints are a second block of the frontend's elements,
//       keyed from SHORT_CIRCUIT on, and two rules per count M of such blocks pick one with
//       numgen random mod M offset SHORT_CIRCUIT before the rules above
//   nat postrouting: masquerade what carries the mark; hairpin (an endpoint that reached
//       itself through a service, whatever its slice says of its node, as kube-proxy's endpoint
//       chains do it: sets of every endpoint address, `hairpin-S` by the hash of the address,
//       reached through `hairpin-shards`; the pods' bridge ports need hairpin mode, as for
//       kube-proxy, docs/kube-proxy.md)
//   filter firewall (prerouting and output, before the dnat): a load-balancer IP with
//       loadBalancerSourceRanges jumps to its own chain (a verdict map element), which returns
//       for an allowed source and drops the rest: the only per-service chains, made and
//       removed with such a frontend, not with its endpoints
//   filter prerouting (after the dnat) and output: new connections to a frontend without
//       endpoints are rejected (no endpoint anywhere) or dropped (a Local traffic policy with
//       none on this node), to a cluster IP on a port that is no service, rejected, and to an
//       address of the service CIDRs that is no cluster IP, dropped. In
//       prerouting, not forward: a packet the node would route back out of the interface it
//       came in on makes the kernel send an ICMP redirect first, which uses up the client's
//       ICMP rate limit, and the port-unreachable would not go out (icmpv4_xrlim_allow)
//
// A frontend is (address, protocol, port): the cluster IP at the service port; external and
// load-balancer IPs at the service port; each NodePort address at the node port (no loopback:
// DNAT of 127.0.0.1 to a pod needs route_localnet, as in kube-proxy's nftables mode).
import type { DesiredNftTable } from '../../engine/nft-diff.js';
import type { Expr } from '../../kernel/nft-expr.js';
import * as R from '../../kernel/nft-rules.js';
import type { IpvsProtocol } from '../../kernel/ipvs.js';
import { jhash, scale } from '../../kernel/jhash.js';
import { encodeKeyInto, ipv4ToU32, keyLength, mapTypes, type DataType, type KeyValue } from '../../kernel/nft-types.js';
import type { SetElement } from '../../kernel/nftables.js';
import { frontendEndpoints, frontends, shortCircuitEndpoints, type FrontendKind, type ModelContext, type ServiceModel } from '../../kube/service-model.js';
import type { FrontendClaim } from '../service-registry.js';
import { inAny } from '../../kube/address.js';
import { ipv6Words, isLoopback } from '../../net/address.js';
import { firewallChain } from '../ipvs/glue.js';
import { FIELDS, fam, MASQ_MARK, natBase, PROXY_TABLE_OWNED, uniqText, type Fam } from '../nft-sets.js';

/** The sets whose elements are their frontends' keys (and the affinity timeouts' sets,
 *  affinityTimeoutSet): kept as bytes (PackedStore), a frontend's key put into each of its own. */
export const isFrontendSet = (name: string): boolean => FRONTEND_SETS.has(name) || /^affinity-\d+s$/.test(name);
const FRONTEND_SETS: ReadonlySet<string> = new Set(['cluster-ips', 'external-ips', 'external-local', 'reject-services', 'drop-services', 'affinity-services']);

/** The table of each family (the IPVS glue's name: a switch of data plane replaces one table
 *  with the other, and the ownership rule stays one name per family). */
export const NFT_PROXY_TABLE = 'ipvsync';

type DesiredSet = DesiredNftTable['sets'][number];
/** A set of the table without its elements. */
export type SetDecl = Omit<DesiredSet, 'elements' | 'order'>;

/** A load-balancer frontend's source-range firewall: its own chain. */
export interface Firewall {
  chain: string;
  /** The load-balancer IP. */
  address: string;
  /** The allowed sources, as CIDRs of the frontend's family. */
  cidrs: string[];
  /** A node address is allowed: the frontend's own address is too (the node's traffic to
   *  it leaves with it as source). */
  allowFromNode: boolean;
}

/** Where the endpoint index of a frontend's short-circuit block starts (far above any count). */
export const SHORT_CIRCUIT = 0x4000_0000;

/** A frontend of a service port, (address, protocol, port), and all it puts into the table. */
export interface FrontendPart extends FrontendClaim {
  kind: FrontendKind;
  family: Fam;
  protocol: IpvsProtocol;
  address: string;
  port: number;
  /** Its shard (frontendShard): the endpoint maps `endpoints-N-<shard>` hold its elements. */
  shard: number;
  /** How many endpoints are behind it. */
  endpointCount: number;
  /** UDP and SCTP: the endpoints behind it (and its short-circuit's), as (address, port), for
   *  their stale flows. */
  endpoints?: Array<readonly [string, number]>;
  /** Its endpoint map's elements (the map `endpointsMap(endpointCount)`), by endpoint index,
   *  as the bytes the kernel holds (PackedStore: one buffer per frontend, not three objects per
   *  endpoint; blockCount() of them). */
  endpointBlock?: Buffer;
  /** An external frontend of a Local policy: the elements pods and the node reach (in the map
   *  `endpointsMap(blockCount(shortCircuit))`), keyed SHORT_CIRCUIT + index. */
  shortCircuit?: Buffer;
  /** The sets that hold its key (FRONTEND_SETS), and that key's bytes from the start of
   *  `keyBytes` (its endpoint block when it has one: each element of it starts with the key). */
  keyed: readonly string[];
  keyBytes: Buffer;
  /** What else it puts into its family's table: `elements[i]` into the set named `sets[i]`
   *  (two arrays, not an object per element). */
  sets: readonly string[];
  elements: readonly SetElement[];
  firewall?: Firewall;
  /** sessionAffinity ClientIP with endpoints: its timeout in seconds. */
  affinity?: number;
}

/** The endpoint maps' key and value types, and an element's width in bytes, by family. */
const ENDPOINT_TYPES: Partial<Record<Fam, { key: DataType[]; value: DataType[]; keyWidth: number; width: number }>> = {};
function endpointTypes(f: Fam) {
  return (ENDPOINT_TYPES[f] ??= (() => {
    const d = setDecl(f, endpointsMap(1, 0));
    const value = mapTypes(d.map as DataType[]);
    return { key: d.key, value, keyWidth: keyLength(d.key), width: keyLength(d.key) + keyLength(value) };
  })());
}

/** A frontend's endpoints' elements, index `base` + i each: the key's frontend part written
 *  once and copied, each value written in place (a pooled buffer, every byte of it written). */
function endpointBlock(family: Fam, tuple: readonly KeyValue[], eps: ReadonlyArray<{ address: string; port: number }>, base: number): Buffer | undefined {
  if (!eps.length) return undefined;
  const t = endpointTypes(family);
  const bytes = Buffer.allocUnsafe(eps.length * t.width);
  const index = t.keyWidth - 4;
  KEY_VALUES[0] = tuple[0]!;
  KEY_VALUES[1] = tuple[1]!;
  KEY_VALUES[2] = tuple[2]!;
  KEY_VALUES[3] = base;
  encodeKeyInto(t.key, KEY_VALUES, bytes, 0);
  for (let i = 0; i < eps.length; i++) {
    const at = i * t.width;
    if (i > 0) {
      bytes.copyWithin(at, 0, index);
      bytes.writeUInt32LE(base + i, at + index);
    }
    VALUE[0] = eps[i]!.address;
    VALUE[1] = eps[i]!.port;
    encodeKeyInto(t.value, VALUE, bytes, at + t.keyWidth);
  }
  return bytes;
}

/** How many elements a block of the family's endpoint map holds. */
export function blockCount(family: Fam, block: Buffer): number {
  return block.length / endpointTypes(family).width;
}
/** endpointBlock's scratch values (a key's, a value's): no array per endpoint. */
const KEY_VALUES: KeyValue[] = [0, 0, 0, 0];
const VALUE: KeyValue[] = [0, 0];

/** The hairpin sets' element of endpoint i of a block: its address twice (daddr . saddr of a
 *  packet DNATed back to where it came from), written into `out` from the block's bytes; its
 *  hairpin shard (addressShard). */
export function hairpinOf(family: Fam, block: Buffer, i: number, out: Buffer): number {
  const t = endpointTypes(family);
  const at = i * t.width + t.keyWidth;
  const n = family === 'ip' ? 4 : 16;
  for (let k = 0; k < n; k++) out[k] = out[n + k] = block[at + k]!;
  return scale(jhash(out, 0, n), SHARDS);
}

/** What one service puts into the tables: per frontend, and its cluster IPs. */
export interface ServiceParts {
  frontends: FrontendPart[];
  /** Its cluster IPs' elements of the set `cluster-addrs` (the family's by the address). */
  clusterAddrs: SetElement[];
}

/** A service's frontends and elements under this node and configuration. */
export function serviceParts(m: ServiceModel, ctx: ModelContext): ServiceParts {
  const famOf = (p: ServiceModel['ports'][number]) => (p.family === 'inet' ? 'ip' : 'ip6');
  const out: ServiceParts = { frontends: [], clusterAddrs: m.ports.map((p) => ({ key: [p.clusterIP] })) };
  for (const p of m.ports) {
    const family = famOf(p);
    for (const fe of frontends(p, ctx)) {
      // no NodePort on loopback: DNAT of 127.0.0.1 to a pod needs route_localnet
      if (fe.kind === 'nodePort' && isLoopback(fe.address)) continue;
      const tuple: KeyValue[] = [fe.address, p.protocol, fe.port];
      const eps = frontendEndpoints(p, fe);
      const scEps = shortCircuitEndpoints(p, fe);
      const keyed = KEYED;
      const sets = SETS;
      const elements = ELEMENTS;
      keyed.length = sets.length = elements.length = 0;
      const put = (set: string, element: SetElement) => (sets.push(set), elements.push(element));
      if (fe.kind === 'clusterIP') keyed.push('cluster-ips');
      else if (!p.externalLocal) keyed.push('external-ips');
      else if (scEps.length) keyed.push('external-local');
      // No endpoint at all: refused at once. Endpoints elsewhere but a Local policy: dropped.
      if (eps.length === 0) keyed.push(p.cluster.length === 0 && p.local.length === 0 ? 'reject-services' : 'drop-services');
      // every endpoint a client of the frontend can be sent to (the short-circuit's are the
      // Cluster policy's: a superset of the local ones but for serving-terminating fallbacks)
      const reached = scEps.length ? uniqEndpoints([...eps, ...scEps]) : eps;
      const affinity = p.affinityTimeout > 0 && reached.length > 0 ? p.affinityTimeout : undefined;
      if (affinity) {
        keyed.push('affinity-services', affinityTimeoutSet(affinity));
        for (const ep of reached) put('affinity-endpoints', { key: [fe.address, p.protocol, fe.port, ep.address, ep.port] });
      }
      const firewall = fe.kind === 'loadBalancer' && p.sourceRanges.cidrs.length ? firewallChain(fe.address, p.protocol, fe.port) : undefined;
      if (firewall) put('firewall', { key: tuple, verdict: { code: 'jump', chain: firewall } });
      const endpoints = endpointBlock(family, tuple, eps, 0);
      // one object of one shape: the optional members assigned, not spread in (a temporary
      // object each)
      const part: FrontendPart = {
        // joined, not a template: a flat string (a template's is a chain of four concatenations, ~100 bytes more, ×11k kept)
        key: [fe.address, p.protocol, fe.port].join(' '),
        service: p.service,
        portName: p.name,
        kind: fe.kind,
        family,
        protocol: p.protocol,
        address: fe.address,
        port: fe.port,
        shard: frontendShard(fe.address, fe.port),
        endpointCount: eps.length,
        // the set names shared by every frontend that puts the same ones, the elements an
        // exact-size copy of the scratch list (none for most frontends)
        keyed: setNames(keyed),
        // each element of the endpoint block starts with the frontend's key
        keyBytes: endpoints ?? frontendKey(family, tuple),
        sets: setNames(sets),
        elements: elements.length ? elements.slice() : NO_ELEMENTS,
      };
      if (endpoints) part.endpointBlock = endpoints;
      const shortCircuit = endpointBlock(family, tuple, scEps, SHORT_CIRCUIT);
      if (shortCircuit) part.shortCircuit = shortCircuit;
      if (p.protocol !== 'tcp') part.endpoints = reached.map((ep) => [ep.address, ep.port] as const);
      if (affinity) part.affinity = affinity;
      if (firewall) part.firewall = { chain: firewall, address: fe.address, cidrs: [...p.sourceRanges.texts].sort(), allowFromNode: [...ctx.nodeAddresses].some((a) => !isLoopback(a) && inAny(p.sourceRanges, a)) };
      out.frontends.push(part);
    }
  }
  return out;
}

/** serviceParts' scratch lists of a frontend's sets: those of its key, the others' and their
 *  elements. */
const KEYED: string[] = [];
const SETS: string[] = [];
const ELEMENTS: SetElement[] = [];
const NO_ELEMENTS: readonly SetElement[] = Object.freeze([]);

/** A frontend's key (address . protocol . port) as the sets of FRONTEND_SETS hold it. */
function frontendKey(family: Fam, tuple: readonly KeyValue[]): Buffer {
  const types = (FRONTEND_KEY_TYPES[family] ??= setDecl(family, 'cluster-ips').key);
  const out = Buffer.allocUnsafe(keyLength(types));
  encodeKeyInto(types, tuple, out, 0);
  return out;
}

const FRONTEND_KEY_TYPES: Partial<Record<Fam, DataType[]>> = {};

/** One frozen list per combination of set names (a handful in use). */
function setNames(sets: readonly string[]): readonly string[] {
  const k = sets.join(' ');
  let v = SET_NAMES.get(k);
  if (!v) SET_NAMES.set(k, (v = Object.freeze(sets.slice())));
  return v;
}
const SET_NAMES = new Map<string, readonly string[]>();

/** Endpoints once each, by address and port, in their first order. */
function uniqEndpoints<T extends { address: string; port: number }>(eps: readonly T[]): T[] {
  const seen = new Set<string>();
  return eps.filter((ep) => {
    const k = `${ep.address} ${ep.port}`;
    return !seen.has(k) && (seen.add(k), true);
  });
}

/** How many sets each set that grows with the endpoints is split into. */
export const SHARDS = 16;
const KEY = new Uint8Array(20);
const KEY_VIEW = new DataView(KEY.buffer);

/** The registers' bytes of an address (network order) from KEY[0] on; their length. */
function addressBytes(address: string): number {
  if (!address.includes(':')) {
    KEY_VIEW.setUint32(0, ipv4ToU32(address));
    return 4;
  }
  ipv6Words(address)!.forEach((w, i) => KEY_VIEW.setUint16(2 * i, w));
  return 16;
}

/** A frontend's shard: where the kernel's `jhash daddr . th dport mod SHARDS seed 0` sends its
 *  packets (the port is a register of its own: two bytes and two zeros). */
export function frontendShard(address: string, port: number): number {
  const n = addressBytes(address);
  KEY_VIEW.setUint32(n, port << 16);
  return scale(jhash(KEY, 0, n + 4), SHARDS);
}

/** An endpoint address's hairpin shard (`jhash daddr mod SHARDS seed 0`). */
export function addressShard(address: string): number {
  return scale(jhash(KEY, 0, addressBytes(address)), SHARDS);
}

/** The hairpin set of a shard. */
export function hairpinSet(shard: number): string {
  return HAIRPIN_SETS[shard]!;
}
const HAIRPIN_SETS = Array.from({ length: SHARDS }, (_, s) => `hairpin-${s}`);

/** The endpoint counts' maps: `endpoints-N-S` holds the frontends of shard S with N endpoints. */
export function endpointsMap(n: number, shard: number): string {
  // one string per map: every element of the map names it (110k copies at 10k × 10)
  return ((ENDPOINTS_MAPS[n] ??= [])[shard] ??= `endpoints-${n}-${shard}`);
}
const ENDPOINTS_MAPS: string[][] = [];

/** The frontends whose session affinity times out after `seconds`. */
export function affinityTimeoutSet(seconds: number): string {
  return `affinity-${seconds}s`;
}

/** What a family's table is made of besides the services' elements. */
export interface TableShape {
  /** The endpoint counts with a map and a dnat rule, ascending (each rule matches only its own
   *  frontends: their order is the table's canonical one, whatever order the counts came in). */
  sizes: readonly number[];
  /** The counts of short-circuit blocks, with their two dnat rules, ascending. */
  shortCircuitSizes: readonly number[];
  /** The session affinity timeouts (seconds) with a set and rules, ascending. */
  affinityTimeouts: readonly number[];
  /** The source-range firewalls, by chain. */
  firewalls: ReadonlyMap<string, Firewall>;
}

/** The declaration of a set of the family's table, by name. */
export function setDecl(family: Fam, name: string): SetDecl {
  const F = FIELDS[family];
  const svcKey = [F.addr, 'inet_proto', 'inet_service'] as const;
  if (name.endsWith('-shards')) return { name, key: ['mark'], map: 'verdict' };
  if (name.startsWith('endpoints-')) return { name, key: [...svcKey, 'mark'], map: [F.addr, 'inet_service'] };
  if (name.startsWith('hairpin-')) return { name, key: [F.addr, F.addr] };
  if (name === 'affinity') return { name, key: [F.addr, ...svcKey], map: [F.addr, 'inet_service'], dynamic: true, timeoutFlag: true, size: AFFINITY_SIZE };
  if (name === 'affinity-endpoints') return { name, key: [...svcKey, F.addr, 'inet_service'] };
  switch (name) {
    case 'service-protocols':
      return { name, key: ['inet_proto'] };
    case 'cluster-cidrs':
    case 'service-cidrs':
      return { name, key: [F.addr], interval: true };
    case 'cluster-addrs':
      return { name, key: [F.addr] };
    case 'firewall':
      return { name, key: [...svcKey], map: 'verdict' };
    default:
      return { name, key: [...svcKey] };
  }
}

/** The sets every table has (the endpoints maps and affinity timeout sets come and go with the
 *  counts and timeouts). */
export const FIXED_SETS: readonly string[] = [
  'service-protocols', 'cluster-ips', 'external-ips', 'external-local', 'cluster-cidrs', 'service-cidrs', 'reject-services', 'drop-services',
  'cluster-addrs', 'firewall', 'affinity', 'affinity-services', 'affinity-endpoints', 'service-shards', 'hairpin-shards', ...HAIRPIN_SETS,
];

/** Clients × affinity frontends the kernel remembers at once, per family (kube-proxy's nft
 *  default is 65535 per endpoint's set). */
export const AFFINITY_SIZE = 262_144;

/** Elements of the fixed sets that come from the configuration, not from the services. */
export function staticElements(family: Fam, ctx: ModelContext): Record<string, SetElement[] | undefined> {
  const shards = (chain: string) => Array.from({ length: SHARDS }, (_, s): SetElement => ({ key: [s], verdict: { code: 'jump', chain: `${chain}-${s}` } }));
  return {
    'service-protocols': [{ key: ['sctp'] }, { key: ['tcp'] }, { key: ['udp'] }],
    'service-shards': shards('services'),
    'hairpin-shards': shards('hairpin'),
    'cluster-cidrs': uniqText(ctx.clusterCIDRs.filter((c) => fam(c.split('/')[0]!) === family).map((c) => ({ key: [c] }))),
    'service-cidrs': uniqText(ctx.serviceCIDRs.filter((c) => fam(c.split('/')[0]!) === family).map((c) => ({ key: [c] }))),
  };
}

/** A family's table: the chains and rules of its shape, with these sets. */
export function proxyTable(family: Fam, shape: TableShape, ctx: ModelContext, sets: DesiredSet[]): DesiredNftTable {
  const F = FIELDS[family];
  const svcFields = [F.daddr, R.F.l4proto, R.F.thDport];
  const clusterCidrs = ctx.clusterCIDRs.some((c) => fam(c.split('/')[0]!) === family);

  const { chains, rules } = natBase();
  chains.push(
    { name: 'filter-prerouting', hook: { type: 'filter', hook: 'prerouting', priority: -99, policy: 'accept' } },
    { name: 'filter-output', hook: { type: 'filter', hook: 'output', priority: 0, policy: 'accept' } },
    { name: 'firewall-prerouting', hook: { type: 'filter', hook: 'prerouting', priority: -110, policy: 'accept' } },
    { name: 'firewall-output', hook: { type: 'filter', hook: 'output', priority: -110, policy: 'accept' } },
    { name: 'services' },
    ...Array.from({ length: SHARDS }, (_, s) => ({ name: `services-${s}` })),
    ...HAIRPIN_SETS.map((name) => ({ name })),
    { name: 'endpoints-check' },
    { name: 'affinity' },
  );
  const add = (chain: string, ...parts: Array<Expr | Expr[]>) => rules.push({ chain, exprs: R.rule(...parts) });
  const mark = R.setMarkBits(MASQ_MARK);

  if (ctx.config.masqueradeAll) add('services', R.inSet(svcFields, 'cluster-ips'), mark);
  else if (clusterCidrs) add('services', R.inSet(svcFields, 'cluster-ips'), R.inSet([F.saddr], 'cluster-cidrs', { invert: true }), mark);
  add('services', R.inSet(svcFields, 'external-ips'), mark);
  // the node's own traffic to a Local policy's external frontend goes to any endpoint
  // (below), and leaves with a node address that the endpoint must answer: masqueraded
  add('services', R.fibSaddrType('local'), R.inSet(svcFields, 'external-local'), mark);
  // A client that reached an affinity frontend before: the endpoint it had (validated after
  // the dnat, below); otherwise one at random.
  add('services', R.inSet([R.F.l4proto], 'service-protocols'), R.inSet(svcFields, 'affinity-services'), R.dnatMap(family, [F.saddr, ...svcFields], 'affinity', { port: true }));
  add('services', R.inSet([R.F.l4proto], 'service-protocols'), R.hashVmap([F.daddr, R.F.thDport], SHARDS, 'service-shards'));
  for (let s = 0; s < SHARDS; s++) {
    const chain = `services-${s}`;
    for (const m of shape.shortCircuitSizes) {
      const dnat = R.dnatMap(family, [...svcFields, R.numgen(m, 'random', SHORT_CIRCUIT)], endpointsMap(m, s), { port: true });
      if (clusterCidrs) add(chain, R.inSet([F.saddr], 'cluster-cidrs'), dnat);
      add(chain, R.fibSaddrType('local'), dnat);
    }
    for (const n of shape.sizes) add(chain, R.dnatMap(family, [...svcFields, R.numgen(n)], endpointsMap(n, s), { port: true }));
  }

  add('postrouting', R.ctStatus('dnat'), R.hashVmap([F.daddr], SHARDS, 'hairpin-shards'));
  for (const set of HAIRPIN_SETS) add(set, R.inSet([F.daddr, F.saddr], set), R.masquerade({ fullyRandom: true }));

  // New connections only, as kube-proxy's firewall-check: narrowing a service's source ranges
  // does not cut the connections already made.
  for (const c of ['firewall-prerouting', 'firewall-output']) add(c, R.ctState('new'), R.inSet([R.F.l4proto], 'service-protocols'), R.vmap(svcFields, 'firewall'));
  for (const fw of [...shape.firewalls.values()].sort((a, b) => (a.chain < b.chain ? -1 : 1))) {
    chains.push({ name: fw.chain });
    for (const cidr of fw.cidrs) add(fw.chain, R.match(F.saddr, cidr), R.ret());
    if (fw.allowFromNode) add(fw.chain, R.match(F.saddr, fw.address), R.ret());
    add(fw.chain, R.drop());
  }

  for (const c of ['filter-prerouting', 'filter-output']) {
    add(c, R.ctState('new'), R.jump('endpoints-check'));
    add(c, R.ctState('new'), R.ctStatus('dnat'), R.jump('affinity'));
  }
  // Session affinity, after the dnat: a connection of an affinity frontend whose remembered
  // endpoint is no longer one of its endpoints forgets it and is dropped (the client's
  // retransmission is spread anew); any other refreshes the client's endpoint for the
  // frontend's timeout. Per protocol: nft reads a concatenation with the original port only
  // after a match of one transport protocol.
  const origFrontend = [F.ctOrigDaddr, R.F.l4proto, R.F.ctOrigProtoDst];
  const affinityKey = [F.saddr, ...origFrontend];
  const endpoint = [F.daddr, R.F.thDport];
  for (const t of shape.affinityTimeouts)
    for (const proto of ['tcp', 'udp', 'sctp']) {
      const frontend = [R.match(R.F.l4proto, proto), R.inSet(origFrontend, affinityTimeoutSet(t))];
      add('affinity', ...frontend, R.inSet([...origFrontend, ...endpoint], 'affinity-endpoints', { invert: true }), R.dynset('delete', affinityKey, 'affinity', { data: endpoint }), R.drop());
      add('affinity', ...frontend, R.dynset('update', affinityKey, 'affinity', { data: endpoint, timeoutMs: t * 1000 }));
    }
  // TCP is refused with a reset (connect() fails at once with ECONNREFUSED, whatever the
  // client's ICMP rate limit), the rest with ICMP port unreachable.
  const refuse = (...match: Expr[][]) => {
    add('endpoints-check', R.match(R.F.l4proto, 'tcp'), ...match, R.reject('tcp-reset'));
    add('endpoints-check', ...match, R.reject(F.reject));
  };
  refuse(R.inSet(svcFields, 'reject-services'));
  add('endpoints-check', R.inSet(svcFields, 'drop-services'), R.drop());
  // Still addressed to a cluster IP after the nat hooks: a port that is no service.
  refuse(R.inSet([F.daddr], 'cluster-addrs'));
  // ...or to an address of the service CIDRs that no Service holds (kube-proxy's "unallocated
  // ClusterIPs"): dropped
  add('endpoints-check', R.inSet([F.daddr], 'service-cidrs'), R.drop());

  return { family, name: NFT_PROXY_TABLE, chains, sets, rules, owned: PROXY_TABLE_OWNED };
}
