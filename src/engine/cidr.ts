// CIDR parsing and membership for ownership rules (managed / excluded ranges).
import { isIP } from 'node:net';

export interface Cidr {
  family: 4 | 6;
  base: bigint;
  bits: number;
  /** IPv4: the network and its mask as unsigned 32-bit numbers (membership without BigInt, which
   *  costs ~1 µs an address: route mode checks every VIP against the service CIDRs each sync). */
  base4?: number;
  mask4?: number;
}

/** An IPv4 dotted quad as a number, or -1 (anything else, leading zeros too, as isIP() has
 *  it). No allocation: sorts and membership tests call this per element. */
export function ipv4Number(s: string): number {
  let n = 0;
  let octet = -1;
  let dots = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 46) {
      if (octet < 0 || ++dots > 3) return -1;
      n = n * 256 + octet;
      octet = -1;
    } else if (c >= 48 && c <= 57) {
      if (octet === 0) return -1; // a leading zero: not an address isIP() accepts
      octet = octet < 0 ? c - 48 : octet * 10 + (c - 48);
      if (octet > 255) return -1;
    } else return -1;
  }
  return dots === 3 && octet >= 0 ? n * 256 + octet : -1;
}

function toBig(address: string): { family: 4 | 6; value: bigint } | null {
  const f = isIP(address);
  if (f === 4) {
    const v = address.split('.').reduce((acc, p) => (acc << 8n) | BigInt(Number(p)), 0n);
    return { family: 4, value: v };
  }
  if (f === 6) {
    let text = address;
    // an embedded IPv4 tail (::ffff:1.2.3.4) becomes two hex groups
    const m = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
    if (m) {
      const v4 = toBig(m[1]!)!.value;
      text = text.slice(0, -m[1]!.length) + `${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
    }
    const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
    const h = head ? head.split(':') : [];
    const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
    const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
    const v = groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
    return { family: 6, value: v };
  }
  return null;
}

/** Parses "10.96.0.0/12", "fd00::/108" or a bare address (a /32 or /128). Throws on bad input. */
export function parseCidr(text: string): Cidr {
  const [addr, len] = text.split('/');
  const a = toBig(addr ?? '');
  if (!a) throw new RangeError(`not a CIDR: ${text}`);
  const max = a.family === 4 ? 32 : 128;
  const bits = len === undefined ? max : Number(len);
  if (!Number.isInteger(bits) || bits < 0 || bits > max) throw new RangeError(`bad prefix length in ${text}`);
  const shift = BigInt(max - bits);
  const base = (a.value >> shift) << shift;
  if (a.family === 6) return { family: 6, base, bits };
  const mask4 = bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
  return { family: 4, base, bits, base4: Number(base), mask4 };
}

export function cidrContains(c: Cidr, address: string): boolean {
  if (c.base4 !== undefined) {
    const n = ipv4Number(address);
    return n >= 0 && ((n & c.mask4!) >>> 0) === c.base4;
  }
  const a = toBig(address);
  if (!a || a.family !== c.family) return false;
  const shift = BigInt((c.family === 4 ? 32 : 128) - c.bits);
  return (a.value >> shift) << shift === c.base;
}

export function anyContains(cidrs: readonly Cidr[], address: string): boolean {
  return cidrs.some((c) => cidrContains(c, address));
}

/** The network address of a CIDR as text ("10.1.2.3/16" -> "10.1.0.0"), canonical for IPv6. */
export function networkText(c: Cidr): string {
  if (c.family === 4) return [24n, 16n, 8n, 0n].map((s) => String((c.base >> s) & 255n)).join('.');
  const groups: string[] = [];
  for (let i = 7; i >= 0; i--) groups.push(((c.base >> BigInt(i * 16)) & 0xffffn).toString(16));
  const full = groups.join(':');
  // the longest run of zero groups (two or more) becomes "::"
  let best = { at: -1, len: 0 };
  for (let i = 0; i < 8; ) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > best.len) best = { at: i, len: j - i };
    i = j;
  }
  if (best.len < 2) return full;
  return `${groups.slice(0, best.at).join(':')}::${groups.slice(best.at + best.len).join(':')}`;
}
