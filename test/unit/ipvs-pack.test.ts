// The packed form of IPVS ops (src/kernel/ipvs-pack.ts → native/ipvs/packed.cc), the only form
// apply() hands the addon: every value an op can hold packs, and the addon answers what the
// object path (its reader of the op objects, since removed) answered for the same batches —
// the same bytes, or the same op index and text (test/fixtures/ipvs/object-path-outcomes.json,
// captured from it), but for an array where an object goes, now refused. Malformed packed bytes are refused without reading past them.
// ipvs-codec.test.ts runs its golden fixtures and validation cases through the packed form.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { native } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import { PACKED_KEYS, packIpvsOps } from '../../src/kernel/ipvs-pack.js';
import { randomIpvsBatches } from '../helpers/ipvs-batches.js';

const codec = native().codec.ipvs;
const FAMILY = 0x1c;
const captured = JSON.parse(
  readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'test', 'fixtures', 'ipvs', 'object-path-outcomes.json'), 'utf8'),
) as { random: { seed: number; rounds: number; sha256: string }; values: Array<[string, string]> };

/** What encoding a batch gives: its bytes (hex), or its error's index, op and text. */
function outcome(ops: unknown[]): string {
  try {
    return Buffer.from(codec.encodeOps(packIpvsOps(ops), FAMILY)).toString('hex');
  } catch (e) {
    assert.ok(e instanceof NetlinkError, `a NetlinkError, got ${String(e)}`);
    assert.equal(e.kind, 'invalid');
    return `error #${e.index} ${e.op}: ${e.message}`;
  }
}

/** A batch of valid ops encodes as its ops one at a time, back to back. */
function asEachAlone(ops: unknown[]): void {
  const whole = outcome(ops);
  assert.ok(!whole.startsWith('error'), whole);
  assert.equal(whole, ops.map((o) => outcome([o])).join(''));
}

test('the writer and the addon name the same properties by the same key index', () => {
  assert.deepEqual([...PACKED_KEYS], codec.packedKeys);
});

test('destination ops sharing service objects: a back-reference for the same object only, across any op between', () => {
  const a = { protocol: 'tcp', address: '10.96.0.1', port: 80 };
  const b = { protocol: 'udp', address: '10.96.0.2', port: 53 };
  const a2 = { ...a }; // equal-looking, another object: written again
  const d = (service: object, ip: string, op = 'addDestination') => ({ op, service, dest: { address: ip, port: 8080, forward: 'masq', weight: 1 } });
  const ops = [
    { op: 'addService', service: a },
    d(a, '10.244.0.1'),
    d(a, '10.244.0.2'),
    { op: 'flush' },
    d(a, '10.244.0.3'),
    d(b, '10.244.0.4'),
    d(a2, '10.244.0.5'),
    d(a, '10.244.0.6', 'updateDestination'),
    { op: 'deleteDestination', service: a, dest: { address: '10.244.0.1', port: 8080 } },
    { op: 'deleteService', service: a },
  ];
  asEachAlone(ops);
  const packed = packIpvsOps(ops);
  // op, service: back-reference (tag 5), after every op whose service is the previous one's
  const refs = [...packed].filter((byte, i) => byte === 0x05 && packed[i - 1] === PACKED_KEYS.indexOf('service')).length;
  assert.ok(refs >= 4, `back-references: ${refs}`);
});

test('a batch larger than the writer\'s first buffer (64 KiB) packs whole, and the next batch starts clean', () => {
  const flush = outcome([{ op: 'flush' }]);
  const ops = [];
  for (let s = 0; s < 600; s++) {
    const service = { protocol: 'tcp', address: `10.96.${s >> 8}.${s & 255}`, port: 80 };
    ops.push({ op: 'addService', service: { ...service, scheduler: 'rr' } });
    for (let e = 0; e < 10; e++) ops.push({ op: 'addDestination', service, dest: { address: `10.${s >> 8}.${s & 255}.${e + 1}`, port: 8080, forward: 'masq', weight: 1 } });
  }
  const packed = packIpvsOps(ops);
  assert.ok(packed.length > 64 * 1024, `${packed.length} bytes`);
  asEachAlone(ops);
  assert.equal(outcome([{ op: 'flush' }]), flush, 'the next batch starts clean');
});

