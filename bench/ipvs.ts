// IPVS create/read benchmark against ipvsadm, same run, same kernel. Run inside the test VM
// (IPVS is not in every host kernel):
//   node dist/test/vm/cli.js -- node dist/bench/ipvs.js [--sizes 1000,10000] [--dests 10]
// Create: ipvsync apply() (in-process), `ipvsync ipvs restore` (whole process) and
// `ipvsadm -R` (whole process) of the same rules. Read: ipvsync services({withDestinations})
// (in-process), `ipvsync ipvs save -n` and `ipvsadm -Sn` (whole processes), each ipvsync read
// both over io_uring (the default: many GET_DEST dumps per io_uring_enter) and with the
// one-dump-per-service fallback (ioUring: false / IPVSYNC_IO_URING=0), with the syscalls per
// service each cost (socket and ring counters). The table is flushed
// between create runs and every result is checked against ipvsadm -Sn. Writes
// bench/results/ipvs.json. Timings inside a VM are distorted: the ratios are what matter.
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as os from 'node:os';
import { Ipvs } from '../src/kernel/ipvs.js';
import { formatSave, parseRules } from '../src/formats/ipvsadm.js';

const here = dirname(fileURLToPath(import.meta.url));
const CLI = join(here, '..', 'src', 'cli', 'main.js');
// Inside the VM the checkout is read-only: scripts/bench.sh points this at the VM's output window.
const RESULTS = process.env.IPVSYNC_RESULTS_DIR ?? join(here, '..', '..', 'bench', 'results');

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(name);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : dflt;
}
const sizes = arg('--sizes', '1000,10000').split(',').map(Number);
const perService = Number(arg('--dests', '10'));

function rules(services: number, dests: number): string {
  const lines: string[] = [];
  for (let s = 0; s < services; s++) {
    const vip = `10.${(s >> 8) & 255}.${s & 255}.1:80`;
    lines.push(`-A -t ${vip} -s rr`);
    for (let d = 0; d < dests; d++) lines.push(`-a -t ${vip} -r 172.16.${d}.${(s % 250) + 1}:8080 -m -w 1`);
  }
  return lines.join('\n') + '\n';
}

