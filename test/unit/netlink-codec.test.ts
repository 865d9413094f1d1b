// The netlink core's encoders and parsers on golden byte vectors and malformed input.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { native, type AttributeSpec } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import { attr, fromHex, hex, nlmsg, u16, u32 } from '../helpers/bytes.js';

const codec = native().codec;

test('attribute writer: every scalar kind, alignment and padding', () => {
  const b = codec.writeAttributes([
    { type: 1, kind: 'u8', value: 0xab },
    { type: 2, kind: 'u16', value: 0x1234 },
    { type: 3, kind: 'u32', value: 0xdeadbeef },
    { type: 4, kind: 'u64', value: 0x0102030405060708n },
    { type: 5, kind: 'be16', value: 80 },
    { type: 6, kind: 'be32', value: 0x0a000001 },
    { type: 7, kind: 'str', value: 'rr' },
    { type: 8, kind: 'flag' },
    { type: 9, kind: 'bytes', value: Buffer.from([1, 2, 3, 4, 5]) },
  ]);
  assert.equal(
    hex(b),
    hex(
      fromHex(`
      05 00 01 00 ab 00 00 00
      06 00 02 00 34 12 00 00
      08 00 03 00 ef be ad de
      0c 00 04 00 08 07 06 05 04 03 02 01
      06 00 05 00 00 50 00 00
      08 00 06 00 0a 00 00 01
      07 00 07 00 72 72 00 00
      04 00 08 00
      09 00 09 00 01 02 03 04 05 00 00 00`),
    ),
  );
});

test('attribute writer: nest length is patched, NLA_F_NESTED and NLA_F_NET_BYTEORDER kept', () => {
  const NESTED = 0x8000;
  const NBO = 0x4000;
  const b = codec.writeAttributes([
    {
      type: 1 | NESTED,
      kind: 'nest',
      children: [
        { type: 2 | NBO, kind: 'be16', value: 443 },
        { type: 3, kind: 'nest', children: [{ type: 1, kind: 'u32', value: 7 }] },
      ],
    },
  ]);
  assert.equal(hex(b), hex(fromHex('18 00 01 80  06 00 02 40 01 bb 00 00  0c 00 03 00 08 00 01 00 07 00 00 00')));
  const tree = codec.parseAttributes(b, [3]);
  assert.equal(tree.length, 1);
  assert.equal(tree[0]!.type, 1);
  assert.equal(tree[0]!.nested, true);
  assert.equal(tree[0]!.children!.length, 2);
  assert.equal(tree[0]!.children![0]!.netByteOrder, true);
  assert.equal(tree[0]!.children![0]!.data.readUInt16BE(0), 443);
  assert.equal(tree[0]!.children![1]!.children![0]!.data.readUInt32LE(0), 7);
});

test('attribute reader: round-trips what the writer wrote', () => {
  const spec = [
    { type: 10, kind: 'str' as const, value: 'kube-ipvs0' },
    { type: 11, kind: 'u32' as const, value: 4096 },
    { type: 12, kind: 'bytes' as const, value: Buffer.alloc(16, 0xfe) },
  ];
  const tree = codec.parseAttributes(codec.writeAttributes(spec));
  assert.deepEqual(
    tree.map((a) => a.type),
    [10, 11, 12],
  );
  assert.equal(tree[0]!.data.toString('latin1'), 'kube-ipvs0\0');
  assert.equal(tree[2]!.data.length, 16);
});

function rejects(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof NetlinkError, 'a NetlinkError');
    assert.equal(e.kind, 'invalid');
    assert.match(e.message, pattern);
    return true;
  });
}

test('attribute reader: malformed input is an error, never a crash or an over-read', () => {
  // length shorter than the header
  rejects(() => codec.parseAttributes(fromHex('02 00 01 00')), /length 2/);
  // length past the end of the buffer
  rejects(() => codec.parseAttributes(fromHex('10 00 01 00 00 00 00 00')), /length 16 but 8 bytes remain/);
  // garbage shorter than a header after the last attribute
  rejects(() => codec.parseAttributes(fromHex('04 00 01 00 ff')), /trailing bytes/);
  // a nest whose child overflows the nest (but not the buffer)
  rejects(
    () => codec.parseAttributes(fromHex('0c 00 01 80 10 00 02 00 00 00 00 00 00 00 00 00 00 00 00 00')),
    /length 16 but 8 bytes remain/,
  );
  // zero padding after the last attribute is legal
  assert.equal(codec.parseAttributes(fromHex('04 00 01 00 00 00')).length, 1);
  assert.deepEqual(codec.parseAttributes(Buffer.alloc(0)), []);
});

test('typed getters are strict about lengths', () => {
  // IPVS GET_INFO reply whose VERSION attribute is 2 bytes instead of a u32
  const genl = Buffer.from([15, 1, 0, 0]);
  const bad = nlmsg(0x20, 0, 1, 0, Buffer.concat([genl, attr(1, u16(0x0102))]));
  rejects(() => codec.ipvs.decodeInfo(bad), /attribute 1 is not a u32 \(2 bytes\)/);
  const good = nlmsg(0x20, 0, 1, 0, Buffer.concat([genl, attr(1, u32(0x010201)), attr(2, u32(4096))]));
  assert.deepEqual(codec.ipvs.decodeInfo(good), { version: '1.2.1', connTableSize: 4096 });
  rejects(() => codec.ipvs.decodeInfo(nlmsg(0x20, 0, 1, 0, genl)), /no IPVS_INFO_ATTR_VERSION/);
});

