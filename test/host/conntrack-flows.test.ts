// conntrack against the machine's own kernel with REAL UDP flows between network namespaces
// (scripts/host-tests.sh gives a private namespace; two more are made here): a client namespace
// sends datagrams from fixed source ports to a service address that an nftables DNAT rule in
// the node namespace sends to an endpoint, and directly to the node. Flows are listed and
// deleted by filter through ipvsync and cross-checked with `conntrack -L` both ways.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { Conntrack, type Flow } from '../../src/kernel/conntrack.js';
import { NetlinkError } from '../../src/errors.js';
import { udpFlowScript } from '../helpers/udp-flows.js';

const sh = (cmd: string, args: string[], input?: string) => execFileSync(cmd, args, { encoding: 'utf8', input });
const inNs = (ns: string, ...args: string[]) => sh('ip', ['netns', 'exec', ns, ...args]);
const NODE = 'ct-node';
const CLIENT = 'ct-client';
const NETNS = `/run/netns/${NODE}`;
const PORTS = Array.from({ length: 8 }, (_, i) => 40001 + i);

/** Sends one datagram from each source port to each target, from the client namespace. */
function send(targets: Array<[string, number]>): void {
  const script = udpFlowScript(targets, PORTS);
  inNs(CLIENT, process.execPath, '-e', script);
}

