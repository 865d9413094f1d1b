// ProxierOptions.collectGarbage: a full sync calls it twice, after the desired state is built and
// before the engine diffs, then after the plan is built and before the engine applies (the sync
// thread collects its heap there: a lower peak); an incremental sync never calls it; without the
// option the sync is the same. The nftables data plane never calls it (its step keeps the sets
// that grow with the endpoints as bytes: little garbage).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Proxier, type ProxierOptions } from '../../src/proxy/proxier.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { FakeLinks, FakeNftables } from '../../src/testing/fake-kernel.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const OPTIONS: ProxierOptions = { node: { name: 'node-a', addresses: ['10.0.0.11'] }, config: { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] }, vipLink: 'kube-ipvs0', glue: true };

/** A proxier over 20 services whose engine's plan and apply, and the option, write to `log`. */
function traced(collect: boolean, mode?: 'nftables') {
  const log: string[] = [];
  const kernel = { ipvs: new FakeIpvs(), links: new FakeLinks(), nft: new FakeNftables() };
  const p = new Proxier(kernel, { ...OPTIONS, ...(mode ? { mode } : {}), ...(collect ? { collectGarbage: () => void log.push('collect') } : {}) });
  const plan = p.engine.plan.bind(p.engine);
  const apply = p.engine.apply.bind(p.engine);
  p.engine.plan = async (...a: Parameters<typeof plan>) => {
    log.push('plan');
    return plan(...a);
  };
  p.engine.apply = async (...a: Parameters<typeof apply>) => {
    log.push('apply');
    return apply(...a);
  };
  for (let i = 0; i < 20; i++) {
    p.onServiceUpdate(svc(`s${i}`, { clusterIP: `10.96.0.${i + 1}`, ports: [{ name: 'http', port: 80, protocol: 'TCP' }] }));
    p.onSliceUpdate(slice(`s${i}`, `s${i}-0`, [{ name: 'http', port: 8080 }], [{ ip: `10.244.0.${i + 1}`, node: 'node-a' }]));
  }
  return { p, kernel, log };
}

test('collectGarbage: twice in a full sync, before the diff and before the apply; never in an incremental one', async () => {
  const { p, log } = traced(true);
  const first = await p.sync(false); // the first sync is full: nothing to patch from
  assert.equal(first.report.mode, 'full');
  assert.deepEqual(log.splice(0), ['collect', 'plan', 'collect', 'apply']);
  p.onSliceUpdate(slice('s3', 's3-0', [{ name: 'http', port: 8080 }], [{ ip: '10.244.1.3', node: 'node-a' }]));
  const one = await p.sync(false);
  assert.equal(one.report.mode, 'incremental');
  assert.ok(one.report.ipvs.writes > 0);
  assert.deepEqual(log.splice(0), ['plan', 'apply']);
  const full = await p.sync(true);
  assert.equal(full.report.mode, 'full');
  assert.deepEqual(log.splice(0), ['collect', 'plan', 'collect', 'apply']);
  // a dry run plans without applying: one collection, before the diff
  await p.plan(true);
  assert.deepEqual(log.splice(0), ['collect', 'plan']);
});

test('collectGarbage, nftables: never, in a full sync or an incremental one', async () => {
  const { p, log } = traced(true, 'nftables');
  const first = await p.sync(false);
  assert.equal(first.report.mode, 'full');
  assert.ok(first.report.nft.writes > 0);
  assert.deepEqual(log.splice(0), ['plan', 'apply']);
  p.onSliceUpdate(slice('s3', 's3-0', [{ name: 'http', port: 8080 }], [{ ip: '10.244.1.3', node: 'node-a' }]));
  const one = await p.sync(false);
  assert.equal(one.report.mode, 'incremental');
  assert.ok(one.report.nft.writes > 0);
  assert.deepEqual(log.splice(0), ['plan', 'apply']);
  await p.sync(true);
  assert.deepEqual(log.splice(0), ['plan', 'apply']);
});

test('collectGarbage changes nothing the sync does: the same kernel state and reports as without it', async () => {
  const a = traced(true);
  const b = traced(false);
  for (const x of [a, b]) {
    await x.p.sync(true);
    x.p.onSliceUpdate(slice('s7', 's7-0', [{ name: 'http', port: 8080 }], [{ ip: '10.244.2.7', node: 'node-a' }]));
  }
  const ra = await a.p.sync(false);
  const rb = await b.p.sync(false);
  assert.deepEqual(ra.report.ipvs, rb.report.ipvs);
  assert.deepEqual(await a.kernel.ipvs.services(), await b.kernel.ipvs.services());
  assert.deepEqual((await a.kernel.nft.list()).sets.map((s) => s.elements), (await b.kernel.nft.list()).sets.map((s) => s.elements));
});
