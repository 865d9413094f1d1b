// IPVS codec: every request kind against what ipvsadm 1.31 sends (captured with strace inside
// user-mode-linux, test/fixtures/ipvs/*.hex), validation before send, reply decoders on
// synthetic and malformed replies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { native } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import type { IpvsOp } from '../../src/kernel/ipvs.js';
import { attr, hex, nlmsg, u16, u32 } from '../helpers/bytes.js';
import { packIpvsOps } from '../../src/kernel/ipvs-pack.js';

const codec = native().codec.ipvs;
/** What apply() sends for `ops`: their packed form, encoded. */
const encodeOps = (ops: unknown[], familyId: number, opts?: { ack?: 'each' | 'errors' }): Buffer => codec.encodeOps(packIpvsOps(ops), familyId, opts);
const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'test', 'fixtures', 'ipvs');

/** The IPVS messages ipvsadm sent for one command (GET_INFO first, then the command). */
function fixture(name: string): Buffer[] {
  return readFileSync(join(FIXTURES, `${name}.hex`), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .map((l) => Buffer.from(l.replace(/\s+/g, ''), 'hex'));
}

const familyOf = (m: Buffer): number => m.readUInt16LE(4);
const cmdOf = (m: Buffer): number => m[16]!;

interface Tlv {
  type: number;
  flags: number;
  value: Buffer;
}

function tlvs(b: Buffer): Tlv[] {
  const out: Tlv[] = [];
  for (let off = 0; off + 4 <= b.length; ) {
    const len = b.readUInt16LE(off);
    const t = b.readUInt16LE(off + 2);
    out.push({ type: t & 0x3fff, flags: t & 0xc000, value: b.subarray(off + 4, off + len) });
    off += (len + 3) & ~3;
  }
  return out;
}

function untlv(list: Tlv[]): Buffer {
  return Buffer.concat(list.map((a) => attr(a.type | a.flags, a.value)));
}

/**
 * ipvsadm (libipvs) sends the full service (and destination) with every command; the kernel
 * reads only the identity for deletes, zeroing and lookups. This keeps, inside nest `nestType`,
 * only the attribute types in `keep`, recomputing the lengths.
 */
function only(msg: Buffer, nestType: number, keep: number[]): Buffer {
  const hdr = msg.subarray(0, 20);
  const attrs = tlvs(msg.subarray(20, msg.readUInt32LE(0)));
  const body = untlv(attrs.map((a) => (a.type === nestType ? { ...a, value: untlv(tlvs(a.value).filter((c) => keep.includes(c.type))) } : a)));
  const out = Buffer.concat([hdr, body]);
  out.writeUInt32LE(out.length, 0);
  return out;
}

const SVC_KEY = [1, 2, 3, 4, 5]; // AF, PROTOCOL, ADDR, PORT, FWMARK
const DEST_KEY = [1, 2, 11]; // ADDR, PORT, ADDR_FAMILY

function golden(name: string, ops: IpvsOp[], transform: (m: Buffer) => Buffer = (m) => m): void {
  test(`golden: ${name} matches ipvsadm`, () => {
    const msgs = fixture(name);
    const want = msgs[msgs.length - 1]!;
    assert.equal(cmdOf(msgs[0]!), 15, 'ipvsadm starts with GET_INFO');
    assert.equal(hex(encodeOps(ops, familyOf(want))), hex(transform(want)));
  });
}

const tcp80 = { protocol: 'tcp', address: '10.0.0.1', port: 80 } as const;
const v6sip = { protocol: 'udp', address: 'fd00::1', port: 5060 } as const;

golden('new-service-v4', [{ op: 'addService', service: { ...tcp80, scheduler: 'rr' } }]);
golden('new-service-v6-persistent-pe', [
  { op: 'addService', service: { ...v6sip, scheduler: 'wlc', flags: ['persistent'], timeout: 600, netmask: 64, pe: 'sip' } },
]);
golden('new-service-fwmark-flags', [
  { op: 'addService', service: { fwmark: 5, scheduler: 'sh', flags: ['persistent', 'sh-fallback', 'sh-port'], timeout: 120, netmask: '255.255.255.0' } },
]);
golden('new-service-sctp-ops', [
  { op: 'addService', service: { protocol: 'sctp', address: '10.0.0.2', port: 9, scheduler: 'mh', flags: ['mh-fallback', 'mh-port'] } },
]);
golden('new-service-udp-ops', [{ op: 'addService', service: { protocol: 'udp', address: '10.0.0.3', port: 53, scheduler: 'rr', flags: ['one-packet'] } }]);
golden('set-service', [{ op: 'updateService', service: { ...tcp80, scheduler: 'wrr', flags: ['persistent'], timeout: 30 } }]);
golden(
  'new-dest-masq',
  [{ op: 'addDestination', service: tcp80, dest: { address: '127.0.0.2', port: 8080, forward: 'masq', weight: 3, upperThreshold: 100, lowerThreshold: 10 } }],
  (m) => only(m, 1, SVC_KEY),
);
golden(
  'new-dest-droute-v6',
  [{ op: 'addDestination', service: v6sip, dest: { address: '::1', port: 5060, forward: 'droute', weight: 0 } }],
  (m) => only(m, 1, SVC_KEY),
);
golden(
  'new-dest-tunnel-gue',
  [{ op: 'addDestination', service: tcp80, dest: { address: '127.0.0.3', port: 80, forward: 'tunnel', tunnel: { type: 'gue', port: 6080, checksum: 'csum' } } }],
  (m) => only(m, 1, SVC_KEY),
);
golden(
  'new-dest-tunnel-ipip',
  [{ op: 'addDestination', service: tcp80, dest: { address: '127.0.0.5', port: 80, forward: 'tunnel' } }],
  (m) => only(m, 1, SVC_KEY),
);
golden(
  'new-dest-fwmark-local',
  [{ op: 'addDestination', service: { fwmark: 5 }, dest: { address: '127.0.0.1', port: 0, forward: 'masq', weight: 2 } }],
  (m) => only(m, 1, SVC_KEY),
);
golden(
  'set-dest',
  [{ op: 'updateDestination', service: tcp80, dest: { address: '127.0.0.2', port: 8080, forward: 'masq', weight: 7 } }],
  (m) => only(m, 1, SVC_KEY),
);
golden('del-dest', [{ op: 'deleteDestination', service: tcp80, dest: { address: '127.0.0.2', port: 8080 } }], (m) =>
  only(only(m, 1, SVC_KEY), 2, DEST_KEY),
);
golden('del-service', [{ op: 'deleteService', service: tcp80 }], (m) => only(m, 1, SVC_KEY));
golden('zero-service', [{ op: 'zero', service: tcp80 }], (m) => only(m, 1, SVC_KEY));
golden('zero-all', [{ op: 'zero' }]);
golden('flush', [{ op: 'flush' }]);
golden('set-config', [{ op: 'setTimeouts', timeouts: { tcp: 900, tcpFin: 120, udp: 300 } }]);
golden('new-daemon-master', [
  { op: 'startDaemon', daemon: { state: 'master', interface: 'lo', syncId: 3, syncMaxLen: 1400, mcastGroup: '224.0.0.81', mcastPort: 8848, mcastTtl: 2 } },
]);
golden('del-daemon', [{ op: 'stopDaemon', daemon: { state: 'master' } }], (m) => only(m, 3, [1]));

test('golden: GET_INFO matches ipvsadm', () => {
  const m = fixture('flush')[0]!;
  assert.equal(hex(codec.encodeGetInfo(familyOf(m))), hex(m));
});

test('golden: GET_SERVICE (one) and GET_DEST dump match ipvsadm -Ln -t', () => {
  const [, get, dests] = fixture('get-service') as [Buffer, Buffer, Buffer];
  assert.equal(hex(codec.encodeGetService(tcp80, familyOf(get))), hex(only(get, 1, SVC_KEY)));
  assert.equal(hex(codec.encodeGetDests(tcp80, familyOf(dests))), hex(dests));
});

test('golden: GET_SERVICE dump and one GET_DEST dump per service match ipvsadm -Sn', () => {
  const msgs = fixture('get-services-dump');
  const fam = familyOf(msgs[0]!);
  assert.equal(hex(codec.encodeGetServices(fam)), hex(msgs[1]!));
  const keys = [
    tcp80,
    { protocol: 'udp', address: '10.0.0.3', port: 53 },
    { protocol: 'sctp', address: '10.0.0.2', port: 9 },
    v6sip,
    { fwmark: 5 },
  ];
  assert.equal(msgs.length, 2 + keys.length);
  keys.forEach((k, i) => assert.equal(hex(codec.encodeGetDests(k, fam)), hex(msgs[2 + i]!), `service ${i}`));
});

test('golden: GET_CONFIG and GET_DAEMON dump match ipvsadm', () => {
  const cfg = fixture('get-config').at(-1)!;
  assert.equal(hex(codec.encodeGetConfig(familyOf(cfg))), hex(cfg));
  const dmn = fixture('get-daemon').at(-1)!;
  assert.equal(hex(codec.encodeGetDaemons(familyOf(dmn))), hex(dmn));
});

test('a batch of mixed ops encodes one message per op, in order', () => {
  const ops: IpvsOp[] = [
    { op: 'flush' },
    { op: 'addService', service: { ...tcp80, scheduler: 'rr' } },
    { op: 'addDestination', service: tcp80, dest: { address: '10.1.0.1', port: 80, forward: 'masq' } },
    { op: 'deleteService', service: tcp80 },
  ];
  const msgs = native().codec.parseMessages(encodeOps(ops, 0x1c));
  assert.deepEqual(
    msgs.map((m) => m.payload[0]),
    [17, 1, 5, 3],
  );
  assert.ok(msgs.every((m) => m.type === 0x1c && m.flags === 5));
});

// ---- validation: kind 'invalid', index of the bad op, nothing encoded ----------------------

/** `ops` fail with kind 'invalid', the bad op's index and a text matching `pattern`. */
function invalid(ops: unknown[], index: number, pattern: RegExp): void {
  assert.throws(
    () => encodeOps(ops, 0x1c),
    (e: unknown) => {
      assert.ok(e instanceof NetlinkError, `a NetlinkError, got ${String(e)}`);
      assert.equal(e.kind, 'invalid');
      assert.equal(e.code, 'EINVAL');
      assert.equal(e.index, index);
      assert.match(e.message, pattern);
      return true;
    },
  );
}

const ok: IpvsOp = { op: 'addService', service: { ...tcp80, scheduler: 'rr' } };
const dest = (d: Record<string, unknown>, service: unknown = tcp80): unknown => ({ op: 'addDestination', service, dest: { address: '10.1.0.1', port: 80, ...d } });

const cases: Array<[string, unknown, RegExp]> = [
  ['bad service address', { op: 'addService', service: { ...tcp80, address: '10.0.0.300' } }, /invalid service address '10.0.0.300'/],
  ['port above 65535', { op: 'addService', service: { ...tcp80, port: 65536 } }, /port must be an integer 0-65535/],
  ['negative port', { op: 'deleteService', service: { ...tcp80, port: -1 } }, /port/],
  ['fractional port', { op: 'deleteService', service: { ...tcp80, port: 80.5 } }, /port/],
  ['unknown protocol', { op: 'addService', service: { ...tcp80, protocol: 'icmp' } }, /protocol must be tcp, udp or sctp/],
  ['fwmark 0', { op: 'addService', service: { fwmark: 0, scheduler: 'rr' } }, /fwmark must be an integer 1-4294967295/],
  ['fwmark too large', { op: 'deleteService', service: { fwmark: 2 ** 32 } }, /fwmark/],
  ['fwmark and address', { op: 'deleteService', service: { fwmark: 3, ...tcp80 } }, /not both/],
  ['scheduler over 15 chars', { op: 'addService', service: { ...tcp80, scheduler: 'a'.repeat(16) } }, /scheduler name must be 1-15 characters/],
  ['empty scheduler', { op: 'addService', service: { ...tcp80, scheduler: '' } }, /scheduler name/],
  ['sh flag with rr', { op: 'addService', service: { ...tcp80, scheduler: 'rr', flags: ['sh-port'] } }, /needs the sh scheduler/],
  ['mh flag with sh', { op: 'addService', service: { ...tcp80, scheduler: 'sh', flags: ['mh-port'] } }, /needs the mh scheduler/],
  ['unknown flag', { op: 'addService', service: { ...tcp80, scheduler: 'rr', flags: ['sticky'] } }, /unknown service flag 'sticky'/],
  ['IPv6 netmask 129', { op: 'addService', service: { ...v6sip, scheduler: 'rr', netmask: 129 } }, /netmask/],
  ['IPv4 numeric netmask', { op: 'addService', service: { ...tcp80, scheduler: 'rr', netmask: 24 } }, /dotted mask/],
  ['family mismatch', { op: 'addService', service: { ...tcp80, family: 'inet6', scheduler: 'rr' } }, /family does not match/],
  ['pe over 15 chars', { op: 'addService', service: { ...tcp80, scheduler: 'rr', pe: 'x'.repeat(16) } }, /persistence engine/],
  ['weight < 0', dest({ weight: -1 }), /weight must be an integer 0-2147483647, got -1/],
  ['weight > INT32_MAX', dest({ weight: 2 ** 31 }), /weight must be an integer 0-2147483647/],
  ['bad destination address', dest({ address: 'nope' }), /invalid destination address 'nope'/],
  ['mixed families without tunnel', dest({ address: 'fd00::5', forward: 'masq' }), /mixed address families/],
  ['mixed families (fwmark inet6)', dest({ address: '10.0.0.5', forward: 'droute' }, { fwmark: 1, family: 'inet6' }), /mixed address families/],
  ['unknown forward', dest({ forward: 'nat' }), /forward must be masq, local, tunnel or droute/],
  ['tunnel options without tunnel', dest({ forward: 'masq', tunnel: { type: 'gue', port: 1 } }), /need the tunnel forwarding method/],
  ['gue without port', dest({ forward: 'tunnel', tunnel: { type: 'gue' } }), /gue tunnel needs a tunnel port/],
  ['gre with port', dest({ forward: 'tunnel', tunnel: { type: 'gre', port: 5 } }), /only gue tunnels take a tunnel port/],
  ['gre remcsum', dest({ forward: 'tunnel', tunnel: { type: 'gre', checksum: 'remcsum' } }), /remote checksum/],
  ['ipip checksum', dest({ forward: 'tunnel', tunnel: { type: 'ipip', checksum: 'csum' } }), /ipip tunnels take no checksum/],
  ['unknown tunnel type', dest({ forward: 'tunnel', tunnel: { type: 'vxlan' } }), /tunnel type must be ipip, gue or gre/],
  ['threshold negative', dest({ upperThreshold: -5 }), /upperThreshold/],
  ['unknown op', { op: 'addEverything' }, /unknown op 'addEverything'/],
  ['not an object', 42, /op must be an object/],
  ['timeout negative', { op: 'setTimeouts', timeouts: { tcp: -1 } }, /tcp must be an integer/],
  ['daemon state', { op: 'startDaemon', daemon: { state: 'both', interface: 'lo' } }, /daemon state must be master or backup/],
  ['daemon mcast group not multicast', { op: 'startDaemon', daemon: { state: 'master', interface: 'lo', mcastGroup: '10.0.0.1' } }, /multicast/],
];

for (const [name, op, pattern] of cases) {
  test(`validation: ${name} → invalid, with its index`, () => invalid([ok, ok, op], 2, pattern));
}

test('validation: a mixed-family destination is accepted with the tunnel method', () => {
  const b = encodeOps([dest({ address: 'fd00::5', forward: 'tunnel' })], 0x1c);
  assert.ok(b.length > 0);
});

// ---- reply decoders ------------------------------------------------------------------------

const be16 = (v: number): Buffer => {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(v);
  return b;
};
const u64 = (v: bigint): Buffer => {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(v);
  return b;
};
const genl = (cmd: number, ...attrs: Buffer[]): Buffer => nlmsg(0x1c, 2, 1, 0, Buffer.concat([Buffer.from([cmd, 1, 0, 0]), ...attrs]));
const addr16 = (bytes: number[]): Buffer => Buffer.concat([Buffer.from(bytes), Buffer.alloc(16 - bytes.length)]);

function serviceReply(extra: Buffer[] = []): Buffer {
  return genl(
    1,
    attr(1, Buffer.concat([
      attr(1, u16(2)),
      attr(2, u16(6)),
      attr(3, addr16([10, 0, 0, 1])),
      attr(4, be16(80)),
      attr(6, Buffer.from('rr\0')),
      attr(7, Buffer.concat([u32(0x3), u32(0xffffffff)])),
      attr(8, u32(360)),
      attr(9, Buffer.from([255, 255, 255, 0])),
      ...extra,
    ])),
  );
}

test('decodeService: identity, options, hashed flag dropped, netmask as dotted mask', () => {
  const s = codec.decodeService(serviceReply());
  assert.deepEqual(s, { family: 'inet', protocol: 'tcp', address: '10.0.0.1', port: 80, scheduler: 'rr', flags: ['persistent'], timeout: 360, netmask: '255.255.255.0', stats64: false });
});

test('decodeService: STATS64 preferred over 32-bit STATS, which is the fallback', () => {
  const stats32 = attr(10, Buffer.concat([attr(1, u32(7)), attr(2, u32(8)), attr(3, u32(9)), attr(4, u64(10n)), attr(5, u64(11n)), attr(6, u32(1)), attr(7, u32(2)), attr(8, u32(3)), attr(9, u32(4)), attr(10, u32(5))]));
  const stats64 = attr(12, Buffer.concat([attr(1, u64(2n ** 40n)), attr(4, u64(2n ** 41n))]));
  const only32 = codec.decodeService(serviceReply([stats32]));
  assert.equal(only32.stats64, false);
  assert.deepEqual(only32.stats, { conns: 7, inPackets: 8, outPackets: 9, inBytes: 10, outBytes: 11, cps: 1, inPps: 2, outPps: 3, inBps: 4, outBps: 5 });
  const both = codec.decodeService(serviceReply([stats32, stats64]));
  assert.equal(both.stats64, true);
  assert.equal((both.stats as { conns: number }).conns, 2 ** 40);
  assert.equal((both.stats as { inBytes: number }).inBytes, 2 ** 41);
});

test('decodeService: fwmark service, IPv6 prefix, pe, scheduler flags named by scheduler', () => {
  const m = genl(1, attr(1, Buffer.concat([attr(1, u16(10)), attr(5, u32(9)), attr(6, Buffer.from('mh\0')), attr(11, Buffer.from('sip\0')), attr(7, Buffer.concat([u32(0x1a), u32(0xffffffff)])), attr(8, u32(0)), attr(9, u32(64))])));
  assert.deepEqual(codec.decodeService(m), { family: 'inet6', fwmark: 9, scheduler: 'mh', flags: ['mh-fallback', 'mh-port'], timeout: 0, netmask: 64, pe: 'sip', stats64: false });
});

test('decodeDest: every attribute, tunnel, mixed family', () => {
  const m = genl(
    5,
    attr(2, Buffer.concat([
      attr(1, addr16([192, 168, 1, 9])),
      attr(2, be16(8080)),
      attr(3, u32(2)),
      attr(4, u32(5)),
      attr(13, Buffer.from([1])),
      attr(14, be16(6080)),
      attr(15, u16(2)),
      attr(5, u32(100)),
      attr(6, u32(10)),
      attr(7, u32(3)),
      attr(8, u32(4)),
      attr(9, u32(5)),
      attr(11, u16(2)),
    ])),
  );
  assert.deepEqual(codec.decodeDest(m, 'inet6'), {
    family: 'inet',
    address: '192.168.1.9',
    port: 8080,
    forward: 'tunnel',
    weight: 5,
    upperThreshold: 100,
    lowerThreshold: 10,
    tunnel: { type: 'gue', port: 6080, checksum: 'remcsum' },
    activeConns: 3,
    inactiveConns: 4,
    persistentConns: 5,
    stats64: false,
  });
});

test('decodeDest: without ADDR_FAMILY (kernels before 3.18) takes the service family', () => {
  const m = genl(5, attr(2, Buffer.concat([attr(1, addr16([0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])), attr(2, be16(80)), attr(3, u32(0)), attr(4, u32(1))])));
  const d = codec.decodeDest(m, 'inet6');
  assert.equal(d.family, 'inet6');
  assert.equal(d.address, 'fd00::1');
  assert.equal(d.forward, 'masq');
});

test('decodeConfig and decodeDaemon', () => {
  assert.deepEqual(codec.decodeConfig(genl(12, attr(4, u32(900)), attr(5, u32(120)), attr(6, u32(300)))), { tcp: 900, tcpFin: 120, udp: 300 });
  const d = genl(9, attr(3, Buffer.concat([attr(1, u32(2)), attr(2, Buffer.from('eth0\0')), attr(3, u32(7)), attr(4, u16(1400)), attr(7, u16(8848)), attr(8, Buffer.from([2])), attr(5, Buffer.from([224, 0, 0, 81]))])));
  assert.deepEqual(codec.decodeDaemon(d), { state: 'backup', interface: 'eth0', syncId: 7, syncMaxLen: 1400, mcastGroup: '224.0.0.81', mcastPort: 8848, mcastTtl: 2 });
});

function rejects(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof NetlinkError);
    assert.equal(e.kind, 'invalid');
    assert.match(e.message, pattern);
    return true;
  });
}

