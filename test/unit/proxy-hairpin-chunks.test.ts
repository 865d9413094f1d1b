// A node-local endpoint moving is the common incremental sync: translate patches the model's
// virtual servers and hairpin list, the glue its hairpin set, and the proxier hands the engine
// what changed as plain data (DesiredChanges: the swapped virtual servers, the hairpin set's
// element changes), so the engine compares no other service or element. Here: the changes name
// exactly the moved destination's virtual servers and elements, the kernel gets those alone,
// and what it then holds is what a proxier starting from scratch programs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { Proxier } from '../../src/proxy/proxier.js';
import type { DesiredChanges } from '../../src/engine/engine.js';
import { translate } from '../../src/proxy/ipvs/plane.js';
import { serviceKey, type DesiredService } from '../../src/engine/ipvs-model.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { FakeLinks, FakeNftables } from '../../src/testing/fake-kernel.js';
import { slice, svc } from '../fixtures/kube/builders.js';
import { elementList, NftTransaction } from '../../src/kernel/nftables.js';

const NODE = { name: 'node-a', addresses: ['10.0.0.11', '2001:db8::11'] };
const CONFIG = { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] };
const N = 1500;

const endpoints = (i: number, moved: Map<number, string>) =>
  [0, 1, 2, 3].map((j) => ({ ip: j === 0 && moved.has(i) ? moved.get(i)! : `10.244.${i >> 6}.${(i & 63) * 4 + j}`, node: j < 2 ? 'node-a' : 'node-b' }));

function cluster(moved: Map<number, string>): { services: V1Service[]; endpointSlices: V1EndpointSlice[] } {
  const services: V1Service[] = [];
  const endpointSlices: V1EndpointSlice[] = [];
  for (let i = 0; i < N; i++) {
    // every tenth service dual-stack-ish: an IPv6 one, so the ip6 table's hairpin set has entries too
    const v6 = i % 10 === 0;
    services.push(svc(`s${i}`, { clusterIP: v6 ? `fd00::${i.toString(16)}` : `10.96.${i >> 8}.${i & 255}`, ports: [{ name: 'http', port: 80, protocol: 'TCP' }, { name: 'dns', port: 53, protocol: 'UDP' }] }));
    const eps = v6 ? [0, 1].map((j) => ({ ip: `fd00:244::${i.toString(16)}:${j}`, node: 'node-a' })) : endpoints(i, moved);
    endpointSlices.push(slice(`s${i}`, `s${i}-0`, [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }], eps, { addressType: v6 ? 'IPv6' : 'IPv4' }));
  }
  return { services, endpointSlices };
}

/** The fake's tables, each set's elements as a set (it lists them in the order they came). */
async function listed(k: FakeNftables) {
  const { genId: _g, ...r } = await k.list();
  return { ...r, sets: r.sets.map((x) => ({ ...x, elements: x.elements?.map((e) => JSON.stringify(e)).sort() })) };
}

async function proxierWith(moved: Map<number, string>) {
  const kernel = { ipvs: new FakeIpvs(), links: new FakeLinks(), nft: new FakeNftables() };
  const p = new Proxier(kernel, { node: NODE, config: CONFIG, vipLink: 'kube-ipvs0', glue: true });
  const c = cluster(moved);
  for (const s of c.services) p.onServiceUpdate(s);
  for (const s of c.endpointSlices) p.onSliceUpdate(s);
  const r = await p.sync(true);
  assert.deepEqual(r.report.errors, []);
  return { kernel, p };
}

