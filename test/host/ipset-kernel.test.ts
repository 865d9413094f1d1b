// ipset against the machine's own kernel in a private network namespace
// (scripts/host-tests.sh), cross-checked both ways with the ipset tool: `ipset save` reads what
// ipvsync wrote, and what `ipset restore` wrote, ipvsync lists and saves identically.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { IpSets, type IpSetMember, type IpSetOp, type IpSetSpec } from '../../src/kernel/ipsets.js';
import { formatSave } from '../../src/formats/ipset.js';
import { NetlinkError } from '../../src/errors.js';
import { native } from '../../src/native.js';

const ipset = (...args: string[]) => execFileSync('ipset', args, { encoding: 'utf8' });
const ipsetRestore = (text: string) => execFileSync('ipset', ['restore'], { input: text, encoding: 'utf8' });
const cli = (args: string[], input?: string) =>
  spawnSync(process.execPath, ['dist/src/cli/main.js', ...args], { input, encoding: 'utf8' });

beforeEach(() => {
  ipset('destroy');
});

// Every modelled type the host kernel has, in both families, with members exercising each
// component and extension.
const cases: Array<{ spec: IpSetSpec; members: IpSetMember[] }> = [
  { spec: { name: 'ip4', type: 'hash:ip', family: 'inet', hashsize: 64, maxelem: 100 }, members: [{ ip: '10.0.0.1' }, { ip: '10.0.0.2' }] },
  { spec: { name: 'ip6', type: 'hash:ip', family: 'inet6', comment: true }, members: [{ ip: 'fd00::1', comment: 'one' }, { ip: '::ffff:1.2.3.4' }] },
  {
    spec: { name: 'ipport4', type: 'hash:ip,port', family: 'inet', counters: true },
    members: [{ ip: '10.0.0.1', proto: 'tcp', port: 80 }, { ip: '10.0.0.1', proto: 'udp', port: 53, packets: 7, bytes: 700 }, { ip: '10.0.0.2', proto: 'sctp', port: 65535 }, { ip: '10.0.0.3', proto: 'icmp', port: 8 << 8 }],
  },
  {
    spec: { name: 'ipport6', type: 'hash:ip,port', family: 'inet6', timeout: 0 },
    members: [{ ip: 'fd00::1', proto: 'udp', port: 0, timeout: 0 }, { ip: 'fd00::2', proto: 'icmpv6', port: 128 << 8, timeout: 0 }, { ip: 'fd00::3', proto: 47, port: 0, timeout: 0 }],
  },
  { spec: { name: 'ipportip4', type: 'hash:ip,port,ip', family: 'inet' }, members: [{ ip: '10.0.0.1', proto: 'tcp', port: 443, ip2: '10.0.0.1' }, { ip: '10.0.0.9', proto: 'udp', port: 1, ip2: '192.168.1.1' }] },
  { spec: { name: 'ipportip6', type: 'hash:ip,port,ip', family: 'inet6' }, members: [{ ip: 'fd00::1', proto: 'tcp', port: 443, ip2: 'fd00::1' }] },
  {
    spec: { name: 'ipportnet4', type: 'hash:ip,port,net', family: 'inet' },
    members: [{ ip: '10.0.0.1', proto: 'tcp', port: 80, ip2: '10.0.0.0/8' }, { ip: '10.0.0.1', proto: 'tcp', port: 81, ip2: '10.1.2.3' }, { ip: '10.0.0.1', proto: 'tcp', port: 82, ip2: '10.2.0.0', cidr2: 16, nomatch: true }],
  },
  { spec: { name: 'ipportnet6', type: 'hash:ip,port,net', family: 'inet6' }, members: [{ ip: 'fd00::1', proto: 'udp', port: 53, ip2: 'fd01::/48' }] },
  { spec: { name: 'net4', type: 'hash:net', family: 'inet', maxelem: 1000 }, members: [{ ip: '10.0.0.0/8' }, { ip: '192.168.1.1' }, { ip: '172.16.0.0/12', nomatch: true }] },
  { spec: { name: 'net6', type: 'hash:net', family: 'inet6', skbinfo: true }, members: [{ ip: 'fd00::/8' }, { ip: '2001:db8::1', skbmark: 5, skbmarkmask: 0xff, skbqueue: 3 }] },
  { spec: { name: 'netport4', type: 'hash:net,port', family: 'inet' }, members: [{ ip: '10.0.0.0/24', proto: 'tcp', port: 8080 }, { ip: '10.0.1.5', proto: 'udp', port: 53 }] },
  { spec: { name: 'netport6', type: 'hash:net,port', family: 'inet6', comment: true }, members: [{ ip: 'fd00::/64', proto: 'tcp', port: 1, comment: 'with spaces in it' }] },
  { spec: { name: 'bports', type: 'bitmap:port', range: { from: 1, to: 1024 }, counters: true }, members: [{ port: 22 }, { port: 1024, packets: 1, bytes: 2 }] },
];

