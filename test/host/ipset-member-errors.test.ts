// When one member of a multi-member add/del fails, the kernel stops at it and echoes the request
// with that member's number patched in: the error names the member, and exactly the members
// before it were applied. Cross-checked with `ipset save`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { IpSets } from '../../src/kernel/ipsets.js';

const ipset = (...a: string[]) => execFileSync('ipset', a, { encoding: 'utf8' });

test('a failing member of a multi-member add is named; those before it applied, those after not', async () => {
  ipset('create', 'mem-err', 'hash:ip,port');
  try {
    ipset('add', 'mem-err', '10.0.0.3,tcp:80');
    const sets = await IpSets.open();
    const members = [1, 2, 3, 4, 5].map((i) => ({ ip: `10.0.0.${i}`, proto: 'tcp' as const, port: 80 }));
    const r = await sets.apply([{ op: 'add', name: 'mem-err', members }]);
    assert.equal(r.status(0), 'error');
    const e = r.errors[0]!;
    assert.equal(e.code, 'IPSET_ERR_EXIST');
    assert.equal(e.index, 0);
    assert.equal(e.member, 2, 'the third member (10.0.0.3) is the one that exists');
    assert.match(e.message, /\[member 2 failed; of its message, members 0-1 before it were applied, members 3-4 after it were not\]$/);
    const saved = ipset('save', 'mem-err').split('\n').filter((l) => l.startsWith('add ')).sort();
    assert.deepEqual(saved, ['add mem-err 10.0.0.1,tcp:80', 'add mem-err 10.0.0.2,tcp:80', 'add mem-err 10.0.0.3,tcp:80']);
    // a failing del is named the same way
    const d = await sets.apply([{ op: 'del', name: 'mem-err', members: [members[0]!, members[4]!, members[1]!] }]);
    assert.equal(d.errors[0]?.member, 1, '10.0.0.5 is not in the set');
    assert.deepEqual(ipset('save', 'mem-err').split('\n').filter((l) => l.startsWith('add ')).sort(), [
      'add mem-err 10.0.0.2,tcp:80',
      'add mem-err 10.0.0.3,tcp:80',
    ]);
    // the failing member last or first of its message: no empty range on the other side
    const last = await sets.apply([{ op: 'add', name: 'mem-err', members: [members[3]!, members[2]!] }]);
    assert.equal(last.errors[0]?.member, 1);
    assert.match(last.errors[0]!.message, /\[member 1 failed; of its message, member 0 before it was applied\]$/);
    const first = await sets.apply([{ op: 'add', name: 'mem-err', members: [members[2]!, members[4]!, members[0]!] }]);
    assert.equal(first.errors[0]?.member, 0);
    assert.match(first.errors[0]!.message, /\[member 0 failed; of its message, members 1-2 after it were not\]$/);
    assert.deepEqual(ipset('save', 'mem-err').split('\n').filter((l) => l.startsWith('add ')).sort(), [
      'add mem-err 10.0.0.2,tcp:80',
      'add mem-err 10.0.0.3,tcp:80',
      'add mem-err 10.0.0.4,tcp:80',
    ]);
  } finally {
    ipset('destroy', 'mem-err');
  }
});
