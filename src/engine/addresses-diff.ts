// VIP addresses on the engine's own link (kube-ipvs0): create the dummy link when missing, add
// the addresses that are wanted, remove its own that are not. Ownership is the address's
// protocol (IPVSYNC_ADDRESS_PROTOCOL, IFA_PROTO): the engine adds every VIP with it, and only
// addresses carrying it are ever deleted. Anything else on the link (the kernel's IPv6
// link-local, an address someone bound by hand) is never touched; a wanted VIP already there
// as such an address is bound, and stays when no longer wanted. Pure.
import { IPVSYNC_ADDRESS_PROTOCOL, IPVSYNC_LINK_ALIAS, type LinkOp } from '../kernel/links.js';
import { canonicalAddress, hostPrefix } from '../net/address.js';

export interface DesiredVips {
  /** The link the engine owns (created as a dummy if missing, unless createLink is false). */
  link: string;
  /** Addresses to bind, each as a host address (/32, /128). */
  addresses: string[];
  /** false: a missing link stays missing (what wants no VIPs, and removes its own from a link
   *  that is there: the nftables data plane after the IPVS one). Default true. */
  createLink?: boolean;
}

export interface ObservedVips {
  linkExists: boolean;
  /** Addresses on the link, with their IFA_PROTO (absent: 0). */
  addresses: Array<{ address: string; prefixlen: number; protocol?: number }>;
}

export interface AddressesDelta {
  /** Link creation (applied first), then address adds (applied alongside nftables and IPVS). */
  early: LinkOp[];
  /** Address removals: after IPVS stopped using them. */
  late: LinkOp[];
}

export function diffAddresses(desired: DesiredVips, observed: ObservedVips): AddressesDelta {
  const early: LinkOp[] = [];
  const late: LinkOp[] = [];
  if (!observed.linkExists) {
    if (desired.createLink === false) return { early, late };
    // the alias marks it as ipvsync's (cleanup deletes only such a link); the kernel takes an
    // alias on a link that exists, so in a request of its own
    early.push({ op: 'addLink', name: desired.link, kind: 'dummy' }, { op: 'setLink', name: desired.link, alias: IPVSYNC_LINK_ALIAS });
  }
  const want = new Set(desired.addresses.map(canonicalAddress));
  const have = new Set<string>();
  for (const a of observed.addresses) {
    const addr = canonicalAddress(a.address);
    if (a.protocol !== IPVSYNC_ADDRESS_PROTOCOL) {
      // Someone else's: the address is local all the same, so a wanted VIP is bound by it (an
      // add would be EEXIST for IPv6 whatever the prefix).
      if (want.has(addr)) have.add(addr);
      continue;
    }
    // Only the engine's host addresses count as its bound VIPs; its others go.
    if (a.prefixlen === hostPrefix(addr) && want.has(addr)) have.add(addr);
    else late.push({ op: 'delAddr', link: desired.link, address: `${addr}/${a.prefixlen}` });
  }
  for (const addr of [...want].sort()) {
    if (!have.has(addr)) early.push({ op: 'addAddr', link: desired.link, address: `${addr}/${hostPrefix(addr)}`, protocol: IPVSYNC_ADDRESS_PROTOCOL });
  }
  return { early, late };
}