test('every type, v4 and v6: ipvsync creates and fills, `ipset save` reads exactly what ipvsync saves', async () => {
  const s = await IpSets.open();
  assert.equal(await s.protocol(), 7);
  const ops: IpSetOp[] = [];
  for (const c of cases) ops.push({ op: 'create', ...c.spec }, { op: 'add', name: c.spec.name, members: c.members });
  const r = await s.apply(ops);
  assert.deepEqual(r.errors, []);
  assert.ok(r.ok);
  const theirs = ipset('save');
  const ours = formatSave(await s.list());
  assert.equal(ours, theirs);
  // and the typed model carries what was written
  const sets = await s.list();
  for (const c of cases) {
    const got = sets.find((x) => x.name === c.spec.name);
    assert.ok(got, c.spec.name);
    assert.equal(got.type, c.spec.type);
    assert.equal(got.members!.length, c.members.length, c.spec.name);
    if (!c.spec.type.startsWith('bitmap:')) assert.equal(got.family, c.spec.family);
  }
  const net4 = sets.find((x) => x.name === 'net4')!;
  assert.ok(net4.members!.some((m) => m.ip === '172.16.0.0' && m.cidr === 12 && m.nomatch === true));
  const ipport4 = sets.find((x) => x.name === 'ipport4')!;
  const counted = ipport4.members!.find((m) => m.port === 53)!;
  assert.equal(counted.packets, 7n);
  assert.equal(counted.bytes, 700n);
  // one dump for every set
  const before = s.socketStats().sendmsgCalls;
  await s.list();
  assert.equal(s.socketStats().sendmsgCalls - before, 1);
});

test('what `ipset restore` wrote, ipvsync lists and saves identically (every type, both families)', async () => {
  const input = [
    'create a hash:ip family inet6 hashsize 64 maxelem 100 netmask 64',
    'add a fd00:1:2:3::',
    'create b hash:net family inet timeout 0 counters comment',
    'add b 10.3.0.1 timeout 0 packets 1 bytes 2 comment "c d"',
    'add b 10.2.0.0/24 timeout 0 nomatch',
    'create c hash:ip,port,ip family inet',
    'add c 10.0.0.1,udp:53,10.0.0.2',
    'add c 10.0.0.1,icmp:echo-request,10.0.0.2',
    'add c 10.0.0.1,gre:0,10.0.0.2',
    'create d hash:ip,port,net family inet6',
    'add d fd00::1,tcp:80,fd00::/64',
    'add d fd00::1,ipv6-icmp:packet-too-big,fd00::1',
    'create e hash:net,port family inet6',
    'add e fd00::/32,sctp:9',
    'create f bitmap:port range 100-200 comment',
    'add f 150 comment "x"',
    'create g hash:ip,port family inet skbinfo',
    'add g 1.2.3.4,udplite:7 skbmark 0x1/0xff skbprio 1:2',
    '',
  ].join('\n');
  ipsetRestore(input);
  const s = await IpSets.open();
  assert.equal(formatSave(await s.list()), ipset('save'));
  for (const name of ['a', 'c', 'f']) assert.equal(formatSave(await s.list(name)), ipset('save', name));
});

test('CLI: `ipvsync ipset save` prints `ipset save`; `ipvsync ipset restore` of it rebuilds the same state', async () => {
  const s = await IpSets.open();
  const ops: IpSetOp[] = [];
  for (const c of cases) ops.push({ op: 'create', ...c.spec }, { op: 'add', name: c.spec.name, members: c.members });
  assert.ok((await s.apply(ops)).ok);
  const saved = ipset('save');
  const ours = cli(['ipset', 'save']);
  assert.equal(ours.status, 0, ours.stderr);
  assert.equal(ours.stdout, saved);
  assert.equal(cli(['ipset', 'save', 'net6']).stdout, ipset('save', 'net6'));
  ipset('destroy');
  const r = cli(['ipset', 'restore'], saved);
  assert.equal(r.status, 0, r.stderr);
  // initval and bucketsize travel too, so even the hash order is the same
  assert.equal(ipset('save'), saved);
});

