// Desired services given as a list in chunks whose entries were replaced (ChunkedList.replace, as
// translate's patch makes the model's): the engine's plan looks at those entries alone, not at
// every service of the list (50k+ at scale), makes no array of it, and applies the same change.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Engine } from '../../src/engine/engine.js';
import { serviceKey, type DesiredService } from '../../src/engine/ipvs-model.js';
import { ChunkedList, defineList, flattenedLists } from '../../src/engine/sorted.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { cluster } from '../helpers/desired.js';

/** Desired state whose services are `list`, read as an array only if someone reads it. */
function holding(list: ChunkedList<DesiredService>): { services: DesiredService[] } {
  const d = { services: [] as DesiredService[] };
  defineList(d, 'services', list);
  return d;
}

test('an incremental plan over a list of the last one with entries replaced reads only those entries, and makes no array', async () => {
  for (const declared of [true, false]) {
    const ipvs = new FakeIpvs();
    const e = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'], desiredImmutable: true });
    const services = cluster(3000);
    const list0 = ChunkedList.of(services);
    assert.deepEqual((await e.sync(declared ? holding(list0) : { services })).errors, []);
    const moved = { ...services[1500]!, destinations: [{ address: '10.244.9.9', port: 8080, forward: 'masq' as const, weight: 1 }] } as DesiredService;
    const list1 = list0.replace(new Map([[1500, moved]]));
    const read = new Set<number>();
    let desired: { services: DesiredService[] };
    if (declared) {
      const get = list1.get.bind(list1);
      list1.get = (i: number) => (read.add(i), get(i));
      desired = holding(list1);
    } else {
      const next = services.slice();
      next[1500] = moved;
      desired = { services: new Proxy(next, { get: (t, k, r) => (typeof k === 'string' && /^\d+$/.test(k) && read.add(Number(k)), Reflect.get(t, k, r)) }) };
    }
    const made = flattenedLists();
    const r = await e.sync(desired, new Set([serviceKey(moved)]));
    assert.deepEqual(r.errors, []);
    assert.deepEqual(r.ipvs.ops, { addDestination: 1, deleteDestination: 2 });
    if (declared) {
      assert.deepEqual([...read], [1500], 'entries of the list read');
      assert.equal(flattenedLists(), made, 'the list made into an array');
    } else assert.ok(read.size >= 3000, `an array: every entry is looked at (${read.size})`);
    // The very list again (a sync with nothing changed): nothing of it read.
    read.clear();
    const again = await e.sync(desired, new Set());
    assert.deepEqual(again.errors, []);
    assert.equal(again.ipvs.writes, 0);
    if (declared) assert.deepEqual([...read], [], 'entries of the same list read again');
    const got = await ipvs.service({ protocol: 'tcp', address: '10.96.5.220', port: 80 }, { withDestinations: true });
    assert.deepEqual(got?.destinations?.map((d) => d.address), ['10.244.9.9']);
  }
});

test('ChunkedList.replace: the entries replaced, the rest shared, the indexes recorded; out of range refused', () => {
  const a = Array.from({ length: 5000 }, (_, i) => ({ i }));
  const l0 = ChunkedList.of(a);
  const x = { i: -1 };
  const y = { i: -2 };
  const l1 = l0.replace(new Map([[4999, x], [3, y]]));
  assert.equal(l1.length, 5000);
  assert.equal(l1.get(3), y);
  assert.equal(l1.get(4999), x);
  assert.equal(l1.get(4), a[4]);
  assert.equal(l0.get(3), a[3], 'the base untouched');
  assert.equal(l0.toArray(), a, 'a list of an array reads as that array');
  assert.deepEqual(l1.toArray(), a.map((e, i) => (i === 3 ? y : i === 4999 ? x : e)));
  const chunks = (l: ChunkedList<{ i: number }>) => (l as unknown as { chunks: unknown[] }).chunks;
  assert.equal(chunks(l1).filter((c, k) => c !== chunks(l0)[k]).length, 2, 'two chunks copied');
  assert.throws(() => l0.replace(new Map([[5000, x]])), RangeError);
  assert.throws(() => l0.replace(new Map([[-1, x]])), RangeError);
});
