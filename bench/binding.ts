// Binding N ClusterIPs: bindMode 'address' (N /32 addresses on the VIP link, as kube-proxy) vs
// bindMode 'route' (one local route covering the service CIDR), through the engine, on the
// machine's own kernel in a private network namespace; peers in the same run: `ip -batch` of
// the N `addr add` lines, and `ip route add local CIDR dev lo` for the route.
//   npx tsc -p . && sudo node dist/bench/binding.js [sizes=1000,10000,20000] [rounds=3] [addressOnly=50000]
// The host kernel has no dummy type: a bridge link named kube-ipvs0 stands in (the engine
// creates the link only when it is missing). IPVS is absent here too: the engine runs with an
// in-memory IPVS and no services, so the figures are the binding alone. Columns: first sync
// (bind every VIP), resync (nothing to change: one address dump + one route dump, the route dump
// also timed alone), and the
// peer's whole-process time. Writes bench/results/binding.json.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Engine, type DesiredState } from '../src/engine/engine.js';
import { Links } from '../src/kernel/links.js';
import { Routes } from '../src/kernel/routes.js';
import { FakeIpvs } from '../src/testing/fake-ipvs.js';
import { median } from './lib/median.js';

if (process.env.IPVSYNC_BENCH_NETNS !== '1') {
  const r = spawnSync('unshare', ['-n', process.execPath, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, IPVSYNC_BENCH_NETNS: '1' },
  });
  process.exit(r.status ?? 1);
}

const SIZES = (process.argv[2] ?? '1000,10000,20000').split(',').map(Number);
const ROUNDS = Number(process.argv[3] ?? 3);
const ADDRESS_ONLY = process.argv[4] ? process.argv[4].split(',').map(Number) : [];
const LINK = 'kube-ipvs0';
const CIDR = '10.96.0.0/12';
const ms = (t: bigint) => Number(process.hrtime.bigint() - t) / 1e6;

