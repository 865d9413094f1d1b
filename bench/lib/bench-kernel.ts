// The kernel a benchmark's sync thread opens (SyncThreadOptions.kernelModule): the real handles,
// or with ?fake-ipvs=1 the in-memory IPVS converting every batch as the real handle does (the
// host kernel has no IPVS), as proxy-worker.ts --fake-ipvs builds it on its own thread.
import type { EngineKernel } from '../../src/engine/engine.js';
import { Conntrack } from '../../src/kernel/conntrack.js';
import { IpSets } from '../../src/kernel/ipsets.js';
import { Ipvs } from '../../src/kernel/ipvs.js';
import { Links } from '../../src/kernel/links.js';
import { Nftables } from '../../src/kernel/nftables.js';
import type { HandleOptions } from '../../src/native.js';
import type { KernelOptions } from '../../src/proxy/kernel.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';

/** The handles a benchmark's proxier programs through: the real ones but IPVS with `fakeIpvs`
 *  (the in-process worker's, and the sync thread's through openKernel below). */
export async function benchKernel(fakeIpvs: boolean, h: HandleOptions, o: KernelOptions): Promise<EngineKernel> {
  return {
    ipvs: fakeIpvs ? new FakeIpvs({ record: false, convert: true }) : await Ipvs.open(h),
    links: await Links.open(h),
    ...(o.glue ? { nft: await Nftables.open(h) } : {}),
    conntrack: await Conntrack.open(h),
    // as the proxy's kernel: the engine's ownership record is ipsets
    ipsets: await IpSets.open(h),
  };
}

const fake = new URL(import.meta.url).searchParams.get('fake-ipvs') === '1';

export function openKernel(h: HandleOptions, o: KernelOptions): Promise<EngineKernel> {
  return benchKernel(fake, h, o);
}
