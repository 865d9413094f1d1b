// The sync engine against the machine's nftables (scripts/host-tests.sh: a private network
// namespace; FakeIpvs for IPVS, which this kernel lacks): a desired table with bad elements
// among good ones (host bits in an interval set, a key of the wrong length, a port out of range)
// commits the good ones, as `nft -j list set` shows, and reports the bad ones; a map element
// whose new verdict the façade refuses keeps the kernel's element of its key.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { Engine, type InvalidObject } from '../../src/engine/engine.js';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import { type SetElement, Nftables } from '../../src/kernel/nftables.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import * as R from '../../src/kernel/nft-rules.js';

const TABLE = 'ipvsync-validate';

after(() => {
  spawnSync('nft', ['delete', 'table', 'ip', TABLE]);
});

/** The elements of a set or map as `nft -j list` prints them, as plain texts. */
function listed(kind: 'set' | 'map', name: string): string[] {
  const out = JSON.parse(execFileSync('nft', ['-j', 'list', kind, 'ip', TABLE, name], { encoding: 'utf8' })) as { nftables: Array<Record<string, { elem?: unknown[] }>> };
  const obj = out.nftables.find((x) => x[kind])![kind]!;
  const text = (v: unknown): string => {
    if (typeof v === 'string' || typeof v === 'number') return String(v);
    const o = v as Record<string, unknown>;
    if (o.prefix) return `${(o.prefix as { addr: string }).addr}/${(o.prefix as { len: number }).len}`;
    if (o.concat) return (o.concat as unknown[]).map(text).join(' . ');
    if (o.elem) return text((o.elem as { val: unknown }).val);
    if (o.jump) return `jump ${(o.jump as { target: string }).target}`;
    const [k] = Object.keys(o);
    return k!;
  };
  return (obj.elem ?? []).map((e) => (Array.isArray(e) ? `${text(e[0])} : ${text(e[1])}` : text(e))).sort();
}

function table(services: Array<[string, number]>, cluster: string[], dispatch: Array<[string, { code: string; chain?: string }]>): DesiredNftTable {
  return {
    family: 'ip',
    name: TABLE,
    chains: [{ name: 'prerouting', hook: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } }, { name: 'mark' }],
    sets: [
      { name: 'services', key: ['ipv4_addr', 'inet_proto', 'inet_service'], elements: services.map(([a, p]) => ({ key: [a, 'tcp', p] })) },
      { name: 'cluster', key: ['ipv4_addr'], interval: true, elements: cluster.map((c) => ({ key: [c] })) },
      { name: 'dispatch', key: ['ipv4_addr'], map: 'verdict', elements: dispatch.map(([a, v]) => ({ key: [a], verdict: v as never })) },
    ],
    rules: [
      { chain: 'prerouting', exprs: [...R.inSet([R.F.ipDaddr, R.F.l4proto, R.F.thDport], 'services'), R.jump('mark')] },
      { chain: 'prerouting', exprs: [...R.vmap([R.F.ipDaddr], 'dispatch')] },
      { chain: 'mark', exprs: [...R.setMarkBits(0x4000)] },
    ],
  };
}

const named = (l: readonly InvalidObject[]) => l.map(({ kind, object, field }) => ({ kind, object, field })).sort((a, b) => (a.object < b.object ? -1 : 1));

test('a desired table with bad elements among good ones commits the good ones and reports the bad ones', async () => {
  const nft = await Nftables.open();
  const e = new Engine({ ipvs: new FakeIpvs(), nft });
  const services: Array<[string, number]> = Array.from({ length: 50 }, (_, i) => [`10.96.0.${i + 1}`, 80 + (i % 3)]);
  const desired = table(services, ['10.244.0.0/16', '10.250.0.0/24'], [['10.96.0.1', { code: 'accept' }], ['10.96.0.2', { code: 'jump', chain: 'mark' }]]);
  (desired.sets[0]!.elements as SetElement[]).splice(20, 0, { key: ['10.96.1.1', 'tcp'] }, { key: ['10.96.1.2', 'tcp', 65536] });
  (desired.sets[1]!.elements as SetElement[]).splice(1, 0, { key: ['10.245.1.5/16'] });
  const r = await e.sync({ services: [], nft: desired });
  assert.deepEqual(r.errors, []);
  assert.deepEqual(named(r.invalid), [
    { kind: 'nft', object: `nft ip ${TABLE} set cluster element 10.245.1.5/16`, field: 'key' },
    { kind: 'nft', object: `nft ip ${TABLE} set services element 10.96.1.1 . tcp`, field: 'key' },
    { kind: 'nft', object: `nft ip ${TABLE} set services element 10.96.1.2 . tcp . 65536`, field: 'key' },
  ]);
  assert.deepEqual(named((await e.plan({ services: [], nft: desired })).invalid ?? []), named(r.invalid));
  assert.deepEqual(listed('set', 'services'), services.map(([a, p]) => `${a} . tcp . ${p}`).sort());
  assert.deepEqual(listed('set', 'cluster'), ['10.244.0.0/16', '10.250.0.0/24']);
  assert.deepEqual(listed('map', 'dispatch'), ['10.96.0.1 : accept', '10.96.0.2 : jump mark']);
  // a resync: nothing to write, the bad elements still out
  const again = await e.sync({ services: [], nft: desired });
  assert.deepEqual([again.errors, again.nft.writes], [[], 0]);
  assert.deepEqual(listed('set', 'services'), services.map(([a, p]) => `${a} . tcp . ${p}`).sort());

  // 10.96.0.2's new verdict is refused: the kernel keeps its element as it is, the new
  // element 10.96.0.3 and the removal of a service element go in
  const next = table(services.slice(1), ['10.244.0.0/16', '10.250.0.0/24'], [['10.96.0.1', { code: 'accept' }], ['10.96.0.2', { code: 'bogus' }], ['10.96.0.3', { code: 'drop' }]]);
  const r2 = await e.sync({ services: [], nft: next });
  assert.deepEqual(r2.errors, []);
  assert.deepEqual(named(r2.invalid), [{ kind: 'nft', object: `nft ip ${TABLE} set dispatch element 10.96.0.2`, field: 'verdict' }]);
  assert.deepEqual(listed('map', 'dispatch'), ['10.96.0.1 : accept', '10.96.0.2 : jump mark', '10.96.0.3 : drop']);
  assert.deepEqual(listed('set', 'services'), services.slice(1).map(([a, p]) => `${a} . tcp . ${p}`).sort());
});
