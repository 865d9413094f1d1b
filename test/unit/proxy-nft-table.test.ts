// The nftables data plane's tables from the service model: rules that never depend on the
// services (only on the endpoint counts in use), and every frontend's elements where its
// traffic policy puts them. Real traffic through these tables: test/host/nft-proxy.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { modelContext, serviceModel } from '../../src/kube/service-model.js';
import { NftablesPlane } from '../../src/proxy/nftables/plane.js';
import type { ServiceModel } from '../../src/kube/service-model.js';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import { slice, svc } from '../fixtures/kube/builders.js';
import { Proxier } from '../../src/proxy/proxier.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import * as R from '../../src/kernel/nft-rules.js';
import { PROXY_TABLE_OWNED } from '../../src/proxy/nft-sets.js';
import { SHARDS } from '../../src/proxy/nftables/table.js';
import { logicalElements, logicalName } from '../helpers/nft-shards.js';
import { NftTransaction } from '../../src/kernel/nftables.js';

const ctx = modelContext({ name: 'node-a', addresses: ['10.0.0.11', '127.0.0.1', '2001:db8::11'] }, { clusterCIDRs: ['10.244.0.0/16', 'fd00:244::/48'] });
const eps = (n: number, base: string, node = 'node-b') => Array.from({ length: n }, (_, i) => ({ ip: `${base}${i + 2}`, node }));
function model(name: string, clusterIP: string, endpoints: ReturnType<typeof eps>, spec: Record<string, unknown> = {}) {
  return serviceModel(svc(name, { clusterIP, ports: [{ name: 'http', port: 80 }], ...spec }), [slice(name, `${name}-1`, [{ name: 'http', port: 8080 }], endpoints)], ctx);
}
const set = (t: DesiredNftTable, name: string) => logicalElements(t.sets, name)!.map((e) => [...e.key, ...(e.data === undefined ? [] : [e.data].flat())].join(' ')).sort();
/** The tables of these services built from nothing, and the services' warnings. */
function nftablesTables(models: ServiceModel[], c = ctx) {
  const plane = new NftablesPlane();
  plane.rebuild(models.map((m) => m.name), (n) => models.find((m) => m.name === n)!, c, '');
  return { tables: plane.tables(), warnings: plane.summary().warnings.filter((w) => w.service !== '') };
}
const shape = (t: DesiredNftTable) => ({ chains: t.chains, rules: t.rules, sets: t.sets.map(({ elements: _e, ...decl }) => decl) });

test('the rules and chains are the same for 1 and 300 services with the same endpoint counts: services are elements', () => {
  const one = nftablesTables([model('s0', '10.96.0.1', eps(3, '10.244.9.'))], ctx).tables[0]!;
  const many = nftablesTables(
    Array.from({ length: 300 }, (_, i) => model(`s${i}`, `10.96.${(i >> 8) + 1}.${i & 255}`, eps(3, `10.244.${i & 255}.`))),
    ctx,
  ).tables[0]!;
  assert.deepEqual(shape(many), shape(one));
  assert.equal(set(many, 'endpoints-3').length, 900);
  // one dnat rule per endpoint count in each shard's chain, none per service
  const two = nftablesTables([model('a', '10.96.0.1', eps(3, '10.244.1.')), model('b', '10.96.0.2', eps(5, '10.244.2.'))], ctx).tables[0]!;
  assert.equal(two.rules.length, one.rules.length + SHARDS);
  assert.deepEqual([...new Set(two.sets.filter((s) => s.name.startsWith('endpoints-')).map((s) => logicalName(s.name)))], ['endpoints-3', 'endpoints-5']);
  assert.equal(two.sets.filter((s) => s.name.startsWith('endpoints-')).length, 2 * SHARDS, 'each count a map per shard');
});

