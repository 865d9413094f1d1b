// Proxier.warnings(): the warnings of the step the data plane took last, which the CLI prints
// when a sync throws in the engine. Each mode's own: in nftables mode no IPVS scheduler
// annotation is read, so none of its warnings appears.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { slice, svc } from '../fixtures/kube/builders.js';
import { Proxier } from '../../src/proxy/proxier.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import { ANNOTATION_SCHEDULER } from '../../src/kube/types.js';

const node = { name: 'node-a', addresses: ['10.0.0.11'] };
const config = { clusterCIDRs: ['10.244.0.0/16'] };

for (const mode of ['nftables', 'ipvs'] as const) {
  test(`${mode} mode: after a sync that threw in the engine, warnings() are that mode's step's`, async () => {
    const k = fakeKernel();
    const p = new Proxier(k, { mode, node, config });
    assert.deepEqual(p.warnings(), [], 'no step yet');
    // a scheduler annotation the IPVS data plane does not know, and two services on one cluster IP
    p.onServiceUpdate(svc('a', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }] }, { annotations: { [ANNOTATION_SCHEDULER]: 'bogus' } }));
    p.onServiceUpdate(svc('b', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }] }));
    p.onSliceUpdate(slice('a', 'a-1', [{ name: 'http', port: 8080 }], [{ ip: '10.244.1.2', node: 'node-b' }]));
    const broken = new Error('the kernel went away');
    const fail = async (): Promise<never> => {
      throw broken;
    };
    if (mode === 'nftables') k.nft.commit = fail;
    else k.ipvs.apply = fail;
    await assert.rejects(p.sync(true), broken);
    const messages = p.warnings().map((w) => `${w.service}: ${w.message}`);
    assert.ok(messages.some((m) => m.startsWith('default/b: ') && m.includes('already belongs to')), messages.join('\n'));
    const scheduler = messages.filter((m) => m.includes(ANNOTATION_SCHEDULER));
    assert.equal(scheduler.length, mode === 'ipvs' ? 1 : 0, messages.join('\n'));
  });
}
