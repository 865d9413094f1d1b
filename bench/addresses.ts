// ipvsync vs `ip -batch`: 10k addresses (/32 and /128) onto one link, same run, same kernel.
// Needs root; runs itself in a private network namespace (`unshare -n`) on a bridge link (the
// host kernel has no dummy type):
//   npx tsc -p . && sudo node dist/bench/addresses.js [addresses=10000] [rounds=3]
// Prints a table and writes bench/results/addresses.json. The kernel's per-device address list
// makes each add O(n), so both sides are mostly kernel time.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Links } from '../src/kernel/links.js';
import { median } from './lib/median.js';

if (process.env.IPVSYNC_BENCH_NETNS !== '1') {
  const r = spawnSync('unshare', ['-n', process.execPath, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, IPVSYNC_BENCH_NETNS: '1' },
  });
  process.exit(r.status ?? 1);
}

const N = Number(process.argv[2] ?? 10_000);
const ROUNDS = Number(process.argv[3] ?? 3);
const LINK = 'bench0';

function addresses(family: 'inet' | 'inet6'): string[] {
  return Array.from({ length: N }, (_, i) =>
    family === 'inet' ? `10.96.${(i >> 8) & 255}.${i & 255}/32` : `fd00:96::${(i + 1).toString(16)}/128`,
  );
}

const count = () => execFileSync('ip', ['-o', 'addr', 'show', 'dev', LINK, 'scope', 'global'], { encoding: 'utf8' }).split('\n').filter(Boolean).length;

async function main(): Promise<void> {
  const dir = join(tmpdir(), `ipvsync-bench-${process.pid}`);
  mkdirSync(dir, { recursive: true });
  const links = await Links.open();
  const rows: Array<Record<string, unknown>> = [];
  for (const family of ['inet', 'inet6'] as const) {
    const addrs = addresses(family);
    const file = join(dir, 'batch.txt');
    writeFileSync(file, addrs.map((a) => `addr add ${a} dev ${LINK}\n`).join(''));
    const peer: number[] = [];
    const ours: number[] = [];
    let sendmsg = 0;
    for (let r = 0; r < ROUNDS; r++) {
      const fresh = () => {
        spawnSync('ip', ['link', 'del', LINK]);
        execFileSync('ip', ['link', 'add', LINK, 'type', 'bridge']);
        execFileSync('ip', ['link', 'set', LINK, 'up']);
      };
      fresh();
      let t = process.hrtime.bigint();
      execFileSync('ip', ['-batch', file]);
      peer.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (count() !== N) throw new Error('ip -batch did not add every address');
      fresh();
      t = process.hrtime.bigint();
      const res = await links.apply(addrs.map((address) => ({ op: 'addAddr', link: LINK, address })), { stopOnError: false });
      ours.push(Number(process.hrtime.bigint() - t) / 1e6);
      if (!res.ok) throw res.errors[0];
      sendmsg = res.sendmsgCalls;
      if (count() !== N) throw new Error('ipvsync did not add every address');
    }
    spawnSync('ip', ['link', 'del', LINK]);
    rows.push({
      case: `${N} ${family === 'inet' ? '/32' : '/128'} addresses onto one link`,
      ipvsync_ms: +median(ours).toFixed(1),
      ip_batch_ms: +median(peer).toFixed(1),
      ratio: +(median(peer) / median(ours)).toFixed(2),
      ipvsync_sendmsg_calls: sendmsg,
      rounds: ROUNDS,
      all_ipvsync_ms: ours.map((x) => +x.toFixed(1)),
      all_ip_batch_ms: peer.map((x) => +x.toFixed(1)),
    });
  }
  rmSync(dir, { recursive: true, force: true });
  const kernel = execFileSync('uname', ['-r'], { encoding: 'utf8' }).trim();
  console.log(`kernel ${kernel}, private netns, bridge link, median of ${ROUNDS}`);
  console.log('| case | ipvsync | ip -batch | ip -batch / ipvsync |');
  console.log('|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.case} | ${r.ipvsync_ms} ms | ${r.ip_batch_ms} ms | ${r.ratio}x |`);
  mkdirSync('bench/results', { recursive: true });
  writeFileSync('bench/results/addresses.json', JSON.stringify({ bench: 'addresses', kernel, date: new Date().toISOString(), rows }, null, 2) + '\n');
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
