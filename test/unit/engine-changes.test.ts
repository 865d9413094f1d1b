// DesiredChanges: an incremental plan given what changed as plain data looks at that alone —
// no entry of desired.services read (50k+ at scale), no element of the nftables sets compared —
// and applies what a plan comparing everything would.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Engine, type DesiredState, type NftElementChange } from '../../src/engine/engine.js';
import { serviceKey, type DesiredService } from '../../src/engine/ipvs-model.js';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import type { SetElement } from '../../src/kernel/nftables.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { FakeNftables } from '../../src/testing/fake-kernel.js';
import { cluster } from '../helpers/desired.js';

/** `list` whose entries, read by index, are counted into `read`. */
function counted<T>(list: T[], read: Set<number>): T[] {
  return new Proxy(list, { get: (t, k, r) => (typeof k === 'string' && /^\d+$/.test(k) && read.add(Number(k)), Reflect.get(t, k, r)) });
}

test('an incremental plan given the changed services reads no entry of desired.services; given their keys alone, it scans the list', async () => {
  for (const form of ['changes', 'keys'] as const) {
    const ipvs = new FakeIpvs();
    const e = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'] });
    const services = cluster(3000);
    assert.deepEqual((await e.sync({ services })).errors, []);
    const moved = { ...services[1500]!, destinations: [{ address: '10.244.9.9', port: 8080, forward: 'masq' as const, weight: 1 }] } as DesiredService;
    const next = services.slice();
    next[1500] = moved;
    const read = new Set<number>();
    const desired = { services: counted(next, read) };
    const key = serviceKey(moved);
    const r = await e.sync(desired, form === 'changes' ? { services: new Map([[key, moved]]) } : new Set([key]));
    assert.deepEqual(r.errors, []);
    assert.equal(r.mode, 'incremental');
    assert.deepEqual(r.ipvs.ops, { addDestination: 1, deleteDestination: 2 });
    if (form === 'changes') assert.deepEqual([...read], [], 'entries of the list read');
    else assert.ok(read.size >= 3000, `keys alone: every entry is looked at (${read.size})`);
    // nothing changed: nothing read, nothing written
    read.clear();
    const again = await e.sync(desired, { services: new Map() });
    assert.deepEqual([again.errors, again.ipvs.writes, [...read]], [[], 0, []]);
    const got = await ipvs.service({ protocol: 'tcp', address: '10.96.5.220', port: 80 }, { withDestinations: true });
    assert.deepEqual(got?.destinations?.map((d) => d.address), ['10.244.9.9']);
    // a service named with no desired object: deleted
    const gone = await e.sync({ services: next.filter((_, i) => i !== 7) }, { services: new Map([[serviceKey(next[7]!), undefined]]) });
    assert.deepEqual([gone.errors, gone.ipvs.ops], [[], { deleteService: 1 }]);
  }
});

const byText = (a: SetElement, b: SetElement) => (a.key.join() < b.key.join() ? -1 : a.key.join() > b.key.join() ? 1 : 0);
const el = (i: number): SetElement => ({ key: [`10.244.${i >> 8}.${i & 255}`, 'tcp', 8080] });

function table(elements: SetElement[]): DesiredNftTable {
  return {
    family: 'ip',
    name: 'ipvsync',
    chains: [{ name: 'postrouting', hook: { type: 'nat', hook: 'postrouting', priority: 100, policy: 'accept' } }],
    sets: [{ name: 'hairpin', key: ['ipv4_addr', 'inet_proto', 'inet_service'], elements: elements.sort(byText), unique: true }],
    rules: [{ chain: 'postrouting', exprs: [{ type: 'counter' }] as never }],
  };
}

test('nftables element changes given: written as given (deletes, then adds) without comparing the sets, the kernel as after a full plan; [] writes nothing', async () => {
  const nft = new FakeNftables();
  const e = new Engine({ ipvs: new FakeIpvs(), nft }, {});
  const first = Array.from({ length: 2000 }, (_, i) => el(i));
  assert.deepEqual((await e.sync({ services: [], nft: table(first.slice()) })).errors, []);
  const next = first.filter((_, i) => i !== 10 && i !== 20);
  next.push(el(5000));
  const read = new Set<number>();
  const t = table(next);
  t.sets[0]!.elements = counted(t.sets[0]!.elements as SetElement[], read);
  const change: NftElementChange = { family: 'ip', table: 'ipvsync', set: 'hairpin', add: [el(5000)], delete: [el(10), el(20)] };
  const desired: DesiredState = { services: [], nft: t };
  const plan = await e.plan(desired, { services: new Map(), nft: [change] });
  assert.deepEqual([...read], [], 'elements of the set read');
  assert.deepEqual(plan.nft?.ops.map((o) => (o.kind === 'elements' ? `${o.verb} ${o.elements.length}` : o.kind)), ['delete 2', 'add 1']);
  const r = await e.apply(plan);
  assert.deepEqual([r.errors, r.nft.writes], [[], 2]);
  const listed = (await nft.list({ family: 'ip', table: 'ipvsync', elements: true })).sets[0]!.elements!.map((x) => x.key.join()).sort();
  assert.deepEqual(listed, next.map((x) => x.key.join()).sort());
  // a full plan of the same finds nothing to write
  assert.equal((await new Engine({ ipvs: new FakeIpvs(), nft }).sync({ services: [], nft: table(next.slice()) })).nft.writes, 0);
  // no change: nothing written, the kind left alone
  const quiet = await e.plan(desired, { services: new Map(), nft: [] });
  assert.deepEqual([quiet.nft, quiet.unchanged], [undefined, ['nft']]);
});
