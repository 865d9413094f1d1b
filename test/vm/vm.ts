// Runs a shell command inside a second Linux kernel, for the tests that need
// kernel features this machine's own kernel lacks (IPVS, dummy links, ...).
//
// Two backends:
//  - 'uml':  Debian's user-mode-linux (/usr/bin/linux.uml). Boots in seconds;
//            has IPVS, dummy, veth, bridge, ipset and conntrack, but no
//            nftables ip/ip6/inet families.
//  - 'qemu': Debian's linux-image-amd64 kernel under qemu TCG. Complete
//            (IPVS + nftables) but roughly ten times slower.
//
// user-mode-linux does not boot everywhere (Debian's panics starting init on
// CPUs with AMX): a run that asks for it probes it once (probeUml, cached in
// .vm/) and runs under qemu where it cannot (chooseKernel).
//
// Both see the host's filesystem read-only at the same paths (UML: hostfs
// root; qemu: virtio-9p export of / plus switch_root from a tiny busybox
// initramfs), so the checkout, node and the netlink CLIs are all where they
// are on the host. The guest's /tmp, /var/tmp and /run are fresh tmpfs. A
// small writable host directory is shared with the guest (UML: hostfs, qemu:
// a second 9p export): the host puts the command there, the guest writes a
// `ready` marker when it has booted and the command's exit status in `rc`.
//
// Generated artefacts (the PID-1 script, the qemu initramfs, the UML module
// directory) are cached under `.vm/` in the checkout.

import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync, gzipSync } from 'node:zlib';

export type VmKernelKind = 'uml' | 'qemu';

/** How qemu runs the guest: 'tcg' emulates every instruction (works anywhere, ~10x slow);
 *  'kvm' runs it on the host's hardware virtualization (near-native speed where there is one). */
export type QemuAccel = 'tcg' | 'kvm';

export interface RunInVmOptions {
  /** Which kernel to boot. Default: $IPVSYNC_VM_KERNEL, else 'uml'. 'uml' is user-mode-linux where
   *  it boots (probeUml), else qemu: the fallback is said in one line through onOutput. */
  kernel?: VmKernelKind;
  /** Shell command, run with `bash -c` inside the guest. */
  command: string;
  /** Working directory of the command (a host path; visible read-only in the guest). Default: process.cwd(). */
  cwd?: string;
  /** Host directory that receives what the command writes to $IPVSYNC_VM_OUT (the guest sees
   *  the checkout read-only; benchmarks write their results there). */
  outDir?: string;
  /** Extra environment for the command (added to PATH, HOME, LANG, TERM, IPVSYNC_VM=uml|qemu, IPVSYNC_VM_RELEASE=<kernel release>). */
  env?: Record<string, string>;
  /** Kill the VM after this long. Default 20 minutes. */
  timeoutMs?: number;
  /** Guest memory. Default 2048 MiB. */
  memMB?: number;
  /** qemu's accelerator. Default: $IPVSYNC_VM_ACCEL, else 'tcg'. 'kvm' is checked first
   *  (kvmStatus) and fails with the reason where the host's KVM can't boot the guest. */
  accel?: QemuAccel;
  /** Receives the guest console output (kernel messages, init messages, the command's stdout and stderr) as it arrives. */
  onOutput?: (chunk: string) => void;
  /** Aborting kills the VM; runInVm then rejects with a VmError. */
  signal?: AbortSignal;
}

export interface RunInVmResult {
  /** The command's exit status inside the guest (128+N if it died of signal N). */
  code: number;
  /** Everything the guest console printed. */
  output: string;
  /** Host wall-clock time from starting the VM to the guest being ready to run the command (modules loaded). */
  bootMs: number;
  /** Backend and kernel release, e.g. "uml 6.1.176" or "qemu 6.1.0-56-amd64". */
  kernel: string;
}

/** A VM that failed to boot, timed out, was aborted or reported no exit code. Never a test result. */
export class VmError extends Error {
  /** What went wrong, in one line (message adds the tail of the console output). */
  readonly reason: string;
  readonly output: string;
  readonly kernel: string;
  constructor(reason: string, kernel: string, output: string) {
    super(output.trim() ? `${kernel}: ${reason}\n--- last console output ---\n${tail(output)}` : `${kernel}: ${reason}`);
    this.name = 'VmError';
    this.reason = reason;
    this.kernel = kernel;
    this.output = output;
  }
}

const DEFAULT_TIMEOUT_MS = 20 * 60 * 1000;
const DEFAULT_MEM_MB = 2048;

/** The accelerator to use: the option, else $IPVSYNC_VM_ACCEL, else 'tcg'. */
export function qemuAccel(option?: string): QemuAccel {
  const v = option ?? process.env.IPVSYNC_VM_ACCEL ?? 'tcg';
  if (v !== 'tcg' && v !== 'kvm') throw new Error(`test/vm: the qemu accelerator must be tcg or kvm, not ${JSON.stringify(v)}`);
  return v;
}

/** qemu's accelerator and CPU model arguments. */
export function qemuAccelArgs(accel: QemuAccel): string[] {
  // TCG: 'max', every feature qemu can emulate. KVM: the host's own CPU.
  return accel === 'kvm' ? ['-accel', 'kvm', '-cpu', 'host'] : ['-accel', 'tcg', '-cpu', 'max'];
}

/**
 * Whether Debian's kernel can boot under this host's KVM, and why not. Needs a usable
 * `/dev/kvm` and a hardware-virtualization KVM (kvm_intel or kvm_amd in `/sys/module`). A host
 * whose KVM is PVM (kvm_pvm: KVM without hardware virtualization, in nested cloud VMs) runs
 * only PVM guest kernels: Debian's hangs there before its first line (tried with -cpu host,
 * max and qemu64; -cpu host also fails on MSR 0x10a).
 */
