// The in-memory kernels stop as the real batch does (test/host/stop-on-error.test.ts,
// test/kernel/ipvs-api.test.ts): [ok, EEXIST, ok] with stopOnError (the default) reports
// [ok, error, not-sent] and leaves the third op out; without it the third is applied.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { FakeIpSets, FakeLinks, FakeRoutes } from '../../src/testing/fake-kernel.js';
import type { ApplyResult, BatchOptions } from '../../src/kernel/batch.js';

const statuses = (r: ApplyResult) => Array.from({ length: r.size }, (_, i) => r.status(i));

async function both(
  name: string,
  fresh: () => Promise<{ apply: (o: BatchOptions) => Promise<ApplyResult>; present: () => Promise<string[]> }>,
  first: string,
  third: string,
  code: string,
): Promise<void> {
  await test(name, async () => {
    const stop = await fresh();
    const r = await stop.apply({});
    assert.deepEqual(statuses(r), ['ok', 'error', 'not-sent']);
    assert.deepEqual(r.errors.map((e) => [e.index, e.code]), [[1, code]]);
    assert.deepEqual(await stop.present(), [first]);

    const all = await fresh();
    const a = await all.apply({ stopOnError: false });
    assert.deepEqual(statuses(a), ['ok', 'error', 'ok']);
    assert.deepEqual((await all.present()).sort(), [first, third].sort());
  });
}

await both(
  'FakeIpvs',
  async () => {
    const ipvs = new FakeIpvs();
    const svc = (i: number) => ({ op: 'addService' as const, service: { protocol: 'tcp' as const, address: `10.3.0.${i}`, port: 80, scheduler: 'rr' } });
    return {
      apply: (o) => ipvs.apply([svc(1), svc(1), svc(3)], o),
      present: async () => (await ipvs.services()).map((s) => ('address' in s ? s.address! : '')),
    };
  },
  '10.3.0.1',
  '10.3.0.3',
  'EEXIST',
);

await both(
  'FakeIpSets',
  async () => {
    const sets = new FakeIpSets();
    assert.ok((await sets.apply([{ op: 'create', name: 's', type: 'hash:ip' }])).ok);
    const add = (ip: string) => ({ op: 'add' as const, name: 's', members: [{ ip }] });
    return {
      apply: (o) => sets.apply([add('10.0.0.1'), add('10.0.0.1'), add('10.0.0.3')], o),
      present: async () => ((await sets.list('s'))[0]?.members ?? []).map((m) => m.ip!),
    };
  },
  '10.0.0.1',
  '10.0.0.3',
  'IPSET_ERR_EXIST',
);

await both(
  'FakeLinks',
  async () => {
    const links = new FakeLinks();
    assert.ok((await links.apply([{ op: 'addLink', name: 'soe0', kind: 'dummy' }])).ok);
    const add = (address: string) => ({ op: 'addAddr' as const, link: 'soe0', address });
    return {
      apply: (o) => links.apply([add('10.50.0.1/32'), add('10.50.0.1/32'), add('10.50.0.3/32')], o),
      present: async () => (await links.addresses({ link: 'soe0' })).map((a) => `${a.address}/${a.prefixlen}`),
    };
  },
  '10.50.0.1/32',
  '10.50.0.3/32',
  'EEXIST',
);

await both(
  'FakeRoutes',
  async () => {
    const routes = new FakeRoutes();
    const add = (dst: string) => ({ op: 'addRoute' as const, type: 'local' as const, dst, dev: 'lo', protocol: 249 });
    return {
      apply: (o) => routes.apply([add('10.96.0.0/16'), add('10.96.0.0/16'), add('10.97.0.0/16')], o),
      present: async () => (await routes.list({ protocol: 249 })).map((r) => r.dst),
    };
  },
  '10.96.0.0/16',
  '10.97.0.0/16',
  'EEXIST',
);
