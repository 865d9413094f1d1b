// nftables: ipvsync vs `nft` on the machine's own kernel, in a private network namespace, in the
// same run. A proxy-shaped ruleset of N services (default 10k): two verdict maps of N elements
// (VIP . proto . port, and NodePort proto . port), a chain per service with three rules, base
// chains in nat prerouting/output/postrouting and filter forward.
//   1. full load: ipvsync (build the transaction + one atomic commit) vs `nft -f` of the same
//      ruleset as nft text (whole process). The transaction is built with keepOps: false, as a
//      bulk load that only commits would: each op is encoded when queued and its objects are
//      garbage at once, and the addon encodes the stream to netlink while it is being built.
//   2. single element update with the full ruleset loaded: ipvsync commit of one element vs
//      starting `nft add element` (whole process).
// ipvsync's full-load runs follow WARMUP loads (default 3) in the same process, as a daemon
// reprograms in a warm process; the first, cold load (JIT not yet warm) is reported as well.
// Every nft run is a fresh process, as nft always is.
// Usage (root): node dist/bench/nftables.js [services=10000] [nftUpdates=5] [fullLoadRuns=7] [warmup=3]
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Benchmark from 'benchmark';
import { Nftables, NftTransaction, type SetSpec } from '../src/kernel/nftables.js';
import * as R from '../src/kernel/nft-rules.js';
import { median } from './lib/median.js';

if (process.env.IPVSYNC_BENCH_NETNS !== '1') {
  // Re-run inside a private network namespace so the host's ruleset is never touched.
  const r = spawnSync('unshare', ['-n', process.execPath, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, IPVSYNC_BENCH_NETNS: '1' },
  });
  process.exit(r.status ?? 1);
}

const N = Number(process.argv[2] ?? 10_000);
const NFT_UPDATES = Number(process.argv[3] ?? 5);
const RUNS = Number(process.argv[4] ?? 7);
const WARMUP = Number(process.argv[5] ?? 3);
const T = 'bench';
const F = R.F;
const vip = (i: number) => `10.96.${(i >> 8) & 255}.${i & 255}`;
const ep = (i: number) => `10.244.${(i >> 8) & 255}.${i & 255}`;
const nodePort = (i: number) => 10_000 + i;

