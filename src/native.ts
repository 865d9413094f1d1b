// The only module that loads the compiled addon. It declares the addon's surface; the typed
// façades in src/kernel/ are the public API.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
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
}

export interface NativeIpvsHandle {
  info(): Promise<NativeIpvsInfo>;
  stats(): SocketStats;
}

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
}

export interface NativeRtnlHandle {
  links(): Promise<NativeLink[]>;
  stats(): SocketStats;
}

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
/** A wire-shaped op (src/kernel/nftables.ts lowers typed ops to these). */
export interface NativeNftOp {
  kind: 'table' | 'chain' | 'set' | 'elements' | 'rule';
  verb: 'add' | 'create' | 'delete' | 'destroy' | 'flush' | 'insert' | 'replace';
  family: number;
  name?: string;
  table?: string;
  handle?: number;
  flags?: number;
  hook?: { type: string; hooknum: number; priority: number; policy?: number; device?: string };
  keyType?: number;
  keyLen?: number;
  keyByteorder?: number;
  dataType?: number;
  dataLen?: number;
  dataByteorder?: number;
  id?: number;
  timeout?: number;
  gcInterval?: number;
  size?: number;
  concat?: number[];
  comment?: string;
  set?: string;
  setId?: number;
  elements?: Array<NativeNftElement | NativeNftElementTuple>;
  chain?: string;
  position?: number;
  /** Objects, or the positional form [type, ...fields in exprSchema order, verdict]. */
  exprs?: Array<object | unknown[]>;
}

/** Positional element: [key, flags, verdictCode, verdictChain, data, timeout, comment, keyEnd]. */
export type NativeNftElementTuple = [
  Buffer,
  number | undefined,
  string | undefined,
  string | undefined,
  Buffer | undefined,
  number | undefined,
  string | undefined,
  Buffer | undefined,
];

export interface NativeNftElement {
  key: Buffer | string;
  keyEnd?: Buffer | string;
  flags?: number;
  data?: Buffer | string;
  verdict?: { code: string; chain?: string };
  timeout?: number;
  expiration?: number;
  comment?: string;
}

export interface NativeNftCommitOptions {
  maxOpsPerTransaction?: number;
  maxMessageBytes?: number;
  genId?: number;
  acks?: boolean;
  /** Overrides acks: NLM_F_ACK on every op, on the last op of each transaction, or none. */
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
  elements?: NativeNftElement[];
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

export interface NativeNftHandle {
  commit(ops: NativeNftOp[], opts?: NativeNftCommitOptions): Promise<NativeNftCommitOutcome>;
  /** The same, from an op stream (native/nftables/wire.h; written by src/kernel/nft-wire.ts). */
  commitWire(stream: Uint8Array, opts?: NativeNftCommitOptions): Promise<NativeNftCommitOutcome>;
  list(opts?: { family?: number; table?: string; elements?: boolean }): Promise<NativeNftListing>;
  genId(): Promise<number>;
  stats(): SocketStats;
}

export interface NativeNftCodec {
  /** Field order of the positional expression form, per expression type. */
  exprSchema: Record<string, string[]>;
  /** Expression schemas (index = position) with field kinds and enum names, for the op stream. */
  exprWire: {
    types: Array<{ name: string; fields: Array<{ name: string; kind: 'num' | 'str' | 'data' | 'bool'; enums?: Record<string, number> }> }>;
    verdicts: Record<string, number>;
  };
  encodeTransactions(ops: NativeNftOp[], opts?: NativeNftCommitOptions): Buffer[];
  /** The batches commitWire would send for an op stream (seq and port id 0). */
  encodeWire(stream: Uint8Array, opts?: NativeNftCommitOptions): Buffer[];
  decodeRule(msg: Buffer): NativeNftRule;
  decodeChain(msg: Buffer): NativeNftChain;
  decodeTable(msg: Buffer): NativeNftTable;
  decodeSet(msg: Buffer): NativeNftSet;
  decodeElements(msg: Buffer): { family: number; table: string; set: string; elements: NativeNftElement[] };
  decodeGen(msg: Buffer): number;
}
// ---- end nftables ----

/** Pure encoders/decoders, for golden-byte tests and fuzzing. */
export interface NativeCodec {
  parseAttributes(buf: Buffer, nestedTypes?: number[]): AttributeNode[];
  writeAttributes(spec: AttributeSpec[]): Buffer;
  parseMessages(buf: Buffer): ParsedMessage[];
  ipvs: {
    encodeGetInfo(familyId: number): Buffer;
    decodeInfo(msg: Buffer): { version: string; connTableSize: number };
  };
  rtnl: {
    decodeLink(msg: Buffer): NativeLink;
  };
  nftables: NativeNftCodec;
}

export interface NativeBinding {
  setErrorFactory(fn: (fields: NetlinkErrorFields) => Error): void;
  GenlHandle: new (opts?: HandleOptions & { rcvbufBytes?: number }) => NativeGenlHandle;
  IpvsHandle: new (opts?: HandleOptions) => NativeIpvsHandle;
  RtnlHandle: new (opts?: HandleOptions) => NativeRtnlHandle;
  NftHandle: new (opts?: HandleOptions) => NativeNftHandle;
  codec: NativeCodec;
}

function locate(): string {
  if (process.env.IPVSYNC_ADDON) return resolve(process.env.IPVSYNC_ADDON);
  // dist/src/native.js -> <root>/build/{Release,Debug}/ipvsync.node
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
  for (const kind of ['Release', 'Debug']) {
    const p = join(root, 'build', kind, 'ipvsync.node');
    if (existsSync(p)) return p;
  }
  throw new Error(
    `ipvsync: the native addon is not built (looked in ${join(root, 'build')}); run \`npm install\` or \`npm run build:native\``,
  );
}

let loaded: NativeBinding | undefined;

/** The addon, loaded on first use. */
export function native(): NativeBinding {
  if (!loaded) {
    const require = createRequire(import.meta.url);
    const b = require(locate()) as NativeBinding;
    b.setErrorFactory((fields) => new NetlinkError(fields));
    loaded = b;
  }
  return loaded;
}
