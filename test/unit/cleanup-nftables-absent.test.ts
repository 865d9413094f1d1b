// cleanup on a kernel without nf_tables (issue #58), against the in-memory kernel: the addon
// reports nftables' absence as kind 'unsupported' (NFT_MSG_GETGEN answered EINVAL, see
// test/kernel/nftables-absent.test.ts for the real kernel); cleanup then removes everything
// else of ipvsync's and skips the glue, while any other nftables failure still fails it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NetlinkError } from '../../src/errors.js';
import { removeOwned } from '../../src/proxy/cleanup.js';
import { Proxier } from '../../src/proxy/proxier.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import { slice, svc } from '../fixtures/kube/builders.js';

/** The addon's error for GETGEN on a kernel without nf_tables, or `kind` for another failure. */
const getgen = (kind: 'unsupported' | 'kernel') =>
  new NetlinkError({
    message: kind === 'unsupported' ? 'NFT_MSG_GETGEN: the kernel has no nftables support (module nf_tables is not loaded): EINVAL' : 'NFT_MSG_GETGEN: EINVAL (Invalid argument)',
    code: 'EINVAL',
    errno: 22,
    kind,
    op: 'NFT_MSG_GETGEN',
  });

async function programmed() {
  const k = fakeKernel();
  const p = new Proxier(k, { node: { name: 'node-a', addresses: ['192.168.77.1'] }, config: { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] }, vipLink: 'kube-ipvs0', glue: true });
  p.onServiceUpdate(svc('web', { clusterIP: '10.96.0.10', ports: [{ port: 80, targetPort: 8080 }] }));
  p.onSliceUpdate(slice('web', 'web-1', [{ port: 8080 }], [{ ip: '10.244.1.2' }]));
  assert.deepEqual((await p.sync(true)).report.errors, []);
  return k;
}

test('cleanup without nftables (no handle: open refused it as unsupported) removes the rest of what ipvsync owns', async () => {
  const k = await programmed();
  const { nft: _nft, ...rest } = k;
  const c = await removeOwned(rest, 'kube-ipvs0');
  assert.deepEqual(c, { services: 1, ipsets: 0, addresses: 1, routes: 0, tables: 0, link: true });
});

test('cleanup whose nftables handle fails as unsupported (nf_tables gone after open) skips the glue; any other failure fails it', async () => {
  const k = await programmed();
  const lost = Object.create(k.nft) as typeof k.nft;
  lost.list = () => Promise.reject(getgen('unsupported'));
  const c = await removeOwned({ ...k, nft: lost }, 'kube-ipvs0');
  assert.deepEqual(c, { services: 1, ipsets: 0, addresses: 1, routes: 0, tables: 0, link: true });

  const k2 = await programmed();
  const broken = Object.create(k2.nft) as typeof k2.nft;
  broken.list = () => Promise.reject(getgen('kernel'));
  await assert.rejects(removeOwned({ ...k2, nft: broken }, 'kube-ipvs0'), (e: unknown) => e instanceof NetlinkError && e.kind === 'kernel' && e.code === 'EINVAL');
});
