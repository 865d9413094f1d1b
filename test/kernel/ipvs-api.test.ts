// The typed IPVS API against a real kernel (inside the test VM): every attribute round-trips
// (write -> list -> equal) for IPv4, IPv6 and fwmark services, every scheduler and forwarding
// method, tunnel attributes; kernel errors keep errno, op and index; validation sends nothing;
// stop-on-error sends nothing after the failing op; applies in flight together run in call
// order; a 50k-destination dump spans many recv calls.
import { test, beforeEach, after } from 'node:test';
import assert from 'node:assert/strict';
import * as os from 'node:os';
import { execFileSync } from 'node:child_process';
import { Ipvs, SCHEDULERS, type Destination, type DestinationConfig, type IpvsOp, type Service, type ServiceConfig, type ServiceId } from '../../src/kernel/ipvs.js';
import { NetlinkError } from '../../src/errors.js';

const ipvs = await Ipvs.open();

after(async () => {
  // Leave the kernel's table as we found it (the suite's files share one guest kernel).
  await ipvs.flush();
});

beforeEach(async () => {
  await ipvs.flush();
});

function kernelAtLeast(major: number, minor: number): boolean {
  const [a, b] = os.release().split('.').map(Number) as [number, number];
  return a > major || (a === major && b >= minor);
}

/** What the kernel should report for a written service (ipvsync's defaults filled in). */
function expectService(c: ServiceConfig): Omit<Service, 'destinations' | 'stats'> {
  const v6 = 'fwmark' in c ? c.family === 'inet6' : c.address.includes(':');
  const persistent = (c.flags ?? []).includes('persistent');
  const order = ['persistent', 'one-packet', 'sh-fallback', 'mh-fallback', 'flag-1', 'sh-port', 'mh-port', 'flag-2', 'flag-3'];
  const base = 'fwmark' in c ? { family: v6 ? 'inet6' : 'inet', fwmark: c.fwmark } : { family: v6 ? 'inet6' : 'inet', protocol: c.protocol, address: c.address, port: c.port };
  return {
    ...base,
    scheduler: c.scheduler ?? 'wlc',
    flags: [...(c.flags ?? [])].sort((a, b) => order.indexOf(a) - order.indexOf(b)),
    timeout: c.timeout ?? (persistent ? 360 : 0),
    netmask: c.netmask ?? (v6 ? 128 : '255.255.255.255'),
    ...(c.pe ? { pe: c.pe } : {}),
  } as Omit<Service, 'destinations' | 'stats'>;
}

function expectDest(d: DestinationConfig): Destination {
  const forward = d.forward ?? 'droute';
  const tunnel =
    forward === 'tunnel'
      ? (() => {
          const t = d.tunnel ?? { type: 'ipip' as const };
          if (t.type === 'ipip') return { type: 'ipip' as const };
          if (t.type === 'gue') return { type: 'gue' as const, port: t.port!, checksum: t.checksum ?? 'none' };
          return { type: 'gre' as const, checksum: t.checksum ?? 'none' };
        })()
      : undefined;
  return {
    family: d.address.includes(':') ? 'inet6' : 'inet',
    address: d.address,
    port: d.port,
    forward,
    weight: d.weight ?? 1,
    upperThreshold: d.upperThreshold ?? 0,
    lowerThreshold: d.lowerThreshold ?? 0,
    ...(tunnel ? { tunnel } : {}),
    activeConns: 0,
    inactiveConns: 0,
    persistentConns: 0,
  };
}

function idOf(c: ServiceConfig): ServiceId {
  return 'fwmark' in c ? { fwmark: c.fwmark, ...(c.family ? { family: c.family } : {}) } : { protocol: c.protocol, address: c.address, port: c.port };
}

function key(s: { fwmark?: number; family: string; protocol?: string; address?: string; port?: number }): string {
  return s.fwmark ? `fwm ${s.fwmark} ${s.family}` : `${s.protocol} ${s.address} ${s.port}`;
}