const services: SetSpec = { family: 'ip', table: T, name: 'services', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict' };
const nodeports: SetSpec = { family: 'ip', table: T, name: 'nodeports', key: ['inet_proto', 'inet_service'], map: 'verdict' };
// A plain set (no verdicts): adding to it does not make the kernel re-validate the table's
// jump graph, which a verdict-map element with goto/jump does (nf_tables_validate walks every
// chain reachable from the base chains: ~tens of ms at 10k chains, for ipvsync and nft alike).
const external: SetSpec = { family: 'ip', table: T, name: 'external-ips', key: ['ipv4_addr', 'inet_proto', 'inet_service'] };

function transaction(): NftTransaction {
  const tx = new NftTransaction({ keepOps: false }).addTable({ family: 'ip', name: T });
  for (let i = 0; i < N; i++) tx.addChain({ family: 'ip', table: T, name: `svc-${i}` });
  tx.addChain({ family: 'ip', table: T, name: 'nodeports-chain' })
    .addChain({ family: 'ip', table: T, name: 'prerouting', hook: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } })
    .addChain({ family: 'ip', table: T, name: 'output', hook: { type: 'nat', hook: 'output', priority: -100, policy: 'accept' } })
    .addChain({ family: 'ip', table: T, name: 'postrouting', hook: { type: 'nat', hook: 'postrouting', priority: 100, policy: 'accept' } })
    .addChain({ family: 'ip', table: T, name: 'forward', hook: { type: 'filter', hook: 'forward', priority: 0, policy: 'accept' } })
    .addSet(services)
    .addSet(external)
    .addSet(nodeports);
  const svcEls = [];
  const npEls = [];
  for (let i = 0; i < N; i++) {
    svcEls.push({ key: [vip(i), 'tcp', 80], verdict: { code: 'goto' as const, chain: `svc-${i}` } });
    npEls.push({ key: ['tcp', nodePort(i)], verdict: { code: 'goto' as const, chain: `svc-${i}` } });
  }
  tx.addElements(services, svcEls).addElements(nodeports, npEls).addElements(external, [{ key: ['192.0.2.1', 'tcp', 80] }]);
  for (let i = 0; i < N; i++) {
    const chain = `svc-${i}`;
    tx.addRule({ family: 'ip', table: T, chain, exprs: R.rule(R.match(F.ipSaddr, '10.244.0.0/16', 'neq'), R.setMarkBits(0x4000)) })
      .addRule({ family: 'ip', table: T, chain, exprs: R.rule(R.counter(), R.match(F.l4proto, 'tcp'), R.dnat('ip', ep(i), 8080)) })
      .addRule({ family: 'ip', table: T, chain, exprs: [R.drop()] });
  }
  const r = (chain: string, exprs: ReturnType<typeof R.rule>) => tx.addRule({ family: 'ip', table: T, chain, exprs });
  r('prerouting', R.vmap([F.ipDaddr, F.l4proto, F.thDport], 'services'));
  r('prerouting', R.rule(R.fibDaddrType('local'), R.jump('nodeports-chain')));
  r('output', R.vmap([F.ipDaddr, F.l4proto, F.thDport], 'services'));
  r('output', R.rule(R.fibDaddrType('local'), R.jump('nodeports-chain')));
  r('nodeports-chain', R.vmap([F.l4proto, F.thDport], 'nodeports'));
  r('postrouting', R.rule(R.markMatch('meta', 0x4000), R.masquerade({ fullyRandom: true })));
  r('forward', R.rule(R.ctState('established', 'related'), R.accept()));
  r('forward', R.rule(R.inSet([F.ipDaddr, F.l4proto, F.thDport], 'external-ips'), R.accept()));
  return tx;
}

function nftText(): string {
  const out: string[] = [`table ip ${T} {`];
  out.push('  map services {', '    type ipv4_addr . inet_proto . inet_service : verdict', '    elements = {');
  for (let i = 0; i < N; i++) out.push(`      ${vip(i)} . tcp . 80 : goto svc-${i},`);
  out.push('    }', '  }');
  out.push('  set external-ips {', '    type ipv4_addr . inet_proto . inet_service', '    elements = { 192.0.2.1 . tcp . 80 }', '  }');
  out.push('  map nodeports {', '    type inet_proto . inet_service : verdict', '    elements = {');
  for (let i = 0; i < N; i++) out.push(`      tcp . ${nodePort(i)} : goto svc-${i},`);
  out.push('    }', '  }');
  for (let i = 0; i < N; i++)
    out.push(
      `  chain svc-${i} {`,
      '    ip saddr != 10.244.0.0/16 meta mark set mark | 0x4000',
      `    counter meta l4proto tcp dnat to ${ep(i)}:8080`,
      '    drop',
      '  }',
    );
  out.push(
    '  chain nodeports-chain {',
    '    meta l4proto . th dport vmap @nodeports',
    '  }',
    '  chain prerouting {',
    '    type nat hook prerouting priority dstnat; policy accept;',
    '    ip daddr . meta l4proto . th dport vmap @services',
    '    fib daddr type local jump nodeports-chain',
    '  }',
    '  chain output {',
    '    type nat hook output priority -100; policy accept;',
    '    ip daddr . meta l4proto . th dport vmap @services',
    '    fib daddr type local jump nodeports-chain',
    '  }',
    '  chain postrouting {',
    '    type nat hook postrouting priority srcnat; policy accept;',
    '    meta mark & 0x4000 == 0x4000 masquerade fully-random',
    '  }',
    '  chain forward {',
    '    type filter hook forward priority filter; policy accept;',
    '    ct state established,related accept',
    '    ip daddr . meta l4proto . th dport @external-ips accept',
    '  }',
    '}',
  );
  return out.join('\n') + '\n';
}

