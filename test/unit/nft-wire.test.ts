// The op stream commit sends (src/kernel/nft-wire.ts -> native/nftables/wire.cc): for every op
// kind, verb, expression kind and element form, the batches the object path (the addon's second
// encoder, checked byte for byte against nft in nft-golden, since removed) produced for the same
// transactions (test/fixtures/nftables/object-path-batches.json); invalid-input errors; ack
// placement; mutated streams never crash.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { native } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import { NftTransaction, opChecker, type NftOp, type SetSpec } from '../../src/kernel/nftables.js';
import type { Expr } from '../../src/kernel/nft-expr.js';
import * as R from '../../src/kernel/nft-rules.js';
import { OpStreamWriter } from '../../src/kernel/nft-wire.js';
import { prng } from '../helpers/bytes.js';

const codec = native().codec.nftables;
type Captured = { batches: number; sha256: string };
const captured = JSON.parse(
  readFileSync(join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'test', 'fixtures', 'nftables', 'object-path-batches.json'), 'utf8'),
) as { everything: Record<string, Captured>; rawOps: Captured; big: Captured };

/** The batches as the fixture records them: how many, and the SHA-256 of them back to back. */
function digest(batches: Buffer[]): Captured {
  return { batches: batches.length, sha256: createHash('sha256').update(Buffer.concat(batches)).digest('hex') };
}
const F = R.F;
const T = 'ipvsync';
const NLM_F_ACK = 4;

/** The op stream of these ops queued one by one into a new transaction. */
function streamOf(ops: NftOp[]): Uint8Array {
  const tx = new NftTransaction();
  for (const op of ops) tx.queue(op);
  return tx.encoded();
}

function split(batch: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let off = 0; off + 16 <= batch.length; ) {
    const len = batch.readUInt32LE(off);
    out.push(batch.subarray(off, off + len));
    off += (len + 3) & ~3;
  }
  return out;
}