async function roundTrip(configs: Array<{ service: ServiceConfig; dests: DestinationConfig[] }>): Promise<void> {
  const ops: IpvsOp[] = [];
  for (const c of configs) {
    ops.push({ op: 'addService', service: c.service });
    for (const d of c.dests) ops.push({ op: 'addDestination', service: idOf(c.service), dest: d });
  }
  const r = await ipvs.apply(ops);
  assert.deepEqual(r.errors.map((e) => e.message), []);
  assert.ok(r.ok);
  const listed = await ipvs.services({ withDestinations: true });
  assert.equal(listed.length, configs.length);
  const byKey = new Map(listed.map((s) => [key(s), s]));
  for (const c of configs) {
    const want = expectService(c.service);
    const got = byKey.get(key(want as Service));
    assert.ok(got, `service ${key(want as Service)} listed`);
    const { destinations, ...svc } = got;
    assert.deepEqual(svc, want);
    const sortD = (a: Destination, b: Destination): number => (a.address + a.port < b.address + b.port ? -1 : 1);
    assert.deepEqual([...destinations!].sort(sortD), c.dests.map(expectDest).sort(sortD));
    // The same through the single-service GET and the per-service destination dump.
    const one = await ipvs.service(idOf(c.service), { withDestinations: true });
    assert.deepEqual({ ...one!, destinations: [...one!.destinations!].sort(sortD) }, { ...got, destinations: [...destinations!].sort(sortD) });
    assert.deepEqual([...(await ipvs.destinations(idOf(c.service)))].sort(sortD), [...destinations!].sort(sortD));
  }
}

test('IPv4, IPv6 and fwmark services with every option round-trip', async () => {
  await roundTrip([
    { service: { protocol: 'tcp', address: '10.0.0.1', port: 80, scheduler: 'rr' }, dests: [] },
    { service: { protocol: 'udp', address: '10.0.0.2', port: 53, scheduler: 'wrr', flags: ['one-packet'] }, dests: [] },
    { service: { protocol: 'sctp', address: '10.0.0.3', port: 9, scheduler: 'sh', flags: ['sh-fallback', 'sh-port'] }, dests: [] },
    { service: { protocol: 'tcp', address: '10.0.0.4', port: 443, scheduler: 'lc', flags: ['persistent'], timeout: 1800, netmask: '255.255.255.0' }, dests: [] },
    { service: { protocol: 'udp', address: '10.0.0.5', port: 5060, scheduler: 'rr', flags: ['persistent'], pe: 'sip' }, dests: [] },
    { service: { protocol: 'tcp', address: 'fd00::1', port: 80, scheduler: 'mh', flags: ['mh-fallback', 'mh-port', 'persistent'], timeout: 10, netmask: 64 }, dests: [] },
    { service: { protocol: 'udp', address: 'fd00::2', port: 53, scheduler: 'dh' }, dests: [] },
    { service: { fwmark: 1, scheduler: 'wlc' }, dests: [] },
    { service: { fwmark: 2, family: 'inet6', scheduler: 'sed', flags: ['flag-1', 'flag-2', 'flag-3'] }, dests: [] },
    { service: { fwmark: 0xffffffff, scheduler: 'nq', flags: ['persistent', 'one-packet'], netmask: '255.255.0.0' }, dests: [] },
  ]);
});

test('every scheduler the kernel ships; an unknown one is ENOENT naming it', async () => {
  const configs = SCHEDULERS.filter((s) => s !== 'twos' || kernelAtLeast(6, 2)).map((s, i) => ({
    service: { protocol: 'tcp' as const, address: `10.1.0.${i + 1}`, port: 80, scheduler: s },
    dests: [{ address: '127.0.0.2', port: 80, forward: 'masq' as const }],
  }));
  await roundTrip(configs);
  const bad = await ipvs.apply([{ op: 'addService', service: { protocol: 'tcp', address: '10.1.1.1', port: 80, scheduler: kernelAtLeast(6, 2) ? 'nosuch' : 'twos' } }]);
  assert.equal(bad.status(0), 'error');
  const e = bad.errorOf(0)!;
  assert.equal(e.code, 'ENOENT');
  assert.equal(e.kind, 'kernel');
  assert.match(e.message, kernelAtLeast(6, 2) ? /scheduler nosuch/ : /scheduler twos/);
  // The kernel's ENOENT is kept; the message says what it means here.
  const name = kernelAtLeast(6, 2) ? 'nosuch' : 'twos';
  assert.match(e.message, new RegExp(`the kernel module ip_vs_${name} is missing, or the name is wrong`));
  // updateService the same (an existing service, a scheduler the kernel cannot load)
  const svc = { protocol: 'tcp', address: '10.1.1.2', port: 80 } as const;
  const up = await ipvs.apply([{ op: 'addService', service: { ...svc, scheduler: 'rr' } }, { op: 'updateService', service: { ...svc, scheduler: name } }]);
  assert.equal(up.errorOf(1)!.code, 'ENOENT');
  assert.match(up.errorOf(1)!.message, new RegExp(`ip_vs_${name} is missing`));
  // a missing service is ESRCH, with no such hint
  const gone = await ipvs.apply([{ op: 'updateService', service: { protocol: 'tcp', address: '10.1.1.3', port: 80, scheduler: 'rr' } }]);
  assert.equal(gone.errorOf(0)!.code, 'ESRCH');
  assert.doesNotMatch(gone.errorOf(0)!.message, /ip_vs_/);
});

