// Routes on the machine's own kernel (private netns, scripts/host-tests.sh), cross-checked with
// iproute2 both ways: what ipvsync writes `ip -j route` reads identically, what `ip route` writes
// ipvsync reads identically; kernel errors keep errno and op index; an engine sync leaves
// foreign routes alone; the route-mode glue, read back with `nft -j`, rejects connections to
// non-service addresses in a locally routed service CIDR while a VIP:port is accepted locally.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createServer, connect, type Server } from 'node:net';
import { Routes, IPVSYNC_ROUTE_PROTOCOL, type Route } from '../../src/kernel/routes.js';
import { Nftables } from '../../src/kernel/nftables.js';
import { NetlinkError } from '../../src/errors.js';
import { Engine } from '../../src/engine/engine.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { IpvsPlane, ROUTE_DEV } from '../../src/proxy/ipvs/plane.js';
import { svc } from '../fixtures/kube/builders.js';

const ip = (...args: string[]) => execFileSync('ip', args, { encoding: 'utf8' });

interface IpRoute { type?: string; dst: string; dev?: string; protocol?: string; scope?: string; metric?: number; prefsrc?: string; gateway?: string; table?: string }

/** `ip -j route show table all` in one normalized text per route; `ours`: only proto 249 (ip
 *  leaves out the fields it filters on, so the filtering happens here). */
function theirs(family: '-4' | '-6', only?: 'ours' | 'local'): string[] {
  const j = JSON.parse(ip(family, '-j', 'route', 'show', 'table', 'all')) as IpRoute[];
  const PROTO: Record<string, number> = { kernel: 2, boot: 3, static: 4 };
  const TABLE: Record<string, number> = { local: 255, main: 254, default: 253 };
  return j
    .map((r) => {
      const host = family === '-6' ? 128 : 32;
      const dst = r.dst === 'default' ? (family === '-6' ? '::/0' : '0.0.0.0/0') : r.dst.includes('/') ? r.dst : `${r.dst}/${host}`;
      const proto = r.protocol === undefined ? 3 : PROTO[r.protocol] ?? Number(r.protocol);
      const table = r.table === undefined ? 254 : TABLE[r.table] ?? Number(r.table);
      return [r.type ?? 'unicast', dst, `table ${table}`, `proto ${proto}`, `scope ${r.scope ?? 'global'}`, r.dev ? `dev ${r.dev}` : '', r.metric !== undefined && r.metric !== 0 ? `metric ${r.metric}` : '', r.prefsrc ? `src ${r.prefsrc}` : '', r.gateway ? `via ${r.gateway}` : ''].filter(Boolean).join(' ');
    })
    .filter((x) => (only === 'ours' ? x.includes(' proto 249 ') : only === 'local' ? x.includes(' table 255 ') : true))
    .sort();
}

function ours(rs: Route[]): string[] {
  return rs
    .map((r) => [r.type, r.dst, `table ${r.table}`, `proto ${r.protocol}`, `scope ${r.scope}`, r.dev ? `dev ${r.dev}` : '', r.metric ? `metric ${r.metric}` : '', r.prefsrc ? `src ${r.prefsrc}` : '', r.gateway ? `via ${r.gateway}` : ''].filter(Boolean).join(' '))
    .sort();
}

const excluding = (a: string[], re: RegExp) => a.filter((x) => !re.test(x));
// ip lists IPv6 multicast/link-local and broadcast routes in `table all`, and ipvsync lists them
// too: compare everything except what the kernel adds for the links on its own (proto kernel
// routes of ff00::/8 and fe80::/64 are comparable too, but they come and go with DAD).
const KERNEL_NOISE = /^(multicast|anycast) |ff00::\/8|fe80::/;

afterEach(() => {
  spawnSync('ip', ['link', 'del', 'vr0']);
  for (const fam of ['-4', '-6'])
    for (const t of ['local', 'main', '1000']) spawnSync('ip', [fam, 'route', 'flush', 'table', t, 'proto', String(IPVSYNC_ROUTE_PROTOCOL)]);
  spawnSync('ip', ['route', 'flush', 'table', '1000']);
  spawnSync('ip', ['-6', 'route', 'flush', 'table', '1000']);
  spawnSync('nft', ['delete', 'table', 'ip', 'ipvsync']);
  spawnSync('nft', ['delete', 'table', 'ip6', 'ipvsync']);
});

function veth(): void {
  ip('link', 'add', 'vr0', 'type', 'veth', 'peer', 'name', 'vr1');
  ip('addr', 'add', '192.0.2.1/24', 'dev', 'vr0');
  ip('-6', 'addr', 'add', '2001:db8::1/64', 'dev', 'vr0', 'nodad');
  ip('link', 'set', 'vr0', 'up');
  ip('link', 'set', 'vr1', 'up');
}