const svc4: SetSpec = { family: 'ip', table: T, name: 'svc', key: ['ipv4_addr', 'inet_proto', 'inet_service'] };
const vmap4: SetSpec = { family: 'ip', table: T, name: 'svcmap', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict' };
const cidr4: SetSpec = { family: 'ip', table: T, name: 'lb-src', key: ['ipv4_addr'], interval: true };
const cidr6: SetSpec = { family: 'ip6', table: T, name: 'lb-src6', key: ['ipv6_addr'], interval: true };
const stale: SetSpec = { family: 'ip', table: T, name: 'stale', key: ['ipv4_addr'], timeoutFlag: true };
const marks: SetSpec = { family: 'ip', table: T, name: 'marks', key: ['mark'], map: 'mark', comment: 'mark map' };
const ifs: SetSpec = { family: 'inet', table: T, name: 'ifs', key: ['ifname'], size: 64 };
const vmap6: SetSpec = { family: 'ip6', table: T, name: 'svc6', key: ['ipv6_addr', 'inet_proto', 'inet_service'], map: 'verdict', timeout: 5000 };
const chain = (name: string) => ({ family: 'ip' as const, table: T, name });
const ruleIn = (c: string, exprs: Expr[], comment?: string) => ({ family: 'ip' as const, table: T, chain: c, exprs, ...(comment ? { comment } : {}) });

function everything(): NftTransaction {
  return new NftTransaction()
    .addTable({ family: 'ip', name: T })
    .createTable({ family: 'inet', name: 'other' })
    .addChain(chain('svc-a'))
    .addChain({ ...chain('prerouting'), hook: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } })
    .addChain({ ...chain('forward'), hook: { type: 'filter', hook: 'forward', priority: 0 } })
    .createChain({ ...chain('out'), hook: { type: 'route', hook: 'output', priority: -150, policy: 'drop' } })
    .addSet(svc4).addSet(vmap4).addSet(cidr4).addSet(cidr6).addSet(stale).addSet(marks).addSet(ifs).addSet(vmap6)
    .addElements(svc4, [{ key: ['10.96.0.1', 'tcp', 443] }, { key: ['10.96.0.10', 'udp', 53] }])
    .addElements(vmap4, [{ key: ['10.96.0.1', 'tcp', 443], verdict: { code: 'goto', chain: 'svc-a' } }, { key: ['10.96.0.2', 'sctp', 1], verdict: { code: 'drop' } }])
    .addElements(cidr4, [{ key: ['10.0.0.0/8'] }, { key: ['192.168.1.0/24'] }, { key: ['172.16.0.1'] }])
    .addElements(cidr6, [{ key: ['fd00::/64'] }])
    .addElements(stale, [{ key: ['1.2.3.4'], timeout: 600_000, comment: 'stale udp' }])
    .addElements(marks, [{ key: [0x4000], data: 7 }])
    .addElements(ifs, [{ key: ['eth0'], comment: 'ünïcode' }])
    .createElements(vmap6, [{ key: ['fd00::1', 'tcp', 443], verdict: { code: 'jump', chain: 'svc-a' }, timeout: 1000 }])
    .deleteElements(svc4, [{ key: ['10.96.0.1', 'tcp', 443] }])
    .destroyElements(cidr4, [{ key: ['10.0.0.0/8'] }])
    .addRule(ruleIn('prerouting', R.vmap([F.ipDaddr, F.l4proto, F.thDport], 'svcmap')))
    .addRule(ruleIn('prerouting', R.rule(R.fibDaddrType('local'), R.jump('svc-a'))))
    .addRule(ruleIn('svc-a', R.rule(R.setMarkBits(0x4000)), 'mark for masquerade'))
    .addRule(ruleIn('svc-a', R.rule(R.match(F.ipSaddr, '10.244.0.0/16', 'neq'), R.match(F.ipSaddr, '10.244.0.0/15'), R.match(F.l4proto, 'tcp'), R.dnat('ip', '10.244.1.5', 8443))))
    .addRule(ruleIn('svc-a', R.rule(R.markMatch('ct', 0x4000), R.masquerade({ fullyRandom: true, persistent: true }))))
    .addRule(ruleIn('svc-a', R.rule(R.ctState('established', 'related'), R.ctStatus('dnat'), R.ctDirection('reply'), R.limit(5, 'minute'), R.log('x '), R.reject('tcp-reset'), R.counter(), R.accept())))
    .addRule(ruleIn('svc-a', R.rule(R.match(F.ip6Daddr, 'fd00::/63'), R.match(F.iifname, 'eth0'), R.match(F.nfproto, 'ipv6'), R.match(F.mark, 7), R.match(F.thDport, 80), R.snat('ip6', 'fd00::1', 99), R.setMark(1), R.ctMarkFromMeta(), R.ret())))
    .addRule(ruleIn('forward', R.rule(R.inSet([F.ipSaddr], 'lb-src', { invert: true }), R.counter(), R.drop())))
    .insertRule(ruleIn('forward', [R.accept()]), { before: 5 })
    .addRule(ruleIn('forward', [R.goTo('svc-a')]), { after: 3 })
    .replaceRule({ ...ruleIn('forward', [R.drop()]), handle: 7 })
    .deleteRule({ family: 'ip', table: T, chain: 'forward', handle: 9 })
    .destroyRule({ family: 'ip', table: T, chain: 'forward', handle: 10 })
    .addRule(ruleIn('forward', [
      { type: 'counter', bytes: 5, packets: 6 },
      { type: 'ct', key: 'mark', sreg: 1 },
      { type: 'ct', key: 'src', dreg: 1, direction: 'original' },
      { type: 'meta', key: 'mark', dreg: 1 },
      { type: 'payload', base: 'transport', offset: 2, len: 2, sreg: 1, csumType: 1, csumOffset: 16, csumFlags: 1 },
      { type: 'bitwise', sreg: 1, dreg: 1, op: 'lshift', len: 4, data: '08000000' },
      { type: 'lookup', sreg: 1, set: 'svc', setId: 3 },
      { type: 'log', group: 2, snaplen: 64, qthreshold: 1, flags: 0 },
      { type: 'nat', nat: 'dnat', family: 'ip', addrMin: 1, addrMax: 1, protoMin: 2, protoMax: 2, flags: 0x2 },
      { type: 'masq', flags: 0x4, protoMin: 1, protoMax: 2 },
    ]))
    .flushChain(chain('svc-a')).flushSet(svc4).flushTable({ family: 'ip', name: T })
    .deleteChain(chain('svc-a')).destroyChain(chain('gone')).deleteSet(vmap4).destroySet(stale)
    .deleteTable({ family: 'inet', name: 'other' }).destroyTable({ family: 'ip', name: 'x' });
}