test('malformed replies are rejected with a reason, never read out of bounds', () => {
  rejects(() => codec.decodeService(genl(1)), /no IPVS_CMD_ATTR_SERVICE/);
  rejects(() => codec.decodeService(genl(1, attr(1, attr(6, Buffer.from('rr\0'))))), /AF/);
  rejects(() => codec.decodeService(genl(1, attr(1, Buffer.concat([attr(1, u16(2)), attr(6, Buffer.from('rr\0'))])))), /neither a fwmark/);
  rejects(() => codec.decodeService(genl(1, attr(1, Buffer.concat([attr(1, u16(7)), attr(5, u32(1)), attr(6, Buffer.from('rr\0'))])))), /AF/);
  rejects(() => codec.decodeService(genl(1, attr(1, Buffer.concat([attr(1, u16(2)), attr(5, u32(1))])))), /SCHED_NAME/);
  rejects(() => codec.decodeService(genl(1, attr(1, Buffer.concat([attr(1, u32(2)), attr(5, u32(1))])))), /u16|length|size/i);
  rejects(() => codec.decodeService(genl(1, attr(1, Buffer.concat([attr(1, u16(2)), attr(3, Buffer.alloc(17)), attr(2, u16(6)), attr(4, be16(1)), attr(6, Buffer.from('rr\0'))])))), /./);
  // A truncated attribute header inside the nest.
  const bad = serviceReply();
  bad.writeUInt16LE(0xfff0, 20);
  rejects(() => codec.decodeService(bad), /./);
  rejects(() => codec.decodeDest(genl(5, attr(2, attr(1, addr16([1, 2, 3, 4]))))), /without address or port/);
  rejects(() => codec.decodeDest(genl(5, attr(2, Buffer.concat([attr(1, addr16([1])), attr(2, be16(1)), attr(11, u16(99))])))), /unknown address family 99/);
  rejects(() => codec.decodeConfig(genl(12)), /no timeout attributes/);
  rejects(() => codec.decodeDaemon(genl(9, attr(3, attr(2, Buffer.from('x\0'))))), /STATE/);
  rejects(() => codec.decodeDaemon(genl(9, attr(3, Buffer.concat([attr(1, u32(1)), attr(5, Buffer.from([1, 2, 3]))])))), /./);
  rejects(() => codec.decodeService(Buffer.from([1, 2, 3])), /shorter than a netlink header/);
});

