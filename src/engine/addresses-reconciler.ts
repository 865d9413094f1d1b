// The engine's VIP addresses on its own link: checked, observed (the link and its addresses),
// diffed (addresses-diff) and written, the address adds running while the rest of the sync
// applies; between syncs it keeps the VIPs last applied without an error and the last verdict.
import type { NetlinkError } from '../errors.js';
import type { LinkOp, LinksApi } from '../kernel/links.js';
import { diffAddresses, type DesiredVips, type ObservedVips } from './addresses-diff.js';
import { applyBatch } from './apply-batch.js';
import type { Phase, Planned, PlanScope, Reconciler } from './reconciler.js';
import type { InvalidObject, SyncReport } from './types.js';
import { samePlain } from './ipvs-model.js';
import { vipAddressProblem, vipInvalid, vipLinkInvalid } from './validate.js';

/** A plan's VIPs before the kernel is read. */
export interface AddressesChecked {
  invalid: InvalidObject[];
  /** The VIPs to observe and diff (undefined: none, or the ones last applied cleanly). */
  want: DesiredVips | undefined;
  /** As given (the base when applied cleanly: the VIPs left out stay out while these are desired). */
  vips: DesiredVips | undefined;
  /** Incremental, and the desired VIPs are the ones last applied cleanly. */
  same: boolean;
}

/** `adds`: the address adds in flight from apply's early phase to its main one. */
type AddressesPlanned = Planned & { vips?: DesiredVips; adds?: Promise<unknown> };

export class AddressReconciler implements Reconciler<AddressesChecked, ObservedVips | undefined, AddressesPlanned> {
  readonly kind = 'addresses';
  /** A copy of the VIPs the last sync applied without an error: an incremental plan whose
   *  desired VIPs equal them neither dumps nor diffs them (a full plan always does, and so
   *  repairs what others changed in between). */
  private clean: DesiredVips | undefined;
  /** The VIPs last checked and their verdict: the invalid ones, and the VIPs without them. */
  private checked: { of: DesiredVips; invalid: InvalidObject[]; valid: DesiredVips } | undefined;

  constructor(private readonly links: LinksApi | undefined) {}

  /** Checks the VIPs (unless they are the ones last checked) and decides whether to read. */
  check({ desired: { vips }, changed }: PlanScope): AddressesChecked {
    if (!vips) return { invalid: [], want: undefined, vips, same: false };
    const same = changed !== undefined && this.clean !== undefined && samePlain(this.clean, vips);
    const c = this.checked && samePlain(this.checked.of, vips) ? this.checked : checkVips(vips);
    this.checked = c;
    const valid = vipLinkInvalid(vips) ? undefined : c.valid;
    return { invalid: c.invalid, want: valid && this.links && !same ? valid : undefined, vips, same };
  }

  /** The link and its addresses. */
  async observe(c: AddressesChecked): Promise<ObservedVips | undefined> {
    const want = c.want;
    if (!want) return undefined;
    const [link, addresses] = await Promise.all([this.links!.get(want.link), this.links!.addresses({ link: want.link }).catch(noLink)]);
    return { linkExists: link !== null, addresses };
  }

  diff(c: AddressesChecked, o: ObservedVips | undefined): AddressesPlanned {
    const out = { invalid: c.invalid, unchanged: c.same };
    return c.want ? { ...out, shown: { addresses: diffAddresses(c.want, o!) }, vips: c.vips } : { ...out, shown: {} };
  }

  /**
   * Early: the link first; its address adds then run on their own socket while the rest applies
   * (the kernel's cost of an IPv4 address add grows with the addresses already on the link: at
   * 10k VIPs they are the longest single step of a full sync), awaited in the main phase. Late:
   * the removals, after everything that may use the addresses.
   */
  async apply(phase: Phase, p: AddressesPlanned, report: SyncReport): Promise<void> {
    const d = p.shown.addresses;
    if (!d || !this.links) return;
    const run = (o: LinkOp[]) => this.links!.apply(o, { stopOnError: false });
    if (phase === 'early') {
      let split = 0;
      while (split < d.early.length && d.early[split]!.op !== 'addAddr') split++;
      await applyBatch(report.addresses, d.early, run, { to: split });
      p.adds = applyBatch(report.addresses, d.early, run, { from: split });
      p.adds.catch(() => undefined); // rethrown by the main phase's await, never unhandled before
    } else if (phase === 'main') await p.adds;
    else await applyBatch(report.addresses, d.late, run);
  }

  /** The VIPs applied are the base of the next incremental plans when no write failed. */
  settle(p: AddressesPlanned, report: SyncReport): void {
    if (p.vips) this.clean = report.addresses.errors.length ? undefined : { ...p.vips, addresses: [...p.vips.addresses] };
  }
}

/** The VIPs checked: the invalid ones (and the link, if it is), and the VIPs without them. */
function checkVips(vips: DesiredVips): { of: DesiredVips; invalid: InvalidObject[]; valid: DesiredVips } {
  const link = vipLinkInvalid(vips);
  if (link) return { of: vips, invalid: [link], valid: vips };
  const invalid: InvalidObject[] = [];
  const bad = new Set<number>();
  vips.addresses.forEach((a, i) => {
    const p = vipAddressProblem(a);
    if (!p) return;
    invalid.push(vipInvalid(vips.link, a, p));
    bad.add(i);
  });
  return { of: vips, invalid, valid: bad.size ? { ...vips, addresses: vips.addresses.filter((_, i) => !bad.has(i)) } : vips };
}

/** A missing link has no addresses (the plan creates it). */
function noLink(e: unknown): Array<{ address: string; prefixlen: number }> {
  if ((e as NetlinkError)?.code === 'ENODEV' || (e as NetlinkError)?.code === 'ENOENT') return [];
  throw e;
}
