// ElementStore (elements as objects) and PackedStore (as bytes), the per-set element stores of
// the data planes: through random puts and takes (single elements, endpoint blocks, keys put by
// two owners) each holds exactly what a count per key says, and the changes it records turn the
// elements before a step into those after it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ElementStore, PackedStore } from '../../src/proxy/element-store.js';
import { elementList, PackedElements, type SetElement } from '../../src/kernel/nftables.js';
import { encodeKeyInto, type DataType, type KeyValue } from '../../src/kernel/nft-types.js';
import { prng } from '../helpers/bytes.js';

const text = (e: SetElement) => `${e.key.join(' ')}=${JSON.stringify(e.data ?? null)}`;
const contents = (els: readonly SetElement[]) => els.map(text).sort();

/** The elements before, with the recorded changes applied (deletes by key, then adds). */
function applied(before: readonly SetElement[], c: ReturnType<ElementStore['changes']>): string[] {
  const m = new Map(before.map((e) => [e.key.join(' '), e]));
  for (const d of c?.delete ?? []) assert.ok(m.delete(d.key.join(' ')), `deletes what is there: ${text(d)}`);
  for (const a of elementList(c?.add ?? [])) {
    assert.ok(!m.has(a.key.join(' ')), `adds what is not there: ${text(a)}`);
    m.set(a.key.join(' '), a);
  }
  return contents([...m.values()]);
}

test('keyed store: owners counted; a step\'s changes turn the elements before into those after; an element taken and put back unchanged is no change', () => {
  const rnd = prng(5);
  const store = new ElementStore('ip', { name: 'hairpin', key: ['ipv4_addr'], elements: [], unique: true }, (e) => e.key[0] as string);
  const count = new Map<string, number>();
  for (let step = 0; step < 300; step++) {
    const before = [...elementList(store.set.elements)];
    store.record();
    for (let i = 0; i < 1 + Math.floor(rnd() * 6); i++) {
      const a = `10.0.0.${Math.floor(rnd() * 20)}`;
      const n = count.get(a) ?? 0;
      if (n > 0 && rnd() < 0.5) {
        store.remove({ key: [a] });
        count.set(a, n - 1);
      } else {
        store.add({ key: [a] });
        count.set(a, n + 1);
      }
    }
    const want = [...count].filter(([, n]) => n > 0).map(([a]) => `${a}=null`).sort();
    assert.deepEqual(contents(elementList(store.set.elements)), want);
    assert.deepEqual(applied(before, store.changes('t')), want);
  }
  // taken and put back with the same value: recorded, and no change
  store.record();
  const some = elementList(store.set.elements)[0]!;
  store.remove({ key: [...some.key] });
  store.add({ key: [...some.key] });
  assert.equal(store.changes('t'), undefined);
});

test('packed store, blocks: swap-removed; its bytes list what is live; the changes of a step are the blocks\' elements that differ', () => {
  const rnd = prng(9);
  const decl = { name: 'endpoints-3-0', key: ['ipv4_addr', 'inet_proto', 'inet_service', 'mark'] as DataType[], map: ['ipv4_addr', 'inet_service'] as DataType[] };
  const store = new PackedStore('ip', decl);
  const live = new Map<number, { bytes: Buffer; els: SetElement[] }>();
  const block = (fe: number, gen: number) => {
    const els: SetElement[] = Array.from({ length: 3 }, (_, i) => ({ key: [`10.96.0.${fe}`, 'tcp', 80, i], data: [`10.244.${gen % 3}.${fe}`, 8080] }));
    const bytes = Buffer.alloc(3 * store.width);
    els.forEach((e, i) => {
      const n = encodeKeyInto(decl.key, e.key, bytes, i * store.width);
      encodeKeyInto(decl.map, e.data as KeyValue[], bytes, i * store.width + n);
    });
    return { bytes, els };
  };
  for (let step = 0; step < 200; step++) {
    const before = [...elementList(store.set.elements)];
    store.record();
    for (let i = 0; i < 1 + Math.floor(rnd() * 4); i++) {
      const fe = Math.floor(rnd() * 30);
      const had = live.get(fe);
      if (had) store.removeBlock(had.bytes);
      if (!had || rnd() < 0.7) {
        const b = block(fe, Math.floor(rnd() * 3));
        store.addBlock(b.bytes);
        live.set(fe, b);
      } else live.delete(fe);
    }
    const want = contents([...live.values()].flatMap((b) => b.els));
    assert.ok(store.set.elements instanceof PackedElements);
    assert.deepEqual(contents(elementList(store.set.elements)), want);
    const c = store.changes('t');
    assert.deepEqual(applied(before, c), want);
    // only what differs: an endpoint that stayed is not written
    const same = new Set(before.map(text));
    assert.ok(elementList(c?.add ?? []).every((e) => !same.has(text(e))));
  }
});

