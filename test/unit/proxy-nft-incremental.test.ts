// The nftables data plane between syncs: a change of a few services is patched into the
// tables (element changes, a new endpoint count's map and rule, a firewall chain) with no
// listing, the same messages at any table size, and the kernel ends up holding exactly what a
// sync from nothing would program. Runs the Proxier against the in-memory kernel.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { slice, svc } from '../fixtures/kube/builders.js';
import { Proxier } from '../../src/proxy/proxier.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import type { EngineKernel } from '../../src/engine/engine.js';
import { SHARDS } from '../../src/proxy/nftables/table.js';
import { logicalElements } from '../helpers/nft-shards.js';
import { NftTransaction } from '../../src/kernel/nftables.js';

const node = { name: 'node-a', addresses: ['10.0.0.11'] };
const config = { clusterCIDRs: ['10.244.0.0/16'] };
const eps = (n: number, base: string) => Array.from({ length: n }, (_, i) => ({ ip: `${base}${i + 2}`, node: 'node-b' }));
const ip = (i: number) => `10.96.${(i >> 8) & 255}.${i & 255}`;

function feed(p: Proxier, n: number): void {
  for (let i = 0; i < n; i++) {
    p.onServiceUpdate(svc(`s${i}`, { clusterIP: ip(i + 256), ports: [{ name: 'http', port: 80 }] }));
    // an endpoint address per service (a pod is behind one service here)
    p.onSliceUpdate(slice(`s${i}`, `s${i}-1`, [{ name: 'http', port: 8080 }], eps(3, `10.${244 + (i >> 8)}.${i & 255}.`)));
  }
}

/** What a new proxier (a new process) would write to this kernel for the same objects: nothing
 *  when the kernel holds exactly the tables. */
async function writesFromNothing(k: EngineKernel, objects: (p: Proxier) => void): Promise<number> {
  const fresh = new Proxier(k, { mode: 'nftables', node, config });
  objects(fresh);
  const plan = await fresh.plan(true);
  return plan.plan.nft?.ops.length ?? 0;
}

test('one endpoint changed: four element writes (the endpoint map and the hairpin set) and no listing, the same at 100 and 2,000 services; the kernel then holds what a sync from nothing programs', async () => {
  const writes: string[][] = [];
  for (const n of [100, 2000]) {
    const k = fakeKernel();
    const p = new Proxier(k, { mode: 'nftables', node, config });
    feed(p, n);
    assert.deepEqual((await p.sync(true)).report.errors, []);
    const dumps = k.nft.dumps;
    const moved = eps(3, '10.244.7.');
    moved[1] = { ip: '10.244.99.9', node: 'node-b' };
    p.onSliceUpdate(slice('s7', 's7-1', [{ name: 'http', port: 8080 }], moved));
    const r = await p.sync(false);
    assert.deepEqual(r.report.errors, []);
    assert.equal(k.nft.dumps, dumps, 'no listing');
    writes.push(Object.entries(r.report.nft.ops).map(([op, c]) => `${op} ${c}`).sort());
    assert.equal(
      await writesFromNothing(k, (q) => {
        feed(q, n);
        q.onSliceUpdate(slice('s7', 's7-1', [{ name: 'http', port: 8080 }], moved));
      }),
      0,
    );
    // A resync (full) writes nothing either, and does not list: nobody committed since.
    const listed = k.nft.dumps;
    const full = await p.sync(true);
    assert.equal(full.report.nft.writes, 0);
    assert.equal(k.nft.dumps, listed);
  }
  assert.deepEqual(writes[0], ['add-elements 2', 'delete-elements 2'], 'a delete and an add of the endpoint map element, and of the hairpin element');
  assert.deepEqual(writes[1], writes[0], 'the same messages at 2,000 services');
});

