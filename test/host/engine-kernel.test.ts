// The sync engine against the machine's own kernel (scripts/host-tests.sh: a private network
// namespace): REAL Links, IpSets, Nftables and Conntrack, with FakeIpvs for IPVS (this kernel has
// none). Random desired states A then B: after syncing B the kernel equals B as `ip -j addr`,
// `ipset save` and `nft -j list table` print it, the writes equal the size of the difference
// (counted independently), and a resync sends zero write messages (socket counters and the
// report). Foreign sets, tables and addresses survive every sync. A removed UDP endpoint's real
// conntrack flows are flushed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { IPVS_RECORD_SETS } from '../../src/engine/ownership.js';
import { Engine, planWrites, type DesiredState, type SyncReport } from '../../src/engine/engine.js';
import type { DesiredService } from '../../src/engine/ipvs-model.js';
import { Links } from '../../src/kernel/links.js';
import { IpSets } from '../../src/kernel/ipsets.js';
import { Nftables } from '../../src/kernel/nftables.js';
import { Conntrack } from '../../src/kernel/conntrack.js';
import type { Service } from '../../src/kernel/ipvs.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { udpFlowScript } from '../helpers/udp-flows.js';
import {
  NFT_TABLE,
  OWNERSHIP,
  SET_PREFIX,
  VIP_LINK,
  expectedIpsetLines,
  expectedIpvsLines,
  expectedNftLines,
  hostAddrs,
  ipAddrs,
  ipsetDifference,
  ipsetSaveLines,
  ipvsDifference,
  mutateServices,
  nftDifference,
  nftLines,
  planObjects,
  prng,
  randomServices,
  randomState,
  setDifference,
} from '../helpers/engine-random.js';

const run = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 28 });
const quiet = (cmd: string, ...args: string[]) => spawnSync(cmd, args, { encoding: 'utf8' });

let links: Links;
let ipsets: IpSets;
let nft: Nftables;

/** Messages sent so far by the three real handles' sockets (reads and writes). */
function messages(): number {
  return links.socketStats().messagesSent + ipsets.socketStats().messagesSent + nft.socketStats().messagesSent;
}

function reportWrites(r: SyncReport): number {
  return r.ipvs.writes + r.addresses.writes + r.ipsets.writes + r.nft.writes;
}

/** FakeIpvs's table as the canonical lines expectedIpvsLines() makes. */
function fakeLines(services: Service[]): string[] {
  const out: string[] = [];
  for (const s of services) {
    const key = s.fwmark !== undefined ? `${s.family}|fwmark|${s.fwmark}` : `${s.family}|${s.protocol}|${s.address}|${s.port}`;
    out.push(`S ${key} ${s.scheduler} ${s.flags.includes('persistent') ? `p${s.timeout}` : '-'}`);
    for (const d of s.destinations ?? []) out.push(`D ${key} ${d.address.includes(':') ? `[${d.address}]` : d.address}:${d.port} ${d.forward} w${d.weight}`);
  }
  return out.sort();
}

function kernelLines() {
  return {
    vips: ipAddrs(VIP_LINK),
    ipsets: ipsetSaveLines(run('ipset', 'save'), SET_PREFIX),
    nft: nftLines(run('nft', '-j', 'list', 'table', 'ip', NFT_TABLE)),
  };
}

function cleanup(): void {
  quiet('nft', 'delete', 'table', 'ip', NFT_TABLE);
  for (const name of IPVS_RECORD_SETS) quiet('ipset', 'destroy', name);
  for (const line of quiet('ipset', 'list', '-n').stdout.split('\n')) if (line.startsWith(SET_PREFIX)) quiet('ipset', 'destroy', line);
}

before(async () => {
  cleanup();
  quiet('ip', 'link', 'del', VIP_LINK);
  // No dummy links in this kernel: the VIP link is a bridge (the engine creates one only when missing).
  run('ip', 'link', 'add', VIP_LINK, 'type', 'bridge');
  links = await Links.open();
  ipsets = await IpSets.open();
  nft = await Nftables.open();
});

after(() => {
  cleanup();
  quiet('ip', 'link', 'del', VIP_LINK);
});

const GEN = { services: 70, maxDests: 6, fwmark: true };
const SEEDS = 30;

