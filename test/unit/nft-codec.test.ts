// nftables codec without a kernel: encode -> decode round trips, message splitting, transaction
// splitting, malformed replies, datatype conversions, readable transaction rendering, and a
// seeded fuzz of every decoder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { native } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import { NftTransaction, PackedElements, type NftOp, type SetSpec } from '../../src/kernel/nftables.js';
import { canonicalExprs, renderData, type Expr } from '../../src/kernel/nft-expr.js';
import * as R from '../../src/kernel/nft-rules.js';
import {
  cidrRange, decodeKey, encodeKey, formatIPv6, keyTypeId, keyTypesFromId, parseIPv6, rangeToText,
} from '../../src/kernel/nft-types.js';
import { attr, nlmsg, prng, u32 } from '../helpers/bytes.js';

const codec = native().codec.nftables;
const F = R.F;

function split(batch: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let off = 0; off + 16 <= batch.length; ) {
    const len = batch.readUInt32LE(off);
    out.push(batch.subarray(off, off + len));
    off += (len + 3) & ~3;
  }
  return out;
}

/** The batches commit sends for these ops, every op acked. */
const encode = (tx: NftTransaction, opts: object = {}) => codec.encodeWire(tx.encoded(), { ackMode: 'all', ...opts });

const EVERY: Expr[] = [
  ...R.inSet([F.ipDaddr, F.l4proto, F.thDport], 's', { invert: true }),
  ...R.vmap([F.ip6Daddr, F.l4proto, F.thDport], 'm'),
  ...R.markMatch('ct', 0x4000),
  ...R.setMarkBits(0x4000),
  ...R.ctState('established', 'related'),
  ...R.ctDirection('reply'),
  ...R.fibDaddrType('local'),
  ...R.dnat('ip6', 'fd00::2', 8080),
  ...R.ctMarkFromMeta(),
  R.counter(),
  R.limit(10, 'minute', 3),
  R.log('svc '),
  R.masquerade({ fullyRandom: true, persistent: true }),
  R.reject('tcp-reset'),
  { type: 'payload', base: 'transport', offset: 2, len: 2, sreg: 1, csumType: 1, csumOffset: 16, csumFlags: 1 },
  { type: 'bitwise', sreg: 1, dreg: 1, op: 'lshift', len: 4, data: '08000000' },
  { type: 'ct', key: 'src', dreg: 1, direction: 'original' },
  { type: 'counter', bytes: 2 ** 40, packets: 7 },
  R.jump('next'),
];

test('every expression kind survives encode -> decode unchanged', () => {
  const tx = new NftTransaction().addRule({ family: 'ip6', table: 't', chain: 'c', exprs: EVERY, comment: 'all of them' });
  const [batch] = encode(tx);
  const msgs = split(batch!);
  const rule = codec.decodeRule(msgs[1]!);
  assert.equal(rule.family, 10);
  assert.equal(rule.table, 't');
  assert.equal(rule.chain, 'c');
  assert.equal(rule.comment, 'all of them');
  assert.deepEqual(canonicalExprs(rule.exprs as Expr[], { counters: true }), canonicalExprs(EVERY, { counters: true }));
});

test('an unknown expression from a dump is kept verbatim and re-encodes to the same bytes', () => {
  // A rule holding expression "quota" (no schema in ipvsync): NFTA_QUOTA_BYTES be64 + FLAGS be32.
  const name = attr(1, Buffer.from('quota\0'));
  const bytes = Buffer.alloc(8);
  bytes.writeBigUInt64BE(1000n);
  const data = attr(2 | 0x8000, Buffer.concat([attr(1, bytes), attr(2, Buffer.from([0, 0, 0, 1]))]));
  const elem = attr(1 | 0x8000, Buffer.concat([name, data]));
  const payload = Buffer.concat([Buffer.from([2, 0, 0, 0]), attr(1, Buffer.from('t\0')), attr(2, Buffer.from('c\0')), attr(4 | 0x8000, elem)]);
  const msg = nlmsg((10 << 8) | 6, 0, 0, 0, payload);
  const rule = codec.decodeRule(msg);
  assert.deepEqual(rule.exprs, [{ type: 'quota', unknown: [{ attr: 1, hex: '00000000000003e8' }, { attr: 2, hex: '00000001' }] }]);
  const [batch] = encode(new NftTransaction().addRule({ family: 'ip', table: 't', chain: 'c', exprs: rule.exprs as Expr[] }));
  const ours = split(batch!)[1]!;
  assert.equal(ours.subarray(20).toString('hex'), payload.subarray(4).toString('hex'));
});