test('a new endpoint count adds its map and rule; services added and removed, and a frontend handed over to another service, all without a listing of the elements', async () => {
  const k = fakeKernel();
  const p = new Proxier(k, { mode: 'nftables', node, config });
  feed(p, 20);
  await p.sync(true);
  const dumps = k.nft.dumps;
  // s3 scales to 7 endpoints (a count no service had); s4 goes; t1 comes
  p.onSliceUpdate(slice('s3', 's3-1', [{ name: 'http', port: 8080 }], eps(7, '10.244.3.')));
  p.onServiceDelete('default/s4');
  p.onSliceDelete('default/s4-1');
  p.onServiceUpdate(svc('t1', { clusterIP: '10.96.9.1', ports: [{ name: 'http', port: 80 }] }));
  p.onSliceUpdate(slice('t1', 't1-1', [{ name: 'http', port: 8080 }], eps(1, '10.244.200.')));
  const r = await p.sync(false);
  assert.deepEqual(r.report.errors, []);
  assert.equal(k.nft.dumps, dumps, 'no listing');
  assert.equal(r.report.nft.ops['add-set'], 2 * SHARDS, 'endpoints-7 and endpoints-1, a map per shard');
  assert.equal(r.report.nft.ops['flush-chain'], SHARDS, "each shard's services chain refilled with the two new dnat rules");
  const sets = (await k.nft.list()).sets.filter((s) => s.family === 'ip' && s.table === 'ipvsync');
  assert.ok(logicalElements(sets, 'endpoints-7') && logicalElements(sets, 'endpoints-1'));
  const objects = (q: Proxier) => {
    feed(q, 20);
    q.onSliceUpdate(slice('s3', 's3-1', [{ name: 'http', port: 8080 }], eps(7, '10.244.3.')));
    q.onServiceDelete('default/s4');
    q.onSliceDelete('default/s4-1');
    q.onServiceUpdate(svc('t1', { clusterIP: '10.96.9.1', ports: [{ name: 'http', port: 80 }] }));
    q.onSliceUpdate(slice('t1', 't1-1', [{ name: 'http', port: 8080 }], eps(1, '10.244.200.')));
  };
  // A fresh process builds its counts in another order, so its rules differ: compare elements.
  const elements = async () => {
    const l = await k.nft.list();
    return l.sets.filter((s) => s.table === 'ipvsync').flatMap((s) => (s.elements ?? []).map((e) => `${s.family} ${s.name} ${JSON.stringify(e.key)} ${JSON.stringify(e.data ?? null)}`)).sort();
  };
  const got = await elements();
  const k2 = fakeKernel();
  const q = new Proxier(k2, { mode: 'nftables', node, config });
  objects(q);
  await q.sync(true);
  const l2 = await k2.nft.list();
  const want = l2.sets.filter((s) => s.table === 'ipvsync').flatMap((s) => (s.elements ?? []).map((e) => `${s.family} ${s.name} ${JSON.stringify(e.key)} ${JSON.stringify(e.data ?? null)}`)).sort();
  assert.deepEqual(got, want);

  // Two services claim 10.96.9.1:80: t1 has it; t0 (first by name) comes and takes it over.
  p.onServiceUpdate(svc('t0', { clusterIP: '10.96.9.1', ports: [{ name: 'http', port: 80 }] }));
  p.onSliceUpdate(slice('t0', 't0-1', [{ name: 'http', port: 9090 }], eps(1, '10.244.201.')));
  const h = await p.sync(false);
  assert.deepEqual(h.report.errors, []);
  assert.deepEqual(h.summary.warnings, [{ service: 'default/t1', message: 'clusterIP 10.96.9.1:80/tcp already belongs to default/t0:http, ignored' }]);
  const ep1 = logicalElements((await k.nft.list()).sets.filter((s) => s.family === 'ip'), 'endpoints-1')!;
  assert.deepEqual(ep1.map((e) => e.data), [['10.244.201.2', 9090]], 't0 owns the frontend now');
  // t0 goes: t1 gets it back
  p.onServiceDelete('default/t0');
  p.onSliceDelete('default/t0-1');
  const back = await p.sync(false);
  assert.deepEqual(back.summary.warnings, []);
  const ep1b = logicalElements((await k.nft.list()).sets.filter((s) => s.family === 'ip'), 'endpoints-1')!;
  assert.deepEqual(ep1b.map((e) => e.data), [['10.244.200.2', 8080]]);
});

