// ipvsync vs `ipset`: 100k members into hash:ip,port and hash:ip,port,ip, same content, same
// run, same kernel: IpSets.apply() in process, and the commands as whole processes
// (`ipvsync ipset restore -f` against `ipset restore -f`, `ipvsync ipset save` against
// `ipset save`, each run alternating with its peer). Needs root; runs itself in a private
// network namespace (`unshare -n`) so the host's sets are never touched:
//   npx tsc -p . && sudo node dist/bench/ipset.js [members=100000] [rounds=5]
// Prints a table and writes bench/results/ipset.json.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IpSets, type IpSetMember, type IpSetType } from '../src/kernel/ipsets.js';
import { CLI } from './lib/command-env.js';
import { formatElement } from '../src/formats/ipset.js';
import { median } from './lib/median.js';

if (process.env.IPVSYNC_BENCH_NETNS !== '1') {
  const r = spawnSync('unshare', ['-n', process.execPath, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, IPVSYNC_BENCH_NETNS: '1' },
  });
  process.exit(r.status ?? 1);
}

const N = Number(process.argv[2] ?? 100_000);
const ROUNDS = Number(process.argv[3] ?? 5);

function members(type: IpSetType, n: number): IpSetMember[] {
  const out: IpSetMember[] = [];
  for (let i = 0; i < n; i++) {
    const ip = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    const m: IpSetMember = { ip, proto: i % 3 === 0 ? 'udp' : 'tcp', port: 1 + (i % 60000) };
    if (type === 'hash:ip,port,ip') m.ip2 = `172.16.${(i >> 8) & 255}.${i & 255}`;
    out.push(m);
  }
  return out;
}

/** A whole process's wall time (the ipvsync command through its shebang, as users run it). */
function run(cmd: string, args: string[]): { ms: number; stdout: string } {
  const t = process.hrtime.bigint();
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 30 });
  const ms = Number(process.hrtime.bigint() - t) / 1e6;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr.slice(0, 300)}`);
  return { ms, stdout: r.stdout };
}

const count = (name: string) => Number(/Number of entries: (\d+)/.exec(execFileSync('ipset', ['list', name, '-t'], { encoding: 'utf8' }))![1]);

async function main(): Promise<void> {
  const dir = join(tmpdir(), `ipvsync-bench-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const sets = await IpSets.open();
  const rows: Array<Record<string, unknown>> = [];
  for (const type of ['hash:ip,port', 'hash:ip,port,ip'] as IpSetType[]) {
    const ms = members(type, N);
    const create = { name: 'bench', type, family: 'inet' as const, hashsize: 65536, maxelem: 2 * N };
    const file = join(dir, 'restore.txt');
    writeFileSync(
      file,
      `create bench ${type} family inet hashsize 65536 maxelem ${2 * N}\n` + ms.map((m) => `add bench ${formatElement(create, m)}\n`).join(''),
    );
    const peer: number[] = [];
    const ours: number[] = [];
    const cli = { restore: [] as number[], save: [] as number[], ipsetSave: [] as number[] };
    let sendmsg = 0;
    for (let r = 0; r < ROUNDS; r++) {
      execFileSync('ipset', ['destroy']);
      cli.restore.push(run(CLI, ['ipset', 'restore', '-f', file]).ms);
      if (count('bench') !== N) throw new Error('ipvsync ipset restore did not load every member');
      const saved = run(CLI, ['ipset', 'save']);
      cli.save.push(saved.ms);
      const theirs = run('ipset', ['save']);
      cli.ipsetSave.push(theirs.ms);
      if (saved.stdout.split('\n').length !== theirs.stdout.split('\n').length) throw new Error('the saves differ in length');
      execFileSync('ipset', ['destroy']);
      let t = process.hrtime.bigint();
      execFileSync('ipset', ['restore', '-f', file]);
      peer.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (count('bench') !== N) throw new Error('ipset restore did not load every member');
      execFileSync('ipset', ['destroy']);

      t = process.hrtime.bigint();
      const res = await sets.apply([{ op: 'create', ...create }, { op: 'add', name: 'bench', members: ms }]);
      ours.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (!res.ok) throw res.errors[0];
      sendmsg = res.sendmsgCalls;
      if (count('bench') !== N) throw new Error('ipvsync did not load every member');
    }
    execFileSync('ipset', ['destroy']);
    rows.push({
      case: `${N} members into ${type}`,
      ipvsync_ms: +median(ours).toFixed(1),
      ipset_restore_ms: +median(peer).toFixed(1),
      ratio: +(median(peer) / median(ours)).toFixed(2),
      ipvsync_sendmsg_calls: sendmsg,
      rounds: ROUNDS,
      all_ipvsync_ms: ours.map((x) => +x.toFixed(1)),
      all_ipset_restore_ms: peer.map((x) => +x.toFixed(1)),
      cli_restore_ms: +median(cli.restore).toFixed(1),
      cli_restore_ratio: +(median(peer) / median(cli.restore)).toFixed(2),
      cli_save_ms: +median(cli.save).toFixed(1),
      ipset_save_ms: +median(cli.ipsetSave).toFixed(1),
      cli_save_ratio: +(median(cli.ipsetSave) / median(cli.save)).toFixed(2),
      all_cli_restore_ms: cli.restore.map((x) => +x.toFixed(1)),
    });
  }
  rmSync(dir, { recursive: true, force: true });
  console.log(`kernel ${execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim()}, private netns, median of ${ROUNDS}`);
  console.log('| case | IpSets.apply | `ipvsync ipset restore` | `ipset restore` | ratios (apply, command) | `ipvsync ipset save` | `ipset save` | ratio |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const r of rows)
    console.log(`| ${r.case} | ${r.ipvsync_ms} ms | ${r.cli_restore_ms} ms | ${r.ipset_restore_ms} ms | ${r.ratio}x, ${r.cli_restore_ratio}x | ${r.cli_save_ms} ms | ${r.ipset_save_ms} ms | ${r.cli_save_ratio}x |`);
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(
    'bench/results/ipset.json',
    JSON.stringify({ bench: 'ipset', kernel: execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim(), date: new Date().toISOString(), rows }, null, 2) + '\n',
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