export function kvmStatus(paths: { dev?: string; sysModule?: string } = {}): KvmStatus {
  const dev = paths.dev ?? '/dev/kvm';
  const sysModule = paths.sysModule ?? '/sys/module';
  try {
    fs.accessSync(dev, fs.constants.R_OK | fs.constants.W_OK);
  } catch (e) {
    return { ok: false, why: `${dev} is not usable (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): no KVM here` };
  }
  const has = (m: string) => fs.existsSync(path.join(sysModule, m));
  if (has('kvm_pvm')) {
    return { ok: false, why: "this host's KVM is PVM (kvm_pvm, KVM without hardware virtualization): it boots only PVM guest kernels, and Debian's kernel hangs under it before its first line; use tcg" };
  }
  if (!has('kvm_intel') && !has('kvm_amd')) {
    return { ok: false, why: `${dev} is there but neither kvm_intel nor kvm_amd is loaded (${sysModule}): no hardware virtualization to boot the guest on` };
  }
  return { ok: true };
}

// ---------------------------------------------------------------------------
// Which kernel: user-mode-linux where it boots, else qemu

/** Whether user-mode-linux boots on this machine, and why not. */
export type UmlProbe = { boots: true } | { boots: false; why: string };

/** What kvmStatus() says. */
export type KvmStatus = { ok: true } | { ok: false; why: string };

export interface KernelChoice {
  kernel: VmKernelKind;
  /** qemu's accelerator (qemu only). */
  accel?: QemuAccel;
  /** Set when user-mode-linux was asked for but qemu runs instead: one line saying why. */
  fallback?: string;
}

/**
 * The kernel to boot, from what was asked and what the probes found (they run elsewhere:
 * probeUml, kvmStatus). qemu asked: qemu, under the accelerator asked, else TCG. user-mode-linux
 * asked (the default): it, where it boots; where it cannot (Debian's panics starting init on CPUs
 * with AMX), qemu instead, which runs every kernel test too, on KVM where the host's KVM can boot
 * Debian's kernel (unless an accelerator was asked), else TCG.
 */
export function chooseKernel(o: { requested: VmKernelKind; accel?: QemuAccel | undefined; uml?: UmlProbe | undefined; kvm: KvmStatus }): KernelChoice {
  if (o.requested === 'qemu') return { kernel: 'qemu', accel: o.accel ?? 'tcg' };
  if (!o.uml) throw new Error('test/vm: user-mode-linux was asked for but not probed');
  if (o.uml.boots) return { kernel: 'uml' };
  const accel = o.accel ?? (o.kvm.ok ? 'kvm' : 'tcg');
  return {
    kernel: 'qemu',
    accel,
    fallback: `user-mode-linux cannot boot on this CPU (${o.uml.why}); running it under qemu (${accel === 'kvm' ? 'KVM' : 'TCG'})`,
  };
}

/** The CPU's feature flags (the first `flags` line of /proc/cpuinfo). */
export function cpuFlags(cpuinfo: string): string[] {
  return /^flags\s*:\s*(.*)$/m.exec(cpuinfo)?.[1]?.trim().split(/\s+/) ?? [];
}

/** Why a probe boot of user-mode-linux failed, in one line: its panic, the ptrace failure under
 *  it, and the CPU's AMX flags when it has them; else the harness's own reason. */
export function umlFailure(reason: string, output: string, cpuinfo: string): string {
  const parts = [/Kernel panic - not syncing: [^\n]*/, /ptrace set fp regs failed, errno = \d+/]
    .map((re) => re.exec(output)?.[0]?.trim())
    .filter((s): s is string => !!s);
  if (!parts.length) parts.push(reason);
  const amx = cpuFlags(cpuinfo).filter((f) => f.startsWith('amx'));
  if (amx.length) parts.push(`the CPU has AMX: ${amx.join(' ')}`);
  return parts.join('; ');
}

/** A UML probe boot that has not run `true` by then has failed (it needs seconds). */
const UML_PROBE_TIMEOUT_MS = 2 * 60 * 1000;
let umlProbed: Promise<UmlProbe> | undefined;

/**
 * Whether user-mode-linux boots here: a tiny boot that runs `true`, once per process. A boot or
 * a kernel panic is a fact of the UML build, this CPU and the host kernel (UML runs on ptrace), so
 * it is kept in .vm/ keyed by those; any other failure (a timeout on a loaded machine) is not
 * kept, and this run uses qemu. IPVSYNC_UML_PROBE=ok skips the probe (UML boots), =fail forces
 * the fallback (so it can be exercised where UML boots).
 */
export function probeUml(): Promise<UmlProbe> {
  umlProbed ??= probeUmlOnce();
  return umlProbed;
}

async function probeUmlOnce(): Promise<UmlProbe> {
  const forced = process.env.IPVSYNC_UML_PROBE;
  if (forced === 'ok') return { boots: true };
  if (forced === 'fail') return { boots: false, why: 'IPVSYNC_UML_PROBE=fail' };
  if (forced) throw new Error(`test/vm: IPVSYNC_UML_PROBE must be ok or fail, not ${JSON.stringify(forced)}`);
  let k: UmlKernel;
  try {
    k = findUml();
  } catch (e) {
    return { boots: false, why: (e as Error).message.replace(/^test\/vm: /, '') };
  }
  let cpuinfo = '';
  try {
    cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    // no flags to key on: the key still has the UML build and the host kernel
  }
  const st = fs.statSync(k.binary);
  const key = createHash('sha256')
    .update(['uml-probe-v1', k.binary, st.size, st.mtimeMs, k.release, os.release(), cpuFlags(cpuinfo).sort().join(' ')].join('\0'))
    .digest('hex')
    .slice(0, 16);
  const dir = cacheDir(repoRoot());
  const file = path.join(dir, `uml-probe-${key}.json`);
  try {
    const cached = JSON.parse(fs.readFileSync(file, 'utf8')) as UmlProbe;
    if (cached.boots === true || (cached.boots === false && typeof cached.why === 'string')) return cached;
  } catch {
    // not probed yet
  }
  let result: UmlProbe;
  let keep: boolean;
  try {
    const r = await prepareAndBoot('uml', { command: 'true', env: {}, timeoutMs: UML_PROBE_TIMEOUT_MS });
    result = r.code === 0 ? { boots: true } : { boots: false, why: `\`true\` exited ${r.code} in it` };
    keep = r.code === 0;
  } catch (e) {
    const err = e instanceof VmError ? e : new VmError((e as Error).message.replace(/^test\/vm: /, ''), 'uml', '');
    result = { boots: false, why: umlFailure(err.reason, err.output, cpuinfo) };
    keep = /Kernel panic - not syncing/.test(err.output);
  }
  if (keep) {
    for (const old of fs.readdirSync(dir)) if (old.startsWith('uml-probe-')) fs.rmSync(path.join(dir, old), { force: true });
    writeIfChanged(file, JSON.stringify(result) + '\n', 0o644);
  }
  return result;
}