function vips(n: number): string[] {
  // 10.96.0.1, 10.96.0.2, …: 10.96.0.0/12 holds a million.
  const base = (10 << 24) | (96 << 16);
  return Array.from({ length: n }, (_, i) => {
    const v = base + i + 1;
    return `${(v >>> 24) & 255}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
  });
}

function fresh(): void {
  spawnSync('ip', ['link', 'del', LINK]);
  execFileSync('ip', ['link', 'add', LINK, 'type', 'bridge']);
  execFileSync('ip', ['link', 'set', LINK, 'up']);
  spawnSync('ip', ['route', 'flush', 'table', 'local', 'proto', '249']);
}

const addrCount = () => execFileSync('ip', ['-o', 'addr', 'show', 'dev', LINK, 'scope', 'global'], { encoding: 'utf8', maxBuffer: 1 << 30 }).split('\n').filter(Boolean).length;
const routeThere = () => execFileSync('ip', ['route', 'show', 'table', 'local', 'proto', '249'], { encoding: 'utf8' }).includes(CIDR);

interface Row {
  n: number;
  address_first_ms: number;
  address_resync_ms: number;
  address_route_dump_ms: number;
  ip_batch_ms: number;
  route_first_ms?: number;
  route_resync_ms?: number;
  ip_route_ms?: number;
  address_over_route?: number;
  rounds: number;
  all: Record<string, number[]>;
}

async function main(): Promise<void> {
  execFileSync('ip', ['link', 'set', 'lo', 'up']);
  const dir = join(tmpdir(), `ipvsync-bench-binding-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const links = await Links.open();
  const routes = await Routes.open();
  const rows: Row[] = [];
  const sizes = [...SIZES.map((n) => ({ n, route: true })), ...ADDRESS_ONLY.map((n) => ({ n, route: false }))];
  for (const { n, route } of sizes) {
    const list = vips(n);
    if (new Set(list).size !== n) throw new Error('duplicate VIPs');
    const addressMode: DesiredState = { services: [], vips: { link: LINK, addresses: list }, routes: { routes: [] } };
    const routeMode: DesiredState = { services: [], vips: { link: LINK, addresses: [] }, routes: { routes: [{ dst: CIDR, type: 'local', dev: 'lo' }] } };
    const file = join(dir, 'batch.txt');
    writeFileSync(file, list.map((a) => `addr add ${a}/32 dev ${LINK}\n`).join(''));
    const rounds = route ? ROUNDS : 1;
    const t: Record<string, number[]> = { address_first: [], address_resync: [], address_route_dump: [], ip_batch: [], route_first: [], route_resync: [], ip_route: [] };
    for (let r = 0; r < rounds; r++) {
      // address mode through the engine
      fresh();
      let e = new Engine({ ipvs: new FakeIpvs(), links, routes });
      let t0 = process.hrtime.bigint();
      let rep = await e.sync(addressMode);
      t.address_first!.push(ms(t0));
      if (rep.errors.length) throw rep.errors[0];
      if (addrCount() !== n) throw new Error('the engine did not bind every VIP');
      t0 = process.hrtime.bigint();
      rep = await e.sync(addressMode);
      t.address_resync!.push(ms(t0));
      if (rep.addresses.writes !== 0) throw new Error('address resync wrote');
      // What looking for stale owned routes costs in address mode: the dump walks the N local
      // routes the kernel made for the addresses (filtered here, none is ours).
      t0 = process.hrtime.bigint();
      if ((await routes.list({ protocol: 249 })).length !== 0) throw new Error('owned routes in address mode');
      t.address_route_dump!.push(ms(t0));
      // the peer: ip -batch
      fresh();
      t0 = process.hrtime.bigint();
      execFileSync('ip', ['-batch', file]);
      t.ip_batch!.push(ms(t0));
      if (addrCount() !== n) throw new Error('ip -batch did not add every address');
      if (!route) continue;
      // route mode through the engine: the same VIPs are all local through one route
      fresh();
      e = new Engine({ ipvs: new FakeIpvs(), links, routes });
      t0 = process.hrtime.bigint();
      rep = await e.sync(routeMode);
      t.route_first!.push(ms(t0));
      if (rep.errors.length) throw rep.errors[0];
      if (!routeThere()) throw new Error('no local route');
      const probe = list[list.length - 1]!;
      if (!execFileSync('ip', ['route', 'get', probe], { encoding: 'utf8' }).startsWith(`local ${probe}`)) throw new Error(`${probe} is not local`);
      t0 = process.hrtime.bigint();
      rep = await e.sync(routeMode);
      t.route_resync!.push(ms(t0));
      if (rep.routes.writes !== 0) throw new Error('route resync wrote');
      // the peer: one ip route add
      fresh();
      t0 = process.hrtime.bigint();
      execFileSync('ip', ['route', 'add', 'local', CIDR, 'dev', 'lo', 'table', 'local', 'proto', '249']);
      t.ip_route!.push(ms(t0));
    }
    const m = (k: string) => +median(t[k]!).toFixed(2);
    const row: Row = { n, address_first_ms: m('address_first'), address_resync_ms: m('address_resync'), address_route_dump_ms: m('address_route_dump'), ip_batch_ms: m('ip_batch'), rounds, all: Object.fromEntries(Object.entries(t).filter(([, v]) => v.length).map(([k, v]) => [k, v.map((x) => +x.toFixed(2))])) };
    if (route) {
      row.route_first_ms = m('route_first');
      row.route_resync_ms = m('route_resync');
      row.ip_route_ms = m('ip_route');
      row.address_over_route = +(row.address_first_ms / row.route_first_ms).toFixed(0);
    }
    rows.push(row);
    console.error(`done n=${n}${route ? '' : ' (address mode only)'}`);
  }
  spawnSync('ip', ['link', 'del', LINK]);
  rmSync(dir, { recursive: true, force: true });
  const kernel = execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim();
  console.log(`kernel ${kernel}, private netns, IPv4, median of ${ROUNDS} (address-mode-only sizes: 1 round)`);
  console.log('| VIPs | address mode: engine first sync | ip -batch (peer) | ip -batch / engine | address resync (of which route dump) | route mode: engine first sync | ip route add (peer, process) | route resync | address / route (first sync) |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    const f = (x?: number) => (x === undefined ? '–' : `${x} ms`);
    console.log(`| ${r.n} | ${f(r.address_first_ms)} (${((r.address_first_ms * 1000) / r.n).toFixed(1)} µs/VIP) | ${f(r.ip_batch_ms)} | ${(r.ip_batch_ms / r.address_first_ms).toFixed(2)}x | ${f(r.address_resync_ms)} (${f(r.address_route_dump_ms)}) | ${f(r.route_first_ms)} | ${f(r.ip_route_ms)} | ${f(r.route_resync_ms)} | ${r.address_over_route ? `${r.address_over_route}x` : '–'} |`);
  }
  mkdirSync('bench/results', { recursive: true });
  writeFileSync('bench/results/binding.json', JSON.stringify({ bench: 'binding', kernel, date: new Date().toISOString(), cidr: CIDR, rows }, null, 2) + '\n');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
