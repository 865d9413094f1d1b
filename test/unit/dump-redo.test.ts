// An interrupted dump (NLM_F_DUMP_INTR) is redone by every listing of the handles: a caller
// never gets a listing the kernel marked inconsistent, nor the error while a redo can help.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NetlinkError } from '../../src/errors.js';
import { DUMP_ATTEMPTS, redoInterrupted } from '../../src/kernel/batch.js';
import { Links } from '../../src/kernel/links.js';
import { Routes } from '../../src/kernel/routes.js';

const interrupted = () => new NetlinkError({ message: 'RTM_GETADDR: the kernel\'s object set changed during the dump (NLM_F_DUMP_INTR); redo it', code: 'DUMP_INTR', errno: 4, kind: 'dump-interrupted', op: 'RTM_GETADDR' });

test('an interrupted dump is redone until it completes', async () => {
  let calls = 0;
  const r = await redoInterrupted(async () => {
    if (++calls < 3) throw interrupted();
    return ['10.0.0.1'];
  });
  assert.deepEqual(r, ['10.0.0.1']);
  assert.equal(calls, 3);
});

test('a dump interrupted every time fails after DUMP_ATTEMPTS with the kernel\'s error; other errors are not redone', async () => {
  let calls = 0;
  await assert.rejects(
    redoInterrupted(async () => {
      calls++;
      throw interrupted();
    }),
    { kind: 'dump-interrupted' },
  );
  assert.equal(calls, DUMP_ATTEMPTS);
  calls = 0;
  await assert.rejects(
    redoInterrupted(async () => {
      calls++;
      throw new NetlinkError({ message: 'EPERM', code: 'EPERM', errno: 1, kind: 'kernel', op: 'RTM_GETADDR' });
    }),
    { code: 'EPERM' },
  );
  assert.equal(calls, 1);
});

test('the handles redo their listings: links, addresses, routes', async () => {
  // A native handle whose dumps are interrupted twice, then answer.
  const flaky = <T>(answer: T) => {
    let n = 0;
    return async () => {
      if (++n <= 2) throw interrupted();
      return answer;
    };
  };
  const native = { links: flaky([{ name: 'kube-ipvs0' }]), addresses: flaky([{ link: 'kube-ipvs0', address: '10.96.0.10', prefixlen: 32 }]), routes: flaky([]) };
  type Ctor<T> = new (h: unknown) => T;
  const links = new (Links as unknown as Ctor<Links>)(native);
  const routes = new (Routes as unknown as Ctor<Routes>)(native);
  assert.deepEqual(await links.list(), [{ name: 'kube-ipvs0' }]);
  assert.deepEqual(await links.addresses(), [{ link: 'kube-ipvs0', address: '10.96.0.10', prefixlen: 32 }]);
  assert.deepEqual(await routes.list(), []);
});