test('a frontend has one element per endpoint, its bucket the endpoint index; NodePorts on every node address but loopback', () => {
  const m = model('web', '10.96.0.10', eps(2, '10.244.1.'), { type: 'NodePort', ports: [{ name: 'http', port: 80, nodePort: 30080 }] });
  const [ip] = nftablesTables([m], ctx).tables;
  assert.deepEqual(set(ip!, 'endpoints-2'), [
    '10.0.0.11 tcp 30080 0 10.244.1.2 8080',
    '10.0.0.11 tcp 30080 1 10.244.1.3 8080',
    '10.96.0.10 tcp 80 0 10.244.1.2 8080',
    '10.96.0.10 tcp 80 1 10.244.1.3 8080',
  ]);
  assert.deepEqual(set(ip!, 'cluster-ips'), ['10.96.0.10 tcp 80']);
  assert.deepEqual(set(ip!, 'external-ips'), ['10.0.0.11 tcp 30080'], 'NodePort traffic is masqueraded');
  assert.deepEqual(set(ip!, 'cluster-cidrs'), ['10.244.0.0/16']);
  assert.deepEqual(set(ip!, 'cluster-addrs'), ['10.96.0.10']);
});

test('traffic policies: no endpoint rejects every frontend; Local without one here drops the external ones and keeps the source', () => {
  const none = model('none', '10.96.0.20', []);
  const local = model('local', '10.96.0.30', eps(2, '10.244.3.'), { type: 'LoadBalancer', externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, nodePort: 30090 }] });
  const here = model('here', '10.96.0.40', [{ ip: '10.244.4.2', node: 'node-a' }, { ip: '10.244.4.3', node: 'node-b' }], { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, nodePort: 30100 }] });
  const [ip] = nftablesTables([none, local, here], ctx).tables;
  assert.deepEqual(set(ip!, 'reject-services'), ['10.96.0.20 tcp 80']);
  assert.deepEqual(set(ip!, 'drop-services'), ['10.0.0.11 tcp 30090']);
  assert.deepEqual(set(ip!, 'external-ips'), [], 'Local: no masquerade of external traffic');
  assert.deepEqual(set(ip!, 'endpoints-1'), ['10.0.0.11 tcp 30100 0 10.244.4.2 8080'], 'the node-local endpoint only');
  assert.deepEqual(
    set(ip!, 'hairpin'),
    ['10.244.3.2 10.244.3.2', '10.244.3.3 10.244.3.3', '10.244.4.2 10.244.4.2', '10.244.4.3 10.244.4.3'],
    'every endpoint may reach itself (its slice may say it is elsewhere): none of a service without endpoints',
  );
  assert.deepEqual(set(ip!, 'endpoints-2').filter((e) => e.startsWith('10.96.0.40')), ['10.96.0.40 tcp 80 0 10.244.4.2 8080', '10.96.0.40 tcp 80 1 10.244.4.3 8080'], 'the cluster IP keeps every endpoint');
});

