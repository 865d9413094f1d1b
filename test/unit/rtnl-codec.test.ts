// rtnetlink link/address codec without root: golden bytes against iproute2 (fixtures captured
// with strace by test/fixtures/rtnl/capture.sh), address replies, validation, seeded fuzzing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { native, type NativeRtnlOp } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import { attr, fromHex, hex, nlmsg, u32 } from '../helpers/bytes.js';
import { mutationFuzz } from '../helpers/mutate.js';

const codec = native().codec;
const fixture = (name: string) => fromHex(readFileSync(join(process.cwd(), 'test', 'fixtures', 'rtnl', `${name}.hex`), 'utf8'));

const golden: Array<[string, NativeRtnlOp]> = [
  ['newlink-dummy', { op: 'addLink', name: 'kube-ipvs0', kind: 'dummy' }],
  ['setlink-up', { op: 'setLink', index: 2, up: true }],
  ['setlink-alias', { op: 'setLink', index: 2, alias: 'ipvsync' }],
  ['newaddr-v4', { op: 'addAddr', index: 2, address: '10.96.0.10/32' }],
  ['newaddr-v6', { op: 'addAddr', index: 2, address: 'fd00::a' }],
  ['newaddr-v4-24', { op: 'addAddr', index: 2, address: '192.168.7.1/24' }],
  ['deladdr-v4', { op: 'delAddr', index: 2, address: '10.96.0.10' }],
  ['deladdr-v6', { op: 'delAddr', index: 2, address: 'fd00::a/128' }],
  ['dellink', { op: 'delLink', index: 2 }],
];

for (const [name, op] of golden) {
  test(`golden: ${name} is byte-identical to iproute2`, () => {
    const ours = codec.rtnl.encodeOps([op]);
    const theirs = fixture(name);
    // iproute2 sends the dummy kind without a NUL; padding may differ in content only.
    assert.equal(ours.length, theirs.length);
    const a = codec.parseMessages(ours)[0]!;
    const b = codec.parseMessages(theirs)[0]!;
    assert.deepEqual([a.type, a.flags], [b.type, b.flags]);
    assert.equal(hex(ours), hex(theirs));
  });
}

test('by-name forms and exist: IFLA_IFNAME instead of an index, NLM_F_REPLACE instead of EXCL', () => {
  const [up, del, add] = codec.parseMessages(
    codec.rtnl.encodeOps([
      { op: 'setLink', name: 'kube-ipvs0', up: false },
      { op: 'delLink', name: 'kube-ipvs0' },
      { op: 'addAddr', index: 7, address: '10.0.0.1', exist: true },
    ]),
  );
  assert.equal(up!.payload.readInt32LE(4), 0, 'no index');
  assert.equal(up!.payload.readUInt32LE(8), 0, 'flags: down');
  assert.equal(up!.payload.readUInt32LE(12), 1, 'change: IFF_UP');
  assert.deepEqual(codec.parseAttributes(up!.payload.subarray(16)).map((x) => [x.type, x.data.toString('latin1')]), [[3, 'kube-ipvs0\0']]);
  assert.equal(del!.type, 17);
  assert.equal(add!.flags, 0x1 | 0x4 | 0x400 | 0x100, 'REQUEST|ACK|CREATE|REPLACE');
});

test("an address protocol is IFA_PROTO (u8, type 11) after iproute2's IFA_LOCAL and IFA_ADDRESS; none without one", () => {
  // iproute2 6.1 cannot send one (`ip addr add … proto` came later): its request plus the attribute
  for (const [name, address] of [['newaddr-v4', '10.96.0.10/32'], ['newaddr-v6', 'fd00::a']] as const) {
    const ours = codec.rtnl.encodeOps([{ op: 'addAddr', index: 2, address, protocol: 249 }]);
    const theirs = fixture(name);
    const expected = Buffer.concat([theirs, attr(11, Buffer.from([249]))]);
    expected.writeUInt32LE(expected.length, 0);
    assert.equal(hex(ours), hex(expected), name);
    assert.equal(hex(codec.rtnl.encodeOps([{ op: 'addAddr', index: 2, address, protocol: 0 }])), hex(theirs), 'protocol 0: no attribute');
  }
});

