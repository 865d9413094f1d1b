// The protocol of a kind's reconciler, which the engine drives the same for every kind: check
// the desired state, observe the kernel, diff, apply by phase, settle. Types only: the engine
// and the reconcilers import it, it imports neither.
import type { IpSet } from '../kernel/ipsets.js';
import type { DesiredChanges, DesiredState, InvalidObject, Plan, SyncReport } from './types.js';

/** The kinds, as a SyncReport names them. */
export type Kind = 'ipvs' | 'addresses' | 'routes' | 'ipsets' | 'nft';

/** What a plan is about (`changed`: an incremental plan's IPVS service keys). */
export type PlanScope = { desired: DesiredState; changes?: DesiredChanges; changed?: ReadonlySet<string> };

/** Kernel reads more than one kind takes, made once per plan: every ipset (the ipsets kind's
 *  listing, which holds the IPVS record's sets). */
export type PlanReads = { everySet(): Promise<IpSet[]> };

/** Writes as the public Plan shows them. */
export type PlanPart = Partial<Pick<Plan, Kind>>;

/** A kind's part of a plan: the engine keeps it for apply and settle, and shows `shown`.
 *  `unchanged`: incremental, the kind's desired state is the one last applied cleanly (nothing
 *  read); `readMs`: time the diff spent reading (a full IPVS plan's destinations, by slices). */
export interface Planned {
  shown: PlanPart;
  /** What the kernel layer would refuse (the check's, and the diff's). */
  invalid: readonly InvalidObject[];
  unchanged?: boolean;
  readMs?: number;
}

/** apply() writes in three phases, every kind's part of one before the next: `early` (in the
 *  engine's write order: the VIP link, routes, the IPVS record, ipsets; the VIP address adds
 *  left running), `main` (nftables and IPVS together; the address adds awaited), `late` (the
 *  removals, in the reverse order). */
export type Phase = 'early' | 'main' | 'late';

export interface Reconciler<Checked = unknown, Observed = unknown, P extends Planned = Planned> {
  readonly kind: Kind;
  /** Synchronous: the kind's desired state checked (what the kernel layer would refuse is left
   *  out, reported by diff) and what to read decided. */
  check(scope: PlanScope): Checked;
  /** The kernel read: one dump of the kind (an incremental plan: a GET per IPVS service), or nothing. */
  observe(c: Checked, reads: PlanReads): Promise<Observed>;
  /** The kind's writes; writes nothing (a full IPVS plan reads destinations as it goes). */
  diff(c: Checked, o: Observed): P | Promise<P>;
  /** The kind's writes of a phase, every batch continuing past failures, into `report`. */
  apply(phase: Phase, p: P, report: SyncReport): Promise<void>;
  /** After apply: what applied cleanly becomes the base of the next plans. */
  settle?(p: P, report: SyncReport): void | Promise<void>;
}