test('Local policy: pods and the node reach every endpoint through an external frontend (a short-circuit block), masqueraded from the node only', () => {
  const local = model('local', '10.96.0.30', eps(2, '10.244.3.'), { type: 'LoadBalancer', externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, nodePort: 30090 }] });
  const here = model('here', '10.96.0.40', [{ ip: '10.244.4.2', node: 'node-a' }, { ip: '10.244.4.3', node: 'node-b' }, { ip: '10.244.4.4', node: 'node-b' }], { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, nodePort: 30100 }] });
  const cluster = model('cluster', '10.96.0.50', eps(2, '10.244.5.'), { type: 'NodePort', ports: [{ name: 'http', port: 80, nodePort: 30110 }] });
  const none = model('none', '10.96.0.60', [], { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, nodePort: 30120 }] });
  const [ip] = nftablesTables([local, here, cluster, none], ctx).tables;
  const sc = (n: number) => 0x4000_0000 + n;
  assert.deepEqual(set(ip!, 'endpoints-2').filter((e) => e.includes(' 30090 ')), [`10.0.0.11 tcp 30090 ${sc(0)} 10.244.3.2 8080`, `10.0.0.11 tcp 30090 ${sc(1)} 10.244.3.3 8080`], 'no endpoint here: the cluster block only');
  assert.deepEqual(set(ip!, 'drop-services'), ['10.0.0.11 tcp 30090'], 'traffic from elsewhere is still dropped');
  assert.ok(set(ip!, 'reject-services').includes('10.0.0.11 tcp 30120'), 'no endpoint anywhere: refused to everyone');
  assert.deepEqual(set(ip!, 'endpoints-1').filter((e) => e.includes(' 30100 ')), ['10.0.0.11 tcp 30100 0 10.244.4.2 8080'], 'from elsewhere: the local endpoint');
  assert.deepEqual(set(ip!, 'endpoints-3').filter((e) => e.includes(' 30100 ')), [0, 1, 2].map((i) => `10.0.0.11 tcp 30100 ${sc(i)} 10.244.4.${i + 2} 8080`), 'from pods and the node: every endpoint');
  assert.deepEqual(set(ip!, 'external-local'), ['10.0.0.11 tcp 30090', '10.0.0.11 tcp 30100'], "the node's traffic to them is masqueraded; not a frontend without any endpoint");
  assert.equal(set(ip!, 'endpoints-2').filter((e) => e.includes(' 30110 ')).every((e) => !e.includes(` ${sc(0)} `)), true, 'no short-circuit for the Cluster policy');
  // two rules per short-circuit count (pods by the cluster CIDRs, the node by fib), each a
  // dnat with numgen offset, before the per-count rules
  const services = ip!.rules.filter((r) => r.chain === 'services-0');
  const numgens = services.flatMap((r, i) => r.exprs.filter((e) => e.type === 'numgen').map((e) => ({ i, ...(e as { modulus: number; offset?: number }) })));
  const offsets = numgens.filter((n) => n.offset).map((n) => n.modulus);
  assert.deepEqual(offsets.sort(), [2, 2, 3, 3]);
  assert.ok(Math.max(...numgens.filter((n) => n.offset).map((n) => n.i)) < Math.min(...numgens.filter((n) => !n.offset).map((n) => n.i)), 'the short-circuit rules come first');
  const sources = services.filter((r) => r.exprs.some((e) => e.type === 'numgen' && (e as { offset?: number }).offset));
  assert.equal(sources.filter((r) => r.exprs.some((e) => e.type === 'fib')).length, 2, 'the node itself');
  assert.equal(sources.filter((r) => r.exprs.some((e) => e.type === 'lookup' && (e as { set?: string }).set === 'cluster-cidrs')).length, 2, 'pods');
  // no cluster CIDR: nothing is pod traffic, the node still short-circuits
  const noCidr = modelContext({ name: 'node-a', addresses: ['10.0.0.11'] }, {});
  const [bare] = nftablesTables([serviceModel(svc('here', { clusterIP: '10.96.0.40', type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ name: 'http', port: 80, nodePort: 30100 }] }), [slice('here', 'here-1', [{ name: 'http', port: 8080 }], [{ ip: '10.244.4.2', node: 'node-b' }])], noCidr)], noCidr).tables;
  const scRules = bare!.rules.filter((r) => r.exprs.some((e) => e.type === 'numgen' && (e as { offset?: number }).offset));
  assert.equal(scRules.length, SHARDS, 'one in each shard');
  assert.ok(scRules[0]!.exprs.some((e) => e.type === 'fib'));
});

