// The io_uring destination read (many GET_DEST dumps at once over a pool of sockets) against
// the one-dump-per-service fallback, on a real kernel (inside the test VM): identical listings
// (services with 0, 1, 10 and more destinations than one datagram holds; IPv4, IPv6, fwmark;
// with and without counters), both equal to `ipvsadm -Sn`; the counters prove which path ran;
// and services deleted by `ipvsadm` while a read runs never make it fail.
import { test, before, after, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { Ipvs, type IpvsOp, type Service } from '../../src/kernel/ipvs.js';
import { formatSave } from '../../src/formats/ipvsadm.js';

const fast = await Ipvs.open({ ioUring: true });
const slow = await Ipvs.open({ ioUring: false });

function ipvsadm(args: string[]): string {
  return execFileSync('ipvsadm', args, { encoding: 'utf8', maxBuffer: 1 << 28 });
}

/** Whether the fast path is usable. Both kernels of test/vm (Debian 6.1, CONFIG_IO_URING=y)
 *  have io_uring: there its absence fails the test; elsewhere the test skips (and says why). */
async function haveIoUring(t: TestContext): Promise<boolean> {
  await fast.services({ withDestinations: true });
  const u = fast.socketStats().ioUring;
  if (u.state === 'on') return true;
  assert.ok(!process.env.IPVSYNC_VM, `io_uring unusable in the test VM: ${u.reason}`);
  t.skip(`no usable io_uring here: ${u.reason}`);
  return false;
}

before(async () => {
  await fast.flush();
});

after(async () => {
  await fast.flush();
});

/** A table of ~3,900 destinations: 0, 1, 10 and 300 (several datagrams) per service. */
function table(): IpvsOp[] {
  const ops: IpvsOp[] = [];
  const sizes = [0, 1, 10, 300];
  for (let s = 0; s < 120; s++) {
    const v6 = s % 3 === 1;
    const fwm = s % 7 === 6;
    const service = fwm
      ? { fwmark: 1000 + s, ...(v6 ? { family: 'inet6' as const } : {}) }
      : { protocol: (s % 2 ? 'udp' : 'tcp') as 'udp' | 'tcp', address: v6 ? `fd00:7::${s.toString(16)}` : `10.77.${s >> 8}.${s & 255}`, port: 80 + s };
    ops.push({ op: 'addService', service: { ...service, scheduler: 'wrr' } });
    const n = s < 8 ? sizes[s % 4]! : s % 5 === 0 ? 0 : s % 11 === 0 ? 300 : 10 + (s % 13);
    for (let d = 0; d < n; d++) {
      const address = v6 ? `fd00:8::${s.toString(16)}:${d.toString(16)}` : `127.${7 + (s >> 8)}.${s & 255}.${(d % 250) + 1}`;
      ops.push({ op: 'addDestination', service, dest: { address, port: 1000 + Math.floor(d / 250), forward: 'masq', weight: d } });
    }
  }
  return ops;
}

test('io_uring and one-dump-per-service read identical tables, both equal to ipvsadm -Sn', async (t) => {
  const r = await fast.apply(table());
  assert.ok(r.ok, r.errors[0]?.message);
  if (!(await haveIoUring(t))) return;

  const services = (await slow.services()).length;
  const reference = ipvsadm(['-Sn']);
  for (const stats of [false, true]) {
    const f0 = fast.socketStats();
    const a = await fast.services({ withDestinations: true, stats });
    const f1 = fast.socketStats();
    const s0 = slow.socketStats();
    const b = await slow.services({ withDestinations: true, stats });
    const s1 = slow.socketStats();

    // Counters are zero without traffic, so even `stats` listings compare equal.
    assert.deepEqual(a, b);
    assert.equal(formatSave(a), reference);
    const dests = a.reduce((n, s) => n + s.destinations!.length, 0);
    assert.equal(dests, Number(execFileSync('sh', ['-c', 'ipvsadm -Sn | grep -c "^-a"'], { encoding: 'utf8' }).trim()));
    assert.ok(a.some((s) => s.destinations!.length === 0) && a.some((s) => s.destinations!.length === 300));

    // Which path ran: the fast handle's own socket sent only the service dump, its ring carried
    // one SENDMSG per service, and a round (one io_uring_enter) served many services.
    assert.equal(f1.sendmsgCalls - f0.sendmsgCalls, 1);
    assert.equal(f1.ioUring.state, 'on');
    assert.equal(f1.ioUring.sendmsgs - f0.ioUring.sendmsgs, services);
    assert.equal(f1.ioUring.dumps - f0.ioUring.dumps, services);
    const enters = f1.ioUring.enterCalls - f0.ioUring.enterCalls;
    assert.ok(enters > 0 && enters * 10 <= services, `${enters} io_uring_enter calls for ${services} dumps`);
    // The fallback: one sendmsg per service (plus the service dump), no ring.
    assert.equal(s1.sendmsgCalls - s0.sendmsgCalls, services + 1);
    assert.equal(s1.ioUring.state, 'off');
    assert.equal(s1.ioUring.sendmsgs, 0);
  }

  // A pool smaller than the table (sockets are reused) and a one-socket pool read the same.
  for (const dumpSockets of [1, 7]) {
    const h = await Ipvs.open({ ioUring: true, dumpSockets });
    assert.deepEqual(await h.services({ withDestinations: true }), await slow.services({ withDestinations: true }));
    assert.equal(h.socketStats().ioUring.dumps, services);
  }
});

test('services deleted by ipvsadm during a read: listed with all their destinations, or with none, or not at all; never an error', async (t) => {
  await fast.flush();
  const ops: IpvsOp[] = [];
  const N = 1500;
  const vip = (s: number): string => `10.78.${s >> 8}.${s & 255}`;
  for (let s = 0; s < N; s++) {
    const service = { protocol: 'tcp' as const, address: vip(s), port: 80 };
    ops.push({ op: 'addService', service: { ...service, scheduler: 'rr' } });
    for (let d = 0; d < 4; d++) ops.push({ op: 'addDestination', service, dest: { address: `127.8.${s & 255}.${d + 1}`, port: 80 + (s >> 8), forward: 'masq' } });
  }
  if (!(await haveIoUring(t))) return;

  for (const [name, h] of [['io_uring', fast], ['fallback', slow]] as const) {
    assert.ok((await fast.apply(ops)).ok);
    // Every other service goes, in one ipvsadm -R run that overlaps the reads.
    const deleted = new Set<string>();
    const rules: string[] = [];
    for (let s = 1; s < N; s += 2) {
      deleted.add(vip(s));
      rules.push(`-D -t ${vip(s)}:80`);
    }
    const child = spawn('ipvsadm', ['-R'], { stdio: ['pipe', 'ignore', 'inherit'] });
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    child.stdin.end(rules.join('\n') + '\n');
    const reads: Service[][] = [];
    let done = false;
    void exited.then(() => (done = true));
    do reads.push(await h.services({ withDestinations: true }));
    while (!done);
    assert.equal(await exited, 0);
    reads.push(await h.services({ withDestinations: true }));

    for (const listed of reads) {
      for (const s of listed) {
        const n = s.destinations!.length;
        if (deleted.has(s.address!)) assert.ok(n === 0 || n === 4, `${name}: deleted ${s.address} listed with ${n} destinations`);
        else assert.equal(n, 4, `${name}: ${s.address} listed with ${n} destinations`);
      }
      assert.ok(listed.length >= N / 2, `${name}: the kept services are listed`);
    }
    const last = reads[reads.length - 1]!;
    assert.equal(last.length, N / 2, `${name}: after the deletions`);
    assert.equal(formatSave(last), ipvsadm(['-Sn']));
    await fast.flush();
  }
});

test('a handle reuses its listing storage without carrying rows over: a smaller table after a bigger one, listings in flight together, an empty table', async (t) => {
  await fast.flush();
  if (!(await haveIoUring(t))) return;
  for (const [name, h] of [['io_uring', fast], ['fallback', slow]] as const) {
    assert.ok((await fast.apply(table())).ok);
    const big = await h.services({ withDestinations: true });
    assert.equal(formatSave(big), ipvsadm(['-Sn']), `${name}: the full table`);

    // ipvsadm shrinks the table: two services of three go, the rest lose their first
    // destination and gain a new one, so every kept service's rows change.
    const rules: string[] = [];
    const kept: Service[] = [];
    big.forEach((s, i) => {
      const id = s.fwmark !== undefined ? `-f ${s.fwmark}${s.family === 'inet6' ? ' -6' : ''}` : `-${s.protocol === 'udp' ? 'u' : 't'} ${s.family === 'inet6' ? `[${s.address}]` : s.address}:${s.port}`;
      if (i % 3 !== 0) {
        rules.push(`-D ${id}`);
        return;
      }
      kept.push(s);
      const first = s.destinations![0];
      if (first) rules.push(`-d ${id} -r ${first.family === 'inet6' ? `[${first.address}]` : first.address}:${first.port}`);
      rules.push(`-a ${id} -r ${s.family === 'inet6' ? `[fd00:9::${i.toString(16)}]` : `127.9.${i >> 8}.${i & 255}`}:4000 -m -w 3`);
    });
    execFileSync('ipvsadm', ['-R'], { input: rules.join('\n') + '\n' });

    const fresh = await Ipvs.open({ ioUring: name === 'io_uring' });
    const expected = await fresh.services({ withDestinations: true });
    assert.equal(expected.length, kept.length);
    const small = await h.services({ withDestinations: true });
    assert.equal(formatSave(small), ipvsadm(['-Sn']), `${name}: the smaller table`);
    assert.deepEqual(small, expected, `${name}: reused storage reads what a new handle reads`);
    // The new destination is listed once, the removed one not at all.
    for (const s of small) assert.equal(s.destinations!.filter((d) => d.port === 4000).length, 1);

    // Without destinations after listings with them: no destinations key at all.
    const bare = await h.services();
    assert.ok(bare.every((s) => !('destinations' in s)), `${name}: no destinations asked, none listed`);
    assert.deepEqual(bare, await fresh.services());

    // Several listings in flight on one handle (one reuses the spare, the others get new storage).
    const together = await Promise.all([
      h.services({ withDestinations: true }),
      h.services(),
      h.services({ withDestinations: true, stats: true }),
      h.services({ withDestinations: true }),
    ]);
    assert.deepEqual(together[0], expected);
    assert.deepEqual(together[1], bare);
    assert.equal(formatSave(together[2]!), ipvsadm(['-Sn']));
    assert.ok(together[2]!.every((s) => s.stats !== undefined && s.destinations!.every((d) => d.stats !== undefined)));
    assert.deepEqual(together[3], expected);

    await fast.flush();
    assert.deepEqual(await h.services({ withDestinations: true }), [], `${name}: the empty table`);
    assert.equal(ipvsadm(['-Sn']), '');
  }
});

test('destinationsOf reads a slice of services: what services({ withDestinations }) lists for them, in the order asked; a service not there has none', async (t) => {
  await fast.flush();
  assert.ok((await fast.apply(table())).ok);
  const whole = await slow.services({ withDestinations: true });
  const id = (s: Service) => (s.fwmark !== undefined ? { fwmark: s.fwmark, family: s.family } : { protocol: s.protocol!, address: s.address!, port: s.port!, family: s.family });
  // every third service, backwards, with two that do not exist among them
  const asked = whole.filter((_, i) => i % 3 === 0).reverse();
  const ids = [...asked.map(id)];
  ids.splice(2, 0, { protocol: 'tcp', address: '10.79.0.1', port: 80, family: 'inet' });
  ids.push({ fwmark: 4242, family: 'inet' });
  for (const [name, h] of [['io_uring', fast], ['fallback', slow]] as const) {
    const got = await h.destinationsOf(ids);
    assert.equal(got.length, ids.length);
    assert.deepEqual(got[2], [], `${name}: a service that is not there`);
    assert.deepEqual(got[got.length - 1], []);
    const listed = got.filter((_, i) => i !== 2 && i !== got.length - 1);
    assert.deepEqual(listed, asked.map((s) => s.destinations), `${name}: the listing's destinations, in the order asked`);
    assert.ok(listed.some((d) => d.length === 300) && listed.some((d) => d.length === 0));
    assert.deepEqual(await h.destinationsOf([]), []);
    const withStats = await h.destinationsOf(ids.slice(0, 3), { stats: true });
    assert.ok(withStats.flat().every((d) => d.stats !== undefined));
  }
  if (await haveIoUring(t)) {
    const f0 = fast.socketStats();
    await fast.destinationsOf(ids);
    const f1 = fast.socketStats();
    assert.equal(f1.ioUring.dumps - f0.ioUring.dumps, ids.length, 'one GET_DEST dump per service, over io_uring');
    assert.equal(f1.sendmsgCalls - f0.sendmsgCalls, 0, 'nothing on the handle socket itself');
  }
  await fast.flush();
});