test('routes ipvsync writes are what ip -j route reads (IPv4 and IPv6: local, unicast via dev/gateway, metric, prefsrc, table > 255, blackhole, unreachable)', async () => {
  veth();
  const r = await Routes.open();
  const res = await r.apply([
    { op: 'addRoute', type: 'local', dst: '10.96.0.0/12', dev: 'lo', protocol: 'ipvsync' },
    { op: 'addRoute', type: 'local', dst: 'fd00:96::/108', dev: 'lo', protocol: 'ipvsync' },
    { op: 'addRoute', dst: '198.51.100.0/24', gateway: '192.0.2.2', metric: 50, protocol: 249 },
    { op: 'addRoute', dst: '203.0.113.0/24', dev: 'vr0', prefsrc: '192.0.2.1', table: 1000, protocol: 249 },
    { op: 'addRoute', dst: '2001:db8:1::/64', gateway: '2001:db8::2', metric: 7, protocol: 249 },
    { op: 'addRoute', type: 'blackhole', dst: '10.255.0.0/16', protocol: 249 },
    { op: 'addRoute', type: 'unreachable', dst: 'fd00:ff::/64', table: 1000, protocol: 249 },
  ]);
  assert.deepEqual(res.errors, []);
  assert.ok(res.ok);
  // Ours, both readers, as text.
  const mine = await r.list({ protocol: 'ipvsync' });
  assert.equal(mine.length, 7);
  assert.deepEqual(ours(mine.filter((x) => x.family === 'inet')), theirs('-4', 'ours'));
  assert.deepEqual(ours(mine.filter((x) => x.family === 'inet6')), theirs('-6', 'ours'));
  // Everything, including the kernel's own routes.
  assert.deepEqual(ours(await r.list({ family: 'inet' })), theirs('-4'));
  assert.deepEqual(excluding(ours(await r.list({ family: 'inet6' })), KERNEL_NOISE), excluding(theirs('-6'), KERNEL_NOISE));
  // The filters.
  assert.deepEqual((await r.list({ table: 'local', protocol: 249 })).map((x) => x.dst).sort(), ['10.96.0.0/12', 'fd00:96::/108']);
  assert.deepEqual((await r.list({ table: 1000, family: 'inet6' })).map((x) => x.dst), ['fd00:ff::/64']);
  assert.deepEqual((await r.list({ type: 'blackhole' })).map((x) => x.dst), ['10.255.0.0/16']);
  // A table that does not exist has no routes (a single-family dump filtered by it fails with
  // ENOENT in the kernel; AF_UNSPEC returns nothing).
  assert.deepEqual(await r.list({ table: 4242, family: 'inet' }), []);
  assert.deepEqual(await r.list({ table: 4242, family: 'inet6' }), []);
  assert.deepEqual(await r.list({ table: 4242 }), []);
  // Other GETs on the same handle keep working after the strict-checked dump (link names).
  assert.ok((await r.list({ table: 'local', protocol: 249 })).every((x) => x.dev === 'lo'));
  // The kernel resolves a VIP inside the local route as local.
  assert.match(ip('route', 'get', '10.96.7.7'), /^local 10\.96\.7\.7 dev lo/);
  assert.match(ip('-6', 'route', 'get', 'fd00:96::7'), /^local fd00:96::7 .*dev lo/);
});

test('routes ip route writes are what ipvsync reads', async () => {
  veth();
  ip('route', 'add', 'local', '10.96.0.0/12', 'dev', 'lo', 'table', 'local', 'proto', '249');
  ip('-6', 'route', 'add', 'local', 'fd00:96::/108', 'dev', 'lo', 'table', 'local', 'proto', '249');
  ip('route', 'add', '198.51.100.0/24', 'via', '192.0.2.2', 'metric', '50', 'proto', '249');
  ip('route', 'add', '203.0.113.0/24', 'dev', 'vr0', 'src', '192.0.2.1', 'table', '1000', 'proto', '249');
  ip('-6', 'route', 'add', 'unreachable', 'fd00:ff::/64', 'table', '1000', 'proto', '249');
  const r = await Routes.open();
  const mine = await r.list({ protocol: IPVSYNC_ROUTE_PROTOCOL });
  assert.deepEqual(ours(mine.filter((x) => x.family === 'inet')), theirs('-4', 'ours'));
  assert.deepEqual(ours(mine.filter((x) => x.family === 'inet6')), theirs('-6', 'ours'));
  const local = mine.find((x) => x.dst === '10.96.0.0/12')!;
  assert.deepEqual(
    { type: local.type, table: local.table, scope: local.scope, dev: local.dev, index: local.index },
    { type: 'local', table: 255, scope: 'host', dev: 'lo', index: 1 },
  );
  // And ipvsync deletes them (ip sees them gone).
  const del = await r.apply(mine.map((x) => ({ op: 'delRoute' as const, dst: x.dst, table: x.table, protocol: 249 })));
  assert.ok(del.ok);
  assert.deepEqual(theirs('-4', 'ours'), []);
  assert.deepEqual(theirs('-6', 'ours'), []);
});