/** The kernel and accelerator a run asked for, after probing what it needs to (see chooseKernel). */
export async function resolveKernel(requested: VmKernelKind, accel?: QemuAccel): Promise<KernelChoice> {
  return chooseKernel({
    requested,
    accel,
    uml: requested === 'uml' ? await probeUml() : undefined,
    kvm: requested === 'uml' ? kvmStatus() : { ok: false, why: 'not asked' },
  });
}

/** A guest not ready this long after start is taken as hung at boot (qemu TCG usually needs 5-60 s). */
const BOOT_TIMEOUT_MS = 5 * 60 * 1000;
const GUEST_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** IPVS schedulers. ip_vs_twos only exists from Linux 6.2 on; a missing one is reported, not fatal. */
export const IPVS_SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'fo', 'ovf', 'mh', 'twos'];

const IPSET_TYPES = [
  'hash_ip', 'hash_ipport', 'hash_ipportip', 'hash_ipportnet', 'hash_ipmark', 'hash_ipmac', 'hash_mac',
  'hash_net', 'hash_netport', 'hash_netiface', 'hash_netnet', 'hash_netportnet',
  'bitmap_ip', 'bitmap_ipmac', 'bitmap_port', 'list_set',
];

/** Modules preloaded in both kernels (the kernel's modprobe helper also works, for anything else). */
export const COMMON_MODULES = [
  'nfnetlink', 'nf_conntrack', 'nf_conntrack_netlink', 'nf_nat',
  'ip_vs', ...IPVS_SCHEDULERS.map((s) => `ip_vs_${s}`), 'nf_conntrack_sip', 'ip_vs_pe_sip',
  'dummy', 'veth', 'bridge',
  'ip_set', ...IPSET_TYPES.map((t) => `ip_set_${t}`), 'xt_set',
];

/** Modules preloaded only under qemu (UML's nf_tables has no ip/ip6/inet families). */
export const QEMU_ONLY_MODULES = [
  'nf_tables', 'nft_ct', 'nft_nat', 'nft_chain_nat', 'nft_masq', 'nft_redir', 'nft_compat', 'nft_hash',
  'nft_numgen', 'nft_reject', 'nft_reject_inet', 'nft_reject_ipv4', 'nft_reject_ipv6', 'nft_fib',
  'nft_fib_inet', 'nft_fib_ipv4', 'nft_fib_ipv6', 'nft_limit', 'nft_log', 'nft_quota', 'nft_objref',
  'nft_connlimit', 'nft_socket',
];

/** Modules the qemu initramfs needs to reach the 9p root (with their dependencies). */
const QEMU_INITRAMFS_MODULES = ['virtio_pci', '9pnet_virtio', '9p'];

// ---------------------------------------------------------------------------
// Paths

/** The checkout: the nearest directory above this file with ipvsync's package.json. */
export function repoRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pj = path.join(dir, 'package.json');
    if (fs.existsSync(pj)) {
      try {
        if ((JSON.parse(fs.readFileSync(pj, 'utf8')) as { name?: string }).name === 'ipvsync') return dir;
      } catch {
        // not ours; keep looking
      }
    }
    const up = path.dirname(dir);
    if (up === dir) throw new Error('test/vm: cannot find the ipvsync checkout above ' + fileURLToPath(import.meta.url));
    dir = up;
  }
}

function cacheDir(root: string, ...parts: string[]): string {
  const d = path.join(root, '.vm', ...parts);
  fs.mkdirSync(d, { recursive: true });
  return d;
}

/** Writes a file only when its content changed, atomically. */
function writeIfChanged(file: string, content: string | Buffer, mode: number): void {
  const buf = typeof content === 'string' ? Buffer.from(content) : content;
  try {
    if (fs.readFileSync(file).equals(buf)) {
      fs.chmodSync(file, mode);
      return;
    }
  } catch {
    // missing: write it
  }
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, buf, { mode });
  fs.chmodSync(tmp, mode);
  fs.renameSync(tmp, file);
}

function assertNoSpace(what: string, p: string): void {
  if (/\s/.test(p)) throw new Error(`test/vm: ${what} ${JSON.stringify(p)} contains white space; the kernel command line cannot carry it`);
}

function shq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

// ---------------------------------------------------------------------------
// Kernels

interface UmlKernel {
  kind: 'uml';
  binary: string;
  release: string;
  moduleDir: string;
}

interface QemuKernel {
  kind: 'qemu';
  binary: string;
  vmlinuz: string;
  release: string;
}

function findUml(): UmlKernel {
  const binary = process.env.IPVSYNC_VM_UML ?? '/usr/bin/linux.uml';
  if (!fs.existsSync(binary)) {
    throw new Error(`test/vm: ${binary} not found: install user-mode-linux (scripts/vm-deps.sh)`);
  }
  let release = '';
  try {
    release = execFileSync(binary, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 }).trim().split(/\s+/)[0] ?? '';
  } catch (e) {
    throw new Error(`test/vm: ${binary} --version failed: ${(e as Error).message}`);
  }
  const moduleDir = `/usr/lib/uml/modules/${release}`;
  if (!release || !fs.existsSync(path.join(moduleDir, 'modules.dep'))) {
    throw new Error(`test/vm: no UML modules for release ${JSON.stringify(release)} in ${moduleDir}`);
  }
  return { kind: 'uml', binary, release, moduleDir };
}

function compareReleases(a: string, b: string): number {
  return a.localeCompare(b, 'en', { numeric: true });
}

