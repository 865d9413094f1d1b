// The kernel handles a proxier programs through, opened together (the CLI's sync and proxy, and
// the sync thread, each open their own).
import type { EngineKernel } from '../engine/engine.js';
import { Conntrack } from '../kernel/conntrack.js';
import { Ipvs } from '../kernel/ipvs.js';
import { IpSets } from '../kernel/ipsets.js';
import { Links } from '../kernel/links.js';
import { Nftables } from '../kernel/nftables.js';
import { Routes } from '../kernel/routes.js';
import type { HandleOptions } from '../native.js';
import { NetlinkError } from '../errors.js';

export interface KernelOptions {
  /** Open nftables (the glue). */
  glue: boolean;
  /** The nftables data plane: nftables always, IPVS only where the kernel has it (to remove
   *  what an IPVS-mode run left). */
  mode?: 'ipvs' | 'nftables';
}

export async function openKernel(h: HandleOptions, o: KernelOptions): Promise<EngineKernel> {
  if (o.mode === 'nftables') {
    const ipvs = await Ipvs.open(h).catch((e: unknown) => {
      if (e instanceof NetlinkError && e.kind === 'unsupported') return undefined;
      throw e;
    });
    return {
      ...(ipvs ? { ipvs, ipsets: await IpSets.open(h) } : {}),
      links: await Links.open(h),
      routes: await Routes.open(h),
      conntrack: await Conntrack.open(h),
      nft: await Nftables.open(h),
    };
  }
  const k: EngineKernel = {
    ipvs: await Ipvs.open(h),
    links: await Links.open(h),
    routes: await Routes.open(h),
    conntrack: await Conntrack.open(h),
    // always: kube-proxy's ipsets when asked for, and the engine's record of the virtual
    // servers it owns (engine/ownership.ts) in any case
    ipsets: await IpSets.open(h),
  };
  if (o.glue) k.nft = await Nftables.open(h);
  return k;
}
