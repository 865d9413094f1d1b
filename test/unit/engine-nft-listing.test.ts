// A full plan over tables the kernel already holds (a restart) lists them a set at a time: the
// static part in one listing, then each set's elements when the diff reaches the set, each
// listing let go before the next set is dumped. The plan's view is exact at one generation
// only if no commit landed from the first listing to after the last dump.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine, type Plan } from '../../src/engine/engine.js';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import { elementList, NftTransaction, PackedElements, type NftOp, type SetSpec } from '../../src/kernel/nftables.js';
import { FakeNftables } from '../../src/testing/fake-kernel.js';

/** n addresses 10.at.x.y, one element each */
const addrs = (n: number, at: number) => Array.from({ length: n }, (_, i) => ({ key: [`10.${at}.${i >> 8}.${i & 255}`] }));

/** Three sets, each larger than a pooled Buffer (4 KiB of keys), so a listing owns its memory. */
function table(): DesiredNftTable {
  return {
    family: 'ip',
    name: 'ipvsync',
    chains: [{ name: 'c' }],
    rules: [],
    sets: [
      { name: 'a', key: ['ipv4_addr'], elements: addrs(2000, 1) },
      { name: 'b', key: ['ipv4_addr'], elements: addrs(2000, 2) },
      { name: 'c', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict', elements: addrs(2000, 3).map((e) => ({ key: [...e.key, 'tcp', 80], verdict: { code: 'accept' as const } })) },
    ],
  };
}

/** A fake kernel whose set dumps call `before` first (with the dump's index from 0). */
class DumpHook extends FakeNftables {
  listed: Array<{ set: string; packed: PackedElements }> = [];
  before: (i: number, set: SetSpec) => Promise<void> = async () => {};

  override async listElements(set: SetSpec): Promise<PackedElements> {
    await this.before(this.listed.length, set);
    const packed = await super.listElements(set);
    this.listed.push({ set: set.name, packed });
    return packed;
  }
}

/** The ruleset generation at which a plan's view of the tables is exact, when known: the
 *  engine's own state of the plan (apply's input, not part of the public Plan). */
function nftBase(e: Engine, p: Plan): number | undefined {
  const planned = (e as unknown as { planned: WeakMap<Plan, Map<{ kind: string }, { base?: number }>> }).planned.get(p)!;
  return [...planned].find(([k]) => k.kind === 'nft')![1].base;
}

const text = (ops: readonly NftOp[] | undefined) => (ops ?? []).map((o) => (o.kind === 'elements' ? `${o.verb} ${o.set.name} ${elementList(o.elements).map((e) => e.key.join(' ')).join(',')}` : `${o.verb} ${o.kind}`));

async function programmed(): Promise<DumpHook> {
  const nft = new DumpHook();
  assert.deepEqual((await new Engine({ nft }, {}).sync({ services: [], nft: table() })).errors, []);
  return nft;
}

test('a restart lists the static part once and each set when the diff reaches it, each listing released before the next set is dumped', async () => {
  const nft = await programmed();
  const lists = nft.dumps;
  nft.before = async (i) => {
    for (const l of nft.listed.slice(0, i)) assert.equal(l.packed.bytes.length, 0, `${l.set}'s listing released before dump ${i}`);
  };
  const e = new Engine({ nft }, {});
  const p = await e.plan({ services: [], nft: table() });
  assert.deepEqual(p.nft?.ops, []);
  assert.equal(nft.dumps, lists + 1, 'one listing of the static part');
  assert.deepEqual(nft.listed.map((l) => l.set), ['a', 'b', 'c']);
  assert.ok(nft.listed.every((l) => l.packed.bytes.length === 0), 'every listing released');
  assert.equal(nftBase(e, p), await nft.genId(), 'exact at the generation of the listing');
});

test('a restart with elements changed, gone and added by someone else repairs them with exactly those writes', async () => {
  const nft = await programmed();
  const spec = (name: string): SetSpec => ({ family: 'ip', table: 'ipvsync', name, key: ['ipv4_addr'] });
  const c: SetSpec = { ...spec('c'), key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict' };
  await nft.commit(new NftTransaction()
    .deleteElements(spec('a'), [{ key: ['10.1.0.5'] }])
    .addElements(spec('b'), [{ key: ['10.9.9.9'] }])
    .deleteElements(c, [{ key: ['10.3.0.1', 'tcp', 80] }])
    .addElements(c, [{ key: ['10.3.0.1', 'tcp', 80], verdict: { code: 'drop' } }]));
  const e = new Engine({ nft }, {});
  const p = await e.plan({ services: [], nft: table() });
  assert.deepEqual(text(p.nft?.ops), ['add a 10.1.0.5', 'delete b 10.9.9.9', 'delete c 10.3.0.1 tcp 80', 'add c 10.3.0.1 tcp 80']);
  assert.deepEqual((await e.apply(p)).errors, []);
  assert.deepEqual((await new Engine({ nft }, {}).plan({ services: [], nft: table() })).nft?.ops, []);
});

test('a commit landing between two set dumps leaves the plan\'s base unknown: the next full plan lists again and repairs what it changed in a set already dumped', async () => {
  const nft = await programmed();
  nft.before = async (i) => {
    if (i === 1) await nft.commit(new NftTransaction().deleteElements({ family: 'ip', table: 'ipvsync', name: 'a', key: ['ipv4_addr'] }, [{ key: ['10.1.0.7'] }]));
  };
  const e = new Engine({ nft }, {});
  const p = await e.plan({ services: [], nft: table() });
  assert.deepEqual(p.nft?.ops, [], 'set a was dumped before the delete');
  assert.equal(nftBase(e, p), undefined);
  assert.deepEqual((await e.apply(p)).errors, []);
  const lists = nft.dumps;
  const again = await e.plan({ services: [], nft: table() });
  assert.equal(nft.dumps, lists + 1, 'listed again: the last view was not exact at any generation');
  assert.deepEqual(text(again.nft?.ops), ['add a 10.1.0.7']);
  assert.equal(nftBase(e, again), await nft.genId());
  assert.deepEqual((await e.apply(again)).errors, []);
  // exact now: the next full plan with element changes (none) trusts the generation
  await e.plan({ services: [], nft: table() }, { nft: [] });
  assert.equal(nft.dumps, lists + 1);
});

test('a set deleted between the static listing and its dump lists as empty with the base unknown; the failed write makes the next sync list and rebuild', async () => {
  const nft = await programmed();
  nft.before = async (i) => {
    if (i === 1) await nft.commit(new NftTransaction().deleteSet({ family: 'ip', table: 'ipvsync', name: 'b', key: ['ipv4_addr'] }));
  };
  const e = new Engine({ nft }, {});
  const p = await e.plan({ services: [], nft: table() });
  assert.equal(nftBase(e, p), undefined);
  assert.deepEqual(text(p.nft?.ops).map((o) => o.split(' ').slice(0, 2).join(' ')), ['add b']);
  const r = await e.apply(p);
  assert.equal(r.nft.errors[0]?.code, 'ENOENT');
  nft.before = async () => {};
  assert.deepEqual((await e.sync({ services: [], nft: table() })).errors, []);
  assert.deepEqual((await new Engine({ nft }, {}).plan({ services: [], nft: table() })).nft?.ops, []);
});

/** A fake kernel whose first `n` dumps of set `name` are taken during a resize of its hash
 *  table, as the kernel's dump then reads: one element listed twice, another missed. */
class Resizing extends DumpHook {
  constructor(
    private readonly name: string,
    private n: number,
  ) {
    super();
  }

  override async listElements(set: SetSpec): Promise<PackedElements> {
    const real = await super.listElements(set);
    if (set.name !== this.name || this.n <= 0) return real;
    this.n--;
    const els = real.decode();
    // the element at 5 listed again in place of the one at 6: as many listed, one missed
    return PackedElements.of(set, [...els.slice(0, 6), els[5]!, ...els.slice(7)]);
  }
}

test('a set listed while the kernel resized its hash table (a key repeated, another missed) is dumped again; the plan is as for a true listing', async () => {
  const nft = new Resizing('b', 1);
  assert.deepEqual((await new Engine({ nft }, {}).sync({ services: [], nft: table() })).errors, []);
  // someone's element in b: the missed one must be found and deleted
  await nft.commit(new NftTransaction().addElements({ family: 'ip', table: 'ipvsync', name: 'b', key: ['ipv4_addr'] }, [{ key: ['10.9.9.9'] }]));
  const dumps = nft.elementDumps;
  const e = new Engine({ nft }, {});
  const p = await e.plan({ services: [], nft: table() });
  assert.equal(nft.elementDumps, dumps + 4, 'a, b twice, c');
  assert.deepEqual(text(p.nft?.ops), ['delete b 10.9.9.9']);
  assert.equal(nftBase(e, p), await nft.genId(), 'exact: the last dump was a true one');
});

test('a set that lists a repeated key every time: the repeated element is not deleted, and the plan\'s base is unknown so the next full plan lists again', async () => {
  const nft = new Resizing('b', 0);
  assert.deepEqual((await new Engine({ nft }, {}).sync({ services: [], nft: table() })).errors, []);
  (nft as unknown as { n: number }).n = 3;
  const e = new Engine({ nft }, {});
  const p = await e.plan({ services: [], nft: table() });
  // the missed element (6) is added again; the repeated one (5) stays
  assert.deepEqual(text(p.nft?.ops), ['add b 10.2.0.6']);
  assert.equal(nftBase(e, p), undefined);
  assert.deepEqual((await e.apply(p)).errors, []);
  const dumps = nft.dumps;
  assert.deepEqual((await e.plan({ services: [], nft: table() })).nft?.ops, [], 'listed again, true now: nothing to write');
  assert.equal(nft.dumps, dumps + 1, 'listed again: the last view was not exact');
});
