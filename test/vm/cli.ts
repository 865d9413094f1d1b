#!/usr/bin/env node
// node dist/test/vm/cli.js [--kernel uml|qemu] [--suite NAME] [--timeout SEC] [--mem MB] [--no-deps] [-- command args...]
//
// Boots a test VM (see vm.ts), runs a suite or a command in it with live
// output, prints a one-line summary on stderr and exits with the guest
// command's exit code, or 125 when the VM itself failed.

import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { qemuAccel, repoRoot, resolveKernel, runInVm, VmError, type QemuAccel, type VmKernelKind } from './vm.js';

const VM_FAILED = 125;

const USAGE = `usage: node dist/test/vm/cli.js [options] [--suite NAME | -- COMMAND...]

  --kernel uml|qemu  kernel to boot (default: $IPVSYNC_VM_KERNEL or uml)
                     uml:  user-mode-linux, boots in seconds, no nftables ip/ip6/inet;
                           where it cannot boot (probed once, cached in .vm/) the run
                           goes to qemu instead, on KVM where usable, and says so
                           (IPVSYNC_UML_PROBE=fail forces that, =ok skips the probe)
                     qemu: Debian kernel under qemu, complete; ~10x slower under TCG
  --accel tcg|kvm    qemu's accelerator (default: $IPVSYNC_VM_ACCEL or tcg); kvm needs
                     hardware virtualization (kvm_intel/kvm_amd): checked before booting
  --suite NAME       run a named suite:
                       kernel  node --test on dist/test/kernel/**/*.test.js
                       e2e     node --test on dist/test/e2e/**/*.test.js (the proxy
                               end to end; wants --kernel qemu for nftables)
  --timeout SEC      kill the VM after SEC seconds (default 1200)
  --mem MB           guest memory (default 2048)
  --out DIR          copy what the command wrote to $IPVSYNC_VM_OUT into DIR
  --no-deps          don't run scripts/vm-deps.sh first
  -h, --help         this text

  After --, one argument is a shell command line (\`-- 'ipvsadm -Ln && exit 3'\`);
  several are a command and its arguments (\`-- ipvsadm -Ln\`).

Exit status: the guest command's, or ${VM_FAILED} if the VM failed to boot,
timed out or reported no exit code.`;

function shq(s: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

function findTests(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...findTests(p));
    else if (e.isFile() && e.name.endsWith('.test.js')) out.push(p);
  }
  return out.sort();
}

