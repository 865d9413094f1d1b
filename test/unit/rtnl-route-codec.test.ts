// rtnetlink route codec without root: golden bytes against iproute2 (fixtures captured with
// strace by test/fixtures/rtnl/capture.sh), route replies, validation before anything is sent,
// the in-memory double's kernel semantics, seeded fuzzing of the reply decoder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { native, type NativeRtnlOp } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import { FakeLinks, FakeRoutes } from '../../src/testing/fake-kernel.js';
import type { RouteOp } from '../../src/kernel/routes.js';
import { attr, fromHex, hex, nlmsg, u32 } from '../helpers/bytes.js';
import { mutationFuzz } from '../helpers/mutate.js';

const codec = native().codec;
const fixture = (name: string) => fromHex(readFileSync(join(process.cwd(), 'test', 'fixtures', 'rtnl', `${name}.hex`), 'utf8'));

const golden: Array<[string, NativeRtnlOp]> = [
  ['newroute-local-v4', { op: 'addRoute', type: 'local', dst: '10.96.0.0/12', index: 1, table: 'local', protocol: 249 }],
  ['newroute-local-v6', { op: 'addRoute', type: 'local', dst: 'fd00:96::/108', index: 1, table: 'local', protocol: 'ipvsync' }],
  ['newroute-unicast-v4', { op: 'addRoute', dst: '10.97.0.0/16', prefsrc: '127.0.0.1', metric: 100, table: 1000, index: 1, protocol: 249 }],
  ['newroute-blackhole-v6', { op: 'addRoute', type: 'blackhole', dst: 'fd00:97::/64', metric: 7 }],
  ['delroute-local-v4', { op: 'delRoute', type: 'local', dst: '10.96.0.0/12', index: 1, table: 'local', protocol: 249 }],
  ['delroute-local-v6', { op: 'delRoute', type: 'local', dst: 'fd00:96::/108', index: 1, table: 'local', protocol: 249 }],
];

for (const [name, op] of golden) {
  test(`golden: ${name} is byte-identical to iproute2`, () => {
    assert.equal(hex(codec.rtnl.encodeOps([op])), hex(fixture(name)));
  });
}

test('exist: NLM_F_REPLACE instead of NLM_F_EXCL; a default route has no RTA_DST; the dump request', () => {
  const [add, def] = codec.parseMessages(
    codec.rtnl.encodeOps([
      { op: 'addRoute', type: 'local', dst: '10.96.0.0/12', index: 1, exist: true },
      { op: 'addRoute', type: 'unreachable', dst: '0.0.0.0/0', table: 7 },
    ]),
  );
  assert.equal(add!.flags, 0x1 | 0x4 | 0x400 | 0x100, 'REQUEST|ACK|CREATE|REPLACE');
  assert.equal(add!.payload.readUInt8(4), 255, 'type local defaults to table local');
  assert.equal(add!.payload.readUInt8(5), 3, 'protocol boot by default, as ip');
  assert.equal(def!.payload.readUInt8(1), 0);
  assert.deepEqual(codec.parseAttributes(def!.payload.subarray(12)), [], 'no RTA_DST, no RTA_OIF');
  const [dump] = codec.parseMessages(codec.rtnl.encodeDumpRoutes({ family: 10 }));
  assert.equal(dump!.type, 26); // RTM_GETROUTE
  assert.equal(dump!.flags, 0x1 | 0x300, 'REQUEST|DUMP');
  assert.equal(hex(dump!.payload), '0a 00 00 00 00 00 00 00 00 00 00 00', 'no filter: a bare rtmsg');
  // The kernel's strict-check filter: table in rtm_table, or RTA_TABLE past 255; protocol; type.
  const [local] = codec.parseMessages(codec.rtnl.encodeDumpRoutes({ family: 2, table: 255, protocol: 249, type: 2 }));
  assert.equal(hex(local!.payload), '02 00 00 00 ff f9 00 02 00 00 00 00');
  const [big] = codec.parseMessages(codec.rtnl.encodeDumpRoutes({ table: 1000 }));
  assert.equal(big!.payload.readUInt8(4), 0);
  assert.deepEqual(codec.parseAttributes(big!.payload.subarray(12)).map((a) => [a.type, a.data.readUInt32LE(0)]), [[15, 1000]]);
});

function rtmsg(family: number, dstLen: number, table: number, protocol: number, scope: number, type: number): Buffer {
  return Buffer.from([family, dstLen, 0, 0, table, protocol, scope, type, 0, 0, 0, 0]);
}