test('bulk elements are split into NEWSETELEM messages whose element nest stays under 64 KiB', () => {
  const s: SetSpec = { family: 'ip', table: 't', name: 's', key: ['ipv4_addr', 'inet_proto', 'inet_service'] };
  const elements = Array.from({ length: 20_000 }, (_, i) => ({ key: [`10.0.${i >> 8}.${i & 255}`, 'tcp', 80] }));
  const [batch] = encode(new NftTransaction().addElements(s, elements));
  const msgs = split(batch!).slice(1, -1);
  assert.ok(msgs.length > 1, `${msgs.length} messages`);
  let total = 0;
  const seen: string[] = [];
  for (const m of msgs) {
    assert.ok(m.length < 65_535, `message of ${m.length} bytes`);
    const d = codec.decodeElements(m);
    total += d.elements.count;
    const { bytes } = d.elements;
    const p = new PackedElements(s, d.elements);
    for (let i = 0; i < d.elements.count; i++) seen.push(decodeKey(s.key, bytes, p.keyAt(i), p.keyLength(i)).join(' . '));
  }
  assert.equal(total, 20_000);
  assert.equal(seen[0], '10.0.0.0 . tcp . 80');
  assert.equal(seen[19_999], '10.0.78.31 . tcp . 80');
});

test('maxOpsPerTransaction: batches of bounded work, each framed BEGIN … END', () => {
  const s: SetSpec = { family: 'ip', table: 't', name: 's', key: ['ipv4_addr'] };
  const tx = new NftTransaction().addTable({ family: 'ip', name: 't' }).addSet(s);
  tx.addElements(s, Array.from({ length: 2500 }, (_, i) => ({ key: [`10.1.${i >> 8}.${i & 255}`] })));
  for (let i = 0; i < 10; i++) tx.addChain({ family: 'ip', table: 't', name: `c${i}` });
  const batches = encode(tx, { maxOpsPerTransaction: 1000 });
  assert.equal(batches.length, 3, '2 + 2500 + 10 units in transactions of at most 1000');
  let elements = 0;
  for (const b of batches) {
    const msgs = split(b);
    assert.equal(msgs[0]!.readUInt16LE(4), 0x10);
    assert.equal(msgs.at(-1)!.readUInt16LE(4), 0x11);
    let units = 0;
    for (const m of msgs.slice(1, -1)) {
      if ((m.readUInt16LE(4) & 0xff) === 12) {
        const n = codec.decodeElements(m).elements.count;
        elements += n;
        units += n;
      } else units += 1;
    }
    assert.ok(units <= 1000, `${units} units`);
  }
  assert.equal(elements, 2500);
});

test('every op asks for an ack; create adds NLM_F_EXCL; a genId goes into BATCH_BEGIN', () => {
  const tx = new NftTransaction().createTable({ family: 'inet', name: 'x' }).addChain({ family: 'inet', table: 'x', name: 'c' });
  const msgs = split(encode(tx)[0]!);
  assert.equal(msgs[1]!.readUInt16LE(6), 0x1 | 0x4 | 0x400 | 0x200, 'REQUEST|ACK|CREATE|EXCL');
  assert.equal(msgs[2]!.readUInt16LE(6), 0x1 | 0x4 | 0x400, 'REQUEST|ACK|CREATE');
  const g = split(encode(tx, { genId: 77 })[0]!);
  assert.equal(g[0]!.length, 28);
  assert.equal(g[0]!.readUInt32BE(24), 77, 'NFNL_BATCH_GENID');
});