function die(msg: string, code = 2): never {
  process.stderr.write(`vm: ${msg}\n`);
  process.exit(code);
}

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: process.argv.slice(2),
      allowPositionals: true,
      strict: true,
      options: {
        kernel: { type: 'string' },
        accel: { type: 'string' },
        suite: { type: 'string' },
        timeout: { type: 'string' },
        mem: { type: 'string' },
        out: { type: 'string' },
        'no-deps': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (e) {
    die(`${(e as Error).message}\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(USAGE + '\n');
    return 0;
  }

  const kernelArg = values.kernel ?? process.env.IPVSYNC_VM_KERNEL ?? 'uml';
  if (kernelArg !== 'uml' && kernelArg !== 'qemu') die(`--kernel must be uml or qemu, not ${JSON.stringify(kernelArg)}`);
  const kernel: VmKernelKind = kernelArg;
  if (values.accel !== undefined && kernel !== 'qemu') die('--accel applies to --kernel qemu only');
  // Asked for: the option, or $IPVSYNC_VM_ACCEL (which also applies to a fallback from uml to qemu).
  let accel: QemuAccel | undefined;
  if (values.accel !== undefined || process.env.IPVSYNC_VM_ACCEL !== undefined) {
    try {
      accel = qemuAccel(values.accel);
    } catch (e) {
      die((e as Error).message.replace(/^test\/vm: /, ''));
    }
  }
  const timeoutSec = values.timeout === undefined ? 1200 : Number(values.timeout);
  if (!Number.isFinite(timeoutSec) || timeoutSec <= 0) die(`bad --timeout ${JSON.stringify(values.timeout)}`);
  const memMB = values.mem === undefined ? undefined : Number(values.mem);
  if (memMB !== undefined && (!Number.isInteger(memMB) || memMB < 128)) die(`bad --mem ${JSON.stringify(values.mem)}`);

  const root = repoRoot();
  let command: string;
  if (values.suite !== undefined) {
    if (positionals.length) die('give either --suite or a command, not both');
    switch (values.suite) {
      case 'kernel':
      case 'e2e': {
        const files = findTests(path.join(root, 'dist', 'test', values.suite));
        if (!files.length) die(`no dist/test/${values.suite}/**/*.test.js: compile first (npx tsc -p .)`, VM_FAILED);
        // One test file at a time: they share the guest kernel's global state.
        command = ['node', '--test', '--test-reporter=spec', '--test-concurrency=1', ...files.map((f) => path.relative(root, f))]
          .map(shq)
          .join(' ');
        break;
      }
      default:
        die(`unknown suite ${JSON.stringify(values.suite)} (known: kernel, e2e)`);
    }
  } else if (positionals.length === 1) {
    command = positionals[0] as string;
  } else if (positionals.length > 1) {
    command = positionals.map(shq).join(' ');
  } else {
    die(`nothing to run\n${USAGE}`);
  }

  if (!values['no-deps']) {
    const deps = spawnSync('bash', [path.join(root, 'scripts', 'vm-deps.sh')], { stdio: 'inherit' });
    if (deps.status !== 0) die(`scripts/vm-deps.sh failed (${deps.signal ?? `status ${deps.status}`})`, VM_FAILED);
  }

  const env: Record<string, string> = {};
  // IPVSYNC_ADDON: a prebuilt addon (a path the guest sees too, read-only).
  for (const name of ['CI', 'NO_COLOR', 'FORCE_COLOR', 'NODE_OPTIONS', 'IPVSYNC_ADDON']) {
    const v = process.env[name];
    if (v !== undefined) env[name] = v;
  }
  if (process.stdout.isTTY && env.NO_COLOR === undefined && env.FORCE_COLOR === undefined) env.FORCE_COLOR = '1';

  const ac = new AbortController();
  const onSignal = () => ac.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  const started = Date.now();
  let atLineStart = true;
  let choice;
  try {
    choice = await resolveKernel(kernel, accel);
  } catch (e) {
    die((e as Error).message.replace(/^test\/vm: /, ''), VM_FAILED);
  }
  const what = values.suite !== undefined ? `${values.suite} suite` : 'the command';
  if (choice.fallback) process.stderr.write(`vm: ${what}: ${choice.fallback}\n`);
  const note = choice.fallback ? ' (user-mode-linux cannot boot here)' : '';
  try {
    const r = await runInVm({
      kernel: choice.kernel,
      ...(choice.kernel === 'qemu' && choice.accel ? { accel: choice.accel } : {}),
      command,
      cwd: root,
      env,
      timeoutMs: timeoutSec * 1000,
      ...(memMB !== undefined ? { memMB } : {}),
      ...(values.out ? { outDir: values.out } : {}),
      signal: ac.signal,
      onOutput: (s) => {
        if (s) atLineStart = s.endsWith('\n');
        process.stdout.write(s);
      },
    });
    const total = ((Date.now() - started) / 1000).toFixed(1);
    process.stderr.write(`${atLineStart ? '' : '\n'}vm: kernel=${r.kernel}${note} boot=${(r.bootMs / 1000).toFixed(1)}s total=${total}s exit=${r.code}\n`);
    return r.code;
  } catch (e) {
    const total = ((Date.now() - started) / 1000).toFixed(1);
    if (e instanceof VmError) {
      // The console output was already streamed: the reason alone.
      process.stderr.write(`${atLineStart ? '' : '\n'}vm: VM FAILED: ${e.reason}\n`);
      process.stderr.write(`vm: kernel=${e.kernel}${note} total=${total}s exit=${VM_FAILED} (VM failure)\n`);
    } else {
      process.stderr.write(`${atLineStart ? '' : '\n'}vm: VM FAILED: ${(e as Error).stack ?? String(e)}\n`);
    }
    return VM_FAILED;
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`vm: ${(e as Error).stack ?? String(e)}\n`);
    process.exitCode = VM_FAILED;
  },
);
