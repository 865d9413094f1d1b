// The engine's shared types: what a caller hands it (the desired state, what changed since
// the last clean apply, what it owns) and what it refuses. The reconcilers and the checks take
// them from here, not from engine.ts (no import cycle between the engine and its parts).
import type { NftFamily } from '../kernel/nft-types.js';
import type { SetElement } from '../kernel/nftables.js';
import type { DesiredVips } from './addresses-diff.js';
import type { DesiredIpSet } from './ipsets-diff.js';
import type { DesiredService } from './ipvs-model.js';
import type { DesiredNftTable } from './nft-diff.js';
import type { DesiredRoutes } from './routes-diff.js';

/**
 * A desired object the kernel layer would refuse (validateDesired): left out of the sync, with
 * what the kernel has under its key left as it is. `object` names it readably ("TCP
 * 10.0.0.1:80", "TCP 10.0.0.1:80 -> 10.244.1.5:8080", "vip 10.0.0.1 on kube-ipvs0", "ipset
 * KUBE-X member 1.2.3.4,tcp:80", "nft ip ipvsync set foo element 1.2.3.4/24"), `field` is the
 * field that is wrong ('address', 'port', 'scheduler', 'weight', 'key', …).
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

/** Elements added to and deleted from one set of an owned nftables table. */
export interface NftElementChange {
  family: NftFamily;
  table: string;
  set: string;
  add: readonly SetElement[];
  delete: readonly SetElement[];
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
