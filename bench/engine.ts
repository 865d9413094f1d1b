// Sync engine benchmark with the real Ipvs + Links + IpSets. Run inside the test VM (IPVS):
//   node dist/test/vm/cli.js -- node dist/bench/engine.js [--sizes 1000,10000] [--dests 10]
// Per size S (services × 10 destinations, a VIP each on kube-ipvs0, one hash:ip,port member
// each): the full first sync; a no-op resync (zero writes: its time is the dumps); one endpoint
// changed through the full path (one dump per kind + diff) and through the incremental path
// (`changed` = that service). Messages are counted by the sockets (socketStats), split into
// reads (plan) and writes (apply). Peer in the same run: `ipvsadm -Sn` (a whole-table read) and
// `ipvsadm -e` (one destination edited by a process). Writes bench/results/engine.json (or, when
// the checkout is read-only as in the VM, prints it between markers for the caller to save).
// Timings inside a VM are distorted; message counts are exact.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as os from 'node:os';
import { Engine, type DesiredState, type SyncReport } from '../src/engine/engine.js';
import type { DesiredService } from '../src/engine/ipvs-model.js';
import { serviceKey } from '../src/engine/ipvs-model.js';
import { Ipvs } from '../src/kernel/ipvs.js';
import { Links } from '../src/kernel/links.js';
import { IpSets } from '../src/kernel/ipsets.js';

const here = dirname(fileURLToPath(import.meta.url));
const RESULTS = join(here, '..', '..', 'bench', 'results');
const LINK = 'kube-ipvs0';
const SET = 'BENCH-VIP';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(name);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : dflt;
}
const sizes = arg('--sizes', '1000,10000').split(',').map(Number);
const perService = Number(arg('--dests', '10'));

function vipOf(i: number): string {
  return `10.96.${(i >> 8) & 255}.${i & 255}`;
}

function desired(n: number): DesiredState {
  const services: DesiredService[] = [];
  for (let i = 0; i < n; i++) {
    services.push({
      protocol: 'tcp',
      address: vipOf(i),
      port: 80,
      scheduler: 'rr',
      destinations: Array.from({ length: perService }, (_, d) => ({ address: `172.16.${d}.${(i % 250) + 1}`, port: 8080 + Math.floor(i / 250), forward: 'masq' as const, weight: 1 })),
    });
  }
  return {
    services,
    vips: { link: LINK, addresses: services.map((s) => (s as { address: string }).address) },
    ipsets: [{ name: SET, type: 'hash:ip,port', family: 'inet', members: services.map((s) => ({ ip: (s as { address: string }).address, proto: 'tcp' as const, port: 80 })) }],
  };
}