/** `conntrack -L` in the node namespace as "proto osrc:osport>odst:odport rsrc:rsport". */
function theirFlows(family: 'ipv4' | 'ipv6'): string[] {
  const r = spawnSync('ip', ['netns', 'exec', NODE, 'conntrack', '-L', '-f', family, '-p', 'udp'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout
    .split('\n')
    .filter((l) => l.startsWith('udp'))
    .map((l) => {
      const v = (k: string, n: number) => [...l.matchAll(new RegExp(`${k}=(\\S+)`, 'g'))][n]![1];
      return `udp ${v('src', 0)}:${v('sport', 0)}>${v('dst', 0)}:${v('dport', 0)} ${v('src', 1)}:${v('sport', 1)}`;
    })
    .sort();
}
const ours = (flows: Flow[]) =>
  flows.map((f) => `${f.proto} ${f.orig.src}:${f.orig.sport}>${f.orig.dst}:${f.orig.dport} ${f.reply.src}:${f.reply.sport}`).sort();

before(() => {
  for (const ns of [NODE, CLIENT]) sh('ip', ['netns', 'add', ns]);
  sh('ip', ['link', 'add', 'ctv0', 'netns', CLIENT, 'type', 'veth', 'peer', 'name', 'ctv1', 'netns', NODE]);
  for (const [ns, dev, v4, v6] of [
    [CLIENT, 'ctv0', '10.0.0.1/24', 'fd00::1/64'],
    [NODE, 'ctv1', '10.0.0.2/24', 'fd00::2/64'],
  ] as const) {
    inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
    inNs(ns, 'ip', 'link', 'set', dev, 'up');
    inNs(ns, 'ip', 'addr', 'add', v4, 'dev', dev);
    inNs(ns, 'ip', '-6', 'addr', 'add', v6, 'dev', dev, 'nodad');
  }
  inNs(CLIENT, 'ip', 'route', 'add', '10.99.0.0/24', 'via', '10.0.0.2');
  inNs(CLIENT, 'ip', '-6', 'route', 'add', 'fd99::/64', 'via', 'fd00::2');
  // The hooks make the node namespace track flows; DNAT makes reply source != original dest.
  sh('ip', ['netns', 'exec', NODE, 'nft', '-f', '-'], `
    table inet ipvsync_ct {
      chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        ip daddr 10.99.0.1 udp dport 53 dnat ip to 10.0.0.2:5353
        ip6 daddr fd99::1 udp dport 53 dnat ip6 to [fd00::2]:5353
      }
      chain in {
        type filter hook input priority filter; policy accept;
        ct state new counter accept
      }
    }
  `);
});

after(() => {
  for (const ns of [CLIENT, NODE]) spawnSync('ip', ['netns', 'del', ns]);
});

test('real UDP flows, both families: listed by service (orig dst) and by endpoint (reply src), as conntrack -L shows them', async () => {
  send([['10.99.0.1', 53], ['10.0.0.2', 7000], ['fd99::1', 53], ['fd00::2', 7000]]);
  const ct = await Conntrack.open({ netns: NETNS });
  for (const [family, vip, ep, direct] of [
    ['inet', '10.99.0.1', '10.0.0.2', '10.0.0.2'],
    ['inet6', 'fd99::1', 'fd00::2', 'fd00::2'],
  ] as const) {
    const all = await ct.list({ family, proto: 'udp' });
    assert.deepEqual(ours(all), theirFlows(family === 'inet' ? 'ipv4' : 'ipv6'), 'ipvsync and conntrack -L agree');
    const bySvc = await ct.list({ proto: 'udp', origDst: vip, origDport: 53 });
    assert.equal(bySvc.length, PORTS.length);
    for (const f of bySvc) {
      assert.equal(f.family, family);
      assert.equal(f.reply.src, ep, 'DNATed to the endpoint');
      assert.equal(f.reply.sport, 5353);
      assert.ok(PORTS.includes(f.orig.sport!));
      assert.ok(f.timeout > 0);
    }
    const byEp = await ct.list({ proto: 'udp', replySrc: ep, replySport: 5353 });
    assert.deepEqual(ours(byEp), ours(bySvc));
    const directFlows = await ct.list({ proto: 'udp', origDst: direct, origDport: 7000 });
    assert.equal(directFlows.length, PORTS.length);
    assert.equal(await ct.count({ proto: 'udp', origDst: vip }), PORTS.length);
    assert.equal(await ct.count({ proto: 'tcp', origDst: vip }), 0);
    assert.equal(await ct.count({ proto: 'udp', origDst: vip, origDport: 54 }), 0);
  }
  // one dump per list
  const before = ct.socketStats().sendmsgCalls;
  await ct.list({ proto: 'udp' });
  assert.equal(ct.socketStats().sendmsgCalls - before, 1);
});

test('delete by endpoint: the stale flows go (one dump + one batch), the others stay; conntrack -L agrees', async () => {
  send([['10.99.0.1', 53], ['10.0.0.2', 7000], ['fd99::1', 53], ['fd00::2', 7000]]);
  const ct = await Conntrack.open({ netns: NETNS });
  const r4 = await ct.flushEndpoint('10.0.0.2', 5353);
  assert.deepEqual(r4.errors, []);
  assert.equal(r4.matched, PORTS.length);
  assert.equal(r4.deleted + r4.gone, PORTS.length);
  assert.ok(r4.deleted > 0);
  assert.equal(r4.sendmsgCalls, 1, 'every delete in one sendmsg');
  assert.equal(await ct.count({ proto: 'udp', replySrc: '10.0.0.2', replySport: 5353 }), 0);
  assert.equal(await ct.count({ proto: 'udp', origDst: '10.0.0.2', origDport: 7000 }), PORTS.length, 'untouched');
  assert.ok(!theirFlows('ipv4').some((l) => l.includes('10.99.0.1')), 'conntrack -L sees them gone');
  assert.equal(theirFlows('ipv4').filter((l) => l.includes('>10.0.0.2:7000')).length, PORTS.length);
  // v6 by service address
  const r6 = await ct.flushService('fd99::1', 53);
  assert.equal(r6.matched, PORTS.length);
  assert.equal(await ct.count({ family: 'inet6', proto: 'udp', origDst: 'fd99::1' }), 0);
  assert.ok(!theirFlows('ipv6').some((l) => l.includes('fd99::1')));
  // flows conntrack-tools creates... and ours deletes: theirs -> ours direction
  sh('ip', ['netns', 'exec', NODE, 'conntrack', '-I', '-p', 'udp', '-s', '10.5.5.5', '-d', '10.6.6.6', '--sport', '1111', '--dport', '2222', '-t', '100', '-u', 'SEEN_REPLY']);
  const made = await ct.list({ proto: 'udp', origSrc: '10.5.5.5' });
  assert.equal(made.length, 1);
  assert.deepEqual([made[0]!.orig.dst, made[0]!.orig.dport, made[0]!.reply.src], ['10.6.6.6', 2222, '10.6.6.6']);
  assert.equal((await ct.delete({ proto: 'udp', origSrc: '10.5.5.5' })).deleted, 1);
  assert.ok(!theirFlows('ipv4').some((l) => l.includes('10.5.5.5')));
  // nothing matches: nothing sent besides the dump
  const none = await ct.delete({ proto: 'udp', origDst: '10.123.0.1' });
  assert.deepEqual([none.matched, none.deleted, none.sendmsgCalls], [0, 0, 0]);
});

test('bad filters are typed invalid errors before anything is sent', async () => {
  const ct = await Conntrack.open({ netns: NETNS });
  for (const [filter, re] of [
    [{ origDport: 53 }, /a port filter needs proto/],
    [{ proto: 'udp', origDport: 70000 }, /origDport is out of range 0-65535/],
    [{ proto: 'udp', origDst: '10.0.0.300' }, /not an IPv4 or IPv6 address/],
    [{ family: 'inet', origDst: 'fd00::1' }, /does not match the filter's family/],
    [{ origDst: '10.0.0.1', replySrc: 'fd00::1' }, /does not match the filter's family/],
    [{ proto: 'carrier-pigeon' }, /unknown proto/],
  ] as const) {
    await assert.rejects(ct.delete(filter as never), (e: unknown) => {
      assert.ok(e instanceof NetlinkError);
      assert.equal(e.kind, 'invalid');
      assert.match(e.message, re);
      return true;
    });
  }
  assert.equal(ct.socketStats().sendmsgCalls, 0, 'nothing sent');
});