test('bad ops are rejected before anything is encoded', () => {
  const rule = (exprs: unknown[], verb = 'add'): unknown => ({ verb, kind: 'rule', rule: { family: 'ip', table: 't', chain: 'c', exprs } });
  const bad: Array<[string, unknown]> = [
    ['unknown verb', { verb: 'upsert', kind: 'table', table: { family: 'ip', name: 't' } }],
    ['unknown family', { verb: 'add', kind: 'table', table: { family: 'arp', name: 't' } }],
    ['unknown expression', rule([{ type: 'nope' }])],
    ['register out of range', rule([{ type: 'meta', key: 'mark', dreg: 99 }])],
    ['data too long', rule([{ type: 'cmp', sreg: 1, op: 'eq', data: 'ab'.repeat(65) }])],
    ['jump without chain', rule([{ type: 'immediate', dreg: 0, verdict: { code: 'jump' } }])],
    ['replace without handle', rule([], 'replace')],
    ['empty key', { verb: 'add', kind: 'elements', set: { family: 'ip', table: 't', name: 's', key: ['ifname'] }, elements: [{ key: [''] }] }],
    ['NUL in a name', { verb: 'add', kind: 'table', table: { family: 'ip', name: 'a\0b' } }],
  ];
  for (const [why, op] of bad)
    assert.throws(
      () => encode(new NftTransaction().queue(op as NftOp)),
      (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid',
      why,
    );
});

test('malformed replies are typed errors, never crashes', () => {
  const rule = Buffer.concat([Buffer.from([2, 0, 0, 0]), attr(1, Buffer.from('t\0'))]);
  const cases: Array<[string, () => unknown]> = [
    ['wrong message type', () => codec.decodeRule(nlmsg((10 << 8) | 3, 0, 0, 0, rule))],
    ['no nfgenmsg', () => codec.decodeTable(nlmsg((10 << 8) | 0, 0, 0, 0, Buffer.alloc(2)))],
    ['truncated attribute', () => codec.decodeSet(nlmsg((10 << 8) | 9, 0, 0, 0, Buffer.concat([Buffer.from([2, 0, 0, 0]), Buffer.from([40, 0, 1, 0, 0x74])])))],
    ['u32 of the wrong size', () => codec.decodeChain(nlmsg((10 << 8) | 3, 0, 0, 0, Buffer.concat([Buffer.from([2, 0, 0, 0]), attr(5, Buffer.from([1, 2]))])))],
    ['expression without a name', () => codec.decodeRule(nlmsg((10 << 8) | 6, 0, 0, 0, Buffer.concat([rule, attr(4 | 0x8000, attr(1 | 0x8000, attr(2 | 0x8000, Buffer.alloc(0))))])))],
    ['gen without id', () => codec.decodeGen(nlmsg((10 << 8) | 15, 0, 0, 0, Buffer.from([0, 0, 0, 0])))],
    ['bad nlmsg_len', () => codec.decodeRule(Buffer.from([200, 0, 0, 0, 6, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]))],
  ];
  for (const [why, f] of cases)
    assert.throws(f, (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid', why);
  assert.equal(codec.decodeGen(nlmsg((10 << 8) | 15, 0, 0, 0, Buffer.concat([Buffer.from([0, 0, 0, 0]), attr(1, Buffer.from([0, 0, 1, 2]))]))), 258);
});

test('datatypes: concat type ids, IPv6 text, CIDR ranges, rendering', () => {
  assert.equal(keyTypeId(['ipv4_addr', 'inet_proto', 'inet_service']), 0x730d);
  assert.equal(keyTypeId(['ipv6_addr', 'inet_proto', 'inet_service']), 0x830d);
  assert.deepEqual(keyTypesFromId(0x730d, 12), ['ipv4_addr', 'inet_proto', 'inet_service']);
  assert.deepEqual(keyTypesFromId(0x13, 4), ['mark']);
  assert.equal(keyTypesFromId(0x3f, 4), undefined);
  for (const [s, canon] of [
    ['fd00::1', 'fd00::1'],
    ['2001:DB8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
    ['::', '::'],
    ['::ffff:10.1.2.3', '::ffff:a01:203'],
    ['1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8'],
  ])
    assert.equal(formatIPv6(parseIPv6(s!)), canon);
  for (const bad of ['1::2::3', '12345::', ':::', '1:2:3:4:5:6:7:8:9', 'g::1']) assert.throws(() => parseIPv6(bad), /IPv6/);
  const r = cidrRange('ipv4_addr', '10.0.0.0/8');
  assert.equal(r.start.toString('hex'), '0a000000');
  assert.equal(r.end!.toString('hex'), '0b000000');
  assert.equal(cidrRange('ipv4_addr', '255.255.255.0/24').end, undefined, 'top of the space: open end');
  assert.equal(rangeToText('ipv4_addr', r.start, r.end), '10.0.0.0/8');
  assert.equal(rangeToText('ipv4_addr', Buffer.from([10, 0, 0, 1]), Buffer.from([10, 0, 0, 5])), '10.0.0.1-10.0.0.4');
  assert.equal(rangeToText('ipv6_addr', cidrRange('ipv6_addr', 'fd00::/64').start, cidrRange('ipv6_addr', 'fd00::/64').end), 'fd00::/64');
  assert.deepEqual(decodeKey(['ifname', 'mark'], encodeKey(['ifname', 'mark'], ['veth1', 0x4000])), ['veth1', 0x4000]);
  assert.equal(renderData('06'), '0x00000006');
  assert.equal(renderData('0a00000106000000'), '0x0100000a 0x00000006');
});

test('a transaction renders readably for test diffs', () => {
  const s: SetSpec = { family: 'ip', table: 'p', name: 'svc', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict' };
  const tx = new NftTransaction()
    .addTable({ family: 'ip', name: 'p' })
    .addChain({ family: 'ip', table: 'p', name: 'pre', hook: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } })
    .addSet(s)
    .addElements(s, [{ key: ['10.96.0.1', 'tcp', 443], verdict: { code: 'goto', chain: 'svc-a' } }])
    .addRule({ family: 'ip', table: 'p', chain: 'pre', exprs: R.vmap([F.ipDaddr, F.l4proto, F.thDport], 'svc') })
    .deleteRule({ family: 'ip', table: 'p', chain: 'pre', handle: 4 });
  assert.equal(
    tx.toString(),
    [
      'add table ip p',
      'add chain ip p pre { type nat hook prerouting priority -100; policy accept; }',
      'add map ip p svc { type ipv4_addr . inet_proto . inet_service : verdict; }',
      'add element ip p svc { 10.96.0.1 . tcp . 443 : goto svc-a }',
      'add rule ip p pre',
      '  [ payload load 4b @ network header + 16 => reg 1 ]',
      '  [ meta load l4proto => reg 9 ]',
      '  [ payload load 2b @ transport header + 2 => reg 10 ]',
      '  [ lookup reg 1 set svc dreg 0 ]',
      'delete rule ip p pre handle 4',
    ].join('\n'),
  );
});

test('every nftables decoder survives seeded random and mutated input', () => {
  const rand = prng(Number(process.env.FUZZ_SEED ?? 0x5eed));
  const tx = new NftTransaction().addRule({ family: 'ip', table: 't', chain: 'c', exprs: EVERY });
  const seeds = split(encode(tx)[0]!).slice(1, -1);
  seeds.push(nlmsg((10 << 8) | 15, 0, 0, 0, Buffer.concat([Buffer.from([0, 0, 0, 0]), attr(1, u32(5))])));
  const decoders = [codec.decodeRule, codec.decodeChain, codec.decodeSet, codec.decodeElements, codec.decodeTable, codec.decodeGen];
  let accepted = 0;
  for (let i = 0; i < 5000; i++) {
    const src = seeds[i % seeds.length]!;
    const b = Buffer.from(src);
    for (let k = 0; k < 1 + Math.floor(rand() * 4); k++) b[Math.floor(rand() * b.length)] = Math.floor(rand() * 256);
    const cut = rand() < 0.3 ? b.subarray(0, Math.floor(rand() * b.length)) : b;
    for (const d of decoders) {
      try {
        d(cut);
        accepted++;
      } catch (e) {
        assert.ok(e instanceof NetlinkError && e.kind === 'invalid', String(e));
      }
    }
  }
  assert.ok(accepted > 0);
});