function findQemu(): QemuKernel {
  const binary = process.env.IPVSYNC_VM_QEMU ?? 'qemu-system-x86_64';
  let vmlinuz = process.env.IPVSYNC_VM_QEMU_KERNEL ?? '';
  let release: string;
  if (vmlinuz) {
    release = path.basename(vmlinuz).replace(/^vmlinuz-/, '');
  } else {
    const candidates = (fs.existsSync('/boot') ? fs.readdirSync('/boot') : [])
      .filter((f) => f.startsWith('vmlinuz-'))
      .map((f) => f.slice('vmlinuz-'.length))
      .filter((r) => fs.existsSync(`/lib/modules/${r}/modules.dep`))
      .sort(compareReleases);
    const newest = candidates[candidates.length - 1];
    if (!newest) {
      throw new Error('test/vm: no /boot/vmlinuz-* with matching /lib/modules/<release>: install linux-image-amd64 (scripts/vm-deps.sh)');
    }
    release = newest;
    vmlinuz = `/boot/vmlinuz-${release}`;
  }
  if (!fs.existsSync(vmlinuz)) throw new Error(`test/vm: ${vmlinuz} not found`);
  if (!fs.existsSync(`/lib/modules/${release}/modules.dep`)) {
    throw new Error(`test/vm: /lib/modules/${release} missing for ${vmlinuz}`);
  }
  return { kind: 'qemu', binary, vmlinuz, release };
}

// ---------------------------------------------------------------------------
// Guest PID 1 (both kernels). Parameters come from the kernel command line
// (ipvsync_kernel=, ipvsync_share=) and from config.sh in the shared dir.

const GUEST_INIT = `#!/bin/sh
# PID 1 of the ipvsync test VM. Generated by test/vm/vm.ts; edits are overwritten.
PATH=${GUEST_PATH}
export PATH
umask 022
S=
say() { echo "ipvsync-vm: $*"; }
halt_vm() {
  sync
  [ -n "$S" ] && umount "$S" 2>/dev/null
  busybox poweroff -f
  poweroff -f
  echo o > /proc/sysrq-trigger
  sleep 30
  exit 1
}
fatal() { say "FATAL: $*"; halt_vm; }

# Always mount: under UML the hostfs root shows the host's own /proc and /sys.
mount -t proc proc /proc || fatal "cannot mount /proc"
mount -t sysfs sysfs /sys || fatal "cannot mount /sys"

VM_KERNEL=
VM_SHARE=
for a in $(cat /proc/cmdline); do
  case "$a" in
    ipvsync_kernel=*) VM_KERNEL=\${a#*=} ;;
    ipvsync_share=*) VM_SHARE=\${a#*=} ;;
  esac
done

mount -t tmpfs -o mode=755 tmpfs /run || fatal "cannot mount a tmpfs on /run"
mkdir -p /run/ipvsync/share /run/lock
S=/run/ipvsync/share
case "$VM_KERNEL" in
  uml) mount -t hostfs -o "$VM_SHARE" hostfs "$S" ;;
  qemu) mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none ipvsync_share "$S" ;;
  *) false ;;
esac || { S=; fatal "cannot mount the shared directory (kernel=$VM_KERNEL share=$VM_SHARE)"; }
[ -r "$S/config.sh" ] || fatal "no config.sh in the shared directory"
. "$S/config.sh"

# /dev: devtmpfs where the kernel has it (qemu moved it here), else nodes on a tmpfs (UML).
if ! grep -q '^[^ ]* /dev ' /proc/mounts; then
  if ! mount -t devtmpfs devtmpfs /dev 2>/dev/null; then
    mount -t tmpfs -o mode=755 tmpfs /dev || fatal "cannot mount /dev"
    mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/zero c 1 5 && mknod -m 666 /dev/full c 1 7 &&
      mknod -m 666 /dev/random c 1 8 && mknod -m 666 /dev/urandom c 1 9 && mknod -m 644 /dev/kmsg c 1 11 &&
      mknod -m 666 /dev/tty c 5 0 && mknod -m 600 /dev/console c 5 1 || fatal "cannot create /dev nodes"
  fi
fi
mkdir -p /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /dev/pts || say "cannot mount /dev/pts"
[ -e /dev/ptmx ] || ln -s pts/ptmx /dev/ptmx
mount -t tmpfs -o mode=1777 tmpfs /dev/shm || say "cannot mount /dev/shm"
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
[ -e /dev/stdin ] || ln -s /proc/self/fd/0 /dev/stdin
[ -e /dev/stdout ] || ln -s /proc/self/fd/1 /dev/stdout
[ -e /dev/stderr ] || ln -s /proc/self/fd/2 /dev/stderr

# Writable /tmp and /var/tmp. Host paths below them that the command needs
# (e.g. a checkout under /tmp) are listed in $S/keep and bound back in place.
fresh_tmpfs() {
  t=$1
  hidden=/run/ipvsync/hidden$t
  if [ -s "$S/keep" ] && grep -q "^$t/" "$S/keep"; then
    mkdir -p "$hidden" && mount --bind "$t" "$hidden" || fatal "cannot bind $t"
  fi
  mount -t tmpfs -o mode=1777 tmpfs "$t" || fatal "cannot mount a tmpfs on $t"
  if [ -d "$hidden" ]; then
    while IFS= read -r p; do
      case "$p" in
        "$t"/*) mkdir -p "$p" && mount --bind "$hidden\${p#"$t"}" "$p" || fatal "cannot keep $p visible" ;;
      esac
    done < "$S/keep"
  fi
}
fresh_tmpfs /tmp
[ -d /var/tmp ] && fresh_tmpfs /var/tmp

# UML: its modules live in /usr/lib/uml/modules; make them /lib/modules so that
# modprobe and the kernel's own module loader (ip_vs_<scheduler>, ipset types,
# ...) find them. Fallback: a modprobe -d wrapper as the kernel's helper.
MODPROBE=modprobe
if [ ! -d "/lib/modules/$(uname -r)" ] && [ -n "$VM_MODROOT" ]; then
  if ! mount --bind "$VM_MODROOT/lib/modules" /lib/modules 2>/dev/null || [ ! -d "/lib/modules/$(uname -r)" ]; then
    printf '#!/bin/sh\\nexec /sbin/modprobe -d %s "$@"\\n' "$VM_MODROOT" > /run/ipvsync/modprobe
    chmod 755 /run/ipvsync/modprobe
    echo /run/ipvsync/modprobe > /proc/sys/kernel/modprobe
    MODPROBE=/run/ipvsync/modprobe
  fi
fi

busybox hostname ipvsync-vm 2>/dev/null
ip link set lo up || fatal "cannot bring lo up"

# One modprobe for all (it goes on past failures), then a second look, one by
# one, at those that did not show up in /sys/module (absent, or built in).
$MODPROBE -a $VM_MODULES 2>/dev/null
absent=
for m in $VM_MODULES; do
  [ -d "/sys/module/$m" ] && continue
  if ! out=$($MODPROBE "$m" 2>&1); then
    case "$out" in
      *"not found"*) absent="$absent $m" ;;
      *) say "modprobe $m failed: $out" ;;
    esac
  fi
done
[ -z "$absent" ] || say "modules not in this kernel:$absent"

read up _ < /proc/uptime
echo "$up" > "$S/ready" || fatal "cannot write to the shared directory"
say "$VM_KERNEL $(uname -r) up after \${up}s (guest clock); running the command"

/bin/sh "$S/run.sh" < /dev/null
rc=$?
{ echo "$rc" > "$S/rc.tmp" && mv "$S/rc.tmp" "$S/rc"; } || say "cannot write the exit code"
halt_vm
`;

