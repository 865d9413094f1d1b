// The engine's VIP addresses on its own link: checked, observed (the link and its addresses),
// diffed (addresses-diff) and written, the address adds running while the rest of the sync
// applies; between syncs it keeps the VIPs last applied without an error and the last verdict.
import type { NetlinkError } from '../errors.js';
import type { LinkOp, LinksApi } from '../kernel/links.js';
import { diffAddresses, type AddressesDelta, type DesiredVips } from './addresses-diff.js';
import { applyBatch, settle, type KindReport, type Settled } from './apply-batch.js';
import type { InvalidObject } from './types.js';
import { samePlain } from './ipvs-model.js';
import { vipAddressProblem, vipInvalid, vipLinkInvalid } from './validate.js';

/** A plan's VIPs before the kernel is read. */
export interface AddressStart {
  invalid: InvalidObject[];
  /** The VIPs to observe and diff (undefined: none, or the ones last applied cleanly). */
  want: DesiredVips | undefined;
  /** Incremental, and the desired VIPs are the ones last applied cleanly. */
  same: boolean;
}

export class AddressReconciler {
  /** A copy of the VIPs the last sync applied without an error: an incremental plan whose
   *  desired VIPs equal them neither dumps nor diffs them (a full plan always does, and so
   *  repairs what others changed in between). */
  private clean: DesiredVips | undefined;
  /** The VIPs last checked and their verdict: the invalid ones, and the VIPs without them. */
  private checked: { of: DesiredVips; invalid: InvalidObject[]; valid: DesiredVips } | undefined;

  constructor(
    private readonly links: LinksApi | undefined,
    /** EngineOptions.desiredImmutable: keep the VIPs applied as they are, not a copy. */
    private readonly keepAsGiven = false,
  ) {}

  /** Checks the VIPs (unless they are the ones last checked) and decides whether to read. */
  start(vips: DesiredVips | undefined, incremental: boolean): AddressStart {
    if (!vips) return { invalid: [], want: undefined, same: false };
    const same = incremental && this.clean !== undefined && samePlain(this.clean, vips);
    const c = this.checked && samePlain(this.checked.of, vips) ? this.checked : checkVips(vips);
    this.checked = c;
    const valid = vipLinkInvalid(vips) ? undefined : c.valid;
    return { invalid: c.invalid, want: valid && this.links && !same ? valid : undefined, same };
  }

  /** The link and its addresses. */
  async observe(s: AddressStart): Promise<AddressesDelta | undefined> {
    const want = s.want;
    if (!want) return undefined;
    const [link, addrs] = await Promise.all([this.links!.get(want.link), this.links!.addresses({ link: want.link }).catch(noLink)]);
    return diffAddresses(want, { linkExists: link !== null, addresses: addrs });
  }

  /** The link first; its address adds then run on their own socket while the rest applies (the
   *  kernel's cost of an IPv4 address add grows with the addresses already on the link: at 10k
   *  VIPs they are the longest single step of a full sync). Returns the adds in flight, settled
   *  (a failure must not go unhandled while the rest applies: the caller rethrows it), in an
   *  object (a promise resolved with a promise would wait for it). */
  async applyEarly(delta: AddressesDelta | undefined, report: KindReport): Promise<{ adds?: Promise<Settled<unknown>> }> {
    if (!delta || !this.links) return {};
    const early = delta.early;
    let split = 0;
    while (split < early.length && early[split]!.op !== 'addAddr') split++;
    const run = (o: LinkOp[]) => this.links!.apply(o, { stopOnError: false });
    await applyBatch(report, early, run, { to: split });
    return { adds: settle(applyBatch(report, early, run, { from: split })) };
  }

  /** The removals, after everything that may use the addresses. */
  async applyLate(delta: AddressesDelta | undefined, report: KindReport): Promise<void> {
    if (delta && this.links) await applyBatch(report, delta.late, (o) => this.links!.apply(o, { stopOnError: false }));
  }

  /** After apply: the VIPs applied (as given: the ones left out stay out as long as the desired
   *  VIPs are these) are the base of the next incremental plans when no write failed. */
  settle(applied: DesiredVips | undefined, failed: boolean): void {
    if (applied) this.clean = failed ? undefined : this.keepAsGiven ? applied : structuredClone(applied);
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
