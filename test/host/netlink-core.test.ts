// The netlink core against the machine's own kernel, in a private network namespace
// (scripts/host-tests.sh): generic netlink resolution, batching, ack mapping, ENOBUFS,
// rtnetlink dumps, handles inside other namespaces. Cross-checked with iproute2.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Genl } from '../../src/kernel/genl.js';
import { Links } from '../../src/kernel/links.js';
import { Ipvs } from '../../src/kernel/ipvs.js';
import { NetlinkError } from '../../src/errors.js';

const ip = (...args: string[]) => execFileSync('ip', args, { encoding: 'utf8' });

test('nlctrl resolves itself (family id 0x10)', async () => {
  const g = await Genl.open();
  const fam = await g.family('nlctrl');
  assert.ok(fam);
  assert.equal(fam.id, 0x10);
  assert.equal(fam.name, 'nlctrl');
  assert.equal(await g.family('no-such-family'), null);
});

test('1000 requests go out in a few sendmsg calls and every ack maps back to its request', async () => {
  const g = await Genl.open();
  const names = Array.from({ length: 1000 }, (_, i) => (i % 7 === 3 ? `nope${i}` : 'nlctrl'));
  const before = g.socketStats().sendmsgCalls;
  const { result, families } = await g.families(names, { stopOnError: false });
  const calls = g.socketStats().sendmsgCalls - before;
  assert.equal(result.size, 1000);
  assert.ok(calls <= 4, `1000 requests took ${calls} sendmsg calls`);
  assert.equal(result.sendmsgCalls, calls);
  for (let i = 0; i < names.length; i++) {
    if (i % 7 === 3) {
      assert.equal(result.status(i), 'error', `request ${i}`);
      const e = result.errorOf(i);
      assert.ok(e instanceof NetlinkError);
      assert.equal(e.code, 'ENOENT');
      assert.equal(e.errno, 2);
      assert.equal(e.kind, 'kernel');
      assert.equal(e.index, i);
      assert.match(e.op, new RegExp(`CTRL_CMD_GETFAMILY nope${i}$`));
      assert.equal(families[i], null);
    } else {
      assert.equal(result.status(i), 'ok', `request ${i}`);
      assert.equal(families[i]?.id, 0x10);
    }
  }
  assert.equal(result.errors.length, names.filter((n) => n.startsWith('nope')).length);
});

test('stop-on-error: one request per sendmsg, none after a failure; without it, chunks of many', async () => {
  const g = await Genl.open();
  const names = Array.from({ length: 50 }, (_, i) => (i === 5 ? 'nope' : 'nlctrl'));
  const before = g.socketStats();
  const { result, families } = await g.families(names, { stopOnError: true, maxBatchMessages: 10 });
  const after = g.socketStats();
  assert.equal(result.sendmsgCalls, 6, 'requests 0-5, each alone');
  assert.equal(after.messagesSent - before.messagesSent, 6);
  assert.equal(result.status(5), 'error');
  for (const i of [0, 4]) assert.equal(result.status(i), 'ok', `request ${i}`);
  for (const i of [0, 4]) assert.equal(families[i]?.id, 0x10, `request ${i}'s reply`);
  for (const i of [6, 9, 10, 30, 49]) assert.equal(result.status(i), 'not-sent', `request ${i}`);
  assert.equal(result.count('not-sent'), 44);
  const all = await g.families(names, { stopOnError: false, maxBatchMessages: 10 });
  assert.equal(all.result.sendmsgCalls, 5, 'ten requests per sendmsg');
  assert.equal(all.result.count('ok'), 49);
});