test(`property (${SEEDS} seeds): after syncing A then B the kernel equals B (ip -j addr, ipset save, nft -j), writes = difference, resync writes nothing`, async () => {
  let objectsSeen = 0;
  for (let seed = 1; seed <= SEEDS; seed++) {
    const r = prng(seed);
    const a = randomServices(r, GEN);
    const A = randomState(r, a, { nft: true });
    const b = mutateServices(r, a, GEN);
    const B = randomState(r, b, { nft: true });
    const ipvs = new FakeIpvs();
    // A fresh engine per seed: the kernel still holds the previous seed's B, so syncing A is also
    // a convergence from an arbitrary state.
    const e = new Engine({ ipvs, links, ipsets, nft }, OWNERSHIP);
    const rA = await e.sync(A);
    assert.deepEqual(rA.errors.map((x) => x.message), [], `seed ${seed}: sync A`);
    assert.equal(planWrites(await e.plan(A)).length, 0, `seed ${seed}: A converged`);

    // B: the plan's writes, counted in objects, are the difference counted naively.
    const plan = await e.plan(B);
    const obj = planObjects(plan);
    const diff = {
      ipvs: ipvsDifference(a, b),
      addresses: setDifference(A.vips!.addresses, B.vips!.addresses),
      ipsets: ipsetDifference(A.ipsets!, B.ipsets!),
      nft: nftDifference(A.nft, B.nft!),
    };
    assert.deepEqual({ ipvs: obj.ipvs, addresses: obj.addresses, ipsets: obj.ipsets, nft: obj.nft }, diff, `seed ${seed}: writes = difference`);
    const m0 = messages();
    const w0 = ipvs.writes;
    const rB = await e.apply(plan);
    assert.deepEqual(rB.errors.map((x) => x.message), [], `seed ${seed}: sync B`);
    assert.equal(reportWrites(rB), planWrites(plan).length, `seed ${seed}: every planned write succeeded`);
    assert.equal(ipvs.writes - w0, diff.ipvs, `seed ${seed}: IPVS ops`);
    const sent = messages() - m0;
    assert.ok(sent > 0 && sent <= obj.addresses + obj.ipsets + obj.record + obj.nft + 2, `seed ${seed}: ${sent} write messages for ${obj.total - obj.ipvs} objects`);

    // The kernel equals B, read by the independent tools.
    const k = kernelLines();
    assert.deepEqual(k.vips, hostAddrs(B.vips!.addresses), `seed ${seed}: ip -j addr`);
    assert.deepEqual(k.ipsets, expectedIpsetLines(B.ipsets!), `seed ${seed}: ipset save`);
    assert.deepEqual(k.nft, expectedNftLines(B.nft!), `seed ${seed}: nft -j list table`);
    assert.deepEqual(fakeLines(await ipvs.services({ withDestinations: true })), expectedIpvsLines(b), `seed ${seed}: IPVS`);
    objectsSeen += k.vips.length + k.ipsets.length + k.nft.length + expectedIpvsLines(b).length;

    // Resync: the report says zero writes, and the sockets sent nothing but the reads.
    const m1 = messages();
    const again = await e.plan(B);
    const reads = messages() - m1;
    assert.ok(reads > 0);
    assert.deepEqual(planWrites(again), [], `seed ${seed}: nothing to do`);
    const m2 = messages();
    const rNoop = await e.apply(again);
    assert.equal(messages() - m2, 0, `seed ${seed}: apply of the no-op plan sent no message`);
    assert.equal(reportWrites(rNoop), 0);
    const m3 = messages();
    const w3 = ipvs.writes;
    const rs = await e.sync(B);
    assert.equal(messages() - m3, reads, `seed ${seed}: a whole resync sends only its ${reads} read requests`);
    assert.deepEqual([reportWrites(rs), ipvs.writes - w3], [0, 0], `seed ${seed}: zero writes in the report and in IPVS`);
  }
  assert.ok(objectsSeen / SEEDS > 200, `a few hundred objects per state (${Math.round(objectsSeen / SEEDS)})`);
});