test('IPv6 goes to the ip6 table; a frontend two services claim stays the first one, with a warning', () => {
  const v6 = model('v6', 'fd00::10', eps(1, 'fd00:244::'));
  const a = model('a', '10.96.0.50', eps(1, '10.244.5.'));
  const b = serviceModel(svc('b', { clusterIP: '10.96.0.50', ports: [{ name: 'http', port: 80 }] }), [slice('b', 'b-1', [{ name: 'http', port: 9090 }], eps(1, '10.244.6.'))], ctx);
  const { tables, warnings } = nftablesTables([v6, a, b], ctx);
  assert.deepEqual(set(tables[1]!, 'endpoints-1'), ['fd00::10 tcp 80 0 fd00:244::2 8080']);
  assert.equal(tables[1]!.family, 'ip6');
  assert.deepEqual(set(tables[0]!, 'endpoints-1'), ['10.96.0.50 tcp 80 0 10.244.5.2 8080']);
  assert.deepEqual(warnings, [{ service: 'default/b', message: 'clusterIP 10.96.0.50:80/tcp already belongs to default/a:http, ignored' }]);
});

test("the proxier in nftables mode: no IPVS handle, the tables as the engine's only writes; ClientIP affinity as elements of its sets", async () => {
  const { ipvs: _ipvs, ipsets: _ipsets, ...k } = fakeKernel();
  const p = new Proxier(k, { mode: 'nftables', node: { name: 'node-a', addresses: ['10.0.0.11'] }, config: { clusterCIDRs: ['10.244.0.0/16'] } });
  p.onServiceUpdate(svc('web', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }], sessionAffinity: 'ClientIP' }));
  p.onSliceUpdate(slice('web', 'web-1', [{ name: 'http', port: 8080 }], eps(2, '10.244.1.')));
  const r = await p.sync(true);
  assert.deepEqual(r.report.errors, []);
  assert.ok(r.report.nft.writes > 0);
  assert.equal(r.report.ipvs.writes + r.report.addresses.writes, 0);
  assert.deepEqual(r.summary.warnings, []);
  assert.equal(r.model, undefined, 'no IPVS translation in nftables mode');
  const l = await k.nft.list();
  const els = (name: string) => l.sets.find((s) => s.family === 'ip' && s.name === name)!.elements.map((e) => e.key.join(' ')).sort();
  assert.deepEqual(els('affinity-services'), ['10.96.0.10 tcp 80']);
  assert.deepEqual(els('affinity-10800s'), ['10.96.0.10 tcp 80'], "kube-proxy's default timeout, 3 hours");
  assert.deepEqual(els('affinity-endpoints'), ['10.96.0.10 tcp 80 10.244.1.2 8080', '10.96.0.10 tcp 80 10.244.1.3 8080']);
  const [ip] = (await k.nft.list()).tables.filter((t) => t.family === 'ip');
  assert.equal(ip?.name, 'ipvsync');
  assert.equal((await p.sync(true)).report.nft.writes, 0, 'a resync writes nothing');
});

/** One ClusterIP service with two endpoints elsewhere. */
const feedWeb = (p: Proxier) => {
  p.onServiceUpdate(svc('web', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }] }));
  p.onSliceUpdate(slice('web', 'web-1', [{ name: 'http', port: 8080 }], eps(2, '10.244.1.')));
};

