// The node's addresses for NodePorts, from the links' addresses: apart from the proxier so the
// daemon's thread can work them out without loading the proxier (with the proxier on its sync
// thread, the daemon's thread loads neither it nor the engine).
import { canonicalAddress, isLoopback } from '../net/address.js';
import type { Address } from '../kernel/links.js';

/** Every local address usable for NodePorts: all links but the VIP link, no IPv6 link-local,
 *  no loopback (the kernel will not send loopback-sourced traffic on to a pod, so a NodePort
 *  virtual server on 127.0.0.1 could never answer). */
export function nodeAddresses(addrs: readonly Address[], vipLink: string): string[] {
  const out = new Set<string>();
  for (const a of addrs) {
    if (a.link === vipLink) continue;
    if (isLoopback(a.address)) continue;
    if (a.family === 'inet6' && (a.scope === 'link' || a.address.toLowerCase().startsWith('fe80:'))) continue;
    out.add(canonicalAddress(a.address));
  }
  return [...out].sort();
}