test('route replies decode (v4 local with RTA_TABLE, prefsrc, oif; v6 with metric and gateway; default route)', () => {
  const v4 = nlmsg(24, 2, 1, 0, Buffer.concat([
    rtmsg(2, 12, 255, 249, 254, 2),
    attr(15, u32(255)), attr(1, Buffer.from([10, 96, 0, 0])), attr(7, Buffer.from([10, 96, 0, 1])), attr(4, u32(3)),
  ]));
  assert.deepEqual(codec.rtnl.decodeRoute(v4), {
    family: 'inet', dst: '10.96.0.0/12', type: 'local', table: 255, protocol: 249, scope: 'host', index: 3, prefsrc: '10.96.0.1', flags: 0,
  });
  const gw = Buffer.from('fe800000000000000000000000000001', 'hex');
  const v6 = nlmsg(24, 2, 1, 0, Buffer.concat([
    rtmsg(10, 64, 0, 3, 0, 1),
    attr(15, u32(1000)), attr(1, Buffer.from('fd000097000000000000000000000000', 'hex')), attr(6, u32(1024)), attr(5, gw), attr(4, u32(2)),
  ]));
  assert.deepEqual(codec.rtnl.decodeRoute(v6), {
    family: 'inet6', dst: 'fd00:97::/64', type: 'unicast', table: 1000, protocol: 3, scope: 'global', index: 2, metric: 1024, gateway: 'fe80::1', flags: 0,
  });
  const def = codec.rtnl.decodeRoute(nlmsg(24, 2, 1, 0, Buffer.concat([rtmsg(2, 0, 254, 4, 0, 6), attr(15, u32(254))])));
  assert.equal(def.dst, '0.0.0.0/0');
  assert.equal(def.type, 'blackhole');
  const bad = (b: Buffer, re: RegExp) => assert.throws(() => codec.rtnl.decodeRoute(b), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && re.test(e.message));
  bad(nlmsg(24, 2, 1, 0, Buffer.concat([rtmsg(10, 64, 0, 3, 0, 1), attr(1, Buffer.from([1, 2, 3, 4]))])), /fixed-size value/);
  bad(nlmsg(24, 2, 1, 0, Buffer.concat([rtmsg(128, 32, 0, 3, 0, 1), attr(1, Buffer.from([1, 2, 3, 4]))])), /neither AF_INET nor AF_INET6/);
  bad(nlmsg(24, 2, 1, 0, rtmsg(2, 33, 254, 3, 0, 1)), /destination length 33 is out of range 0-32/);
  bad(nlmsg(24, 2, 1, 0, rtmsg(2, 24, 254, 3, 0, 1)), /\/24 without RTA_DST/);
  bad(nlmsg(20, 2, 1, 0, rtmsg(2, 0, 254, 3, 0, 1)), /not an RTM_NEWROUTE/);
  bad(nlmsg(24, 2, 1, 0, Buffer.concat([rtmsg(2, 8, 254, 3, 0, 1), attr(4, Buffer.from([1, 2]))])), /u32|size/);
});

