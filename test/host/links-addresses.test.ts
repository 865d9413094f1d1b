// Links and addresses against the machine's own kernel in a private network namespace
// (scripts/host-tests.sh). It has no dummy type, so bridge and veth links stand in here;
// kube-ipvs0 itself is tested in the VM (test/kernel/links-dummy.test.ts). Cross-checked both
// ways with `ip -j addr` / `ip -j link`; addresses' protocol (which this iproute2 does not show)
// with a reader of its own (test/helpers/ifa-proto.ts).
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { IPVSYNC_ADDRESS_PROTOCOL, Links } from '../../src/kernel/links.js';
import { addProtoAddress, protoAddresses } from '../helpers/ifa-proto.js';
import { NetlinkError } from '../../src/errors.js';

const ip = (...args: string[]) => execFileSync('ip', args, { encoding: 'utf8' });
interface IpAddr { ifname: string; addr_info: Array<{ family: string; local: string; prefixlen: number; scope: string }> }
const theirAddrs = (dev?: string) =>
  (JSON.parse(ip('-j', 'addr', 'show', ...(dev ? ['dev', dev] : []))) as IpAddr[])
    .flatMap((l) => l.addr_info.map((a) => `${l.ifname} ${a.family} ${a.local}/${a.prefixlen} ${a.scope}`))
    .sort();

afterEach(() => {
  for (const l of ['vb0', 'vb1', 'va0']) spawnSync('ip', ['link', 'del', l]);
});

test('bridge link: create, get, set up/down, delete; EEXIST on a second create; ip -j link agrees', async () => {
  const l = await Links.open();
  const r = await l.apply([
    { op: 'addLink', name: 'vb0', kind: 'bridge', mtu: 1400 },
    { op: 'setLink', name: 'vb0', up: true },
    { op: 'addLink', name: 'vb0', kind: 'bridge' },
  ], { stopOnError: false });
  assert.equal(r.status(0), 'ok');
  assert.equal(r.status(1), 'ok');
  assert.equal(r.errorOf(2)?.code, 'EEXIST');
  const got = await l.get('vb0');
  assert.ok(got);
  assert.equal(got.kind, 'bridge');
  assert.equal(got.mtu, 1400);
  assert.equal(got.up, true);
  const theirs = JSON.parse(ip('-j', 'link', 'show', 'vb0'))[0] as { ifindex: number; flags: string[]; mtu: number };
  assert.equal(theirs.ifindex, got.index);
  assert.ok(theirs.flags.includes('UP'));
  assert.ok((await l.list()).some((x) => x.name === 'vb0'));
  assert.ok((await l.apply([{ op: 'setLink', index: got.index, up: false }])).ok);
  assert.ok(!(JSON.parse(ip('-j', 'link', 'show', 'vb0'))[0] as { flags: string[] }).flags.includes('UP'));
  assert.equal((await l.apply([{ op: 'addLink', name: 'vb0', kind: 'bridge', exist: true }])).ok, true, 'exist: no error');
  assert.ok((await l.apply([{ op: 'delLink', name: 'vb0' }])).ok);
  assert.equal(await l.get('vb0'), null);
  const gone = await l.apply([{ op: 'delLink', name: 'vb0' }]);
  assert.equal(gone.errorOf(0)?.code, 'ENODEV');
});

