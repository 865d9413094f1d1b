// The element diffs: elementChanges (a caller's two versions of its tables, by key as given:
// what a data plane hands the engine as DesiredChanges.nft) and the listing diff (desired
// elements against the kernel's, packed or decoded, by canonical key): on random element sets
// both turn `before` into exactly `after`, write the same elements, and nothing for an
// unchanged element.
import assert from 'node:assert/strict';
import test from 'node:test';
import { elementChanges, type DesiredNftTable } from '../../src/engine/nft-diff.js';
import { diffNft } from '../helpers/nft-diff.js';
import { elementList, PackedElements, type NftOp, type SetElement } from '../../src/kernel/nftables.js';
import { prng } from '../helpers/bytes.js';
import type { NftElementChange } from '../../src/engine/types.js';

const text = (e: SetElement) => e.key.join('\u0000');
const sortUniq = (els: SetElement[]): SetElement[] => {
  const m = new Map(els.map((e) => [text(e), e]));
  return [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, e]) => e);
};

function table(hairpin: SetElement[], ports: SetElement[], unique = false): DesiredNftTable {
  return {
    family: 'ip',
    name: 't',
    chains: [{ name: 'c' }],
    rules: [],
    sets: [
      { name: 'hairpin', key: ['ipv4_addr', 'inet_proto', 'inet_service', 'ipv4_addr'], elements: hairpin, ...(unique ? { unique } : {}) },
      { name: 'ports', key: ['inet_proto', 'inet_service'], map: 'verdict', elements: ports, ...(unique ? { unique } : {}) },
    ],
  };
}

/** A set's contents (key text -> value) after applying the element ops to `before`. */
function applyOps(before: SetElement[], ops: NftOp[], set: string): Map<string, string> {
  const m = new Map(before.map((e) => [text(e), JSON.stringify(e.verdict ?? null)]));
  for (const o of ops) {
    if (o.kind !== 'elements' || o.set.name !== set) continue;
    for (const e of elementList(o.elements)) {
      if (o.verb === 'delete') {
        assert.ok(m.delete(text(e)), `deletes an element that is there: ${text(e)}`);
      } else {
        assert.ok(!m.has(text(e)), `adds an element that is not there: ${text(e)}`);
        m.set(text(e), JSON.stringify(e.verdict ?? null));
      }
    }
  }
  return m;
}

/** Element changes as ops (each change's deletes, then its adds: how the engine writes them). */
const asOps = (changes: NftElementChange[]): NftOp[] =>
  changes.flatMap((c) => {
    const set = { family: c.family, table: c.table, name: c.set, key: [] };
    return [
      ...(c.delete.length ? [{ verb: 'delete' as const, kind: 'elements' as const, set, elements: [...c.delete] }] : []),
      ...(c.add.length ? [{ verb: 'add' as const, kind: 'elements' as const, set, elements: [...elementList(c.add)] }] : []),
    ];
  });

const contents = (els: SetElement[]) => new Map(els.map((e) => [text(e), JSON.stringify(e.verdict ?? null)]));
const norm = (ops: NftOp[]) => ops.flatMap((o) => (o.kind === 'elements' ? elementList(o.elements).map((e) => `${o.verb} ${o.set.name} ${text(e)}`) : [])).sort();

/** Seeded random elements of the two sets: hairpin-like (address, protocol, port, address) and
 *  NodePort-like (protocol . port -> goto a chain). */
function randomElements(seed: number) {
  const rnd = prng(seed);
  const ip = () => `10.${Math.floor(rnd() * 4)}.${Math.floor(rnd() * 8)}.${Math.floor(rnd() * 256)}`;
  const hp = (): SetElement => {
    const a = ip();
    return { key: [a, rnd() < 0.5 ? 'tcp' : 'udp', 1 + Math.floor(rnd() * 3000), a] };
  };
  const pp = (): SetElement => ({ key: ['tcp', 30000 + Math.floor(rnd() * 500)], verdict: { code: 'goto', chain: `svc-${Math.floor(rnd() * 4)}` } });
  return { rnd, hp, pp };
}

/** A listing of table t as the kernel reports it: its elements in another order, packed. */
function listing(h: SetElement[], p: SetElement[], shuffled: <T>(xs: T[]) => T[]) {
  const d = table([], []);
  return {
    genId: 1,
    tables: [{ family: 'ip' as const, name: 't', handle: 1, flags: 0 }],
    chains: [{ family: 'ip' as const, table: 't', name: 'c', handle: 2 }],
    rules: [],
    sets: d.sets.map(({ elements: _e, ...s }, i) => {
      const spec = { ...s, family: 'ip' as const, table: 't' };
      return { ...spec, handle: 10 + i, elements: [], packed: PackedElements.of(spec, shuffled(i === 0 ? h : p)) };
    }),
  };
}

