// One error model for every handle (issue 43), on the machine's own kernel in a private network
// namespace (scripts/host-tests.sh): malformed input rejects the promise with a NetlinkError of
// kind 'invalid' naming the op (and member) — never a raw JavaScript error (issue 44, with the
// same seeded mutation campaign test/unit/api-ops-campaign.test.ts runs over the codecs, here
// against the real handles); kernel errors resolve inside the result; orThrow() turns a result
// into an exception; close() ends a handle; open() fails at once for a missing namespace; and
// without CAP_NET_ADMIN every handle, ipset included, says so.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { NetlinkError } from '../../src/errors.js';
import { Conntrack } from '../../src/kernel/conntrack.js';
import { Genl } from '../../src/kernel/genl.js';
import { IpSets } from '../../src/kernel/ipsets.js';
import { Links } from '../../src/kernel/links.js';
import { Nftables, NftTransaction, type NftOp, type SetSpec } from '../../src/kernel/nftables.js';
import { Routes } from '../../src/kernel/routes.js';
import { campaign, NFT_OPS, queued } from '../helpers/op-campaign.js';

// The tests' own namespace: what the campaigns happen to create stays out of the suite's.
const NS = 'ipvsync-api-errors';
const netns = `/run/netns/${NS}`;
before(() => {
  execFileSync('ip', ['netns', 'add', NS]);
  execFileSync('ip', ['-n', NS, 'link', 'set', 'lo', 'up']);
});
after(() => {
  execFileSync('ip', ['netns', 'del', NS]);
});

const invalid = (index: number | undefined, member?: number) => (e: unknown) => {
  assert.ok(e instanceof NetlinkError, `a NetlinkError, not ${String(e)}`);
  assert.equal(e.kind, 'invalid', e.message);
  assert.equal(e.index, index, e.message);
  assert.equal(e.member, member, e.message);
  return true;
};

test('malformed ops reject as invalid naming the op and member, for every handle', async () => {
  const sets = await IpSets.open({ netns });
  const links = await Links.open({ netns });
  const routes = await Routes.open({ netns });
  const ct = await Conntrack.open({ netns });
  const nft = await Nftables.open({ netns });
  await assert.rejects(sets.apply([null as never]), invalid(0));
  await assert.rejects(sets.apply([{ op: 'create', name: 'S', type: 5 as never }]), invalid(0));
  await assert.rejects(
    sets.apply([{ op: 'create', name: 'S', type: 'hash:ip' }, { op: 'add', name: 'S', members: [{ ip: '10.0.0.1' }, { ip: 7 as never }] }]),
    invalid(1, 1),
  );
  await assert.rejects(sets.apply({} as never), invalid(undefined));
  await assert.rejects(links.apply([{ op: 'setLink', name: 'lo', up: true }, null as never]), invalid(1));
  await assert.rejects(routes.apply([null as never]), invalid(0));
  await assert.rejects(routes.apply([{ op: 'addRoute', dst: '10.0.0.0/8', type: 'blackhole' }, { op: 'addRoute', dst: 5 as never }]), invalid(1));
  await assert.rejects(ct.delete(null as never), invalid(undefined));
  await assert.rejects(ct.delete({ proto: {} as never }), invalid(undefined));
  assert.throws(() => new NftTransaction().queue(null as never), invalid(0));
  assert.throws(() => new NftTransaction().queue(NFT_OPS[0] as NftOp).queue({ verb: 'add', kind: 'table', table: null } as never), invalid(1));
  const set: SetSpec = { family: 'ip', table: 't', name: 's', key: ['ipv4_addr'] };
  assert.throws(() => new NftTransaction().addTable({ family: 'ip', name: 't' }).addSet(set).addElements(set, [{ key: ['10.0.0.1'] }, null as never]), invalid(2, 1));
  // nothing was sent: the namespace has no set and no table
  assert.deepEqual(await sets.headers(), []);
  assert.deepEqual((await nft.list()).tables, []);
});

test('seeded mutation campaign against the real handles: no raw JavaScript error', async () => {
  const sets = await IpSets.open({ netns });
  const links = await Links.open({ netns });
  const routes = await Routes.open({ netns });
  const nft = await Nftables.open({ netns });
  const lo = (await links.get('lo'))!.index;
  await campaign(11, [
    { op: 'create', name: 'A', type: 'hash:ip,port', family: 'inet', timeout: 30, counters: true, comment: true, exist: true },
    { op: 'add', name: 'A', members: [{ ip: '10.0.0.1', proto: 'tcp', port: 80, timeout: 5 }, { ip: '10.0.0.2', proto: 'udp', port: 53, comment: 'dns' }], exist: true },
    { op: 'del', name: 'A', members: [{ ip: '10.0.0.2', proto: 'udp', port: 53 }], exist: true },
  ], (ops) => sets.apply(ops as never), ['members'], 300);
  await campaign(12, [
    { op: 'addAddr', index: lo, address: '10.96.0.1/32', exist: true, protocol: 249 },
    { op: 'delAddr', link: 'lo', address: '10.96.0.1/32' },
  ], (ops) => links.apply(ops as never, { stopOnError: false }), [], 300);
  await campaign(13, [
    { op: 'addRoute', dst: '10.97.0.0/16', type: 'blackhole', exist: true },
    { op: 'delRoute', dst: '10.97.0.0/16', type: 'blackhole' },
  ], (ops) => routes.apply(ops as never, { stopOnError: false }), [], 300);
  await campaign(14, NFT_OPS, (ops) => {
    const tx = queued(ops);
    return tx && nft.commit(tx);
  }, ['elements'], 300);
});

