// The sync engine with the REAL Ipvs, Links (dummy kube-ipvs0) and IpSets, inside the test VM
// (node dist/test/vm/cli.js --suite kernel). Random desired states A then B (IPVS services v4 and
// v6, TCP/UDP/SCTP and fwmark, destinations, VIPs, ipset members): after syncing B the kernel
// equals B as `ipvsadm -Sn`, `ip -j addr` and `ipset save` print it, writes = the difference,
// and a resync writes nothing. Foreign IPVS services made by ipvsadm survive. A sync SIGKILLed in
// the middle of its apply is finished by a fresh engine with nothing duplicated or left over.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { IPVS_RECORD_SETS } from '../../src/engine/ownership.js';
import { Engine, planWrites, type DesiredState, type SyncReport } from '../../src/engine/engine.js';
import type { DesiredService } from '../../src/engine/ipvs-model.js';
import { Ipvs } from '../../src/kernel/ipvs.js';
import { Links } from '../../src/kernel/links.js';
import { IpSets } from '../../src/kernel/ipsets.js';
import {
  OWNERSHIP,
  SET_PREFIX,
  VIP_LINK,
  expectedIpsetLines,
  expectedIpvsLines,
  hostAddrs,
  ipAddrs,
  ipsetDifference,
  ipsetSaveLines,
  ipvsDifference,
  ipvsadmLines,
  mutateServices,
  planObjects,
  prng,
  randomServices,
  randomState,
  setDifference,
} from '../helpers/engine-random.js';

const run = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 28 });
const quiet = (cmd: string, ...args: string[]) => spawnSync(cmd, args, { encoding: 'utf8' });
const here = dirname(fileURLToPath(import.meta.url));

let ipvs: Ipvs;
let links: Links;
let ipsets: IpSets;

function messages(): number {
  return ipvs.socketStats().messagesSent + links.socketStats().messagesSent + ipsets.socketStats().messagesSent;
}
const reportWrites = (r: SyncReport) => r.ipvs.writes + r.addresses.writes + r.ipsets.writes + r.nft.writes;

function cleanup(): void {
  quiet('ipvsadm', '-C');
  for (const name of IPVS_RECORD_SETS) quiet('ipset', 'destroy', name);
  quiet('ip', 'link', 'del', VIP_LINK);
  for (const line of quiet('ipset', 'list', '-n').stdout.split('\n')) if (line.startsWith(SET_PREFIX)) quiet('ipset', 'destroy', line);
}

before(async () => {
  cleanup();
  ipvs = await Ipvs.open();
  links = await Links.open();
  ipsets = await IpSets.open();
});
after(cleanup);

function kernel() {
  return {
    ipvs: ipvsadmLines(run('ipvsadm', '-Sn')),
    vips: ipAddrs(VIP_LINK),
    ipsets: ipsetSaveLines(run('ipset', 'save'), SET_PREFIX),
  };
}

const GEN = { services: 80, maxDests: 6, fwmark: true };
const SEEDS = 12;

test(`property (${SEEDS} seeds): IPVS + VIPs + ipsets after A then B equal B (ipvsadm -Sn, ip -j addr, ipset save); writes = difference; resync writes nothing`, async () => {
  let objects = 0;
  for (let seed = 1; seed <= SEEDS; seed++) {
    const r = prng(1000 + seed);
    const a = randomServices(r, GEN);
    const A = randomState(r, a, { nft: false });
    const b = mutateServices(r, a, GEN);
    const B = randomState(r, b, { nft: false });
    const e = new Engine({ ipvs, links, ipsets }, OWNERSHIP);
    const rA = await e.sync(A);
    assert.deepEqual(rA.errors.map((x) => x.message), [], `seed ${seed}: sync A`);
    assert.deepEqual(kernel().ipvs, expectedIpvsLines(a), `seed ${seed}: A in ipvsadm -Sn`);

    const plan = await e.plan(B);
    const obj = planObjects(plan);
    assert.deepEqual(
      { ipvs: obj.ipvs, addresses: obj.addresses, ipsets: obj.ipsets },
      { ipvs: ipvsDifference(a, b), addresses: setDifference(A.vips!.addresses, B.vips!.addresses), ipsets: ipsetDifference(A.ipsets!, B.ipsets!) },
      `seed ${seed}: writes = difference`,
    );
    const m0 = messages();
    const rB = await e.apply(plan);
    assert.deepEqual(rB.errors.map((x) => x.message), [], `seed ${seed}: sync B`);
    assert.equal(reportWrites(rB), planWrites(plan).length, `seed ${seed}: every write succeeded`);
    assert.ok(messages() - m0 > 0);

    const k = kernel();
    assert.deepEqual(k.ipvs, expectedIpvsLines(b), `seed ${seed}: ipvsadm -Sn`);
    assert.deepEqual(k.vips, hostAddrs(B.vips!.addresses), `seed ${seed}: ip -j addr`);
    assert.deepEqual(k.ipsets, expectedIpsetLines(B.ipsets!), `seed ${seed}: ipset save`);
    objects += k.ipvs.length + k.vips.length + k.ipsets.length;

    const m1 = messages();
    const again = await e.plan(B);
    const reads = messages() - m1;
    assert.deepEqual(planWrites(again), [], `seed ${seed}: nothing to do`);
    const m2 = messages();
    const rs = await e.apply(again);
    assert.equal(messages() - m2, 0, `seed ${seed}: no message sent by the no-op apply`);
    assert.equal(reportWrites(rs), 0);
    const m3 = messages();
    assert.equal(reportWrites(await e.sync(B)), 0);
    assert.equal(messages() - m3, reads, `seed ${seed}: a resync sends only its ${reads} reads`);
  }
  assert.ok(objects / SEEDS > 200, `a few hundred objects per state (${Math.round(objects / SEEDS)})`);
});

