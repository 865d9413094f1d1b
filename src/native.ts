// The only module that loads the compiled addon. It declares the addon's surface; the typed
// façades in src/kernel/ are the public API.
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NetlinkError, type NetlinkErrorFields } from './errors.js';

export interface SocketStats {
  sendmsgCalls: number;
  recvmsgCalls: number;
  messagesSent: number;
}

export interface HandleOptions {
  /** Path of a network namespace (/run/netns/NAME, /proc/PID/ns/net); default: the caller's. */
  netns?: string;
}

export interface NativeIpvsInfo {
  version: string;
  versionCode: number;
  connTableSize: number;
}

export interface NativeLink {
  index: number;
  name: string;
  flags: number;
  up: boolean;
  type: number;
  mtu: number;
  kind?: string;
  operstate: number;
  address?: string;
  /** IFLA_IFALIAS, when set. */
  alias?: string;
}

// ---- ipvs ----
/** Plain objects as the addon produces/accepts them; src/kernel/ipvs.ts has the typed model. */
export type NativeIpvsObject = Record<string, unknown>;

export interface NativeIpvsListOptions {
  withDestinations?: boolean;
  stats?: boolean;
}

export interface NativeIpvsHandle {
  info(): Promise<NativeIpvsInfo>;
  /** ops: their packed form (src/kernel/ipvs-pack.ts). */
  apply(ops: Uint8Array, opts?: { stopOnError?: boolean; maxBatchMessages?: number; ack?: 'each' | 'errors' }): Promise<NativeBatchOutcome>;
  services(opts?: NativeIpvsListOptions): Promise<NativeIpvsObject[]>;
  service(key: unknown, opts?: NativeIpvsListOptions): Promise<NativeIpvsObject | null>;
  destinations(key: unknown, opts?: { stats?: boolean }): Promise<NativeIpvsObject[]>;
  destinationsMany(keys: unknown[], opts?: { stats?: boolean }): Promise<NativeIpvsObject[][]>;
  timeouts(): Promise<{ tcp: number; tcpFin: number; udp: number }>;
  daemons(): Promise<NativeIpvsObject[]>;
  stats(): IpvsSocketStats;
  /** Opens the socket now (see HandleBase). */
  ready(): Promise<void>;
  close(): Promise<void>;
}

/** The handle's socket counters plus those of its io_uring pool of destination-dump sockets. */
export interface IpvsSocketStats extends SocketStats {
  ioUring: {
    /** 'on': listings dump destinations in parallel over io_uring; 'off': one dump at a time (reason says why); 'unused': not needed yet. */
    state: 'on' | 'off' | 'unused';
    reason?: string;
    /** io_uring_enter syscalls, and the SENDMSG / RECVMSG operations they carried. */
    enterCalls: number;
    sendmsgs: number;
    recvmsgs: number;
    dumps: number;
  };
}

export interface NativeIpvsCodec {
  encodeGetInfo(familyId: number): Buffer;
  /** ops: their packed form (src/kernel/ipvs-pack.ts). */
  encodeOps(ops: Uint8Array, familyId: number, opts?: { ack?: 'each' | 'errors' }): Buffer;
  /** What apply() does on the calling thread before sending (read, check, encode), the batch
   *  then dropped: its size in bytes (FakeIpvs's `convert`). */
  convertOps(ops: Uint8Array, familyId: number): number;
  /** The packed form's property names by key index (native/ipvs/op_parse.h: ipvs::K, kKeyNames). */
  packedKeys: string[];
  encodeGetServices(familyId: number): Buffer;
  encodeGetService(key: unknown, familyId: number): Buffer;
  encodeGetDests(key: unknown, familyId: number): Buffer;
  encodeGetConfig(familyId: number): Buffer;
  encodeGetDaemons(familyId: number): Buffer;
  decodeInfo(msg: Buffer): { version: string; connTableSize: number };
  decodeService(msg: Buffer): NativeIpvsObject;
  decodeDest(msg: Buffer, serviceFamily?: 'inet' | 'inet6'): NativeIpvsObject;
  decodeConfig(msg: Buffer): { tcp: number; tcpFin: number; udp: number };
  decodeDaemon(msg: Buffer): NativeIpvsObject;
}
// ---- end ipvs ----