test('a node-local endpoint moving: the proxier hands the engine the moved virtual servers and hairpin elements alone, and the kernel gets those', async () => {
  const moved = new Map<number, string>();
  const { kernel, p } = await proxierWith(moved);
  const given: Array<DesiredChanges | undefined> = [];
  const plan = p.engine.plan.bind(p.engine);
  p.engine.plan = (d, c) => (given.push(c as DesiredChanges | undefined), plan(d, c));
  const hairpinSet = async (family: 'ip' | 'ip6') =>
    (await kernel.nft.list()).sets.find((s) => s.family === family && s.name === 'hairpin')!.elements!.map((e) => e.key.join(' . '));
  const ip0 = await hairpinSet('ip');
  assert.equal(ip0.length, (N - N / 10) * 2 * 2, 'two local endpoints × two ports per IPv4 service');
  let last: Awaited<ReturnType<Proxier['sync']>> | undefined;
  for (let k = 0; k < 6; k++) {
    const i = 1 + 37 * k;
    const was = endpoints(i, moved)[0]!.ip;
    moved.set(i, `10.250.0.${k + 1}`);
    const c = cluster(moved);
    p.onSliceUpdate(c.endpointSlices[i]!);
    const r = await p.sync(false);
    last = r;
    assert.deepEqual(r.report.errors, []);
    const ch = given.at(-1)!;
    assert.deepEqual([...ch.services!.keys()].sort(), [`inet|tcp|10.96.0.${i}|80`, `inet|udp|10.96.0.${i}|53`], `sync ${k}: the services changed`);
    assert.deepEqual(
      ch.nft?.map((x) => `${x.family} ${x.set} -${x.delete.map((e) => e.key[0]).join()} +${elementList(x.add).map((e) => e.key[0]).join()}`),
      [`ip hairpin -${was},${was} +10.250.0.${k + 1},10.250.0.${k + 1}`],
      `sync ${k}: the element changes`,
    );
    assert.equal(r.report.ipvs.writes, 4, `sync ${k}: the moved destination out and in, on two virtual servers`);
    // the old endpoint's two elements out, the new one's two in, in one transaction
    assert.equal(r.report.nft.writes, 2, `sync ${k}: one delete and one add of elements`);
    const ip: string[] = await hairpinSet('ip');
    assert.equal(ip.length, ip0.length);
    assert.ok(!ip.some((e) => e.startsWith(`${was} `)) && ip.filter((e) => e.startsWith(`10.250.0.${k + 1} `)).length === 2);
  }
  // The plane's model (its virtual servers in no order) is the model from scratch; the kernel
  // holds what a proxier starting from the same objects programs.
  const c = cluster(moved);
  const scratch = translate({ ...c, node: NODE, config: CONFIG });
  const byKey = (l: readonly DesiredService[]) => [...l].sort((a, b) => (serviceKey(a) < serviceKey(b) ? -1 : 1));
  assert.deepStrictEqual(last!.model!.glue.hairpin, scratch.glue.hairpin);
  assert.deepStrictEqual(byKey(last!.model!.services), byKey(scratch.services));
  assert.deepStrictEqual(p.warnings(), scratch.warnings);
  assert.deepEqual(await kernel.ipvs.services({ withDestinations: true }), await (await proxierWith(moved)).kernel.ipvs.services({ withDestinations: true }));
  const fresh = await proxierWith(moved);
  assert.deepEqual(await listed(kernel.nft), await listed(fresh.kernel.nft));
  // and a full resync over the patched state finds nothing to write, without listing the
  // glue: the tables built again are compared with the patched ones (nobody committed since)
  const dumps = kernel.nft.dumps;
  const again = await p.sync(true);
  assert.deepEqual(again.report.errors, []);
  assert.equal(again.report.nft.writes, 0);
  assert.equal(kernel.nft.dumps, dumps, 'no listing');
  // someone else commits: the next resync lists and finds the glue as wanted
  await kernel.nft.commit(new NftTransaction().addTable({ family: 'ip', name: 'foreign' }));
  const relisted = await p.sync(true);
  assert.ok(kernel.nft.dumps > dumps, 'listed');
  assert.equal(relisted.report.nft.writes, 0);
});

test('after in-place patches: a plan never applied makes the next sync full, and tables built again are diffed against the patched ones', async () => {
  const moved = new Map<number, string>();
  const { kernel, p } = await proxierWith(moved);
  const move = async (i: number, ip: string) => {
    moved.set(i, ip);
    p.onSliceUpdate(cluster(moved).endpointSlices[i]!);
  };
  const same = async () => {
    const fresh = await proxierWith(moved);
    assert.deepEqual(await kernel.ipvs.services({ withDestinations: true }), await fresh.kernel.ipvs.services({ withDestinations: true }));
    assert.deepEqual(await listed(kernel.nft), await listed(fresh.kernel.nft));
  };
  await move(3, '10.250.1.1');
  assert.equal((await p.sync(false)).report.mode, 'incremental');
  // a dry run: planned (the model and glue tables patched in place), never applied
  await move(5, '10.250.1.2');
  const dry = await p.plan(false);
  assert.equal(dry.plan.mode, 'incremental');
  await move(7, '10.250.1.3');
  const r = await p.sync(false);
  assert.equal(r.report.mode, 'full', 'the last model applied is no base any more');
  assert.deepEqual(r.report.errors, []);
  await same();
  // more moves, then a service added and removed: each its own virtual server's change
  await move(9, '10.250.1.4');
  await move(11, '10.250.1.5');
  assert.equal((await p.sync(false)).report.mode, 'incremental');
  p.onServiceUpdate(svc('extra', { clusterIP: '10.96.200.1', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] }));
  const given: Array<DesiredChanges | undefined> = [];
  const plan = p.engine.plan.bind(p.engine);
  p.engine.plan = (d, c) => (given.push(c as DesiredChanges | undefined), plan(d, c));
  const added = await p.sync(false);
  assert.equal(added.report.mode, 'incremental');
  assert.deepEqual(added.report.errors, []);
  assert.deepEqual([...given.at(-1)!.services!.keys()], ['inet|tcp|10.96.200.1|80']);
  p.onServiceDelete('default/extra');
  assert.deepEqual((await p.sync(false)).report.errors, []);
  await same();
  // a full resync taking an endpoint change: patched in place, compared with the kernel
  await move(13, '10.250.1.6');
  const resync = await p.sync(true);
  assert.equal(resync.report.mode, 'full');
  assert.ok(resync.report.nft.writes > 0);
  await same();
  const again = await p.sync(true);
  assert.equal(again.report.nft.writes + again.report.ipvs.writes, 0);
});
