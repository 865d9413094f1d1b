// The ipset save/restore text format without a kernel: element parsing per type, restore
// planning (merged ADT ops, line bookkeeping, -exist), syntax errors naming the line, and seeded
// fuzzing of the reply decoder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatCreate, formatElement, formatMemberOptions, parseElement, parseRestore, RestoreSyntaxError } from '../../src/formats/ipset.js';
import { native } from '../../src/native.js';
import { NetlinkError } from '../../src/errors.js';
import { prng } from '../helpers/bytes.js';

test('elements: parse and format round-trip for every modelled type', () => {
  const cases: Array<[string, 'inet' | 'inet6' | undefined, string]> = [
    ['hash:ip', 'inet', '10.0.0.1'],
    ['hash:ip', 'inet6', 'fd00::1'],
    ['hash:ip,port', 'inet', '10.0.0.1,udp:53'],
    ['hash:ip,port', 'inet', '10.0.0.1,icmp:echo-request'],
    ['hash:ip,port', 'inet', '10.0.0.1,icmp:7/7'],
    ['hash:ip,port', 'inet6', 'fd00::1,ipv6-icmp:packet-too-big'],
    ['hash:ip,port', 'inet', '10.0.0.1,gre:0'],
    ['hash:ip,port,ip', 'inet', '10.0.0.1,sctp:9,10.0.0.2'],
    ['hash:ip,port,net', 'inet6', 'fd00::1,tcp:80,fd00::/64'],
    ['hash:net', 'inet', '10.0.0.0/8'],
    ['hash:net', 'inet', '10.0.0.1'],
    ['hash:net,port', 'inet6', 'fd00::/120,udplite:1'],
    ['hash:net,net', 'inet', '10.0.0.0/8,192.168.0.0/16'],
    ['hash:net,port,net', 'inet', '10.0.0.0/8,tcp:1,10.1.0.0/16'],
    ['bitmap:port', undefined, '1024'],
  ];
  for (const [type, family, text] of cases) {
    const m = parseElement(type as never, family, text);
    assert.equal(formatElement({ type, family }, m), text, `${type} ${text}`);
  }
  assert.deepEqual(parseElement('hash:ip,port', 'inet', '10.0.0.1,80'), { ip: '10.0.0.1', proto: 'tcp', port: 80 });
  assert.deepEqual(parseElement('hash:ip,port', 'inet', '10.0.0.1,icmp:ping'), { ip: '10.0.0.1', proto: 'icmp', port: 8 << 8 });
  assert.equal(formatMemberOptions({ timeout: 3, nomatch: true, packets: 1n, bytes: 2n, comment: 'a b', skbmark: 5, skbmarkmask: 0xff, skbprio: 0x10002, skbqueue: 4 }),
    ' timeout 3 nomatch packets 1 bytes 2 comment "a b" skbmark 0x5/0xff skbprio 1:2 skbqueue 4');
  assert.equal(formatCreate({ name: 'x', type: 'hash:ip', family: 'inet6', hashsize: 1024, maxelem: 10, netmask: 64, timeout: 0, counters: true, bucketsize: 12, initval: 0x1234 }),
    'create x hash:ip family inet6 hashsize 1024 maxelem 10 netmask 64 timeout 0 counters bucketsize 12 initval 0x00001234');
  assert.equal(formatCreate({ name: 'p', type: 'bitmap:port', range: { from: 1, to: 9 }, comment: true }), 'create p bitmap:port range 1-9 comment');
});

