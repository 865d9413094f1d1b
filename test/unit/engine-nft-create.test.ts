// createNftInTransactionsOf: owned tables created from nothing go to the kernel as their
// tables, chains, sets and elements in transactions of bounded work, then their rules in one
// last transaction; every other delta stays one transaction.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine, type DesiredState } from '../../src/engine/engine.js';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import { NetlinkError } from '../../src/errors.js';
import { NftCommitResult, type CommitOptions, type NftOp } from '../../src/kernel/nftables.js';
import * as R from '../../src/kernel/nft-rules.js';
import { GLUE_CREATE_TRANSACTION_UNITS, Proxier } from '../../src/proxy/proxier.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import { loadManifests } from '../../src/kube/manifests.js';
import { join } from 'node:path';

function table(n: number, family: 'ip' | 'ip6' = 'ip', policy: 'accept' | 'drop' = 'accept'): DesiredNftTable {
  const addr = (i: number) => (family === 'ip' ? `10.96.${i >> 8}.${i & 255}` : `fd00::${i.toString(16)}`);
  return {
    family,
    name: 'ipvsync',
    chains: [{ name: 'prerouting', hook: { type: 'filter', hook: 'prerouting', priority: -100, policy } }, { name: 'mark' }],
    sets: [
      { name: 'services', key: [family === 'ip' ? 'ipv4_addr' : 'ipv6_addr', 'inet_proto', 'inet_service'], elements: Array.from({ length: n }, (_, i) => ({ key: [addr(i + 1), 'tcp', 80] })) },
      { name: 'ports', key: ['inet_service'], elements: Array.from({ length: n }, (_, i) => ({ key: [30000 + i] })) },
    ],
    rules: [
      { chain: 'prerouting', exprs: [...R.inSet([family === 'ip' ? R.F.ipDaddr : R.F.ip6Daddr, R.F.l4proto, R.F.thDport], 'services'), R.jump('mark')] },
      { chain: 'mark', exprs: [...R.setMarkBits(0x4000)] },
    ],
  };
}

const want = (...nft: DesiredNftTable[]): DesiredState => ({ services: [], nft });

/** The fake kernel's nftables with every commit recorded: its ops and options. */
function recording() {
  const k = fakeKernel();
  const calls: Array<{ ops: NftOp[]; opts: CommitOptions }> = [];
  const orig = k.nft.commit.bind(k.nft);
  let fail: ((call: number, ops: NftOp[]) => NftCommitResult | undefined) | undefined;
  k.nft.commit = async (tx, opts = {}) => {
    const ops = [...tx.keptOps('test')];
    calls.push({ ops, opts });
    return fail?.(calls.length - 1, ops) ?? orig(tx, opts);
  };
  return { k, calls, failWith: (f: typeof fail) => (fail = f) };
}

const kinds = (ops: NftOp[]) => [...new Set(ops.map((o) => o.kind))].sort();
/** A transaction's work: an op, or a set element. */
const units = (ops: NftOp[]) => ops.reduce((n, o) => n + (o.kind === 'elements' ? o.elements.length : 1), 0);

test('a table created from nothing: table, chains, sets and elements in pieces of the given work, then the rules alone; the same ruleset as one transaction', async () => {
  const r = recording();
  const rep = await new Engine(r.k, { createNftInTransactionsOf: 100 }).sync(want(table(300), table(200, 'ip6')));
  assert.deepEqual(rep.errors, []);
  // the body (1 + 2 + 2 + 600 and 1 + 2 + 2 + 400 units) in commits of 100 units, each one
  // transaction, then the rules in one
  const body = r.calls.slice(0, -1);
  assert.equal(body.length, Math.ceil(1010 / 100));
  assert.deepEqual(body.map((c) => units(c.ops)), [...Array<number>(10).fill(100), 10], 'the body in bounded transactions, each full but the last');
  for (const c of r.calls) assert.deepEqual(c.opts, {}, 'each commit one transaction');
  assert.deepEqual(kinds(body.flatMap((c) => c.ops)), ['chain', 'elements', 'set', 'table']);
  assert.deepEqual(kinds(r.calls.at(-1)!.ops), ['rule'], 'the rules come last, alone');
  assert.equal(r.calls.at(-1)!.ops.length, 4);
  // every op counted once, as with one transaction
  const one = recording();
  const rep1 = await new Engine(one.k).sync(want(table(300), table(200, 'ip6')));
  assert.equal(one.calls.length, 1);
  assert.deepEqual(rep.nft.ops, rep1.nft.ops);
  assert.equal(rep.nft.writes, rep1.nft.writes);
  // the same objects (their handles aside: the kernel numbers them in the order it gets them)
  const strip = (x: Awaited<ReturnType<typeof r.k.nft.list>>) => JSON.parse(JSON.stringify({ ...x, genId: 0 }, (k, v) => (k === 'handle' ? undefined : v)));
  assert.deepEqual(strip(await r.k.nft.list()), strip(await one.k.nft.list()));
});

