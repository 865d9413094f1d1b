// The engine's routes kind against the in-memory kernel: local routes over service CIDRs are
// added before the IPVS services that need them and removed after; one route dump per sync and
// zero writes when nothing changed; only routes with ipvsync's protocol are ever replaced or
// deleted; switching between binding a VIP per address and one route per CIDR converges both
// ways; services inside owned routes are owned after a restart.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Engine, planWrites, type DesiredState } from '../../src/engine/engine.js';
import type { DesiredService } from '../../src/engine/ipvs-model.js';
import { diffRoutes } from '../../src/engine/routes-diff.js';
import { IPVSYNC_ROUTE_PROTOCOL } from '../../src/kernel/routes.js';
import { fakeKernel } from '../../src/testing/fake-kernel.js';

function svc(address: string, port = 80): DesiredService {
  return { protocol: 'tcp', address, port, scheduler: 'rr', destinations: [{ address: address.includes(':') ? 'fd00:244::1' : '10.244.1.1', port: 8080, forward: 'masq', weight: 1 }] };
}

const CIDRS = ['10.96.0.0/12', 'fd00:96::/108'];
const routeMode = (vips: string[]): DesiredState => ({
  services: vips.map((v) => svc(v)),
  vips: { link: 'kube-ipvs0', addresses: [] },
  routes: { routes: CIDRS.map((dst) => ({ dst, type: 'local' as const, dev: 'lo' })) },
});
const addressMode = (vips: string[]): DesiredState => ({
  services: vips.map((v) => svc(v)),
  vips: { link: 'kube-ipvs0', addresses: vips },
  routes: { routes: [] },
});

test('route mode: one local route per CIDR before IPVS, no addresses; a resync dumps once and writes nothing', async () => {
  const k = fakeKernel();
  const e = new Engine(k);
  const plan = await e.plan(routeMode(['10.96.0.10', 'fd00:96::a']));
  assert.deepEqual(
    planWrites(plan).map((w) => `${w.kind}:${'op' in w.op ? w.op.op : ''}`),
    // the record (one set per family) before IPVS creates the virtual servers
    ['link:addLink', 'link:setLink', 'route:addRoute', 'route:addRoute', 'ipset:create', 'ipset:add', 'ipset:create', 'ipset:add', 'ipvs:addService', 'ipvs:addService', 'ipvs:addDestination', 'ipvs:addDestination'],
  );
  const r1 = await e.apply(plan);
  assert.deepEqual(r1.errors, []);
  assert.deepEqual(r1.routes.ops, { addRoute: 2 });
  assert.deepEqual(
    (await k.routes.list({ protocol: 'ipvsync' })).map((r) => [r.family, r.dst, r.type, r.table, r.dev]),
    [['inet', '10.96.0.0/12', 'local', 255, 'lo'], ['inet6', 'fd00:96::/108', 'local', 255, 'lo']],
  );
  assert.deepEqual(await k.links.addresses({ link: 'kube-ipvs0' }), []);
  const [writes, dumps] = [k.routes.writes, k.routes.dumps];
  const r2 = await e.sync(routeMode(['10.96.0.10', 'fd00:96::a']));
  assert.deepEqual([r2.routes.writes, r2.addresses.writes, r2.ipvs.writes], [0, 0, 0]);
  assert.equal(k.routes.writes, writes, 'no route message at all');
  assert.equal(k.routes.dumps, dumps + 1, 'one route dump per sync');
});

test('a foreign route is never deleted or replaced; a foreign route in the way fails the add with EEXIST', async () => {
  const k = fakeKernel();
  k.routes.seed({ family: 'inet', dst: '10.96.0.0/12', type: 'local', table: 255, protocol: 4, scope: 'host', index: 1, dev: 'lo' });
  k.routes.seed({ family: 'inet', dst: '192.168.0.0/16', type: 'blackhole', table: 254, protocol: 3, scope: 'global' });
  const e = new Engine(k);
  const r = await e.sync(routeMode([]));
  assert.deepEqual(r.errors.map((x) => [x.code, x.op]), [['EEXIST', 'RTM_NEWROUTE 10.96.0.0/12']]);
  assert.deepEqual(r.routes.ops, { addRoute: 1 });
  const all = await k.routes.list();
  assert.ok(all.some((x) => x.dst === '10.96.0.0/12' && x.protocol === 4), 'the foreign local route stays');
  assert.ok(all.some((x) => x.dst === '192.168.0.0/16'), 'the foreign blackhole stays');
  // Back to no routes at all: only the owned one goes.
  const r2 = await e.sync({ services: [], routes: { routes: [] } });
  assert.deepEqual(r2.routes.ops, { delRoute: 1 });
  for (const op of k.routes.log.flat().filter((o) => o.op === 'delRoute')) assert.equal(op.protocol, IPVSYNC_ROUTE_PROTOCOL, 'deletes always name the protocol');
  assert.deepEqual((await k.routes.list()).map((x) => x.dst).sort(), ['10.96.0.0/12', '192.168.0.0/16']);
});

