// IPVS over generic netlink: the typed model, the IpvsApi interface (which an in-memory test
// double can implement) and its real implementation over the addon.
import { native, type HandleOptions, type NativeIpvsHandle, type IpvsSocketStats } from '../native.js';
import { ApplyResult, HandleFacade, checkOpList, redoInterrupted, type BatchOptions } from './batch.js';
import { packIpvsOps } from './ipvs-pack.js';
import type { AddressFamily } from '../net/address.js';

export interface IpvsInfo {
  /** "1.2.1" */
  version: string;
  /** The raw version number (0x010201). */
  versionCode: number;
  /** Size of the connection hash table (`ip_vs_conn_tab_bits`). */
  connTableSize: number;
}

export type { AddressFamily };
export type IpvsProtocol = 'tcp' | 'udp' | 'sctp';

/** Every scheduler Linux ships (twos from 6.2 on). Any other name is passed to the kernel,
 *  which answers ENOENT when it has no `ip_vs_<name>` module. */
export const SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'fo', 'ovf', 'mh', 'twos'] as const;
export type Scheduler = (typeof SCHEDULERS)[number] | (string & {});

/**
 * Service flags. `sh-*` need the sh scheduler, `mh-*` the mh scheduler (they are the same kernel
 * bits, IP_VS_SVC_F_SCHED1/2); `flag-1..3` are the raw scheduler bits for any other scheduler.
 */
export type ServiceFlag =
  | 'persistent'
  | 'one-packet'
  | 'sh-fallback'
  | 'sh-port'
  | 'mh-fallback'
  | 'mh-port'
  | 'flag-1'
  | 'flag-2'
  | 'flag-3';

/** A virtual service by protocol/address/port (family follows the address). */
export interface AddressServiceId {
  protocol: IpvsProtocol;
  address: string;
  /** An integer, 0..65535 (0 with persistence: every port). */
  port: number;
  family?: AddressFamily;
}
/** A virtual service by firewall mark (family defaults to inet). */
export interface FwmarkServiceId {
  /** An integer, 1..2^32-1. */
  fwmark: number;
  family?: AddressFamily;
}
export type ServiceId = AddressServiceId | FwmarkServiceId;

export interface ServiceOptions {
  /** Default 'wlc' (as ipvsadm). */
  scheduler?: Scheduler;
  flags?: ServiceFlag[];
  /** Persistence timeout, integer seconds (default 360 when 'persistent' is set, as ipvsadm;
   *  else 0). */
  timeout?: number;
  /** Persistence granularity: IPv4 a dotted mask ('255.255.255.0', default /32), IPv6 a prefix
   *  length (default 128). */
  netmask?: string | number;
  /** Persistence engine ('sip'). */
  pe?: string;
}
export type ServiceConfig = ServiceId & ServiceOptions;

export type ForwardMethod = 'masq' | 'local' | 'tunnel' | 'droute';
export type TunnelType = 'ipip' | 'gue' | 'gre';
export interface TunnelOptions {
  type: TunnelType;
  /** gue only (required there): an integer, 1..65535. */
  port?: number;
  /** gue and gre; remcsum gue only. */
  checksum?: 'none' | 'csum' | 'remcsum';
}

export interface DestinationId {
  address: string;
  /** An integer, 0..65535. */
  port: number;
  /** Follows the address; an IPv4 destination of an IPv6 service needs forward 'tunnel'. */
  family?: AddressFamily;
}
export interface DestinationConfig extends DestinationId {
  /** Default 'droute' (as ipvsadm). */
  forward?: ForwardMethod;
  /** An integer, 0..2147483647 (0: no new connections), default 1. */
  weight?: number;
  /** Connection limits, integers (0: none). */
  upperThreshold?: number;
  lowerThreshold?: number;
  tunnel?: TunnelOptions;
}

/** Counters (64-bit where the kernel has STATS64, else its 32-bit set). */
export interface IpvsStats {
  conns: number;
  inPackets: number;
  outPackets: number;
  inBytes: number;
  outBytes: number;
  cps: number;
  inPps: number;
  outPps: number;
  inBps: number;
  outBps: number;
}

/** A destination as the kernel reports it. */
export interface Destination {
  family: AddressFamily;
  address: string;
  port: number;
  forward: ForwardMethod;
  weight: number;
  upperThreshold: number;
  lowerThreshold: number;
  /** Present for tunnel destinations on kernels with tunnel attributes (5.2+). */
  tunnel?: TunnelOptions;
  activeConns: number;
  inactiveConns: number;
  persistentConns: number;
  stats?: IpvsStats;
}

