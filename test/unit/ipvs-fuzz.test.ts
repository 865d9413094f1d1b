// Seeded random and mutated replies through every IPVS decoder and random input through the
// rules parser: each either returns or throws its typed error; a crash takes the process down.
// (native/fuzz/ipvs_fuzz.cc is the coverage-guided libFuzzer + ASan harness, scripts/fuzz.sh.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { native } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import { parseRules, RulesParseError } from '../../src/formats/ipvsadm.js';
import { attr, nlmsg, prng, u16, u32 } from '../helpers/bytes.js';

const codec = native().codec.ipvs;
const SEED = Number(process.env.FUZZ_SEED ?? 0x1f5);
const ROUNDS = Number(process.env.FUZZ_ROUNDS ?? 20000);
const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'test', 'fixtures', 'ipvs');

const be16 = (v: number): Buffer => Buffer.from([v >> 8, v & 255]);
const genl = (cmd: number, ...a: Buffer[]): Buffer => nlmsg(0x1c, 2, 1, 0, Buffer.concat([Buffer.from([cmd, 1, 0, 0]), ...a]));
const stats64 = (t: number): Buffer => attr(t, Buffer.concat(Array.from({ length: 10 }, (_, i) => attr(i + 1, Buffer.alloc(8, i)))));

const seeds: Buffer[] = [
  genl(1, attr(1, Buffer.concat([attr(1, u16(2)), attr(2, u16(6)), attr(3, Buffer.alloc(16, 1)), attr(4, be16(80)), attr(6, Buffer.from('rr\0')), attr(7, Buffer.concat([u32(3), u32(~0)])), attr(8, u32(1)), attr(9, u32(~0)), stats64(10), stats64(12)]))),
  genl(5, attr(2, Buffer.concat([attr(1, Buffer.alloc(16, 2)), attr(2, be16(80)), attr(3, u32(2)), attr(4, u32(1)), attr(13, Buffer.from([1])), attr(14, be16(6080)), attr(15, u16(1)), attr(5, u32(0)), attr(6, u32(0)), attr(11, u16(10)), stats64(12)]))),
  genl(9, attr(3, Buffer.concat([attr(1, u32(1)), attr(2, Buffer.from('lo\0')), attr(3, u32(3)), attr(4, u16(1400)), attr(6, Buffer.alloc(16, 0xff))]))),
  genl(12, attr(4, u32(900)), attr(5, u32(120)), attr(6, u32(300))),
];

function mutate(rand: () => number, src: Buffer): Buffer {
  const b = Buffer.from(src);
  for (let i = 0, n = 1 + Math.floor(rand() * 4); i < n; i++) {
    const pos = Math.floor(rand() * b.length);
    const k = Math.floor(rand() * 3);
    if (k === 0) b[pos] = Math.floor(rand() * 256);
    else if (k === 1) b[pos] = b[pos]! ^ (1 << Math.floor(rand() * 8));
    else return b.subarray(0, pos);
  }
  return b;
}

test(`IPVS decoders survive ${ROUNDS} mutated replies (seed ${SEED})`, () => {
  const rand = prng(SEED);
  const decoders: Array<(b: Buffer) => unknown> = [codec.decodeService, (b) => codec.decodeDest(b, 'inet6'), codec.decodeDaemon, codec.decodeConfig, codec.decodeInfo];
  let accepted = 0;
  for (let i = 0; i < ROUNDS; i++) {
    const input = i % 4 === 3 ? Buffer.from(Array.from({ length: Math.floor(rand() * 120) }, () => Math.floor(rand() * 256))) : mutate(rand, seeds[i % seeds.length]!);
    for (const d of decoders) {
      try {
        d(input);
        accepted++;
      } catch (e) {
        if (!(e instanceof NetlinkError) || e.kind !== 'invalid') throw new Error(`round ${i}: ${String(e)}`);
      }
    }
  }
  assert.ok(accepted > 0, 'some mutated inputs still decode');
});

test(`the rules parser survives ${ROUNDS / 10} mutated rule files (seed ${SEED})`, () => {
  const rand = prng(SEED + 1);
  const base = readFileSync(join(FIXTURES, 'save-sample.txt'), 'utf8');
  const alphabet = ' -:[]0123456789abcdefmrstuwxyAEDCaedgipMb.,\n';
  let parsed = 0;
  for (let i = 0; i < ROUNDS / 10; i++) {
    const chars = [...base];
    for (let k = 0, n = 1 + Math.floor(rand() * 6); k < n; k++) chars[Math.floor(rand() * chars.length)] = alphabet[Math.floor(rand() * alphabet.length)]!;
    try {
      parseRules(chars.join(''));
      parsed++;
    } catch (e) {
      if (!(e instanceof RulesParseError)) throw new Error(`round ${i}: ${String(e)}`);
      assert.ok(e.line >= 1);
    }
  }
  assert.ok(parsed > 0);
});