test('foreign objects (ipset create, nft add table, ip addr add on another link) survive every sync; stale owned ones go', async () => {
  cleanup();
  const FOREIGN_LINK = 'foreign0';
  quiet('ip', 'link', 'del', FOREIGN_LINK);
  run('ip', 'link', 'add', FOREIGN_LINK, 'type', 'bridge');
  // Addresses inside the managed CIDRs, and VIPs the engine binds, but on another link.
  for (const a of ['10.96.0.7/32', '10.96.200.3/32', '192.168.77.1/24']) run('ip', 'addr', 'add', a, 'dev', FOREIGN_LINK);
  run('ip', '-6', 'addr', 'add', 'fd00:96::7/128', 'dev', FOREIGN_LINK, 'nodad');
  quiet('ipset', 'destroy', 'FOREIGN-SET');
  quiet('ipset', 'destroy', 'EKTX-NOT-OURS');
  run('ipset', 'create', 'FOREIGN-SET', 'hash:ip,port');
  run('ipset', 'add', 'FOREIGN-SET', '10.96.0.7,tcp:80');
  run('ipset', 'create', 'EKTX-NOT-OURS', 'hash:ip');
  run('ipset', 'create', `${SET_PREFIX}STALE`, 'hash:ip');
  quiet('nft', 'delete', 'table', 'ip', 'foreign');
  quiet('nft', 'delete', 'table', 'inet', NFT_TABLE);
  run('nft', 'add', 'table', 'ip', 'foreign');
  run('nft', 'add', 'chain', 'ip', 'foreign', 'c', '{ type filter hook input priority 0; policy accept; }');
  run('nft', 'add', 'set', 'ip', 'foreign', 's', '{ type ipv4_addr; }');
  run('nft', 'add', 'element', 'ip', 'foreign', 's', '{ 10.96.0.7 }');
  run('nft', 'add', 'rule', 'ip', 'foreign', 'c', 'ip', 'saddr', '@s', 'counter', 'accept');
  // Our table's name in another family is not ours either.
  run('nft', 'add', 'table', 'inet', NFT_TABLE);
  run('nft', 'add', 'set', 'inet', NFT_TABLE, 'svc', '{ type ipv4_addr; }');

  const foreign = () => ({
    addrs: ipAddrs(FOREIGN_LINK),
    sets: ipsetSaveLines(run('ipset', 'save'), 'FOREIGN-').concat(ipsetSaveLines(run('ipset', 'save'), 'EKTX-')),
    tables: run('nft', 'list', 'table', 'ip', 'foreign') + run('nft', 'list', 'table', 'inet', NFT_TABLE),
  });
  const before = foreign();
  assert.deepEqual(before.addrs, ['10.96.0.7/32', '10.96.200.3/32', '192.168.77.1/24', 'fd00:96::7/128']);
  assert.equal(before.sets.length, 3);

  const r = prng(777);
  let prev = randomServices(r, GEN);
  const e = new Engine({ ipvs: new FakeIpvs(), links, ipsets, nft }, OWNERSHIP);
  for (let i = 0; i < 8; i++) {
    const state: DesiredState = randomState(r, prev, { nft: true });
    if (i === 0) state.vips!.addresses.push('10.96.0.7', 'fd00:96::7'); // the same addresses, on our link
    const rep = await e.sync(state);
    assert.deepEqual(rep.errors.map((x) => x.message), [], `sync ${i}`);
    assert.deepEqual(foreign(), before, `sync ${i}: foreign objects unchanged`);
    assert.deepEqual(ipAddrs(VIP_LINK), hostAddrs(state.vips!.addresses), `sync ${i}: our link has exactly the desired VIPs`);
    assert.equal(quiet('ipset', 'list', '-n').stdout.split('\n').includes(`${SET_PREFIX}STALE`), false, 'a stale owned set is destroyed');
    prev = mutateServices(r, prev, GEN);
  }
  // An empty desired state clears what is ours and still nothing foreign.
  const rep = await e.sync({ services: [], vips: { link: VIP_LINK, addresses: [] }, ipsets: [] });
  assert.deepEqual(rep.errors, []);
  assert.deepEqual(ipAddrs(VIP_LINK), []);
  assert.deepEqual(ipsetSaveLines(run('ipset', 'save'), SET_PREFIX), []);
  assert.deepEqual(foreign(), before);

  quiet('ip', 'link', 'del', FOREIGN_LINK);
  quiet('ipset', 'destroy', 'FOREIGN-SET');
  quiet('ipset', 'destroy', 'EKTX-NOT-OURS');
  quiet('nft', 'delete', 'table', 'ip', 'foreign');
  quiet('nft', 'delete', 'table', 'inet', NFT_TABLE);
});