test('every forwarding method, thresholds, weights and tunnel attributes round-trip (v4 and v6)', async () => {
  await roundTrip([
    {
      service: { protocol: 'tcp', address: '10.0.0.1', port: 80, scheduler: 'wrr' },
      dests: [
        { address: '127.0.0.2', port: 8080, forward: 'masq', weight: 0, upperThreshold: 100, lowerThreshold: 10 },
        { address: '127.0.0.3', port: 80, forward: 'droute', weight: 2147483647 },
        { address: '127.0.0.4', port: 80, forward: 'local', weight: 5 },
        { address: '127.0.0.5', port: 80, forward: 'tunnel' },
        { address: '127.0.0.6', port: 80, forward: 'tunnel', tunnel: { type: 'gue', port: 6080, checksum: 'csum' } },
        { address: '127.0.0.7', port: 80, forward: 'tunnel', tunnel: { type: 'gue', port: 6081, checksum: 'remcsum' } },
        { address: '127.0.0.8', port: 80, forward: 'tunnel', tunnel: { type: 'gre', checksum: 'csum' } },
        { address: '127.0.0.9', port: 80, forward: 'tunnel', tunnel: { type: 'gre' } },
      ],
    },
    {
      service: { protocol: 'udp', address: 'fd00::1', port: 53, scheduler: 'rr' },
      dests: [
        { address: '::1', port: 5353, forward: 'masq', weight: 3, upperThreshold: 7, lowerThreshold: 7 },
        { address: 'fd00::9', port: 53, forward: 'droute' },
        { address: 'fd00::10', port: 53, forward: 'tunnel', tunnel: { type: 'gue', port: 5555, checksum: 'none' } },
        // An IPv4 real server of an IPv6 service: the kernel allows it for tunnels only.
        { address: '127.0.0.10', port: 53, forward: 'tunnel', tunnel: { type: 'ipip' } },
      ],
    },
    {
      service: { fwmark: 7, family: 'inet6', scheduler: 'lblcr' },
      dests: [{ address: '::1', port: 0, forward: 'masq', weight: 9 }],
    },
  ]);
});