/** A virtual service as the kernel reports it (every option filled in). */
export type Service = (
  | { family: AddressFamily; protocol: IpvsProtocol; address: string; port: number; fwmark?: undefined }
  | { family: AddressFamily; fwmark: number; protocol?: undefined; address?: undefined; port?: undefined }
) & {
  scheduler: Scheduler;
  flags: ServiceFlag[];
  timeout: number;
  netmask: string | number;
  pe?: string;
  stats?: IpvsStats;
  destinations?: Destination[];
};

export interface Timeouts {
  tcp: number;
  tcpFin: number;
  udp: number;
}

export interface DaemonConfig {
  state: 'master' | 'backup';
  /** Multicast interface. */
  interface: string;
  syncId?: number;
  /** Newer attributes (4.3+). */
  syncMaxLen?: number;
  mcastGroup?: string;
  mcastPort?: number;
  mcastTtl?: number;
}
export interface Daemon {
  state: 'master' | 'backup';
  interface: string;
  syncId: number;
  syncMaxLen: number;
  mcastGroup?: string;
  mcastPort: number;
  mcastTtl: number;
}

export type IpvsOp =
  | { op: 'addService'; service: ServiceConfig }
  | { op: 'updateService'; service: ServiceConfig }
  | { op: 'deleteService'; service: ServiceId }
  | { op: 'addDestination'; service: ServiceId; dest: DestinationConfig }
  | { op: 'updateDestination'; service: ServiceId; dest: DestinationConfig }
  | { op: 'deleteDestination'; service: ServiceId; dest: DestinationId }
  | { op: 'flush' }
  | { op: 'zero'; service?: ServiceId }
  | { op: 'setTimeouts'; timeouts: Partial<Timeouts> }
  | { op: 'startDaemon'; daemon: DaemonConfig }
  | { op: 'stopDaemon'; daemon: { state: 'master' | 'backup' } };

export interface ApplyOptions extends BatchOptions {
  /**
   * 'errors' (default): requests carry no NLM_F_ACK and the kernel answers only failures (IPVS
   * handles requests synchronously inside sendmsg, so silence means success) — one recvmsg per
   * chunk instead of one per op. 'each': every request is acked, exactly as ipvsadm sends it.
   */
  ack?: 'each' | 'errors';
}

export interface ListOptions {
  /** Also dump every service's destinations (one GET_DEST dump per service, one worker job). */
  withDestinations?: boolean;
  /** Include counters. */
  stats?: boolean;
}

/** What the sync engine and the CLI use; the real class and in-memory doubles implement it. */
export interface IpvsApi {
  info(): Promise<IpvsInfo>;
  /** Many mixed ops in one batch: one N-API crossing, many per sendmsg, a result per op. Calls
   *  in flight together take effect in call order (the engine relies on it). */
  apply(ops: IpvsOp[], opts?: ApplyOptions): Promise<ApplyResult>;
  services(opts?: ListOptions): Promise<Service[]>;
  /** One service, or null when the kernel has none with this identity. */
  service(id: ServiceId, opts?: ListOptions): Promise<Service | null>;
  destinations(service: ServiceId, opts?: { stats?: boolean }): Promise<Destination[]>;
  /** Several services' destinations in one call (their dumps run as services() runs them), in
   *  the order given; a service that is not there has none. Optional: the engine reads a large
   *  table a slice at a time with it, and reads it whole through services() without it. */
  destinationsOf?(services: readonly ServiceId[], opts?: { stats?: boolean }): Promise<Destination[][]>;
  timeouts(): Promise<Timeouts>;
  setTimeouts(t: Partial<Timeouts>): Promise<void>;
  daemons(): Promise<Daemon[]>;
  startDaemon(d: DaemonConfig): Promise<void>;
  stopDaemon(state: 'master' | 'backup'): Promise<void>;
}

export interface IpvsOptions extends HandleOptions {
  /** Receive buffer to ask the kernel for (default 16 MiB). */
  rcvbufBytes?: number;
  /**
   * Read every service's destinations with many GET_DEST dumps at once over io_uring (default
   * true; the environment variable IPVSYNC_IO_URING=0 turns it off process-wide). Off, or where
   * the kernel has no usable io_uring (ENOSYS, EPERM from kernel.io_uring_disabled), each
   * service costs one sendmsg and one recvmmsg on the handle's socket. Results are identical.
   */
  ioUring?: boolean;
  /** Sockets in the io_uring dump pool (default 64; each runs one dump at a time). */
  dumpSockets?: number;
}

