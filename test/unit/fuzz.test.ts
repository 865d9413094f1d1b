// Seeded random and mutated inputs through every reply parser the addon exposes. A parser
// either returns or throws a NetlinkError; a crash takes the whole test process down.
// (native/fuzz has the coverage-guided libFuzzer + ASan harness run by scripts/fuzz.sh.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { native } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import { attr, nlmsg, prng, u32 } from '../helpers/bytes.js';

const codec = native().codec;
const SEED = Number(process.env.FUZZ_SEED ?? 0x1b5c);
const ROUNDS = Number(process.env.FUZZ_ROUNDS ?? 20000);

const parsers: Array<[string, (b: Buffer) => unknown]> = [
  ['parseAttributes', (b) => codec.parseAttributes(b, [1, 2, 3])],
  ['parseMessages', (b) => codec.parseMessages(b)],
  ['ipvs.decodeInfo', (b) => codec.ipvs.decodeInfo(b)],
  ['rtnl.decodeLink', (b) => codec.rtnl.decodeLink(b)],
];

const seeds: Buffer[] = [
  nlmsg(0x20, 0, 1, 0, Buffer.concat([Buffer.from([15, 1, 0, 0]), attr(1, u32(0x010201)), attr(2, u32(4096))])),
  nlmsg(2, 0x300, 1, 0, Buffer.concat([u32(-17), Buffer.alloc(16), attr(1, Buffer.from('x\0')), attr(2, u32(4))])),
  nlmsg(16, 2, 1, 0, Buffer.concat([Buffer.alloc(16), attr(3, Buffer.from('eth0\0')), attr(18 | 0x8000, attr(1, Buffer.from('veth\0')))])),
];

function mutate(rand: () => number, src: Buffer): Buffer {
  const b = Buffer.from(src);
  const edits = 1 + Math.floor(rand() * 4);
  for (let i = 0; i < edits; i++) {
    const pos = Math.floor(rand() * b.length);
    switch (Math.floor(rand() * 3)) {
      case 0:
        b[pos] = Math.floor(rand() * 256);
        break;
      case 1:
        b[pos] = b[pos]! ^ (1 << Math.floor(rand() * 8));
        break;
      default:
        return b.subarray(0, pos);
    }
  }
  return b;
}

test(`every reply parser survives ${ROUNDS} random and mutated inputs (seed ${SEED})`, () => {
  const rand = prng(SEED);
  let accepted = 0;
  let rejected = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const input =
      i % 2 === 0
        ? mutate(rand, seeds[i % seeds.length]!)
        : Buffer.from(Array.from({ length: Math.floor(rand() * 96) }, () => Math.floor(rand() * 256)));
    for (const [name, parse] of parsers) {
      try {
        parse(input);
        accepted++;
      } catch (e) {
        if (!(e instanceof NetlinkError) || e.kind !== 'invalid') {
          assert.fail(`${name} threw ${String(e)} on ${input.toString('hex')} (seed ${SEED}, round ${i})`);
        }
        rejected++;
      }
    }
  }
  // Both outcomes must occur, or the inputs did not exercise the parsers.
  assert.ok(accepted > 0 && rejected > 0, `accepted ${accepted}, rejected ${rejected}`);
});