/** What every batch method returns: a status byte per request, errors only for failures. */
export interface NativeBatchOutcome {
  statuses: Uint8Array;
  errors: NetlinkError[];
  sendmsgCalls: number;
}

export interface NativeGenlFamily {
  name: string;
  id: number;
  version: number;
  maxAttr: number;
}

export interface NativeGenlHandle {
  families(
    names: string[],
    opts?: { stopOnError?: boolean; maxBatchMessages?: number },
  ): Promise<NativeBatchOutcome & { families: Array<NativeGenlFamily | null> }>;
  stats(): SocketStats;
  ready(): Promise<void>;
  close(): Promise<void>;
}

export interface NativeRtnlHandle {
  links(): Promise<NativeLink[]>;
  link(name: string): Promise<NativeLink | null>;
  addresses(opts?: { family?: 'inet' | 'inet6'; link?: string }): Promise<NativeAddress[]>;
  routes(filter?: NativeRouteFilter): Promise<NativeRoute[]>;
  apply(ops: NativeRtnlOp[], opts?: { stopOnError?: boolean; maxBatchMessages?: number }): Promise<NativeBatchOutcome>;
  stats(): SocketStats;
  ready(): Promise<void>;
  close(): Promise<void>;
}

// ---- rtnl ----
export interface NativeAddress {
  /** Name of the link the address is on. */
  link: string;
  index: number;
  family: 'inet' | 'inet6';
  address: string;
  prefixlen: number;
  scope: 'global' | 'site' | 'link' | 'host' | 'nowhere' | number;
  /** IFA_F_* */
  flags: number;
  peer?: string;
  label?: string;
  validLifetime?: number;
  preferredLifetime?: number;
  /** IFA_PROTO, the address's owner mark (Linux 6.1+): absent when the kernel sent none or 0
   *  (IFAPROT_UNSPEC: added without one); 1-3 are the kernel's own (IFAPROT_KERNEL_LO,
   *  _RA, _LL: loopback, router advertisement, IPv6 link-local). */
  protocol?: number;
}

/** A link is named by `name`/`link`, or by `index`. Addresses: 'a.b.c.d[/len]', 'x::y[/len]'
 *  (no length: /32 or /128). `exist`: no EEXIST for what is already there. `protocol` (addAddr
 *  only, 0-255): the IFA_PROTO the address carries (Linux 6.1+; older kernels drop it). */
export type NativeRtnlOp =
  | { op: 'addLink'; name: string; kind: 'dummy' | 'bridge'; mtu?: number; exist?: boolean }
  | { op: 'delLink'; name?: string; index?: number }
  /** Up or down, and/or the alias (IFLA_IFALIAS, 1-255 bytes): at least one. */
  | { op: 'setLink'; name?: string; index?: number; up?: boolean; alias?: string }
  | { op: 'addAddr'; link?: string; index?: number; address: string; exist?: boolean; protocol?: number }
  | { op: 'delAddr'; link?: string; index?: number; address: string; exist?: boolean }
  | NativeRouteOp;

// ---- rtnl routes ----
export type NativeRouteType = 'unicast' | 'local' | 'broadcast' | 'anycast' | 'multicast' | 'blackhole' | 'unreachable' | 'prohibit' | 'throw' | 'nat';
/** 'local' 255, 'main' 254, 'default' 253, or a number. */
export type NativeRouteTable = 'local' | 'main' | 'default' | number;
/** 'kernel' 2, 'boot' 3, 'static' 4, 'ipvsync' 249, or a number 0-255. */
export type NativeRouteProtocol = 'kernel' | 'boot' | 'static' | 'ipvsync' | number;
export type NativeRouteScope = 'global' | 'site' | 'link' | 'host' | 'nowhere';

/** A route as the kernel reports it (RTM_NEWROUTE). `dst` is always "network/len". */
export interface NativeRoute {
  family: 'inet' | 'inet6';
  dst: string;
  type: NativeRouteType | number;
  table: number;
  protocol: number;
  scope: NativeRouteScope | number;
  /** RTA_OIF and its link's name. */
  index?: number;
  dev?: string;
  metric?: number;
  prefsrc?: string;
  gateway?: string;
  /** rtm_flags */
  flags: number;
}

export interface NativeRouteFilter {
  family?: 'inet' | 'inet6';
  table?: NativeRouteTable;
  protocol?: NativeRouteProtocol;
  type?: NativeRouteType;
}

