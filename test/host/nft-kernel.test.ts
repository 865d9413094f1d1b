// nftables against the machine's own kernel in a private network namespace
// (scripts/host-tests.sh). Every state is cross-checked with the real `nft` (-j list ruleset).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { elementList, Nftables, NftTransaction, type NftablesApi, type SetSpec, type ChainSpec, type RuleSpec } from '../../src/kernel/nftables.js';
import { Engine, type Plan } from '../../src/engine/engine.js';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import { canonicalExprs, type Expr } from '../../src/kernel/nft-expr.js';
import * as R from '../../src/kernel/nft-rules.js';
import { NetlinkError } from '../../src/errors.js';

const F = R.F;
const nftCli = (...args: string[]) => execFileSync('nft', args, { encoding: 'utf8', maxBuffer: 1 << 30 });
/** `nft list` text without the parts that change by themselves (element expiry countdowns). */
const stable = (s: string) => s.replace(/ expires [0-9hms]+/g, '');
const sortedElems = (x: unknown) => (x as unknown[]).map((e) => JSON.stringify(e)).sort();
type NftJson = { nftables: Array<Record<string, Record<string, unknown>>> };
const ruleset = (): NftJson => JSON.parse(nftCli('-j', 'list', 'ruleset')) as NftJson;
const objects = (j: NftJson, kind: string) => j.nftables.filter((o) => kind in o).map((o) => o[kind]!);