test("apply's default form: the same requests without NLM_F_ACK (the kernel answers failures only)", () => {
  const want = fixture('new-service-v4').at(-1)!;
  const ops: IpvsOp[] = [{ op: 'addService', service: { ...tcp80, scheduler: 'rr' } }];
  const quiet = encodeOps(ops, familyOf(want), { ack: 'errors' });
  const expected = Buffer.from(want);
  expected.writeUInt16LE(1, 6); // NLM_F_REQUEST only
  assert.equal(hex(quiet), hex(expected));
  assert.equal(hex(encodeOps(ops, familyOf(want), { ack: 'each' })), hex(want));
  assert.throws(() => encodeOps(ops, 1, { ack: 'some' as 'each' }), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid');
});

test('a batch of destination ops sharing service objects encodes exactly as each op alone (the converter reuses a service key only for the very same object)', () => {
  const a = { protocol: 'tcp' as const, address: '10.96.0.1', port: 80 };
  const b = { protocol: 'udp' as const, address: '10.96.0.2', port: 53 };
  const a2 = { ...a, port: 81 }; // equal-looking object, another key
  const f = { fwmark: 7 };
  const d = (service: object, ip: string): IpvsOp => ({ op: 'addDestination', service, dest: { address: ip, port: 8080, forward: 'masq', weight: 1 } }) as IpvsOp;
  const ops: IpvsOp[] = [d(a, '10.244.0.1'), d(a, '10.244.0.2'), d(b, '10.244.0.3'), d(a, '10.244.0.4'), d(a2, '10.244.0.5'), d(f, '10.244.0.6'), d(f, '10.244.0.7'), { op: 'deleteDestination', service: a, dest: { address: '10.244.0.1', port: 8080 } }];
  const whole = hex(encodeOps(ops, 42));
  const each = ops.map((o) => hex(encodeOps([o], 42))).join(' ');
  // sequence numbers are zero in both encodings: the bytes must match exactly
  assert.equal(whole, each);
  // and a bad service after a good one is still rejected with its index
  assert.throws(() => encodeOps([d(a, '10.244.0.1'), d({ protocol: 'tcp', address: 'nope', port: 1 }, '10.244.0.2')], 42), (e: NetlinkError) => e.index === 1);
});