// qemu's initramfs: load the virtio/9p modules, mount the host root, switch_root into it.
const QEMU_STAGE1 = `#!/bin/sh
PATH=/bin
export PATH
fatal() { echo "ipvsync-vm: FATAL (initramfs): $*"; poweroff -f; sleep 30; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
while read -r m; do
  insmod "/lib/modules/$m" || echo "ipvsync-vm: insmod $m failed"
done < /modules.list
init=
for a in $(cat /proc/cmdline); do
  case "$a" in ipvsync_init=*) init=\${a#*=} ;; esac
done
[ -n "$init" ] || fatal "no ipvsync_init= on the kernel command line"
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=262144,cache=loose hostroot /newroot ||
  fatal "cannot mount the host root over virtio-9p"
[ -x "/newroot$init" ] || fatal "$init is not executable in the host root"
umount /sys
umount /proc
mount --move /dev /newroot/dev || fatal "cannot move /dev into the new root"
exec switch_root /newroot "$init"
`;

// ---------------------------------------------------------------------------
// Initramfs (newc cpio, written here so no cpio binary is needed)

interface CpioEntry {
  name: string;
  mode: number;
  data?: Buffer;
  rdev?: [number, number];
}

function cpioNewc(entries: CpioEntry[]): Buffer {
  const parts: Buffer[] = [];
  const pad4 = (n: number) => Buffer.alloc((4 - (n % 4)) % 4);
  let ino = 1;
  const push = (e: CpioEntry) => {
    const data = e.data ?? Buffer.alloc(0);
    const name = Buffer.from(e.name + '\0');
    const isDir = (e.mode & 0o170000) === 0o040000;
    const fields = [
      ino++, e.mode, 0, 0, isDir ? 2 : 1, 0, data.length, 0, 0, e.rdev?.[0] ?? 0, e.rdev?.[1] ?? 0, name.length, 0,
    ];
    const header = Buffer.from('070701' + fields.map((f) => f.toString(16).padStart(8, '0')).join(''));
    parts.push(header, name, pad4(header.length + name.length), data, pad4(data.length));
  };
  entries.forEach(push);
  push({ name: 'TRAILER!!!', mode: 0 });
  return Buffer.concat(parts);
}

function isStaticElf(file: string): boolean {
  const b = fs.readFileSync(file);
  if (b.length < 64 || b.readUInt32BE(0) !== 0x7f454c46 || b[4] !== 2) return false;
  const phoff = Number(b.readBigUInt64LE(0x20));
  const phentsize = b.readUInt16LE(0x36);
  const phnum = b.readUInt16LE(0x38);
  for (let i = 0; i < phnum; i++) {
    if (b.readUInt32LE(phoff + i * phentsize) === 3 /* PT_INTERP */) return false;
  }
  return true;
}