test('elementChanges between two versions of a table, on random changes: turns one into the other, the same writes as the listing diff', () => {
  const { rnd, hp, pp } = randomElements(7);
  const shuffled = <T>(xs: T[]): T[] => [...xs].reverse();
  for (let round = 0; round < 200; round++) {
    const h0 = sortUniq(Array.from({ length: Math.floor(rnd() * 300) }, hp));
    const p0 = sortUniq(Array.from({ length: Math.floor(rnd() * 100) }, pp));
    // a few removals, additions and (for the map) changed verdicts; fresh objects throughout, in another order
    const keep = (_e: SetElement) => rnd() > 0.05;
    const h1 = sortUniq([...h0.filter(keep).map((e) => ({ key: [...e.key] })), ...Array.from({ length: Math.floor(rnd() * 10) }, hp)]).reverse();
    const p1 = sortUniq([
      ...p0.filter(keep).map((e) => (rnd() < 0.05 ? { key: [...e.key], verdict: { code: 'goto' as const, chain: 'other' } } : { key: [...e.key], verdict: { ...e.verdict! } })),
      ...Array.from({ length: Math.floor(rnd() * 5) }, pp),
    ]);
    const ops = asOps(elementChanges([table(h0, p0)], [table(h1, p1)]));
    assert.deepEqual(applyOps(h0, ops, 'hairpin'), contents(h1));
    assert.deepEqual(applyOps(p0, ops, 'ports'), contents(p1));
    // the same writes as a listing of `before` diffed against `after`
    assert.deepEqual(norm(ops), norm(diffNft(table(h1, p1), listing(h0, p0, shuffled)).ops));
  }
});

test('elementChanges: identical contents in fresh objects change nothing; one changed element is one delete + one add; a dynamic set is left out', () => {
  const els = (n: number) => sortUniq(Array.from({ length: n }, (_, i) => ({ key: [`10.0.${i >> 8}.${i & 255}`, 'tcp', 80, `10.0.${i >> 8}.${i & 255}`] })));
  const a = els(1000);
  assert.deepEqual(elementChanges([table(a, [])], [table(els(1000), [])]), []);
  const b = els(1000);
  b[500] = { key: ['10.0.1.244', 'tcp', 81, '10.0.1.244'] };
  assert.deepEqual(elementChanges([table(a, [])], [table(b, [])]).map((c) => [c.set, c.delete.map(text), elementList(c.add).map(text)]), [['hairpin', [text(a[500]!)], ['10.0.1.244\u0000tcp\u000081\u000010.0.1.244']]]);
  // a set new in `after`: all its elements added; a dynamic set's elements are the packet path's
  const after = table([], [{ key: ['tcp', 30000], verdict: { code: 'accept' } }]);
  after.sets.push({ name: 'dyn', key: ['ipv4_addr'], dynamic: true, elements: [{ key: ['10.0.0.1'] }] });
  assert.deepEqual(elementChanges([{ ...table([], []), sets: [] }], [after]).map((c) => [c.set, c.add.length, c.delete.length]), [['ports', 1, 0]]);
});

test('building a table from scratch: elements declared unique go in as given (no key text), the same ops as the general path', () => {
  const rnd = prng(11);
  const empty = { genId: 0, tables: [], chains: [], sets: [], rules: [] };
  for (let round = 0; round < 50; round++) {
    const h = sortUniq(Array.from({ length: Math.floor(rnd() * 200) }, () => {
      const a = `10.1.${Math.floor(rnd() * 4)}.${Math.floor(rnd() * 256)}`;
      return { key: [a, 'tcp', 1 + Math.floor(rnd() * 50), a] };
    }));
    const p = sortUniq(Array.from({ length: Math.floor(rnd() * 50) }, () => ({ key: ['tcp', 30000 + Math.floor(rnd() * 40)], verdict: { code: 'accept' as const } })));
    const declared = table(h, p, true);
    const fast = diffNft(declared, empty);
    const general = diffNft(table(h.map((e) => ({ key: [...e.key] })), p.map((e) => ({ ...e, key: [...e.key] }))), empty);
    assert.deepEqual(fast.ops, general.ops);
    const els = fast.ops.filter((o) => o.kind === 'elements');
    if (h.length) assert.ok(els.some((o) => o.kind === 'elements' && o.elements === declared.sets[0]!.elements), 'the declared array itself');
  }
});