test('switching from the IPVS data plane to the nftables one removes what the IPVS one made, and nothing else; a missing VIP link is not created', async () => {
  const k = fakeKernel();
  const node = { name: 'node-a', addresses: ['10.0.0.11'] };
  const ipvsMode = new Proxier(k, { node, config: {} });
  feedWeb(ipvsMode);
  assert.deepEqual((await ipvsMode.sync(true)).report.errors, []);
  // foreign: a virtual server and an address on the VIP link someone else made
  await k.ipvs.apply([{ op: 'addService', service: { protocol: 'tcp', address: '192.168.77.1', port: 9000, scheduler: 'rr' } }]);
  await k.links.apply([{ op: 'addAddr', link: 'kube-ipvs0', address: '10.96.99.1/32' }]);
  assert.equal((await k.ipvs.services()).length, 2);
  assert.deepEqual((await k.links.addresses({ link: 'kube-ipvs0' })).map((a) => a.address).sort(), ['10.96.0.10', '10.96.99.1']);

  const nftMode = new Proxier(k, { mode: 'nftables', node, config: {} });
  feedWeb(nftMode);
  const r = await nftMode.sync(true);
  assert.deepEqual(r.report.errors, []);
  assert.deepEqual((await k.ipvs.services()).map((s) => `${s.address}:${s.port}`), ['192.168.77.1:9000'], 'only the foreign virtual server is left');
  assert.deepEqual((await k.links.addresses({ link: 'kube-ipvs0' })).map((a) => a.address), ['10.96.99.1'], 'the VIP went, the foreign address stays');
  assert.ok(await k.links.get('kube-ipvs0'), 'the link stays');
  const ip = (await k.nft.list()).tables.filter((t) => t.family === 'ip');
  assert.deepEqual(ip.map((t) => t.name), ['ipvsync']);
  assert.ok((await k.nft.list()).sets.some((s) => s.table === 'ipvsync' && s.name === 'endpoints-2-0'), 'the nftables data plane replaced the glue');
  assert.equal((await nftMode.sync(true)).report.addresses.writes, 0);

  // A node that never ran IPVS mode: no VIP link appears.
  const fresh = fakeKernel();
  const p = new Proxier(fresh, { mode: 'nftables', node, config: {} });
  feedWeb(p);
  assert.deepEqual((await p.sync(true)).report.errors, []);
  assert.equal(await fresh.links.get('kube-ipvs0'), null);
});

test("someone else's chain and set in the proxy's table survive resyncs, a rebuild of the table's static part and a switch of data plane", async () => {
  const k = fakeKernel();
  const node = { name: 'node-a', addresses: ['10.0.0.11'] };
  const nftMode = new Proxier(k, { mode: 'nftables', node, config: {} });
  feedWeb(nftMode);
  assert.deepEqual((await nftMode.sync(true)).report.errors, []);
  // theirs: a chain with a rule using their set, in ipvsync's table
  const theirSet = { family: 'ip' as const, table: 'ipvsync', name: 'their-set', key: ['ipv4_addr' as const] };
  const planted = await k.nft.commit(new NftTransaction()
    .addChain({ family: 'ip', table: 'ipvsync', name: 'theirs' })
    .addSet(theirSet)
    .addElements(theirSet, [{ key: ['192.0.2.7'] }])
    .addRule({ family: 'ip', table: 'ipvsync', chain: 'theirs', exprs: R.rule(R.inSet([R.F.ipSaddr], 'their-set'), R.drop()) }));
  assert.ok(planted.ok);
  const theirs = async () => {
    const l = await k.nft.list({ table: 'ipvsync' });
    return {
      chains: l.chains.filter((c) => c.family === 'ip' && c.name === 'theirs').map((c) => c.name),
      rules: l.rules.filter((r) => r.family === 'ip' && r.chain === 'theirs').length,
      set: l.sets.filter((s) => s.family === 'ip' && s.name === 'their-set').map((s) => s.elements.map((e) => e.key.join())),
    };
  };
  const before = await theirs();
  assert.deepEqual(before, { chains: ['theirs'], rules: 1, set: [['192.0.2.7']] });

  // a full resync: nothing to write, theirs untouched
  const resync = await nftMode.sync(true);
  assert.deepEqual([resync.report.errors, resync.report.nft.writes], [[], 0]);
  assert.deepEqual(await theirs(), before);
  // a LoadBalancer with source ranges adds a firewall chain: the static part is rebuilt
  nftMode.onServiceUpdate(svc('lb', { type: 'LoadBalancer', clusterIP: '10.96.0.20', ports: [{ name: 'http', port: 80 }], loadBalancerSourceRanges: ['203.0.113.0/24'] }, { ingress: [{ ip: '198.51.100.9' }] }));
  nftMode.onSliceUpdate(slice('lb', 'lb-1', [{ name: 'http', port: 8080 }], eps(1, '10.244.2.')));
  const rebuilt = await nftMode.sync(true);
  assert.deepEqual(rebuilt.report.errors, []);
  assert.ok((await k.nft.list({ table: 'ipvsync' })).chains.some((c) => c.family === 'ip' && c.name.startsWith('fw-')), 'the firewall chain is there');
  assert.deepEqual(await theirs(), before, 'theirs survived the rebuild');
  // the IPVS data plane replaces the nftables one's chains and sets, not theirs
  const ipvsMode = new Proxier(k, { node, config: {} });
  feedWeb(ipvsMode);
  assert.deepEqual((await ipvsMode.sync(true)).report.errors, []);
  const l = await k.nft.list({ table: 'ipvsync' });
  assert.ok(!l.sets.some((s) => s.name.startsWith('endpoints-')), 'the nftables data plane is gone');
  assert.ok(l.sets.some((s) => s.family === 'ip' && s.name === 'vips'), 'the glue is there');
  assert.deepEqual(await theirs(), before, 'theirs survived the switch');
});

