// A full plan diffs each set against its listing as the kernel handed it over (PackedElements:
// bytes and offsets, the desired keys encoded and looked up by their bytes). On random sets of
// every kind the proxy writes (plain, verdict map, map to one value and to a concatenation,
// interval), that diff turns the listing into exactly the desired contents and writes what the
// diff against the same listing decoded into objects writes.
import assert from 'node:assert/strict';
import test from 'node:test';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import { diffNft, type ListingWithElements } from '../helpers/nft-diff.js';
import { elementList, PackedElements, type NftOp, type SetElement, type SetSpec } from '../../src/kernel/nftables.js';
import { prng } from '../helpers/bytes.js';

type Sets = Record<'plain' | 'vmap' | 'one' | 'concat' | 'cidrs', SetElement[]>;
const NAMES = ['plain', 'vmap', 'one', 'concat', 'cidrs'] as const;

const text = (e: SetElement) => e.key.join(' ');
const value = (e: SetElement) => JSON.stringify(e.verdict ?? e.data ?? null);

function table(s: Sets, opts: { unique?: boolean } = {}): DesiredNftTable {
  const u = opts.unique ? { unique: true } : {};
  return {
    family: 'ip',
    name: 't',
    chains: [{ name: 'c' }],
    rules: [],
    sets: [
      { name: 'plain', key: ['ipv4_addr', 'inet_proto', 'inet_service', 'ipv4_addr'], elements: s.plain, ...u },
      { name: 'vmap', key: ['inet_proto', 'inet_service'], map: 'verdict', elements: s.vmap, ...u },
      { name: 'one', key: ['ipv4_addr'], map: 'mark', elements: s.one, ...u },
      { name: 'concat', key: ['ipv4_addr', 'inet_proto', 'inet_service', 'mark'], map: ['ipv4_addr', 'inet_service'], elements: s.concat, ...u },
      { name: 'cidrs', key: ['ipv4_addr'], interval: true, elements: s.cidrs },
    ],
  };
}

/** Table t as the kernel lists it, each set's elements packed (or decoded: `packed` false). */
function listing(s: Sets, packed: boolean): ListingWithElements {
  const d = table(s);
  return {
    genId: 1,
    tables: [{ family: 'ip', name: 't', handle: 1, flags: 0 }],
    chains: [{ family: 'ip', table: 't', name: 'c', handle: 2 }],
    rules: [],
    sets: d.sets.map(({ elements, unique: _u, ...spec }, i) => {
      const p = PackedElements.of({ ...spec, family: 'ip', table: 't' }, elements as SetElement[]);
      return { ...spec, family: 'ip', table: 't', handle: 10 + i, elements: packed ? [] : p.decode(), ...(packed ? { packed: p } : {}) };
    }),
  };
}

/** A set's contents (key text -> value) after the element ops on `before`. */
function applyOps(before: SetElement[], ops: NftOp[], set: string): Map<string, string> {
  const m = new Map(before.map((e) => [text(e), value(e)]));
  for (const o of ops) {
    if (o.kind !== 'elements' || o.set.name !== set) continue;
    for (const e of elementList(o.elements)) {
      if (o.verb === 'delete') assert.ok(m.delete(text(e)), `${set}: deletes an element that is there: ${text(e)}`);
      else {
        assert.ok(!m.has(text(e)), `${set}: adds an element that is not there: ${text(e)}`);
        m.set(text(e), value(e));
      }
    }
  }
  return m;
}

const contents = (els: SetElement[]) => {
  const m = new Map<string, string>();
  for (const e of els) if (!m.has(text(e))) m.set(text(e), value(e));
  return m;
};
const norm = (ops: NftOp[]) => ops.flatMap((o) => (o.kind === 'elements' ? elementList(o.elements).map((e) => `${o.verb} ${o.set.name} ${text(e)} ${value(e)}`) : [])).sort();