const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;
const flush = () => execFileSync('nft', ['flush', 'ruleset']);
type NftJson = { nftables: Array<Record<string, Record<string, unknown>>> };
const listJson = (): NftJson => JSON.parse(execFileSync('nft', ['-j', 'list', 'ruleset'], { encoding: 'utf8', maxBuffer: 1 << 30 })) as NftJson;
const count = (j: NftJson) => ({ rules: j.nftables.filter((o) => 'rule' in o).length, chains: j.nftables.filter((o) => 'chain' in o).length });
/** The ruleset as `nft -j` lists it, without what differs between two identical loads (handles,
 *  the order a hash set lists its elements in), as one comparable string. */
function content(j: NftJson): string {
  const strip = (x: unknown): unknown => {
    if (Array.isArray(x)) return x.map(strip);
    if (x && typeof x === 'object') {
      const o: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(x)) if (k !== 'handle') o[k] = k === 'elem' && Array.isArray(v) ? v.map((e) => JSON.stringify(strip(e))).sort() : strip(v);
      return o;
    }
    return x;
  };
  return JSON.stringify(j.nftables.filter((o) => !('metainfo' in o)).map(strip));
}
/** CPU seconds (user, sys) of this process's waited-for children, from /proc/self/stat. */
function childCpu(): { user: number; sys: number } {
  const f = readFileSync('/proc/self/stat', 'utf8');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  const hz = 100; // USER_HZ
  return { user: Number(fields[13]) / hz, sys: Number(fields[14]) / hz };
}

