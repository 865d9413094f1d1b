// stopOnError on the machine's own kernel (private netns, scripts/host-tests.sh): the kernel runs
// every message of one sendmsg whatever the earlier ones answered, so "stop" is only true if
// nothing after a failing op was sent. [ok, EEXIST, ok] with stopOnError must leave the third op
// out of the kernel (read back with ipset / ip) and report it 'not-sent'; without it the third is
// applied. The same for `ipvsync ipset restore`, whose "N of M line(s) applied" must be exact.
import { test, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { IpSets } from '../../src/kernel/ipsets.js';
import { Links } from '../../src/kernel/links.js';
import { Routes } from '../../src/kernel/routes.js';
import type { ApplyResult } from '../../src/kernel/batch.js';

const ip = (...args: string[]) => execFileSync('ip', args, { encoding: 'utf8' });
const ipset = (...args: string[]) => execFileSync('ipset', args, { encoding: 'utf8' });
const cli = (args: string[], input: string) => spawnSync(process.execPath, ['dist/src/cli/main.js', ...args], { input, encoding: 'utf8' });
const statuses = (r: ApplyResult) => Array.from({ length: r.size }, (_, i) => r.status(i));
const saved = (name: string) =>
  ipset('save', name)
    .split('\n')
    .filter((l) => l.startsWith('add '))
    .sort();

afterEach(() => {
  spawnSync('ipset', ['destroy']);
  spawnSync('ip', ['link', 'del', 'soe0']);
});

test('ipset: separate ops [ok, EEXIST, ok] stop at the failing one; without stopOnError the third is applied', async () => {
  ipset('create', 'soe', 'hash:ip');
  const s = await IpSets.open();
  const ops = [
    { op: 'add' as const, name: 'soe', members: [{ ip: '10.0.0.1' }] },
    { op: 'add' as const, name: 'soe', members: [{ ip: '10.0.0.1' }] },
    { op: 'add' as const, name: 'soe', members: [{ ip: '10.0.0.3' }] },
  ];
  const stop = await s.apply(ops);
  assert.deepEqual(statuses(stop), ['ok', 'error', 'not-sent']);
  assert.deepEqual(stop.errors.map((e) => [e.index, e.code]), [[1, 'IPSET_ERR_EXIST']]);
  assert.equal(stop.sendmsgCalls, 2, 'one request per sendmsg, none after the failure');
  assert.deepEqual(saved('soe'), ['add soe 10.0.0.1']);

  ipset('flush', 'soe');
  const all = await s.apply(ops, { stopOnError: false });
  assert.deepEqual(statuses(all), ['ok', 'error', 'ok']);
  assert.equal(all.sendmsgCalls, 1, 'pipelined: the three requests share one sendmsg');
  assert.deepEqual(saved('soe'), ['add soe 10.0.0.1', 'add soe 10.0.0.3']);
});

test('ipset: a multi-member op stops at its failing member, and no later op is sent', async () => {
  ipset('create', 'soe', 'hash:ip');
  ipset('add', 'soe', '10.0.0.2');
  const s = await IpSets.open();
  const r = await s.apply([
    { op: 'add', name: 'soe', members: [{ ip: '10.0.0.1' }, { ip: '10.0.0.2' }, { ip: '10.0.0.3' }] },
    { op: 'add', name: 'soe', members: [{ ip: '10.0.0.4' }] },
  ]);
  assert.deepEqual(statuses(r), ['error', 'not-sent']);
  assert.equal(r.errors.length, 1);
  assert.equal(r.errors[0]!.member, 1);
  assert.match(r.errors[0]!.message, /\[member 1 failed; of its message, member 0 before it was applied, member 2 after it was not\]$/);
  assert.deepEqual(saved('soe'), ['add soe 10.0.0.1', 'add soe 10.0.0.2']);
});

test('links: addAddr [ok, EEXIST, ok] stops at the duplicate; without stopOnError the third is applied', async () => {
  ip('link', 'add', 'soe0', 'type', 'bridge');
  const l = await Links.open();
  const ops = ['10.50.0.1/32', '10.50.0.1/32', '10.50.0.3/32'].map((address) => ({ op: 'addAddr' as const, link: 'soe0', address }));
  const theirs = () =>
    (JSON.parse(ip('-j', 'addr', 'show', 'dev', 'soe0')) as Array<{ addr_info: Array<{ family: string; local: string; prefixlen: number }> }>)
      .flatMap((x) => x.addr_info)
      .filter((a) => a.family === 'inet')
      .map((a) => `${a.local}/${a.prefixlen}`)
      .sort();

  const stop = await l.apply(ops);
  assert.deepEqual(statuses(stop), ['ok', 'error', 'not-sent']);
  assert.deepEqual(stop.errors.map((e) => [e.index, e.code]), [[1, 'EEXIST']]);
  assert.deepEqual(theirs(), ['10.50.0.1/32']);

  ip('addr', 'flush', 'dev', 'soe0');
  const all = await l.apply(ops, { stopOnError: false });
  assert.deepEqual(statuses(all), ['ok', 'error', 'ok']);
  assert.deepEqual(theirs(), ['10.50.0.1/32', '10.50.0.3/32']);
});

test('routes: addRoute [ok, EEXIST, ok] stops at the duplicate; without stopOnError the third is applied', async () => {
  const r = await Routes.open();
  const route = (dst: string) => ({ op: 'addRoute' as const, type: 'local' as const, dst, dev: 'lo', protocol: 249 });
  const ops = [route('10.96.0.0/16'), route('10.96.0.0/16'), route('10.97.0.0/16')];
  const theirs = () =>
    (JSON.parse(ip('-4', '-j', 'route', 'show', 'table', 'local', 'proto', '249')) as Array<{ dst: string }>).map((x) => x.dst).sort();

  const stop = await r.apply(ops);
  assert.deepEqual(statuses(stop), ['ok', 'error', 'not-sent']);
  assert.deepEqual(stop.errors.map((e) => [e.index, e.code]), [[1, 'EEXIST']]);
  assert.equal(stop.sendmsgCalls, 2);
  assert.deepEqual(theirs(), ['10.96.0.0/16']);

  await r.apply([{ op: 'delRoute', type: 'local', dst: '10.96.0.0/16', protocol: 249 }]);
  const all = await r.apply(ops, { stopOnError: false });
  assert.deepEqual(statuses(all), ['ok', 'error', 'ok']);
  assert.equal(all.sendmsgCalls, 1);
  assert.deepEqual(theirs(), ['10.96.0.0/16', '10.97.0.0/16']);
  await r.apply([0, 2].map((i) => ({ ...ops[i]!, op: 'delRoute' as const })), { stopOnError: false });
  assert.deepEqual(theirs(), []);
});

test('ipset restore stops at the first error: exactly the lines before it applied, and said so', () => {
  // Separate ops: the duplicate create stops the restore; b is never created.
  const ops = cli(['ipset', 'restore'], 'create a hash:ip\nadd a 10.0.0.1\ncreate a hash:ip\ncreate b hash:ip\n');
  assert.equal(ops.status, 1, ops.stderr);
  assert.match(ops.stderr, /error in line 3: .*already exists/);
  assert.match(ops.stderr, /stopped; 2 of 4 line\(s\) applied/);
  assert.deepEqual(ipset('list', '-n').trim().split('\n'), ['a']);
  assert.deepEqual(saved('a'), ['add a 10.0.0.1']);

  // Consecutive adds travel as one message: the kernel stops at the duplicate member.
  const adds = cli(['ipset', 'restore'], 'create c hash:ip\nadd c 10.0.0.1\nadd c 10.0.0.1\nadd c 10.0.0.2\n');
  assert.equal(adds.status, 1, adds.stderr);
  assert.match(adds.stderr, /error in line 3: .*it's already added/);
  assert.match(adds.stderr, /stopped; 2 of 4 line\(s\) applied/);
  assert.deepEqual(saved('c'), ['add c 10.0.0.1']);
});