test("every chain and set either data plane makes is named as ipvsync's (PROXY_TABLE_OWNED); nothing else is", async () => {
  const owned = (n: string) => PROXY_TABLE_OWNED.names.includes(n) || PROXY_TABLE_OWNED.prefixes.some((p) => n.startsWith(p));
  const k = fakeKernel();
  const node = { name: 'node-a', addresses: ['10.0.0.11', '2001:db8::11'] };
  const feed = (p: Proxier) => {
    p.onServiceUpdate(svc('a', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }], sessionAffinity: 'ClientIP' }));
    p.onSliceUpdate(slice('a', 'a-1', [{ name: 'http', port: 8080 }], eps(2, '10.244.1.')));
    p.onServiceUpdate(svc('lb', { type: 'LoadBalancer', clusterIP: '10.96.0.20', ports: [{ name: 'http', port: 80 }], loadBalancerSourceRanges: ['203.0.113.0/24'] }, { ingress: [{ ip: '198.51.100.9' }] }));
    p.onSliceUpdate(slice('lb', 'lb-1', [{ name: 'http', port: 8080 }], eps(3, '10.244.2.', 'node-a')));
  };
  const names = new Set<string>();
  for (const mode of ['nftables', 'ipvs'] as const) {
    const p = new Proxier(k, { mode, node, config: { bindMode: mode === 'ipvs' ? 'route' : undefined } as never });
    feed(p);
    assert.deepEqual((await p.sync(true)).report.errors, []);
    const l = await k.nft.list({ table: 'ipvsync' });
    for (const x of [...l.chains, ...l.sets]) names.add(x.name);
  }
  assert.ok(names.has('vips') && names.has('endpoints-2-0') && names.has('hairpin-15') && names.has('services-15') && names.has('service-shards') && [...names].some((n) => n.startsWith('fw-')) && [...names].some((n) => n.startsWith('affinity-')), [...names].join(' '));
  assert.deepEqual([...names].filter((n) => !owned(n)), []);
  assert.ok(!owned('theirs') && !owned('their-set'));
});

