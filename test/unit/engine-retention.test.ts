// What a sync keeps while it runs: the kernel's listings only as long as it reads them, an
// nftables transaction's stream only until it is committed.
// A periodic full resync of 10k services runs its IPVS diff for ~1 s (~10 s under emulation);
// listings held through it are the daemon's memory peak. Checked with weak references and a
// forced collection at the moment the plan reads its first slice of destinations.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Engine } from '../../src/engine/engine.js';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { cluster } from '../helpers/desired.js';
import { FakeLinks, FakeNftables } from '../../src/testing/fake-kernel.js';
import { NftTransaction } from '../../src/kernel/nftables.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

test('a full plan lets the listed IPVS services and VIP addresses go before it reads the destinations', async () => {
  const ipvs = new FakeIpvs();
  const links = new FakeLinks();
  const e = new Engine({ ipvs, links }, { managedCidrs: ['10.96.0.0/12'], observeSlice: 16 });
  const services = cluster(100);
  const desired = { services, vips: { link: 'kube-ipvs0', addresses: services.map((s) => (s as { address: string }).address) } };
  assert.deepEqual((await e.sync(desired)).errors, []);

  const listed: Array<WeakRef<object>> = [];
  const listServices = ipvs.services.bind(ipvs);
  ipvs.services = async (o) => {
    const l = await listServices(o);
    for (const s of l) listed.push(new WeakRef(s));
    return l;
  };
  const listAddresses = links.addresses.bind(links);
  links.addresses = async (o) => {
    const l = await listAddresses(o);
    for (const a of l) listed.push(new WeakRef(a));
    return l;
  };
  const readDestinations = ipvs.destinationsOf.bind(ipvs);
  const aliveAtFirstRead: number[] = [];
  ipvs.destinationsOf = async (ids) => {
    if (!aliveAtFirstRead.length) {
      // a WeakRef's target lives to the end of the job that made the WeakRef: a macrotask first
      await new Promise((r) => setImmediate(r));
      gc();
      aliveAtFirstRead.push(listed.filter((r) => r.deref() !== undefined).length);
    }
    return readDestinations(ids);
  };

  // a foreign service and a stale owned one: the diff still tells them apart
  await ipvs.apply([
    { op: 'addService', service: { protocol: 'tcp', address: '192.0.2.1', port: 80 } },
    { op: 'addService', service: { protocol: 'tcp', address: '10.96.200.1', port: 80 } },
  ]);
  const plan = await e.plan(desired);
  assert.equal(listed.length, 102 + 100, 'the plan listed 102 services and 100 addresses');
  assert.deepEqual(aliveAtFirstRead, [0], 'no listed object is reachable while the destinations are read');
  assert.deepEqual(plan.ipvs.ops, [{ op: 'deleteService', service: { family: 'inet', protocol: 'tcp', address: '10.96.200.1', port: 80 } }]);
  assert.deepEqual(plan.addresses, { early: [], late: [] });
});

test('the engine releases an nftables transaction once committed (its stream buffer goes in the turn the commit completes), and the IPVS writes do not wait for the commit', async () => {
  const nft = new FakeNftables();
  const ipvs = new FakeIpvs();
  const views: Uint8Array[] = [];
  const commit = nft.commit.bind(nft);
  let committed = false;
  let releasedAtCommit: boolean | undefined;
  let ipvsBeforeCommitted = false;
  nft.commit = async (tx, o) => {
    if (tx instanceof NftTransaction) views.push(tx.encoded());
    // the kernel's part takes a few turns of the event loop, as a large transaction on the pool does
    for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
    const r = await commit(tx, o);
    committed = true;
    // the engine's continuation after the commit runs before the next macrotask
    setImmediate(() => (releasedAtCommit = views.length > 0 && views.every((v) => v.byteLength === 0)));
    return r;
  };
  const apply = ipvs.apply.bind(ipvs);
  ipvs.apply = async (ops, o) => {
    if (!committed) ipvsBeforeCommitted = true;
    return apply(ops, o);
  };
  const e = new Engine({ ipvs, nft }, { managedCidrs: ['10.96.0.0/12'] });
  const table: DesiredNftTable = {
    family: 'ip',
    name: 'ipvsync',
    chains: [],
    sets: [{ name: 'vips', key: ['ipv4_addr'], elements: Array.from({ length: 4000 }, (_, i) => ({ key: [`10.96.${i >> 8}.${i & 255}`] })) }],
    rules: [],
  };
  const r = await e.sync({ services: cluster(3), nft: table });
  await new Promise<void>((resolve) => setImmediate(resolve));
  assert.deepEqual(r.errors, []);
  assert.equal(views.length, 1);
  assert.equal(releasedAtCommit, true);
  assert.equal(ipvsBeforeCommitted, true);
  assert.equal(ipvs.writes, r.ipvs.writes);
  assert.ok(r.ipvs.writes > 0);
});