test('a receive-queue overflow surfaces as typed ENOBUFS on the requests whose replies were lost', async () => {
  // A tiny receive buffer and many data-carrying replies (each nlctrl answer is ~1-2 KiB).
  const g = await Genl.open({ rcvbufBytes: 4096 });
  const { result } = await g.families(Array(400).fill('nlctrl'), { stopOnError: false, maxBatchMessages: 400 });
  const lost = result.count('unknown');
  assert.ok(lost > 0, 'some replies were dropped');
  const e = result.errors.find((x) => x.code === 'ENOBUFS');
  assert.ok(e, 'an ENOBUFS error is reported');
  assert.equal(e.kind, 'nobufs');
  assert.equal(result.status(e.index!), 'unknown');
  assert.equal(result.count('ok') + lost + result.count('error'), 400);
});

test('links: one dump, matches ip -j link, including a veth pair', async () => {
  ip('link', 'add', 'vt0', 'type', 'veth', 'peer', 'name', 'vt1');
  try {
    const l = await Links.open();
    const before = l.socketStats().sendmsgCalls;
    const links = await l.list();
    assert.equal(l.socketStats().sendmsgCalls - before, 1, 'one request for the whole dump');
    const theirs = JSON.parse(ip('-j', 'link', 'show')) as Array<{ ifindex: number; ifname: string; mtu: number }>;
    assert.deepEqual(
      links.map((x) => [x.index, x.name, x.mtu]).sort(),
      theirs.map((x) => [x.ifindex, x.ifname, x.mtu]).sort(),
    );
    const vt0 = links.find((x) => x.name === 'vt0');
    assert.equal(vt0?.kind, 'veth');
    assert.equal(links.find((x) => x.name === 'lo')?.up, true);
  } finally {
    ip('link', 'del', 'vt0');
  }
});

test('a handle opened inside another namespace sees that namespace only', async () => {
  ip('netns', 'add', 'ipvsync-t1');
  try {
    ip('link', 'add', 'vx0', 'type', 'veth', 'peer', 'name', 'vx1', 'netns', 'ipvsync-t1');
    const inside = await Links.open({ netns: '/run/netns/ipvsync-t1' });
    const names = (await inside.list()).map((x) => x.name).sort();
    assert.deepEqual(names, ['lo', 'vx1']);
    const here = (await (await Links.open()).list()).map((x) => x.name);
    assert.ok(here.includes('vx0') && !here.includes('vx1'));
    // Cross-check with iproute2 run inside the namespace.
    const theirs = JSON.parse(ip('-n', 'ipvsync-t1', '-j', 'link', 'show')) as Array<{ ifname: string }>;
    assert.deepEqual(theirs.map((x) => x.ifname).sort(), names);
  } finally {
    spawnSync('ip', ['link', 'del', 'vx0']);
    ip('netns', 'del', 'ipvsync-t1');
  }
});

test('a missing namespace path is a typed error, at open (test/host/api-errors: every handle)', async () => {
  await assert.rejects(Links.open({ netns: '/run/netns/does-not-exist' }), (e: unknown) => {
    assert.ok(e instanceof NetlinkError);
    assert.equal(e.kind, 'system');
    assert.equal(e.code, 'ENOENT');
    assert.match(e.message, /cannot enter network namespace \/run\/netns\/does-not-exist/);
    return true;
  });
});

test('IPVS on this kernel: info when present, otherwise a typed error naming ip_vs', async () => {
  if (existsSync('/proc/net/ip_vs')) {
    const info = await (await Ipvs.open()).info();
    assert.match(info.version, /^\d+\.\d+\.\d+$/);
    return;
  }
  await assert.rejects(Ipvs.open(), (e: unknown) => {
    assert.ok(e instanceof NetlinkError);
    assert.equal(e.kind, 'unsupported');
    assert.equal(e.code, 'ENOENT');
    assert.match(e.message, /kernel module ip_vs is not loaded/);
    return true;
  });
  const r = spawnSync(process.execPath, ['dist/src/cli/main.js', 'ipvs', 'info'], { encoding: 'utf8' });
  assert.equal(r.status, 3);
  assert.match(r.stderr, /ip_vs/);
});
