// The engine's ipsets (those named with Ownership.ipsetPrefix): checked, observed (one listing
// of every set, which also holds the IPVS ownership record's two), diffed (ipsets-diff) and
// written, creations and member changes before IPVS, destroys after. Nothing is kept between
// syncs.
import type { IpSet, IpSetsApi } from '../kernel/ipsets.js';
import { applyBatch } from './apply-batch.js';
import type { Phase, Planned, PlanReads, PlanScope, Reconciler } from './reconciler.js';
import type { InvalidObject, SyncReport } from './types.js';
import { diffIpSets, memberKey, type DesiredIpSet } from './ipsets-diff.js';
import { IPVS_RECORD_SETS } from './ownership.js';
import { checkIpSet } from './validate.js';

/** A plan's ipsets before the kernel is read. */
export interface IpSetsChecked {
  /** The sets without what the kernel layer refuses (undefined: ipsets are not managed). */
  want: DesiredIpSet[] | undefined;
  invalid: InvalidObject[];
  /** ipsets left out whole: the kernel's of these names are not destroyed. */
  dropped: ReadonlySet<string>;
  /** Set name -> memberKeys of the kernel's members to leave as they are. */
  keptMembers: ReadonlyMap<string, ReadonlySet<string>>;
}

export class IpSetsReconciler implements Reconciler<IpSetsChecked, IpSet[] | undefined> {
  readonly kind = 'ipsets';

  constructor(
    private readonly ipsets: IpSetsApi | undefined,
    private readonly prefix: string | undefined,
  ) {}

  check({ desired: { ipsets: desired } }: PlanScope): IpSetsChecked {
    const dropped = new Set<string>();
    const keptMembers = new Map<string, Set<string>>();
    const invalid: InvalidObject[] = [];
    if (!desired) return { want: undefined, invalid, dropped, keptMembers };
    if (!this.prefix) throw new RangeError('managing ipsets needs Ownership.ipsetPrefix');
    let out: DesiredIpSet[] | undefined;
    for (let i = 0; i < desired.length; i++) {
      const set = desired[i]!;
      const v = checkIpSet(set, this.prefix);
      if (!v) {
        out?.push(set);
        continue;
      }
      out ??= desired.slice(0, i);
      invalid.push(...v.invalid);
      if (v.valid) {
        out.push(v.valid);
        if (v.keptMembers) keptMembers.set(set.name, new Set(v.keptMembers));
      } else if (typeof set.name === 'string') dropped.add(set.name);
    }
    return { want: this.ipsets ? (out ?? desired) : undefined, invalid, dropped, keptMembers };
  }

  /** Every set, when the plan manages ipsets. */
  observe(s: IpSetsChecked, reads: PlanReads): Promise<IpSet[] | undefined> {
    return s.want ? reads.everySet() : Promise.resolve(undefined);
  }

  diff(s: IpSetsChecked, listed: readonly IpSet[] | undefined): Planned {
    if (!s.want) return { shown: {}, invalid: s.invalid };
    // the record's sets are never the ipset diff's, whatever its prefix
    const delta = diffIpSets(s.want, listed!.filter((x) => !IPVS_RECORD_SETS.includes(x.name)), this.prefix!);
    if (s.dropped.size || s.keptMembers.size) {
      delta.late = delta.late.filter((o) => !(o.op === 'destroy' && s.dropped.has(o.name)));
      delta.early = delta.early.flatMap((o) => {
        const keep = o.op === 'del' ? s.keptMembers.get(o.name) : undefined;
        if (!keep || o.op !== 'del') return [o];
        const members = o.members.filter((m) => !keep.has(memberKey(o.type!, m)));
        return members.length ? [{ ...o, members }] : [];
      });
    }
    return { shown: { ipsets: delta }, invalid: s.invalid };
  }

  async apply(phase: Phase, p: Planned, report: SyncReport): Promise<void> {
    const d = p.shown.ipsets;
    if (d && phase !== 'main') await applyBatch(report.ipsets, d[phase], (o) => this.ipsets!.apply(o, { stopOnError: false }));
  }
}