/** Routes (RTM_NEWROUTE / RTM_DELROUTE). Defaults as iproute2's: an add is unicast, protocol
 *  boot, table local for local/broadcast/anycast/nat routes and main otherwise, scope as `ip`
 *  picks it; a delete matches any type/protocol/scope it does not name. The link is `dev`
 *  (a name) or `index`. `exist` on an add: NLM_F_REPLACE instead of EEXIST. */
export interface NativeRouteOp {
  op: 'addRoute' | 'delRoute';
  dst: string;
  type?: NativeRouteType;
  table?: NativeRouteTable;
  protocol?: NativeRouteProtocol;
  scope?: NativeRouteScope;
  dev?: string;
  index?: number;
  metric?: number;
  prefsrc?: string;
  gateway?: string;
  exist?: boolean;
}
// ---- end rtnl routes ----
// ---- end rtnl ----

// ---- ipset ----
export type IpSetFamily = 'inet' | 'inet6';
export type IpSetProto = 'tcp' | 'udp' | 'sctp' | 'udplite' | 'icmp' | 'icmpv6' | number;

/** One element of a set. Which fields apply depends on the set type (see src/kernel/ipsets.ts). */
export interface NativeIpSetMember {
  ip?: string;
  cidr?: number;
  proto?: IpSetProto;
  /** An integer, 0..65535. */
  port?: number;
  ip2?: string;
  cidr2?: number;
  timeout?: number;
  packets?: bigint | number;
  bytes?: bigint | number;
  comment?: string;
  nomatch?: boolean;
  skbmark?: number;
  skbmarkmask?: number;
  skbprio?: number;
  skbqueue?: number;
  /** Restore line, sent as the element's LINENO (libipset's restore mode). */
  line?: number;
}

/** What a set is created with besides its name and type (`ipset create` options). */
export interface NativeIpSetOptions {
  /** inet (default) or inet6; bitmap:port has none. */
  family?: IpSetFamily;
  hashsize?: number;
  maxelem?: number;
  /** hash:ip only. */
  netmask?: number;
  /** Default timeout in seconds; 0 = entries never expire but may carry their own. */
  timeout?: number;
  counters?: boolean;
  comment?: boolean;
  skbinfo?: boolean;
  forceadd?: boolean;
  /** bitmap:port: the port range. */
  range?: { from: number; to: number };
  bucketsize?: number;
  initval?: number;
}

export interface NativeIpSetHeader extends NativeIpSetOptions {
  name: string;
  type: string;
  revision: number;
  references: number;
  memsize: number;
  elements: number;
  index?: number;
  members?: NativeIpSetMember[];
}

export type NativeIpSetOp =
  | ({ op: 'create'; name: string; type: string; exist?: boolean } & NativeIpSetOptions)
  | { op: 'destroy' | 'flush'; name: string }
  | { op: 'rename'; name: string; to: string }
  | { op: 'swap'; name: string; with: string }
  /** `plain`: no member has a field beyond its key's (ip, cidr, proto, port, ip2, cidr2), so
   *  the addon reads those alone (IpSets.apply checks). */
  | { op: 'add' | 'del'; name: string; type: string; family?: IpSetFamily; members: NativeIpSetMember[]; exist?: boolean; plain?: boolean };

export interface NativeIpsetHandle {
  protocol(): Promise<number>;
  apply(
    ops: NativeIpSetOp[],
    opts?: { stopOnError?: boolean; maxBatchMessages?: number },
  ): Promise<NativeBatchOutcome & { messages: number }>;
  list(name?: string, opts?: { headersOnly?: boolean }): Promise<NativeIpSetHeader[]>;
  test(name: string, type: string, family: IpSetFamily | undefined, members: NativeIpSetMember[]): Promise<Uint8Array>;
  stats(): SocketStats;
  ready(): Promise<void>;
  close(): Promise<void>;
}

