// Malformed ops never leave the library as raw JavaScript errors (issue 44): a seeded mutation
// campaign over the batch calls of every handle — Ipvs.apply, IpSets.apply, Links.apply,
// Routes.apply, Conntrack.delete, Nftables.commit and NftTransaction.queue. Valid op lists get
// one value somewhere in them (an op, a field, a member, an element, the list itself) replaced by
// a hostile one (null, wrong types, NaN, negative and huge numbers, huge strings, nested garbage,
// a throwing getter) or deleted. Each call must succeed or fail with a NetlinkError of kind
// 'invalid' that names the op (`index`), and the element of a multi-member op (`member`) when
// the mutation was inside one. The handles run over their TypeScript layer as callers use it,
// with the addon's own op readers (its codec hooks) standing in for the socket, so no kernel is
// needed; test/host/api-errors.test.ts holds the real handles to the same rules.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NetlinkError } from '../../src/errors.js';
import { Conntrack } from '../../src/kernel/conntrack.js';
import { IpSets } from '../../src/kernel/ipsets.js';
import { Ipvs } from '../../src/kernel/ipvs.js';
import { Links } from '../../src/kernel/links.js';
import { Routes } from '../../src/kernel/routes.js';
import { Nftables } from '../../src/kernel/nftables.js';
import { native } from '../../src/native.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fromHex, prng } from '../helpers/bytes.js';
import { campaign, mutate, NFT_OPS, queued } from '../helpers/op-campaign.js';

const allOk = (n: number) => ({ statuses: new Uint8Array(n).fill(1), errors: [], sendmsgCalls: 1 });
/** A handle class over a stand-in for its addon handle (the constructor is private to callers). */
const over = <T>(cls: unknown, h: object): T => new (cls as new (h: object) => T)(h);

test('Ipvs.apply: every mutant applies or is refused as invalid naming its op', async () => {
  const ipvs = over<Ipvs>(Ipvs, {
    apply: async (packed: Uint8Array) => {
      native().codec.ipvs.encodeOps(packed, 1);
      return allOk(1);
    },
  });
  const svc = { protocol: 'tcp', address: '10.0.0.1', port: 80 };
  await campaign(1, [
    { op: 'addService', service: { ...svc, scheduler: 'rr', flags: ['persistent'], timeout: 60, netmask: '255.255.255.0' } },
    { op: 'addDestination', service: svc, dest: { address: '10.1.0.1', port: 8080, forward: 'tunnel', weight: 3, tunnel: { type: 'gue', port: 6080 } } },
    { op: 'updateService', service: { fwmark: 7, family: 'inet6', scheduler: 'mh', flags: ['mh-port'] } },
    { op: 'deleteDestination', service: svc, dest: { address: '10.1.0.1', port: 8080 } },
    { op: 'setTimeouts', timeouts: { tcp: 900, udp: 30 } },
    { op: 'startDaemon', daemon: { state: 'master', interface: 'eth0', syncId: 3, mcastGroup: '224.0.0.81' } },
    { op: 'zero', service: svc },
  ], (ops) => ipvs.apply(ops as never));
});

test('IpSets.apply: every mutant applies or is refused as invalid naming its op and member', async () => {
  const sets = over<IpSets>(IpSets, {
    apply: async (ops: unknown[]) => {
      native().codec.ipset.encodeOps(ops as never);
      return allOk(ops.length);
    },
    list: async () => [],
  });
  await campaign(2, [
    { op: 'create', name: 'A', type: 'hash:ip,port', family: 'inet', timeout: 30, counters: true, comment: true },
    { op: 'add', name: 'A', members: [{ ip: '10.0.0.1', proto: 'tcp', port: 80, timeout: 5 }, { ip: '10.0.0.2', proto: 'udp', port: 53, comment: 'dns' }] },
    { op: 'create', name: 'N', type: 'hash:net', family: 'inet6' },
    { op: 'add', name: 'N', members: [{ ip: 'fd00::', cidr: 64, nomatch: true }], exist: true },
    { op: 'create', name: 'P', type: 'bitmap:port', range: { from: 1, to: 1024 } },
    { op: 'del', name: 'P', type: 'bitmap:port', members: [{ port: 22 }] },
    { op: 'rename', name: 'A', to: 'B' },
    { op: 'swap', name: 'B', with: 'N' },
    { op: 'flush', name: 'B' },
    { op: 'destroy', name: 'B' },
  ], (ops) => sets.apply(ops as never), ['members']);
});