// ---- conntrack: a removed UDP endpoint's flows -----------------------------------------------

const NODE = 'eng-node';
const CLIENT = 'eng-client';
const SPORTS = Array.from({ length: 8 }, (_, i) => 41001 + i);

function inNs(ns: string, ...args: string[]): string {
  return run('ip', 'netns', 'exec', ns, ...args);
}

/** One datagram from each source port to each target, from the client namespace. */
function sendUdp(targets: Array<[string, number]>): void {
  const script = udpFlowScript(targets, SPORTS);
  inNs(CLIENT, process.execPath, '-e', script);
}

/** `conntrack -L` in the node namespace: UDP flows as "origdst:dport>replysrc:sport". */
function ctFlows(family: 'ipv4' | 'ipv6'): string[] {
  const out = quiet('ip', 'netns', 'exec', NODE, 'conntrack', '-L', '-f', family, '-p', 'udp');
  assert.equal(out.status, 0, out.stderr);
  return out.stdout
    .split('\n')
    .filter((l) => l.startsWith('udp'))
    .map((l) => {
      const v = (k: string, n: number) => [...l.matchAll(new RegExp(`${k}=(\\S+)`, 'g'))][n]![1];
      return `${v('dst', 0)}:${v('dport', 0)}>${v('src', 1)}:${v('sport', 1)}`;
    })
    .sort();
}

