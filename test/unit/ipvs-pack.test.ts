// The packed form of IPVS ops (src/kernel/ipvs-pack.ts → native/ipvs/packed.cc): the addon
// reads it with the code that reads the op objects, so a batch must encode to the same bytes,
// or fail with the same op index and text, in either form. What cannot be packed exactly is
// not (the objects go instead); malformed packed bytes are refused without reading past them.
// ipvs-codec.test.ts runs its golden fixtures and validation cases through both forms too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { native } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import { PACKED_KEYS, packIpvsOps } from '../../src/kernel/ipvs-pack.js';
import { hex, prng } from '../helpers/bytes.js';

const codec = native().codec.ipvs;
const FAMILY = 0x1c;

/** What encoding a batch gives: its bytes, or its error's index, op and text. */
function outcome(form: unknown[] | Uint8Array): string {
  try {
    return hex(codec.encodeOps(form, FAMILY));
  } catch (e) {
    assert.ok(e instanceof NetlinkError, `a NetlinkError, got ${String(e)}`);
    assert.equal(e.kind, 'invalid');
    return `error #${e.index} ${e.op}: ${e.message}`;
  }
}

function samePacked(ops: unknown[]): void {
  const packed = packIpvsOps(ops);
  assert.ok(packed, `packs: ${JSON.stringify(ops).slice(0, 200)}`);
  assert.equal(outcome(packed), outcome(ops), JSON.stringify(ops).slice(0, 400));
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
  samePacked(ops);
  const packed = packIpvsOps(ops)!;
  // op, service: back-reference (tag 5), after every op whose service is the previous one's
  const refs = [...packed].filter((byte, i) => byte === 0x05 && packed[i - 1] === PACKED_KEYS.indexOf('service')).length;
  assert.ok(refs >= 4, `back-references: ${refs}`);
});

test('a batch larger than the writer\'s first buffer (64 KiB) packs whole, and the next batch starts clean', () => {
  const ops = [];
  for (let s = 0; s < 600; s++) {
    const service = { protocol: 'tcp', address: `10.96.${s >> 8}.${s & 255}`, port: 80 };
    ops.push({ op: 'addService', service: { ...service, scheduler: 'rr' } });
    for (let e = 0; e < 10; e++) ops.push({ op: 'addDestination', service, dest: { address: `10.${s >> 8}.${s & 255}.${e + 1}`, port: 8080, forward: 'masq', weight: 1 } });
  }
  const packed = packIpvsOps(ops)!;
  assert.ok(packed.length > 64 * 1024, `${packed.length} bytes`);
  assert.equal(outcome(packed), outcome(ops));
  samePacked([{ op: 'flush' }]);
});

test('what cannot be packed exactly is not: the caller sends the objects, which report it', () => {
  const svc = { protocol: 'tcp', address: '10.0.0.1', port: 80 };
  const dest = (d: Record<string, unknown>) => ({ op: 'addDestination', service: svc, dest: { address: '10.1.0.1', port: 80, ...d } });
  const unpackable: Array<[string, unknown]> = [
    ['a non-ASCII address', dest({ address: '10.1.0.1\u00e9' })],
    ['a string over 255 characters', { op: 'addService', service: { ...svc, scheduler: 'r'.repeat(256) } }],
    ['a fractional port', dest({ port: 80.5 })],
    ['NaN', dest({ weight: NaN })],
    ['Infinity', dest({ weight: Infinity })],
    ['an unsafe integer', { op: 'deleteService', service: { fwmark: 2 ** 53 } }],
    ['null', dest({ forward: null })],
    ['a string port', dest({ port: '80' })],
    ['a boolean weight', dest({ weight: true })],
    ['flags not an array', { op: 'addService', service: { ...svc, flags: 'persistent' } }],
    ['a flag not a string', { op: 'addService', service: { ...svc, flags: [1] } }],
    ['a service given as a string', { op: 'deleteService', service: '10.0.0.1:80' }],
    ['an array for an op', ['flush']],
    ['a number for an op', 7],
    ['a tunnel as an array', dest({ forward: 'tunnel', tunnel: ['gue'] })],
  ];
  for (const [what, op] of unpackable) {
    assert.equal(packIpvsOps([{ op: 'flush' }, op]), undefined, what);
  }
  // Values the object path takes that the packed form cannot carry still convert as objects.
  assert.ok(codec.encodeOps([dest({ forward: null })], FAMILY).length > 0);
  // and the writer is ready for the next batch
  samePacked([{ op: 'flush' }, dest({})]);
});