test('service CIDRs: an address in them no Service holds is dropped after the cluster-IP checks; the ServiceCIDR objects win over the configuration, and their change rebuilds', async () => {
  const k = fakeKernel();
  const p = new Proxier(k, { mode: 'nftables', node: { name: 'node-a', addresses: ['10.0.0.11'] }, config: { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16', 'fd00:96::/112'] } });
  p.onServiceUpdate(svc('web', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }] }));
  assert.deepEqual((await p.sync(true)).report.errors, []);
  const tables = async () => (await k.nft!.list()).sets.filter((s) => s.name === 'service-cidrs').map((s) => `${s.family} ${s.elements!.map((e) => e.key[0]).join(',')}`).sort();
  assert.deepEqual(await tables(), ['ip 10.96.0.0/16', 'ip6 fd00:96::/112'], 'the configuration');
  // the rule: the last of the checks after the dnat (cluster-IP ports refused first)
  const checks = (await k.nft!.list()).rules.filter((r) => r.family === 'ip' && r.chain === 'endpoints-check');
  const last = checks.at(-1)!;
  assert.ok(last.exprs.some((e) => e.type === 'lookup' && (e as { set: string }).set === 'service-cidrs'));
  assert.deepEqual(last.exprs.at(-1), { type: 'immediate', dreg: 0, verdict: { code: 'drop' } });
  // ServiceCIDR objects: theirs, over the configuration's; a change is synced as a rebuild
  assert.equal(p.onServiceCIDR({ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: 'kubernetes' }, spec: { cidrs: ['10.100.0.0/16'] } }), true);
  assert.equal(p.onServiceCIDR({ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: 'kubernetes' }, spec: { cidrs: ['10.100.0.0/16'] } }), false, 'the same again: no change');
  assert.equal(p.onServiceCIDR({ apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name: 'more' }, spec: { cidrs: ['10.101.0.0/16', 'fd00:101::/112'] } }), true);
  assert.deepEqual((await p.sync(false)).report.errors, []);
  assert.deepEqual(await tables(), ['ip 10.100.0.0/16,10.101.0.0/16', 'ip6 fd00:101::/112']);
  // the last one gone: the configuration's again
  p.onServiceCIDRDelete('kubernetes');
  assert.equal(p.onServiceCIDRDelete('more'), true);
  assert.deepEqual((await p.sync(false)).report.errors, []);
  assert.deepEqual(await tables(), ['ip 10.96.0.0/16', 'ip6 fd00:96::/112']);
  // no configuration and no objects: an empty set (nothing dropped)
  const bare = fakeKernel();
  const q = new Proxier(bare, { mode: 'nftables', node: { name: 'node-a', addresses: ['10.0.0.11'] }, config: {} });
  assert.deepEqual((await q.sync(true)).report.errors, []);
  assert.deepEqual((await bare.nft!.list()).sets.filter((s) => s.name === 'service-cidrs').map((s) => s.elements?.length ?? 0), [0, 0]);
});

test("stale UDP flows: a frontend's first endpoints flush its address's flows, a removed endpoint its own, a service gone every endpoint's; TCP's stay", () => {
  const udp = { ports: [{ name: 'http', port: 53, protocol: 'UDP' }] };
  const dns = (endpoints: ReturnType<typeof eps>) => serviceModel(svc('dns', { clusterIP: '10.96.0.53', ...udp }), [slice('dns', 'dns-1', [{ name: 'http', port: 5353, protocol: 'UDP' }], endpoints)], ctx);
  const web = model('web', '10.96.0.10', eps(2, '10.244.1.'));
  const plane = new NftablesPlane();
  const name = dns([]).name;
  const first = plane.rebuild([name, web.name], (n) => (n === name ? dns(eps(2, '10.244.5.')) : web), ctx, '');
  const flow = (replySrc: string, replySport?: number) => ({ family: 'inet', proto: 'udp', origDst: '10.96.0.53', origDport: 53, replySrc, ...(replySport ? { replySport } : {}) });
  assert.deepEqual(first.staleFlows, [flow('10.96.0.53')], 'a first step: the flows to the UDP frontend with endpoints, none for TCP');
  const fewer = plane.patch([name], () => dns(eps(1, '10.244.5.')));
  assert.deepEqual(fewer.staleFlows, [flow('10.244.5.3', 5353)]);
  const gone = plane.patch([name], () => undefined);
  assert.deepEqual(gone.staleFlows, [flow('10.244.5.2', 5353)]);
  const back = plane.patch([name], () => dns(eps(1, '10.244.6.')));
  assert.deepEqual(back.staleFlows, [flow('10.96.0.53')], 'a service new to the plane in a patch: as in a first step');
});