test('the op stream encodes every op kind, verb, expression and element form to the captured batches', () => {
  const tx = everything();
  for (const opts of [{}, { maxOpsPerTransaction: 5 }, { maxOpsPerTransaction: 1 }, { genId: 5 }])
    assert.deepEqual(digest(codec.encodeWire(tx.encoded(), { ...opts, ackMode: 'all' })), captured.everything[JSON.stringify(opts)], JSON.stringify(opts));
  // ops queued as data (as a plan holds them) and expressions kept verbatim from a dump
  const ops: NftOp[] = [
    ...tx.ops,
    { verb: 'add', kind: 'rule', rule: ruleIn('c', [{ type: 'foo', unknown: [{ attr: 1, hex: '0001' }, { attr: 2, hex: '' }] } as unknown as Expr, { type: 'cmp', sreg: 1, op: 'eq', data: '01', unknown: [{ attr: 9, hex: 'ab' }] } as unknown as Expr]) },
  ];
  assert.deepEqual(digest(codec.encodeWire(streamOf(ops), { ackMode: 'all' })), captured.rawOps);
});

test('100k elements and a 30k-rule table: the captured bytes', () => {
  const s: SetSpec = { family: 'ip', table: T, name: 'big', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict' };
  const tx = new NftTransaction().addTable({ family: 'ip', name: T }).addSet(s);
  const els = Array.from({ length: 100_000 }, (_, i) => ({ key: [`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, i % 2 ? 'udp' : 'tcp', 1 + (i % 60000)], verdict: { code: 'goto' as const, chain: `c${i % 100}` } }));
  tx.addElements(s, els);
  for (let i = 0; i < 10_000; i++)
    tx.addRule(ruleIn(`c${i}`, R.rule(R.match(F.ipSaddr, '10.244.0.0/16', 'neq'), R.setMarkBits(0x4000))))
      .addRule(ruleIn(`c${i}`, R.rule(R.counter(), R.match(F.l4proto, 'tcp'), R.dnat('ip', `10.244.${i >> 8}.${i & 255}`, 8080))))
      .addRule(ruleIn(`c${i}`, [R.drop()]));
  assert.deepEqual(digest(codec.encodeWire(tx.encoded(), { ackMode: 'all' })), captured.big);
});

test('a set created in the transaction is named by its id too; an existing one by name only', () => {
  const s: SetSpec = { family: 'ip', table: T, name: 'fresh', key: ['ipv4_addr'] };
  const msgs = split(codec.encodeWire(new NftTransaction().addSet(s).addElements(s, [{ key: ['10.0.0.1'] }]).addElements(svc4, [{ key: ['10.0.0.1', 'tcp', 80] }]).encoded())[0]!);
  const attr = (m: Buffer, type: number) => native().codec.parseAttributes(m.subarray(20)).find((a) => a.type === type)?.data.readUInt32BE(0);
  assert.equal(attr(msgs[1]!, 10), 1, 'NFTA_SET_ID of the new set');
  assert.equal(attr(msgs[2]!, 4), 1, 'its elements: NFTA_SET_ELEM_LIST_SET_ID');
  assert.equal(attr(msgs[3]!, 4), undefined, 'an existing set: no id');
});

test("ackMode: an ack on every op, on each transaction's last op only, or none", () => {
  const tx = everything();
  const flags = (opts: object) =>
    codec.encodeWire(tx.encoded(), opts).map((b) => split(b).map((m) => (m.readUInt16LE(6) & NLM_F_ACK) !== 0));
  for (const batch of flags({ ackMode: 'all' })) assert.deepEqual(batch, batch.map((_, i) => i > 0 && i < batch.length - 1));
  for (const batch of flags({ ackMode: 'none' })) assert.ok(batch.every((x) => !x));
  const last = flags({ ackMode: 'last', maxOpsPerTransaction: 7 });
  assert.ok(last.length > 1);
  for (const batch of last) assert.deepEqual(batch, batch.map((_, i) => i === batch.length - 2), 'only the message before BATCH_END');
  assert.throws(() => codec.encodeWire(tx.encoded(), { ackMode: 'some' as 'all' }), /ackMode/);
});

test('opChecker throws what queueing an op throws, and a checked op leaves nothing behind', () => {
  const check = opChecker();
  const s: SetSpec = { family: 'ip', table: T, name: 'fresh', key: ['ipv4_addr'] };
  const ops: NftOp[] = [
    { verb: 'add', kind: 'set', set: s },
    { verb: 'add', kind: 'elements', set: s, elements: Array.from({ length: 300 }, (_, i) => ({ key: [`10.0.${i >> 8}.${i & 255}`] })) },
    { verb: 'add', kind: 'elements', set: svc4, elements: [{ key: ['10.0.0.1', 'tcp', 80] }] },
    { verb: 'add', kind: 'elements', set: svc4, elements: [{ key: ['10.0.0.1', 'tcp', 70000] }] },
    { verb: 'add', kind: 'elements', set: s, elements: [{ key: ['10.0.0.1'] }, { key: ['not an address'] }] },
    { verb: 'add', kind: 'rule', rule: ruleIn('c', Array(129).fill(R.accept())) },
  ];
  let refused = 0;
  for (const op of ops) {
    let want: unknown;
    try {
      new NftTransaction().queue(op);
    } catch (e) {
      want = e;
    }
    let got: unknown;
    try {
      check(op);
    } catch (e) {
      got = e;
    }
    assert.equal(got instanceof NetlinkError, want instanceof NetlinkError, JSON.stringify(op).slice(0, 80));
    if (want instanceof NetlinkError) {
      refused++;
      assert.deepEqual([(got as NetlinkError).message, (got as NetlinkError).member], [want.message, want.member]);
    }
  }
  assert.equal(refused, 3, 'the port, the address and the rule refused');
});

test('OpStreamWriter.check: the stream after it is as if the op had not been written (bytes, set ids, op count)', () => {
  const s: SetSpec = { family: 'ip', table: T, name: 'fresh', key: ['ipv4_addr'] };
  const table: NftOp = { verb: 'add', kind: 'table', table: { family: 'ip', name: T } };
  const elements: NftOp = { verb: 'add', kind: 'elements', set: s, elements: [{ key: ['10.0.0.1'] }] };
  const w = new OpStreamWriter(64);
  w.write(table);
  w.check({ verb: 'add', kind: 'set', set: s });
  w.check(elements);
  assert.throws(() => w.check({ ...elements, elements: [{ key: ['nope'] }] }), NetlinkError);
  w.write(elements);
  assert.equal(w.count, 2);
  // had the set stayed, its elements would name it by its id
  assert.deepEqual(Buffer.from(w.result()), Buffer.from(streamOf([table, elements])));
});

test('bad input through the op stream: typed errors naming the op and the field', () => {
  const bad: Array<[Expr[], string]> = [
    [[{ type: 'cmp', sreg: 1, op: 'eq', data: 'zz' }], 'cmp.data: not a hex string'],
    [[{ type: 'cmp', sreg: 1, op: 'eq', data: 'abc' }], 'cmp.data: odd-length hex string'],
    [[{ type: 'cmp', sreg: 1, op: 'eq', data: '' }], 'cmp.data must not be empty'],
    [[{ type: 'cmp', sreg: 1, op: 'eq', data: '00'.repeat(65) }], 'cmp.data is longer than 64 bytes'],
    [[{ type: 'meta', key: 'bogus', dreg: 1 } as unknown as Expr], 'meta.key: unknown value bogus'],
    [[{ type: 'meta', key: 'mark', dreg: 99 }], 'meta.dreg must be an integer in 0..23'],
    [[{ type: 'meta', key: 'mark', dreg: 1.5 }], 'meta.dreg must be an integer in 0..23'],
    [[{ type: 'meta', key: 'mark', dreg: -1 }], 'meta.dreg must be an integer in 0..23'],
    [[{ type: 'meta', key: 'mark', dreg: '1' as unknown as number }], 'meta.dreg must be a number'],
    [[{ type: 'immediate', dreg: 0, verdict: { code: 'bogus' as 'accept' } }], 'unknown verdict bogus'],
    [[{ type: 'immediate', dreg: 0, verdict: { code: 'accept', chain: 'x' } }], 'only jump and goto take a chain'],
    [[{ type: 'immediate', dreg: 0, data: '01', verdict: { code: 'accept' } }], 'immediate takes data or verdict, not both'],
    [[{ type: 'lookup', sreg: 1, set: 's', invert: 1 as unknown as boolean }], 'lookup.invert must be a boolean'],
    [[{ type: 'nope' } as unknown as Expr], 'unknown expression type nope'],
    [[{ type: 'payload', base: 'network', offset: 2 ** 32, len: 1, dreg: 1 }], 'payload.offset must be an integer in 0..4294967295'],
  ];
  for (const [exprs, why] of bad) {
    const ops: NftOp[] = [{ verb: 'add', kind: 'rule', rule: ruleIn('c', exprs) }];
    assert.throws(
      () => codec.encodeWire(streamOf(ops)),
      (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && e.message === `nftables op 0: ${why}`,
      JSON.stringify(exprs),
    );
  }
  const badOps: NftOp[][] = [
    [{ verb: 'add', kind: 'rule', rule: ruleIn('c', Array(129).fill(R.accept())) }],
    [{ verb: 'add', kind: 'rule', rule: { ...ruleIn('c', [R.accept()]), table: 'x'.repeat(300) } }],
    [{ verb: 'add', kind: 'chain', chain: { family: 'ip', table: T, name: 'a\0b' } }],
    [{ verb: 'add', kind: 'table', table: { family: 'arp' as 'ip', name: 'x' } }],
    [{ verb: 'bogus' as 'add', kind: 'table', table: { family: 'ip', name: 'x' } }],
    [{ verb: 'add', kind: 'rule', rule: { ...ruleIn('c', [R.accept()]), comment: 'x'.repeat(200) } }],
  ];
  for (const ops of badOps)
    assert.throws(() => codec.encodeWire(streamOf(ops)), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid', JSON.stringify(ops).slice(0, 80));
});

test('a rule whose expressions pass 65535 bytes is refused, naming the op: never sent with a cut length', () => {
  // expressions kept verbatim from a dump carry raw attributes of up to 4096 bytes each
  const raw = (n: number) => ({ type: 'foo', unknown: Array.from({ length: n }, (_, i) => ({ attr: i + 1, hex: 'ab'.repeat(4000) })) }) as unknown as Expr;
  const ops = (n: number): NftOp[] => [{ verb: 'add', kind: 'table', table: { family: 'ip', name: T } }, { verb: 'add', kind: 'rule', rule: ruleIn('c', [raw(n)]) }];
  assert.equal(codec.encodeWire(streamOf(ops(15))).length, 1, '15 × 4 KB fits');
  assert.throws(
    () => codec.encodeWire(streamOf(ops(17))),
    (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && e.op === 'nftables op 1' && /more than a netlink attribute holds \(65535\)/.test(e.message),
  );
});

test('mutated op streams are rejected as invalid or encode; never a crash', () => {
  const stream = Buffer.from(everything().encoded());
  const rnd = prng(5);
  let rejected = 0;
  let encoded = 0;
  for (let i = 0; i < 3000; i++) {
    const m = Buffer.from(stream.subarray(0, 4 + Math.floor(rnd() * (stream.length - 4))));
    for (let k = 0; k < 1 + Math.floor(rnd() * 8); k++) m[4 + Math.floor(rnd() * (m.length - 4))] = Math.floor(rnd() * 256);
    try {
      codec.encodeWire(m, { maxOpsPerTransaction: Math.floor(rnd() * 5) });
      encoded++;
    } catch (e) {
      assert.ok(e instanceof NetlinkError && e.kind === 'invalid', String(e));
      rejected++;
    }
  }
  assert.ok(rejected > 0 && encoded > 0, `${rejected} rejected, ${encoded} encoded`);
  assert.throws(() => codec.encodeWire(Buffer.from('nope')), /not an op stream/);
});

// ---- transactions encoded as they are queued, and the pipelined encoder ----------------------

/** A proxy-shaped transaction of n services: well past the 256 KiB a transaction feeds the
 *  addon's encoder in, so its netlink encoding is pipelined. */
function bigTable(n: number, opts: { keepOps?: boolean } = {}, bad?: Expr): NftTransaction {
  const tx = new NftTransaction(opts).addTable({ family: 'ip', name: T }).addSet(vmap4).addSet(svc4);
  for (let i = 0; i < n; i++) tx.addChain(chain(`svc-${i}`));
  if (bad) tx.addRule(ruleIn('svc-0', [bad]));
  const key = (i: number): [string, string, number] => [`10.96.${i >> 8}.${i & 255}`, 'tcp', 80];
  tx.addElements(vmap4, Array.from({ length: n }, (_, i) => ({ key: key(i), verdict: { code: 'goto' as const, chain: `svc-${i}` } })));
  tx.addElements(svc4, Array.from({ length: n }, (_, i) => ({ key: key(i) })));
  for (let i = 0; i < n; i++)
    tx.addRule(ruleIn(`svc-${i}`, R.rule(R.match(F.ipSaddr, '10.244.0.0/16', 'neq'), R.setMarkBits(0x4000))))
      .addRule(ruleIn(`svc-${i}`, R.rule(R.counter(), R.match(F.l4proto, 'tcp'), R.dnat('ip', `10.244.${i >> 8}.${i & 255}`, 8080))));
  return tx;
}

test('a transaction encodes its ops as they are queued: the same stream as its op list queued again, the same batches pipelined or not', () => {
  const kept = bigTable(3000);
  const streamed = bigTable(3000, { keepOps: false });
  const stream = streamed.encoded();
  assert.ok(stream.length > 4 * 256 * 1024, `stream of ${stream.length} bytes`);
  assert.ok(Buffer.from(stream).equals(Buffer.from(streamOf(kept.ops))), 'queued-as-you-go stream = its op list queued again at once');
  assert.ok(Buffer.from(kept.encoded()).equals(Buffer.from(stream)));
  const oneShot = codec.encodeWire(stream, { ackMode: 'last' });
  const enc = streamed.takeEncoder();
  assert.ok(enc, 'a large transaction fed the pipelined encoder');
  assert.ok(enc.fed() > 0 && enc.fed() < stream.length && enc.fed() % 1 === 0, `fed ${enc.fed()} of ${stream.length} bytes`);
  const piped = codec.encodeWire(stream, { ackMode: 'last' }, enc);
  assert.equal(piped.length, 1);
  assert.ok(piped[0]!.equals(oneShot[0]!), 'pipelined batch = one-shot batch, byte for byte');
  const types = split(piped[0]!).map((m) => m.readUInt16LE(4));
  assert.equal(types.filter((t) => t === 0x0a06).length, 6000, 'every NFT_MSG_NEWRULE');
  assert.equal(types.filter((t) => t === 0x0a03).length, 3000, 'every NFT_MSG_NEWCHAIN');
  assert.throws(() => codec.encodeWire(stream, { ackMode: 'last' }, enc), /already committed/);
  assert.equal(streamed.takeEncoder(), undefined, 'taken once');
  assert.throws(() => codec.encodeWire(stream, {}, {} as never), /expected an NftWireEncoder/);
});

test('pieces fed while earlier ones are being encoded (the event loop let in between) come out in order', async () => {
  // As the engine queues a large transaction: op by op, with the event loop let in, so the
  // encoder's work item drains pieces while more arrive, ends, and is started again.
  const model = bigTable(4000, { keepOps: true });
  for (const round of [1, 2, 3]) {
    const tx = new NftTransaction({ keepOps: false });
    for (let i = 0; i < model.ops.length; i++) {
      tx.queue(model.ops[i]!);
      if (i % (round * 500) === 0) await new Promise((r) => setImmediate(r));
      if (i % (round * 1700) === 0) await new Promise((r) => setTimeout(r, 2));
    }
    const stream = tx.encoded();
    const enc = tx.takeEncoder();
    assert.ok(enc && enc.fed() >= 4 * 256 * 1024, `fed ${enc?.fed()} bytes in pieces`);
    const piped = codec.encodeWire(stream, { ackMode: 'last' }, enc);
    const oneShot = codec.encodeWire(stream, { ackMode: 'last' });
    assert.equal(piped.length, 1);
    assert.ok(piped[0]!.equals(oneShot[0]!), `round ${round}: pipelined batch = one-shot batch, byte for byte`);
  }
});

test('a bad op in a piece the encoder was fed early rejects at commit, named as the one-shot path names it', () => {
  // Range checks are the addon's: this op is written to the stream and fed with the first piece.
  const bad = { type: 'payload', base: 'network', offset: 2 ** 32, len: 1, dreg: 1 } as Expr;
  const tx = bigTable(3000, { keepOps: false }, bad);
  const stream = tx.encoded();
  const enc = tx.takeEncoder();
  assert.ok(enc && enc.fed() > 0);
  let oneShot: unknown;
  try {
    codec.encodeWire(stream, { ackMode: 'last' });
  } catch (e) {
    oneShot = e;
  }
  assert.ok(oneShot instanceof NetlinkError && oneShot.kind === 'invalid' && /^nftables op 3003\b/.test(oneShot.op), String(oneShot));
  assert.throws(
    () => codec.encodeWire(stream, { ackMode: 'last' }, enc),
    (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && e.message === oneShot.message && e.op === oneShot.op,
  );
});

test('keepOps: false keeps no op objects; a failed queue call leaves the transaction as it was', () => {
  const tx = new NftTransaction({ keepOps: false }).addTable({ family: 'ip', name: T }).addChain(chain('c'));
  assert.equal(tx.size, 2);
  assert.deepEqual(tx.ops, []);
  assert.equal(tx.toString(), '(2 ops, built with keepOps: false)');
  assert.throws(() => tx.keptOps('a test'), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && /keepOps/.test(e.message));

  // A shape error found while writing (a hex string that is not hex) throws from addRule and
  // rolls the half-written op back: the stream is the one without it, set ids unchanged.
  for (const keepOps of [true, false]) {
    const a = new NftTransaction({ keepOps }).addTable({ family: 'ip', name: T }).addSet(svc4);
    assert.throws(() => a.addRule(ruleIn('c', [R.counter(), { type: 'cmp', sreg: 1, op: 'eq', data: 'zz' } as Expr])), /hex/);
    assert.throws(() => a.addSet({ ...vmap4, comment: 'x'.repeat(70_000) }), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid');
    a.addSet(vmap4).addElements(vmap4, [{ key: ['10.96.0.1', 'tcp', 80], verdict: { code: 'accept' } }]).addRule(ruleIn('c', [R.accept()]));
    const b = new NftTransaction().addTable({ family: 'ip', name: T }).addSet(svc4).addSet(vmap4)
      .addElements(vmap4, [{ key: ['10.96.0.1', 'tcp', 80], verdict: { code: 'accept' } }]).addRule(ruleIn('c', [R.accept()]));
    assert.equal(a.size, 5);
    assert.ok(Buffer.from(a.encoded()).equals(Buffer.from(b.encoded())), `keepOps ${keepOps}: stream without the failed ops`);
    assert.equal(a.ops.length, keepOps ? 5 : 0);
  }
});

test('release(): the stream buffer is freed at once (views detached), the kept ops dropped; the transaction takes no more ops', () => {
  const elements = Array.from({ length: 5000 }, (_, i) => ({ key: [`10.96.${i >> 8}.${i & 255}`, 'tcp', 80] as [string, string, number] }));
  const tx = new NftTransaction().addTable({ family: 'ip', name: T }).addSet(svc4).addElements(svc4, elements);
  const view = tx.encoded();
  const size = view.buffer.byteLength;
  assert.ok(view.byteLength > 50_000, `a stream of ${view.byteLength} bytes: a buffer of its own, not Node's pool`);
  const held = process.memoryUsage().arrayBuffers;
  tx.release();
  assert.equal(view.byteLength, 0, 'the view of the released buffer is detached');
  assert.ok(held - process.memoryUsage().arrayBuffers >= size, 'its memory went without a collection');
  assert.deepEqual(tx.ops, []);
  assert.throws(() => tx.encoded(), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && /released/.test(e.message));
  assert.throws(() => tx.addTable({ family: 'ip', name: T }), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && /released/.test(e.message));
  // a small transaction's buffer is a slice of Node's pool: released without detaching the pool
  const small = new NftTransaction().addTable({ family: 'ip', name: T });
  const other = Buffer.from('still here');
  small.release();
  assert.equal(other.toString(), 'still here');
});
