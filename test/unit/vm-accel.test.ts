// The VM harness's qemu accelerator (test/vm/vm.ts): TCG by default, KVM only where the host's
// KVM can boot Debian's kernel — checked before booting, with the reason when it can't.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { kvmStatus, qemuAccel, qemuAccelArgs } from '../vm/vm.js';

function fakeHost(modules: string[], dev: 'rw' | 'none' | 'ro' = 'rw'): { dir: string; dev: string; sysModule: string } {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-kvm-'));
  const sysModule = join(dir, 'sys', 'module');
  mkdirSync(sysModule, { recursive: true });
  for (const m of modules) mkdirSync(join(sysModule, m));
  const devPath = join(dir, 'kvm');
  if (dev !== 'none') {
    writeFileSync(devPath, '');
    chmodSync(devPath, dev === 'rw' ? 0o600 : 0o400);
  }
  return { dir, dev: devPath, sysModule };
}

test('qemu runs under TCG with every emulated feature by default, and on the host CPU under KVM', () => {
  assert.deepEqual(qemuAccelArgs('tcg'), ['-accel', 'tcg', '-cpu', 'max']);
  assert.deepEqual(qemuAccelArgs('kvm'), ['-accel', 'kvm', '-cpu', 'host']);
});

test('the accelerator: the option, else $IPVSYNC_VM_ACCEL, else tcg; anything else is an error', () => {
  const saved = process.env.IPVSYNC_VM_ACCEL;
  try {
    delete process.env.IPVSYNC_VM_ACCEL;
    assert.equal(qemuAccel(), 'tcg');
    assert.equal(qemuAccel('kvm'), 'kvm');
    process.env.IPVSYNC_VM_ACCEL = 'kvm';
    assert.equal(qemuAccel(), 'kvm');
    assert.equal(qemuAccel('tcg'), 'tcg');
    assert.throws(() => qemuAccel('hvf'), /the qemu accelerator must be tcg or kvm, not "hvf"/);
    process.env.IPVSYNC_VM_ACCEL = 'whpx';
    assert.throws(() => qemuAccel(), /not "whpx"/);
  } finally {
    if (saved === undefined) delete process.env.IPVSYNC_VM_ACCEL;
    else process.env.IPVSYNC_VM_ACCEL = saved;
  }
});

test('KVM is usable with a read-write /dev/kvm and a hardware-virtualization module', () => {
  for (const m of ['kvm_intel', 'kvm_amd']) {
    const h = fakeHost(['kvm', m]);
    try {
      assert.deepEqual(kvmStatus(h), { ok: true });
    } finally {
      rmSync(h.dir, { recursive: true });
    }
  }
});

test('KVM is refused, with the reason, on a PVM host, without hardware virtualization, or without /dev/kvm', () => {
  const cases: Array<[string[], 'rw' | 'none' | 'ro', RegExp]> = [
    // a nested cloud VM's KVM (this project's development machine): PVM boots only PVM guests
    [['kvm', 'kvm_pvm'], 'rw', /KVM is PVM \(kvm_pvm.*Debian's kernel hangs under it before its first line; use tcg/],
    // PVM wins even where a hardware module shows too
    [['kvm', 'kvm_amd', 'kvm_pvm'], 'rw', /KVM is PVM/],
    [['kvm'], 'rw', /neither kvm_intel nor kvm_amd is loaded/],
    [['kvm', 'kvm_intel'], 'none', /is not usable \(ENOENT\): no KVM here/],
  ];
  if (process.getuid?.() !== 0) cases.push([['kvm', 'kvm_intel'], 'ro', /is not usable \(EACCES\)/]);
  for (const [modules, dev, why] of cases) {
    const h = fakeHost(modules, dev);
    try {
      const s = kvmStatus(h);
      assert.equal(s.ok, false, `${modules} ${dev}`);
      assert.match((s as { why: string }).why, why);
    } finally {
      rmSync(h.dir, { recursive: true });
    }
  }
});