test('packed store, keyed: owners counted; a step\'s changes turn the elements before into those after; taken and put back is no change', () => {
  const rnd = prng(7);
  const store = new PackedStore('ip', { name: 'hairpin-0', key: ['ipv4_addr', 'ipv4_addr'] }, true);
  const bytes = Buffer.alloc(store.width);
  const at = (a: string) => (encodeKeyInto(['ipv4_addr', 'ipv4_addr'], [a, a], bytes, 0), bytes);
  const put = (a: string) => store.put(at(a), 0);
  const count = new Map<string, number>();
  for (let step = 0; step < 300; step++) {
    const before = [...elementList(store.set.elements)];
    store.record();
    for (let i = 0; i < 1 + Math.floor(rnd() * 40); i++) {
      // enough keys that the index grows, and collides
      const a = `10.0.${Math.floor(rnd() * 2)}.${Math.floor(rnd() * 200)}`;
      const n = count.get(a) ?? 0;
      if (n > 0 && rnd() < 0.5) {
        store.take(at(a), 0);
        count.set(a, n - 1);
      } else {
        put(a);
        count.set(a, n + 1);
      }
    }
    const want = [...count].filter(([, n]) => n > 0).map(([a]) => `${a} ${a}=null`).sort();
    assert.deepEqual(contents(elementList(store.set.elements)), want);
    assert.deepEqual(applied(before, store.changes('t')), want);
  }
  store.record();
  const some = String(elementList(store.set.elements)[0]!.key[0]);
  store.take(at(some), 0);
  put(some);
  assert.equal(store.changes('t'), undefined);
});

test('packed store: a step that only adds new keys hands them as the bytes it holds (a copy); one that also removes records every touch', () => {
  const decl = { name: 'endpoints-2-0', key: ['ipv4_addr', 'inet_proto', 'inet_service', 'mark'] as DataType[], map: ['ipv4_addr', 'inet_service'] as DataType[] };
  const store = new PackedStore('ip', decl);
  const block = (fe: number) => {
    const els: SetElement[] = [0, 1].map((i) => ({ key: [`10.96.0.${fe}`, 'tcp', 80, i], data: [`10.244.0.${fe}`, 8080 + i] }));
    const bytes = Buffer.alloc(2 * store.width);
    els.forEach((e, i) => encodeKeyInto(decl.map, e.data as KeyValue[], bytes, i * store.width + encodeKeyInto(decl.key, e.key, bytes, i * store.width)));
    return { bytes, els };
  };
  const [a, b, c] = [block(1), block(2), block(3)];
  store.record();
  store.addBlock(a.bytes);
  store.addBlock(b.bytes);
  const added = store.changes('t')!;
  assert.ok(added.add instanceof PackedElements, 'only adds: the bytes');
  assert.deepEqual(added.delete, []);
  assert.deepEqual(contents(elementList(added.add)), contents([...a.els, ...b.els]));
  // adds, then a removal: the adds before it are recorded with it
  store.record();
  store.addBlock(c.bytes);
  store.removeBlock(a.bytes);
  const mixed = store.changes('t')!;
  assert.ok(Array.isArray(mixed.add));
  assert.deepEqual(contents(elementList(mixed.add)), contents(c.els));
  assert.deepEqual(contents(mixed.delete.map((e) => ({ key: e.key, data: e.data }))), contents(a.els));
  // the first change's bytes are its own: the removal moved the store's last block over a's
  assert.deepEqual(contents(elementList(added.add)), contents([...a.els, ...b.els]));
  store.record();
  assert.equal(store.changes('t'), undefined, 'nothing done, no change');

  const keyed = new PackedStore('ip', { name: 'hairpin-0', key: ['ipv4_addr', 'ipv4_addr'] }, true);
  const at = (x: string) => {
    const buf = Buffer.alloc(keyed.width);
    encodeKeyInto(['ipv4_addr', 'ipv4_addr'], [x, x], buf, 0);
    return buf;
  };
  keyed.record();
  keyed.put(at('10.0.0.1'), 0);
  keyed.put(at('10.0.0.1'), 0);
  keyed.put(at('10.0.0.2'), 0);
  const puts = keyed.changes('t')!;
  assert.ok(puts.add instanceof PackedElements);
  assert.deepEqual(elementList(puts.add).map((e) => e.key[0]).sort(), ['10.0.0.1', '10.0.0.2'], 'a key put twice is one element');
  keyed.record();
  keyed.put(at('10.0.0.3'), 0);
  keyed.take(at('10.0.0.1'), 0); // one owner left: no change yet
  assert.ok(keyed.changes('t')!.add instanceof PackedElements, 'a take that leaves an owner removes nothing');
  keyed.record();
  keyed.put(at('10.0.0.4'), 0);
  keyed.take(at('10.0.0.2'), 0);
  const both = keyed.changes('t')!;
  assert.deepEqual([elementList(both.add).map((e) => e.key[0]), both.delete.map((e) => e.key[0])], [['10.0.0.4'], ['10.0.0.2']]);
});
