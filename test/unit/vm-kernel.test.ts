// Which kernel the VM harness boots (test/vm/vm.ts chooseKernel): user-mode-linux where it boots,
// else qemu — on KVM where the host's KVM can boot Debian's kernel, else TCG — saying why in one
// line. The decision is pure over the probes' results; here they are faked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chooseKernel, cpuFlags, umlFailure, type KvmStatus, type UmlProbe } from '../vm/vm.js';

const PVM: KvmStatus = { ok: false, why: "this host's KVM is PVM (kvm_pvm, KVM without hardware virtualization)" };
const NO_KVM: KvmStatus = { ok: false, why: '/dev/kvm is not usable (ENOENT): no KVM here' };
const KVM: KvmStatus = { ok: true };
const BOOTS: UmlProbe = { boots: true };

// The console of Debian's user-mode-linux 6.1um4+b13 starting its init on a Xeon with AMX.
const AMX_CPUINFO = `processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep avx512f avx512_bf16 amx_bf16 avx512_fp16 amx_tile amx_int8 arch_lbr
`;
const PANIC_OUTPUT = `Core dump limits :
	soft - 0
	hard - NONE
Checking that ptrace can change system call numbers...OK
Checking syscall emulation for ptrace...OK
Checking environment variables for a tempdir...none found
Checking if /dev/shm is on tmpfs...OK
Checking PROT_EXEC mmap in /dev/shm...OK
ptrace set fp regs failed, errno = 14
Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b
CPU: 0 PID: 1 Comm: vm-init.sh Not tainted 6.1.176 #1
Stack:
 6093fd60 6003a81d 00000000 6093fdc0
Call Trace:
 [<60049a05>] ? put_fp_registers+0x35/0x60
 [<6002fd9c>] ? fatal_sigsegv+0x1c/0x30
 [<6001b2f6>] ? panic+0x186/0x37e
`;

test('user-mode-linux asked for and booting: it is used, and nothing is said', () => {
  for (const kvm of [KVM, NO_KVM, PVM]) {
    assert.deepEqual(chooseKernel({ requested: 'uml', uml: BOOTS, kvm }), { kernel: 'uml' });
  }
  // an accelerator from the environment does not move a run that UML can take
  assert.deepEqual(chooseKernel({ requested: 'uml', accel: 'kvm', uml: BOOTS, kvm: KVM }), { kernel: 'uml' });
});

test('user-mode-linux panicking on an AMX CPU: qemu runs instead, and the line says why', () => {
  const why = umlFailure('the VM did not boot: it stopped (exit status 0) before its init was ready', PANIC_OUTPUT, AMX_CPUINFO);
  assert.equal(
    why,
    'Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b; ptrace set fp regs failed, errno = 14; the CPU has AMX: amx_bf16 amx_tile amx_int8',
  );
  assert.deepEqual(chooseKernel({ requested: 'uml', uml: { boots: false, why }, kvm: NO_KVM }), {
    kernel: 'qemu',
    accel: 'tcg',
    fallback: `user-mode-linux cannot boot on this CPU (${why}); running it under qemu (TCG)`,
  });
});

test('the fallback runs on KVM where the host can boot Debian there, else TCG; an accelerator asked for wins', () => {
  const panics: UmlProbe = { boots: false, why: 'Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b' };
  const pick = (kvm: KvmStatus, accel?: 'tcg' | 'kvm') => {
    const c = chooseKernel({ requested: 'uml', accel, uml: panics, kvm });
    return [c.kernel, c.accel, c.fallback?.replace(/^.*running it under /, '')];
  };
  assert.deepEqual(pick(KVM), ['qemu', 'kvm', 'qemu (KVM)']);
  assert.deepEqual(pick(NO_KVM), ['qemu', 'tcg', 'qemu (TCG)']);
  assert.deepEqual(pick(PVM), ['qemu', 'tcg', 'qemu (TCG)']);
  assert.deepEqual(pick(KVM, 'tcg'), ['qemu', 'tcg', 'qemu (TCG)']);
  assert.deepEqual(pick(NO_KVM, 'kvm'), ['qemu', 'kvm', 'qemu (KVM)']);
});

test('the forced fallback (IPVSYNC_UML_PROBE=fail) takes the same path', () => {
  assert.deepEqual(chooseKernel({ requested: 'uml', uml: { boots: false, why: 'IPVSYNC_UML_PROBE=fail' }, kvm: PVM }), {
    kernel: 'qemu',
    accel: 'tcg',
    fallback: 'user-mode-linux cannot boot on this CPU (IPVSYNC_UML_PROBE=fail); running it under qemu (TCG)',
  });
});

test('qemu asked for: qemu, under the accelerator asked, else TCG (KVM is never picked for it)', () => {
  assert.deepEqual(chooseKernel({ requested: 'qemu', kvm: KVM }), { kernel: 'qemu', accel: 'tcg' });
  assert.deepEqual(chooseKernel({ requested: 'qemu', accel: 'kvm', kvm: KVM }), { kernel: 'qemu', accel: 'kvm' });
});

test('user-mode-linux asked for but not probed is a harness bug, not a choice', () => {
  assert.throws(() => chooseKernel({ requested: 'uml', kvm: KVM }), /user-mode-linux was asked for but not probed/);
});

test("a failure without a panic keeps the harness's reason; a CPU without AMX adds nothing", () => {
  const cpu = 'flags\t\t: fpu vme sse2 avx2\n';
  assert.deepEqual(cpuFlags(cpu), ['fpu', 'vme', 'sse2', 'avx2']);
  assert.deepEqual(cpuFlags(''), []);
  assert.equal(umlFailure('not ready 120 s after start: hung at boot; the VM was killed', 'Checking PROT_EXEC mmap in /dev/shm...OK\n', cpu), 'not ready 120 s after start: hung at boot; the VM was killed');
  assert.equal(umlFailure('/usr/bin/linux.uml not found: install user-mode-linux (scripts/vm-deps.sh)', '', AMX_CPUINFO), '/usr/bin/linux.uml not found: install user-mode-linux (scripts/vm-deps.sh); the CPU has AMX: amx_bf16 amx_tile amx_int8');
});