test('foreign IPVS services (ipvsadm, outside the managed CIDRs / fwmarks, or excluded) survive every sync', async () => {
  cleanup();
  const foreign = [
    ['-A', '-t', '10.50.0.1:80', '-s', 'rr'],
    ['-a', '-t', '10.50.0.1:80', '-r', '10.244.9.1:80', '-m', '-w', '3'],
    ['-A', '-u', '[fd00:50::1]:53', '-s', 'wrr'],
    ['-a', '-u', '[fd00:50::1]:53', '-r', '[fd00:244::99]:53', '-m'],
    ['-A', '-f', '7', '-s', 'rr'],
    ['-A', '-f', '300', '-6', '-s', 'rr'],
    // inside the managed CIDR but excluded
    ['-A', '-t', '10.96.250.1:443', '-s', 'lc'],
    ['-a', '-t', '10.96.250.1:443', '-r', '10.244.9.2:443', '-m'],
  ];
  for (const f of foreign) run('ipvsadm', ...f);
  const theirs = () => ipvsadmLines(run('ipvsadm', '-Sn'), true).filter((l) => /10\.50\.0\.1|fd00:50::1|fwmark\|7 |fwmark\|300 |10\.96\.250\.1/.test(l));
  const before = theirs();
  assert.equal(before.length, foreign.length);
  const e = new Engine({ ipvs, links, ipsets }, { ...OWNERSHIP, excludeCidrs: ['10.96.250.0/24'] });
  const r = prng(4242);
  let svcs = randomServices(r, GEN);
  for (let i = 0; i < 6; i++) {
    const rep = await e.sync(randomState(r, svcs, { nft: false }));
    assert.deepEqual(rep.errors, [], `sync ${i}`);
    assert.deepEqual(theirs(), before, `sync ${i}: foreign services unchanged`);
    const ours = ipvsadmLines(run('ipvsadm', '-Sn')).filter((l) => !l.includes('|10.96.250.1|'));
    assert.deepEqual(ours, expectedIpvsLines(svcs), `sync ${i}: ours exactly as desired`);
    svcs = mutateServices(r, svcs, GEN);
  }
  await e.sync({ services: [], vips: { link: VIP_LINK, addresses: [] }, ipsets: [] });
  assert.deepEqual(ipvsadmLines(run('ipvsadm', '-Sn')).filter((l) => !l.includes('|10.96.250.1|')), [], 'all of ours gone');
  assert.deepEqual(theirs(), before, 'theirs still there');
  cleanup();
});

// ---- crash and resume ----------------------------------------------------------------------

/** A large deterministic state: n services (3/4 v4, 1/4 v6) × d destinations, VIPs, two sets. */
function bigState(n: number, d: number, salt: number): DesiredState {
  const services: DesiredService[] = [];
  for (let i = 0; i < n; i++) {
    const v6 = i % 4 === 3;
    const address = v6 ? `fd00:96::${(i + 1).toString(16)}` : `10.96.${(i >> 8) & 255}.${i & 255}`;
    services.push({
      protocol: i % 5 === 4 ? 'udp' : 'tcp',
      address,
      port: 80 + salt,
      scheduler: 'rr',
      destinations: Array.from({ length: d }, (_, j) => ({
        address: v6 ? `fd00:244::${(j * 4096 + i + 1).toString(16)}` : `10.${244 + (j & 7)}.${(i >> 8) & 255}.${i & 255}`,
        port: 8080,
        forward: 'masq' as const,
        weight: 1 + ((i + j + salt) % 3),
      })),
    });
  }
  return {
    services,
    vips: { link: VIP_LINK, addresses: services.map((s) => (s as { address: string }).address) },
    ipsets: [
      { name: `${SET_PREFIX}VIP`, type: 'hash:ip,port', family: 'inet', members: services.filter((s) => !(s as { address: string }).address.includes(':')).map((s) => ({ ip: (s as { address: string }).address, proto: (s as { protocol: 'tcp' }).protocol, port: 80 + salt })) },
      { name: `${SET_PREFIX}S${salt}`, type: 'hash:ip', family: 'inet', members: [{ ip: `10.1.${salt}.1` }] },
    ],
  };
}