test('address replies decode (v4 with label and peer, v6 with IFA_ADDRESS only and IFA_FLAGS)', () => {
  const ifa = (family: number, prefix: number, flags: number, scope: number, index: number) => {
    const b = Buffer.alloc(8);
    b.writeUInt8(family, 0);
    b.writeUInt8(prefix, 1);
    b.writeUInt8(flags, 2);
    b.writeUInt8(scope, 3);
    b.writeUInt32LE(index, 4);
    return b;
  };
  const v4 = nlmsg(20, 2, 1, 0, Buffer.concat([ifa(2, 32, 0x80, 0, 3), attr(2, Buffer.from([10, 96, 0, 1])), attr(1, Buffer.from([10, 96, 0, 2])), attr(3, Buffer.from('kube-ipvs0\0'))]));
  assert.deepEqual(codec.rtnl.decodeAddr(v4), {
    link: '', index: 3, family: 'inet', address: '10.96.0.1', prefixlen: 32, scope: 'global', flags: 0x80, peer: '10.96.0.2', label: 'kube-ipvs0',
  });
  const v6addr = Buffer.from('fd000000000000000000000000000001', 'hex');
  const v6 = nlmsg(20, 2, 1, 0, Buffer.concat([ifa(10, 128, 0, 254, 1), attr(1, v6addr), attr(8, u32(0x280)), attr(6, Buffer.from('ffffffffffffffff0000000000000000', 'hex'))]));
  const d = codec.rtnl.decodeAddr(v6);
  assert.equal(d.address, 'fd00::1');
  assert.equal(d.scope, 'host');
  assert.equal(d.flags, 0x280);
  assert.equal(d.validLifetime, undefined, 'forever is not reported');
  assert.equal(d.protocol, undefined, 'no IFA_PROTO: none');
  const ll = codec.rtnl.decodeAddr(nlmsg(20, 2, 1, 0, Buffer.concat([ifa(10, 64, 0x80, 253, 4), attr(1, Buffer.from('fe800000000000000000000000000001', 'hex')), attr(11, Buffer.from([3]))])));
  assert.deepEqual([ll.address, ll.scope, ll.protocol], ['fe80::1', 'link', 3], 'IFAPROT_KERNEL_LL');
  // malformed: a v6 address of 4 bytes, an unknown family, no address at all
  const bad = (b: Buffer, re: RegExp) => assert.throws(() => codec.rtnl.decodeAddr(b), (e: unknown) => e instanceof NetlinkError && re.test(e.message));
  bad(nlmsg(20, 2, 1, 0, Buffer.concat([ifa(10, 128, 0, 0, 1), attr(1, Buffer.from([1, 2, 3, 4]))])), /fixed-size value/);
  bad(nlmsg(20, 2, 1, 0, Buffer.concat([ifa(7, 0, 0, 0, 1), attr(1, Buffer.from([1, 2, 3, 4]))])), /neither AF_INET nor AF_INET6/);
  bad(nlmsg(20, 2, 1, 0, ifa(2, 32, 0, 0, 1)), /without IFA_LOCAL or IFA_ADDRESS/);
  bad(nlmsg(16, 2, 1, 0, ifa(2, 32, 0, 0, 1)), /not an RTM_NEWADDR/);
});

test('bad input is rejected before anything is encoded', () => {
  const invalid = (op: object, re: RegExp) =>
    assert.throws(
      () => codec.rtnl.encodeOps([op as NativeRtnlOp]),
      (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && re.test(e.message),
    );
  invalid({ op: 'addLink', name: '', kind: 'dummy' }, /link name is empty/);
  invalid({ op: 'addLink', name: 'a-very-long-name0', kind: 'dummy' }, /17 bytes; at most 15/);
  invalid({ op: 'addLink', name: 'a/b', kind: 'dummy' }, /character the kernel refuses/);
  invalid({ op: 'addLink', name: 'x', kind: 'vxlan' }, /link kind 'vxlan' is not supported/);
  invalid({ op: 'addLink', name: 'x', kind: 'dummy', mtu: 10 }, /mtu is out of range/);
  invalid({ op: 'setLink', name: 'x', alias: '' }, /alias must be 1-255 bytes/);
  invalid({ op: 'setLink', name: 'x', alias: 'a'.repeat(256) }, /alias must be 1-255 bytes/);
  invalid({ op: 'setLink', name: 'x', alias: 7 as unknown as string }, /alias must be a string/);
  invalid({ op: 'setLink', name: 'x' }, /setLink needs up or alias/);
  invalid({ op: 'setLink', name: 'x', up: 'yes' }, /up must be a boolean/);
  invalid({ op: 'delLink', index: -1 }, /index must be a positive integer/);
  invalid({ op: 'addAddr', index: 2, address: '10.0.0.300' }, /'10.0.0.300' is not an IPv4 or IPv6 address/);
  invalid({ op: 'addAddr', index: 2, address: '10.0.0.1/33' }, /prefix length 33 is out of range 0-32/);
  invalid({ op: 'addAddr', index: 2, address: 'fd00::1/129' }, /prefix length 129 is out of range 0-128/);
  invalid({ op: 'addAddr', index: 2, address: '10.0.0.1/x' }, /bad prefix length/);
  invalid({ op: 'renameLink', name: 'x' }, /unknown op 'renameLink'/);
  invalid({ op: 'addAddr', index: 2, address: '10.0.0.1', protocol: 256 }, /protocol must be an integer in 0-255/);
  invalid({ op: 'addAddr', index: 2, address: '10.0.0.1', protocol: 'ipvsync' }, /protocol must be a number/);
  invalid({ op: 'delAddr', index: 2, address: '10.0.0.1', protocol: 249 }, /protocol is for addAddr only/);
});

test('the address decoder survives seeded random and mutated input', () => {
  const seed = fixture('newaddr-v6');
  seed.writeUInt16LE(20, 4); // as an RTM_NEWADDR reply
  mutationFuzz(Number(process.env.FUZZ_SEED ?? 0xadd), () => seed, (b) => codec.rtnl.decodeAddr(b));
});
