// Runs inside the test VM (node dist/test/vm/cli.js --suite kernel: IPVS + dummy links): the
// engine in bindMode-route shape with the real Ipvs, Links and Routes handles. What the host
// kernel cannot show (no IPVS there): IPVS virtual servers on VIPs that are local only through
// the covering route, ownership of IPVS services through the engine's record after a restart
// (a foreign service inside the owned route is not the engine's), and
// switching to per-VIP addresses without one IPVS write — cross-checked with ipvsadm -Sn,
// ip -j route and ip -j addr.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { Engine, type DesiredState } from '../../src/engine/engine.js';
import type { DesiredService } from '../../src/engine/ipvs-model.js';
import { Ipvs } from '../../src/kernel/ipvs.js';
import { Links } from '../../src/kernel/links.js';
import { Routes } from '../../src/kernel/routes.js';
import { IpSets } from '../../src/kernel/ipsets.js';
import { IPVS_RECORD_SETS } from '../../src/engine/ownership.js';

const run = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const LINK = 'kube-ipvs0';
const CIDRS = ['10.96.0.0/12', 'fd00:96::/108'];

function reset(): void {
  spawnSync('ipvsadm', ['-C']);
  spawnSync('ip', ['link', 'del', LINK]);
  for (const fam of ['-4', '-6']) spawnSync('ip', [fam, 'route', 'flush', 'table', 'local', 'proto', '249']);
  for (const name of IPVS_RECORD_SETS) spawnSync('ipset', ['destroy', name]);
}
after(reset);

function svc(address: string): DesiredService {
  const dest = address.includes(':') ? 'fd00:244::2' : '10.244.1.2';
  return { protocol: 'tcp', address, port: 80, scheduler: 'rr', destinations: [{ address: dest, port: 8080, forward: 'masq', weight: 1 }] };
}

function state(vips: string[], mode: 'route' | 'address'): DesiredState {
  return {
    services: vips.map(svc),
    vips: { link: LINK, addresses: mode === 'address' ? vips : [] },
    routes: { routes: mode === 'route' ? CIDRS.map((dst) => ({ dst, type: 'local' as const, dev: 'lo' })) : [] },
  };
}

const ipvsadm = () => run('ipvsadm', '-Sn').split('\n').filter((l) => l.startsWith('-A')).map((l) => l.replace(/\s+-s.*$/, '')).sort();
const owned = () => ['-4', '-6'].flatMap((f) => (JSON.parse(run('ip', f, '-j', 'route', 'show', 'table', 'local')) as Array<{ type: string; dst: string; dev: string; protocol?: string }>).filter((r) => r.protocol === '249').map((r) => `${r.type} ${r.dst} dev ${r.dev}`)).sort();
const addrs = () => (JSON.parse(run('ip', '-j', 'addr', 'show', 'dev', LINK)) as Array<{ addr_info: Array<{ local: string; prefixlen: number; scope: string }> }>).flatMap((l) => l.addr_info).filter((a) => a.scope === 'global').map((a) => `${a.local}/${a.prefixlen}`).sort();

test('route mode with real IPVS: services on route-local VIPs; a restart deletes a removed service (owned through its record) and spares foreign ones, also inside the route; switching to addresses costs no IPVS write', async () => {
  reset();
  run('ip', 'link', 'set', 'lo', 'up');
  const kernel = { ipvs: await Ipvs.open(), links: await Links.open(), routes: await Routes.open(), ipsets: await IpSets.open() };
  const vips = ['10.96.0.10', '10.96.0.11', 'fd00:96::10'];
  const r1 = await new Engine(kernel).sync(state(vips, 'route'));
  assert.deepEqual(r1.errors, []);
  assert.deepEqual(owned(), ['local 10.96.0.0/12 dev lo', 'local fd00:96::/108 dev lo']);
  assert.deepEqual(addrs(), []);
  assert.deepEqual(ipvsadm(), ['-A -t 10.96.0.10:80', '-A -t 10.96.0.11:80', '-A -t [fd00:96::10]:80']);
  assert.match(run('ip', 'route', 'get', '10.96.0.11'), /^local 10\.96\.0\.11 dev lo/);

  // Foreign services: one outside the CIDRs, one inside the owned route.
  run('ipvsadm', '-A', '-t', '192.0.2.1:80', '-s', 'rr');
  run('ipvsadm', '-A', '-t', '10.96.5.5:80', '-s', 'rr');
  // A restart (nothing in memory) with 10.96.0.11 gone: the record in the kernel makes it ours.
  const r2 = await new Engine(kernel).sync(state(['10.96.0.10', 'fd00:96::10'], 'route'));
  assert.deepEqual(r2.errors, []);
  assert.deepEqual(r2.ipvs.ops, { deleteService: 1 });
  assert.deepEqual(r2.routes.writes, 0);
  assert.deepEqual(ipvsadm(), ['-A -t 10.96.0.10:80', '-A -t 10.96.5.5:80', '-A -t 192.0.2.1:80', '-A -t [fd00:96::10]:80']);

  // To address mode: addresses first, routes after; IPVS untouched.
  const e = new Engine(kernel);
  const r3 = await e.sync(state(['10.96.0.10', 'fd00:96::10'], 'address'));
  assert.deepEqual(r3.errors, []);
  assert.deepEqual([r3.ipvs.writes, r3.addresses.ops, r3.routes.ops], [0, { addAddr: 2 }, { delRoute: 2 }]);
  assert.deepEqual(owned(), []);
  assert.deepEqual(addrs(), ['10.96.0.10/32', 'fd00:96::10/128']);
  // And back.
  const r4 = await e.sync(state(['10.96.0.10', 'fd00:96::10'], 'route'));
  assert.deepEqual([r4.ipvs.writes, r4.addresses.ops, r4.routes.ops], [0, { delAddr: 2 }, { addRoute: 2 }]);
  assert.deepEqual(addrs(), []);
  assert.equal((await e.sync(state(['10.96.0.10', 'fd00:96::10'], 'route'))).routes.writes, 0);
});
