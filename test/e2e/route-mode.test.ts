// End to end, bindMode route (qemu: IPVS + nftables): `ipvsync sync -f --bind-mode route` binds
// the ClusterIPs with one local route per service CIDR instead of one address per VIP; real HTTP
// through the VIPs (IPv4 and IPv6, from the node and from an outside host) reaches the pods;
// connections to addresses in the CIDR that are no service are refused by the glue; switching to
// address mode and back converges; the dry run shows the route ops; cleanup removes the routes.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ipvsadmList, ipvsyncOk, linkAddresses, linkExists, nftSetElements, sh } from './helpers/kernel.js';
import { fixture, manifestDir, syncArgs, writeManifests } from './helpers/manifests.js';
import { connectFrom, httpFrom, withPodNetwork } from './helpers/podnet.js';
import { connectOutcome, httpMany, tally } from './helpers/traffic.js';

const skip = process.env.IPVSYNC_VM !== 'qemu' ? 'needs IPVS and nftables: run in qemu (node dist/test/vm/cli.js --kernel qemu --suite e2e)' : false;
const ROUTE = ['--bind-mode', 'route', '--service-cidrs', '10.96.0.0/12,fd00:96::/108'];

interface IpRoute { type: string; dst: string; dev: string; protocol?: string }
async function ownedRoutes(): Promise<string[]> {
  const out: string[] = [];
  for (const fam of ['-4', '-6']) {
    const j = JSON.parse(await sh('ip', fam, '-j', 'route', 'show', 'table', 'local')) as IpRoute[];
    for (const r of j) if (r.protocol === '249') out.push(`${r.type} ${r.dst} dev ${r.dev}`);
  }
  return out.sort();
}

describe('bindMode route end to end', { skip }, () => {
  let dir: string;

  withPodNetwork({
    setup: async () => {
      dir = await manifestDir('route-mode');
      await writeManifests(dir, 'services.yaml', await fixture('cluster-ip.yaml'));
      await ipvsyncOk(...syncArgs(dir, ...ROUTE));
    },
  });

  test('one local route per CIDR, no /32 on kube-ipvs0; HTTP through the VIPs reaches the pods; a non-service address in the CIDR is refused', async () => {
    assert.deepEqual(await ownedRoutes(), ['local 10.96.0.0/12 dev lo', 'local fd00:96::/108 dev lo']);
    assert.ok(await linkExists('kube-ipvs0'), 'the VIP link still exists');
    assert.deepEqual(await linkAddresses('kube-ipvs0'), [], 'no per-VIP addresses');
    assert.ok((await ipvsadmList()).has('TCP 10.96.0.10:80'));
    assert.deepEqual(await nftSetElements('service-cidrs'), ['10.96.0.0/12']);
    assert.deepEqual(await nftSetElements('service-cidrs', 'ip6'), ['fd00:96::/108']);
    // Through IPVS, from the node and from outside, both families.
    assert.deepEqual(tally(await httpMany('http://10.96.0.10/', 6)), { 'pod-a': 2, 'pod-b': 2, 'pod-c': 2 });
    assert.deepEqual(tally(await httpFrom('ext', 'http://10.96.0.10/', 3)), { 'pod-a': 1, 'pod-b': 1, 'pod-c': 1 });
    assert.deepEqual(tally(await httpFrom('pod-a', 'http://[fd00:96::10]/', 3)), { 'pod-a': 1, 'pod-b': 1, 'pod-c': 1 });
    // Local (the route) but no service: refused, from the node and from outside.
    assert.equal(await connectOutcome('10.96.0.99', 80), 'ECONNREFUSED');
    assert.equal(await connectOutcome('fd00:96::99', 80), 'ECONNREFUSED');
    assert.equal(await connectFrom('ext', '10.96.0.99', 80), 'ECONNREFUSED');
    assert.equal(await connectOutcome('10.96.0.10', 81), 'ECONNREFUSED', 'a VIP port that is no service');
  });

  test('switching to address mode and back converges; the dry run shows route ops; cleanup removes the routes', async () => {
    await ipvsyncOk(...syncArgs(dir));
    assert.deepEqual(await ownedRoutes(), []);
    assert.deepEqual(await linkAddresses('kube-ipvs0'), ['10.96.0.10/32', '10.96.0.30/32', 'fd00:96::10/128']);
    assert.deepEqual(tally(await httpMany('http://10.96.0.10/', 3)), { 'pod-a': 1, 'pod-b': 1, 'pod-c': 1 });

    const plan = JSON.parse(await ipvsyncOk(...syncArgs(dir, ...ROUTE, '--dry-run', '--json'))) as { ops: Array<{ kind: string; op: { op: string; dst?: string } }> };
    assert.deepEqual(
      plan.ops.filter((w) => w.kind === 'route' || w.kind === 'link').map((w) => `${w.kind} ${w.op.op} ${w.op.dst ?? ''}`.trim()),
      ['route addRoute 10.96.0.0/12', 'route addRoute fd00:96::/108', 'link delAddr', 'link delAddr', 'link delAddr'],
    );
    await ipvsyncOk(...syncArgs(dir, ...ROUTE));
    assert.deepEqual(await linkAddresses('kube-ipvs0'), []);
    assert.deepEqual(await ownedRoutes(), ['local 10.96.0.0/12 dev lo', 'local fd00:96::/108 dev lo']);
    assert.match(await ipvsyncOk(...syncArgs(dir, ...ROUTE)), /nothing to change/);

    assert.match(await ipvsyncOk('cleanup'), /, 2 routes, 0 ipsets$/m);
    assert.deepEqual(await ownedRoutes(), []);
    assert.equal((await ipvsadmList()).size, 0);
  });
});
