// The in-memory IPVS keeps the destinations as applied and makes them into Destinations when
// read: what it reports must be what the kernel would (defaults filled in, canonical
// addresses, fresh objects, connection counts kept across an update and gone with the
// destination), and its per-apply service lookup must follow services deleted and re-added.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import type { DestinationConfig, ServiceConfig } from '../../src/kernel/ipvs.js';

const svc: ServiceConfig = { protocol: 'tcp', address: '10.96.0.1', port: 80, scheduler: 'rr' };

test('destinations read back with the defaults filled in, canonical, as fresh objects', async () => {
  const ipvs = new FakeIpvs({ record: false });
  const d6: DestinationConfig = { address: 'fd00:0::5', port: 8080, forward: 'masq' };
  const s6: ServiceConfig = { protocol: 'tcp', address: 'fd00::1', port: 80 };
  const d4: DestinationConfig = { address: '10.244.0.2', port: 8080 };
  const r = await ipvs.apply([
    { op: 'addService', service: svc },
    { op: 'addDestination', service: svc, dest: d4 },
    { op: 'addService', service: s6 },
    { op: 'addDestination', service: s6, dest: d6 },
  ]);
  assert.equal(r.errors.length, 0);
  const [got4] = await ipvs.destinations(svc);
  assert.deepEqual(got4, {
    family: 'inet', address: '10.244.0.2', port: 8080, forward: 'droute', weight: 1, upperThreshold: 0, lowerThreshold: 0,
    activeConns: 0, inactiveConns: 0, persistentConns: 0,
  });
  assert.notEqual(got4, d4);
  got4!.weight = 9; // a caller's change to what it read changes nothing kept
  assert.equal((await ipvs.destinations(svc))[0]!.weight, 1);
  const [got6] = await ipvs.destinations(s6);
  assert.equal(got6!.address, 'fd00::5');
  assert.equal(got6!.family, 'inet6');
  // an IPv6 destination is found by either spelling
  const del = await ipvs.apply([{ op: 'deleteDestination', service: s6, dest: { address: 'fd00::5', port: 8080 } }]);
  assert.equal(del.errors.length, 0);
  assert.deepEqual(await ipvs.destinations(s6), []);
  // the same through a service dump and the batched destination dump
  const [listed] = await ipvs.services({ withDestinations: true });
  assert.deepEqual(listed!.destinations, [{ ...got4!, weight: 1 }]);
  assert.deepEqual(await ipvs.destinationsOf([svc, s6]), [[{ ...got4!, weight: 1 }], []]);
});

test('connection counts survive an update and go with the destination', async () => {
  const ipvs = new FakeIpvs();
  const d: DestinationConfig = { address: '10.244.0.2', port: 8080, forward: 'masq', weight: 1 };
  await ipvs.apply([{ op: 'addService', service: svc }, { op: 'addDestination', service: svc, dest: d }]);
  ipvs.setConnections(svc, d, 5, 2);
  await ipvs.apply([{ op: 'updateDestination', service: svc, dest: { ...d, weight: 0 } }]);
  const [after] = await ipvs.destinations(svc);
  assert.equal(after!.weight, 0);
  assert.equal(after!.activeConns, 5);
  assert.equal(after!.inactiveConns, 2);
  await ipvs.apply([{ op: 'deleteDestination', service: svc, dest: d }, { op: 'addDestination', service: svc, dest: d }]);
  const [again] = await ipvs.destinations(svc);
  assert.equal(again!.activeConns, 0);
  assert.equal(again!.inactiveConns, 0);
  assert.throws(() => ipvs.setConnections(svc, { address: '10.244.0.9', port: 1 }, 1), /no destination/);
});

test('the errors the kernel gives; a service deleted and added again within one apply starts empty', async () => {
  const ipvs = new FakeIpvs();
  const d: DestinationConfig = { address: '10.244.0.2', port: 8080 };
  const r = await ipvs.apply(
    [
      { op: 'addService', service: svc },
      { op: 'addDestination', service: svc, dest: d },
      { op: 'addDestination', service: svc, dest: d },
      { op: 'updateDestination', service: svc, dest: { address: '10.244.0.3', port: 8080 } },
      { op: 'deleteService', service: svc },
      { op: 'addDestination', service: svc, dest: d },
      { op: 'addService', service: svc },
      { op: 'addDestination', service: svc, dest: { address: '10.244.0.4', port: 80 } },
    ],
    { stopOnError: false },
  );
  assert.deepEqual(
    r.errors.map((e) => [e.index, e.code]),
    [
      [2, 'EEXIST'],
      [3, 'ENOENT'],
      [5, 'ESRCH'],
    ],
  );
  assert.deepEqual(
    (await ipvs.destinations(svc)).map((x) => `${x.address}:${x.port}`),
    ['10.244.0.4:80'],
  );
});