/** IPVS over generic netlink. One handle owns one netlink socket (per network namespace). */
export class Ipvs extends HandleFacade<NativeIpvsHandle, IpvsSocketStats> implements IpvsApi {
  /** Opens a handle and checks that the kernel has IPVS (throws `unsupported` naming ip_vs). */
  static async open(opts: IpvsOptions = {}): Promise<Ipvs> {
    const ioUring = opts.ioUring ?? process.env.IPVSYNC_IO_URING !== '0';
    const { ioUring: _, ...rest } = opts;
    const ipvs = new Ipvs(new (native().IpvsHandle)({ ...rest, ...(ioUring ? {} : { dumpSockets: 0 }) }));
    await ipvs.info();
    return ipvs;
  }

  /** IPVS_CMD_GET_INFO: version and connection table size. */
  info(): Promise<IpvsInfo> {
    return this.h.info();
  }

  /**
   * Validates every op (a bad one throws a NetlinkError of kind 'invalid' whose `index` names it;
   * nothing is sent), then sends them in order. With `stopOnError` (default) one at a time, and
   * nothing after the first failure reaches the kernel; without it many per sendmsg. Calls in
   * flight together reach the kernel in the order they were made.
   */
  async apply(ops: IpvsOp[], opts: ApplyOptions = {}): Promise<ApplyResult> {
    checkOpList(ops, 'ipvs apply');
    return new ApplyResult(await this.h.apply(packIpvsOps(ops), opts));
  }

  async services(opts: ListOptions = {}): Promise<Service[]> {
    return (await redoInterrupted(() => this.h.services(opts))) as unknown as Service[];
  }

  async service(id: ServiceId, opts: ListOptions = {}): Promise<Service | null> {
    return (await this.h.service(id, opts)) as unknown as Service | null;
  }

  async destinations(service: ServiceId, opts: { stats?: boolean } = {}): Promise<Destination[]> {
    return (await redoInterrupted(() => this.h.destinations(service, opts))) as unknown as Destination[];
  }

  /** Several services' destinations: their GET_DEST dumps run together (64 at a time over
   *  io_uring where it is usable), in one worker job; storage for just these services. */
  async destinationsOf(services: readonly ServiceId[], opts: { stats?: boolean } = {}): Promise<Destination[][]> {
    return (await redoInterrupted(() => this.h.destinationsMany(services as unknown[], opts))) as unknown as Destination[][];
  }

  timeouts(): Promise<Timeouts> {
    return this.h.timeouts();
  }

  async setTimeouts(t: Partial<Timeouts>): Promise<void> {
    await this.applyOne([{ op: 'setTimeouts', timeouts: t }]);
  }

  async daemons(): Promise<Daemon[]> {
    return (await this.h.daemons()) as unknown as Daemon[];
  }

  async startDaemon(d: DaemonConfig): Promise<void> {
    await this.applyOne([{ op: 'startDaemon', daemon: d }]);
  }

  async stopDaemon(state: 'master' | 'backup'): Promise<void> {
    await this.applyOne([{ op: 'stopDaemon', daemon: { state } }]);
  }

  async flush(): Promise<void> {
    await this.applyOne([{ op: 'flush' }]);
  }

  async zero(service?: ServiceId): Promise<void> {
    await this.applyOne([service ? { op: 'zero', service } : { op: 'zero' }]);
  }

  /** One op whose kernel error is thrown (the one-call helpers above). */
  private async applyOne(ops: IpvsOp[]): Promise<void> {
    (await this.apply(ops)).orThrow();
  }
}

/** ipvsadm's wording: "IP Virtual Server version 1.2.1 (size=4096)". */
export function formatInfo(i: IpvsInfo): string {
  return `IP Virtual Server version ${i.version} (size=${i.connTableSize})`;
}

/** The identity part of a service (for ops that take a ServiceId). */
export function serviceId(s: Service | ServiceConfig): ServiceId {
  if ('fwmark' in s && s.fwmark !== undefined) return { fwmark: s.fwmark, ...(s.family ? { family: s.family } : {}) };
  const a = s as AddressServiceId;
  return { protocol: a.protocol, address: a.address, port: a.port, ...(a.family ? { family: a.family } : {}) };
}