test('a full diff of sets declared unique against a listing as the kernel sends it (hash order, packed): the same writes as the general diff', () => {
  const rnd = prng(19);
  const ip = () => `10.${Math.floor(rnd() * 4)}.${Math.floor(rnd() * 8)}.${Math.floor(rnd() * 256)}`;
  const hp = (): SetElement => {
    const a = ip();
    // now and then an element the proxy never writes (a protocol the kernel reports as a number)
    return { key: [a, rnd() < 0.05 ? 47 : rnd() < 0.5 ? 'tcp' : 'udp', 1 + Math.floor(rnd() * 3000), a] };
  };
  const pp = (): SetElement => ({ key: ['tcp', 30000 + Math.floor(rnd() * 500)], verdict: { code: 'goto', chain: `svc-${Math.floor(rnd() * 4)}` } });
  const shuffled = <T>(xs: T[]): T[] => {
    const a = [...xs];
    for (let i = a.length - 1; i > 0; i--) {
      const j = Math.floor(rnd() * (i + 1));
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a;
  };
  let merged = 0;
  for (let round = 0; round < 200; round++) {
    const h0 = sortUniq(Array.from({ length: Math.floor(rnd() * 300) }, hp));
    const p0 = sortUniq(Array.from({ length: Math.floor(rnd() * 100) }, pp));
    const keep = () => rnd() > 0.05;
    const h1 = sortUniq([...h0.filter(keep).filter((e) => e.key[1] !== 47).map((e) => ({ key: [...e.key] })), ...Array.from({ length: Math.floor(rnd() * 10) }, hp).filter((e) => e.key[1] !== 47)]);
    const p1 = sortUniq([
      ...p0.filter(keep).map((e) => (rnd() < 0.05 ? { key: [...e.key], verdict: { code: 'goto' as const, chain: 'other' } } : { key: [...e.key], verdict: { ...e.verdict! } })),
      ...Array.from({ length: Math.floor(rnd() * 5) }, pp),
    ]);
    const observed = listing(h0, p0, shuffled);
    const fast = diffNft(table(h1, p1, true), observed);
    const general = diffNft(table(h1, p1), observed);
    assert.equal(fast.rebuilt, undefined, 'the listing matches the table: elements only');
    assert.deepEqual(applyOps(h0, fast.ops, 'hairpin'), contents(h1));
    assert.deepEqual(applyOps(p0, fast.ops, 'ports'), contents(p1));
    const withValues = (ops: NftOp[]) =>
      ops.flatMap((o) => (o.kind === 'elements' ? elementList(o.elements).map((e) => `${o.verb} ${o.set.name} ${text(e)} ${JSON.stringify(e.verdict ?? null)}`) : [])).sort();
    // declared unique: the diff without its duplicate check writes the same
    assert.deepEqual(withValues(fast.ops), withValues(general.ops));
    // the diff leaves the listing as the kernel gave it
    assert.deepEqual(observed.sets[0]!.packed.decode().map(text).sort(), h0.map(text).sort());
    if (fast.ops.length) merged++;
  }
  assert.ok(merged > 150);
  // identical contents: nothing to write
  const h = sortUniq(Array.from({ length: 500 }, hp));
  assert.deepEqual(diffNft(table(h, [], true), listing(h, [], shuffled)).ops, []);
});

test('by-key diff of a set not declared unique: of two desired elements with one key the first counts, once', () => {
  const goto = (chain: string) => ({ code: 'goto' as const, chain });
  const d = table([], [{ key: ['tcp', 30001], verdict: goto('a') }, { key: ['tcp', 30001], verdict: goto('b') }, { key: ['tcp', 30002], verdict: goto('c') }]);
  const observed = {
    genId: 1,
    tables: [{ family: 'ip' as const, name: 't', handle: 1, flags: 0 }],
    chains: [{ family: 'ip' as const, table: 't', name: 'c', handle: 2 }],
    rules: [],
    sets: d.sets.map((s, i) => ({ ...s, family: 'ip' as const, table: 't', handle: 10 + i, elements: i === 1 ? [{ key: ['tcp', 30001], verdict: goto('b'), flags: 0 }, { key: ['tcp', 30003], verdict: goto('d'), flags: 0 }] : [] })),
  };
  const ops = diffNft(d, observed).ops.map((o) => (o.kind === 'elements' ? [o.verb, elementList(o.elements).map((e) => `${text(e)} ${e.verdict?.chain ?? ''}`)] : []));
  assert.deepEqual(ops, [
    ['delete', ['tcp\u000030001 ', 'tcp\u000030003 ']],
    ['add', ['tcp\u000030001 a', 'tcp\u000030002 c']],
  ]);
});