test('kernel errors keep errno, op text and op index; stop-on-error and continue; exist replaces; a delete naming our protocol spares a foreign route', async () => {
  veth();
  const r = await Routes.open();
  const res = await r.apply(
    [
      { op: 'addRoute', type: 'local', dst: '10.96.0.0/12', dev: 'lo', protocol: 249 },
      { op: 'addRoute', type: 'local', dst: '10.96.0.0/12', dev: 'lo', protocol: 249 },
      { op: 'delRoute', type: 'local', dst: '10.200.0.0/16', protocol: 249 },
      { op: 'addRoute', dst: '10.1.0.0/16', gateway: '172.31.0.1', protocol: 249 },
      { op: 'addRoute', type: 'local', dst: '10.97.0.0/16', dev: 'nosuchdev0', protocol: 249 },
      { op: 'addRoute', type: 'local', dst: 'fd00:96::/108', dev: 'lo', protocol: 249 },
    ],
    { stopOnError: false },
  );
  assert.deepEqual(
    res.errors.map((e) => [e.index, e.code, e.kind]),
    [[1, 'EEXIST', 'kernel'], [2, 'ESRCH', 'kernel'], [3, 'ENETUNREACH', 'kernel'], [4, 'ENODEV', 'kernel']],
  );
  assert.match(res.errorOf(1)!.op, /RTM_NEWROUTE local 10\.96\.0\.0\/12 dev lo table local proto 249/);
  assert.equal(res.errorOf(3)!.errno, 101);
  assert.deepEqual([0, 5].map((i) => res.status(i)), ['ok', 'ok']);
  // Stop on the first error: nothing after it is sent (a link that does not resolve fails
  // before the batch goes out; a kernel failure: test/host/stop-on-error.test.ts).
  const stop = await r.apply([
    { op: 'addRoute', type: 'local', dst: '10.97.0.0/16', dev: 'nosuchdev0', protocol: 249 },
    { op: 'addRoute', type: 'local', dst: '10.98.0.0/16', dev: 'lo', protocol: 249 },
  ]);
  assert.deepEqual([stop.status(0), stop.status(1)], ['error', 'not-sent']);
  assert.ok(!theirs('-4', 'local').some((x) => x.includes('10.98.0.0')));
  // exist: replaced in place (the link changes), no error.
  const rep = await r.apply([{ op: 'addRoute', type: 'local', dst: '10.96.0.0/12', dev: 'vr0', protocol: 249, exist: true }]);
  assert.ok(rep.ok);
  assert.ok(theirs('-4', 'local').includes('local 10.96.0.0/12 table 255 proto 249 scope host dev vr0'));
  // A foreign local route: a delete that names our protocol fails with ESRCH and leaves it.
  ip('route', 'add', 'local', '10.100.0.0/16', 'dev', 'lo', 'table', 'local', 'proto', 'static');
  const spare = await r.apply([{ op: 'delRoute', type: 'local', dst: '10.100.0.0/16', protocol: 249 }]);
  assert.equal(spare.errorOf(0)?.code, 'ESRCH');
  assert.ok(theirs('-4', 'local').includes('local 10.100.0.0/16 table 255 proto 4 scope host dev lo'));
  ip('route', 'del', 'local', '10.100.0.0/16', 'dev', 'lo', 'table', 'local');
  // Validation: nothing is sent.
  const before = r.socketStats().messagesSent;
  await assert.rejects(r.apply([{ op: 'addRoute', type: 'local', dst: '10.96.0.0/33', dev: 'lo' }]), (e: unknown) => e instanceof NetlinkError && e.kind === 'invalid');
  await assert.rejects(r.apply([{ op: 'addRoute', dst: '10.96.0.0/12', dev: 'lo', prefsrc: 'fd00::1' }]), /mixed IPv4 and IPv6/);
  await assert.rejects(r.apply([{ op: 'addAddr', link: 'lo', address: '10.0.0.1' } as never]), /not a route op/);
  assert.equal(r.socketStats().messagesSent, before);
});

