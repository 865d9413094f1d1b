// Runs inside the test VM (node dist/test/vm/cli.js --suite kernel): the dummy link kube-ipvs0
// and VIP addresses on it, as the proxy uses them. Cross-checked with `ip -j link` / `ip -j addr`.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { IPVSYNC_ADDRESS_PROTOCOL, Links } from '../../src/kernel/links.js';
import { protoAddresses } from '../helpers/ifa-proto.js';

const ip = (...args: string[]) => execFileSync('ip', args, { encoding: 'utf8' });
const LINK = 'kube-ipvs0';
interface IpAddr { ifname: string; addr_info: Array<{ family: string; local: string; prefixlen: number; scope: string }> }

after(() => {
  spawnSync('ip', ['link', 'del', LINK]);
});

test('kube-ipvs0: created as a dummy link with the ipvsync alias, set up, found again, created only once', async () => {
  spawnSync('ip', ['link', 'del', LINK]);
  const l = await Links.open();
  // as the engine makes it (addresses-diff.ts): the alias in a request of its own, after the add
  assert.ok((await l.apply([
    { op: 'addLink', name: LINK, kind: 'dummy' },
    { op: 'setLink', name: LINK, alias: 'ipvsync' },
    { op: 'setLink', name: LINK, up: true },
  ])).ok);
  const link = (await l.get(LINK))!;
  assert.equal(link.kind, 'dummy');
  assert.equal(link.up, true);
  const theirs = JSON.parse(ip('-j', '-d', 'link', 'show', LINK))[0] as { ifindex: number; flags: string[]; linkinfo: { info_kind: string }; ifalias?: string };
  assert.equal(theirs.linkinfo.info_kind, 'dummy');
  // marked as ipvsync's (what cleanup deletes), read back by both
  assert.equal(theirs.ifalias, 'ipvsync');
  assert.equal(link.alias, 'ipvsync');
  assert.equal(theirs.ifindex, link.index);
  assert.ok(theirs.flags.includes('UP'));
  // a second add is EEXIST; the link is found again, same index
  const dup = await l.apply([{ op: 'addLink', name: LINK, kind: 'dummy' }]);
  assert.equal(dup.errorOf(0)?.code, 'EEXIST');
  assert.equal((await l.get(LINK))?.index, link.index);
  assert.ok((await l.apply([{ op: 'setLink', name: LINK, up: false }])).ok);
  assert.equal((await l.get(LINK))?.up, false);
  assert.ok((await l.apply([{ op: 'setLink', name: LINK, up: true }])).ok);
});

test('VIPs on kube-ipvs0: /32 and /128 in one batch, EEXIST per op, listed like ip -j addr, deleted', async () => {
  const l = await Links.open();
  assert.ok((await l.apply([{ op: 'addLink', name: LINK, kind: 'dummy', exist: true }, { op: 'setLink', name: LINK, up: true }])).ok);
  const vips = [
    ...Array.from({ length: 300 }, (_, i) => `10.96.${i >> 8}.${(i & 255) + 0}`).map((a) => `${a}/32`),
    ...Array.from({ length: 300 }, (_, i) => `fd00:96::${(i + 1).toString(16)}/128`),
  ];
  const r = await l.apply(vips.map((address) => ({ op: 'addAddr', link: LINK, address })), { stopOnError: false });
  assert.deepEqual(r.errors, []);
  assert.ok(r.sendmsgCalls <= 4, `${r.sendmsgCalls} sendmsg calls`);
  const ours = (await l.addresses({ link: LINK })).filter((a) => a.scope === 'global').map((a) => `${a.address}/${a.prefixlen}`).sort();
  const theirs = (JSON.parse(ip('-j', 'addr', 'show', 'dev', LINK)) as IpAddr[])
    .flatMap((x) => x.addr_info)
    .filter((a) => a.scope === 'global')
    .map((a) => `${a.local}/${a.prefixlen}`)
    .sort();
  assert.deepEqual(ours, theirs);
  assert.deepEqual(ours, [...vips].sort());
  // the node-wide list includes them with the link name
  const all = await l.addresses();
  assert.ok(all.some((a) => a.link === LINK && a.address === '10.96.0.0' && a.prefixlen === 32));
  assert.ok(all.some((a) => a.link === 'lo' && a.address === '127.0.0.1'));
  // again: EEXIST for each, distinct from failures; exist: fine
  const again = await l.apply(vips.slice(0, 3).map((address) => ({ op: 'addAddr', link: LINK, address })), { stopOnError: false });
  assert.deepEqual(again.errors.map((e) => [e.index, e.code]), [[0, 'EEXIST'], [1, 'EEXIST'], [2, 'EEXIST']]);
  assert.ok((await l.apply(vips.slice(0, 3).map((address) => ({ op: 'addAddr', link: LINK, address, exist: true })), { stopOnError: false })).ok);
  // iproute2 sees our deletes
  const del = await l.apply(vips.map((address) => ({ op: 'delAddr', link: LINK, address })), { stopOnError: false });
  assert.ok(del.ok, del.errors.map((e) => e.message).join('; '));
  assert.deepEqual(
    (JSON.parse(ip('-j', 'addr', 'show', 'dev', LINK)) as IpAddr[]).flatMap((x) => x.addr_info).filter((a) => a.scope === 'global'),
    [],
  );
  assert.ok((await l.apply([{ op: 'delLink', name: LINK }])).ok);
  assert.equal(await l.get(LINK), null);
});

test('kube-ipvs0 address protocol (IFA_PROTO, Linux 6.1): ours carry it, the kernel marks its link-local, an independent reader agrees', async () => {
  spawnSync('ip', ['link', 'del', LINK]);
  const l = await Links.open();
  // up: the kernel gives the dummy its IPv6 link-local (addrgenmode eui64)
  assert.ok((await l.apply([{ op: 'addLink', name: LINK, kind: 'dummy' }, { op: 'setLink', name: LINK, up: true }])).ok);
  const link = (await l.get(LINK))!;
  const r = await l.apply([
    { op: 'addAddr', link: LINK, address: '10.96.0.1', protocol: IPVSYNC_ADDRESS_PROTOCOL },
    { op: 'addAddr', link: LINK, address: 'fd00:96::1', protocol: IPVSYNC_ADDRESS_PROTOCOL },
  ]);
  assert.deepEqual(r.errors, []);
  ip('addr', 'add', '10.96.0.2/32', 'dev', LINK);
  const text = (a: { address: string; prefixlen: number; protocol?: number }) => `${a.address}/${a.prefixlen} ${a.protocol ?? 0}`;
  // the link-local may still be coming (DAD): wait for it to be listed (the deadline only bounds
  // a hang — 100 tries of 50 ms were a few seconds of qemu TCG, ~10x slower)
  for (const deadline = Date.now() + 120_000; !(await l.addresses({ link: LINK })).some((a) => a.address.startsWith('fe80:')) && Date.now() < deadline; ) await new Promise((res) => setTimeout(res, 50));
  const ours = (await l.addresses({ link: LINK })).map(text).sort();
  assert.deepEqual(ours, protoAddresses().filter((a) => a.index === link.index).map(text).sort());
  assert.ok(ours.includes('10.96.0.1/32 249') && ours.includes('fd00:96::1/128 249'), ours.join(', '));
  assert.ok(ours.includes('10.96.0.2/32 0'));
  assert.ok(ours.some((a) => /^fe80:\S+\/64 3$/.test(a)), `the kernel's link-local is IFAPROT_KERNEL_LL: ${ours.join(', ')}`);
  assert.ok((await l.apply([{ op: 'delLink', name: LINK }])).ok);
});