test('updates change every option; zero, timeouts, daemons', async () => {
  const svc = { protocol: 'tcp', address: '10.0.0.1', port: 80 } as const;
  (await ipvs.apply([
    { op: 'addService', service: { ...svc, scheduler: 'rr' } },
    { op: 'addDestination', service: svc, dest: { address: '127.0.0.2', port: 80, forward: 'masq' } },
  ])).orThrow();
  (await ipvs.apply([
    { op: 'updateService', service: { ...svc, scheduler: 'sh', flags: ['persistent', 'sh-port'], timeout: 77, netmask: '255.255.255.240' } },
    { op: 'updateDestination', service: svc, dest: { address: '127.0.0.2', port: 80, forward: 'tunnel', weight: 9, upperThreshold: 5, lowerThreshold: 2, tunnel: { type: 'gre', checksum: 'csum' } } },
  ])).orThrow();
  const [s] = await ipvs.services({ withDestinations: true, stats: true });
  assert.equal(s!.scheduler, 'sh');
  assert.deepEqual(s!.flags, ['persistent', 'sh-port']);
  assert.equal(s!.timeout, 77);
  assert.equal(s!.netmask, '255.255.255.240');
  assert.ok(s!.stats && typeof s!.stats.conns === 'number');
  const d = s!.destinations![0]!;
  assert.deepEqual([d.forward, d.weight, d.upperThreshold, d.lowerThreshold, d.tunnel], ['tunnel', 9, 5, 2, { type: 'gre', checksum: 'csum' }]);
  assert.ok(d.stats);
  await ipvs.zero(svc);
  await ipvs.zero();

  const before = await ipvs.timeouts();
  await ipvs.setTimeouts({ tcp: 901, tcpFin: 121, udp: 301 });
  assert.deepEqual(await ipvs.timeouts(), { tcp: 901, tcpFin: 121, udp: 301 });
  await ipvs.setTimeouts({ udp: 302 }); // absent fields stay
  assert.deepEqual(await ipvs.timeouts(), { tcp: 901, tcpFin: 121, udp: 302 });
  await ipvs.setTimeouts(before);

  // Sync daemons refuse to run with mixed-family destinations; flush first.
  await ipvs.flush();
  await ipvs.startDaemon({ state: 'master', interface: 'lo', syncId: 3, syncMaxLen: 1400, mcastGroup: '224.0.0.81', mcastPort: 8848, mcastTtl: 2 });
  try {
    assert.deepEqual(await ipvs.daemons(), [{ state: 'master', interface: 'lo', syncId: 3, syncMaxLen: 1400, mcastGroup: '224.0.0.81', mcastPort: 8848, mcastTtl: 2 }]);
    await assert.rejects(ipvs.startDaemon({ state: 'master', interface: 'lo', syncId: 3 }), (e: unknown) => e instanceof NetlinkError && e.code === 'EEXIST' && e.kind === 'kernel');
  } finally {
    await ipvs.stopDaemon('master');
  }
  assert.deepEqual(await ipvs.daemons(), []);
  await ipvs.startDaemon({ state: 'backup', interface: 'lo', syncId: 4 });
  const [b] = await ipvs.daemons();
  assert.deepEqual([b?.state, b?.interface, b?.syncId], ['backup', 'lo', 4]);
  await stopBackup();
  assert.deepEqual(await ipvs.daemons(), []);
});

/**
 * Under user-mode-linux the kernel sometimes takes longer than the socket's 10 s reply wait to
 * stop a backup sync thread that has just been started (observed 10-30 s, also with ipvsadm
 * timing aside); the stop does happen. Wait for it instead of reporting a spurious failure.
 */
async function stopBackup(): Promise<void> {
  try {
    await ipvs.stopDaemon('backup');
    return;
  } catch (e) {
    if (!(e instanceof NetlinkError) || e.kind !== 'nobufs') throw e;
  }
  for (let i = 0; i < 120; i++) {
    if (!(await ipvs.daemons()).some((d) => d.state === 'backup')) return;
    await new Promise((r) => setTimeout(r, 500));
  }
  assert.fail('the backup sync daemon did not stop within 60 s');
}



test('kernel errors: EEXIST, ESRCH, with op, errno and index', async () => {
  const svc = { protocol: 'tcp', address: '10.0.0.1', port: 80 } as const;
  const missing = { protocol: 'udp', address: 'fd00::1', port: 99 } as const;
  const r = await ipvs.apply(
    [
      { op: 'addService', service: { ...svc, scheduler: 'rr' } },
      { op: 'addService', service: { ...svc, scheduler: 'rr' } },
      { op: 'addDestination', service: svc, dest: { address: '127.0.0.2', port: 80, forward: 'masq' } },
      { op: 'addDestination', service: svc, dest: { address: '127.0.0.2', port: 80, forward: 'masq' } },
      { op: 'deleteService', service: missing },
      { op: 'deleteDestination', service: svc, dest: { address: '127.0.0.3', port: 80 } },
      { op: 'addDestination', service: missing, dest: { address: '::1', port: 1, forward: 'masq' } },
      { op: 'updateService', service: { ...missing, scheduler: 'rr' } },
      { op: 'updateDestination', service: svc, dest: { address: '127.0.0.3', port: 80, forward: 'masq' } },
      { op: 'zero', service: missing },
    ],
    { stopOnError: false },
  );
  const codes = r.errors.map((e) => [e.index, e.code]);
  assert.deepEqual(codes, [
    [1, 'EEXIST'],
    [3, 'EEXIST'],
    [4, 'ESRCH'],
    [5, 'ENOENT'],
    [6, 'ESRCH'],
    [7, 'ESRCH'],
    [8, 'ENOENT'],
    [9, 'ESRCH'],
  ]);
  for (const e of r.errors) {
    assert.equal(e.kind, 'kernel');
    assert.ok(e.errno > 0);
    assert.match(e.op, /^IPVS_CMD_/);
  }
  assert.match(r.errorOf(4)!.message, /IPVS_CMD_DEL_SERVICE udp \[fd00::1\]:99: ESRCH/);
  assert.match(r.errorOf(5)!.message, /IPVS_CMD_DEL_DEST tcp 10\.0\.0\.1:80 -> 127\.0\.0\.3:80: ENOENT/);
  assert.equal(await ipvs.service(missing), null);
});

