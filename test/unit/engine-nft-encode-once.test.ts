// A plan checks its nftables elements by encoding them (checkNftElements), and its commit
// writes those bytes: every element of a delta is encoded exactly once, and the transactions
// hold the bytes an op list encoded from scratch holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine } from '../../src/engine/engine.js';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import { checkNftElements } from '../../src/engine/validate.js';
import { ElementsEncoder, NftCommitResult, NftTransaction, type NftablesApi, type NftOp, type SetElement, type SetSpec } from '../../src/kernel/nftables.js';
import * as R from '../../src/kernel/nft-rules.js';

/** Elements whose key reads are counted (an encoding reads each element's key). */
function counted(n: number, bad: ReadonlySet<number> = new Set()) {
  const reads = { n: 0 };
  const elements: SetElement[] = Array.from({ length: n }, (_, i) => {
    const key = [bad.has(i) ? `10.96.${i}.300` : `10.96.${i >> 8}.${i & 255}`, 'tcp', 80];
    return {
      get key() {
        reads.n++;
        return key;
      },
      data: [`10.64.${i >> 8}.${i & 255}`, 8080],
    };
  });
  return { reads, elements };
}

function table(elements: SetElement[]): DesiredNftTable {
  return {
    family: 'ip',
    name: 'ipvsync',
    chains: [{ name: 'prerouting', hook: { type: 'nat', hook: 'prerouting', priority: -100 } }],
    sets: [{ name: 'endpoints', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: ['ipv4_addr', 'inet_service'], elements, unique: true }],
    rules: [{ chain: 'prerouting', exprs: [...R.inSet([R.F.ipDaddr, R.F.l4proto, R.F.thDport], 'endpoints')] }],
  };
}

/** An nftables kernel with nothing in it that takes every commit, recording each transaction's
 *  ops and op stream as committed. */
function recordingKernel() {
  const commits: Array<{ ops: NftOp[]; stream: Buffer }> = [];
  const nft: NftablesApi = {
    list: async () => ({ genId: 1, tables: [], chains: [], sets: [], rules: [] }),
    listElements: async () => Promise.reject(new Error('not listed')),
    genId: async () => 1,
    commit: async (tx) => {
      if (!(tx instanceof NftTransaction)) throw new Error('a transaction expected');
      commits.push({ ops: [...tx.keptOps('test')], stream: Buffer.from(tx.encoded()) });
      const n = tx.size;
      return new NftCommitResult({ statuses: new Uint8Array(n).fill(1), errors: [], transactions: [{ firstOp: 0, endOp: n, sent: true, committed: true }], sendmsgCalls: 1 });
    },
  };
  return { nft, commits };
}

/** Key reads of one encoding of these elements (one transaction of them). */
function readsOfOneEncoding(n: number): number {
  const { reads, elements } = counted(n);
  const t = table(elements);
  new NftTransaction().addElements({ ...t.sets[0]!, family: 'ip', table: 'ipvsync' } as SetSpec, elements);
  return reads.n;
}

/** The op stream of these ops encoded from their elements. */
function fromScratch(ops: NftOp[]): Buffer {
  const tx = new NftTransaction();
  for (const op of ops) tx.queue(op);
  return Buffer.from(tx.encoded());
}

for (const opts of [{}, { createNftInTransactionsOf: 100 }, { maxNftOpsPerTransaction: 70 }]) {
  test(`a created table's elements are encoded once, plan and commit together (${JSON.stringify(opts)})`, async () => {
    const n = 1000;
    const { reads, elements } = counted(n);
    const k = recordingKernel();
    const rep = await new Engine({ nft: k.nft }, opts).sync({ services: [], nft: table(elements) });
    assert.deepEqual(rep.errors, []);
    assert.equal(rep.nft.writes, 5, "table, chain, set, elements, rule");
    assert.equal(reads.n, readsOfOneEncoding(n), 'each element encoded once: by the check, not again by the commit');
    assert.ok(k.commits.length > 0);
    const committed = k.commits.flatMap((c) => c.ops.filter((o) => o.kind === 'elements')).reduce((s, o) => s + (o as { elements: unknown[] }).elements.length, 0);
    assert.equal(committed, n);
    for (const c of k.commits) assert.deepEqual(c.stream, fromScratch(c.ops), 'the bytes an op list encoded from its elements has');
  });
}