function moduleFilesWithDeps(release: string, names: string[]): string[] {
  const files: string[] = [];
  for (const name of names) {
    let out: string;
    try {
      out = execFileSync('modprobe', ['-S', release, '--show-depends', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (e) {
      throw new Error(`test/vm: modprobe -S ${release} --show-depends ${name} failed (is kmod installed?): ${(e as Error).message}`);
    }
    for (const line of out.split('\n')) {
      const m = /^insmod\s+(\S+)/.exec(line);
      if (m?.[1] && !files.includes(m[1])) files.push(m[1]);
    }
  }
  return files;
}

function readModule(file: string): Buffer {
  if (file.endsWith('.ko')) return fs.readFileSync(file);
  if (file.endsWith('.ko.gz')) return gunzipSync(fs.readFileSync(file));
  if (file.endsWith('.ko.xz')) return execFileSync('xz', ['-dc', file], { maxBuffer: 1 << 28 });
  if (file.endsWith('.ko.zst')) return execFileSync('zstd', ['-dc', file], { maxBuffer: 1 << 28 });
  throw new Error(`test/vm: unknown module format: ${file}`);
}

/** Builds (or reuses) .vm/qemu-<release>/initramfs-<hash>.cpio.gz. */
function qemuInitramfs(root: string, k: QemuKernel): string {
  const busybox = process.env.IPVSYNC_VM_BUSYBOX ?? '/bin/busybox';
  if (!fs.existsSync(busybox)) throw new Error(`test/vm: ${busybox} not found: install busybox-static (scripts/vm-deps.sh)`);
  if (!isStaticElf(busybox)) throw new Error(`test/vm: ${busybox} is dynamically linked: install busybox-static`);
  const modules = moduleFilesWithDeps(k.release, QEMU_INITRAMFS_MODULES);
  const h = createHash('sha256').update('initramfs-v1\0').update(QEMU_STAGE1);
  for (const f of [busybox, ...modules]) {
    const st = fs.statSync(f);
    h.update(`${f}\0${st.size}\0${st.mtimeMs}\0`);
  }
  const dir = cacheDir(root, `qemu-${k.release}`);
  const file = path.join(dir, `initramfs-${h.digest('hex').slice(0, 16)}.cpio.gz`);
  if (fs.existsSync(file)) return file;

  const entries: CpioEntry[] = [];
  for (const d of ['bin', 'dev', 'lib', 'lib/modules', 'newroot', 'proc', 'sys']) entries.push({ name: d, mode: 0o040755 });
  entries.push({ name: 'dev/console', mode: 0o020600, rdev: [5, 1] });
  entries.push({ name: 'dev/null', mode: 0o020666, rdev: [1, 3] });
  entries.push({ name: 'bin/busybox', mode: 0o100755, data: fs.readFileSync(busybox) });
  for (const applet of ['sh', 'mount', 'insmod', 'switch_root', 'mkdir', 'cat', 'echo', 'poweroff', 'sleep', 'ls']) {
    entries.push({ name: `bin/${applet}`, mode: 0o120777, data: Buffer.from('busybox') });
  }
  const list: string[] = [];
  modules.forEach((f, i) => {
    const name = `${String(i).padStart(2, '0')}-${path.basename(f).replace(/\.ko\.(gz|xz|zst)$/, '.ko')}`;
    list.push(name);
    entries.push({ name: `lib/modules/${name}`, mode: 0o100644, data: readModule(f) });
  });
  entries.push({ name: 'modules.list', mode: 0o100644, data: Buffer.from(list.join('\n') + '\n') });
  entries.push({ name: 'init', mode: 0o100755, data: Buffer.from(QEMU_STAGE1) });

  for (const old of fs.readdirSync(dir)) {
    if (old.startsWith('initramfs-')) fs.rmSync(path.join(dir, old), { force: true });
  }
  writeIfChanged(file, gzipSync(cpioNewc(entries), { level: 1 }), 0o644);
  return file;
}

/** True if the ELF file has a XEN_ELFNOTE_PHYS32_ENTRY note (qemu can boot it directly, PVH). */
function hasPvhNote(elf: Buffer): boolean {
  if (elf.length < 64 || elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2) return false;
  const phoff = Number(elf.readBigUInt64LE(0x20));
  const phentsize = elf.readUInt16LE(0x36);
  const phnum = elf.readUInt16LE(0x38);
  for (let i = 0; i < phnum; i++) {
    const ph = phoff + i * phentsize;
    if (elf.readUInt32LE(ph) !== 4 /* PT_NOTE */) continue;
    let off = Number(elf.readBigUInt64LE(ph + 8));
    const end = off + Number(elf.readBigUInt64LE(ph + 32));
    while (off + 12 <= end) {
      const namesz = elf.readUInt32LE(off);
      const descsz = elf.readUInt32LE(off + 4);
      const type = elf.readUInt32LE(off + 8);
      const name = elf.subarray(off + 12, off + 12 + namesz).toString('latin1');
      if (name.startsWith('Xen') && type === 18) return true;
      off += 12 + Math.ceil(namesz / 4) * 4 + Math.ceil(descsz / 4) * 4;
    }
  }
  return false;
}

/**
 * The bzImage's uncompressed vmlinux, cached in .vm/qemu-<release>/, when it
 * has a PVH entry: qemu then starts it directly, skipping the BIOS boot path
 * and the kernel's self-decompression (about 3 s under TCG). Falls back to the
 * bzImage when the payload's format is unknown or its decompressor missing.
 */
function qemuBootImage(root: string, k: QemuKernel): string {
  const st = fs.statSync(k.vmlinuz);
  const dir = cacheDir(root, `qemu-${k.release}`);
  const key = createHash('sha256').update(`${k.vmlinuz}\0${st.size}\0${st.mtimeMs}`).digest('hex').slice(0, 16);
  const out = path.join(dir, `vmlinux-${key}`);
  const noPvh = path.join(dir, `vmlinux-${key}.none`);
  if (fs.existsSync(out)) return out;
  if (fs.existsSync(noPvh)) return k.vmlinuz;
  let elf: Buffer | undefined;
  try {
    const bz = fs.readFileSync(k.vmlinuz);
    if (bz.toString('latin1', 0x202, 0x206) !== 'HdrS') throw new Error('not a bzImage');
    const setupSects = bz[0x1f1] || 4;
    const start = (setupSects + 1) * 512 + bz.readUInt32LE(0x248);
    // The build appends the uncompressed size (4 bytes) to the compressed stream.
    const payload = bz.subarray(start, start + bz.readUInt32LE(0x24c) - 4);
    const magic = payload.subarray(0, 6).toString('hex');
    if (magic.startsWith('1f8b')) elf = gunzipSync(payload);
    else if (magic === 'fd377a585a00') elf = execFileSync('xz', ['-dc', '--single-stream'], { input: payload, maxBuffer: 1 << 30 });
    else if (magic.startsWith('28b52ffd')) elf = execFileSync('zstd', ['-dc'], { input: payload, maxBuffer: 1 << 30 });
  } catch {
    elf = undefined;
  }
  for (const old of fs.readdirSync(dir)) {
    if (old.startsWith('vmlinux-')) fs.rmSync(path.join(dir, old), { force: true });
  }
  if (!elf || !hasPvhNote(elf)) {
    fs.writeFileSync(noPvh, '');
    return k.vmlinuz;
  }
  writeIfChanged(out, elf, 0o644);
  return out;
}

/** .vm/uml-<release>/lib/modules/<release> -> the UML modules: a modprobe -d root outside /tmp. */
function umlModuleRoot(root: string, k: UmlKernel): string {
  const dir = cacheDir(root, `uml-${k.release}`);
  const mods = cacheDir(root, `uml-${k.release}`, 'lib', 'modules');
  const link = path.join(mods, k.release);
  let current: string | undefined;
  try {
    current = fs.readlinkSync(link);
  } catch {
    current = undefined;
  }
  if (current !== k.moduleDir) {
    fs.rmSync(link, { force: true, recursive: true });
    fs.symlinkSync(k.moduleDir, link);
  }
  return dir;
}

// ---------------------------------------------------------------------------
// Running

/** Turns CRLF (tty onlcr on the guest console) into LF, across chunk boundaries. */
class Crlf {
  private pendingCr = false;
  push(s: string): string {
    if (this.pendingCr) {
      s = '\r' + s;
      this.pendingCr = false;
    }
    if (s.endsWith('\r')) {
      this.pendingCr = true;
      s = s.slice(0, -1);
    }
    return s.replace(/\r\n/g, '\n');
  }
  flush(): string {
    const s = this.pendingCr ? '\r' : '';
    this.pendingCr = false;
    return s;
  }
}

const live = new Set<number>();
let exitHookInstalled = false;
function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const pid of live) killGroup(pid);
  });
}

