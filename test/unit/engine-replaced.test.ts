// A desired service list declared as the last one with a few entries replaced (withReplaced,
// as translate's patch makes it): the engine's plan looks at those entries alone, not at every
// service of the list (50k+ at scale), and applies the same change.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Engine } from '../../src/engine/engine.js';
import { serviceKey, type DesiredService } from '../../src/engine/ipvs-model.js';
import { withReplaced } from '../../src/engine/sorted.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { cluster } from '../helpers/desired.js';

test('an incremental plan over a list declared as the last with entries replaced reads only those entries', async () => {
  for (const declared of [true, false]) {
    const ipvs = new FakeIpvs();
    const e = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'], desiredImmutable: true });
    const services = cluster(300);
    assert.deepEqual((await e.sync({ services })).errors, []);
    const next = services.slice();
    const moved = { ...services[7]!, destinations: [{ address: '10.244.9.9', port: 8080, forward: 'masq' as const, weight: 1 }] } as DesiredService;
    next[7] = moved;
    const read = new Set<number>();
    const counted = new Proxy(next, { get: (t, k, r) => (typeof k === 'string' && /^\d+$/.test(k) && read.add(Number(k)), Reflect.get(t, k, r)) });
    if (declared) withReplaced(counted, services, [7]);
    const r = await e.sync({ services: counted }, new Set([serviceKey(moved)]));
    assert.deepEqual(r.errors, []);
    assert.deepEqual(r.ipvs.ops, { addDestination: 1, deleteDestination: 2 });
    if (declared) assert.deepEqual([...read], [7], 'entries of the list read');
    else assert.ok(read.size >= 300, `undeclared: every entry is looked at (${read.size})`);
    const got = await ipvs.service({ protocol: 'tcp', address: '10.96.0.7', port: 80 }, { withDestinations: true });
    assert.deepEqual(got?.destinations?.map((d) => d.address), ['10.244.9.9']);
  }
});
