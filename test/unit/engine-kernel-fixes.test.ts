// Regressions for what the real kernels showed the in-memory doubles did not (test/host/engine-*
// and test/kernel/engine-*): a missing nftables table lists as ENOENT; expressions read back
// list their fields in another order; the kernel stores a net member's network address; a
// desired member, element or destination listed twice is one object.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine, planWrites } from '../../src/engine/engine.js';
import { diffIpSets } from '../../src/engine/ipsets-diff.js';
import { diffIpvs } from '../../src/engine/ipvs-diff.js';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import { diffNft } from '../helpers/nft-diff.js';
import { networkText, parseCidr } from '../../src/net/address.js';
import { NetlinkError } from '../../src/errors.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';
import * as R from '../../src/kernel/nft-rules.js';

const table: DesiredNftTable = {
  family: 'ip',
  name: 't',
  chains: [{ name: 'c' }],
  sets: [{ name: 's', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict', elements: [] }],
  rules: [{ chain: 'c', exprs: R.vmap([R.F.ipDaddr, R.F.l4proto, R.F.thDport], 's'), comment: 'x' }],
};

test('a table-filtered nftables listing that fails with ENOENT (no such table) plans the table', async () => {
  const k = fakeKernel();
  const list = k.nft.list.bind(k.nft);
  k.nft.list = async (o) => {
    if (o?.table) throw new NetlinkError({ message: 'NFT_MSG_GETSET: No such file or directory', code: 'ENOENT', errno: 2, kind: 'kernel', op: 'NFT_MSG_GETSET' });
    return list(o);
  };
  const e = new Engine(k);
  const p = await e.plan({ services: [], nft: table });
  assert.deepEqual(p.nft!.ops.map((o) => `${o.verb}-${o.kind}`), ['add-table', 'add-chain', 'add-set', 'add-rule']);
  // other failures still surface
  k.nft.list = async () => {
    throw new NetlinkError({ message: 'EPERM', code: 'EPERM', errno: 1, kind: 'kernel', op: 'NFT_MSG_GETTABLE' });
  };
  await assert.rejects(e.plan({ services: [], nft: table }), /EPERM/);
});

test('rules compare equal whatever the order of the fields of their expressions', () => {
  const observed = {
    genId: 1,
    tables: [{ family: 'ip' as const, name: 't', handle: 1, flags: 0 }],
    chains: [{ family: 'ip' as const, table: 't', name: 'c', handle: 2 }],
    sets: [{ family: 'ip' as const, table: 't', name: 's', key: ['ipv4_addr', 'inet_proto', 'inet_service'] as never, map: 'verdict' as const, elements: [] }],
    // as the kernel decoder lists them: {type, set, sreg, dreg}
    rules: [{ family: 'ip' as const, table: 't', chain: 'c', handle: 3, comment: 'x', exprs: table.rules[0]!.exprs.map((x) => (x.type === 'lookup' ? { type: 'lookup', set: 's', sreg: 1, dreg: 0 } : x)) as never }],
  };
  assert.deepEqual(diffNft(table, observed as never).ops, []);
});

test('ipset net members compare by network address; duplicates are one member', () => {
  const observed = [{ name: 'P-NET', type: 'hash:net' as const, family: 'inet' as const, revision: 7, references: 0, memsize: 0, elements: 1, members: [{ ip: '10.1.0.0', cidr: 16 }] }];
  const same = diffIpSets([{ name: 'P-NET', type: 'hash:net', family: 'inet', members: [{ ip: '10.1.2.3', cidr: 16 }, { ip: '10.1.0.0', cidr: 16 }] }], observed, 'P-');
  assert.deepEqual([...same.early, ...same.late], []);
  const fresh = diffIpSets([{ name: 'P-NEW', type: 'hash:ip', family: 'inet', members: [{ ip: '10.0.0.1' }, { ip: '10.0.0.1' }] }], [], 'P-');
  assert.deepEqual(fresh.early.map((o) => (o.op === 'add' ? o.members.length : o.op)), ['create', 1]);
  assert.equal(networkText(parseCidr('fd00:1:2:3::5/48')), 'fd00:1:2::');
  assert.equal(networkText(parseCidr('fd00:0:0:1::/64')), 'fd00:0:0:1::');
  assert.equal(networkText(parseCidr('1:0:2:0:0:3:0:4/128')), '1:0:2::3:0:4');
});

test('a destination listed twice is added once; an element listed twice is added once', async () => {
  const d = { address: '10.1.0.1', port: 80, forward: 'masq' as const, weight: 1 };
  const delta = diffIpvs({ desired: [{ protocol: 'tcp', address: '10.0.0.1', port: 80, destinations: [d, { ...d }] }], observed: [], owns: () => true, draining: new Map(), now: 0, drainTimeoutMs: 1 });
  assert.deepEqual(delta.ops.map((o) => o.op), ['addService', 'addDestination']);
  const k = fakeKernel();
  const e = new Engine(k);
  const dup = { ...table, sets: [{ ...table.sets[0]!, elements: [{ key: ['10.0.0.1', 'tcp', 80], verdict: { code: 'goto' as const, chain: 'c' } }, { key: ['10.0.0.1', 'tcp', 80], verdict: { code: 'accept' as const } }] }] };
  const first = await e.plan({ services: [], nft: dup });
  const adds = first.nft!.ops.filter((o) => o.kind === 'elements');
  assert.deepEqual(adds.map((o) => (o.kind === 'elements' ? o.elements.length : 0)), [1]);
  await e.apply(first);
  assert.equal(planWrites(await e.plan({ services: [], nft: dup })).length, 0);
});