test('values of every type pack, and the addon answers as the object path did', () => {
  const svc = { protocol: 'tcp', address: '10.0.0.1', port: 80 };
  const dest = (d: Record<string, unknown>) => ({ op: 'addDestination', service: svc, dest: { address: '10.1.0.1', port: 80, ...d } });
  class Thing {
    op = 'flush';
  }
  const cases: Record<string, unknown> = {
    'a non-ASCII address': dest({ address: '10.1.0.1\u00e9' }),
    'a string over 255 characters': { op: 'addService', service: { ...svc, scheduler: 'r'.repeat(256) } },
    'a 300-character address': dest({ address: '1'.repeat(300) }),
    'a fractional port': dest({ port: 80.5 }),
    'a tiny fraction': dest({ weight: 1.5e-7 }),
    'a huge weight': dest({ weight: 1e21 }),
    'a fraction with many digits': dest({ port: 0.1 + 0.2 }),
    NaN: dest({ weight: NaN }),
    Infinity: dest({ weight: Infinity }),
    '-Infinity': dest({ upperThreshold: -Infinity }),
    'an unsafe integer': { op: 'deleteService', service: { fwmark: 2 ** 53 } },
    'a large unsafe integer': { op: 'deleteService', service: { fwmark: 2 ** 70 } },
    null: dest({ forward: null }),
    'null service for zero': { op: 'zero', service: null },
    'a string port': dest({ port: '80' }),
    'a boolean weight': dest({ weight: true }),
    'a bigint port': dest({ port: 80n }),
    'an object address': dest({ address: { ip: '10.1.0.1' } }),
    'an array address': dest({ address: ['10.1.0.1'] }),
    'flags not an array': { op: 'addService', service: { ...svc, flags: 'persistent' } },
    'a flag not a string': { op: 'addService', service: { ...svc, flags: [1] } },
    'an undefined flag': { op: 'addService', service: { ...svc, flags: [undefined] } },
    'a flag that is an array': { op: 'addService', service: { ...svc, flags: [['persistent']] } },
    '300 flags': { op: 'addService', service: { ...svc, flags: Array(300).fill('persistent') } },
    'a non-ASCII flag': { op: 'addService', service: { ...svc, flags: ['persistént'] } },
    'a service given as a string': { op: 'deleteService', service: '10.0.0.1:80' },
    'a service given as an array': { op: 'deleteService', service: [svc] },
    'a class instance as an op': new Thing(),
    'an array for an op': ['flush'],
    'a number for an op': 7,
    'null for an op': null,
    'a tunnel as an array': dest({ forward: 'tunnel', tunnel: ['gue'] }),
    'a tunnel as a string': dest({ forward: 'tunnel', tunnel: 'gue' }),
    'timeouts as a number': { op: 'setTimeouts', timeouts: 5 },
    'an op name that is a number': { op: 3 },
  };
  // Where the packed form answers otherwise, on purpose: the object path read an array where an
  // object goes as an object with no properties (a tunnel of `['gue']` was a tunnel of no type);
  // an array is refused there as any other value is, as the engine's own checks refuse it.
  const refusedNow: Record<string, string> = {
    'a service given as an array': 'error #1 deleteService: op 1 (deleteService): service must be an object',
    'an array for an op': 'error #1 apply: op 1 (apply): op must be an object',
    'a tunnel as an array': 'error #1 addDestination: op 1 (addDestination): tunnel must be an object',
  };
  assert.deepEqual(Object.keys(cases), captured.values.map(([what]) => what), 'a case for every captured outcome');
  for (const [what, was] of captured.values) assert.equal(outcome([{ op: 'flush' }, cases[what]]), refusedNow[what] ?? was, what);
  // and the writer is ready for the next batch
  asEachAlone([{ op: 'flush' }, dest({})]);
});

test('malformed packed bytes are refused (invalid, nothing encoded), never read past', () => {
  const good = packIpvsOps([{ op: 'addDestination', service: { protocol: 'tcp', address: '10.0.0.1', port: 80 }, dest: { address: '10.1.0.1', port: 80 } }]);
  const bad: Array<[string, Uint8Array]> = [
    ['truncated', good.subarray(0, good.length - 3)],
    ['cut inside a number', Uint8Array.from([0x03, 1, PACKED_KEYS.indexOf('port'), 0x02, 0, 0, 0])],
    ['unknown tag', Uint8Array.from([0x09])],
    ['unknown key', Uint8Array.from([0x03, 1, PACKED_KEYS.length, 0x01, 0, 0, 0, 0])],
    ['a back-reference first', Uint8Array.from([0x03, 1, PACKED_KEYS.indexOf('service'), 0x05])],
    ['a back-reference as another property', Uint8Array.from([0x03, 1, PACKED_KEYS.indexOf('dest'), 0x05])],
    ['nested too deep', Uint8Array.from([0x03, 1, 2, 0x03, 1, 19, 0x03, 1, 20, 0x03, 0])],
    ['a string running off the end', Uint8Array.from([0x01, 200, 0, 0, 0, 0x61])],
    ['a string length cut short', Uint8Array.from([0x01, 1, 0])],
    ['an array longer than the batch', Uint8Array.from([0x04, 0xff, 0xff, 0xff, 0xff, 0x06])],
  ];
  for (const [what, bytes] of bad) {
    assert.throws(
      () => codec.encodeOps(Uint8Array.from(bytes), FAMILY),
      (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && /malformed packed ops/.test(e.message),
      what,
    );
  }
  assert.throws(() => codec.encodeOps(new Uint16Array(4) as unknown as Uint8Array, FAMILY), (e: unknown) => e instanceof NetlinkError && /Uint8Array/.test(e.message));
  // an empty batch is an empty batch
  assert.equal(codec.encodeOps(new Uint8Array(0), FAMILY).length, 0);
});

// ---- random batches, valid and not: the object path's outcomes --------------------------------

const SEED = Number(process.env.FUZZ_SEED ?? captured.random.seed);
const ROUNDS = Number(process.env.FUZZ_ROUNDS ?? captured.random.rounds);

test(`random batches (${ROUNDS}) encode to the bytes, or fail at the op with the text, the object path gave`, () => {
  const h = createHash('sha256');
  let errors = 0;
  for (const ops of randomIpvsBatches(SEED, ROUNDS)) {
    const got = outcome(ops);
    h.update(got + '\n');
    if (got.startsWith('error')) errors++;
  }
  // both outcomes were exercised
  assert.ok(errors > ROUNDS / 10 && errors < ROUNDS, `${errors} of ${ROUNDS} batches failed validation`);
  if (SEED === captured.random.seed && ROUNDS === captured.random.rounds) assert.equal(h.digest('hex'), captured.random.sha256);
});