test('malformed packed bytes are refused (invalid, nothing encoded), never read past', () => {
  const good = packIpvsOps([{ op: 'addDestination', service: { protocol: 'tcp', address: '10.0.0.1', port: 80 }, dest: { address: '10.1.0.1', port: 80 } }])!;
  const bad: Array<[string, Uint8Array]> = [
    ['truncated', good.subarray(0, good.length - 3)],
    ['cut inside a number', Uint8Array.from([0x03, 1, PACKED_KEYS.indexOf('port'), 0x02, 0, 0, 0])],
    ['unknown tag', Uint8Array.from([0x09])],
    ['unknown key', Uint8Array.from([0x03, 1, PACKED_KEYS.length, 0x01, 0])],
    ['a back-reference first', Uint8Array.from([0x03, 1, PACKED_KEYS.indexOf('service'), 0x05])],
    ['a back-reference as another property', Uint8Array.from([0x03, 1, PACKED_KEYS.indexOf('dest'), 0x05])],
    ['nested too deep', Uint8Array.from([0x03, 1, 2, 0x03, 1, 19, 0x03, 1, 20, 0x03, 0])],
    ['a string running off the end', Uint8Array.from([0x01, 200, 0x61])],
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

// ---- differential: random batches, valid and not, in both forms -----------------------------

const ROUNDS = Number(process.env.FUZZ_ROUNDS ?? 3000);

test(`random batches (${ROUNDS}) encode to the same bytes, or fail at the same op with the same text, in both forms`, () => {
  const rand = prng(Number(process.env.FUZZ_SEED ?? 0x9ac));
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const maybe = <T>(p: number, v: () => T): T | undefined => (rand() < p ? v() : undefined);
  const ints = [0, 1, 2, 80, 255, 256, 65535, 65536, -1, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 360, 129, 128, 24];
  const addrs = ['10.0.0.1', '10.96.1.2', 'fd00::1', '::1', '0.0.0.0', '10.0.0.256', 'nope', '', '224.0.0.81', 'ff02::1', '127.0.0.1'];
  const strs = ['rr', 'wlc', 'sh', 'mh', '', 'x'.repeat(16), 'sip', 'masq', 'tunnel', 'droute', 'local', 'nat', 'gue', 'gre', 'ipip', 'vxlan', 'csum', 'remcsum', 'none', 'inet', 'inet6', 'lo', 'master', 'backup'];
  const flags = ['persistent', 'one-packet', 'sh-fallback', 'sh-port', 'mh-fallback', 'mh-port', 'flag-1', 'flag-2', 'flag-3', 'sticky'];
  const service = (): Record<string, unknown> => {
    const s: Record<string, unknown> = {};
    if (rand() < 0.15) s.fwmark = pick(ints);
    if (rand() < 0.9) s.protocol = pick(['tcp', 'udp', 'sctp', 'icmp']);
    if (rand() < 0.9) s.address = pick(addrs);
    if (rand() < 0.9) s.port = pick(ints);
    if (rand() < 0.1) s.family = pick(['inet', 'inet6', 'ipx']);
    if (rand() < 0.6) s.scheduler = pick(strs);
    if (rand() < 0.2) s.flags = Array.from({ length: Math.floor(rand() * 3) }, () => pick(flags));
    if (rand() < 0.1) s.timeout = pick(ints);
    if (rand() < 0.1) s.netmask = rand() < 0.5 ? pick(ints) : pick(['255.255.255.0', '255.0.0.0', 'fd00::', 'mask']);
    if (rand() < 0.05) s.pe = pick(strs);
    return s;
  };
  const dest = (): Record<string, unknown> => {
    const d: Record<string, unknown> = {};
    if (rand() < 0.95) d.address = pick(addrs);
    if (rand() < 0.95) d.port = pick(ints);
    if (rand() < 0.05) d.family = pick(['inet', 'inet6']);
    if (rand() < 0.7) d.forward = pick(['masq', 'droute', 'tunnel', 'local', 'nat']);
    if (rand() < 0.6) d.weight = pick(ints);
    if (rand() < 0.1) d.upperThreshold = pick(ints);
    if (rand() < 0.1) d.lowerThreshold = pick(ints);
    if (rand() < 0.1) d.tunnel = { type: maybe(0.8, () => pick(['ipip', 'gue', 'gre', 'vxlan'])), port: maybe(0.5, () => pick(ints)), checksum: maybe(0.5, () => pick(['none', 'csum', 'remcsum', 'x'])) };
    return d;
  };
  let packedBatches = 0;
  let errors = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const services = Array.from({ length: 3 }, service);
    const ops: unknown[] = [];
    const n = 1 + Math.floor(rand() * 12);
    for (let i = 0; i < n; i++) {
      const kind = pick(['addService', 'updateService', 'deleteService', 'addDestination', 'addDestination', 'updateDestination', 'deleteDestination', 'flush', 'zero', 'setTimeouts', 'startDaemon', 'stopDaemon', 'bogus']);
      const svc = pick(services); // shared objects: back-references
      if (kind.endsWith('Service')) ops.push({ op: kind, service: svc });
      else if (kind.endsWith('Destination')) ops.push({ op: kind, service: svc, dest: dest() });
      else if (kind === 'zero') ops.push(rand() < 0.5 ? { op: kind } : { op: kind, service: svc });
      else if (kind === 'setTimeouts') ops.push({ op: kind, timeouts: { tcp: maybe(0.7, () => pick(ints)), tcpFin: maybe(0.5, () => pick(ints)), udp: maybe(0.5, () => pick(ints)) } });
      else if (kind.endsWith('Daemon'))
        ops.push({ op: kind, daemon: { state: pick(['master', 'backup', 'both']), interface: maybe(0.9, () => pick(strs)), syncId: maybe(0.3, () => pick(ints)), mcastGroup: maybe(0.3, () => pick(addrs)), mcastPort: maybe(0.3, () => pick(ints)), mcastTtl: maybe(0.3, () => pick(ints)), syncMaxLen: maybe(0.3, () => pick(ints)) } });
      else ops.push({ op: kind });
    }
    const packed = packIpvsOps(ops);
    assert.ok(packed, 'every generated batch packs (strings of ASCII, safe integers)');
    const want = outcome(ops);
    assert.equal(outcome(packed), want, JSON.stringify(ops));
    packedBatches++;
    if (want.startsWith('error')) errors++;
  }
  // both outcomes were exercised
  assert.ok(errors > ROUNDS / 10 && errors < ROUNDS, `${errors} of ${packedBatches} batches failed validation`);
});