test('an engine sync owns only protocol-249 routes: foreign routes survive; resync writes nothing; an empty desired list removes only ours', async () => {
  veth();
  ip('route', 'add', 'local', '10.100.0.0/16', 'dev', 'lo', 'table', 'local', 'proto', 'static');
  ip('route', 'add', '203.0.113.0/24', 'dev', 'vr0');
  ip('-6', 'route', 'add', 'local', 'fd00:100::/64', 'dev', 'lo', 'table', 'local');
  const foreign = () => [...theirs('-4'), ...excluding(theirs('-6'), KERNEL_NOISE)].filter((x) => !x.includes('proto 249'));
  const before = foreign();
  const routes = await Routes.open();
  const e = new Engine({ ipvs: new FakeIpvs(), routes });
  const want = { services: [], routes: { routes: [{ dst: '10.96.0.0/12', type: 'local' as const, dev: 'lo' }, { dst: 'fd00:96::/108', type: 'local' as const, dev: 'lo' }] } };
  const r1 = await e.sync(want);
  assert.deepEqual(r1.errors, []);
  assert.deepEqual(r1.routes.ops, { addRoute: 2 });
  assert.deepEqual(theirs('-4', 'ours'), ['local 10.96.0.0/12 table 255 proto 249 scope host dev lo']);
  assert.deepEqual(theirs('-6', 'ours'), ['local fd00:96::/108 table 255 proto 249 scope global dev lo metric 1024']);
  const sent = routes.socketStats().messagesSent;
  const r2 = await e.sync(want);
  assert.equal(r2.routes.writes, 0);
  assert.equal(routes.socketStats().messagesSent - sent, 2, 'one link dump + one route dump request, no write');
  // One CIDR fewer, then none.
  assert.deepEqual((await e.sync({ services: [], routes: { routes: [want.routes.routes[0]!] } })).routes.ops, { delRoute: 1 });
  assert.deepEqual((await e.sync({ services: [], routes: { routes: [] } })).routes.ops, { delRoute: 1 });
  assert.deepEqual([...theirs('-4', 'ours'), ...theirs('-6', 'ours')], []);
  assert.deepEqual(foreign(), before, 'foreign routes untouched');
});