function tail(output: string, lines = 40): string {
  const all = output.trimEnd().split('\n');
  return all.slice(-lines).join('\n');
}

function guestModules(kind: VmKernelKind): string[] {
  return kind === 'qemu' ? [...COMMON_MODULES, ...QEMU_ONLY_MODULES] : [...COMMON_MODULES];
}

/**
 * Boots a VM, runs `opts.command` in it and powers it off. Resolves with the
 * command's exit code; rejects with a VmError when the VM could not be set
 * up, did not boot, timed out, was aborted or reported no exit code.
 */
export async function runInVm(opts: RunInVmOptions): Promise<RunInVmResult> {
  let kind = opts.kernel ?? (process.env.IPVSYNC_VM_KERNEL === 'qemu' ? 'qemu' : 'uml');
  try {
    if (kind !== 'uml' && kind !== 'qemu') throw new Error(`unknown kernel ${JSON.stringify(kind)} (uml or qemu)`);
    if (kind === 'uml') {
      if (opts.accel !== undefined) throw new Error('test/vm: an accelerator applies to the qemu kernel only');
      const choice = await resolveKernel('uml', process.env.IPVSYNC_VM_ACCEL === undefined ? undefined : qemuAccel());
      if (choice.fallback) {
        opts.onOutput?.(`ipvsync-vm: ${choice.fallback}\n`);
        kind = 'qemu';
        return await prepareAndBoot(kind, { ...opts, accel: choice.accel });
      }
    }
    return await prepareAndBoot(kind, opts);
  } catch (e) {
    if (e instanceof VmError) throw e;
    throw new VmError(`setup failed: ${(e as Error).message.replace(/^test\/vm: /, '')}`, String(kind), '');
  }
}

async function prepareAndBoot(kind: VmKernelKind, opts: RunInVmOptions): Promise<RunInVmResult> {
  const cwd = path.resolve(opts.cwd ?? process.cwd());
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const memMB = opts.memMB ?? DEFAULT_MEM_MB;
  const root = repoRoot();
  assertNoSpace('the checkout path', root);
  if (!fs.existsSync(cwd)) throw new Error(`test/vm: cwd ${cwd} does not exist`);

  const k = kind === 'uml' ? findUml() : findQemu();
  const accel = kind === 'qemu' ? qemuAccel(opts.accel) : undefined;
  if (accel === 'kvm') {
    const kvm = kvmStatus();
    if (!kvm.ok) throw new Error(`test/vm: --accel kvm: ${kvm.why}`);
  }
  const kernelName = accel === 'kvm' ? `${kind} ${k.release} (kvm)` : `${kind} ${k.release}`;

  // PID 1 script, visible in the guest at the same path.
  const initPath = path.join(cacheDir(root), 'vm-init.sh');
  writeIfChanged(initPath, GUEST_INIT, 0o755);

  // Host temp dir: share/ is the guest's writable window; uml/ holds UML's runtime files.
  const hostTmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ipvsync-vm-'));
  assertNoSpace('the temp directory', hostTmp);
  const share = path.join(hostTmp, 'share');
  fs.mkdirSync(share, { mode: 0o755 });
  fs.mkdirSync(path.join(share, 'out'), { mode: 0o777 });

  try {
    const env: Record<string, string> = {
      PATH: `${path.dirname(process.execPath)}:${GUEST_PATH}`,
      HOME: '/tmp/home',
      LANG: 'C.UTF-8',
      TERM: 'dumb',
      IPVSYNC_VM: kind,
      IPVSYNC_VM_RELEASE: k.release,
      IPVSYNC_VM_OUT: '/run/ipvsync/share/out',
      // what the guest runs on: benchmarks record it
      ...(accel ? { IPVSYNC_VM_ACCEL: accel } : {}),
      ...opts.env,
    };
    const lines = ['#!/bin/sh', '# written by test/vm/vm.ts for one run'];
    for (const [name, value] of Object.entries(env)) {
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`test/vm: invalid environment variable name ${JSON.stringify(name)}`);
      lines.push(`export ${name}=${shq(value)}`);
    }
    lines.push('mkdir -p "$HOME" 2>/dev/null');
    lines.push(`cd ${shq(cwd)} || { echo "ipvsync-vm: cannot cd to ${cwd.replace(/["$`\\]/g, '')}"; exit 125; }`);
    lines.push(`exec bash -c ${shq(opts.command)}`);
    fs.writeFileSync(path.join(share, 'run.sh'), lines.join('\n') + '\n', { mode: 0o755 });

    // Host paths under the guest's fresh tmpfs mounts that must stay visible.
    const keep = [...new Set([cwd, root])].filter((p) => /^\/(var\/)?tmp\//.test(p));
    fs.writeFileSync(path.join(share, 'keep'), keep.map((p) => p + '\n').join(''));

    const config = [`VM_MODULES=${shq(guestModules(kind).join(' '))}`];
    config.push(`VM_MODROOT=${k.kind === 'uml' ? shq(umlModuleRoot(root, k)) : "''"}`);
    fs.writeFileSync(path.join(share, 'config.sh'), config.join('\n') + '\n');

    let cmd: string;
    let args: string[];
    if (k.kind === 'uml') {
      const umlDir = path.join(hostTmp, 'uml');
      fs.mkdirSync(umlDir);
      cmd = k.binary;
      args = [
        `mem=${memMB}M`, 'root=/dev/root', 'rootfstype=hostfs', 'rootflags=/', 'ro', `init=${initPath}`,
        'con=null', 'con0=fd:0,fd:1', 'quiet', 'loglevel=3', `umid=ipvsync-${process.pid}-${path.basename(hostTmp)}`,
        `uml_dir=${umlDir}`, 'ipvsync_kernel=uml', `ipvsync_share=${share}`,
      ];
    } else {
      const initrd = qemuInitramfs(root, k);
      const image = qemuBootImage(root, k);
      cmd = k.binary;
      args = [
        ...qemuAccelArgs(accel ?? 'tcg'), '-smp', '2', '-m', String(memMB),
        '-nodefaults', '-no-user-config', '-display', 'none', '-serial', 'stdio', '-no-reboot',
        '-kernel', image, '-initrd', initrd,
        // IPVSYNC_VM_APPEND: more kernel parameters (an experiment's, e.g. preempt=full)
        '-append', `console=ttyS0 quiet loglevel=4 panic=-1 ipvsync_kernel=qemu ipvsync_init=${initPath}${process.env.IPVSYNC_VM_APPEND ? ` ${process.env.IPVSYNC_VM_APPEND}` : ''}`,
        '-fsdev', 'local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap',
        '-device', 'virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot',
        '-fsdev', `local,id=share,path=${share.replace(/,/g, ',,')},security_model=none`,
        '-device', 'virtio-9p-pci,fsdev=share,mount_tag=ipvsync_share',
      ];
    }
    const result = await boot(cmd, args, { kernelName, share, timeoutMs, onOutput: opts.onOutput, signal: opts.signal });
    if (opts.outDir) {
      fs.mkdirSync(opts.outDir, { recursive: true });
      fs.cpSync(path.join(share, 'out'), opts.outDir, { recursive: true });
    }
    return result;
  } finally {
    fs.rmSync(hostTmp, { recursive: true, force: true });
  }
}

