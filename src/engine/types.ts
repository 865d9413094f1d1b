// The engine's shared types: what a caller hands it (the desired state, what changed since
// the last clean apply, what it owns), what it refuses, and what it returns (a plan, a sync
// report). The reconcilers and the checks take them from here, not from engine.ts (no import
// cycle between the engine and its parts).
import type { NetlinkError } from '../errors.js';
import type { AddressesDelta, DesiredVips } from './addresses-diff.js';
import type { KindReport } from './apply-batch.js';
import type { DesiredIpSet, IpSetsDelta } from './ipsets-diff.js';
import type { IpvsDelta } from './ipvs-diff.js';
import type { DesiredService } from './ipvs-model.js';
import type { DesiredNftTable, NftDelta, NftElementChange } from './nft-diff.js';
import type { DesiredRoutes, RoutesDelta } from './routes-diff.js';

export type { NftElementChange };

/**
 * A desired object the kernel layer would refuse (Plan.invalid, SyncReport.invalid): left out
 * of the sync, with what the kernel has under its key left as it is. `object` names it readably
 * ("TCP 10.0.0.1:80", "TCP 10.0.0.1:80 -> 10.244.1.5:8080", "vip 10.0.0.1 on kube-ipvs0",
 * "ipset KUBE-X member 1.2.3.4,tcp:80", "nft ip ipvsync set foo element 1.2.3.4/24"), `field`
 * is the field that is wrong ('address', 'port', 'scheduler', 'weight', 'key', …).
 */
export interface InvalidObject {
  kind: 'ipvs' | 'vip' | 'route' | 'ipset' | 'nft';
  object: string;
  field: string;
  message: string;
}

export interface DesiredState {
  /** IPVS virtual services with their destinations. */
  services: DesiredService[];
  /** VIPs bound on the engine's own link (kube-ipvs0). */
  vips?: DesiredVips;
  /** Routes the engine owns (protocol IPVSYNC_ROUTE_PROTOCOL), e.g. local routes over the
   *  service CIDRs; an empty list removes every owned route. */
  routes?: DesiredRoutes;
  /** ipsets owned through Ownership.ipsetPrefix. */
  ipsets?: DesiredIpSet[];
  /** The engine's own nftables table(s) (e.g. one `ip` and one `ip6` table). */
  nft?: DesiredNftTable | DesiredNftTable[];
}

/**
 * What differs between the desired state of a plan and the one of the last apply() that wrote
 * it without an error (the base), as plain data, per kind: `engine.plan(desired, changes)` (or
 * sync) then reads and diffs only what is named here. With `services` the plan is incremental:
 * it reads and diffs the IPVS services named (one GET each) instead of comparing every one, and
 * everything of `desired` not named must be as in the base (the engine does not look). Without
 * `changes` (or without `services`) a plan is full: every IPVS service is read and compared.
 * VIPs, routes and ipsets are compared with the base in either mode.
 */
export interface DesiredChanges {
  /** The IPVS services that may differ from the base, by serviceKey: the desired service now,
   *  or undefined where none is desired under the key any more. */
  services?: ReadonlyMap<string, DesiredService | undefined>;
  /**
   * The nftables set elements added and deleted since the base ([]: none; elementChanges
   * computes them from two versions of a caller's tables). The tables' static parts (chains,
   * rules, set declarations) are compared with the base's: chains and sets added or gone and
   * changed rule lists are written without a listing, a new set's elements among these adds.
   * Taken while the kernel is known to have the base's tables: in an incremental plan, or in a
   * full one while no transaction was committed since (one GETGEN); otherwise, or when absent,
   * the tables are listed and compared. The engine keeps no element of a base.
   */
  nft?: readonly NftElementChange[];
}

/**
 * What the engine may change or delete besides what it records itself. An IPVS virtual server
 * is the engine's when it is in its record (ownership.ts: two ipsets of its own, or, without
 * an ipset handle, memory for the process's lifetime), or when an option below says so; never
 * when its address is in excludeCidrs.
 */
export interface Ownership {
  /** IPVS services whose address falls in these CIDRs are the engine's even unrecorded (an
   *  embedder's explicit claim; the proxy passes none)… */
  managedCidrs?: string[];
  /** …and no service whose address falls in one of these is, recorded or not (kube-proxy's
   *  excludeCIDRs). */
  excludeCidrs?: string[];
  /** Firewall-mark services in this range are the engine's even unrecorded (a firewall-mark
   *  service has no address and port to record in the kernel: memory only). */
  managedFwmarks?: { min: number; max: number };
  /** ipsets whose names start with this are the engine's (required to manage ipsets). */
  ipsetPrefix?: string;
}

/** Every write a sync would make, per kind, in the order they will be made. */
export interface Plan {
  mode: 'full' | 'incremental';
  /** Incremental: the service keys this plan looked at. */
  scope?: string[];
  ipvs: IpvsDelta;
  addresses?: AddressesDelta;
  routes?: RoutesDelta;
  ipsets?: IpSetsDelta;
  nft?: NftDelta;
  observeMs: number;
  diffMs: number;
  /** Incremental: kinds left out because their desired state is the one last applied cleanly. */
  unchanged?: Array<'addresses' | 'nft'>;
  /** Desired objects left out because the kernel layer would refuse them (none: absent). */
  invalid?: InvalidObject[];
}

/** A sync report's kinds (in the order its texts list them). */
export const REPORT_KINDS = ['addresses', 'routes', 'ipsets', 'nft', 'ipvs'] as const;
export type ReportKind = (typeof REPORT_KINDS)[number];

/** Every kind's writes of a sync. */
export function reportWrites(r: Pick<SyncReport, ReportKind>): number {
  return REPORT_KINDS.reduce((n, k) => n + r[k].writes, 0);
}

export interface SyncReport {
  mode: 'full' | 'incremental';
  ipvs: KindReport;
  addresses: KindReport;
  routes: KindReport;
  ipsets: KindReport;
  nft: KindReport;
  flowsFlushed: number;
  /** Destinations at weight 0 waiting for their connections to end. */
  draining: number;
  /** Every failure of this sync (typed, with the op and its index in its kind's batch). */
  errors: NetlinkError[];
  /** Desired objects this sync left out because the kernel layer would refuse them: every
   *  invalid service, destination, VIP, route, ipset and member, and nftables table, chain, set
   *  and rule; an nftables element when this sync would have written it (an element the
   *  kernel already has as it is wanted, or left out before, is not written again). An
   *  incremental sync checks the services of its changes and reports the others' verdicts of
   *  the plans before. */
  invalid: InvalidObject[];
  durations: { observeMs: number; diffMs: number; applyMs: number; totalMs: number };
}