test('refused elements: reported and left out; the others committed from their one encoding', async () => {
  const n = 600;
  const bad = new Set([0, 257, 599]);
  const { elements } = counted(n, bad);
  const k = recordingKernel();
  const rep = await new Engine({ nft: k.nft }).sync({ services: [], nft: table(elements) });
  assert.deepEqual(rep.errors, []);
  assert.deepEqual(
    rep.invalid.map((x) => [x.object, x.field]),
    [...bad].map((i) => [`nft ip ipvsync set endpoints element 10.96.${i}.300 . tcp . 80`, 'key']),
  );
  assert.match(rep.invalid[0]!.message, /not an IPv4 address: 10\.96\.0\.300/);
  const ops = k.commits.flatMap((c) => c.ops);
  const sent = ops.flatMap((o) => (o.kind === 'elements' ? o.elements : []));
  assert.equal(sent.length, n - bad.size);
  assert.ok(!sent.some((e) => String(e.key[0]).endsWith('.300')));
  for (const c of k.commits) assert.deepEqual(c.stream, fromScratch(c.ops));
});

test('checkNftElements: the encoded elements are those kept, as a transaction writes them', () => {
  const { elements } = counted(300, new Set([5, 280]));
  const spec = { ...table(elements).sets[0]! };
  const r = checkNftElements({ family: 'ip', name: 'ipvsync' }, spec, elements, 'add');
  assert.deepEqual([...r.bad], [5, 280]);
  assert.equal(r.encoded?.count, 298);
  const kept = elements.filter((_, i) => !r.bad.has(i));
  const set = { ...spec, family: 'ip', table: 'ipvsync' } as SetSpec;
  const op: NftOp = { verb: 'add', kind: 'elements', set, elements: kept };
  assert.deepEqual(Buffer.from(new NftTransaction().queue(op, r.encoded).encoded()), fromScratch([op]));
  // a run of them, as a piece of the op
  const piece: NftOp = { ...op, elements: kept.slice(10, 110) };
  assert.deepEqual(Buffer.from(new NftTransaction().queue(piece, r.encoded!.slice(10, 110)).encoded()), fromScratch([piece]));
});

test('encoded elements that do not fit an op (count, verb, set types, released) are not used: its elements are encoded', () => {
  const { reads, elements } = counted(20);
  const set = { ...table(elements).sets[0]!, family: 'ip', table: 'ipvsync' } as SetSpec;
  const enc = new ElementsEncoder(set, 'add', elements.length);
  for (const e of elements) enc.add(e);
  const encoded = enc.done();
  const op: NftOp = { verb: 'add', kind: 'elements', set, elements };
  const want = fromScratch([op]);
  const before = reads.n;
  assert.deepEqual(Buffer.from(new NftTransaction().queue(op, encoded).encoded()), want);
  assert.equal(reads.n, before, 'fits: copied');
  // another count
  const fewer: NftOp = { ...op, elements: elements.slice(1) };
  assert.deepEqual(Buffer.from(new NftTransaction().queue(fewer, encoded).encoded()), fromScratch([fewer]));
  // another verb (a delete writes keys alone)
  const del: NftOp = { verb: 'delete', kind: 'elements', set, elements: elements.map((e) => ({ key: e.key })) };
  assert.deepEqual(Buffer.from(new NftTransaction().queue(del, encoded).encoded()), fromScratch([del]));
  // another set type
  const other = { ...set, map: ['ipv4_addr', 'inet_service', 'mark'] } as SetSpec;
  assert.throws(() => new NftTransaction().queue({ ...op, set: other }, encoded), /data does not match/);
  // released
  const n = reads.n;
  encoded.release();
  assert.deepEqual(Buffer.from(new NftTransaction().queue(op, encoded).encoded()), want);
  assert.ok(reads.n > n, 'released: encoded from the elements');
});

test('ElementsEncoder: a refused element leaves nothing behind; undo takes the last one out', () => {
  const set: SetSpec = { family: 'ip', table: 't', name: 's', key: ['ipv4_addr', 'inet_service'] };
  const enc = new ElementsEncoder(set, 'add', 1);
  enc.add({ key: ['10.0.0.1', 80] });
  assert.throws(() => enc.add({ key: ['10.0.0.x', 80] }), /not an IPv4 address/);
  assert.throws(() => enc.add({ key: ['10.0.0.2', 70000] }), /not a port/);
  enc.add({ key: ['10.0.0.3', 81] });
  enc.add({ key: ['10.0.0.4', 82] });
  enc.undo();
  const encoded = enc.done();
  const op: NftOp = { verb: 'add', kind: 'elements', set, elements: [{ key: ['10.0.0.1', 80] }, { key: ['10.0.0.3', 81] }] };
  assert.equal(encoded.count, 2);
  assert.deepEqual(Buffer.from(new NftTransaction().queue(op, encoded).encoded()), fromScratch([op]));
  assert.throws(() => new ElementsEncoder({ ...set, key: ['ipv4_addr'], interval: true }, 'add'), /interval/);
});