async function waitFor(what: string, cond: () => Promise<boolean> | boolean, ms: number, every = 5): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, every));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

for (const point of ['addresses', 'ipvs'] as const) {
  test(`crash and resume: a sync SIGKILLed in the middle of its ${point} writes; a fresh engine converges with no duplicates or leftovers, then writes nothing`, async (t) => {
    cleanup();
    // The kernel holds an old state X (a previous run), then a child starts to sync Y and dies.
    const X = bigState(600, 4, 1);
    assert.deepEqual((await new Engine({ ipvs, links, ipsets }, OWNERSHIP).sync(X)).errors, []);
    const Y = bigState(3000, 8, 2);
    const dir = mkdtempSync(join(tmpdir(), 'engine-crash-'));
    const file = join(dir, 'state.json');
    writeFileSync(file, JSON.stringify({ desired: Y, ownership: OWNERSHIP }));
    const child = spawn(process.execPath, [join(here, '..', 'helpers', 'engine-crash-child.js'), file], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const exited = new Promise<number | null>((ok) => child.on('exit', (code, sig) => ok(sig ? -1 : code)));
    try {
      await waitFor('the child to plan', () => out.includes('planned'), 60_000, 10);
      if (point === 'addresses') {
        const xVips = new Set(X.vips!.addresses);
        await waitFor('the first new address', async () => (await links.addresses({ link: VIP_LINK })).some((a) => !xVips.has(a.address)), 60_000, 2);
      } else {
        await waitFor('the first new service', async () => (await ipvs.services()).some((s) => s.port === 82), 60_000, 2);
      }
      child.kill('SIGKILL');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    assert.equal(await exited, -1, 'killed by the signal');
    assert.ok(!out.includes('done'), `the child did not finish: ${out}`);

    // The kernel is in between: some of Y, some of X.
    const services = await ipvs.services({ withDestinations: true });
    const yServices = services.filter((s) => s.port === 82);
    const yDests = yServices.reduce((n, s) => n + (s.destinations?.length ?? 0), 0);
    const xLeft = services.filter((s) => s.port === 81).length;
    assert.ok(xLeft === 600, `X's services are all still there (${xLeft})`);
    assert.ok(yDests < 3000 * 8, `Y is incomplete (${yServices.length} services, ${yDests} destinations)`);

    // A fresh engine (a restarted process knows nothing) converges.
    const e = new Engine({ ipvs, links, ipsets }, OWNERSHIP);
    const rep = await e.sync(Y);
    assert.deepEqual(rep.errors.map((x) => x.message), [], 'no EEXIST / ESRCH: the plan starts from what the kernel has');
    assert.equal(rep.ipvs.ops.deleteService, 600, 'X removed');
    const lines = run('ipvsadm', '-Sn').trim().split('\n');
    assert.equal(new Set(lines).size, lines.length, 'no duplicate line');
    assert.deepEqual(ipvsadmLines(lines.join('\n'), true), expectedIpvsLines(Y.services), 'ipvsadm -Sn: exactly Y, nothing of X left');
    assert.deepEqual(ipAddrs(VIP_LINK), hostAddrs(Y.vips!.addresses));
    assert.deepEqual(ipsetSaveLines(run('ipset', 'save'), SET_PREFIX), expectedIpsetLines(Y.ipsets!), 'ipset save: exactly Y (the stale set of X destroyed)');
    t.diagnostic(`killed with ${yServices.length}/3000 services and ${yDests}/24000 destinations of Y written; resume: ${JSON.stringify(rep.ipvs.ops)} addresses ${JSON.stringify(rep.addresses.ops)}`);
    const m = messages();
    const p = await e.plan(Y);
    const reads = messages() - m;
    assert.deepEqual(planWrites(p), []);
    const m2 = messages();
    const again = await e.sync(Y);
    assert.equal(reportWrites(again), 0);
    assert.equal(messages() - m2, reads, 'the following sync sends only reads');
    cleanup();
  });
}