const saved = () => execFileSync('ipvsadm', ['-Sn'], { encoding: 'utf8' }).split('\n').filter(Boolean).sort();

test('[addService, the same again (EEXIST), addService]: stopOnError (default) leaves the third out of the kernel', async () => {
  const mk = (i: number): IpvsOp => ({ op: 'addService', service: { protocol: 'tcp', address: `10.3.0.${i}`, port: 80, scheduler: 'rr' } });
  const ops = [mk(1), mk(1), mk(3)];
  const stopped = await ipvs.apply(ops);
  assert.deepEqual([0, 1, 2].map((i) => stopped.status(i)), ['ok', 'error', 'not-sent']);
  assert.deepEqual(stopped.errors.map((e) => [e.index, e.code]), [[1, 'EEXIST']]);
  assert.deepEqual(saved(), ['-A -t 10.3.0.1:80 -s rr']);

  await ipvs.flush();
  const all = await ipvs.apply(ops, { stopOnError: false });
  assert.deepEqual([0, 1, 2].map((i) => all.status(i)), ['ok', 'error', 'ok']);
  assert.equal(all.sendmsgCalls, 1, 'pipelined: one sendmsg');
  assert.deepEqual(saved(), ['-A -t 10.3.0.1:80 -s rr', '-A -t 10.3.0.3:80 -s rr']);
});

for (const ack of ['errors', 'each'] as const) {
  test(`a batch failing in the middle reports the op index; stopOnError sends nothing after it, whatever maxBatchMessages (ack: ${ack})`, async () => {
    const mk = (i: number): IpvsOp => ({ op: 'addService', service: { protocol: 'tcp', address: `10.2.0.${i}`, port: 80, scheduler: 'rr' } });
    const ops = [mk(1), mk(2), mk(1), mk(3), mk(4), mk(5)];
    const stopped = await ipvs.apply(ops, { maxBatchMessages: 2, ack });
    assert.deepEqual([0, 1, 2, 3, 4, 5].map((i) => stopped.status(i)), ['ok', 'ok', 'error', 'not-sent', 'not-sent', 'not-sent']);
    assert.equal(stopped.errors.length, 1);
    assert.equal(stopped.errors[0]!.index, 2);
    assert.equal(stopped.errors[0]!.code, 'EEXIST');
    assert.equal(stopped.sendmsgCalls, 3, 'one request per sendmsg, up to the failing one');
    assert.deepEqual((await ipvs.services()).map((s) => s.address).sort(), ['10.2.0.1', '10.2.0.2']);
    assert.deepEqual(saved(), ['-A -t 10.2.0.1:80 -s rr', '-A -t 10.2.0.2:80 -s rr']);

    await ipvs.flush();
    const all = await ipvs.apply(ops, { maxBatchMessages: 2, stopOnError: false, ack });
    assert.deepEqual([0, 1, 2, 3, 4, 5].map((i) => all.status(i)), ['ok', 'ok', 'error', 'ok', 'ok', 'ok']);
    assert.equal(all.sendmsgCalls, 3);
    assert.equal((await ipvs.services()).length, 5);
  });
}

