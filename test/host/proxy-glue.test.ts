// The proxy's nftables glue on the machine's own kernel (private netns): translated from the
// example manifests, programmed through the engine, read back with `nft -j`, resynced with
// zero writes, and changed by elements only when services change.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Engine } from '../../src/engine/engine.js';
import { Nftables } from '../../src/kernel/nftables.js';
import { loadManifests } from '../../src/kube/manifests.js';
import { translate } from '../../src/proxy/ipvs/plane.js';
import { glueTables } from '../../src/proxy/ipvs/glue.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';

const EXAMPLE = join(process.cwd(), 'test', 'fixtures', 'kube', 'example');

interface NftJson {
  nftables: Array<Record<string, { family: string; table?: string; name: string; elem?: unknown[]; type?: unknown; hook?: string }>>;
}

function listed(family: string): NftJson {
  return JSON.parse(execFileSync('nft', ['-j', 'list', 'table', family, 'ipvsync'], { encoding: 'utf8' })) as NftJson;
}

function elements(j: NftJson, set: string): string[] {
  const s = j.nftables.find((o) => (o.set ?? o.map)?.name === set);
  const obj = s?.set ?? s?.map;
  return ((obj?.elem ?? []) as unknown[]).map((e) => JSON.stringify(e)).sort();
}

test('glue from the example manifests: programmed, read back with nft -j, resync writes nothing', async () => {
  const m = await loadManifests([EXAMPLE]);
  const node = { name: 'n1', addresses: ['10.0.0.11', '127.0.0.1'] };
  const config = { clusterCIDRs: ['192.168.0.0/16'] };
  const model = translate({ services: m.services, endpointSlices: m.endpointSlices, node, config });
  const nft = await Nftables.open();
  const engine = new Engine({ ipvs: new FakeIpvs(), nft });
  try {
    const r1 = await engine.sync({ services: [], nft: glueTables(model.glue) });
    assert.deepEqual(r1.errors, []);
    const j = listed('ip');
    const chains = j.nftables.filter((o) => o.chain).map((o) => `${o.chain!.name}:${o.chain!.hook ?? ''}`).sort();
    assert.deepEqual(chains, ['input:input', 'output:output', 'postrouting:postrouting', 'prerouting:prerouting', 'services:']);
    const vipPorts = model.glue.vips.filter((v) => !v.address.includes(':'));
    assert.equal(elements(j, 'vip-ports').length, new Set(vipPorts.map((v) => `${v.address}|${v.protocol}|${v.port}`)).size);
    assert.ok(elements(j, 'cluster-ips').some((e) => e.includes('10.105.250.129')), 'the nginx-basic cluster IP');
    assert.deepEqual(elements(j, 'cluster-cidrs'), [JSON.stringify({ prefix: { addr: '192.168.0.0', len: 16 } })]);
    assert.ok(listed('ip6').nftables.some((o) => o.table?.family === 'ip6'), 'the ip6 table exists too');
    const r2 = await engine.sync({ services: [], nft: glueTables(model.glue) });
    assert.equal(r2.nft.writes, 0, 'an unchanged glue costs no write');

    // One service fewer: element deletions only, no rule or chain touched.
    const fewer = translate({ services: m.services.slice(1), endpointSlices: m.endpointSlices, node, config });
    const plan = await engine.plan({ services: [], nft: glueTables(fewer.glue) });
    assert.ok(plan.nft!.ops.length > 0);
    assert.ok(plan.nft!.ops.every((o) => o.kind === 'elements'), plan.nft!.ops.map((o) => `${o.verb} ${o.kind}`).join(', '));
    const r3 = await engine.apply(plan);
    assert.deepEqual(r3.errors, []);
    assert.equal((await engine.plan({ services: [], nft: glueTables(fewer.glue) })).nft!.ops.length, 0);
  } finally {
    execFileSync('nft', ['delete', 'table', 'ip', 'ipvsync']);
    execFileSync('nft', ['delete', 'table', 'ip6', 'ipvsync']);
  }
});

