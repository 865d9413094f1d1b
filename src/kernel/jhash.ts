// The kernel's jhash (include/linux/jhash.h, Bob Jenkins' lookup3), as nftables' `jhash`
// expression computes it over the registers of a rule: what ipvsync needs to know in advance
// which of a hash-dispatched rule's chains a key's packets reach.
import { endianness } from 'node:os';

const rol = (x: number, k: number) => (x << k) | (x >>> (32 - k));
/** Words are read in the CPU's byte order (__get_unaligned_cpu32); the tail bytes are not. */
const LE = endianness() === 'LE';

/** jhash(key, length, seed): of the key's first `length` bytes (all of them by default). */
export function jhash(k: Uint8Array, seed: number, length = k.length): number {
  let n = length;
  let a = (0xdeadbeef + n + seed) | 0;
  let b = a;
  let c = a;
  let o = 0;
  const word = (i: number) => (LE ? k[i]! | (k[i + 1]! << 8) | (k[i + 2]! << 16) | (k[i + 3]! << 24) : (k[i]! << 24) | (k[i + 1]! << 16) | (k[i + 2]! << 8) | k[i + 3]!);
  for (; n > 12; n -= 12, o += 12) {
    a = (a + word(o)) | 0;
    b = (b + word(o + 4)) | 0;
    c = (c + word(o + 8)) | 0;
    // __jhash_mix
    a = (a - c) | 0; a ^= rol(c, 4); c = (c + b) | 0;
    b = (b - a) | 0; b ^= rol(a, 6); a = (a + c) | 0;
    c = (c - b) | 0; c ^= rol(b, 8); b = (b + a) | 0;
    a = (a - c) | 0; a ^= rol(c, 16); c = (c + b) | 0;
    b = (b - a) | 0; b ^= rol(a, 19); a = (a + c) | 0;
    c = (c - b) | 0; c ^= rol(b, 4); b = (b + a) | 0;
  }
  if (n === 0) return c >>> 0;
  for (let i = n - 1; i >= 0; i--) {
    const v = k[o + i]! << ((i & 3) * 8);
    if (i >= 8) c = (c + v) | 0;
    else if (i >= 4) b = (b + v) | 0;
    else a = (a + v) | 0;
  }
  // __jhash_final
  c ^= b; c = (c - rol(b, 14)) | 0;
  a ^= c; a = (a - rol(c, 11)) | 0;
  b ^= a; b = (b - rol(a, 25)) | 0;
  c ^= b; c = (c - rol(b, 16)) | 0;
  a ^= c; a = (a - rol(c, 4)) | 0;
  b ^= a; b = (b - rol(a, 14)) | 0;
  c ^= b; c = (c - rol(b, 24)) | 0;
  return c >>> 0;
}

/** The kernel's reciprocal_scale: a 32-bit hash into [0, n). */
export function scale(h: number, n: number): number {
  return Math.floor((h * n) / 0x1_0000_0000);
}