test('loadBalancerSourceRanges: a firewall chain per load-balancer frontend, made and removed with it; its endpoints change without touching it', async () => {
  const k = fakeKernel();
  const p = new Proxier(k, { mode: 'nftables', node, config });
  const lb = (ranges: string[]) =>
    svc('lb', { type: 'LoadBalancer', clusterIP: '10.96.0.50', ports: [{ name: 'http', port: 80, nodePort: 30050 }], loadBalancerSourceRanges: ranges }, { ingress: [{ ip: '192.0.2.10' }] });
  p.onServiceUpdate(lb(['198.51.100.0/24', '10.0.0.0/8']));
  p.onSliceUpdate(slice('lb', 'lb-1', [{ name: 'http', port: 8080 }], eps(2, '10.244.1.')));
  assert.deepEqual((await p.sync(true)).report.errors, []);
  const fw = async () => {
    const l = await k.nft.list();
    const chains = l.chains.filter((c) => c.family === 'ip' && c.table === 'ipvsync' && c.name.startsWith('fw-')).map((c) => c.name);
    const elements = l.sets.find((s) => s.family === 'ip' && s.table === 'ipvsync' && s.name === 'firewall')!.elements ?? [];
    const rules = l.rules.filter((r) => r.family === 'ip' && chains.includes(r.chain)).length;
    return { chains, elements: elements.map((e) => `${e.key.join(' ')} -> ${e.verdict?.chain}`), rules };
  };
  const one = await fw();
  assert.equal(one.chains.length, 1);
  assert.deepEqual(one.elements, [`192.0.2.10 tcp 80 -> ${one.chains[0]}`]);
  assert.equal(one.rules, 4, 'two ranges, the node (10.0.0.11 is in 10.0.0.0/8), then drop');
  const dumps = k.nft.dumps;
  p.onSliceUpdate(slice('lb', 'lb-1', [{ name: 'http', port: 8080 }], eps(3, '10.244.1.')));
  const r = await p.sync(false);
  assert.equal(r.report.nft.ops['add-chain'] ?? 0, 0);
  assert.equal(r.report.nft.ops['flush-chain'] ?? 0, SHARDS, "only the shards' services chains (a new count)");
  p.onServiceUpdate(lb([]));
  const gone = await p.sync(false);
  assert.deepEqual(gone.report.errors, []);
  assert.equal(gone.report.nft.ops['delete-chain'], 1);
  assert.equal(k.nft.dumps, dumps, 'no listing');
  assert.deepEqual(await fw(), { chains: [], elements: [], rules: 0 });
});

test('UDP: the flows of an endpoint that left its frontend are deleted after the sync, and those of a frontend that had none once it has one', async () => {
  const k = fakeKernel();
  const p = new Proxier(k, { mode: 'nftables', node, config });
  p.onServiceUpdate(svc('dns', { clusterIP: '10.96.0.53', ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] }));
  p.onSliceUpdate(slice('dns', 'dns-1', [{ name: 'dns', port: 5353, protocol: 'UDP' }], []));
  await p.sync(true);
  p.onSliceUpdate(slice('dns', 'dns-1', [{ name: 'dns', port: 5353, protocol: 'UDP' }], eps(2, '10.244.5.')));
  const r1 = await p.sync(false);
  assert.deepEqual(k.conntrack.deletes, [{ family: 'inet', proto: 'udp', origDst: '10.96.0.53', origDport: 53, replySrc: '10.96.0.53' }]);
  assert.deepEqual(r1.report.errors, []);
  k.conntrack.deletes.length = 0;
  p.onSliceUpdate(slice('dns', 'dns-1', [{ name: 'dns', port: 5353, protocol: 'UDP' }], eps(1, '10.244.5.')));
  await p.sync(false);
  assert.deepEqual(k.conntrack.deletes, [{ family: 'inet', proto: 'udp', origDst: '10.96.0.53', origDport: 53, replySrc: '10.244.5.3', replySport: 5353 }]);
  // the service goes, seen by a full sync (built from nothing): its endpoint's flows too
  k.conntrack.deletes.length = 0;
  p.onServiceDelete('default/dns');
  p.onSliceDelete('default/dns-1');
  await p.sync(true);
  assert.deepEqual(k.conntrack.deletes, [{ family: 'inet', proto: 'udp', origDst: '10.96.0.53', origDport: 53, replySrc: '10.244.5.2', replySport: 5353 }]);
});

test('a sync that fails leaves nothing half-known: the next one builds from nothing and lists the kernel', async () => {
  const k = fakeKernel();
  const p = new Proxier(k, { mode: 'nftables', node, config });
  feed(p, 10);
  await p.sync(true);
  // someone deletes the table; the next incremental commit fails
  await k.nft.commit(new NftTransaction().deleteTable({ family: 'ip', name: 'ipvsync' }));
  p.onSliceUpdate(slice('s1', 's1-1', [{ name: 'http', port: 8080 }], eps(2, '10.244.1.')));
  const failed = await p.sync(false);
  assert.ok(failed.report.errors.length > 0);
  const dumps = k.nft.dumps;
  const again = await p.sync(false);
  assert.deepEqual(again.report.errors, []);
  assert.ok(k.nft.dumps > dumps, 'listed');
  assert.equal(
    await writesFromNothing(k, (q) => {
      feed(q, 10);
      q.onSliceUpdate(slice('s1', 's1-1', [{ name: 'http', port: 8080 }], eps(2, '10.244.1.')));
    }),
    0,
  );
});

