// Canonical forms of IPVS objects, so desired state (as a caller writes it, with defaults left
// out) and observed state (as the kernel reports it, everything filled in) compare exactly.
import { canonicalAddress, familyOf } from '../net/address.js';
import type {
  AddressFamily,
  Destination,
  DestinationConfig,
  ForwardMethod,
  AddressServiceId,
  FwmarkServiceId,
  Service,
  ServiceConfig,
  ServiceFlag,
  ServiceId,
  TunnelOptions,
} from '../kernel/ipvs.js';

/** A virtual service the caller wants, with the real servers it wants behind it. */
export type DesiredService = ServiceConfig & { destinations: DestinationConfig[] };

/** Identity key: "inet|tcp|10.0.0.1|80" or "inet|fwmark|7". */
export function serviceKey(s: ServiceId | Service): string {
  if ('fwmark' in s && s.fwmark !== undefined) return `${s.family ?? 'inet'}|fwmark|${s.fwmark}`;
  const a = s as { protocol: string; address: string; port: number; family?: AddressFamily };
  const addr = canonicalAddress(a.address);
  return `${a.family ?? familyOf(addr)}|${a.protocol}|${addr}|${a.port}`;
}

/** A service's identity as its key holds it: the family always set, the address canonical. */
export type KernelServiceId = (AddressServiceId | FwmarkServiceId) & { family: AddressFamily };

/** serviceKey() back to the service's id (the incremental path's GETs; the diff's removals
 *  and deletes of kernel services, which it keeps by key). */
export function keyToId(key: string): KernelServiceId {
  const [family, proto, a, b] = key.split('|') as [string, string, string, string | undefined];
  const fam = family === 'inet6' ? 'inet6' : 'inet';
  if (proto === 'fwmark') return { family: fam, fwmark: Number(a) };
  return { family: fam, protocol: proto as 'tcp' | 'udp' | 'sctp', address: a, port: Number(b) };
}

/** Destination key within a service: "10.1.0.5|8080" or "[fd00::5]|8080". */
export function destKey(d: { address: string; port: number }): string {
  const a = canonicalAddress(d.address);
  return `${familyOf(a) === 'inet6' ? `[${a}]` : a}|${d.port}`;
}

// Flag names map onto kernel bits; sh-/mh-/flag-N share bits, so compare bits, not names.
const FLAG_BITS: Record<ServiceFlag, number> = {
  persistent: 0x1,
  'one-packet': 0x4,
  'sh-fallback': 0x8,
  'mh-fallback': 0x8,
  'flag-1': 0x8,
  'sh-port': 0x10,
  'mh-port': 0x10,
  'flag-2': 0x10,
  'flag-3': 0x20,
};

export function flagBits(flags: readonly ServiceFlag[] | undefined): number {
  let b = 0;
  for (const f of flags ?? []) b |= FLAG_BITS[f];
  return b;
}

export interface ServiceShape {
  scheduler: string;
  flags: number;
  timeout: number;
  netmask: string;
  pe: string;
}

/** The options that SET_SERVICE can change, with the façade's defaults filled in. */
export function serviceShape(s: ServiceConfig | Service): ServiceShape {
  const flags = flagBits(s.flags);
  const v6 = (s.family ?? ('address' in s && s.address ? familyOf(s.address) : 'inet')) === 'inet6';
  const netmask = s.netmask ?? (v6 ? 128 : '255.255.255.255');
  return {
    scheduler: s.scheduler ?? 'wlc',
    flags,
    timeout: s.timeout ?? (flags & 0x1 ? 360 : 0),
    netmask: String(netmask),
    pe: s.pe ?? '',
  };
}

function tunnelText(forward: ForwardMethod, t: TunnelOptions | undefined): string {
  if (forward !== 'tunnel' || !t) return '';
  return `${t.type}|${t.port ?? 0}|${t.checksum ?? 'none'}`;
}

/** Whether SET_DEST would change nothing between a and b: the options it can change, with
 *  defaults filled in (forwarding droute, weight 1, thresholds 0), compare equal. */
export function sameDestShape(a: DestinationConfig | Destination, b: DestinationConfig | Destination): boolean {
  const forward = a.forward ?? 'droute';
  return (
    forward === (b.forward ?? 'droute') &&
    (a.weight ?? 1) === (b.weight ?? 1) &&
    (a.upperThreshold ?? 0) === (b.upperThreshold ?? 0) &&
    (a.lowerThreshold ?? 0) === (b.lowerThreshold ?? 0) &&
    (forward !== 'tunnel' || tunnelText(forward, a.tunnel) === tunnelText(forward, b.tunnel))
  );
}

export function sameShape<T extends object>(a: T, b: T): boolean {
  for (const k of Object.keys(a) as Array<keyof T>) if (a[k] !== b[k]) return false;
  return true;
}

/** Deep equality of plain data (objects, arrays, primitives); undefined members count as
 *  absent, as they would in JSON. No serialisation: this runs on every service every sync. */
export function samePlain(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!samePlain(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  let n = 0;
  for (const k in x) {
    if (x[k] === undefined) continue;
    n++;
    if (!samePlain(x[k], y[k])) return false;
  }
  for (const k in y) if (y[k] !== undefined) n--;
  return n === 0;
}