function timed(cmd: string, args: string[]): number {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`);
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

function cleanup(): void {
  spawnSync('ipvsadm', ['-C']);
  spawnSync('ip', ['link', 'del', LINK]);
  spawnSync('ipset', ['destroy', SET]);
}

interface Step {
  ms: number;
  planMs: number;
  applyMs: number;
  readMessages: number;
  writeMessages: number;
  writes: number;
  sendmsgCalls: number;
}

async function main(): Promise<void> {
  const ipvs = await Ipvs.open();
  const links = await Links.open();
  const ipsets = await IpSets.open();
  const handles = [ipvs, links, ipsets];
  const stats = () => handles.reduce((a, h) => ({ m: a.m + h.socketStats().messagesSent, s: a.s + h.socketStats().sendmsgCalls }), { m: 0, s: 0 });
  const writesOf = (r: SyncReport) => r.ipvs.writes + r.addresses.writes + r.ipsets.writes;

  async function step(e: Engine, d: DesiredState, changed?: ReadonlySet<string>): Promise<Step> {
    const s0 = stats();
    const t0 = performance.now();
    const plan = await e.plan(d, changed);
    const t1 = performance.now();
    const s1 = stats();
    const r = await e.apply(plan);
    const t2 = performance.now();
    const s2 = stats();
    if (r.errors.length) throw new Error(`sync failed: ${r.errors[0]!.message}`);
    return { ms: t2 - t0, planMs: t1 - t0, applyMs: t2 - t1, readMessages: s1.m - s0.m, writeMessages: s2.m - s1.m, writes: writesOf(r), sendmsgCalls: s2.s - s0.s };
  }

  const rows = [];
  for (const n of sizes) {
    cleanup();
    const e = new Engine({ ipvs, links, ipsets }, { managedCidrs: ['10.96.0.0/12'], ipsetPrefix: 'BENCH-' });
    const d = desired(n);
    const first = await step(e, d);
    const noop = await step(e, d);
    if (noop.writes !== 0 || noop.writeMessages !== 0) throw new Error(`no-op resync wrote ${noop.writes} (${noop.writeMessages} messages)`);
    // One endpoint replaced in the middle service, through the full path.
    const mid = Math.floor(n / 2);
    const svc = d.services[mid]!;
    svc.destinations[0] = { ...svc.destinations[0]!, address: '172.31.0.1' };
    const oneFull = await step(e, d);
    // Another endpoint re-weighted, through the incremental path: the change set names the
    // service and, as the change is an endpoint's, only services are passed (VIPs and sets are
    // left alone: the engine skips a kind that is not in the desired state).
    svc.destinations[1] = { ...svc.destinations[1]!, weight: 5 };
    const oneIncr = await step(e, { services: d.services }, new Set([serviceKey(svc)]));
    // The same through the incremental path with the whole desired state: the service is read
    // with one GET, but VIPs and set members are still read whole (one dump each).
    svc.destinations[2] = { ...svc.destinations[2]!, weight: 4 };
    const oneIncrAll = await step(e, d, new Set([serviceKey(svc)]));
    const after = await step(e, d);
    if (after.writes !== 0) throw new Error('not converged after the one-endpoint changes');
    // Peers, same kernel, same table.
    const ipvsadmSaveMs = timed('ipvsadm', ['-Sn']);
    const ipvsadmEditMs = timed('ipvsadm', ['-e', '-t', `${vipOf(mid)}:80`, '-r', `${svc.destinations[1]!.address}:${svc.destinations[1]!.port}`, '-m', '-w', '6']);
    // (the next sync would put weight 5 back: one SET_DEST — the engine owns the service)
    const row = {
      services: n,
      destinations: n * perService,
      first,
      noop,
      oneEndpointFull: oneFull,
      oneEndpointIncremental: oneIncr,
      oneEndpointIncrementalWholeState: oneIncrAll,
      ipvsadmSaveMs,
      ipvsadmEditMs,
    };
    rows.push(row);
    console.log(`S=${n}: first ${first.ms.toFixed(0)} ms (${first.writes} writes, ${first.writeMessages} write msgs, ${first.sendmsgCalls} sendmsg); no-op ${noop.ms.toFixed(0)} ms (${noop.readMessages} reads, 0 writes); one endpoint full ${oneFull.ms.toFixed(1)} ms (${oneFull.writeMessages} write msgs); incremental ${oneIncr.ms.toFixed(1)} ms (${oneIncr.readMessages} reads + ${oneIncr.writeMessages} writes); incremental with VIPs+sets ${oneIncrAll.ms.toFixed(1)} ms (${oneIncrAll.readMessages} + ${oneIncrAll.writeMessages})`);
  }
  cleanup();

  const f = (x: number) => x.toFixed(x < 10 ? 2 : 0);
  console.log('\n| services × dests | first sync | writes (msgs / sendmsg) | no-op resync (reads, writes) | ipvsadm -Sn | 1 endpoint, full path (write msgs) | 1 endpoint, incremental (reads + writes) | same, VIPs + sets passed too | ipvsadm -e (process) |');
  console.log('|---|---|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(
      `| ${r.services} × ${perService} | ${f(r.first.ms)} ms | ${r.first.writes} (${r.first.writeMessages} / ${r.first.sendmsgCalls}) | ${f(r.noop.ms)} ms (${r.noop.readMessages}, ${r.noop.writeMessages}) | ${f(r.ipvsadmSaveMs)} ms | ${f(r.oneEndpointFull.ms)} ms (${r.oneEndpointFull.writeMessages}) | ${f(r.oneEndpointIncremental.ms)} ms (${r.oneEndpointIncremental.readMessages} + ${r.oneEndpointIncremental.writeMessages}) | ${f(r.oneEndpointIncrementalWholeState.ms)} ms (${r.oneEndpointIncrementalWholeState.readMessages} + ${r.oneEndpointIncrementalWholeState.writeMessages}) | ${f(r.ipvsadmEditMs)} ms |`,
    );
  }
  const out = JSON.stringify({ kernel: `${process.env.IPVSYNC_VM ?? 'host'} ${os.release()}`, date: new Date().toISOString(), perService, rows }, null, 2) + '\n';
  try {
    mkdirSync(RESULTS, { recursive: true });
    writeFileSync(join(RESULTS, 'engine.json'), out);
    console.log(`\nwrote ${join(RESULTS, 'engine.json')}`);
  } catch (e) {
    console.log(`\n(cannot write ${RESULTS}: ${(e as Error).message}; JSON follows)\n---- engine.json ----\n${out}---- end ----`);
  }
}

await main();