test('many addresses per call (/32, /128, any prefix), EEXIST per op, deletes; ip -j addr agrees both ways', async () => {
  const l = await Links.open();
  assert.ok((await l.apply([{ op: 'addLink', name: 'vb0', kind: 'bridge' }, { op: 'setLink', name: 'vb0', up: true }])).ok);
  const v4 = Array.from({ length: 500 }, (_, i) => `10.96.${(i + 1) >> 8}.${(i + 1) & 255}`);
  const v6 = Array.from({ length: 500 }, (_, i) => `fd00::${(i + 1).toString(16)}`);
  const extra = ['192.168.50.1/24', 'fd01::1/64'];
  const r = await l.apply([...v4, ...v6, ...extra].map((address) => ({ op: 'addAddr', link: 'vb0', address })), { stopOnError: false });
  assert.deepEqual(r.errors, []);
  assert.ok(r.sendmsgCalls <= 4, `${r.sendmsgCalls} sendmsg calls for 1002 addresses`);
  // ours -> theirs
  const listed = await l.addresses({ link: 'vb0' });
  const ours = listed.map((a) => `${a.link} ${a.family} ${a.address}/${a.prefixlen} ${a.scope}`).sort();
  assert.deepEqual(ours, theirAddrs('vb0'));
  assert.ok(listed.some((a) => a.address === '10.96.0.1' && a.prefixlen === 32));
  assert.ok(listed.some((a) => a.address === 'fd00::1' && a.prefixlen === 128));
  assert.ok(listed.some((a) => a.address === '192.168.50.1' && a.prefixlen === 24));

  // the same addresses again: each op reports EEXIST distinctly, the new one works
  const again = await l.apply([v4[3]!, 'fd00::dead', v6[7]!].map((address) => ({ op: 'addAddr', link: 'vb0', address })), { stopOnError: false });
  assert.deepEqual([0, 1, 2].map((i) => again.status(i)), ['error', 'ok', 'error']);
  assert.deepEqual([again.errorOf(0)!.code, again.errorOf(2)!.code], ['EEXIST', 'EEXIST']);
  assert.equal(again.errorOf(0)!.index, 0);
  assert.equal(again.errorOf(0)!.kind, 'kernel');
  assert.match(again.errorOf(0)!.message, /RTM_NEWADDR 10\.96\.0\.4\/32 dev vb0: EEXIST/);
  assert.ok((await l.apply([v4[3]!, v6[7]!].map((address) => ({ op: 'addAddr', link: 'vb0', address, exist: true })), { stopOnError: false })).ok, 'exist: replace, no error');

  // theirs -> ours: iproute2 adds and removes, we see it
  ip('addr', 'add', '172.31.0.1/16', 'dev', 'vb0');
  ip('addr', 'del', `${v4[0]}/32`, 'dev', 'vb0');
  const seen = (await l.addresses({ link: 'vb0', family: 'inet' })).map((a) => `${a.address}/${a.prefixlen}`);
  assert.ok(seen.includes('172.31.0.1/16'));
  assert.ok(!seen.includes(`${v4[0]}/32`));
  assert.ok((await l.addresses({ link: 'vb0', family: 'inet' })).every((a) => a.family === 'inet'));

  // delete all of ours; a missing one is a distinct per-op error
  const del = await l.apply([...v4.slice(1), ...v6, '10.250.0.1'].map((address) => ({ op: 'delAddr', link: 'vb0', address })), { stopOnError: false });
  assert.equal(del.count('ok'), 999);
  assert.equal(del.errorOf(999)?.code, 'EADDRNOTAVAIL');
  assert.deepEqual(theirAddrs('vb0').filter((s) => / (10\.96|fd00::)/.test(s) && !/dead/.test(s)), []);
});

test('every local address of the node: all links, both families, names and scopes, as ip -j addr', async () => {
  ip('link', 'add', 'va0', 'type', 'veth', 'peer', 'name', 'vb1');
  ip('link', 'set', 'va0', 'up');
  ip('link', 'set', 'vb1', 'up');
  ip('addr', 'add', '10.1.0.1/24', 'dev', 'va0');
  ip('addr', 'add', 'fd10::1/64', 'dev', 'vb1');
  const l = await Links.open();
  const all = await l.addresses();
  assert.deepEqual(all.map((a) => `${a.link} ${a.family} ${a.address}/${a.prefixlen} ${a.scope}`).sort(), theirAddrs());
  assert.ok(all.some((a) => a.link === 'lo' && a.address === '127.0.0.1' && a.scope === 'host'));
  assert.ok(all.some((a) => a.link === 'lo' && a.address === '::1' && a.family === 'inet6'));
  assert.ok(all.some((a) => a.link === 'vb1' && a.address === 'fd10::1'));
  // one dump for the addresses, one for the link names
  const before = l.socketStats().sendmsgCalls;
  await l.addresses();
  assert.equal(l.socketStats().sendmsgCalls - before, 2);
});