test('an owned route with the wrong link or type is replaced in place (NLM_F_REPLACE), not deleted first', () => {
  const d = diffRoutes(
    { routes: [{ dst: '10.96.0.0/12', type: 'local', dev: 'lo' }, { dst: 'fd00:0096::/108', type: 'local', dev: 'lo' }] },
    [
      { family: 'inet', dst: '10.96.0.0/12', type: 'local', table: 255, protocol: 249, scope: 'host', index: 5, dev: 'kube-ipvs0', flags: 0 },
      { family: 'inet6', dst: 'fd00:96::/108', type: 'local', table: 255, protocol: 249, scope: 'global', index: 1, dev: 'lo', metric: 1024, flags: 0 },
      { family: 'inet', dst: '10.100.0.0/16', type: 'local', table: 255, protocol: 249, scope: 'host', index: 1, dev: 'lo', flags: 0 },
    ],
  );
  assert.deepEqual(d.early, [{ op: 'addRoute', type: 'local', dst: '10.96.0.0/12', table: 255, protocol: 249, dev: 'lo', exist: true }]);
  assert.deepEqual(d.late, [{ op: 'delRoute', dst: '10.100.0.0/16', table: 255, protocol: 249, type: 'local' }]);
});

test('switching address mode -> route mode -> address mode converges; routes go after IPVS, addresses after routes', async () => {
  const k = fakeKernel();
  const e = new Engine(k);
  const vips = ['10.96.0.10', '10.96.0.11', 'fd00:96::a'];
  await e.sync(addressMode(vips));
  assert.equal((await k.links.addresses({ link: 'kube-ipvs0' })).length, 3);
  assert.deepEqual(await k.routes.list({ protocol: 'ipvsync' }), []);

  const toRoute = await e.plan(routeMode(vips));
  assert.deepEqual(
    planWrites(toRoute).map((w) => `${w.kind}:${'op' in w.op ? w.op.op : ''}`),
    ['route:addRoute', 'route:addRoute', 'link:delAddr', 'link:delAddr', 'link:delAddr'],
    'routes come first, the per-VIP addresses go last: every VIP stays local throughout',
  );
  assert.deepEqual((await e.apply(toRoute)).errors, []);
  assert.deepEqual(await k.links.addresses({ link: 'kube-ipvs0' }), []);
  assert.equal((await k.routes.list({ protocol: 'ipvsync' })).length, 2);
  assert.equal((await e.sync(routeMode(vips))).routes.writes, 0);

  const back = await e.plan(addressMode(vips));
  assert.deepEqual(
    planWrites(back).map((w) => `${w.kind}:${'op' in w.op ? w.op.op : ''}`),
    ['link:addAddr', 'link:addAddr', 'link:addAddr', 'route:delRoute', 'route:delRoute'],
  );
  await e.apply(back);
  assert.deepEqual(await k.routes.list({ protocol: 'ipvsync' }), []);
  assert.equal((await k.links.addresses({ link: 'kube-ipvs0' })).length, 3);
});

test('a removed service is deleted after a restart: addresses inside owned local routes are the engine\'s VIPs', async () => {
  const k = fakeKernel();
  await new Engine(k).sync(routeMode(['10.96.0.10', '10.96.0.11']));
  // A foreign service outside the CIDRs must survive.
  await k.ipvs.apply([{ op: 'addService', service: { protocol: 'tcp', address: '192.0.2.1', port: 80, scheduler: 'rr' } }]);
  const fresh = new Engine(k); // a restart: nothing remembered
  const r = await fresh.sync(routeMode(['10.96.0.10']));
  assert.deepEqual(r.ipvs.ops, { deleteService: 1 });
  assert.deepEqual((await k.ipvs.services()).map((s) => s.address).sort(), ['10.96.0.10', '192.0.2.1']);
  // excludeCidrs still win over owned routes.
  await k.ipvs.apply([{ op: 'addService', service: { protocol: 'tcp', address: '10.96.5.5', port: 80, scheduler: 'rr' } }]);
  const r2 = await new Engine(k, { excludeCidrs: ['10.96.5.0/24'] }).sync(routeMode(['10.96.0.10']));
  assert.deepEqual(r2.ipvs.ops, {});
});