test('loadBalancerSourceRanges: a per-service firewall chain, jumped to from the firewall map', async () => {
  const glue = {
    clusterCIDRs: [],
    masqueradeAll: false,
    vips: [{ kind: 'loadBalancer' as const, address: '198.51.100.7', protocol: 'tcp' as const, port: 443, localOnly: false, bound: true, servicePort: 'ns/lb:https' }],
    nodePorts: [],
    nodePortAddresses: [],
    sourceRanges: [{ address: '198.51.100.7', protocol: 'tcp' as const, port: 443, cidrs: ['203.0.113.0/24', '192.0.2.10/32'], allowFromNode: true, servicePort: 'ns/lb:https' }],
    hairpin: [],
    localTrafficServices: [],
    healthCheckNodePorts: [],
  };
  const engine = new Engine({ ipvs: new FakeIpvs(), nft: await Nftables.open() });
  try {
    assert.deepEqual((await engine.sync({ services: [], nft: glueTables(glue) })).errors, []);
    const text = execFileSync('nft', ['list', 'table', 'ip', 'ipvsync'], { encoding: 'utf8' });
    assert.match(text, /198\.51\.100\.7 \. tcp \. 443 : jump fw-[0-9a-f]{12}/);
    assert.match(text, /ip saddr 203\.0\.113\.0\/24 return/);
    assert.match(text, /ip saddr 192\.0\.2\.10 return/);
    assert.match(text, /ip saddr 198\.51\.100\.7 return/, 'the node itself through the LB IP');
    assert.match(text, /chain fw-[0-9a-f]{12} \{[^}]*drop/);
  } finally {
    execFileSync('nft', ['delete', 'table', 'ip', 'ipvsync']);
    execFileSync('nft', ['delete', 'table', 'ip6', 'ipvsync']);
  }
});

test('periodic full syncs on the real kernel: the glue is listed while the ruleset generation is unknown or moved, and not while nothing was committed (element changes given); `nft` deleting an element is repaired', async () => {
  const m = await loadManifests([EXAMPLE]);
  const node = { name: 'n1', addresses: ['10.0.0.11', '127.0.0.1'] };
  const model = translate({ services: m.services, endpointSlices: m.endpointSlices, node, config: { clusterCIDRs: ['192.168.0.0/16'] } });
  const nft = await Nftables.open();
  const engine = new Engine({ ipvs: new FakeIpvs(), nft });
  const sent = () => nft.socketStats().messagesSent;
  const want = () => ({ services: [], nft: glueTables(model.glue) });
  // a full sync whose tables' elements are the last ones' (no element changed)
  const same = { nft: [] };
  try {
    // the tables were not there (at one generation): the first sync built them from it
    assert.deepEqual((await engine.sync(want())).errors, []);
    // nothing committed since: one GETGEN, no dump
    let m0 = sent();
    const quiet = await engine.sync(want(), same);
    assert.equal(quiet.nft.writes, 0);
    assert.equal(sent() - m0, 1, 'only the generation is read');
    // what a listing of the two tables costs, for comparison
    m0 = sent();
    await nft.list({ family: 'ip', table: 'ipvsync' });
    await nft.list({ family: 'ip6', table: 'ipvsync' });
    const listing = sent() - m0;
    assert.ok(listing > 4, `a listing of two tables is several dumps (${listing} messages)`);

    // another tool deletes one of the glue's elements: the generation moves, the next full sync
    // lists and puts it back (nft reads it again), and the one after trusts the generation
    const before = execFileSync('nft', ['list', 'set', 'ip', 'ipvsync', 'cluster-ips'], { encoding: 'utf8' });
    const element = /10\.105\.250\.129 \. \w+ \. \d+/.exec(before)?.[0];
    assert.ok(element, before);
    execFileSync('nft', ['delete', 'element', 'ip', 'ipvsync', 'cluster-ips', `{ ${element} }`]);
    assert.doesNotMatch(execFileSync('nft', ['list', 'set', 'ip', 'ipvsync', 'cluster-ips'], { encoding: 'utf8' }), /10\.105\.250\.129/);
    m0 = sent();
    const repair = await engine.sync(want(), same);
    assert.deepEqual(repair.errors, []);
    assert.equal(repair.nft.writes, 1, 'one element add');
    assert.ok(sent() - m0 > listing, 'listed, then committed');
    assert.match(execFileSync('nft', ['list', 'set', 'ip', 'ipvsync', 'cluster-ips'], { encoding: 'utf8' }), /10\.105\.250\.129/);
    // the repair's commit moved the generation by exactly one: known, so not listed again
    m0 = sent();
    assert.equal((await engine.sync(want(), same)).nft.writes, 0);
    assert.equal(sent() - m0, 1);

    // a commit to a table ipvsync does not own also moves it: listed once, nothing written
    execFileSync('nft', ['add', 'table', 'ip', 'someone-else']);
    m0 = sent();
    assert.equal((await engine.sync(want(), same)).nft.writes, 0);
    assert.ok(sent() - m0 >= listing);
    m0 = sent();
    await engine.sync(want(), same);
    assert.equal(sent() - m0, 1);
    // without element changes the engine, which keeps no element, lists
    m0 = sent();
    assert.equal((await engine.sync(want())).nft.writes, 0);
    assert.ok(sent() - m0 >= listing);
    assert.match(execFileSync('nft', ['list', 'tables'], { encoding: 'utf8' }), /table ip someone-else/, 'the foreign table survives');
  } finally {
    execFileSync('nft', ['delete', 'table', 'ip', 'ipvsync']);
    execFileSync('nft', ['delete', 'table', 'ip6', 'ipvsync']);
    spawnSync('nft', ['delete', 'table', 'ip', 'someone-else']);
  }
});