test('a key two services put (a hairpin endpoint, a cluster IP of two ports) stays until the last of them lets it go', async () => {
  const k = fakeKernel();
  const p = new Proxier(k, { mode: 'nftables', node, config });
  // one pod behind services a and b: one hairpin element (every endpoint has one, whatever its
  // node: kube-proxy masquerades any endpoint that reaches itself)
  const local = [{ ip: '10.244.1.5', node: 'node-a' }];
  const objects = (q: Proxier, services: string[]) => {
    for (const n of services) {
      q.onServiceUpdate(svc(n, { clusterIP: n === 'a' ? '10.96.0.10' : '10.96.0.11', ports: [{ name: 'http', port: 80 }] }));
      q.onSliceUpdate(slice(n, `${n}-1`, [{ name: 'http', port: 8080 }], local));
    }
    // c: one cluster IP for two ports
    q.onServiceUpdate(svc('c', { clusterIP: '10.96.0.12', ports: [{ name: 'http', port: 80 }, { name: 'dns', port: 53, protocol: 'UDP' }] }));
    q.onSliceUpdate(slice('c', 'c-1', [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }], eps(2, '10.244.2.')));
  };
  const elements = async (set: string) => logicalElements((await k.nft.list()).sets.filter((s) => s.family === 'ip' && s.table === 'ipvsync'), set)!.map((e) => e.key.join(' ')).sort();
  const c = ['10.244.2.2 10.244.2.2', '10.244.2.3 10.244.2.3'];
  objects(p, ['a', 'b']);
  assert.deepEqual((await p.sync(true)).report.errors, []);
  assert.deepEqual(await elements('hairpin'), ['10.244.1.5 10.244.1.5', ...c]);
  assert.deepEqual(await elements('cluster-addrs'), ['10.96.0.10', '10.96.0.11', '10.96.0.12']);
  p.onServiceDelete('default/a');
  p.onSliceDelete('default/a-1');
  assert.deepEqual((await p.sync(false)).report.errors, []);
  assert.deepEqual(await elements('hairpin'), ['10.244.1.5 10.244.1.5', ...c], 'b still has it');
  assert.equal(await writesFromNothing(k, (q) => objects(q, ['b'])), 0);
  p.onServiceDelete('default/b');
  p.onSliceDelete('default/b-1');
  assert.deepEqual((await p.sync(false)).report.errors, []);
  assert.deepEqual(await elements('hairpin'), c);
  // c loses a port: its cluster IP stays, for the other, and so do its endpoints' hairpin
  // elements (the same addresses behind both ports)
  p.onServiceUpdate(svc('c', { clusterIP: '10.96.0.12', ports: [{ name: 'http', port: 80 }] }));
  assert.deepEqual((await p.sync(false)).report.errors, []);
  assert.deepEqual(await elements('cluster-addrs'), ['10.96.0.12']);
  assert.deepEqual(await elements('hairpin'), c);
  p.onServiceDelete('default/c');
  assert.deepEqual((await p.sync(false)).report.errors, []);
  assert.deepEqual(await elements('hairpin'), []);
});

