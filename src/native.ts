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

// ---- ipvs ----
/** Plain objects as the addon produces/accepts them; src/kernel/ipvs.ts has the typed model. */
export type NativeIpvsObject = Record<string, unknown>;

export interface NativeIpvsListOptions {
  withDestinations?: boolean;
  stats?: boolean;
}

export interface NativeIpvsHandle {
  info(): Promise<NativeIpvsInfo>;
  apply(ops: unknown[], opts?: { stopOnError?: boolean; maxBatchMessages?: number }): Promise<NativeBatchOutcome>;
  services(opts?: NativeIpvsListOptions): Promise<NativeIpvsObject[]>;
  service(key: unknown, opts?: NativeIpvsListOptions): Promise<NativeIpvsObject | null>;
  destinations(key: unknown, opts?: { stats?: boolean }): Promise<NativeIpvsObject[]>;
  timeouts(): Promise<{ tcp: number; tcpFin: number; udp: number }>;
  daemons(): Promise<NativeIpvsObject[]>;
  stats(): SocketStats;
}

export interface NativeIpvsCodec {
  encodeGetInfo(familyId: number): Buffer;
  encodeOps(ops: unknown[], familyId: number): Buffer;
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

/** Pure encoders/decoders, for golden-byte tests and fuzzing. */
export interface NativeCodec {
  parseAttributes(buf: Buffer, nestedTypes?: number[]): AttributeNode[];
  writeAttributes(spec: AttributeSpec[]): Buffer;
  parseMessages(buf: Buffer): ParsedMessage[];
  ipvs: NativeIpvsCodec;
  rtnl: {
    decodeLink(msg: Buffer): NativeLink;
  };
}

export interface NativeBinding {
  setErrorFactory(fn: (fields: NetlinkErrorFields) => Error): void;
  GenlHandle: new (opts?: HandleOptions & { rcvbufBytes?: number }) => NativeGenlHandle;
  IpvsHandle: new (opts?: HandleOptions & { rcvbufBytes?: number }) => NativeIpvsHandle;
  RtnlHandle: new (opts?: HandleOptions) => NativeRtnlHandle;
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