function timed(cmd: string, args: string[], input?: string, env?: Record<string, string>): { ms: number; stdout: string } {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(cmd, args, { input, encoding: 'utf8', maxBuffer: 1 << 30, ...(env ? { env: { ...process.env, ...env } } : {}) });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}: ${r.stderr.slice(0, 500)}`);
  return { ms, stdout: r.stdout };
}

async function time<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = process.hrtime.bigint();
  const value = await fn();
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, value };
}

const ipvs = await Ipvs.open();
const fallback = await Ipvs.open({ ioUring: false });
const loadBefore = os.loadavg();
// The fixed cost of a process: node itself, and the ipvsync CLI doing one netlink round trip.
const nodeStartMs = Math.min(...[0, 1, 2].map(() => timed(process.execPath, ['-e', '0']).ms));
const cliStartMs = Math.min(...[0, 1, 2].map(() => timed(process.execPath, [CLI, 'ipvs', 'info']).ms));
const ipvsadmStartMs = Math.min(...[0, 1, 2].map(() => timed('ipvsadm', ['-Ln']).ms));
const rows: Array<Record<string, number | string>> = [];

for (const n of sizes) {
  const text = rules(n, perService);
  const ops = parseRules(text).map((r) => r.op);
  const objects = ops.length;

  await ipvs.flush();
  // The pipelined path (many requests per sendmsg), as the engine applies: stopOnError (the
  // default) sends one request at a time so that nothing after a failure reaches the kernel.
  const apply = await time(() => ipvs.apply(ops, { stopOnError: false }));
  if (!apply.value.ok) throw new Error(`apply failed: ${apply.value.errors[0]?.message}`);
  const reference = timed('ipvsadm', ['-Sn']);
  const sendmsgs = apply.value.sendmsgCalls;

  // Read side, on the table apply() built. The machine is shared and UML amplifies noise: the
  // readers alternate, three rounds, and the best time of each counts.
  const dumps: number[] = [];
  const fallbackDumps: number[] = [];
  const saves: number[] = [];
  const fallbackSaves: number[] = [];
  const ipvsadmSaves: number[] = [];
  let sys = { uring: 0, fallback: 0, enters: 0 };
  for (let round = 0; round < 3; round++) {
    const u0 = ipvs.socketStats();
    const dump = await time(() => ipvs.services({ withDestinations: true }));
    const u1 = ipvs.socketStats();
    if (u1.ioUring.state !== 'on') throw new Error(`io_uring path not used: ${u1.ioUring.reason}`);
    if (formatSave(dump.value) !== reference.stdout) throw new Error('services() differs from ipvsadm -Sn');
    dumps.push(dump.ms);
    const f0 = fallback.socketStats();
    const slow = await time(() => fallback.services({ withDestinations: true }));
    const f1 = fallback.socketStats();
    if (formatSave(slow.value) !== reference.stdout) throw new Error('services() (fallback) differs from ipvsadm -Sn');
    fallbackDumps.push(slow.ms);
    const enters = u1.ioUring.enterCalls - u0.ioUring.enterCalls;
    sys = {
      uring: (u1.sendmsgCalls - u0.sendmsgCalls + u1.recvmsgCalls - u0.recvmsgCalls + enters) / n,
      fallback: (f1.sendmsgCalls - f0.sendmsgCalls + f1.recvmsgCalls - f0.recvmsgCalls) / n,
      enters,
    };
    const save = timed(process.execPath, [CLI, 'ipvs', 'save', '-n']);
    if (save.stdout !== reference.stdout) throw new Error('ipvsync ipvs save -n differs from ipvsadm -Sn');
    saves.push(save.ms);
    const slowSave = timed(process.execPath, [CLI, 'ipvs', 'save', '-n'], undefined, { IPVSYNC_IO_URING: '0' });
    if (slowSave.stdout !== reference.stdout) throw new Error('ipvsync ipvs save -n (fallback) differs from ipvsadm -Sn');
    fallbackSaves.push(slowSave.ms);
    ipvsadmSaves.push(timed('ipvsadm', ['-Sn']).ms);
  }
  const dump = { ms: Math.min(...dumps) };
  const fallbackDump = { ms: Math.min(...fallbackDumps) };
  const save = { ms: Math.min(...saves) };
  const fallbackSave = { ms: Math.min(...fallbackSaves) };
  const ipvsadmSave = { ms: Math.min(...ipvsadmSaves) };

  await ipvs.flush();
  const restore = timed(process.execPath, [CLI, 'ipvs', 'restore'], text);
  if (timed('ipvsadm', ['-Sn']).stdout !== reference.stdout) throw new Error('ipvsync ipvs restore built a different table');

  await ipvs.flush();
  const ipvsadmRestore = timed('ipvsadm', ['-R'], text);
  if (timed('ipvsadm', ['-Sn']).stdout !== reference.stdout) throw new Error('ipvsadm -R built a different table');
  await ipvs.flush();

  rows.push({
    services: n,
    destinations: n * perService,
    objects,
    applyMs: apply.ms,
    applySendmsgCalls: sendmsgs,
    restoreCliMs: restore.ms,
    ipvsadmRestoreMs: ipvsadmRestore.ms,
    createSpeedupApply: ipvsadmRestore.ms / apply.ms,
    createSpeedupCli: ipvsadmRestore.ms / restore.ms,
    dumpMs: dump.ms,
    // the first read on a fresh handle (the CLI's case, and a daemon's first resync): the
    // handle's listing storage is not there yet
    dumpFirstMs: dumps[0]!,
    readSpeedupFirstDump: ipvsadmSave.ms / dumps[0]!,
    dumpFallbackMs: fallbackDump.ms,
    saveCliMs: save.ms,
    saveCliFallbackMs: fallbackSave.ms,
    ipvsadmSaveMs: ipvsadmSave.ms,
    readSpeedupDump: ipvsadmSave.ms / dump.ms,
    readSpeedupDumpFallback: ipvsadmSave.ms / fallbackDump.ms,
    readSpeedupCli: ipvsadmSave.ms / save.ms,
    readSpeedupCliFallback: ipvsadmSave.ms / fallbackSave.ms,
    readSyscallsPerService: sys.uring,
    readSyscallsPerServiceFallback: sys.fallback,
    readIoUringEnters: sys.enters,
  });
}

const f = (x: number | string): string => (typeof x === 'number' ? (Number.isInteger(x) ? String(x) : x.toFixed(x < 10 ? 2 : 0)) : x);
const loadAfter = os.loadavg();
console.log(`\nIPVS benchmark (${process.env.IPVSYNC_VM ?? 'host'} kernel ${os.release()}; times in ms, ratio = ipvsadm / ipvsync; load average inside the guest ${loadBefore.map((l) => l.toFixed(2)).join(' ')} -> ${loadAfter.map((l) => l.toFixed(2)).join(' ')})\n`);
console.log(`process start (empty table): node -e 0 ${f(nodeStartMs)} ms, ipvsync ipvs info ${f(cliStartMs)} ms, ipvsadm -Ln ${f(ipvsadmStartMs)} ms\n`);
console.log('Create');
console.log('| services x dests | ipvsync apply (in-process) | ipvsync ipvs restore (process) | ipvsadm -R (process) | ratio (apply) | ratio (restore) |');
console.log('|---|---|---|---|---|---|');
for (const r of rows)
  console.log(`| ${r.services} x ${perService} | ${f(r.applyMs!)} | ${f(r.restoreCliMs!)} | ${f(r.ipvsadmRestoreMs!)} | ${f(r.createSpeedupApply!)}x | ${f(r.createSpeedupCli!)}x |`);
console.log('\nRead (whole table with destinations): io_uring / fallback (one GET_DEST dump per service)');
console.log('| services x dests | ipvsadm -Sn (process) | ipvsync ipvs save -n (process) | ratio | save -n, fallback | ratio | services() (in-process, best of 3) | ratio | first services() on the handle | ratio | services(), fallback | ratio | syscalls/service | fallback syscalls/service |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows)
  console.log(
    `| ${r.services} x ${perService} | ${f(r.ipvsadmSaveMs!)} | ${f(r.saveCliMs!)} | ${f(r.readSpeedupCli!)}x | ${f(r.saveCliFallbackMs!)} | ${f(r.readSpeedupCliFallback!)}x | ${f(r.dumpMs!)} | ${f(r.readSpeedupDump!)}x | ${f(r.dumpFirstMs!)} | ${f(r.readSpeedupFirstDump!)}x | ${f(r.dumpFallbackMs!)} | ${f(r.readSpeedupDumpFallback!)}x | ${(r.readSyscallsPerService as number).toFixed(3)} | ${(r.readSyscallsPerServiceFallback as number).toFixed(3)} |`,
  );
const json = { kernel: `${process.env.IPVSYNC_VM ?? 'host'} ${os.release()}`, date: new Date().toISOString(), loadBefore, loadAfter, perService, nodeStartMs, cliStartMs, ipvsadmStartMs, rows };
try {
  mkdirSync(RESULTS, { recursive: true });
  writeFileSync(join(RESULTS, 'ipvs.json'), JSON.stringify(json, null, 2) + '\n');
} catch (e) {
  // Inside the VM the checkout is read-only: print the JSON for the caller to keep.
  console.log(`(cannot write ${RESULTS}: ${(e as Error).message}; JSON follows)`);
  console.log('@@JSON ' + JSON.stringify(json));
}
