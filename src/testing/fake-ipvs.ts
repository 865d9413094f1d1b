// An in-memory IPVS with the kernel's semantics, implementing the same IpvsApi as the real
// handle: EEXIST for a duplicate add, ESRCH for a missing service, ENOENT for a missing
// destination or an unknown scheduler; connection counts a test can set; a log of every call,
// so engine tests can assert the exact, minimal delta.
import { NetlinkError } from '../errors.js';
import type { ApplyResult, BatchOptions } from '../kernel/batch.js';
import {
  SCHEDULERS,
  type Daemon,
  type DaemonConfig,
  type Destination,
  type DestinationConfig,
  type DestinationId,
  type IpvsApi,
  type IpvsInfo,
  type IpvsOp,
  type ListOptions,
  type Service,
  type ServiceConfig,
  type ServiceFlag,
  type ServiceId,
  type Timeouts,
} from '../kernel/ipvs.js';
import { packIpvsOps } from '../kernel/ipvs-pack.js';
import { native } from '../native.js';
import { destKey, serviceKey, serviceShape } from '../engine/ipvs-model.js';
import { canonicalAddress, familyOf } from '../net/address.js';
import { runBatch } from './fake-batch.js';

/** The kernel's errors this double answers with. */
type IpvsErrno = 'EEXIST' | 'ESRCH' | 'ENOENT' | 'EINVAL';

interface Counts {
  activeConns: number;
  inactiveConns: number;
  persistentConns: number;
}

interface Entry {
  service: Service;
  /** The destinations as applied — the ops' own objects, made into Destinations (defaults
   *  filled in, the address canonical) only when read: a copy of each, kept for as long as it
   *  is in the table, was most of this double's cost at scale (~60 MB allocated and ~0.5 s for
   *  a 10k-service full sync). A caller must not modify an op's destination after applying it
   *  (the engine never does: its ops are made for the apply). */
  dests: DestTable;
  /** Connection counts a test set (setConnections): kept across an update, gone with the
   *  destination; a destination without any has none. */
  conns: Map<string, Counts> | undefined;
}

export class FakeIpvs implements IpvsApi {
  private readonly table = new Map<string, Entry>();
  private t: Timeouts = { tcp: 900, tcpFin: 120, udp: 300 };
  private readonly daemonList: Daemon[] = [];
  /** Every apply() call's ops, in order (copies; empty with `record: false`). */
  readonly log: IpvsOp[][] = [];
  private written = 0;
  private readonly record: boolean;
  private readonly convert: boolean;

  /** `record: false` keeps no copy of the ops applied (`log` stays empty; `writes` still
   *  counts): for benchmarks at scale, where the copies would be the biggest cost and most of
   *  the memory. `convert: true` makes every apply() first do what the real handle does on the
   *  calling thread before anything reaches the kernel: pack the ops, read them in the addon
   *  with its checks, and encode the netlink requests (the bytes are dropped), so a benchmark on
   *  a kernel without IPVS still pays the main thread's part of programming it; an op the addon
   *  refuses rejects the call as the real handle's does, before the table changes. */
  constructor(opts: { record?: boolean; convert?: boolean } = {}) {
    this.record = opts.record ?? true;
    this.convert = opts.convert ?? false;
  }
  /** Dumps served (services()). */
  dumps = 0;
  /** Fail the next apply's op at this index with this code (one shot), for failure tests. */
  failNext: { index: number; code: IpvsErrno } | undefined;
  /** Simulates the process dying mid-apply: the next apply performs this many ops, then throws. */
  crashAfter: number | undefined;
  /** GETs of single services served (service()). */
  gets = 0;

  async info(): Promise<IpvsInfo> {
    return { version: '1.2.1', versionCode: 0x010201, connTableSize: 4096 };
  }

  /** Total ops written across all apply() calls. */
  get writes(): number {
    return this.written;
  }

  async apply(ops: IpvsOp[], opts: BatchOptions = {}): Promise<ApplyResult> {
    // A failure set for the next call is this call's, taken when it is made (calls in flight
    // together run in call order, as the addon sends them).
    const inject = this.failNext;
    this.failNext = undefined;
    const crash = this.crashAfter;
    this.crashAfter = undefined;
    // The real handle's conversion, at the call (it runs before apply() returns its promise).
    if (this.convert) native().codec.ipvs.convertOps(packIpvsOps(ops), 0);
    // As a socket's reply would: the batch completes in a later turn of the event loop, so a
    // caller applying chunk after chunk lets timers and I/O in between, as against the kernel.
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (this.record) this.log.push(ops.map((o) => structuredClone(o)));
    this.written += ops.length;
    this.lastId = undefined;
    return runBatch(
      ops,
      opts,
      (op, i) => {
        if (crash !== undefined && i === crash) throw new Error(`simulated crash after ${crash} ops`);
        return inject && inject.index === i ? inject.code : this.applyOne(op);
      },
      (op) => op.op,
    );
  }

