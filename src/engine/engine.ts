// The sync engine: desired state -> one dump per object kind -> pure diff -> batched apply.
// Each object kind is a small reconciler; the engine orders them, keeps what must survive
// between syncs (draining destinations), and reports what it did.
import type { NetlinkError } from '../errors.js';
import type { IpvsApi, Service } from '../kernel/ipvs.js';
import { anyContains, parseCidr, type Cidr } from './cidr.js';
import { diffIpvs, type FlowFlush } from './ipvs-diff.js';
import { canonicalAddress, serviceKey, type DesiredService } from './ipvs-model.js';

export interface DesiredState {
  /** Virtual services with their destinations. */
  services: DesiredService[];
}

export interface Ownership {
  /** IPVS services whose address falls in these CIDRs are the engine's. */
  managedCidrs?: string[];
  /** …unless it falls in one of these (kube-proxy's excludeCIDRs). */
  excludeCidrs?: string[];
  /** Firewall-mark services in this range are the engine's. */
  managedFwmarks?: { min: number; max: number };
}

export interface EngineKernel {
  ipvs: IpvsApi;
  /** Flushes conntrack flows of removed UDP/SCTP destinations; returns flows deleted. */
  flushFlows?: (flows: FlowFlush[]) => Promise<number>;
}

export interface EngineOptions extends Ownership {
  /** A draining TCP destination is deleted after this even with connections (default 15 min). */
  drainTimeoutMs?: number;
  now?: () => number;
}

export interface KindReport {
  /** Writes issued, by op name. */
  ops: Record<string, number>;
  writes: number;
  errors: NetlinkError[];
}

export interface SyncReport {
  mode: 'full' | 'incremental';
  ipvs: KindReport;
  flowsFlushed: number;
  /** Destinations at weight 0 waiting for their connections to end. */
  draining: number;
  errors: NetlinkError[];
  durations: { observeMs: number; diffMs: number; applyMs: number; totalMs: number };
}

export class Engine {
  private draining = new Map<string, number>();
  private readonly managed: Cidr[];
  private readonly excluded: Cidr[];
  private readonly now: () => number;
  /** VIPs of the last desired state: services on them are owned too. */
  private desiredVips = new Set<string>();

  constructor(
    private readonly kernel: EngineKernel,
    private readonly opts: EngineOptions = {},
  ) {
    this.managed = (opts.managedCidrs ?? []).map(parseCidr);
    this.excluded = (opts.excludeCidrs ?? []).map(parseCidr);
    this.now = opts.now ?? Date.now;
  }

  /** Whether the engine may change or delete an observed service. */
  owns(s: Service): boolean {
    if (s.fwmark !== undefined) {
      const r = this.opts.managedFwmarks;
      return r !== undefined && s.fwmark >= r.min && s.fwmark <= r.max;
    }
    const a = canonicalAddress(s.address);
    if (anyContains(this.excluded, a)) return false;
    return this.desiredVips.has(a) || anyContains(this.managed, a);
  }

  /**
   * Full reconcile: one dump, a diff of everything. With `changed` (service keys from
   * serviceKey()), only those services are read (one GET each) and compared — the
   * incremental path for a few changed services; a periodic full sync catches drift.
   */
  async sync(desired: DesiredState, changed?: ReadonlySet<string>): Promise<SyncReport> {
    const t0 = performance.now();
    for (const s of desired.services) if ('address' in s && s.address) this.desiredVips.add(canonicalAddress(s.address));

    let want = desired.services;
    let observed: Service[];
    if (changed) {
      want = desired.services.filter((s) => changed.has(serviceKey(s)));
      const ids = [...changed].map(keyToId);
      const got = await Promise.all(ids.map((id) => this.kernel.ipvs.service(id, { withDestinations: true })));
      observed = got.filter((s): s is Service => s !== null);
    } else {
      observed = await this.kernel.ipvs.services({ withDestinations: true });
    }
    const t1 = performance.now();

    const draining = changed ? new Map([...this.draining].filter(([k]) => changed.has(k.split('/')[0]!))) : this.draining;
    const delta = diffIpvs({
      desired: want,
      observed,
      owns: (s) => this.owns(s),
      draining,
      now: this.now(),
      drainTimeoutMs: this.opts.drainTimeoutMs ?? 15 * 60 * 1000,
    });
    const t2 = performance.now();

    // Continue past failures: one bad service must not hold back the rest; the next sync retries.
    const result = delta.ops.length ? await this.kernel.ipvs.apply(delta.ops, { stopOnError: false }) : undefined;
    const ipvs: KindReport = { ops: {}, writes: 0, errors: result?.errors ?? [] };
    delta.ops.forEach((op, i) => {
      if (result && result.status(i) !== 'ok') return;
      ipvs.ops[op.op] = (ipvs.ops[op.op] ?? 0) + 1;
      ipvs.writes++;
    });

    // Keep drain state of services this sync did not look at.
    if (changed) {
      for (const [k, v] of this.draining) if (!changed.has(k.split('/')[0]!)) delta.draining.set(k, v);
    }
    this.draining = delta.draining;

    let flowsFlushed = 0;
    // Only flows of destinations whose delete succeeded.
    const deleted = new Set<string>();
    delta.ops.forEach((o, i) => {
      if (o.op === 'deleteDestination' && result?.status(i) === 'ok')
        deleted.add(`${serviceKey(o.service)}/${o.dest.address}/${o.dest.port}`);
    });
    const flushable = delta.flushFlows.filter((f) =>
      deleted.has(`${serviceKey({ protocol: f.protocol, address: f.service.address, port: f.service.port, family: f.family })}/${f.dest.address}/${f.dest.port}`),
    );
    const errors = [...ipvs.errors];
    if (flushable.length && this.kernel.flushFlows) {
      try {
        flowsFlushed = await this.kernel.flushFlows(flushable);
      } catch (e) {
        errors.push(e as NetlinkError);
      }
    }
    const t3 = performance.now();
    return {
      mode: changed ? 'incremental' : 'full',
      ipvs,
      flowsFlushed,
      draining: this.draining.size,
      errors,
      durations: { observeMs: t1 - t0, diffMs: t2 - t1, applyMs: t3 - t2, totalMs: t3 - t0 },
    };
  }
}

/** serviceKey() back to a ServiceId, for the incremental path's GETs. */
export function keyToId(key: string): Parameters<IpvsApi['service']>[0] {
  const [family, proto, a, b] = key.split('|') as [string, string, string, string | undefined];
  const fam = family === 'inet6' ? 'inet6' : 'inet';
  if (proto === 'fwmark') return { family: fam, fwmark: Number(a) };
  return { family: fam, protocol: proto as 'tcp' | 'udp' | 'sctp', address: a, port: Number(b) };
}