test('Links.apply and Routes.apply: every mutant applies or is refused as invalid naming its op', async () => {
  const rtnl = {
    apply: async (ops: unknown[]) => {
      native().codec.rtnl.encodeOps(ops as never);
      return allOk(ops.length);
    },
  };
  const links = over<Links>(Links, rtnl);
  const routes = over<Routes>(Routes, rtnl);
  await campaign(3, [
    { op: 'addLink', name: 'kube-ipvs0', kind: 'dummy', mtu: 1500 },
    { op: 'setLink', name: 'kube-ipvs0', up: true },
    { op: 'addAddr', index: 2, address: '10.96.0.1/32', exist: true, protocol: 249 },
    { op: 'delAddr', index: 2, address: 'fd00::1' },
    { op: 'delLink', index: 3 },
  ], (ops) => links.apply(ops as never));
  await campaign(4, [
    { op: 'addRoute', dst: '10.96.0.0/12', index: 2, table: 'local', type: 'local', scope: 'host', protocol: 249, metric: 10 },
    { op: 'addRoute', dst: 'fd00:96::/108', gateway: 'fd00::1', exist: true },
    { op: 'delRoute', dst: '10.97.0.0/16', type: 'blackhole' },
  ], (ops) => routes.apply(ops as never));
});

test('Conntrack.delete: every mutated filter deletes or is refused as invalid', async () => {
  // A flow as the kernel dumps it, for the filter matcher (which reads filters as delete does).
  const dump = fromHex(readFileSync(join(process.cwd(), 'test', 'fixtures', 'conntrack', 'list-reply.hex'), 'utf8'));
  let off = 0;
  while (dump.readUInt16LE(off + 4) !== 0x100) off += (dump.readUInt32LE(off) + 3) & ~3;
  const msg = dump.subarray(off, off + dump.readUInt32LE(off));
  const ct = over<Conntrack>(Conntrack, {
    delete: async (filter: unknown) => {
      if (filter === null || typeof filter !== 'object') throw NetlinkError.invalid('IPCTNL_MSG_CT_DELETE', 'filter must be an object');
      native().codec.conntrack.matches(msg, filter as never);
      return { matched: 0, deleted: 0, gone: 0, errors: [], sendmsgCalls: 0 };
    },
  });
  const rand = prng(5);
  const valid = { family: 'inet', proto: 'udp', origSrc: '10.0.0.1', origDst: '10.96.0.10', origDport: 53, replySrc: '10.244.1.5', replySport: 53 };
  let raw = 0;
  for (let i = 0; i < 600; i++) {
    const { ops } = mutate([valid], rand);
    const filter = Array.isArray(ops) ? ops[0] : ops;
    try {
      await ct.delete(filter as never);
    } catch (e) {
      if (!(e instanceof NetlinkError && e.kind === 'invalid')) raw++;
    }
  }
  assert.equal(raw, 0);
});

test('Nftables.commit: every mutated op list commits or is refused as invalid naming its op and element', async () => {
  const nft = over<Nftables>(Nftables, {
    commitWire: async (stream: Uint8Array, opts: object) => {
      native().codec.nftables.encodeWire(stream, opts as never);
      return { statuses: new Uint8Array(0), errors: [], transactions: [], sendmsgCalls: 1 };
    },
  });
  await campaign(6, NFT_OPS, (ops) => {
    const tx = queued(ops);
    return tx && nft.commit(tx);
  }, ['elements']);
});

test('NftTransaction.queue: a mutated op throws (synchronously) as invalid naming its position', async () => {
  await campaign(7, NFT_OPS, (ops) => {
    const tx = queued(ops);
    if (tx) native().codec.nftables.encodeWire(tx.encoded());
  }, ['elements']);
});