  /** Within one apply: the service id of the last destination op and its entry (a service's
   *  destination ops come one after another, with the same id object). */
  private lastId: ServiceId | undefined;
  private lastEntry: Entry | undefined;

  private entryOf(id: ServiceId): Entry | undefined {
    if (id === this.lastId) return this.lastEntry;
    const e = this.table.get(serviceKey(id));
    this.lastId = id;
    this.lastEntry = e;
    return e;
  }

  private applyOne(op: IpvsOp): IpvsErrno | undefined {
    switch (op.op) {
      case 'addService': {
        const k = serviceKey(op.service);
        if (this.table.has(k)) return 'EEXIST';
        const sched = op.service.scheduler ?? 'wlc';
        if (!(SCHEDULERS as readonly string[]).includes(sched)) return 'ENOENT';
        this.table.set(k, { service: materialize(op.service), dests: new DestTable(), conns: undefined });
        this.lastId = undefined;
        return undefined;
      }
      case 'updateService': {
        const e = this.table.get(serviceKey(op.service));
        if (!e) return 'ESRCH';
        const sched = op.service.scheduler ?? 'wlc';
        if (!(SCHEDULERS as readonly string[]).includes(sched)) return 'ENOENT';
        e.service = materialize(op.service);
        return undefined;
      }
      case 'deleteService':
        this.lastId = undefined;
        return this.table.delete(serviceKey(op.service)) ? undefined : 'ESRCH';
      case 'addDestination': {
        const e = this.entryOf(op.service);
        if (!e) return 'ESRCH';
        return e.dests.add(op.dest) ? undefined : 'EEXIST';
      }
      case 'updateDestination': {
        const e = this.entryOf(op.service);
        if (!e) return 'ESRCH';
        return e.dests.replace(op.dest) ? undefined : 'ENOENT'; // connection counts (conns) stay
      }
      case 'deleteDestination': {
        const e = this.entryOf(op.service);
        if (!e) return 'ESRCH';
        e.conns?.delete(destKey(op.dest));
        return e.dests.delete(op.dest) ? undefined : 'ENOENT';
      }
      case 'flush':
        this.table.clear();
        this.lastId = undefined;
        return undefined;
      case 'zero':
        return op.service && !this.table.has(serviceKey(op.service)) ? 'ESRCH' : undefined;
      case 'setTimeouts':
        this.t = { ...this.t, ...op.timeouts };
        return undefined;
      case 'startDaemon':
        if (this.daemonList.some((d) => d.state === op.daemon.state)) return 'EEXIST';
        this.daemonList.push({ syncId: 0, syncMaxLen: 1472, mcastPort: 8848, mcastTtl: 1, ...op.daemon } as Daemon);
        return undefined;
      case 'stopDaemon': {
        const i = this.daemonList.findIndex((d) => d.state === op.daemon.state);
        if (i < 0) return 'ESRCH';
        this.daemonList.splice(i, 1);
        return undefined;
      }
    }
  }

  async services(opts: ListOptions = {}): Promise<Service[]> {
    this.dumps++;
    return [...this.table.values()].map((e) => this.view(e, opts));
  }

  async service(id: ServiceId, opts: ListOptions = {}): Promise<Service | null> {
    this.gets++;
    const e = this.table.get(serviceKey(id));
    return e ? this.view(e, opts) : null;
  }

  /** Destination dumps served through destinationsOf (one per service). */
  destDumps = 0;

  async destinationsOf(services: readonly ServiceId[]): Promise<Destination[][]> {
    this.destDumps += services.length;
    return services.map((id) => {
      const e = this.table.get(serviceKey(id));
      return e ? destinationsOfEntry(e) : [];
    });
  }

  async destinations(service: ServiceId): Promise<Destination[]> {
    const e = this.table.get(serviceKey(service));
    if (!e) throw new NetlinkError({ message: 'no such service', code: 'ESRCH', errno: 3, kind: 'kernel', op: 'IPVS_CMD_GET_DEST' });
    return destinationsOfEntry(e);
  }

  async timeouts(): Promise<Timeouts> {
    return { ...this.t };
  }

  async setTimeouts(t: Partial<Timeouts>): Promise<void> {
    await this.apply([{ op: 'setTimeouts', timeouts: t }]);
  }

  async daemons(): Promise<Daemon[]> {
    return this.daemonList.map((d) => ({ ...d }));
  }

  async startDaemon(d: DaemonConfig): Promise<void> {
    (await this.apply([{ op: 'startDaemon', daemon: d }])).orThrow();
  }

  async stopDaemon(state: 'master' | 'backup'): Promise<void> {
    (await this.apply([{ op: 'stopDaemon', daemon: { state } }])).orThrow();
  }