interface BootOpts {
  kernelName: string;
  share: string;
  timeoutMs: number;
  onOutput: ((chunk: string) => void) | undefined;
  signal: AbortSignal | undefined;
}

function boot(cmd: string, args: string[], o: BootOpts): Promise<RunInVmResult> {
  installExitHook();
  return new Promise<RunInVmResult>((resolve, reject) => {
    let output = '';
    const crlf = { out: new Crlf(), err: new Crlf() };
    const emit = (s: string) => {
      if (!s) return;
      output += s;
      o.onOutput?.(s);
    };
    const started = Date.now();
    if (o.signal?.aborted) {
      reject(new VmError('aborted before boot', o.kernelName, ''));
      return;
    }
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let failure: string | undefined;
    let settled = false;
    if (child.pid !== undefined) live.add(child.pid);
    const stop = (why: string) => {
      if (failure === undefined) failure = why;
      if (child.pid !== undefined) killGroup(child.pid);
    };
    const timer = setTimeout(() => stop(`timed out after ${Math.round(o.timeoutMs / 1000)} s; the VM was killed`), o.timeoutMs);
    const bootDeadline = started + Math.min(BOOT_TIMEOUT_MS, o.timeoutMs);
    const bootWatch = setInterval(() => {
      if (fs.existsSync(path.join(o.share, 'ready'))) clearInterval(bootWatch);
      else if (Date.now() > bootDeadline) {
        clearInterval(bootWatch);
        stop(`not ready ${Math.round((Date.now() - started) / 1000)} s after start: hung at boot; the VM was killed`);
      }
    }, 250);
    const onAbort = () => stop('aborted; the VM was killed');
    o.signal?.addEventListener('abort', onAbort, { once: true });

    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (s: string) => emit(crlf.out.push(s)));
    child.stderr.on('data', (s: string) => emit(crlf.err.push(s)));

    let exitInfo = '';
    let closeGrace: NodeJS.Timeout | undefined;
    child.on('exit', (code, sig) => {
      exitInfo = sig ? `signal ${sig}` : `exit status ${code}`;
      // A helper process may still hold the console pipe open; don't wait for it forever.
      closeGrace = setTimeout(() => {
        if (child.pid !== undefined) killGroup(child.pid);
        child.stdout.destroy();
        child.stderr.destroy();
        finish();
      }, 3000);
    });
    child.on('error', (e) => {
      failure ??= `cannot start ${cmd}: ${e.message} (run scripts/vm-deps.sh)`;
      finish();
    });
    child.on('close', () => finish());

    function finish(): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearInterval(bootWatch);
      if (closeGrace) clearTimeout(closeGrace);
      o.signal?.removeEventListener('abort', onAbort);
      if (child.pid !== undefined) {
        killGroup(child.pid); // stray helpers, if any
        live.delete(child.pid);
      }
      emit(crlf.out.flush() + crlf.err.flush());

      const readyFile = path.join(o.share, 'ready');
      const rcFile = path.join(o.share, 'rc');
      const ready = fs.existsSync(readyFile) ? fs.statSync(readyFile) : undefined;
      const bootMs = ready ? Math.max(0, Math.round(ready.mtimeMs - started)) : -1;
      const fail = (msg: string) => reject(new VmError(msg, o.kernelName, output));

      if (failure !== undefined) {
        fail(`${failure}${ready ? '' : ' (before the guest was ready)'}`);
        return;
      }
      if (!ready) {
        fail(`the VM did not boot: it stopped (${exitInfo || 'unknown status'}) before its init was ready`);
        return;
      }
      if (!fs.existsSync(rcFile)) {
        fail(`the guest booted but reported no exit code (the VM stopped with ${exitInfo || 'unknown status'}; crashed or powered off early?)`);
        return;
      }
      const text = fs.readFileSync(rcFile, 'utf8').trim();
      if (!/^\d+$/.test(text)) {
        fail(`unreadable exit code ${JSON.stringify(text)}`);
        return;
      }
      resolve({ code: Number(text), output, bootMs, kernel: o.kernelName });
    }
  });
}
