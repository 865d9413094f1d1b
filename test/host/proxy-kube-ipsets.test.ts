// kube-proxy-compatible ipset mode on the machine's own kernel: the sets kube-proxy's IPVS mode
// maintains, with its names and types, filled from the example manifests; cross-checked with
// `ipset save`; a resync writes nothing; foreign sets survive.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { Engine } from '../../src/engine/engine.js';
import { IpSets } from '../../src/kernel/ipsets.js';
import { loadManifests } from '../../src/kube/manifests.js';
import { translate } from '../../src/proxy/ipvs/plane.js';
import { kubeProxyIpSets, KUBE_IPSET_PREFIX } from '../../src/proxy/ipvs/kube-ipsets.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';

const ipset = (...a: string[]) => execFileSync('ipset', a, { encoding: 'utf8' });

test("kube-proxy's ipsets: names, types and members as kube-proxy's IPVS mode; resync writes nothing", async () => {
  ipset('create', 'OTHER-SET', 'hash:ip');
  try {
    const m = await loadManifests([join(process.cwd(), 'test', 'fixtures', 'kube', 'example')]);
    const model = translate({ services: m.services, endpointSlices: m.endpointSlices, node: { name: 'n1', addresses: ['10.0.0.11'] }, config: {} });
    const engine = new Engine({ ipvs: new FakeIpvs(), ipsets: await IpSets.open() }, { ipsetPrefix: KUBE_IPSET_PREFIX });
    const r = await engine.sync({ services: [], ipsets: kubeProxyIpSets(model.glue) });
    assert.deepEqual(r.errors, []);
    const names = ipset('list', '-n').trim().split('\n').sort();
    for (const n of ['KUBE-CLUSTER-IP', 'KUBE-LOOP-BACK', 'KUBE-NODE-PORT-TCP', 'KUBE-IPVS-IPS', 'KUBE-6-CLUSTER-IP', 'KUBE-LOAD-BALANCER-SOURCE-CIDR', 'KUBE-6-LOAD-BALANCER-SOURCE-CID'])
      assert.ok(names.includes(n), `${n} exists`);
    assert.ok(names.includes('OTHER-SET'), 'a foreign set survives');
    const save = ipset('save', 'KUBE-CLUSTER-IP');
    assert.match(save, /^create KUBE-CLUSTER-IP hash:ip,port family inet/m);
    assert.match(save, /^add KUBE-CLUSTER-IP 10\.105\.250\.129,tcp:80$/m, 'nginx-basic');
    assert.match(ipset('save', 'KUBE-NODE-PORT-TCP'), /^create KUBE-NODE-PORT-TCP bitmap:port range 0-65535/m);
    assert.match(ipset('save', 'KUBE-NODE-PORT-TCP'), /^add KUBE-NODE-PORT-TCP 30080$/m);
    const again = await engine.sync({ services: [], ipsets: kubeProxyIpSets(model.glue) });
    assert.equal(again.ipsets.writes, 0);
  } finally {
    for (const n of ipset('list', '-n').trim().split('\n')) if (n) ipset('destroy', n);
  }
});