test('kernel errors resolve inside the result (index, member); orThrow() throws the first', async () => {
  const sets = await IpSets.open({ netns });
  const r = await sets.apply([
    { op: 'create', name: 'K', type: 'hash:ip' },
    { op: 'add', name: 'K', members: [{ ip: '10.0.0.1' }, { ip: '10.0.0.1' }] },
  ], { stopOnError: false });
  assert.equal(r.ok, false);
  assert.equal(r.status(1), 'error');
  assert.equal(r.errors[0]!.index, 1);
  assert.equal(r.errors[0]!.member, 1);
  assert.throws(() => r.orThrow(), (e: unknown) => e === r.errors[0]);
  const ok = await sets.apply([{ op: 'destroy', name: 'K' }]);
  assert.equal(ok.orThrow(), ok);

  const links = await Links.open({ netns });
  const l = await links.apply([{ op: 'delLink', name: 'nosuchlink0' }]);
  assert.equal(l.status(0), 'error');
  assert.equal(l.errors[0]!.kind, 'kernel');
  assert.equal(l.errors[0]!.index, 0);
  assert.throws(() => l.orThrow(), (e: unknown) => e === l.errors[0]);

  const routes = await Routes.open({ netns });
  const rr = await routes.apply([{ op: 'delRoute', dst: '10.98.0.0/16', type: 'blackhole' }]);
  assert.equal(rr.errors[0]!.index, 0);
  assert.throws(() => rr.orThrow(), NetlinkError);

  const nft = await Nftables.open({ netns });
  const c = await nft.commit(new NftTransaction().deleteTable({ family: 'ip', name: 'nosuch' }));
  assert.equal(c.ok, false);
  assert.equal(c.errors[0]!.index, 0);
  assert.throws(() => c.orThrow(), (e: unknown) => e === c.errors[0]);
});

test('close(): later calls reject with a typed EBADF error, for every handle', async () => {
  const closedError = (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid' && e.code === 'EBADF';
  const sets = await IpSets.open({ netns });
  const pending = sets.headers(); // made before close: it completes
  await sets.close();
  assert.ok(Array.isArray(await pending));
  await assert.rejects(sets.headers(), closedError);
  await assert.rejects(sets.apply([{ op: 'flush', name: 'x' }]), closedError);

  const links = await Links.open({ netns });
  await links.close();
  await assert.rejects(links.list(), closedError);
  const routes = await Routes.open({ netns });
  await routes.close();
  await assert.rejects(routes.list(), closedError);
  const ct = await Conntrack.open({ netns });
  await ct.close();
  await assert.rejects(ct.count(), closedError);
  const nft = await Nftables.open({ netns });
  await nft.close();
  await assert.rejects(nft.genId(), closedError);
  await assert.rejects(nft.commit(new NftTransaction().addTable({ family: 'ip', name: 't' })), closedError);
  const genl = await Genl.open({ netns });
  await genl.close();
  await assert.rejects(genl.family('nlctrl'), closedError);
});

test('open() in a missing namespace rejects at once, for every handle', async () => {
  const missing = '/run/netns/ipvsync-missing';
  for (const open of [Links.open, Routes.open, Conntrack.open, IpSets.open, Nftables.open, Genl.open]) {
    await assert.rejects(open({ netns: missing }), (e: unknown) => e instanceof NetlinkError && /ipvsync-missing/.test(e.message), open.name);
  }
});

test('without CAP_NET_ADMIN the ipset handle says so, as IPVS, links and nftables do (kind kernel, EPERM)', () => {
  // A child without CAP_NET_ADMIN in its bounding set (root otherwise, so it reads the build).
  const script = `
    const { IpSets } = await import('./dist/src/kernel/ipsets.js');
    const { Nftables } = await import('./dist/src/kernel/nftables.js');
    const out = [];
    for (const open of [IpSets.open, Nftables.open]) {
      try { await open(); out.push('opened'); } catch (e) { out.push({ kind: e.kind, code: e.code, message: e.message }); }
    }
    console.log(JSON.stringify(out));`;
  const r = spawnSync('setpriv', ['--bounding-set=-net_admin', '--inh-caps=-net_admin', process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const [ipset, nft] = JSON.parse(r.stdout) as Array<{ kind: string; code: string; message: string }>;
  assert.equal(nft!.code, 'EPERM');
  assert.equal(ipset!.kind, nft!.kind, ipset!.message);
  assert.equal(ipset!.code, 'EPERM');
  assert.match(ipset!.message, /CAP_NET_ADMIN required/);
  assert.doesNotMatch(ipset!.message, /no ipset support/);
});