test('applies in flight together reach the kernel in call order (each depends on the one before), past an invalid batch and a listing', async () => {
  const svc = { protocol: 'tcp', address: '10.0.0.7', port: 80 } as const;
  const calls: Array<Promise<unknown>> = [];
  const expect: string[] = [];
  calls.push(ipvs.apply([{ op: 'addService', service: { ...svc, scheduler: 'rr' } }]));
  for (let i = 1; i <= 60; i++) {
    // each destination added in one call is updated by the next and deleted by the one after:
    // any call overtaking the one before it draws ENOENT / EEXIST / ESRCH
    calls.push(ipvs.apply([{ op: 'addDestination', service: svc, dest: { address: `127.0.1.${i}`, port: 80, forward: 'masq', weight: 1 } }]));
    calls.push(ipvs.apply([{ op: 'updateDestination', service: svc, dest: { address: `127.0.1.${i}`, port: 80, forward: 'masq', weight: 7 } }]));
    if (i % 2 === 0) calls.push(ipvs.apply([{ op: 'deleteDestination', service: svc, dest: { address: `127.0.1.${i}`, port: 80 } }]));
    else expect.push(`127.0.1.${i}`);
    if (i === 20) {
      calls.push(ipvs.apply([{ op: 'addService', service: { ...svc, port: 70000 } }]).then(() => 'sent', (e: NetlinkError) => e.kind));
      calls.push(ipvs.services({ withDestinations: true }));
    }
    if (i === 45) calls.push(ipvs.apply([{ op: 'updateService', service: { ...svc, scheduler: 'wrr' } }]));
  }
  const results = await Promise.all(calls);
  for (const r of results) {
    if (r && typeof r === 'object' && 'errors' in r) assert.deepEqual((r as { errors: NetlinkError[] }).errors.map((e) => e.message), []);
  }
  assert.ok(results.includes('invalid'), 'the invalid batch was refused on its own');
  const [s] = await ipvs.services({ withDestinations: true });
  assert.equal(s!.scheduler, 'wrr');
  assert.deepEqual(s!.destinations!.map((d) => d.address).sort(), expect.sort());
  assert.ok(s!.destinations!.every((d) => d.weight === 7));
});

