// diffNftSteps run to its end on a listing that already has every set's elements, as a test
// builds one: each step answered with the listed set's `packed` elements where it has them
// (PackedElements.of, as the kernel sends them), else its decoded `elements`.
import { diffNftSteps, type DesiredNftTable, type NftDelta } from '../../src/engine/nft-diff.js';
import type { NftRuleset, PackedElements, SetInfo } from '../../src/kernel/nftables.js';

/** A listing whose sets may carry their elements packed. */
export type ListingWithElements = Omit<NftRuleset, 'sets'> & { sets: Array<SetInfo & { packed?: PackedElements }> };

export function diffNft(desired: DesiredNftTable, observed: ListingWithElements): NftDelta {
  const steps = diffNftSteps(desired, observed);
  for (let r = steps.next(); ; ) {
    if (r.done) return r.value;
    const set = r.value as SetInfo & { packed?: PackedElements };
    r = steps.next(set.packed ?? set.elements);
  }
}