test('restore: consecutive adds become one op per set, lines are kept, -exist and short commands', () => {
  const known = new Map([['old', { type: 'hash:ip' as const, family: 'inet' as const }]]);
  const plan = parseRestore(
    [
      '# comment',
      'create a hash:ip,port family inet6 hashsize 64',
      'add a fd00::1,udp:53',
      'add a fd00::2,tcp:80 timeout 5',
      '',
      'add old 10.0.0.1',
      '-A a fd00::3,sctp:1',
      'add -exist a fd00::4,tcp:1',
      'del a fd00::1,udp:53',
      'swap a b',
      'rename old new',
      'flush new',
      'destroy a',
      'COMMIT',
    ].join('\n'),
    known,
  );
  assert.deepEqual(plan.ops.map((o) => `${o.op} ${o.name}`), ['create a', 'add a', 'add old', 'add a', 'add a', 'del a', 'swap a', 'rename old', 'flush new', 'destroy a']);
  assert.deepEqual(plan.lines, [[2], [3, 4], [6], [7], [8], [9], [10], [11], [12], [13]]);
  const add = plan.ops[1] as { members: unknown[]; type: string; family: string; exist: boolean };
  assert.equal(add.members.length, 2);
  assert.equal(add.type, 'hash:ip,port');
  assert.equal(add.family, 'inet6');
  assert.equal((plan.ops[4] as { exist: boolean }).exist, true);
  assert.equal((plan.ops[3] as { exist: boolean }).exist, false);
  const all = parseRestore('add old 10.0.0.1\n', known, { exist: true });
  assert.equal((all.ops[0] as { exist: boolean }).exist, true);
});

test('restore: syntax errors name the line', () => {
  const known = new Map([['s', { type: 'hash:ip,port' as const, family: 'inet' as const }]]);
  const err = (text: string, line: number, re: RegExp) =>
    assert.throws(() => parseRestore(text, known), (e: unknown) => e instanceof RestoreSyntaxError && e.line === line && re.test(e.message));
  err('add s 10.0.0.1,80\nadd s 10.0.0.1', 2, /does not match hash:ip,port/);
  err('add nope 10.0.0.1', 1, /The set with the given name does not exist: nope/);
  err('\n\ncreate x hash:mac', 3, /set type 'hash:mac' is not supported/);
  err('create x bitmap:port', 1, /needs range/);
  err('add s 10.0.0.1,tcp:65536', 1, /'65536' is not a valid port/);
  err('add s fd00::1,tcp:1', 1, /not an IPv4 address/);
  err('add s 10.0.0.1,icmpv6:1/0', 1, /ICMPv6 can be used with family inet6 only/);
  err('add s 10.0.0.1,gre:5', 1, /pseudo port value 0 only/);
  err('add s 10.0.0.1-10.0.0.5,tcp:1', 1, /ranges are not supported/);
  err('add s 10.0.0.1,tcp:1 comment "open', 1, /unterminated/);
  err('add s 10.0.0.1,tcp:1 bogus', 1, /unknown element option 'bogus'/);
  err('create ' + 'x'.repeat(32) + ' hash:ip', 1, /longer than 31 bytes/);
  err('flush', 1, /name the set/);
  err('frobnicate s', 1, /unknown command/);
  err('create s2 hash:ip\n-exist', 2, /no command specified/);
  err('-!', 1, /no command specified/);
});

test(`ipset reply decoder survives seeded random and mutated input`, () => {
  const codec = native().codec.ipset;
  const rand = prng(Number(process.env.FUZZ_SEED ?? 0x15c));
  // a real-looking LIST message: header + one member
  const seed = Buffer.from(
    '5c000000070602000000000000000000020000000500010007000000070002007331000010000300686173683a69702c706f727400000000' +
      '0500050002000000050004000700000014000880100007800c00018008000140' + '0a000001',
    'hex',
  );
  seed.writeUInt32LE(seed.length, 0);
  let accepted = 0;
  let rejected = 0;
  for (let i = 0; i < 20000; i++) {
    const b = Buffer.from(seed);
    const edits = 1 + Math.floor(rand() * 4);
    let input = b;
    for (let k = 0; k < edits; k++) {
      const pos = Math.floor(rand() * b.length);
      if (rand() < 0.8) b[pos] = Math.floor(rand() * 256);
      else input = b.subarray(0, pos);
    }
    for (const f of [codec.decodeList, codec.decodeProtocol, codec.decodeType]) {
      try {
        f(input);
        accepted++;
      } catch (e) {
        assert.ok(e instanceof NetlinkError && e.kind === 'invalid', `${String(e)} on ${input.toString('hex')}`);
        rejected++;
      }
    }
  }
  assert.ok(accepted > 0 && rejected > 0, `accepted ${accepted}, rejected ${rejected}`);
});