export interface NativeIpsetCodec {
  encodeOps(ops: NativeIpSetOp[], opts?: { protocol?: number; revision?: number; maxMessageBytes?: number }): Buffer;
  encodeProtocol(): Buffer;
  encodeType(type: string, family?: IpSetFamily, protocol?: number): Buffer;
  encodeList(name?: string, protocol?: number): Buffer;
  encodeTest(name: string, type: string, family: IpSetFamily | undefined, member: NativeIpSetMember, protocol?: number): Buffer;
  decodeList(datagram: Buffer): NativeIpSetHeader[];
  decodeProtocol(msg: Buffer): { max: number; min: number };
  decodeType(msg: Buffer): { revision: number; revisionMin: number };
  errorInfo(code: number, cmd: string, bitmap?: boolean): { code: string; message: string };
}
// ---- end ipset ----

// ---- conntrack ----
export interface NativeCtTuple {
  src: string;
  dst: string;
  sport?: number;
  dport?: number;
  icmpId?: number;
  icmpType?: number;
  icmpCode?: number;
}

export interface NativeFlow {
  family: 'inet' | 'inet6';
  proto: 'tcp' | 'udp' | 'sctp' | 'udplite' | 'dccp' | 'icmp' | 'icmpv6' | number;
  orig: NativeCtTuple;
  reply: NativeCtTuple;
  /** IPS_* bits */
  status: number;
  /** seconds left */
  timeout: number;
  mark: number;
  id: number;
  use: number;
  zone?: number;
  tcpState?: string;
  counters?: { origPackets: bigint; origBytes: bigint; replyPackets: bigint; replyBytes: bigint };
}

/** Every given field must match. Ports need proto. */
export interface NativeFlowFilter {
  family?: 'inet' | 'inet6';
  proto?: NativeFlow['proto'];
  origSrc?: string;
  origDst?: string;
  origDport?: number;
  /** The endpoint (after DNAT) answering the flow. */
  replySrc?: string;
  replySport?: number;
}

export interface NativeConntrackHandle {
  list(filter?: NativeFlowFilter): Promise<NativeFlow[]>;
  count(filter?: NativeFlowFilter): Promise<number>;
  delete(
    filter: NativeFlowFilter,
    opts?: { maxBatchMessages?: number },
  ): Promise<{ matched: number; deleted: number; gone: number; errors: NetlinkError[]; sendmsgCalls: number }>;
  stats(): SocketStats;
  ready(): Promise<void>;
  close(): Promise<void>;
}

export interface NativeConntrackCodec {
  decodeFlow(msg: Buffer): NativeFlow;
  matches(msg: Buffer, filter: NativeFlowFilter): boolean;
  encodeDelete(flowMsg: Buffer): Buffer;
  encodeDump(family?: number): Buffer;
}
// ---- end conntrack ----

export interface AttributeNode {
  type: number;
  nested: boolean;
  netByteOrder: boolean;
  data: Buffer;
  children?: AttributeNode[];
}

export type AttributeSpec =
  | { type: number; kind: 'u8' | 'u16' | 'u32' | 'be16' | 'be32'; value: number }
  | { type: number; kind: 'u64' | 'be64'; value: bigint }
  | { type: number; kind: 'str'; value: string }
  | { type: number; kind: 'bytes'; value: Buffer }
  | { type: number; kind: 'flag' }
  | { type: number; kind: 'nest'; children: AttributeSpec[] };

export interface ParsedMessage {
  type: number;
  flags: number;
  seq: number;
  pid: number;
  payload: Buffer;
  error?: number;
  extack?: string;
  extackOffset?: number;
}

// ---- nftables ----
/** A set's elements as the addon hands them over: the bytes of every key, key end and value
 *  back to back; where each is: `widths` when every element has the same three lengths (element
 *  i's parts then start at i × their sum, one after the other), else `spans`, six numbers per
 *  element (offset and length of its key, key end and value; length 0: absent); and, for the
 *  elements that have any, their other parts. */
export interface NativeNftElements {
  count: number;
  bytes: Buffer;
  widths?: [number, number, number];
  spans?: Uint32Array;
  extras: NativeNftElementExtra[];
}

export interface NativeNftElementExtra {
  /** The element's index. */
  index: number;
  flags?: number;
  verdict?: { code: string; chain?: string };
  timeout?: number;
  expiration?: number;
  comment?: string;
}

export interface NativeNftCommitOptions {
  maxOpsPerTransaction?: number;
  maxMessageBytes?: number;
  genId?: number;
  /** NLM_F_ACK on every op, on the last op of each transaction, or none. */
  ackMode?: 'all' | 'last' | 'none';
}