test('CLI restore: a syntax error names the line and applies nothing; kernel errors name the lines', async () => {
  ipset('create', 'keep', 'hash:ip');
  const bad = ['create n1 hash:ip', 'add n1 10.0.0.1', 'add n1 10.0.0.2,80', 'add keep 10.0.0.3', ''].join('\n');
  const r = cli(['ipset', 'restore'], bad);
  assert.equal(r.status, 2, 'bad input: exit 2, nothing applied');
  assert.match(r.stderr, /line 3: '10.0.0.2,80' does not match hash:ip/);
  assert.match(r.stderr, /nothing was applied/);
  assert.equal(ipset('save'), ipset('save', 'keep'), 'no new set');
  assert.equal(ipset('list', 'keep', '-t').match(/Number of entries: (\d+)/)![1], '0');
  // validated in the addon (port range) before anything is sent: still nothing applied
  const bad2 = ['create n2 hash:ip,port', 'add n2 10.0.0.1,tcp:80', 'add n2 10.0.0.1,tcp:99999', ''].join('\n');
  const r2 = cli(['ipset', 'restore'], bad2);
  assert.equal(r2.status, 2);
  assert.match(r2.stderr, /line 3: '99999' is not a valid port \(0-65535\); nothing was applied/);
  // parsed fine, rejected by the addon's validation: mapped back to its line, nothing applied
  const bad3 = ['create n2 hash:ip,port', 'add n2 10.0.0.1,tcp:80', 'add n2 10.0.0.1,tcp:81 nomatch', ''].join('\n');
  const r3a = cli(['ipset', 'restore'], bad3);
  assert.equal(r3a.status, 2);
  assert.match(r3a.stderr, /line 3: op 1 \(add n2\) member 1: nomatch needs a net component; hash:ip,port has none; nothing was applied/);
  assert.doesNotMatch(ipset('list', '-n'), /n2/);
  // kernel error: element already added, without -exist
  const dup = ['add keep 10.0.0.9', 'add keep 10.0.0.9', ''].join('\n');
  const r3 = cli(['ipset', 'restore'], dup);
  assert.equal(r3.status, 1);
  // the kernel's echo names the failing member: the second line, exactly
  assert.match(r3.stderr, /error in line 2: IPSET_CMD_ADD keep: Element cannot be added to the set: it's already added \(IPSET_ERR_EXIST\) \[member 1 failed/);
  // -exist (flag or per line) makes it idempotent
  assert.equal(cli(['ipset', 'restore', '--exist'], dup).status, 0);
  assert.equal(cli(['ipset', 'restore'], 'add -exist keep 10.0.0.9\n').status, 0);
});

test('add/del/test many members per message; -exist semantics; typed ipset errors', async () => {
  const s = await IpSets.open();
  assert.ok((await s.apply([{ op: 'create', name: 'svc', type: 'hash:ip,port', family: 'inet6' }])).ok);
  const members: IpSetMember[] = Array.from({ length: 3000 }, (_, i) => ({ ip: `fd00::${(i + 1).toString(16)}`, proto: i % 2 ? 'udp' : 'tcp', port: 1 + i }));
  const r = await s.apply([{ op: 'add', name: 'svc', members }]);
  assert.ok(r.ok);
  // stop-on-error (the default) sends one ADT message at a time, each of hundreds of members
  const messages = native().codec.parseMessages(
    native().codec.ipset.encodeOps([{ op: 'add', name: 'svc', type: 'hash:ip,port', family: 'inet6', members }]),
  ).length;
  assert.ok(messages <= 6, `${messages} messages for 3000 members`);
  assert.equal(r.sendmsgCalls, messages);
  assert.equal(ipset('list', 'svc', '-t').match(/Number of entries: (\d+)/)![1], '3000');
  assert.deepEqual(await s.test('svc', [members[0]!, { ip: 'fd00::1', proto: 'udp', port: 1 }, members[2999]!]), [true, false, true]);

  // without exist: the existing member fails the op with ipset's error
  const dup = await s.apply([{ op: 'add', name: 'svc', members: [members[5]!] }]);
  assert.equal(dup.status(0), 'error');
  const e = dup.errorOf(0)!;
  assert.ok(e instanceof NetlinkError);
  assert.equal(e.code, 'IPSET_ERR_EXIST');
  assert.equal(e.errno, 4103);
  assert.equal(e.kind, 'kernel');
  assert.match(e.message, /Element cannot be added to the set: it's already added/);
  // with exist: fine
  assert.ok((await s.apply([{ op: 'add', name: 'svc', members: members.slice(0, 10), exist: true }])).ok);

  // del half, in one op; del of an absent member is an error without exist, fine with it
  assert.ok((await s.apply([{ op: 'del', name: 'svc', members: members.slice(0, 1500) }])).ok);
  assert.equal(ipset('list', 'svc', '-t').match(/Number of entries: (\d+)/)![1], '1500');
  const gone = await s.apply([{ op: 'del', name: 'svc', members: [members[0]!] }]);
  assert.equal(gone.errorOf(0)!.code, 'IPSET_ERR_EXIST');
  assert.match(gone.errorOf(0)!.message, /Element cannot be deleted from the set: it's not added/);
  assert.ok((await s.apply([{ op: 'del', name: 'svc', members: [members[0]!], exist: true }])).ok);
});

test('create/rename/swap/flush/destroy and their kernel errors, mapped to op indexes', async () => {
  const s = await IpSets.open();
  const r = await s.apply(
    [
      { op: 'create', name: 'a', type: 'hash:ip' },
      { op: 'create', name: 'b', type: 'hash:ip' },
      { op: 'create', name: 'c', type: 'hash:net' },
      { op: 'add', name: 'a', members: [{ ip: '10.0.0.1' }] },
      { op: 'create', name: 'a', type: 'hash:ip' }, // EEXIST
      { op: 'swap', name: 'a', with: 'c' }, // type mismatch
      { op: 'rename', name: 'b', to: 'c' }, // name taken
      { op: 'swap', name: 'a', with: 'nope' }, // second set missing
      { op: 'flush', name: 'nope' }, // ENOENT
      { op: 'create', name: 'a', type: 'hash:ip', exist: true }, // -exist: same set, fine
    ],
    { stopOnError: false },
  );
  const codes = [4, 5, 6, 7, 8].map((i) => r.errorOf(i)?.code);
  assert.deepEqual(codes, ['EEXIST', 'IPSET_ERR_TYPE_MISMATCH', 'IPSET_ERR_EXIST_SETNAME2', 'IPSET_ERR_EXIST_SETNAME2', 'ENOENT']);
  assert.match(r.errorOf(4)!.message, /Set cannot be created: set with the same name already exists/);
  assert.match(r.errorOf(5)!.message, /IPSET_CMD_SWAP a c: The sets cannot be swapped: their type does not match/);
  assert.match(r.errorOf(6)!.message, /Set cannot be renamed: a set with the new name already exists/);
  assert.match(r.errorOf(7)!.message, /Sets cannot be swapped: the second set does not exist/);
  assert.match(r.errorOf(8)!.message, /The set with the given name does not exist/);
  for (const i of [0, 1, 2, 3, 9]) assert.equal(r.status(i), 'ok', `op ${i}`);

  // stop-on-error (the default): nothing after the failing op is sent
  const stop = await s.apply([
    { op: 'flush', name: 'nope' },
    { op: 'destroy', name: 'b' },
  ]);
  assert.equal(stop.status(0), 'error');
  assert.equal(stop.status(1), 'not-sent');
  assert.match(ipset('list', '-n'), /^b$/m);

  // atomic refill: fill a temporary set, swap, destroy the old one
  const refill = await s.apply([
    { op: 'create', name: 'a-tmp', type: 'hash:ip' },
    { op: 'add', name: 'a-tmp', members: [{ ip: '10.9.9.9' }] },
    { op: 'swap', name: 'a-tmp', with: 'a' },
    { op: 'destroy', name: 'a-tmp' },
    { op: 'rename', name: 'b', to: 'b2' },
    { op: 'add', name: 'b2', members: [{ ip: '10.1.1.1' }] },
  ]);
  assert.ok(refill.ok, refill.errors.map((x) => x.message).join('; '));
  assert.match(ipset('save', 'a'), /^add a 10\.9\.9\.9$/m);
  assert.doesNotMatch(ipset('save', 'a'), /10\.0\.0\.1/);
  assert.match(ipset('save', 'b2'), /^add b2 10\.1\.1\.1$/m);
  assert.ok((await s.apply([{ op: 'flush', name: 'a' }, { op: 'destroy', name: 'c' }])).ok);
  assert.doesNotMatch(ipset('save'), /add a |create c /);
});

test('bad input: typed invalid errors, nothing sent, nothing changed', async () => {
  ipset('create', 'v4', 'hash:ip,port');
  ipset('create', 'bp', 'bitmap:port', 'range', '1-100');
  const s = await IpSets.open();
  await s.headers();
  const before = ipset('save');
  const sent = s.socketStats().sendmsgCalls;
  const cases: Array<[IpSetOp[], RegExp]> = [
    [[{ op: 'create', name: '', type: 'hash:ip' }], /set name is empty/],
    [[{ op: 'create', name: 'n'.repeat(32), type: 'hash:ip' }], /at most 31/],
    [[{ op: 'add', name: 'v4', members: [{ ip: '10.0.0.1' }] }], /hash:ip,port members need port/],
    [[{ op: 'add', name: 'v4', members: [{ ip: '10.0.0.1', port: 70000 }] }], /port is out of range 0-65535/],
    [[{ op: 'add', name: 'v4', members: [{ ip: 'fd00::1', port: 1 }] }], /is IPv6 but the set is family inet/],
    [[{ op: 'add', name: 'bp', members: [{ port: 5, proto: 'udp' }] }], /bitmap:port members take no proto/],
    // a valid op first: the whole batch is still rejected before anything is sent
    [[{ op: 'add', name: 'v4', members: [{ ip: '10.0.0.1', port: 1 }] }, { op: 'flush', name: 'x'.repeat(40) }], /op 1 .*at most 31/],
    [[{ op: 'add', name: 'no-such-set', members: [{ ip: '10.0.0.1' }] }], /The set with the given name does not exist/],
  ];
  for (const [ops, re] of cases) {
    await assert.rejects(s.apply(ops), (e: unknown) => {
      assert.ok(e instanceof NetlinkError, String(e));
      assert.equal(e.kind, 'invalid');
      assert.match(e.message, re);
      return true;
    });
  }
  // only the header dump for the unknown set went out; nothing changed
  assert.ok(s.socketStats().sendmsgCalls - sent <= 1);
  assert.equal(ipset('save'), before);
  // out of a bitmap's range: the kernel's own typed error, and still nothing changed
  const r = await s.apply([{ op: 'add', name: 'bp', members: [{ port: 101 }] }]);
  assert.equal(r.errorOf(0)!.code, 'IPSET_ERR_BITMAP_RANGE');
  assert.match(r.errorOf(0)!.message, /Element is out of the range of the set/);
  assert.equal(ipset('save'), before);
});

test('100k members into hash:ip,port,ip: one apply, few syscalls, all there', async () => {
  const s = await IpSets.open();
  const members: IpSetMember[] = [];
  for (let i = 0; i < 100_000; i++) {
    members.push({ ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, proto: 'tcp', port: 80 + (i % 7), ip2: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}` });
  }
  const r = await s.apply(
    [
      { op: 'create', name: 'big', type: 'hash:ip,port,ip', maxelem: 200_000, hashsize: 65536 },
      { op: 'add', name: 'big', members },
    ],
    { stopOnError: false }, // pipelined, as the engine sends it
  );
  assert.ok(r.ok, r.errors.map((e) => e.message).join('; '));
  assert.ok(r.sendmsgCalls < 20, `${r.sendmsgCalls} sendmsg calls`);
  assert.equal(ipset('list', 'big', '-t').match(/Number of entries: (\d+)/)![1], '100000');
  const listed = (await s.list('big'))[0]!;
  assert.equal(listed.members!.length, 100_000);
  const seen = new Set(listed.members!.map((m) => `${m.ip},${m.port},${m.ip2}`));
  assert.equal(seen.size, 100_000);
  for (const i of [0, 4242, 99_999]) assert.ok(seen.has(`${members[i]!.ip},${members[i]!.port},${members[i]!.ip2}`));
});
