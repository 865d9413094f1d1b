// KeyIndex: through random pushes and removals its list holds exactly the items a Map by key
// would, each found where it is; with hashes that collide (runs that wrap around the table, the
// deletion's moves back) as with a spread one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { hashParts, KeyIndex } from '../../src/util/key-index.js';
import { prng } from '../helpers/bytes.js';

interface Item {
  k: number;
  v: string;
}

for (const [name, hash] of [
  ['a spread hash', (x: Item) => hashParts(String(x.k))],
  ['a hash of 4 values', (x: Item) => x.k % 4],
  ['a hash landing at the table end', (x: Item) => -1 - (x.k % 3)],
] as const) {
  test(`KeyIndex equals a Map by key through random pushes and removals (${name})`, () => {
    const r = prng(7);
    for (let round = 0; round < 40; round++) {
      const start = Array.from(new Set(Array.from({ length: Math.floor(r() * 50) }, () => Math.floor(r() * 200)))).map((k) => ({ k, v: 'start' }));
      const items = [...start];
      const index = new KeyIndex(items, hash, (a, b) => a.k === b.k);
      assert.equal(index.items, items, 'the caller\'s own list');
      const want = new Map(start.map((x) => [x.k, x]));
      for (let step = 0; step < 300; step++) {
        const k = Math.floor(r() * 200);
        const i = index.indexOf({ k, v: '' });
        assert.equal(i >= 0, want.has(k), `round ${round} step ${step}: ${k} found`);
        if (i >= 0) {
          assert.equal(items[i], want.get(k));
          if (r() < 0.6) {
            index.removeAt(i);
            want.delete(k);
          }
        } else if (r() < 0.7) {
          const x = { k, v: `${round}.${step}` };
          index.push(x);
          want.set(k, x);
        }
        assert.equal(items.length, want.size);
      }
      for (const [k, x] of want) assert.equal(items[index.indexOf({ k, v: '' })], x);
      assert.deepEqual(new Set(items), new Set(want.values()));
    }
  });
}

test('hashParts: the same parts the same hash, another part order or split another hash', () => {
  assert.equal(hashParts('10.0.0.1', 'tcp', 80), hashParts('10.0.0.1', 'tcp', 80));
  assert.notEqual(hashParts('10.0.0.1', 'tcp', 80), hashParts('10.0.0.1', 'udp', 80));
  assert.notEqual(hashParts('ab', 'c'), hashParts('a', 'bc'));
  assert.notEqual(hashParts('10.0.0.1', 'tcp', 80), hashParts('10.0.0.1', 'tcp', 81));
});