async function main(): Promise<void> {
  const nft = await Nftables.open();
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-bench-'));
  const file = join(dir, 'ruleset.nft');
  writeFileSync(file, nftText());

  // 0. warm-up loads of ipvsync (the first is the cold load, reported on its own).
  const warmup: number[] = [];
  for (let r = 0; r < WARMUP; r++) {
    flush();
    const t0 = process.hrtime.bigint();
    const res = await nft.commit(transaction());
    if (!res.ok) throw res.errors[0];
    warmup.push(ms(t0));
  }

  // 1. full load. The tools alternate run by run, so load from other processes on the machine
  // hits both alike; every run starts from an empty ruleset.
  const oursLoad: number[] = [];
  const oursBuild: number[] = [];
  const oursCpu: Array<{ user: number; sys: number }> = [];
  const oursPerOpAcks: number[] = [];
  const theirsLoad: number[] = [];
  const theirsCpu: Array<{ user: number; sys: number }> = [];
  let sendmsgCalls = 0;
  let ops = 0;
  let ours = { rules: 0, chains: 0 };
  let theirs = { rules: 0, chains: 0 };
  let oursContent = '';
  for (let r = 0; r < RUNS; r++) {
    flush();
    const u0 = process.resourceUsage();
    const t0 = process.hrtime.bigint();
    const tx = transaction();
    const t1 = process.hrtime.bigint();
    const res = await nft.commit(tx);
    const total = ms(t0);
    const u1 = process.resourceUsage();
    if (!res.ok) throw res.errors[0];
    oursLoad.push(total);
    oursBuild.push(Number(t1 - t0) / 1e6);
    oursCpu.push({ user: (u1.userCPUTime - u0.userCPUTime) / 1e6, sys: (u1.systemCPUTime - u0.systemCPUTime) / 1e6 });
    sendmsgCalls = res.sendmsgCalls;
    ops = tx.size;
    if (r === 0) {
      const j = listJson();
      ours = count(j);
      oursContent = content(j);
    }

    flush();
    const c0 = childCpu();
    const t2 = process.hrtime.bigint();
    execFileSync('nft', ['-f', file]);
    theirsLoad.push(ms(t2));
    const c1 = childCpu();
    theirsCpu.push({ user: c1.user - c0.user, sys: c1.sys - c0.sys });
    if (r === 0) {
      const j = listJson();
      theirs = count(j);
      if (process.env.IPVSYNC_BENCH_DUMP) {
        writeFileSync(join(dir, 'ours.json'), oursContent.replaceAll('},{', '},\n{'));
        writeFileSync(join(dir, 'theirs.json'), content(j).replaceAll('},{', '},\n{'));
        console.log(`dumped to ${dir}`);
      }
      if (content(j) !== oursContent || theirs.rules !== ours.rules || theirs.chains !== ours.chains)
        throw new Error(`ipvsync and nft -f loaded different rulesets: ipvsync ${JSON.stringify(ours)} vs nft ${JSON.stringify(theirs)}`);
    }
  }
  // per-op acks (acks: true), for reference
  for (let r = 0; r < Math.min(RUNS, 3); r++) {
    flush();
    const t0 = process.hrtime.bigint();
    const res = await nft.commit(transaction(), { acks: true });
    if (!res.ok) throw res.errors[0];
    oursPerOpAcks.push(ms(t0));
  }
  flush();
  execFileSync('nft', ['-f', file]); // the single-update part runs on the loaded ruleset

  // 2. single element update on the loaded ruleset (loaded by nft -f above): one add + one
  // delete per cycle, each its own transaction.
  let k = 0;
  const micro = (name: string, set: SetSpec, mk: (i: number) => { key: (string | number)[]; verdict?: { code: 'goto'; chain: string } }) =>
    new Promise<Benchmark>((resolve) => {
      const b = new Benchmark(name, {
        defer: true,
        minSamples: 30,
        fn: (d: { resolve(): void }) => {
          const el = [mk(N + (k++ % 1000))];
          void nft
            .commit(new NftTransaction().addElements(set, el))
            .then((r) => (r.ok ? nft.commit(new NftTransaction().deleteElements(set, el)) : Promise.reject(r.errors[0])))
            .then((r) => (r.ok ? d.resolve() : Promise.reject(r.errors[0])));
        },
        onComplete: () => resolve(b),
      });
      b.run({ async: true });
    });
  const updPlain = await micro('plain set element', external, (i) => ({ key: [vip(i), 'tcp', 80] }));
  const updVmap = await micro('verdict map element', services, (i) => ({ key: [vip(i), 'tcp', 80], verdict: { code: 'goto', chain: 'svc-0' } }));
  const oursPlainMs = (updPlain.stats.mean * 1000) / 2;
  const oursVmapMs = (updVmap.stats.mean * 1000) / 2;
  const theirsPlain: number[] = [];
  const theirsVmap: number[] = [];
  for (let r = 0; r < NFT_UPDATES; r++) {
    let t0 = process.hrtime.bigint();
    execFileSync('nft', ['add', 'element', 'ip', T, 'external-ips', `{ ${vip(N + 2000 + r)} . tcp . 80 }`]);
    theirsPlain.push(ms(t0));
    t0 = process.hrtime.bigint();
    execFileSync('nft', ['add', 'element', 'ip', T, 'services', `{ ${vip(N + 2000 + r)} . tcp . 80 : goto svc-0 }`]);
    theirsVmap.push(ms(t0));
  }
  const result = {
    kernel: execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim(),
    nft: execFileSync('nft', ['--version'], { encoding: 'utf8' }).trim(),
    services: N,
    ruleset: { ...ours, mapElements: 2 * N, ops },
    fullLoad: {
      ipvsyncMs: median(oursLoad),
      ipvsyncBuildMs: median(oursBuild),
      ipvsyncUserCpuMs: median(oursCpu.map((c) => c.user * 1000)),
      ipvsyncSysCpuMs: median(oursCpu.map((c) => c.sys * 1000)),
      ipvsyncSendmsgCalls: sendmsgCalls,
      nftFileMs: median(theirsLoad),
      nftUserCpuMs: median(theirsCpu.map((c) => c.user * 1000)),
      nftSysCpuMs: median(theirsCpu.map((c) => c.sys * 1000)),
      ratio: median(theirsLoad) / median(oursLoad),
      sameContent: true,
      warmupRuns: warmup,
      ipvsyncColdMs: warmup[0] ?? null,
      coldRatio: warmup.length ? median(theirsLoad) / warmup[0]! : null,
      runs: { ipvsync: oursLoad, nft: theirsLoad },
    },
    fullLoadPerOpAcks: { ipvsyncMs: median(oursPerOpAcks), ratio: median(theirsLoad) / median(oursPerOpAcks), runs: oursPerOpAcks },
    singleUpdatePlainSet: {
      ipvsyncMs: oursPlainMs,
      ipvsyncRme: updPlain.stats.rme,
      nftAddElementMs: median(theirsPlain),
      ratio: median(theirsPlain) / oursPlainMs,
      runs: { nft: theirsPlain },
    },
    singleUpdateVerdictMap: {
      ipvsyncMs: oursVmapMs,
      ipvsyncRme: updVmap.stats.rme,
      nftAddElementMs: median(theirsVmap),
      ratio: median(theirsVmap) / oursVmapMs,
      runs: { nft: theirsVmap },
    },
    loadAverage: execFileSync('cat', ['/proc/loadavg'], { encoding: 'utf8' }).trim(),
  };
  const f = (x: number) => x.toFixed(x < 10 ? 3 : 1);
  console.log(`nftables, ${N} services (${ours.chains} chains, ${ours.rules} rules, ${2 * N} map elements), kernel ${result.kernel}, ${result.nft}`);
  console.log('| operation | ipvsync | nft | nft / ipvsync |');
  console.log('|---|---|---|---|');
  const fl = result.fullLoad;
  console.log(`| full load (one transaction), median of ${RUNS} after ${WARMUP} warm-up loads | ${f(fl.ipvsyncMs)} ms (build ${f(fl.ipvsyncBuildMs)} ms; cpu user ${f(fl.ipvsyncUserCpuMs)} + sys ${f(fl.ipvsyncSysCpuMs)} ms; ${sendmsgCalls} sendmsg) | ${f(fl.nftFileMs)} ms (nft -f; cpu user ${f(fl.nftUserCpuMs)} + sys ${f(fl.nftSysCpuMs)} ms) | ${fl.ratio.toFixed(2)}x |`);
  if (fl.ipvsyncColdMs !== null)
    console.log(`| full load, ipvsync's first (cold) load in the process | ${f(fl.ipvsyncColdMs)} ms | ${f(fl.nftFileMs)} ms (nft -f) | ${fl.coldRatio!.toFixed(2)}x |`);
  console.log(`| full load, acks: true (an ack per op) | ${f(result.fullLoadPerOpAcks.ipvsyncMs)} ms | ${f(fl.nftFileMs)} ms (nft -f) | ${result.fullLoadPerOpAcks.ratio.toFixed(2)}x |`);
  console.log(`| one element, plain set | ${f(oursPlainMs)} ms (±${updPlain.stats.rme.toFixed(1)}%) | ${f(result.singleUpdatePlainSet.nftAddElementMs)} ms (nft add element) | ${result.singleUpdatePlainSet.ratio.toFixed(0)}x |`);
  console.log(`| one element, verdict map (goto) | ${f(oursVmapMs)} ms (±${updVmap.stats.rme.toFixed(1)}%) | ${f(result.singleUpdateVerdictMap.nftAddElementMs)} ms (nft add element) | ${result.singleUpdateVerdictMap.ratio.toFixed(0)}x |`);
  console.log(`load average during the run: ${result.loadAverage}`);
  const out = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bench', 'results');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, 'nftables.json'), JSON.stringify(result, null, 2) + '\n');
  flush();
}

await main();