test('invalid input sends nothing (every validation case is also covered by the unit suite)', async () => {
  const before = ipvs.socketStats().sendmsgCalls;
  const bad: unknown[] = [
    { op: 'addService', service: { protocol: 'tcp', address: '10.0.0.256', port: 80 } },
    { op: 'addService', service: { protocol: 'tcp', address: '10.0.0.1', port: 70000 } },
    { op: 'addService', service: { fwmark: 0 } },
    { op: 'addService', service: { protocol: 'tcp', address: '10.0.0.1', port: 80, scheduler: 'abcdefghijklmnop' } },
    { op: 'addDestination', service: { protocol: 'tcp', address: '10.0.0.1', port: 80 }, dest: { address: '127.0.0.1', port: 80, weight: -1 } },
    { op: 'addDestination', service: { protocol: 'tcp', address: '10.0.0.1', port: 80 }, dest: { address: '127.0.0.1', port: 80, weight: 2 ** 31 } },
    { op: 'addDestination', service: { protocol: 'tcp', address: '10.0.0.1', port: 80 }, dest: { address: 'fd00::1', port: 80, forward: 'masq' } },
  ];
  for (const op of bad) {
    await assert.rejects(
      ipvs.apply([{ op: 'flush' }, op as IpvsOp]),
      (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && e.index === 1,
    );
  }
  // malformed ops (not only bad values) are refused the same way, never as raw JS errors
  const throwing = Object.defineProperty({ op: 'addService' }, 'service', { get: () => { throw new Error('getter'); } });
  for (const op of [null, 5, 'flush', [], { op: 7 }, { op: 'addService', service: null }, throwing]) {
    await assert.rejects(
      ipvs.apply([{ op: 'flush' }, op as IpvsOp]),
      (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && e.index === 1,
      String(op),
    );
  }
  await assert.rejects(ipvs.apply(null as never), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid');
  assert.equal(ipvs.socketStats().sendmsgCalls, before);
});

test('orThrow() throws the first kernel error; close() ends the handle (later calls reject with EBADF)', async () => {
  const svc = { protocol: 'tcp', address: '10.2.0.1', port: 80 } as const;
  const r = await ipvs.apply([{ op: 'addService', service: svc }, { op: 'addService', service: svc }], { stopOnError: false });
  assert.throws(() => r.orThrow(), (e: unknown) => e === r.errorOf(1) && (e as NetlinkError).code === 'EEXIST');
  const h = await Ipvs.open();
  const pending = h.services();
  await h.close();
  assert.equal((await pending).length, 1);
  const closed = (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && e.code === 'EBADF';
  await assert.rejects(h.services(), closed);
  await assert.rejects(h.apply([{ op: 'flush' }]), closed);
  await assert.rejects(h.info(), closed);
  await assert.rejects(Ipvs.open({ netns: '/run/netns/ipvsync-missing' }), NetlinkError);
});

test('50,000 destinations (500 services x 100) are written in one apply and dumped across many recv calls', async () => {
  const ops: IpvsOp[] = [];
  for (let s = 0; s < 500; s++) {
    const service = { protocol: 'tcp' as const, address: `10.${100 + (s >> 8)}.${s & 255}.1`, port: 80 };
    ops.push({ op: 'addService', service: { ...service, scheduler: 'rr' } });
    for (let d = 0; d < 100; d++) ops.push({ op: 'addDestination', service, dest: { address: `127.1.${s & 255}.${d + 1}`, port: 8000 + (s >> 8), forward: 'masq', weight: d } });
  }
  const w = await ipvs.apply(ops, { stopOnError: false }); // pipelined, as the engine sends it
  assert.ok(w.ok, w.errors[0]?.message);
  assert.ok(w.sendmsgCalls < ops.length / 100, `batched: ${w.sendmsgCalls} sendmsg calls for ${ops.length} ops`);
  const recvBefore = ipvs.socketStats().recvmsgCalls;
  const sendBefore = ipvs.socketStats().sendmsgCalls;
  const ringBefore = ipvs.socketStats().ioUring;
  const listed = await ipvs.services({ withDestinations: true });
  const recvs = ipvs.socketStats().recvmsgCalls - recvBefore;
  assert.equal(listed.length, 500);
  let total = 0;
  for (const s of listed) {
    assert.equal(s.destinations!.length, 100, `${s.address} has 100 destinations`);
    const weights = s.destinations!.map((d) => d.weight).sort((a, b) => a - b);
    assert.deepEqual(weights, Array.from({ length: 100 }, (_, i) => i));
    total += s.destinations!.length;
  }
  assert.equal(total, 50000);
  // One dump for the services and one per service; each destination dump spans several datagrams.
  const after = ipvs.socketStats();
  if (after.ioUring.state === 'on') {
    // Over io_uring (the default): the handle's socket sent the service dump, the ring one
    // SENDMSG per service, and its RECVMSGs took the many datagrams.
    assert.equal(after.sendmsgCalls - sendBefore, 1);
    assert.equal(after.ioUring.sendmsgs - ringBefore.sendmsgs, 500);
    assert.ok(after.ioUring.recvmsgs - ringBefore.recvmsgs > 1000, `${after.ioUring.recvmsgs - ringBefore.recvmsgs} ring receives`);
  } else {
    assert.equal(after.sendmsgCalls - sendBefore, 501);
    assert.ok(recvs > 1000, `${recvs} recvmsg calls`);
  }
});

test('a small destination dump costs one send and one receive (the reply and its DONE in one recvmmsg), or a share of one io_uring_enter', async () => {
  const ops: IpvsOp[] = [];
  for (let s = 0; s < 200; s++) {
    const service = { protocol: 'tcp' as const, address: `10.150.${s >> 8}.${s & 255}`, port: 80 };
    ops.push({ op: 'addService', service: { ...service, scheduler: 'rr' } });
    ops.push({ op: 'addDestination', service, dest: { address: `127.2.0.${(s % 250) + 1}`, port: 80, forward: 'masq' } });
  }
  assert.ok((await ipvs.apply(ops)).ok);
  const before = ipvs.socketStats();
  const listed = await ipvs.services({ withDestinations: true });
  const after = ipvs.socketStats();
  assert.equal(listed.length, 200);
  assert.ok(listed.every((s) => s.destinations!.length === 1));
  if (after.ioUring.state === 'on') {
    // Over io_uring (the default): the 200 destination dumps went through the ring, several
    // per io_uring_enter; the handle's socket only dumped the services.
    assert.equal(after.sendmsgCalls - before.sendmsgCalls, 1, 'the service dump');
    assert.equal(after.ioUring.sendmsgs - before.ioUring.sendmsgs, 200, 'one destination dump per service');
    const enters = after.ioUring.enterCalls - before.ioUring.enterCalls;
    assert.ok(enters * 10 <= 200, `${enters} io_uring_enter calls for 200 dumps`);
    return;
  }
  assert.equal(after.sendmsgCalls - before.sendmsgCalls, 201, 'the service dump and one destination dump per service');
  // ipvsadm needs two receives per destination dump (the data, then NLMSG_DONE); the service
  // dump itself takes a few more for its several datagrams.
  assert.ok(after.recvmsgCalls - before.recvmsgCalls <= 200 + 5, `${after.recvmsgCalls - before.recvmsgCalls} receive calls for 201 dumps`);
});