test('IPVS GET_INFO request: golden bytes', () => {
  // nlmsghdr(len 20, type = family id, flags REQUEST|ACK, seq 0, pid 0) + genlmsghdr(cmd 15, v1)
  assert.equal(
    hex(codec.ipvs.encodeGetInfo(0x1d)),
    hex(fromHex('14 00 00 00 1d 00 05 00 00 00 00 00 00 00 00 00 0f 01 00 00')),
  );
});

test('acks: success, errors, extended-ack TLVs with capped and full echo', () => {
  const NLMSG_ERROR = 2;
  const CAPPED = 0x100;
  const ACK_TLVS = 0x200;
  const echoed = nlmsg(0x1d, 5, 77, 1234, Buffer.from([1, 1, 0, 0])); // 20-byte request
  const capped = Buffer.concat([u32(-17), echoed.subarray(0, 16), attr(1, Buffer.from('service exists\0')), attr(2, u32(20))]);
  const [m1] = codec.parseMessages(nlmsg(NLMSG_ERROR, CAPPED | ACK_TLVS, 77, 1234, capped));
  assert.equal(m1!.error, 17);
  assert.equal(m1!.extack, 'service exists');
  assert.equal(m1!.extackOffset, 20);
  // Without NETLINK_CAP_ACK the whole request is echoed before the TLVs.
  const full = Buffer.concat([u32(-3), echoed, attr(1, Buffer.from('no such\0'))]);
  const [m2] = codec.parseMessages(nlmsg(NLMSG_ERROR, ACK_TLVS, 77, 1234, full));
  assert.equal(m2!.error, 3);
  assert.equal(m2!.extack, 'no such');
  const [m3] = codec.parseMessages(nlmsg(NLMSG_ERROR, CAPPED, 77, 1234, Buffer.concat([u32(0), echoed.subarray(0, 16)])));
  assert.equal(m3!.error, 0);
  // an error code the kernel cannot send is not negated into undefined behaviour
  const [m4] = codec.parseMessages(nlmsg(NLMSG_ERROR, CAPPED, 1, 0, Buffer.concat([u32(0x80000000), echoed.subarray(0, 16)])));
  assert.equal(m4!.error, 71 /* EPROTO */);
});

test('message framing: several messages per datagram, truncation rejected', () => {
  const a = nlmsg(16, 2, 1, 0, Buffer.from([1, 2, 3])); // padded to 20
  const b = nlmsg(3, 2, 1, 0, u32(0));
  const msgs = codec.parseMessages(Buffer.concat([a, b]));
  assert.deepEqual(
    msgs.map((m) => [m.type, m.seq, m.payload.length]),
    [
      [16, 1, 3],
      [3, 1, 4],
    ],
  );
  rejects(() => codec.parseMessages(Buffer.concat([a, b.subarray(0, 18)])), /truncated/);
  const lying = Buffer.from(a);
  lying.writeUInt32LE(400, 0);
  rejects(() => codec.parseMessages(lying), /truncated/);
});

test('rtnetlink link decoding', () => {
  const ifi = Buffer.alloc(16);
  ifi.writeUInt16LE(772, 2); // ARPHRD_LOOPBACK
  ifi.writeInt32LE(1, 4);
  ifi.writeUInt32LE(0x49, 8); // UP|LOOPBACK|RUNNING
  const linkinfo = attr(18 | 0x8000, attr(1, Buffer.from('dummy\0')));
  const msg = nlmsg(16, 2, 1, 0, Buffer.concat([ifi, attr(3, Buffer.from('lo\0')), attr(4, u32(65536)), linkinfo]));
  const l = codec.rtnl.decodeLink(msg);
  assert.equal(l.name, 'lo');
  assert.equal(l.index, 1);
  assert.equal(l.up, true);
  assert.equal(l.mtu, 65536);
  assert.equal(l.kind, 'dummy');
  rejects(() => codec.rtnl.decodeLink(nlmsg(16, 2, 1, 0, Buffer.concat([ifi, attr(4, u16(1))]))), /not a u32/);
});

test('an attribute or a nest longer than 65535 bytes is refused (invalid), never written with a cut length', () => {
  const bytes = (n: number) => ({ type: 1, kind: 'bytes' as const, value: Buffer.alloc(n, 0xab) });
  // 4 + 65531 = 65535: the longest attribute there is, read back whole
  const max = codec.parseAttributes(codec.writeAttributes([bytes(65531)]));
  assert.equal(max.length, 1);
  assert.equal(max[0]!.data.length, 65531);
  const refused = (spec: AttributeSpec[], why: RegExp) =>
    assert.throws(() => codec.writeAttributes(spec), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && why.test(e.message));
  refused([bytes(65532)], /attribute 1 would be 65536 bytes, more than a netlink attribute holds \(65535\)/);
  refused([{ type: 2, kind: 'str', value: 'x'.repeat(65531) }], /attribute 2 would be 65536 bytes/);
  // a nest whose children fit one by one but not together
  refused([{ type: 3 | 0x8000, kind: 'nest', children: [bytes(40_000), bytes(40_000)] }], /attribute 3 would be 80012 bytes/);
  refused([{ type: 4 | 0x8000, kind: 'nest', children: [bytes(65531)] }], /attribute 4 would be 65540 bytes/);
});