test('created in pieces (createNftInTransactionsOf): `nft monitor` sees the sets filled over several generations and every rule in the last one; the tables equal a one-transaction creation; a resync reads only the generation', async () => {
  const m = await loadManifests([EXAMPLE]);
  const node = { name: 'n1', addresses: ['10.0.0.11', '127.0.0.1'] };
  const model = translate({ services: m.services, endpointSlices: m.endpointSlices, node, config: { clusterCIDRs: ['192.168.0.0/16'] } });
  const want = () => ({ services: [], nft: glueTables(model.glue) });
  const nft = await Nftables.open();
  const bare = (family: string) => JSON.stringify(listed(family), (k, v) => (k === 'handle' ? undefined : v));
  const drop = () => {
    for (const f of ['ip', 'ip6']) spawnSync('nft', ['delete', 'table', f, 'ipvsync']);
  };
  let mon: ReturnType<typeof spawn> | undefined;
  try {
    // the reference: one transaction
    assert.deepEqual((await new Engine({ ipvs: new FakeIpvs(), nft }).sync(want())).errors, []);
    const one = { ip: bare('ip'), ip6: bare('ip6') };
    drop();

    // `nft monitor` from a marker table's add to its delete: exactly what the sync committed
    mon = spawn('nft', ['monitor'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    mon.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    // waits for `re` in the monitor's output (a loaded machine starts `nft monitor` slowly),
    // calling `poke` every 250 ms meanwhile; the 120-s deadline only bounds a hang
    const seen = async (re: RegExp, poke?: () => void) => {
      for (let i = 0, deadline = Date.now() + 120_000; !re.test(out) && Date.now() < deadline; i++) {
        if (poke && i % 10 === 0) poke();
        await new Promise((r) => setTimeout(r, 25));
      }
      assert.match(out, re);
    };
    // the monitor may not listen yet: make the marker anew until it reports one (adding a table
    // that exists is no event, so each poke deletes it first)
    await seen(/add table ip marker/, () => {
      spawnSync('nft', ['delete', 'table', 'ip', 'marker'], { stdio: 'ignore' });
      spawnSync('nft', ['add', 'table', 'ip', 'marker']);
    });
    const engine = new Engine({ ipvs: new FakeIpvs(), nft }, { createNftInTransactionsOf: 25 });
    const sent = () => nft.socketStats().messagesSent;
    const r = await engine.sync(want());
    assert.deepEqual(r.errors, []);
    // the generation after the last piece is the engine's: a resync (no element changed)
    // reads it and nothing else
    const m0 = sent();
    assert.equal((await engine.sync(want(), { nft: [] })).nft.writes, 0);
    assert.equal(sent() - m0, 1, 'only the generation is read');
    spawnSync('nft', ['delete', 'table', 'ip', 'marker']);
    await seen(/delete table ip marker/);
    mon.kill();
    // from the last poke's add: an earlier poke's events may have come in after the first was seen
    const lines = out.slice(out.lastIndexOf('add table ip marker')).split('\n');
    const body = lines.slice(lines.findIndex((l) => l.startsWith('# new generation')) + 1, lines.findIndex((l) => l.startsWith('delete table ip marker')));
    const gens = body.map((l, i) => (l.startsWith('# new generation') ? i : -1)).filter((i) => i >= 0);
    assert.ok(gens.length >= 3, `several transactions, the rules' the last (${gens.length} generations)`);
    const lastGen = gens[gens.length - 2]!;
    const rules = body.map((l, i) => (l.startsWith('add rule') ? i : -1)).filter((i) => i >= 0);
    const elements = body.map((l, i) => (l.startsWith('add element') ? i : -1)).filter((i) => i >= 0);
    assert.ok(rules.length > 0 && elements.length > 0);
    assert.ok(rules.every((i) => i > lastGen), 'every rule in the last generation');
    assert.ok(elements.every((i) => i < lastGen), 'every element before it');
    // an element generation holds no more than the given work
    assert.ok(gens.length - 1 >= Math.ceil(elements.length / 25));
    assert.deepEqual({ ip: bare('ip'), ip6: bare('ip6') }, one, 'the same tables as one transaction makes');
  } finally {
    // a failed assertion must not leave the monitor running: it would keep the file from ending
    mon?.kill();
    drop();
    spawnSync('nft', ['delete', 'table', 'ip', 'marker']);
  }
});