export interface NativeNftCommitOutcome {
  statuses: Uint8Array;
  errors: NetlinkError[];
  transactions: Array<{ firstOp: number; endOp: number; sent: boolean; committed: boolean }>;
  sendmsgCalls: number;
}

export interface NativeNftTable {
  family: number;
  name: string;
  flags: number;
  handle: number;
  use: number;
}

export interface NativeNftChain {
  family: number;
  table: string;
  name: string;
  handle: number;
  hook?: { type: string; hooknum: number; priority: number; policy?: number; device?: string };
  use: number;
  flags: number;
}

export interface NativeNftSet {
  family: number;
  table: string;
  name: string;
  handle: number;
  flags: number;
  keyType: number;
  keyLen: number;
  dataType?: number;
  dataLen?: number;
  timeout?: number;
  gcInterval?: number;
  size?: number;
  concat?: number[];
  comment?: string;
  elements?: NativeNftElements;
}

export interface NativeNftRule {
  family: number;
  table: string;
  chain: string;
  handle: number;
  position?: number;
  exprs: Array<Record<string, unknown> & { type: string }>;
  comment?: string;
}

export interface NativeNftListing {
  genId: number;
  tables: NativeNftTable[];
  chains: NativeNftChain[];
  sets: NativeNftSet[];
  rules: NativeNftRule[];
}

/** The netlink encoding of an op stream still being written: fed runs of whole ops (the first
 *  starting with the stream's magic), encoded on the thread pool; taken by one commitWire. */
export interface NativeNftWireEncoder {
  /** The next piece; it must not change afterwards. */
  feed(chunk: Uint8Array): void;
  /** Bytes fed so far. */
  fed(): number;
}

export interface NativeNftHandle {
  /** Commits an op stream (native/nftables/wire.h; written by src/kernel/nft-wire.ts).
   *  `encoder`: a pipelined encoder fed the stream's first bytes (whole ops), built with the same opts. */
  commitWire(stream: Uint8Array, opts?: NativeNftCommitOptions, encoder?: NativeNftWireEncoder): Promise<NativeNftCommitOutcome>;
  list(opts?: { family?: number; table?: string; elements?: boolean }): Promise<NativeNftListing>;
  /** One set's elements (one dump), packed. */
  listElements(opts: { family: number; table: string; set: string }): Promise<NativeNftElements>;
  genId(): Promise<number>;
  stats(): SocketStats;
  ready(): Promise<void>;
  close(): Promise<void>;
}

export interface NativeNftCodec {
  /** Expression schemas (index = position) with field kinds and enum names, for the op stream. */
  exprWire: {
    types: Array<{ name: string; fields: Array<{ name: string; kind: 'num' | 'str' | 'data' | 'bool'; enums?: Record<string, number> }> }>;
    verdicts: Record<string, number>;
  };
  /** The batches commitWire would send for an op stream (seq and port id 0), with a pipelined
   *  encoder as commitWire takes one. */
  encodeWire(stream: Uint8Array, opts?: NativeNftCommitOptions, encoder?: NativeNftWireEncoder): Buffer[];
  decodeRule(msg: Buffer): NativeNftRule;
  decodeChain(msg: Buffer): NativeNftChain;
  decodeTable(msg: Buffer): NativeNftTable;
  decodeSet(msg: Buffer): NativeNftSet;
  decodeElements(msg: Buffer): { family: number; table: string; set: string; elements: NativeNftElements };
  decodeGen(msg: Buffer): number;
}
// ---- end nftables ----

/** Pure encoders/decoders, for golden-byte tests and fuzzing. */
export interface NativeCodec {
  parseAttributes(buf: Buffer, nestedTypes?: number[]): AttributeNode[];
  writeAttributes(spec: AttributeSpec[]): Buffer;
  parseMessages(buf: Buffer): ParsedMessage[];
  ipvs: NativeIpvsCodec;
  rtnl: {
    decodeLink(msg: Buffer): NativeLink;
    decodeAddr(msg: Buffer): NativeAddress;
    encodeOps(ops: NativeRtnlOp[]): Buffer;
    decodeRoute(msg: Buffer): NativeRoute;
    encodeDumpRoutes(filter?: { family?: number; table?: number; protocol?: number; type?: number }): Buffer;
  };
  nftables: NativeNftCodec;