test('an endpoint map holds each frontend as one block: a frontend gone from the middle, the last block moved into its place and changed, the kernel holds what a sync from nothing programs', async () => {
  const k = fakeKernel();
  const p = new Proxier(k, { mode: 'nftables', node, config });
  feed(p, 6); // s0..s5, three endpoints each: six blocks of endpoints-3
  assert.deepEqual((await p.sync(true)).report.errors, []);
  p.onServiceDelete('default/s1');
  p.onSliceDelete('default/s1-1');
  assert.deepEqual((await p.sync(false)).report.errors, []);
  // s5's block now sits where s1's was: change one of its endpoints, then drop s2 (a block
  // before it) and give s4 a fourth endpoint (to endpoints-4)
  const s5 = eps(3, `10.244.5.`);
  s5[2] = { ip: '10.244.55.9', node: 'node-b' };
  p.onSliceUpdate(slice('s5', 's5-1', [{ name: 'http', port: 8080 }], s5));
  assert.deepEqual((await p.sync(false)).report.errors, []);
  p.onServiceDelete('default/s2');
  p.onSliceDelete('default/s2-1');
  p.onSliceUpdate(slice('s4', 's4-1', [{ name: 'http', port: 8080 }], eps(4, '10.244.4.')));
  const r = await p.sync(false);
  assert.deepEqual(r.report.errors, []);
  const ep3 = logicalElements((await k.nft.list()).sets.filter((s) => s.family === 'ip'), 'endpoints-3')!;
  assert.deepEqual(ep3.map((e) => `${e.key[0]} ${e.key[3]} ${(e.data as unknown[])[0]}`).sort(), [
    '10.96.1.0 0 10.244.0.2', '10.96.1.0 1 10.244.0.3', '10.96.1.0 2 10.244.0.4',
    '10.96.1.3 0 10.244.3.2', '10.96.1.3 1 10.244.3.3', '10.96.1.3 2 10.244.3.4',
    '10.96.1.5 0 10.244.5.2', '10.96.1.5 1 10.244.5.3', '10.96.1.5 2 10.244.55.9',
  ]);
  assert.equal(
    await writesFromNothing(k, (q) => {
      feed(q, 6);
      for (const n of ['s1', 's2']) q.onServiceDelete(`default/${n}`), q.onSliceDelete(`default/${n}-1`);
      q.onSliceUpdate(slice('s5', 's5-1', [{ name: 'http', port: 8080 }], s5));
      q.onSliceUpdate(slice('s4', 's4-1', [{ name: 'http', port: 8080 }], eps(4, '10.244.4.')));
    }),
    0,
  );
  // a full resync builds the tables from nothing and compares them with the patched ones
  // (the blocks as they were moved; nobody committed since): nothing differs
  const dumps = k.nft.dumps;
  const full = await p.plan(true);
  assert.equal(k.nft.dumps, dumps, 'no listing');
  assert.deepEqual(full.plan.nft?.ops ?? [], []);
});

/** Every non-empty set's elements in the kernel, as text: what the packet path reads (maps
 *  and rules of endpoint counts no longer in use stay empty until a restart). */
async function elementsOf(k: EngineKernel): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const s of (await k.nft!.list()).sets) {
    if (!s.elements?.length || s.dynamic) continue;
    out[`${s.family} ${s.name}`] = s.elements.map((e) => JSON.stringify([e.key, e.data ?? null, e.verdict ?? null])).sort();
  }
  return out;
}

test('Local policy: the short-circuit block follows the cluster endpoints through patches (a local endpoint coming and going, counts changing, affinity), as a sync from nothing programs it', async () => {
  const k = fakeKernel();
  const p = new Proxier(k, { mode: 'nftables', node, config });
  const lb = (affinity = false) =>
    svc('lb', {
      clusterIP: '10.96.0.9',
      type: 'LoadBalancer',
      externalTrafficPolicy: 'Local',
      ports: [{ name: 'http', port: 80, nodePort: 30080 }],
      ...(affinity ? { sessionAffinity: 'ClientIP' } : {}),
    }, { ingress: [{ ip: '192.0.2.10' }] });
  const here = { ip: '10.244.9.50', node: 'node-a' };
  const steps: Array<Array<{ ip: string; node: string }>> = [
    eps(2, '10.244.9.'), // none here: a block of 2 for pods and the node, the rest dropped
    [...eps(2, '10.244.9.'), here], // one here: 1 local, 3 short-circuit
    [here], // only the local one: 1 and 1
    [], // none at all: refused
    eps(4, '10.244.9.'), // and with affinity
  ];
  p.onServiceUpdate(lb());
  for (const [i, endpoints] of steps.entries()) {
    if (i === 4) p.onServiceUpdate(lb(true));
    p.onSliceUpdate(slice('lb', 'lb-1', [{ name: 'http', port: 8080 }], endpoints));
    const r = await p.sync(i === 0);
    assert.deepEqual(r.report.errors, []);
    const fresh = fakeKernel();
    const q = new Proxier(fresh, { mode: 'nftables', node, config });
    q.onServiceUpdate(lb(i === 4));
    q.onSliceUpdate(slice('lb', 'lb-1', [{ name: 'http', port: 8080 }], endpoints));
    assert.deepEqual((await q.sync(true)).report.errors, []);
    assert.deepEqual(await elementsOf(k), await elementsOf(fresh), `step ${i}: the patched tables hold what a sync from nothing programs`);
    const elements = (await k.nft.list()).sets.filter((s) => s.family === 'ip' && s.name.startsWith('endpoints-')).flatMap((s) => s.elements!);
    const sc = elements.filter((e) => e.key[0] === '192.0.2.10' && (e.key[3] as number) >= 0x4000_0000).map((e) => (e.data as unknown[])[0]).sort();
    assert.deepEqual(sc, endpoints.map((e) => e.ip).sort(), `step ${i}: the load-balancer IP's short-circuit block holds every endpoint`);
  }
});