function random(seed: number) {
  const rnd = prng(seed);
  const int = (n: number) => Math.floor(rnd() * n);
  const ip = () => `10.${int(2)}.${int(4)}.${int(256)}`;
  const gen: { [K in keyof Sets]: () => SetElement } = {
    plain: () => {
      const a = ip();
      return { key: [a, rnd() < 0.5 ? 'tcp' : 'udp', 1 + int(2000), a] };
    },
    vmap: () => ({ key: ['tcp', 30000 + int(300)], verdict: rnd() < 0.1 ? { code: 'drop' } : { code: 'goto', chain: `svc-${int(4)}` } }),
    one: () => ({ key: [ip()], data: int(4) }),
    concat: () => ({ key: [ip(), 'tcp', 80, int(10)], data: [ip(), 8080 + int(3)] }),
    cidrs: () => ({ key: [`10.${int(256)}.0.0/16`] }),
  };
  const many = (k: keyof Sets, n: number) => Array.from({ length: int(n) }, gen[k]);
  const uniq = (els: SetElement[]) => [...new Map(els.map((e) => [text(e), e])).values()];
  const before = (): Sets => ({ plain: uniq(many('plain', 300)), vmap: uniq(many('vmap', 100)), one: uniq(many('one', 200)), concat: uniq(many('concat', 300)), cidrs: uniq(many('cidrs', 20)) });
  /** `b` with some elements gone, some values changed, some new (fresh objects throughout). */
  const after = (b: Sets): Sets => {
    const out = {} as Sets;
    for (const k of NAMES) {
      const kept = b[k].filter(() => rnd() > 0.05).map((e) => {
        if (rnd() < 0.05 && k !== 'plain' && k !== 'cidrs') return { ...gen[k](), key: [...e.key] };
        return structuredClone(e);
      });
      out[k] = [...kept, ...many(k, 10)];
    }
    return out;
  };
  return { rnd, before, after };
}

test('a diff against a packed listing turns it into exactly the desired sets and writes what the diff against the decoded listing writes', () => {
  const r = random(23);
  let changed = 0;
  for (let round = 0; round < 150; round++) {
    const b = r.before();
    const a = r.after(b);
    const packed = diffNft(table(a), listing(b, true));
    const decoded = diffNft(table(a), listing(b, false));
    assert.equal(packed.rebuilt, undefined);
    for (const k of NAMES) assert.deepEqual(applyOps(b[k], packed.ops, k), contents(a[k]), `round ${round}, set ${k}`);
    assert.deepEqual(norm(packed.ops), norm(decoded.ops));
    // the same elements declared unique (their duplicates dropped): no duplicate check, same writes
    const firsts = (els: SetElement[]) => els.filter((e, i) => els.findIndex((x) => text(x) === text(e)) === i);
    const ua = Object.fromEntries(NAMES.map((k) => [k, firsts(a[k])])) as Sets;
    assert.deepEqual(norm(diffNft(table(ua, { unique: true }), listing(b, true)).ops), norm(packed.ops));
    if (packed.ops.length) changed++;
  }
  assert.ok(changed > 140);
});

test('a packed listing equal to the desired sets writes nothing; one changed map value is one delete and one add', () => {
  const r = random(5);
  const b = r.before();
  assert.deepEqual(diffNft(table(structuredClone(b)), listing(b, true)).ops, []);
  const a = structuredClone(b);
  a.concat[0] = { key: a.concat[0]!.key, data: ['192.0.2.1', 9999] };
  assert.deepEqual(norm(diffNft(table(a), listing(b, true)).ops), [`add concat ${text(a.concat[0]!)} ["192.0.2.1",9999]`, `delete concat ${text(a.concat[0]!)} null`].sort());
});

test('a desired key the kernel could not hold is added (for the kernel layer to refuse), never thrown', () => {
  const b: Sets = { plain: [{ key: ['10.0.0.1', 'tcp', 80, '10.0.0.1'] }], vmap: [], one: [], concat: [], cidrs: [] };
  const a: Sets = { ...b, plain: [...b.plain, { key: ['10.0.0.300', 'tcp', 80, '10.0.0.1'] }, { key: ['10.0.0.2', 'tcp'] }] };
  const ops = diffNft(table(a), listing(b, true)).ops;
  assert.deepEqual(ops.map((o) => (o.kind === 'elements' ? [o.verb, o.elements.length] : [])), [['add', 2]]);
});

test('PackedElements.of lists what the kernel lists: decoded, the elements given (CIDRs rebuilt from their start and end)', () => {
  const r = random(7);
  const b = r.before();
  for (const [i, s] of listing(b, true).sets.entries()) {
    const k = NAMES[i]!;
    const got = s.packed!.decode();
    assert.deepEqual(new Map(got.map((e) => [text(e), value(e)])), contents(b[k]), k);
  }
});