  ipset: NativeIpsetCodec;
  conntrack: NativeConntrackCodec;
}

export interface NativeBinding {
  setErrorFactory(fn: (fields: NetlinkErrorFields) => Error): void;
  GenlHandle: new (opts?: HandleOptions & { rcvbufBytes?: number }) => NativeGenlHandle;
  IpvsHandle: new (opts?: HandleOptions & { rcvbufBytes?: number; dumpSockets?: number }) => NativeIpvsHandle;
  RtnlHandle: new (opts?: HandleOptions) => NativeRtnlHandle;
  NftHandle: new (opts?: HandleOptions) => NativeNftHandle;
  NftWireEncoder: new (opts?: NativeNftCommitOptions) => NativeNftWireEncoder;

  IpsetHandle: new (opts?: HandleOptions) => NativeIpsetHandle;
  ConntrackHandle: new (opts?: HandleOptions) => NativeConntrackHandle;
  memoryPressure(level: MemoryPressureLevel): void;
  /** Frees an ArrayBuffer's memory now (detached: its views read as empty). */
  detachArrayBuffer(buffer: ArrayBuffer): void;
  cpuUsage(): AddonCpuUsage;
  codec: NativeCodec;
}

export type MemoryPressureLevel = 'none' | 'moderate' | 'critical';

/**
 * Tells V8 how much the process should give memory back (v8::Isolate::MemoryPressureNotification):
 * 'moderate' starts an incremental, memory-reducing mark-compact, 'critical' collects now,
 * 'none' clears the level. A daemon calls it after a large transient (a full resync at 10k+
 * services reads and drops ~100k kernel objects): without it the heap keeps the size that
 * sync grew it to until allocation reaches the next limit.
 */
export function memoryPressure(level: MemoryPressureLevel): void {
  native().memoryPressure(level);
}

/**
 * The addon's own CPU time since the process loaded it, in nanoseconds (process-wide, every
 * handle's): `jsThreadNs`, user + system time of its calls on JavaScript threads (converting and
 * checking what a call is given, building the batch, and turning kernel replies into JS values,
 * over `jsThreadCalls` calls); `poolUserNs` / `poolSysNs`, the user and system time of its tasks
 * on the libuv pool (`poolTasks`), where it encodes and sends the netlink messages and decodes
 * the replies — the system time there is the kernel doing the work the messages ask for. What
 * a thread used beyond these is V8's and node's (JavaScript, garbage collection).
 */
export interface AddonCpuUsage {
  jsThreadNs: number;
  jsThreadCalls: number;
  poolUserNs: number;
  poolSysNs: number;
  poolTasks: number;
}

/** The addon's CPU counters (AddonCpuUsage): read twice and subtract to time a piece of work. */
export function addonCpuUsage(): AddonCpuUsage {
  return native().cpuUsage();
}

/** The addon's file: IPVSYNC_ADDON when set (a build elsewhere, e.g. cmake-js's), else
 *  node-gyp-build's lookup from the package root — build/Release (a build from source: the
 *  repository's, or the install script's fallback), then build/Debug, then the prebuild for this
 *  platform and architecture in prebuilds/ (docs/releasing.md). */
function addonPath(require: NodeJS.Require): string {
  if (process.env.IPVSYNC_ADDON) return resolve(process.env.IPVSYNC_ADDON);
  // dist/src/native.js -> <root>
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const nodeGypBuild = require('node-gyp-build') as { path(dir: string): string };
  try {
    return nodeGypBuild.path(root);
  } catch (e) {
    throw new Error(
      `ipvsync: no native addon for ${process.platform}-${process.arch} (no build in ${join(root, 'build')}, no prebuild in ${join(root, 'prebuilds')}); run \`npm rebuild ipvsync\` (a C++17 compiler, make and python3 needed) or \`npm run build:native\` in the repository`,
      { cause: e },
    );
  }
}

let loaded: NativeBinding | undefined;

/** The addon, loaded on first use. */
export function native(): NativeBinding {
  if (!loaded) {
    const require = createRequire(import.meta.url);
    const b = require(addonPath(require)) as NativeBinding;
    b.setErrorFactory((fields) => new NetlinkError(fields));
    loaded = b;
  }
  return loaded;
}