  /** Test hook: set a destination's connection counts (as traffic would). */
  setConnections(service: ServiceId, dest: DestinationId, active: number, inactive = 0): void {
    const e = this.table.get(serviceKey(service));
    const k = destKey(dest);
    if (!e || e.dests.indexOf(dest) < 0) throw new Error(`no destination ${k} in ${serviceKey(service)}`);
    e.conns ??= new Map();
    const c = e.conns.get(k) ?? { activeConns: 0, inactiveConns: 0, persistentConns: 0 };
    c.activeConns = active;
    c.inactiveConns = inactive;
    e.conns.set(k, c);
  }

  private view(e: Entry, opts: ListOptions): Service {
    const s: Service = { ...e.service };
    if (opts.withDestinations) s.destinations = destinationsOfEntry(e);
    return s;
  }
}

/** A service's destinations as the kernel reports them (fresh objects). */
function destinationsOfEntry(e: Entry): Destination[] {
  const out: Destination[] = [];
  for (const d of e.dests.list()) {
    const c = e.conns?.get(destKey(d));
    out.push(c ? { ...materializeDest(d), ...c } : materializeDest(d));
  }
  return out;
}

/**
 * One service's destinations, in the order they were added: a plain list searched by address
 * and port while it is short (a Map with a key text per destination was ~10% of a 10k-service
 * full sync on the host, which stands in for the kernel's work, and 8-12 MB of its memory), with
 * a key index built once it grows past INDEX_FROM.
 */
class DestTable {
  private static readonly INDEX_FROM = 32;
  private readonly items: DestinationConfig[] = [];
  /** destKey → the destination, past INDEX_FROM entries. */
  private index: Map<string, DestinationConfig> | undefined;

  list(): readonly DestinationConfig[] {
    return this.items;
  }

  indexOf(d: { address: string; port: number }): number {
    if (this.index) {
      const hit = this.index.get(destKey(d));
      return hit ? this.items.indexOf(hit) : -1;
    }
    const a = canonicalAddress(d.address);
    const items = this.items;
    for (let i = 0; i < items.length; i++) {
      const x = items[i]!;
      if (x.port === d.port && (x.address === a || canonicalAddress(x.address) === a)) return i;
    }
    return -1;
  }

  /** false: already there. */
  add(d: DestinationConfig): boolean {
    if (this.index) {
      const k = destKey(d);
      if (this.index.has(k)) return false;
      this.index.set(k, d);
    } else if (this.indexOf(d) >= 0) {
      return false;
    }
    this.items.push(d);
    if (!this.index && this.items.length > DestTable.INDEX_FROM) this.index = new Map(this.items.map((x) => [destKey(x), x]));
    return true;
  }

  /** false: not there. */
  replace(d: DestinationConfig): boolean {
    const i = this.indexOf(d);
    if (i < 0) return false;
    this.items[i] = d;
    this.index?.set(destKey(d), d);
    return true;
  }

  /** false: not there. */
  delete(d: { address: string; port: number }): boolean {
    const i = this.indexOf(d);
    if (i < 0) return false;
    this.items.splice(i, 1);
    this.index?.delete(destKey(d));
    return true;
  }
}

const FLAG_NAMES: Array<[number, ServiceFlag]> = [
  [0x1, 'persistent'],
  [0x4, 'one-packet'],
];

function materialize(c: ServiceConfig): Service {
  const shape = serviceShape(c);
  const flags: ServiceFlag[] = FLAG_NAMES.filter(([b]) => shape.flags & b).map(([, n]) => n);
  for (const f of c.flags ?? []) if (!flags.includes(f)) flags.push(f);
  const base = {
    scheduler: shape.scheduler,
    flags,
    timeout: shape.timeout,
    netmask: typeof c.netmask === 'number' ? c.netmask : shape.netmask === '128' ? 128 : shape.netmask,
    ...(shape.pe ? { pe: shape.pe } : {}),
  };
  if ('fwmark' in c && c.fwmark !== undefined) return { family: c.family ?? 'inet', fwmark: c.fwmark, ...base };
  const a = c as { protocol: 'tcp' | 'udp' | 'sctp'; address: string; port: number; family?: 'inet' | 'inet6' };
  const address = canonicalAddress(a.address);
  return { family: a.family ?? familyOf(address), protocol: a.protocol, address, port: a.port, ...base };
}

function materializeDest(d: DestinationConfig): Destination {
  const address = canonicalAddress(d.address);
  const forward = d.forward ?? 'droute';
  return {
    family: d.family ?? familyOf(address),
    address,
    port: d.port,
    forward,
    weight: d.weight ?? 1,
    upperThreshold: d.upperThreshold ?? 0,
    lowerThreshold: d.lowerThreshold ?? 0,
    ...(forward === 'tunnel' && d.tunnel ? { tunnel: d.tunnel } : {}),
    activeConns: 0,
    inactiveConns: 0,
    persistentConns: 0,
  };
}