const T = 'ipvsync';
const svc4: SetSpec = { family: 'ip', table: T, name: 'svc', key: ['ipv4_addr', 'inet_proto', 'inet_service'] };
const vmap4: SetSpec = { family: 'ip', table: T, name: 'svcmap', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict' };
const cidr4: SetSpec = { family: 'ip', table: T, name: 'lb-src', key: ['ipv4_addr'], interval: true };
const nodeports: SetSpec = { family: 'ip', table: T, name: 'nodeports', key: ['inet_proto', 'inet_service'] };
const stale: SetSpec = { family: 'ip', table: T, name: 'stale', key: ['ipv4_addr'], timeoutFlag: true };
const marks: SetSpec = { family: 'ip', table: T, name: 'marks', key: ['mark'] };
const ifs: SetSpec = { family: 'ip', table: T, name: 'ifs', key: ['ifname'] };
const chain = (name: string, hook?: ChainSpec['hook']): ChainSpec => (hook ? { family: 'ip', table: T, name, hook } : { family: 'ip', table: T, name });
const ruleIn = (c: string, exprs: Expr[], comment?: string): RuleSpec => ({ family: 'ip', table: T, chain: c, exprs, ...(comment ? { comment } : {}) });

function proxyTable(): NftTransaction {
  const tx = new NftTransaction();
  tx.addTable({ family: 'ip', name: T })
    .addChain(chain('svc-a'))
    .addChain(chain('nodeports-chain'))
    .addChain(chain('prerouting', { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' }))
    .addChain(chain('output', { type: 'nat', hook: 'output', priority: -100, policy: 'accept' }))
    .addChain(chain('postrouting', { type: 'nat', hook: 'postrouting', priority: 100, policy: 'accept' }))
    .addChain(chain('input', { type: 'filter', hook: 'input', priority: 0, policy: 'accept' }))
    .addChain(chain('forward', { type: 'filter', hook: 'forward', priority: 0, policy: 'accept' }))
    .addSet(svc4).addSet(vmap4).addSet(cidr4).addSet(nodeports).addSet(stale).addSet(marks).addSet(ifs)
    .addElements(svc4, [{ key: ['10.96.0.1', 'tcp', 443] }, { key: ['10.96.0.10', 'udp', 53] }])
    .addElements(vmap4, [{ key: ['10.96.0.1', 'tcp', 443], verdict: { code: 'goto', chain: 'svc-a' } }])
    .addElements(cidr4, [{ key: ['10.0.0.0/8'] }, { key: ['192.168.1.0/24'] }])
    .addElements(nodeports, [{ key: ['tcp', 30080] }])
    .addElements(stale, [{ key: ['1.2.3.4'], timeout: 600_000, comment: 'stale udp' }])
    .addElements(marks, [{ key: [0x4000] }])
    .addElements(ifs, [{ key: ['eth0'] }])
    .addRule(ruleIn('prerouting', R.vmap([F.ipDaddr, F.l4proto, F.thDport], 'svcmap')))
    .addRule(ruleIn('prerouting', R.rule(R.fibDaddrType('local'), R.jump('nodeports-chain'))))
    .addRule(ruleIn('output', R.vmap([F.ipDaddr, F.l4proto, F.thDport], 'svcmap')))
    .addRule(ruleIn('svc-a', R.rule(R.setMarkBits(0x4000)), 'mark for masquerade'))
    .addRule(ruleIn('svc-a', R.rule(R.match(F.l4proto, 'tcp'), R.dnat('ip', '10.244.1.5', 8443))))
    .addRule(ruleIn('postrouting', R.rule(R.markMatch('meta', 0x4000), R.masquerade({ fullyRandom: true }))))
    .addRule(ruleIn('input', R.rule(R.ctState('established', 'related'), R.accept())))
    .addRule(ruleIn('forward', R.rule(R.inSet([F.ipSaddr], 'lb-src', { invert: true }), R.counter(), R.drop())));
  return tx;
}

async function fresh(): Promise<Nftables> {
  spawnSync('nft', ['flush', 'ruleset']);
  return Nftables.open();
}

/** The ruleset generation at which a plan's view of the tables is exact, when known: the
 *  engine's own state of the plan (apply's input, not part of the public Plan). */
function nftBase(e: Engine, p: Plan): number | undefined {
  const planned = (e as unknown as { planned: WeakMap<Plan, Map<{ kind: string }, { base?: number }>> }).planned.get(p)!;
  return [...planned].find(([k]) => k.kind === 'nft')![1].base;
}

test('a proxy-shaped table commits in one transaction and nft -j lists exactly it', async () => {
  const nft = await fresh();
  const tx = proxyTable();
  const before = nft.socketStats().sendmsgCalls;
  const res = await nft.commit(tx);
  assert.ok(res.ok, res.errors.map((e) => e.message).join('; '));
  assert.equal(res.sendmsgCalls, 1, 'one sendmsg for the whole transaction');
  assert.equal(nft.socketStats().sendmsgCalls - before, 1);
  assert.equal(res.count('ok'), tx.size);

  const j = ruleset();
  assert.deepEqual(objects(j, 'table').map((t) => [t.family, t.name]), [['ip', T]]);
  const chains = Object.fromEntries(objects(j, 'chain').map((c) => [c.name, c]));
  assert.deepEqual(Object.keys(chains).sort(), ['forward', 'input', 'nodeports-chain', 'output', 'postrouting', 'prerouting', 'svc-a']);
  assert.deepEqual([chains.prerouting!.type, chains.prerouting!.hook, chains.prerouting!.prio, chains.prerouting!.policy], ['nat', 'prerouting', -100, 'accept']);
  assert.deepEqual([chains.postrouting!.type, chains.postrouting!.hook, chains.postrouting!.prio], ['nat', 'postrouting', 100]);
  assert.deepEqual([chains.input!.type, chains.input!.hook, chains.forward!.hook], ['filter', 'input', 'forward']);
  assert.equal(chains['svc-a']!.hook, undefined);

  const sets = Object.fromEntries(objects(j, 'set').concat(objects(j, 'map')).map((s) => [s.name, s]));
  assert.deepEqual(sets.svc!.type, ['ipv4_addr', 'inet_proto', 'inet_service']);
  assert.deepEqual(sortedElems(sets.svc!.elem), sortedElems([{ concat: ['10.96.0.1', 'tcp', 443] }, { concat: ['10.96.0.10', 'udp', 53] }]));
  assert.equal(sets.svcmap!.map, 'verdict');
  assert.deepEqual(sets.svcmap!.elem, [[{ concat: ['10.96.0.1', 'tcp', 443] }, { goto: { target: 'svc-a' } }]]);
  assert.deepEqual(sets['lb-src']!.flags, ['interval']);
  assert.deepEqual(sortedElems(sets['lb-src']!.elem), sortedElems([{ prefix: { addr: '10.0.0.0', len: 8 } }, { prefix: { addr: '192.168.1.0', len: 24 } }]));
  assert.deepEqual(sets.nodeports!.elem, [{ concat: ['tcp', 30080] }]);
  const st = (sets.stale!.elem as Array<{ elem: Record<string, unknown> }>)[0]!.elem;
  assert.deepEqual([st.val, st.timeout, st.comment], ['1.2.3.4', 600, 'stale udp']);
  assert.deepEqual(sets.marks!.elem, [0x4000]);
  assert.deepEqual(sets.ifs!.elem, ['eth0']);

  // nft's own reading of the rules (its JSON statements)
  const rules = objects(j, 'rule');
  const pre = rules.filter((r) => r.chain === 'prerouting').map((r) => JSON.stringify(r.expr));
  assert.match(pre[0]!, /"vmap":\{"key":\{"concat":\[\{"payload":\{"protocol":"ip","field":"daddr"\}\},\{"meta":\{"key":"l4proto"\}\},\{"payload":\{"protocol":"th","field":"dport"\}\}\]\},"data":"@svcmap"\}/);
  assert.match(pre[1]!, /"fib":\{"result":"type","flags":\["daddr"\]\}.*"right":"local".*"jump":\{"target":"nodeports-chain"\}/);
  const post = rules.find((r) => r.chain === 'postrouting')!;
  assert.match(JSON.stringify(post.expr), /"masquerade":\{"flags":"fully-random"\}/);
  const svcA = rules.filter((r) => r.chain === 'svc-a');
  assert.equal(svcA[0]!.comment, 'mark for masquerade');
  assert.match(JSON.stringify(svcA[1]!.expr), /"dnat":\{"addr":"10.244.1.5","port":8443\}/);
  assert.match(JSON.stringify(rules.find((r) => r.chain === 'forward')!.expr), /"op":"!=".*"right":"@lb-src".*"counter".*"drop"/);
});

test('listing reads the same model back: specs, elements and canonical expressions', async () => {
  const nft = await fresh();
  const tx = proxyTable();
  (await nft.commit(tx)).orThrow();
  const l = await nft.list({ table: T });
  assert.equal(l.genId, await nft.genId());
  assert.deepEqual(l.tables.map((t) => [t.family, t.name]), [['ip', T]]);
  for (const op of tx.ops) {
    if (op.kind === 'chain') {
      const c = l.chains.find((x) => x.name === op.chain.name);
      assert.ok(c, op.chain.name);
      const { handle: _h, ...spec } = c;
      assert.deepEqual(spec, op.chain);
    } else if (op.kind === 'set') {
      const s = l.sets.find((x) => x.name === op.set.name);
      assert.ok(s);
      const { handle: _h, elements: _e, ...spec } = s;
      assert.deepEqual(spec, op.set);
    } else if (op.kind === 'elements') {
      const s = l.sets.find((x) => x.name === op.set.name)!;
      // timeouts are listed as set; expiration is not part of the model; hash order is the kernel's
      assert.deepEqual(sortedElems(s.elements), sortedElems(op.elements), `elements of ${op.set.name}`);
    }
  }
  const wanted = tx.ops.filter((o) => o.kind === 'rule').map((o) => (o.kind === 'rule' ? o.rule : undefined)!);
  assert.equal(l.rules.length, wanted.length);
  for (const w of wanted) {
    const got = l.rules.filter((r) => r.chain === w.chain);
    assert.ok(
      got.some((g) => JSON.stringify(g.exprs) === JSON.stringify(canonicalExprs(w.exprs)) || isDeepEqual(g.exprs, canonicalExprs(w.exprs))),
      `rule in ${w.chain} listed as added`,
    );
    if (w.comment) assert.equal(got.find((g) => g.comment)?.comment, w.comment);
  }
  // replace and delete by handle, using the listed handles
  const svcRules = l.rules.filter((r) => r.chain === 'svc-a');
  const tx2 = new NftTransaction()
    .replaceRule({ ...ruleIn('svc-a', R.rule(R.match(F.l4proto, 'tcp'), R.dnat('ip', '10.244.1.6', 8443))), handle: svcRules[1]!.handle })
    .deleteRule({ family: 'ip', table: T, chain: 'svc-a', handle: svcRules[0]!.handle })
    .insertRule(ruleIn('svc-a', [R.counter()]));
  (await nft.commit(tx2)).orThrow();
  const after = (await nft.list({ table: T })).rules.filter((r) => r.chain === 'svc-a');
  assert.equal(after.length, 2);
  assert.deepEqual(after[0]!.exprs, [{ type: 'counter' }], 'inserted first');
  assert.equal(after[1]!.handle, svcRules[1]!.handle, 'replace keeps the handle');
  assert.match(nftCli('list', 'chain', 'ip', T, 'svc-a'), /dnat to 10\.244\.1\.6:8443/);
});

function isDeepEqual(a: unknown, b: unknown): boolean {
  try {
    assert.deepEqual(a, b);
    return true;
  } catch {
    return false;
  }
}

test('listElements lists one set as list() does, packed (elements of one shape, and an interval map whose end elements have no value); a set that is not there is ENOENT; release frees it', async () => {
  const nft = await fresh();
  (await nft.commit(proxyTable())).orThrow();
  // an interval map: its ranges' end elements carry no value, so the elements differ in shape
  const ranges: SetSpec = { family: 'ip', table: T, name: 'ranges', key: ['ipv4_addr'], interval: true, map: 'mark' };
  (await nft.commit(new NftTransaction().addSet(ranges).addElements(ranges, [{ key: ['10.0.0.0/8'], data: 1 }, { key: ['192.168.1.0/24'], data: 2 }]))).orThrow();
  // 20k elements: a dump of many messages, its bytes over several of the addon's blocks. Sized
  // for them: a resizable hash set grows in the background after a large add, and a dump that
  // runs meanwhile resumes each message by counting elements over a table in another order, so
  // it lists some twice and misses others (both list() and listElements read the kernel as it is).
  const big: SetSpec = { family: 'ip', table: T, name: 'big', key: ['ipv4_addr', 'inet_proto', 'inet_service', 'mark'], map: ['ipv4_addr', 'inet_service'], size: 65536 };
  const bigElements = Array.from({ length: 20_000 }, (_, i) => ({ key: [`10.96.${i >> 8}.${i & 255}`, 'tcp', 80, i % 10], data: [`10.244.${i >> 8}.${i & 255}`, 8080] }));
  (await nft.commit(new NftTransaction().addSet(big).addElements(big, bigElements))).orThrow();
  const l = await nft.list({ table: T });
  for (const s of l.sets) {
    const { handle: _h, elements, ...spec } = s;
    const packed = await nft.listElements(spec);
    assert.deepEqual(sortedElems(packed.decode()), sortedElems(elements), `elements of ${s.name}`);
    if (!s.interval) assert.equal(packed.count, elements.length);
  }
  const { handle: _h, elements: _e, ...rangeSpec } = l.sets.find((s) => s.name === 'ranges')!;
  const r = await nft.listElements(rangeSpec);
  assert.ok(new Set(Array.from({ length: r.count }, (_, i) => r.dataLength(i))).size > 1, 'start elements with a value, end elements without');
  await assert.rejects(nft.listElements({ ...svc4, name: 'absent' }), (e: unknown) => e instanceof NetlinkError && e.code === 'ENOENT');
  await assert.rejects(nft.listElements({ ...svc4, table: 'absent' }), (e: unknown) => e instanceof NetlinkError && e.code === 'ENOENT');
  // released: its memory goes at once, and it reads as empty after
  const b = await nft.listElements(big);
  assert.equal(b.count, 20_000);
  assert.equal(b.bytes.length, 20_000 * 24);
  b.release();
  assert.equal(b.bytes.length, 0);
});

test('a restart over its own table lists it a set at a time: a commit landing between two set dumps leaves the plan\'s base unknown, and the next full plan lists again and repairs it', async () => {
  const nft = await fresh();
  const addrs = (n: number, at: number) => Array.from({ length: n }, (_, i) => ({ key: [`10.${at}.${i >> 8}.${i & 255}`] }));
  const table: DesiredNftTable = {
    family: 'ip',
    name: T,
    chains: [{ name: 'c' }],
    rules: [],
    sets: [
      { name: 'a', key: ['ipv4_addr'], elements: addrs(500, 1) },
      { name: 'b', key: ['ipv4_addr'], elements: addrs(500, 2) },
    ],
  };
  assert.deepEqual((await new Engine({ nft }, {}).sync({ services: [], nft: table })).errors, []);
  // Without another commit: the base is the generation the listing saw.
  const restarted = new Engine({ nft }, {});
  const quiet = await restarted.plan({ services: [], nft: table });
  assert.deepEqual(quiet.nft?.ops, []);
  assert.equal(nftBase(restarted, quiet), await nft.genId());
  // A restarted engine whose second set dump comes after someone deleted an element of the first.
  let dumps = 0;
  const racing: NftablesApi = {
    commit: (tx, o) => nft.commit(tx, o),
    list: (o) => nft.list(o),
    genId: () => nft.genId(),
    listElements: (set) => {
      if (dumps++ === 1) nftCli('delete', 'element', 'ip', T, 'a', '{ 10.1.0.7 }');
      return nft.listElements(set);
    },
  };
  const e = new Engine({ nft: racing }, {});
  const p = await e.plan({ services: [], nft: table });
  assert.equal(dumps, 2, 'one dump per set');
  assert.deepEqual(p.nft?.ops, [], 'set a was listed before the delete');
  assert.equal(nftBase(e, p), undefined, 'the generation moved between the dumps');
  assert.deepEqual((await e.apply(p)).errors, []);
  const again = await e.plan({ services: [], nft: table });
  assert.equal(dumps, 4, 'listed again: the last plan\'s view was not exact');
  assert.deepEqual(again.nft?.ops.map((o) => (o.kind === 'elements' ? `${o.verb} ${o.set.name} ${elementList(o.elements).map((x) => x.key.join(' ')).join(',')}` : o.kind)), ['add a 10.1.0.7']);
  assert.equal(nftBase(e, again), await nft.genId());
});

test('a failing op in the middle rolls the whole transaction back and names the op', async () => {
  const nft = await fresh();
  (await nft.commit(proxyTable())).orThrow();
  const before = stable(nftCli('list', 'ruleset'));
  const gen = await nft.genId();
  const tx = new NftTransaction()
    .addElements(svc4, [{ key: ['10.96.0.99', 'tcp', 80] }])
    .addChain(chain('svc-new'))
    .addRule(ruleIn('svc-new', [R.accept()]))
    .addRule(ruleIn('no-such-chain', [R.accept()])) // op 3 fails: ENOENT
    .addElements(vmap4, [{ key: ['10.96.0.99', 'tcp', 80], verdict: { code: 'goto', chain: 'svc-new' } }]);
  const res = await nft.commit(tx);
  assert.equal(res.ok, false);
  assert.equal(res.status(3), 'error');
  const e = res.errorOf(3);
  assert.ok(e instanceof NetlinkError);
  assert.equal(e.code, 'ENOENT');
  assert.equal(e.kind, 'kernel');
  assert.equal(e.index, 3);
  assert.match(e.op, /NFT_MSG_NEWRULE ip ipvsync no-such-chain/);
  for (const i of [0, 1, 2, 4]) assert.equal(res.status(i), 'rolled-back', `op ${i}`);
  assert.deepEqual(res.transactions, [{ firstOp: 0, endOp: 5, sent: true, committed: false }]);
  assert.equal(stable(nftCli('list', 'ruleset')), before, 'nothing half-applied');
  assert.equal(await nft.genId(), gen, 'no new generation');
  assert.throws(() => res.orThrow(), (x: unknown) => x === e);
  // create on an existing object: EEXIST, also rolled back
  const r2 = await nft.commit(new NftTransaction().addChain(chain('svc-b')).createChain(chain('svc-a')));
  assert.equal(r2.errorOf(1)?.code, 'EEXIST');
  assert.equal(r2.status(0), 'rolled-back');
  assert.equal(stable(nftCli('list', 'ruleset')), before);
});

test('foreign tables are never touched', async () => {
  const nft = await fresh();
  execFileSync('nft', ['-f', '-'], {
    input: [
      'table ip foreign {',
      '  set s { type ipv4_addr; elements = { 1.1.1.1 }; }',
      '  chain c { type filter hook input priority 0; counter; }',
      '}',
      'table inet foreign6 { chain d { }; }',
      '',
    ].join('\n'),
  });
  const theirsBefore = nftCli('list', 'table', 'ip', 'foreign') + nftCli('list', 'table', 'inet', 'foreign6');
  (await nft.commit(proxyTable())).orThrow();
  const tx = new NftTransaction()
    .flushTable({ family: 'ip', name: T })
    .flushSet(svc4)
    .deleteChain(chain('nodeports-chain'))
    .deleteTable({ family: 'ip', name: T });
  (await nft.commit(tx)).orThrow();
  assert.equal(nftCli('list', 'table', 'ip', 'foreign') + nftCli('list', 'table', 'inet', 'foreign6'), theirsBefore);
  const l = await nft.list();
  assert.deepEqual(l.tables.map((t) => `${t.family} ${t.name}`).sort(), ['inet foreign6', 'ip foreign']);
  assert.deepEqual((await nft.list({ table: 'foreign', family: 'ip' })).sets[0]!.elements, [{ key: ['1.1.1.1'] }]);
});

test('ip6 and inet: concatenated v6 sets, verdict maps, interval sets, dnat6', async () => {
  const nft = await fresh();
  const s6: SetSpec = { family: 'ip6', table: 'v6', name: 'svc6', key: ['ipv6_addr', 'inet_proto', 'inet_service'], map: 'verdict' };
  const c6: SetSpec = { family: 'ip6', table: 'v6', name: 'src6', key: ['ipv6_addr'], interval: true };
  const si: SetSpec = { family: 'inet', table: 'dual', name: 'v4', key: ['ipv4_addr', 'inet_proto', 'inet_service'] };
  const tx = new NftTransaction()
    .addTable({ family: 'ip6', name: 'v6' })
    .addChain({ family: 'ip6', table: 'v6', name: 'svc6a' })
    .addChain({ family: 'ip6', table: 'v6', name: 'pre', hook: { type: 'nat', hook: 'prerouting', priority: -100 } })
    .addSet(s6)
    .addSet(c6)
    .addElements(s6, [{ key: ['fd00::1', 'tcp', 443], verdict: { code: 'jump', chain: 'svc6a' } }])
    .addElements(c6, [{ key: ['fd00::/64'] }, { key: ['2001:db8::/32'] }])
    .addRule({ family: 'ip6', table: 'v6', chain: 'pre', exprs: R.vmap([F.ip6Daddr, F.l4proto, F.thDport], 'svc6') })
    .addRule({ family: 'ip6', table: 'v6', chain: 'svc6a', exprs: R.rule(R.match(F.l4proto, 'tcp'), R.dnat('ip6', 'fd00::2', 8443)) })
    .addTable({ family: 'inet', name: 'dual' })
    .addChain({ family: 'inet', table: 'dual', name: 'fw', hook: { type: 'filter', hook: 'forward', priority: 0 } })
    .addSet(si)
    .addRule({ family: 'inet', table: 'dual', chain: 'fw', exprs: R.rule(R.match(F.nfproto, 'ipv4'), R.inSet([F.ipDaddr, F.l4proto, F.thDport], 'v4'), R.accept()) });
  (await nft.commit(tx)).orThrow();
  const text = nftCli('list', 'ruleset');
  assert.match(text, /elements = \{ fd00::1 \. tcp \. 443 : jump svc6a \}/);
  assert.match(text, /elements = \{ 2001:db8::\/32,\s+fd00::\/64 \}/);
  assert.match(text, /dnat to \[fd00::2\]:8443/);
  // nft folds the explicit `meta nfproto ipv4` into `ip daddr` when printing an inet rule
  assert.match(text, /chain fw \{[^}]*ip daddr \. meta l4proto \. th dport @v4 accept/);
  const inetRule = (await nft.list({ family: 'inet' })).rules[0]!;
  assert.deepEqual(inetRule.exprs.slice(0, 2), [{ type: 'meta', key: 'nfproto', dreg: 1 }, { type: 'cmp', sreg: 1, op: 'eq', data: '02' }]);
  const l = await nft.list({ family: 'ip6' });
  assert.deepEqual(l.sets.find((s) => s.name === 'src6')!.elements.map((e) => e.key[0]).sort(), ['2001:db8::/32', 'fd00::/64']);
  assert.deepEqual(l.sets.find((s) => s.name === 'svc6')!.elements, [{ key: ['fd00::1', 'tcp', 443], verdict: { code: 'jump', chain: 'svc6a' } }]);
  assert.ok(l.tables.every((t) => t.family === 'ip6'));
});

test('adjacent CIDRs of an interval set (one range ends where the next starts) list back as they were added, as nft lists them, and the engine replaces them exactly', async () => {
  const nft = await fresh();
  const cidrs = ['10.0.0.0/8', '172.29.0.0/16', '172.30.0.0/16', '172.31.0.0/16', '192.168.0.0/25', '192.168.0.128/25'];
  const tx = new NftTransaction().addTable({ family: 'ip', name: T }).addSet(cidr4).addElements(cidr4, cidrs.map((c) => ({ key: [c] })));
  (await nft.commit(tx)).orThrow();
  const listed = async () => (await nft.list({ table: T })).sets.find((s) => s.name === cidr4.name)!.elements.map((e) => e.key[0] as string).sort();
  assert.deepEqual(await listed(), [...cidrs].sort());
  const byNft = (JSON.parse(nftCli('-j', 'list', 'set', 'ip', T, cidr4.name)) as NftJson).nftables.find((o) => 'set' in o)!.set!.elem as Array<{ prefix: { addr: string; len: number } }>;
  assert.deepEqual(byNft.map((e) => `${e.prefix.addr}/${e.prefix.len}`).sort(), [...cidrs].sort());
  // the engine's diff from that listing: the middle range and one half go, one is added
  const engine = new Engine({ nft }, {});
  const want = ['10.0.0.0/8', '172.29.0.0/16', '172.31.0.0/16', '192.168.0.0/25', '172.28.0.0/16'];
  const desired: DesiredNftTable = { family: 'ip', name: T, chains: [], rules: [], sets: [{ ...cidr4, elements: want.map((c) => ({ key: [c] })) }] };
  const r = await engine.sync({ services: [], nft: [desired] });
  assert.deepEqual(r.errors, []);
  assert.deepEqual(await listed(), [...want].sort());
  assert.equal((await engine.sync({ services: [], nft: [desired] })).nft.writes, 0, 'nothing left to change');
});

test('100k elements in one transaction: split into NEWSETELEM messages under 64 KiB, one sendmsg', async () => {
  const nft = await fresh();
  const s: SetSpec = { family: 'ip', table: T, name: 'big', key: ['ipv4_addr', 'inet_proto', 'inet_service'] };
  const elements = Array.from({ length: 100_000 }, (_, i) => ({ key: [`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`, i % 2 ? 'udp' : 'tcp', 1 + (i % 60000)] }));
  const tx = new NftTransaction().addTable({ family: 'ip', name: T }).addSet(s).addElements(s, elements);
  const res = await nft.commit(tx);
  assert.ok(res.ok, res.errors[0]?.message);
  assert.equal(res.sendmsgCalls, 1);
  const count = JSON.parse(nftCli('-j', 'list', 'set', 'ip', T, 'big')).nftables[1].set.elem.length;
  assert.equal(count, 100_000);
  const l = await nft.list({ table: T });
  assert.equal(l.sets[0]!.elements.length, 100_000);
  // delete them all again in bulk
  const del = await nft.commit(new NftTransaction().deleteElements(s, elements));
  assert.ok(del.ok);
  assert.equal((await nft.list({ table: T })).sets[0]!.elements.length, 0);
});

test('maxOpsPerTransaction splits a load into several atomic transactions', async () => {
  const nft = await fresh();
  const tx = new NftTransaction().addTable({ family: 'ip', name: T });
  for (let i = 0; i < 50; i++) tx.addChain(chain(`c${i}`)).addRule(ruleIn(`c${i}`, [R.counter(), R.accept()]));
  const res = await nft.commit(tx, { maxOpsPerTransaction: 20 });
  assert.ok(res.ok);
  assert.equal(res.transactions.length, 6, '101 ops in transactions of at most 20');
  assert.ok(res.transactions.every((t) => t.committed && t.endOp - t.firstOp <= 20));
  assert.equal(res.sendmsgCalls, 6);
  assert.equal((await nft.list({ table: T })).rules.length, 50);
  // a failure in the third transaction: the first two stay, the rest is not sent
  spawnSync('nft', ['flush', 'ruleset']);
  const bad = new NftTransaction().addTable({ family: 'ip', name: T });
  for (let i = 0; i < 30; i++) bad.addChain(chain(`d${i}`));
  bad.addRule(ruleIn('nope', [R.accept()]));
  for (let i = 30; i < 60; i++) bad.addChain(chain(`d${i}`));
  const r2 = await nft.commit(bad, { maxOpsPerTransaction: 10 });
  assert.equal(r2.ok, false);
  const failed = r2.transactions.findIndex((t) => !t.committed);
  assert.equal(failed, 3, 'op 31 is in the fourth transaction');
  assert.ok(r2.transactions.slice(0, 3).every((t) => t.committed));
  assert.ok(r2.transactions.slice(4).every((t) => !t.sent));
  assert.equal(r2.status(31), 'error');
  assert.equal(r2.status(5), 'ok');
  assert.equal(r2.status(35), 'rolled-back', 'same transaction as the failure');
  assert.equal(r2.status(45), 'not-sent');
  assert.equal((await nft.list({ table: T })).chains.length, 29, 'ops 0..29 (table, d0..d28) committed, nothing after');
});

test('genId: a commit conditioned on a stale generation fails with ERESTART and changes nothing', async () => {
  const nft = await fresh();
  const g = await nft.genId();
  nftCli('add', 'table', 'ip', 'other');
  const res = await nft.commit(new NftTransaction().addTable({ family: 'ip', name: T }), { genId: g });
  assert.equal(res.ok, false);
  assert.equal(res.errors[0]?.code, 'ERESTART');
  assert.ok(!nftCli('list', 'tables').includes(T));
  assert.equal(res.status(0), 'rolled-back');
  (await nft.commit(new NftTransaction().addTable({ family: 'ip', name: T }), { genId: await nft.genId() })).orThrow();
  assert.ok(nftCli('list', 'tables').includes(T));
});

test('destroy (kernel 6.3+): deleting what is absent succeeds; delete fails with ENOENT', async () => {
  const nft = await fresh();
  const del = await nft.commit(new NftTransaction().deleteTable({ family: 'ip', name: 'absent' }));
  assert.equal(del.errorOf(0)?.code, 'ENOENT');
  const des = await nft.commit(
    new NftTransaction().addTable({ family: 'ip', name: T }).addSet(svc4).destroyElements(svc4, [{ key: ['10.0.0.1', 'tcp', 1] }]).destroyTable({ family: 'ip', name: 'absent' }),
  );
  assert.ok(des.ok, des.errors[0]?.message);
});

test('invalid input is rejected before anything is sent', async () => {
  const nft = await fresh();
  const tx = new NftTransaction();
  assert.throws(() => tx.addElements(svc4, [{ key: ['10.0.0.300', 'tcp', 1] }]), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid');
  assert.throws(() => tx.addElements(svc4, [{ key: ['10.0.0.1', 'tcp'] }]), /key has 2 field/);
  assert.throws(() => tx.addElements(cidr4, [{ key: ['10.0.0.1/8'] }]), /host bits/);
  assert.throws(() => tx.addTable({ family: 'arp' as 'ip', name: 'x' }), /family/);
  assert.throws(() => tx.replaceRule(ruleIn('c', [R.accept()])), /handle/);
  const before = nft.socketStats().sendmsgCalls;
  assert.throws(
    () => tx.addRule(ruleIn('c', [{ type: 'cmp', sreg: 1, op: 'eq', data: 'zz' } as Expr])),
    (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && /hex/.test(e.message),
  );
  assert.throws(() => tx.addRule(ruleIn('c', [{ type: 'meta', key: 'bogus', dreg: 1 } as unknown as Expr])), /unknown value bogus/);
  assert.equal(tx.size, 0, 'nothing queued');
  assert.equal(nft.socketStats().sendmsgCalls, before, 'nothing sent');
});

/** n service chains with two rules each and a verdict map over them: ~1 MB of op stream at
 *  n = 2500, past the 256 KiB pieces a transaction feeds the addon's pipelined encoder. */
function serviceTable(n: number, keepOps: boolean, bad?: Expr): NftTransaction {
  const tx = new NftTransaction({ keepOps }).addTable({ family: 'ip', name: T }).addSet(vmap4);
  for (let i = 0; i < n; i++) tx.addChain(chain(`svc-${i}`));
  if (bad) tx.addRule(ruleIn('svc-0', [bad]));
  tx.addChain(chain('prerouting', { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' }))
    .addRule(ruleIn('prerouting', R.vmap([F.ipDaddr, F.l4proto, F.thDport], 'svcmap')))
    .addElements(vmap4, Array.from({ length: n }, (_, i) => ({ key: [`10.96.${i >> 8}.${i & 255}`, 'tcp', 80], verdict: { code: 'goto' as const, chain: `svc-${i}` } })));
  for (let i = 0; i < n; i++)
    tx.addRule(ruleIn(`svc-${i}`, R.rule(R.match(F.ipSaddr, '10.244.0.0/16', 'neq'), R.setMarkBits(0x4000))))
      .addRule(ruleIn(`svc-${i}`, R.rule(R.counter(), R.match(F.l4proto, 'tcp'), R.dnat('ip', `10.244.${i >> 8}.${i & 255}`, 8080))));
  return tx;
}

test('a large transaction commits through the pipelined encoder: the ruleset nft lists is the one the op list commits', async () => {
  const withoutHandles = (j: NftJson) => JSON.stringify(j.nftables.filter((o) => !('metainfo' in o)), (k, v: unknown) => (k === 'handle' ? undefined : k === 'elem' ? sortedElems(v) : v));
  const nft = await fresh();
  const piped = serviceTable(2500, false);
  assert.equal(piped.ops.length, 0);
  assert.ok(piped.encoded().length > 3 * 256 * 1024, 'several pieces were fed while it was queued');
  const res = await nft.commit(piped);
  assert.ok(res.ok, res.errors.map((e) => e.message).join('; '));
  assert.equal(res.sendmsgCalls, 1);
  assert.equal(res.count('ok'), piped.size);
  const j = ruleset();
  assert.equal(objects(j, 'rule').length, 2 * 2500 + 1);
  assert.equal(objects(j, 'chain').length, 2500 + 1);

  // The same ops encoded at commit in one go (its pipelined encoder dropped): the same ruleset,
  // handles aside.
  const nft2 = await fresh();
  const whole = serviceTable(2500, true);
  assert.ok(whole.takeEncoder(), 'it had fed a pipelined encoder');
  const res2 = await nft2.commit(whole);
  assert.ok(res2.ok);
  assert.equal(withoutHandles(ruleset()), withoutHandles(j));

  // A second commit of the same transaction (its encoder was taken) encodes the whole stream.
  spawnSync('nft', ['flush', 'ruleset']);
  const again = await nft.commit(piped);
  assert.ok(again.ok);
  assert.equal(withoutHandles(ruleset()), withoutHandles(j));
});

test('a bad op in a piece fed to the pipelined encoder early: the commit rejects it by index and sends nothing', async () => {
  const nft = await fresh();
  const bad = { type: 'payload', base: 'network', offset: 2 ** 32, len: 1, dreg: 1 } as Expr;
  const tx = serviceTable(2500, false, bad); // op 2502: table, set, 2500 chains, then the bad rule
  const before = nft.socketStats().sendmsgCalls;
  await assert.rejects(nft.commit(tx), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && e.op === 'nftables op 2502' && /offset/.test(e.message));
  assert.equal(nft.socketStats().sendmsgCalls, before, 'nothing sent');
  assert.deepEqual(objects(ruleset(), 'table'), []);
});
