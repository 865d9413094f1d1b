// Seeded mutation fuzzing of a reply decoder from the unit suite: random byte flips and
// truncations of valid messages must either decode or be rejected as a NetlinkError of kind
// 'invalid' — never crash or throw anything else. (libFuzzer in native/fuzz goes further.)
import assert from 'node:assert/strict';
import { NetlinkError } from '../../src/errors.js';
import { prng } from './bytes.js';

export function mutationFuzz(seed: number, valid: (i: number) => Buffer, decode: (b: Buffer) => unknown, runs = 20000): void {
  const rand = prng(seed);
  let ok = 0;
  let rejected = 0;
  for (let i = 0; i < runs; i++) {
    let b = Buffer.from(valid(i));
    for (let k = 0; k < 1 + Math.floor(rand() * 3); k++) {
      const pos = Math.floor(rand() * b.length);
      if (rand() < 0.85) b[pos] = Math.floor(rand() * 256);
      else b = b.subarray(0, pos);
    }
    try {
      decode(b);
      ok++;
    } catch (e) {
      assert.ok(e instanceof NetlinkError && e.kind === 'invalid', String(e));
      rejected++;
    }
  }
  assert.ok(ok > 0 && rejected > 0, `${ok} accepted, ${rejected} rejected`);
}
