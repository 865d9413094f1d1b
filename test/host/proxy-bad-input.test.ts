// One Service's bad value must not take the node down (issue 43): a LoadBalancer Service whose
// loadBalancerSourceRanges entry has host bits set (the API server accepts it; kube-proxy uses
// its network) next to a good ClusterIP Service, through the Proxier onto the machine's own
// nftables (fake IPVS: the host kernel has none). The good virtual server is programmed and the
// glue table commits, the range as its network, read back with `nft -j`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { Nftables } from '../../src/kernel/nftables.js';
import { Proxier } from '../../src/proxy/proxier.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { FakeLinks } from '../../src/testing/fake-kernel.js';
import { slice, svc } from '../fixtures/kube/builders.js';

interface NftRule {
  rule?: { family: string; table: string; chain: string; expr: Array<Record<string, unknown>> };
}

function ruleset(): NftRule[] {
  return (JSON.parse(execFileSync('nft', ['-j', 'list', 'ruleset'], { encoding: 'utf8' })) as { nftables: NftRule[] }).nftables;
}

test('a LoadBalancer source range with host bits set: the good service is programmed and the glue commits with the range as its network', async () => {
  const nft = await Nftables.open();
  const ipvs = new FakeIpvs();
  const p = new Proxier({ ipvs, links: new FakeLinks(), nft }, { node: { name: 'node-a', addresses: ['10.0.0.11'] }, config: { clusterCIDRs: ['10.244.0.0/16'] } });
  p.onServiceUpdate(svc('good', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }] }));
  p.onSliceUpdate(slice('good', 'good-1', [{ name: 'http', port: 8080 }], [{ ip: '10.244.1.5' }]));
  p.onServiceUpdate(
    svc('lb', { type: 'LoadBalancer', clusterIP: '10.96.0.20', loadBalancerSourceRanges: ['203.0.113.7/24'], ports: [{ name: 'https', port: 443, nodePort: 30443 }] }, { ingress: [{ ip: '198.51.100.7' }] }),
  );
  p.onSliceUpdate(slice('lb', 'lb-1', [{ name: 'https', port: 8443 }], [{ ip: '10.244.1.6' }]));
  try {
    const r = await p.sync(true);
    assert.deepEqual(r.report.errors, []);
    const services = await ipvs.services({ withDestinations: true });
    const good = services.find((s) => s.address === '10.96.0.10' && s.port === 80);
    assert.ok(good, 'the good ClusterIP service is programmed');
    assert.deepEqual(good.destinations?.map((d) => `${d.address}:${d.port}`), ['10.244.1.5:8080']);
    assert.ok(services.some((s) => s.address === '198.51.100.7' && s.port === 443), 'the load balancer service is programmed too');

    const rules = ruleset().filter((o) => o.rule?.family === 'ip' && o.rule.table === 'ipvsync').map((o) => o.rule!);
    const saddrs = rules.flatMap((r) => r.expr.flatMap((e) => {
      const m = e.match as { left?: { payload?: { field?: string } }; right?: unknown } | undefined;
      return m?.left?.payload?.field === 'saddr' ? [JSON.stringify(m.right)] : [];
    }));
    assert.ok(saddrs.includes(JSON.stringify({ prefix: { addr: '203.0.113.0', len: 24 } })), `the source range as its network: ${saddrs.join(', ')}`);
    assert.ok(!saddrs.some((s) => s.includes('203.0.113.7')), 'the host bits are not in the kernel');
    const clusterIps = execFileSync('nft', ['-j', 'list', 'set', 'ip', 'ipvsync', 'cluster-ips'], { encoding: 'utf8' });
    assert.match(clusterIps, /10\.96\.0\.10/, 'the good cluster IP is in the glue');

    // A resync writes nothing: the normalised range is what the kernel reports back.
    const again = await p.sync(true);
    assert.deepEqual(again.report.errors, []);
    assert.equal(again.report.nft.writes, 0);
  } finally {
    // the tables may not exist (the sync failed before its glue committed)
    spawnSync('nft', ['delete', 'table', 'ip', 'ipvsync']);
    spawnSync('nft', ['delete', 'table', 'ip6', 'ipvsync']);
  }
});
