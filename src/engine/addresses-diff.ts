// VIP addresses on the engine's own link (kube-ipvs0): create the dummy link when missing, add
// the addresses that are wanted, remove the ones that are not. Pure.
import type { LinkOp } from '../kernel/links.js';
import { canonicalAddress, familyOf } from './ipvs-model.js';

export interface DesiredVips {
  /** The link the engine owns (created as a dummy if missing). */
  link: string;
  /** Addresses to bind, each as a host address (/32, /128). */
  addresses: string[];
}

export interface ObservedVips {
  linkExists: boolean;
  /** Addresses on the link as "addr/prefixlen". */
  addresses: Array<{ address: string; prefixlen: number }>;
}

export interface AddressesDelta {
  /** Link creation (applied first), then address adds (applied alongside nftables and IPVS). */
  early: LinkOp[];
  /** Address removals: after IPVS stopped using them. */
  late: LinkOp[];
}

export function hostPrefix(address: string): number {
  return familyOf(address) === 'inet6' ? 128 : 32;
}

export function diffAddresses(desired: DesiredVips, observed: ObservedVips): AddressesDelta {
  const early: LinkOp[] = [];
  const late: LinkOp[] = [];
  if (!observed.linkExists) early.push({ op: 'addLink', name: desired.link, kind: 'dummy' });
  const want = new Set(desired.addresses.map(canonicalAddress));
  const have = new Set<string>();
  for (const a of observed.addresses) {
    const addr = canonicalAddress(a.address);
    // Only host addresses count as bound VIPs; anything else on the link is not ours to keep.
    if (a.prefixlen === hostPrefix(addr) && want.has(addr)) have.add(addr);
    else late.push({ op: 'delAddr', link: desired.link, address: `${addr}/${a.prefixlen}` });
  }
  for (const addr of [...want].sort()) {
    if (!have.has(addr)) early.push({ op: 'addAddr', link: desired.link, address: `${addr}/${hostPrefix(addr)}` });
  }
  return { early, late };
}