test('a listing laid out by per-element spans (elements of different shapes) reads and diffs as one laid out by widths', () => {
  const r = random(13);
  const b = r.before();
  const a = r.after(b);
  const spec: SetSpec = { family: 'ip', table: 't', name: 'concat', key: ['ipv4_addr', 'inet_proto', 'inet_service', 'mark'], map: ['ipv4_addr', 'inet_service'] };
  const byWidths = PackedElements.of(spec, b.concat);
  // the same bytes, each element's key and value placed by spans
  const spans = new Uint32Array(byWidths.count * 6);
  for (let i = 0; i < byWidths.count; i++) spans.set([byWidths.keyAt(i), byWidths.keyLength(i), 0, 0, byWidths.dataAt(i), byWidths.dataLength(i)], i * 6);
  const bySpans = new PackedElements(spec, { count: byWidths.count, bytes: byWidths.bytes, spans, extras: [] });
  assert.deepEqual(bySpans.decode(), byWidths.decode());
  assert.deepEqual(new Map(bySpans.decode().map((e) => [text(e), value(e)])), contents(b.concat));
  const diff = (packed: PackedElements) => {
    const l = listing(b, true);
    l.sets.find((s) => s.name === 'concat')!.packed = packed;
    return norm(diffNft(table(a), l).ops);
  };
  assert.deepEqual(diff(bySpans), diff(byWidths));
  // an interval map: the ends of its ranges carry no value, so its elements differ in shape
  const ranges: SetSpec = { family: 'ip', table: 't', name: 'ranges', key: ['ipv4_addr'], interval: true, map: 'mark' };
  const els = [{ key: ['10.0.0.0/8'], data: 1 }, { key: ['192.168.1.0/24'], data: 2 }];
  const p = PackedElements.of(ranges, els);
  assert.ok(new Set(Array.from({ length: p.count }, (_, i) => p.dataLength(i))).size > 1);
  assert.deepEqual(p.decode(), els);
});

test("adjacent ranges of an interval set (one range's end is the next one's start) decode to their CIDRs whatever order the kernel lists the elements in", () => {
  const spec: SetSpec = { family: 'ip', table: 't', name: 'cidrs', key: ['ipv4_addr'], interval: true };
  const els = [{ key: ['172.29.0.0/16'] }, { key: ['172.30.0.0/16'] }, { key: ['172.31.0.0/16'] }, { key: ['10.0.0.0/8'] }];
  const sorted = PackedElements.of(spec, els);
  const want = [{ key: ['10.0.0.0/8'] }, { key: ['172.29.0.0/16'] }, { key: ['172.30.0.0/16'] }, { key: ['172.31.0.0/16'] }];
  assert.deepEqual(sorted.decode(), want);
  // the same elements in the order a dump gives them (an rbtree's: highest key first, a
  // range's start before the end element of the range below it)
  const order = Array.from({ length: sorted.count }, (_, i) => i).reverse();
  const spans = new Uint32Array(sorted.count * 6);
  order.forEach((i, j) => spans.set([sorted.keyAt(i), sorted.keyLength(i), 0, 0, 0, 0], j * 6));
  const extras = order.flatMap((i, j) => ((sorted as unknown as { extras: Map<number, { flags?: number }> }).extras.get(i)?.flags ? [{ index: j, flags: 1 }] : []));
  const dumped = new PackedElements(spec, { count: sorted.count, bytes: sorted.bytes, spans, extras });
  assert.deepEqual(dumped.decode(), want);
});

test('release frees a listing that owns its memory (it reads as empty after) and leaves one in a shared pool alone', () => {
  const spec: SetSpec = { family: 'ip', table: 't', name: 'plain', key: ['ipv4_addr'] };
  const big = PackedElements.of(spec, Array.from({ length: 2000 }, (_, i) => ({ key: [`10.0.${i >> 8}.${i & 255}`] })));
  assert.equal(big.bytes.length, 8000);
  big.release();
  assert.equal(big.bytes.length, 0);
  // a small Buffer is a slice of Node's shared pool
  const small = new PackedElements(spec, { count: 1, bytes: Buffer.from([10, 0, 0, 1]), widths: [4, 0, 0], extras: [] });
  assert.notEqual(small.bytes.byteLength, small.bytes.buffer.byteLength, 'pooled');
  small.release();
  assert.deepEqual(small.decode(), [{ key: ['10.0.0.1'] }]);
});

test('PackedElements.of past one message\'s worth of elements: every one, as given', () => {
  const spec: SetSpec = { family: 'ip', table: 't', name: 'big', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict' };
  const els = Array.from({ length: 20_000 }, (_, i) => ({ key: [`10.0.${i >> 8}.${i & 255}`, 'tcp', 80], verdict: { code: 'goto' as const, chain: `c${i % 7}` } }));
  assert.deepEqual(PackedElements.of(spec, els).decode(), els);
});