test('links created and addressed in one batch; bad input rejected before sending', async () => {
  const l = await Links.open();
  const r = await l.apply([
    { op: 'addLink', name: 'vb0', kind: 'bridge' },
    { op: 'addAddr', link: 'vb0', address: '10.9.0.1' },
    { op: 'addAddr', link: 'vb0', address: 'fd09::1' },
    { op: 'addAddr', link: 'nosuch', address: '10.9.0.2' },
  ], { stopOnError: false });
  assert.deepEqual([0, 1, 2].map((i) => r.status(i)), ['ok', 'ok', 'ok']);
  assert.equal(r.errorOf(3)?.code, 'ENODEV');
  const sent = l.socketStats().sendmsgCalls;
  for (const [op, re] of [
    [{ op: 'addAddr', link: 'vb0', address: '10.9.0.999' }, /not an IPv4 or IPv6 address/],
    [{ op: 'addAddr', link: 'x'.repeat(16), address: '10.9.0.9' }, /at most 15/],
    [{ op: 'addLink', name: 'vb9', kind: 'macvtap' }, /not supported/],
  ] as const) {
    await assert.rejects(l.apply([{ op: 'addAddr', link: 'vb0', address: '10.9.0.5' }, op as never]), (e: unknown) => {
      assert.ok(e instanceof NetlinkError);
      assert.equal(e.kind, 'invalid');
      assert.match(e.message, re);
      return true;
    });
  }
  assert.equal(l.socketStats().sendmsgCalls, sent, 'nothing sent');
  assert.ok(!theirAddrs('vb0').some((s) => s.includes('10.9.0.5')), 'nothing changed');
  // the host kernel has no dummy type: a typed kernel error, not a crash
  const d = await l.apply([{ op: 'addLink', name: 'kube-ipvs0', kind: 'dummy' }]);
  if (d.status(0) === 'error') assert.equal(d.errorOf(0)!.code, 'EOPNOTSUPP');
  else spawnSync('ip', ['link', 'del', 'kube-ipvs0']);
});

test('address protocol (IFA_PROTO): written on add, read on dump, both ways against an independent rtnetlink reader', async () => {
  ip('link', 'add', 'va0', 'type', 'veth', 'peer', 'name', 'vb1');
  ip('link', 'set', 'va0', 'up');
  ip('link', 'set', 'vb1', 'up');
  const l = await Links.open();
  const index = (await l.get('va0'))!.index;
  const r = await l.apply([
    { op: 'addAddr', link: 'va0', address: '10.96.0.1', protocol: IPVSYNC_ADDRESS_PROTOCOL },
    { op: 'addAddr', link: 'va0', address: 'fd00::1', protocol: IPVSYNC_ADDRESS_PROTOCOL },
    { op: 'addAddr', link: 'va0', address: '10.96.0.2/32' },
  ]);
  assert.deepEqual(r.errors, []);
  ip('addr', 'add', '10.96.0.3/32', 'dev', 'va0');
  // theirs -> ours: another program's address with its own protocol
  addProtoAddress(index, '10.96.0.4/32', 7);
  const text = (a: { address: string; prefixlen: number; protocol?: number }) => `${a.address}/${a.prefixlen} ${a.protocol ?? 0}`;
  const ours = (await l.addresses({ link: 'va0' })).map(text).sort();
  const theirs = protoAddresses().filter((a) => a.index === index).map(text).sort();
  assert.deepEqual(ours, theirs);
  assert.ok(ours.includes('10.96.0.1/32 249') && ours.includes('fd00::1/128 249'), ours.join(', '));
  assert.ok(ours.includes('10.96.0.2/32 0') && ours.includes('10.96.0.3/32 0'), 'added without one: none');
  assert.ok(ours.includes('10.96.0.4/32 7'));
  // the kernel's own IPv6 link-local on the veth: IFAPROT_KERNEL_LL
  const ll = (await l.addresses({ link: 'va0', family: 'inet6' })).filter((a) => a.address.startsWith('fe80:'));
  assert.equal(ll.length, 1);
  assert.equal(ll[0]!.protocol, 3);
  // a delete names no protocol: refused before sending, not silently ignored
  await assert.rejects(l.apply([{ op: 'delAddr', link: 'va0', address: '10.96.0.1', protocol: 249 } as never]), /protocol is for addAddr only/);
  await assert.rejects(l.apply([{ op: 'addAddr', link: 'va0', address: '10.96.0.9', protocol: 256 }]), /0-255/);
  assert.ok((await l.apply([{ op: 'delAddr', link: 'va0', address: '10.96.0.1' }, { op: 'delAddr', link: 'va0', address: 'fd00::1' }], { stopOnError: false })).ok);
  assert.deepEqual(protoAddresses().filter((a) => a.index === index && a.protocol === IPVSYNC_ADDRESS_PROTOCOL), []);
});
