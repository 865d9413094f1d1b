// Small helpers for building netlink byte vectors by hand in tests.

/** Hex dump with spaces between bytes, for readable golden-byte diffs. */
export function hex(b: Buffer): string {
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join(' ');
}

/** Bytes from a hex string with arbitrary whitespace. */
export function fromHex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}

/** nlmsghdr + payload, little-endian as on x86. */
export function nlmsg(type: number, flags: number, seq: number, pid: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(16);
  h.writeUInt32LE(16 + payload.length, 0);
  h.writeUInt16LE(type, 4);
  h.writeUInt16LE(flags, 6);
  h.writeUInt32LE(seq, 8);
  h.writeUInt32LE(pid, 12);
  const pad = (4 - (payload.length % 4)) % 4;
  return Buffer.concat([h, payload, Buffer.alloc(pad)]);
}

/** One attribute (header + value + padding). */
export function attr(type: number, value: Buffer): Buffer {
  const h = Buffer.alloc(4);
  h.writeUInt16LE(4 + value.length, 0);
  h.writeUInt16LE(type, 2);
  const pad = (4 - (value.length % 4)) % 4;
  return Buffer.concat([h, value, Buffer.alloc(pad)]);
}

export function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v >>> 0, 0);
  return b;
}

export function u16(v: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(v, 0);
  return b;
}

/** Deterministic PRNG (mulberry32) so fuzz failures reproduce from the printed seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