test('a removed UDP endpoint: deleted at once and its real conntrack flows flushed; the other endpoint keeps its flows; a draining TCP endpoint flushes nothing', async (t) => {
  for (const ns of [NODE, CLIENT]) {
    quiet('ip', 'netns', 'del', ns);
    run('ip', 'netns', 'add', ns);
  }
  t.after(() => {
    for (const ns of [CLIENT, NODE]) quiet('ip', 'netns', 'del', ns);
  });
  run('ip', 'link', 'add', 'engv0', 'netns', CLIENT, 'type', 'veth', 'peer', 'name', 'engv1', 'netns', NODE);
  for (const [ns, dev, v4s, v6s] of [
    [CLIENT, 'engv0', ['10.0.0.1/24'], ['fd00::1/64']],
    [NODE, 'engv1', ['10.0.0.2/24', '10.0.0.3/24'], ['fd00::2/64', 'fd00::3/64']],
  ] as const) {
    inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
    inNs(ns, 'ip', 'link', 'set', dev, 'up');
    for (const a of v4s) inNs(ns, 'ip', 'addr', 'add', a, 'dev', dev);
    for (const a of v6s) inNs(ns, 'ip', '-6', 'addr', 'add', a, 'dev', dev, 'nodad');
  }
  inNs(CLIENT, 'ip', 'route', 'add', '10.99.0.0/24', 'via', '10.0.0.2');
  inNs(CLIENT, 'ip', '-6', 'route', 'add', 'fd99::/64', 'via', 'fd00::2');
  // The node's "data plane" for this test: DNAT to two endpoints split by source port, so each
  // endpoint has real flows whose reply source is the endpoint.
  execFileSync('ip', ['netns', 'exec', NODE, 'nft', '-f', '-'], {
    input: `
    table inet ekt_ct {
      chain pre {
        type nat hook prerouting priority dstnat; policy accept;
        ip daddr 10.99.0.1 udp dport 53 udp sport 41001-41004 dnat ip to 10.0.0.2:5353
        ip daddr 10.99.0.1 udp dport 53 dnat ip to 10.0.0.3:5353
        ip6 daddr fd99::1 udp dport 53 udp sport 41001-41004 dnat ip6 to [fd00::2]:5353
        ip6 daddr fd99::1 udp dport 53 dnat ip6 to [fd00::3]:5353
      }
      chain in {
        type filter hook input priority filter; policy accept;
        ct state new counter accept
      }
    }`,
  });

  const udp = (address: string, dests: string[]): DesiredService => ({
    protocol: 'udp',
    address,
    port: 53,
    scheduler: 'rr',
    destinations: dests.map((d) => ({ address: d, port: 5353, forward: 'masq' as const, weight: 1 })),
  });
  const tcp = (dests: string[]): DesiredService => ({
    protocol: 'tcp',
    address: '10.99.0.1',
    port: 80,
    scheduler: 'rr',
    destinations: dests.map((d) => ({ address: d, port: 80, forward: 'masq' as const, weight: 1 })),
  });
  const ipvs = new FakeIpvs();
  const ct = await Conntrack.open({ netns: `/run/netns/${NODE}` });
  const e = new Engine({ ipvs, conntrack: ct }, { managedCidrs: ['10.99.0.0/24', 'fd99::/64'] });
  const full = { services: [udp('10.99.0.1', ['10.0.0.2', '10.0.0.3']), udp('fd99::1', ['fd00::2', 'fd00::3']), tcp(['10.0.0.2', '10.0.0.3'])] };
  assert.deepEqual((await e.sync(full)).errors, []);

  sendUdp([['10.99.0.1', 53], ['fd99::1', 53], ['10.0.0.2', 7000]]);
  const v4Before = ctFlows('ipv4');
  const v6Before = ctFlows('ipv6');
  assert.equal(v4Before.filter((f) => f === '10.99.0.1:53>10.0.0.2:5353').length, 4, v4Before.join('\n'));
  assert.equal(v4Before.filter((f) => f === '10.99.0.1:53>10.0.0.3:5353').length, 4);
  assert.equal(v4Before.filter((f) => f === '10.0.0.2:7000>10.0.0.2:7000').length, 8);
  assert.equal(v6Before.filter((f) => f === 'fd99::1:53>fd00::2:5353').length, 4, v6Before.join('\n'));
  assert.equal(v6Before.filter((f) => f === 'fd99::1:53>fd00::3:5353').length, 4);

  // The TCP endpoint .2 has a connection: it drains. The UDP endpoints .2 / ::2 go at once.
  ipvs.setConnections({ protocol: 'tcp', address: '10.99.0.1', port: 80 }, { address: '10.0.0.2', port: 80 }, 1, 0);
  const rep = await e.sync({ services: [udp('10.99.0.1', ['10.0.0.3']), udp('fd99::1', ['fd00::3']), tcp(['10.0.0.3'])] });
  assert.deepEqual(rep.errors, []);
  assert.equal(rep.ipvs.ops.deleteDestination, 2, 'the UDP endpoints are deleted, not drained');
  assert.equal(rep.ipvs.ops.updateDestination, 1, 'the TCP endpoint goes to weight 0');
  assert.equal(rep.draining, 1);
  assert.equal(rep.flowsFlushed, 8, 'four flows per family');

  const v4After = ctFlows('ipv4');
  const v6After = ctFlows('ipv6');
  assert.equal(v4After.filter((f) => f.endsWith('>10.0.0.2:5353')).length, 0, 'conntrack -L: the removed endpoint has no flow left');
  assert.equal(v6After.filter((f) => f.endsWith('>fd00::2:5353')).length, 0);
  assert.equal(v4After.filter((f) => f === '10.99.0.1:53>10.0.0.3:5353').length, 4, 'the remaining endpoint keeps its flows');
  assert.equal(v6After.filter((f) => f === 'fd99::1:53>fd00::3:5353').length, 4);
  assert.equal(v4After.filter((f) => f === '10.0.0.2:7000>10.0.0.2:7000').length, 8, 'flows to the same address on another port are not touched');
  const svc = (await ipvs.services({ withDestinations: true })).map((s) => `${s.protocol} ${s.address} ${(s.destinations ?? []).map((d) => `${d.address}/w${d.weight}`).join(' ')}`).sort();
  assert.deepEqual(svc, ['tcp 10.99.0.1 10.0.0.2/w0 10.0.0.3/w1', 'udp 10.99.0.1 10.0.0.3/w1', 'udp fd99::1 fd00::3/w1']);

  // A resync has nothing to flush (nothing more was removed), and sends nothing to conntrack.
  const before = ct.socketStats().messagesSent;
  const again = await e.sync({ services: [udp('10.99.0.1', ['10.0.0.3']), udp('fd99::1', ['fd00::3']), tcp(['10.0.0.3'])] });
  assert.equal(again.flowsFlushed, 0);
  assert.equal(ct.socketStats().messagesSent - before, 0);
});