test('bad route ops are rejected (kind invalid) before anything is encoded', () => {
  const invalid = (op: object, re: RegExp) =>
    assert.throws(
      () => codec.rtnl.encodeOps([op as NativeRtnlOp]),
      (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && re.test(e.message),
    );
  invalid({ op: 'addRoute', type: 'local', dst: '10.96.0.300/12', index: 1 }, /'10.96.0.300' is not an IPv4 or IPv6 address/);
  invalid({ op: 'addRoute', type: 'local', dst: '10.96.0.0/33', index: 1 }, /prefix length 33 is out of range 0-32/);
  invalid({ op: 'addRoute', type: 'local', dst: 'fd00::/129', index: 1 }, /prefix length 129 is out of range 0-128/);
  invalid({ op: 'addRoute', type: 'local', dst: '10.96.0.1/12', index: 1 }, /host bits set \(the network is 10.96.0.0\/12\)/);
  invalid({ op: 'addRoute', type: 'local', dst: 'fd00:96::1/108', index: 1 }, /host bits set \(the network is fd00:96::\/108\)/);
  invalid({ op: 'addRoute', type: 'local', dst: 10, index: 1 }, /dst must be a string/);
  invalid({ op: 'addRoute', dst: '10.97.0.0/16', index: 1, prefsrc: 'fd00::1' }, /mixed IPv4 and IPv6/);
  invalid({ op: 'addRoute', dst: 'fd00::/64', gateway: '10.0.0.1' }, /mixed IPv4 and IPv6/);
  invalid({ op: 'addRoute', type: 'local', dst: '10.96.0.0/12', index: 1, table: 0 }, /table must be an integer in 1-4294967295/);
  invalid({ op: 'addRoute', type: 'local', dst: '10.96.0.0/12', index: 1, table: 'nat' }, /table 'nat' is unknown/);
  invalid({ op: 'addRoute', type: 'local', dst: '10.96.0.0/12', index: 1, protocol: 256 }, /protocol must be an integer in 1-255/);
  invalid({ op: 'addRoute', type: 'bogus', dst: '10.96.0.0/12', index: 1 }, /route type 'bogus' is unknown/);
  invalid({ op: 'addRoute', type: 'local', dst: '10.96.0.0/12', index: 1, scope: 'moon' }, /scope 'moon' is unknown/);
  invalid({ op: 'addRoute', type: 'blackhole', dst: '10.96.0.0/12', index: 1 }, /blackhole routes take no dev/);
  invalid({ op: 'addRoute', dst: '10.96.0.0/12' }, /unicast route needs dev or gateway/);
  invalid({ op: 'addRoute', type: 'local', dst: '10.96.0.0/12', index: 1, gateway: '10.0.0.1' }, /only unicast routes take a gateway/);
  invalid({ op: 'addRoute', type: 'local', dst: '10.96.0.0/12', index: 1, metric: -1 }, /metric must be an integer/);
  invalid({ op: 'addRoute', type: 'local', dst: '10.96.0.0/12', dev: 'a/b' }, /character the kernel refuses/);
  invalid({ op: 'addRoute', type: 'local', dst: '10.96.0.0/12', dev: 'lo' }, /name their link by index here/);
});

test('FakeRoutes: kernel identity (EEXIST), delete matching (ESRCH, protocol guards foreign routes), ENODEV, validation', async () => {
  const links = new FakeLinks();
  const r = new FakeRoutes(links);
  r.seed({ family: 'inet', dst: '10.96.0.0/12', type: 'local', table: 255, protocol: 4, scope: 'host', index: 1, dev: 'lo' });
  const ops: RouteOp[] = [
    { op: 'addRoute', type: 'local', dst: '10.96.0.0/12', dev: 'lo', protocol: 249 },
    { op: 'delRoute', type: 'local', dst: '10.96.0.0/12', protocol: 249 },
    { op: 'addRoute', type: 'local', dst: 'fd00:96::/108', dev: 'lo', protocol: 249 },
    { op: 'addRoute', type: 'local', dst: '10.0.0.0/8', dev: 'nope', protocol: 249 },
    { op: 'delRoute', type: 'local', dst: '10.96.0.0/12' },
  ];
  const res = await r.apply(ops, { stopOnError: false });
  assert.deepEqual([0, 1, 2, 3, 4].map((i) => res.status(i)), ['error', 'error', 'ok', 'error', 'ok']);
  assert.deepEqual(res.errors.map((e) => [e.index, e.code]), [[0, 'EEXIST'], [1, 'ESRCH'], [3, 'ENODEV']]);
  assert.deepEqual(await r.list({ protocol: 'ipvsync' }), [
    { family: 'inet6', dst: 'fd00:96::/108', type: 'local', table: 255, protocol: 249, scope: 'global', flags: 0, index: 1, dev: 'lo', metric: 1024 },
  ]);
  await assert.rejects(r.apply([{ op: 'addRoute', type: 'local', dst: '10.96.0.1/12', dev: 'lo' }]), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid');
  await assert.rejects(r.apply([{ op: 'addRoute', dst: '10.96.0.0/12', dev: 'lo', prefsrc: 'fd00::1' }]), /mixed IPv4 and IPv6/);
  assert.equal(r.log.length, 1, 'invalid batches are not logged as sent');
});

test('the route decoder survives seeded random and mutated input', () => {
  const seed = fixture('newroute-unicast-v4');
  seed.writeUInt16LE(24, 4); // as an RTM_NEWROUTE reply
  mutationFuzz(Number(process.env.FUZZ_SEED ?? 0x40e7e), () => seed, (b) => codec.rtnl.decodeRoute(b));
});