/** The desired state of the IPVS data plane for one dual-stack service at 8080, in a bind mode. */
function desiredOf(bindMode: 'address' | 'route') {
  const web = svc('web', { clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10', 'fd00:96::a'], ipFamilies: ['IPv4', 'IPv6'], ipFamilyPolicy: 'RequireDualStack', ports: [{ name: 'http', port: 8080 }] });
  const plane = new IpvsPlane({ vipLink: 'kube-ipvs0', glue: true, kubeIpsets: false, bindMode });
  const config = { serviceCIDRs: ['10.96.0.0/12', 'fd00:96::/108'] };
  return plane.step(true, new Set(), { node: { name: 'n', addresses: [] }, config, serviceCIDRs: undefined, size: 1, names: () => ['default/web'], objectsOf: () => ({ svc: web, slices: [] }) }).desired;
}

/** A source of the node's that is no cluster IP: the node's traffic from a cluster IP itself
 *  (the source the kernel picks for a local destination) is masqueraded when there is no
 *  cluster CIDR (kube-proxy's KUBE-CLUSTER-IP src,dst), and on lo — where the local server
 *  standing in for IPVS is — masquerade has no address to take. */
const CLIENT = { v4: '192.0.2.1', v6: 'fd00:2::1' };

/** Connects and reports 'connected' or the error code. */
function tryConnect(host: string, port: number): Promise<string> {
  for (const [a, len] of [[CLIENT.v4, 32], [CLIENT.v6, 128]] as const) spawnSync('ip', ['addr', 'add', `${a}/${len}`, 'dev', 'lo', ...(len === 128 ? ['nodad'] : [])]);
  return new Promise((resolve) => {
    // the idle timeout only bounds a hang: every outcome asserted is a connect or a refusal
    const s = connect({ host, port, timeout: 60_000, localAddress: host.includes(':') ? CLIENT.v6 : CLIENT.v4 });
    s.once('connect', () => {
      s.destroy();
      resolve('connected');
    });
    s.once('timeout', () => {
      s.destroy();
      resolve('timeout');
    });
    s.once('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
  });
}

test('route-mode glue: nft -j shows the service-cidrs set and rule; a non-service address in the CIDR is rejected, a VIP:port is accepted locally, a wrong port on a VIP rejected', async () => {
  const routes = await Routes.open();
  const nft = await Nftables.open();
  const e = new Engine({ ipvs: new FakeIpvs(), routes, nft });
  const desired = desiredOf('route');
  assert.deepEqual(desired.vips?.addresses, [], 'VIPs inside the service CIDRs are not addresses');
  const { vips: _unused, ...noLink } = { ...desired, services: [] }; // no IPVS on this kernel // no dummy links on this kernel; the VM suites cover kube-ipvs0
  // A local server on every address stands in for IPVS (there is none on this kernel): what the
  // glue lets through is delivered locally because the route makes the whole CIDR local.
  const servers: Server[] = [];
  for (const [host, port] of [['0.0.0.0', 8080], ['::', 8080], ['0.0.0.0', 9090]] as const) {
    const s = createServer((c) => {
      c.on('error', () => undefined); // a probe that closes at once resets the connection
      c.end('hi');
    });
    await new Promise<void>((res) => s.listen({ host, port, ipv6Only: host === '::' }, res));
    servers.push(s);
  }
  try {
    // Route first, without glue: the whole CIDR is local, non-service addresses included.
    await e.sync({ ...noLink, nft: undefined });
    assert.equal(ROUTE_DEV, 'lo');
    assert.equal(await tryConnect('10.96.0.99', 8080), 'connected', 'the local route makes the whole CIDR local');
    assert.equal(await tryConnect('fd00:96::99', 8080), 'connected');

    const r = await e.sync(noLink);
    assert.deepEqual(r.errors, []);
    for (const [fam, cidr, addr] of [['ip', '10.96.0.0', 'ipv4_addr'], ['ip6', 'fd00:96::', 'ipv6_addr']] as const) {
      const j = JSON.parse(execFileSync('nft', ['-j', 'list', 'table', fam, 'ipvsync'], { encoding: 'utf8' })) as { nftables: Array<Record<string, any>> };
      const set = j.nftables.find((o) => o.set?.name === 'service-cidrs')?.set;
      assert.ok(set, `${fam}: service-cidrs set`);
      assert.equal(set.type, addr);
      assert.deepEqual(set.flags, ['interval']);
      assert.deepEqual(set.elem, [{ prefix: { addr: cidr, len: fam === 'ip' ? 12 : 108 } }]);
      const rules = j.nftables.filter((o) => o.rule?.chain === 'input').map((o) => JSON.stringify(o.rule.expr));
      const rule = rules.find((x) => x.includes('@service-cidrs'));
      assert.ok(rule, `${fam}: the reject rule`);
      assert.match(rule, /"ct".*"new"/);
      assert.match(rule, /"op":"!=".*"@vips"/);
      assert.match(rule, /"reject"/);
    }
    assert.equal(await tryConnect('10.96.0.10', 8080), 'connected', 'VIP:port accepted');
    assert.equal(await tryConnect('fd00:96::a', 8080), 'connected', 'IPv6 VIP:port accepted');
    assert.equal(await tryConnect('10.96.0.99', 8080), 'ECONNREFUSED', 'non-service address rejected');
    assert.equal(await tryConnect('fd00:96::99', 8080), 'ECONNREFUSED', 'IPv6 non-service address rejected');
    assert.equal(await tryConnect('10.96.0.10', 9090), 'ECONNREFUSED', 'wrong port on a VIP rejected');
    assert.equal(await tryConnect('127.0.0.1', 9090), 'connected', 'other local traffic untouched');
    // An established connection to the VIP keeps working (replies are not new).
    const echoed = await new Promise<string>((resolve, reject) => {
      const s = connect({ host: '10.96.0.10', port: 8080 });
      let got = '';
      s.on('data', (d) => (got += d));
      s.on('end', () => resolve(got));
      s.on('error', reject);
    });
    assert.equal(echoed, 'hi');
    // Resync: nothing to write.
    const again = await e.sync(noLink);
    assert.deepEqual([again.routes.writes, again.nft.writes], [0, 0]);
    // Address mode again: the routes go, the glue loses the CIDR rule (rebuilt in one transaction).
    const addr = desiredOf('address');
    const back = await e.sync({ services: [], routes: addr.routes!, nft: addr.nft! });
    assert.deepEqual(back.errors, []);
    assert.deepEqual(back.routes.ops, { delRoute: 2 });
    assert.deepEqual([...theirs('-4', 'ours'), ...theirs('-6', 'ours')], []);
    assert.ok(!execFileSync('nft', ['list', 'table', 'ip', 'ipvsync'], { encoding: 'utf8' }).includes('service-cidrs'));
  } finally {
    for (const s of servers) s.close();
  }
});
