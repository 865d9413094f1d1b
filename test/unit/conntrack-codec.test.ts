// ctnetlink codec without root: the kernel's dump reply (captured from conntrack -L by
// test/fixtures/conntrack/capture.sh) decodes to what conntrack -L printed, our DELETE carries
// exactly conntrack -D's original tuple, the flow filter, and seeded fuzzing of the decoder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { native, type AttributeNode, type NativeFlow } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import { fromHex, hex } from '../helpers/bytes.js';
import { mutationFuzz } from '../helpers/mutate.js';

const codec = native().codec;
const DIR = join(process.cwd(), 'test', 'fixtures', 'conntrack');
const datagram = fromHex(readFileSync(join(DIR, 'list-reply.hex'), 'utf8'));
const messages = codec.parseMessages(datagram).filter((m) => m.type === 0x100);
// parseMessages returns payloads; rebuild each message for the decoders
function whole(i: number): Buffer {
  let off = 0;
  for (let k = 0; ; k++) {
    const len = datagram.readUInt32LE(off);
    if (datagram.readUInt16LE(off + 4) === 0x100 && k === i) return datagram.subarray(off, off + len);
    off += (len + 3) & ~3;
  }
}

function conntrackL(f: NativeFlow): string {
  const num = typeof f.proto === 'number' ? f.proto : { tcp: 6, udp: 17, sctp: 132, udplite: 136, dccp: 33, icmp: 1, icmpv6: 58 }[f.proto];
  const t = (x: NativeFlow['orig']) => `src=${x.src} dst=${x.dst} sport=${x.sport} dport=${x.dport}`;
  const name = String(f.proto).padEnd(8);
  return `${name} ${num} ${f.timeout} ${f.tcpState ? f.tcpState + ' ' : ''}${t(f.orig)} ${t(f.reply)} mark=${f.mark} use=${f.use}`;
}

test('the kernel dump decodes to what conntrack -L printed for it (udp/IPv4, tcp/IPv6)', () => {
  assert.equal(messages.length, 2);
  const flows = [0, 1].map((i) => codec.conntrack.decodeFlow(whole(i)));
  const expected = readFileSync(join(DIR, 'list.txt'), 'utf8').trim().split('\n');
  assert.deepEqual(flows.map(conntrackL).sort(), expected.map((l) => l.replace(/\s+/g, ' ').replace(/^(\w+) /, (m, p) => p.padEnd(8) + ' ')).sort());
  const tcp = flows.find((f) => f.proto === 'tcp')!;
  assert.equal(tcp.family, 'inet6');
  assert.equal(tcp.tcpState, 'ESTABLISHED');
  assert.deepEqual(tcp.orig, { src: 'fd00::5', dst: 'fd00::6', sport: 1111, dport: 80 });
  assert.ok(tcp.id !== 0);
});

function sub(nodes: AttributeNode[], type: number): AttributeNode | undefined {
  return nodes.find((n) => n.type === type);
}
const flat = (n: AttributeNode): unknown => ({ t: n.type, d: n.children ? n.children.map(flat) : hex(n.data) });

test('DELETE: the original tuple exactly as conntrack -D sends it, plus the flow id', () => {
  const v4 = [0, 1].map(whole).find((m) => m.readUInt8(16) === 2)!;
  const flow = codec.conntrack.decodeFlow(v4);
  const ours = codec.parseMessages(codec.conntrack.encodeDelete(v4))[0]!;
  const theirs = codec.parseMessages(fromHex(readFileSync(join(DIR, 'delete-udp4.hex'), 'utf8')))[0]!;
  assert.deepEqual([ours.type, ours.flags, hex(ours.payload.subarray(0, 4))], [theirs.type, theirs.flags, hex(theirs.payload.subarray(0, 4))]);
  const a = codec.parseAttributes(ours.payload.subarray(4));
  const b = codec.parseAttributes(theirs.payload.subarray(4));
  assert.deepEqual(flat(sub(a, 1)!), flat(sub(b, 1)!), 'CTA_TUPLE_ORIG');
  assert.deepEqual(a.map((x) => x.type), [1, 12], 'CTA_TUPLE_ORIG and CTA_ID only');
  assert.equal(sub(a, 12)!.data.readUInt32BE(0), flow.id);
  assert.equal(hex(codec.conntrack.encodeDump(10)), hex(fromHex('14000000 0101 0103 00000000 00000000 0a000000')));
});

test('the flow filter: protocol, original source/destination and port, reply source and port', () => {
  const m = [0, 1].map(whole);
  const udp = m.find((x) => x.readUInt8(16) === 2)!;
  const yes = (msg: Buffer, f: object) => assert.equal(codec.conntrack.matches(msg, f), true, JSON.stringify(f));
  const no = (msg: Buffer, f: object) => assert.equal(codec.conntrack.matches(msg, f), false, JSON.stringify(f));
  yes(udp, {});
  yes(udp, { proto: 'udp', origDst: '10.6.6.6', origDport: 2222 });
  yes(udp, { family: 'inet', proto: 17, replySrc: '10.6.6.6', replySport: 2222 });
  yes(udp, { origSrc: '10.5.5.5' });
  no(udp, { proto: 'tcp' });
  no(udp, { family: 'inet6' });
  no(udp, { proto: 'udp', origDport: 2223 });
  no(udp, { origDst: '10.6.6.7' });
  no(udp, { replySrc: '10.6.6.7' });
  const tcp6 = m.find((x) => x.readUInt8(16) === 10)!;
  yes(tcp6, { proto: 'tcp', origDst: 'fd00::6', origDport: 80 });
  no(tcp6, { origDst: '10.6.6.6' });
});

test('malformed flows are errors; the decoder survives seeded random and mutated input', () => {
  const bad = (b: Buffer, re: RegExp) => assert.throws(() => codec.conntrack.decodeFlow(b), (e: unknown) => e instanceof NetlinkError && re.test(e.message));
  const v4 = Buffer.from(whole(0));
  const wrongType = Buffer.from(v4);
  wrongType.writeUInt16LE(0x101, 4);
  bad(wrongType, /not a ctnetlink conntrack message/);
  const wrongFamily = Buffer.from(v4);
  wrongFamily.writeUInt8(7, 16);
  bad(wrongFamily, /neither AF_INET nor AF_INET6/);
  bad(fromHex('14000000 0001 0200 00000000 00000000 02000000'), /without a complete original tuple/);
  mutationFuzz(Number(process.env.FUZZ_SEED ?? 0xc7), (i) => whole(i % 2), (b) => codec.conntrack.decodeFlow(b));
});