test('convert: every batch goes through the addon conversion; an op it refuses rejects the call and changes nothing', async () => {
  const ipvs = new FakeIpvs({ record: false, convert: true });
  const ok = await ipvs.apply([
    { op: 'addService', service: svc },
    { op: 'addDestination', service: svc, dest: { address: '10.244.0.2', port: 8080 } },
  ]);
  assert.equal(ok.errors.length, 0);
  // a weight the kernel's attribute cannot carry, and an address that is none: the in-memory
  // table alone takes both, the addon's checks refuse them (as the real handle would, before
  // sending anything)
  const bad: Array<[DestinationConfig, RegExp]> = [
    [{ address: '10.244.0.3', port: 8080, weight: 2 ** 40 }, /weight/],
    [{ address: '10.244.0.999', port: 8080 }, /address/],
  ];
  for (const [dest, why] of bad) {
    await assert.rejects(
      ipvs.apply([{ op: 'addDestination', service: svc, dest: { address: '10.244.0.4', port: 8080 } }, { op: 'addDestination', service: svc, dest }]),
      (e: Error & { kind?: string; index?: number }) => e.kind === 'invalid' && e.index === 1 && why.test(e.message),
    );
    const plain = new FakeIpvs({ record: false });
    await plain.apply([{ op: 'addService', service: svc }]);
    assert.equal((await plain.apply([{ op: 'addDestination', service: svc, dest }])).errors.length, 0, 'the table alone takes it');
  }
  assert.deepEqual((await ipvs.destinations(svc)).map((d) => d.address), ['10.244.0.2'], 'nothing of a refused batch applied');
  assert.equal(ipvs.writes, 2);
});

test('convertOps does the conversion encodeOps does, without handing the bytes over', async () => {
  const { native } = await import('../../src/native.js');
  const { packIpvsOps } = await import('../../src/kernel/ipvs-pack.js');
  const c = native().codec.ipvs;
  const ops = [
    { op: 'addService' as const, service: svc },
    ...Array.from({ length: 40 }, (_, i) => ({ op: 'addDestination' as const, service: svc, dest: { address: `10.244.1.${i + 1}`, port: 8080, weight: i } })),
  ];
  const packed = packIpvsOps(ops);
  assert.equal(c.convertOps(packed, 0x1c), c.encodeOps(packed, 0x1c).length);
  assert.throws(() => c.convertOps(packIpvsOps([{ op: 'addDestination', service: svc, dest: { address: 'nope', port: 1 } }]), 0x1c), /address/);
});

test('a service\'s destinations: found by address and port (IPv6 in any spelling), kept in the order added, short list and indexed alike', async () => {
  // 40 destinations: the table goes from its short list to its key index at 33; every
  // operation is checked on both sides of that (the 5th and the 38th destination).
  for (const v6 of [false, true]) {
    const ipvs = new FakeIpvs({ record: false });
    const s: ServiceConfig = v6 ? { protocol: 'tcp', address: 'fd00::1', port: 80 } : svc;
    const addr = (i: number) => (v6 ? `fd00:0:0::${(i + 1).toString(16)}` : `10.244.1.${i + 1}`);
    const canon = (i: number) => (v6 ? `fd00::${(i + 1).toString(16)}` : `10.244.1.${i + 1}`);
    const check = async (ops: Parameters<FakeIpvs['apply']>[0]) => (await ipvs.apply(ops, { stopOnError: false })).errors.map((e) => e.code);
    for (let n = 0; n < 40; n++) {
      assert.deepEqual(await check(n === 0 ? [{ op: 'addService', service: s }] : []), []);
      assert.deepEqual(await check([{ op: 'addDestination', service: s, dest: { address: addr(n), port: 8080, weight: 1 } }]), []);
      // the same address and port again, spelled canonically: EEXIST at every size
      assert.deepEqual(await check([{ op: 'addDestination', service: s, dest: { address: canon(n), port: 8080 } }]), ['EEXIST']);
    }
    // another port of an address there is another destination
    assert.deepEqual(await check([{ op: 'addDestination', service: s, dest: { address: addr(3), port: 9090 } }]), []);
    for (const i of [4, 37]) {
      assert.deepEqual(await check([{ op: 'updateDestination', service: s, dest: { address: canon(i), port: 8080, weight: 7 } }]), []);
    }
    assert.deepEqual(
      await check([
        { op: 'deleteDestination', service: s, dest: { address: addr(5), port: 8080 } },
        { op: 'deleteDestination', service: s, dest: { address: canon(36), port: 8080 } },
        { op: 'deleteDestination', service: s, dest: { address: canon(36), port: 8080 } },
        { op: 'updateDestination', service: s, dest: { address: addr(5), port: 8080 } },
        { op: 'deleteDestination', service: s, dest: { address: addr(3), port: 1 } },
      ]),
      ['ENOENT', 'ENOENT', 'ENOENT'],
    );
    const got = await ipvs.destinations(s);
    const want = [...Array(40).keys()].filter((i) => i !== 5 && i !== 36).map((i) => `${canon(i)}:8080:${i === 4 || i === 37 ? 7 : 1}`);
    want.push(`${canon(3)}:9090:1`);
    assert.deepEqual(got.map((d) => `${d.address}:${d.port}:${d.weight}`), want);
    // a deleted destination can come back (at the end); connection counts follow the address
    assert.deepEqual(await check([{ op: 'addDestination', service: s, dest: { address: addr(36), port: 8080 } }]), []);
    ipvs.setConnections(s, { address: canon(37), port: 8080 }, 3);
    const after = await ipvs.destinations(s);
    assert.equal(after.at(-1)!.address, canon(36));
    assert.equal(after.find((d) => d.address === canon(37))!.activeConns, 3);
    assert.throws(() => ipvs.setConnections(s, { address: canon(5), port: 8080 }, 1), /no destination/);
  }
});