test('tables already in the kernel: a change is one transaction, created or not by this engine', async () => {
  const r = recording();
  const e = new Engine(r.k, { createNftInTransactionsOf: 100 });
  await e.sync(want(table(300)));
  r.calls.length = 0;
  // more elements (listed: no element changes given), and a static change (a chain added:
  // added, known from the last clean apply with the element changes, none)
  assert.deepEqual((await e.sync(want(table(600)))).errors, []);
  const rebuilt = table(600);
  rebuilt.chains.push({ name: 'extra' });
  assert.deepEqual((await e.sync(want(rebuilt), { nft: [] })).errors, []);
  assert.equal(r.calls.length, 2);
  for (const c of r.calls) assert.deepEqual(c.opts, {});
  assert.deepEqual(r.calls[1]!.ops.map((o) => `${o.verb} ${o.kind}`), ['add chain'], 'only the chain, not a rebuild');
  // one of the two tables there, the other new: one transaction too
  const mixed = recording();
  const e2 = new Engine(mixed.k, { createNftInTransactionsOf: 100 });
  await e2.sync(want(table(10)));
  mixed.calls.length = 0;
  await e2.sync(want(table(10), table(300, 'ip6')));
  assert.equal(mixed.calls.length, 1);
  assert.deepEqual(mixed.calls[0]!.opts, {});
});

test('a base chain that drops by policy: never split (an empty one would drop everything until its rules came)', async () => {
  const r = recording();
  assert.deepEqual((await new Engine(r.k, { createNftInTransactionsOf: 100 }).sync(want(table(300, 'ip', 'drop')))).errors, []);
  assert.equal(r.calls.length, 1);
  assert.deepEqual(r.calls[0]!.opts, {});
});

test('without the option: one transaction', async () => {
  const r = recording();
  await new Engine(r.k).sync(want(table(300)));
  assert.equal(r.calls.length, 1);
  assert.ok(r.calls[0]!.ops.some((o) => o.kind === 'rule') && r.calls[0]!.ops.some((o) => o.kind === 'elements'));
});

test('a piece fails: the pieces after it and the rules are not sent, the error names the plan\'s op, only committed pieces count; the next sync completes the tables', async () => {
  const r = recording();
  // the body's second transaction rolled back (the first committed)
  r.failWith((call, ops) => {
    if (call !== 1) return undefined;
    const failAt = ops.findIndex((o) => o.kind === 'elements');
    const statuses = Uint8Array.from({ length: ops.length }, (_, j) => (j === failAt ? 2 : 0));
    const e = new NetlinkError({ message: 'ENOMEM', code: 'ENOMEM', errno: 12, kind: 'kernel', op: 'NFT_MSG_NEWSETELEM', index: failAt });
    return new NftCommitResult({ statuses, errors: [e], transactions: [{ firstOp: 0, endOp: ops.length, sent: true, committed: false }], sendmsgCalls: 1 });
  });
  const e = new Engine(r.k, { createNftInTransactionsOf: 100 });
  const plan = await e.plan(want(table(300)));
  const rep = await e.apply(plan);
  assert.equal(r.calls.length, 2, 'nothing sent after the failed piece');
  assert.equal(rep.nft.errors.length, 1);
  const failed = plan.nft!.ops[rep.nft.errors[0]!.index!]!;
  assert.equal(failed.kind, 'elements', 'the error indexes the plan\'s ops');
  assert.equal(rep.nft.ops['add-rule'], undefined);
  assert.ok(rep.nft.writes > 0 && rep.nft.writes < plan.nft!.ops.length);
  // the kernel has the first piece: the next sync lists it and adds the rest in one transaction
  r.failWith(undefined);
  r.calls.length = 0;
  assert.deepEqual((await e.sync(want(table(300)))).errors, []);
  assert.equal(r.calls.length, 1);
  const one = recording();
  await new Engine(one.k).sync(want(table(300)));
  const strip = (x: Awaited<ReturnType<typeof r.k.nft.list>>) => JSON.parse(JSON.stringify({ ...x, genId: 0 }, (k, v) => (k === 'handle' ? undefined : v)));
  const sorted = (x: ReturnType<typeof strip>) => ({ ...x, sets: x.sets.map((s: { elements: unknown[] }) => ({ ...s, elements: s.elements.map((el) => JSON.stringify(el)).sort() })) });
  assert.deepEqual(sorted(strip(await r.k.nft.list())), sorted(strip(await one.k.nft.list())), 'the tables a one-transaction creation makes');
});

test('the proxier creates its glue this way (GLUE_CREATE_TRANSACTION_UNITS), and its resync is one transaction', async () => {
  const r = recording();
  const m = await loadManifests([join(process.cwd(), 'test', 'fixtures', 'kube', 'example')]);
  const p = new Proxier(r.k, { node: { name: 'n1', addresses: ['10.0.0.11'] }, config: { clusterCIDRs: ['192.168.0.0/16'] } });
  for (const s of m.services) p.onServiceUpdate(s);
  for (const s of m.endpointSlices) p.onSliceUpdate(s);
  assert.deepEqual((await p.sync(true)).report.errors, []);
  // the example's few elements: the body in one commit of at most that much work, the rules after
  assert.equal(r.calls.length, 2);
  assert.ok(units(r.calls[0]!.ops) <= GLUE_CREATE_TRANSACTION_UNITS);
  assert.deepEqual(kinds(r.calls[1]!.ops), ['rule']);
  r.calls.length = 0;
  p.onServiceDelete(`${m.services[0]!.metadata!.namespace}/${m.services[0]!.metadata!.name}`);
  assert.deepEqual((await p.sync(true)).report.errors, []);
  assert.ok(r.calls.length <= 1);
  for (const c of r.calls) assert.deepEqual(c.opts, {});
});
