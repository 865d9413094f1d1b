// The daemon on a manifests folder (issue 44), as a process in the nftables data plane on the
// machine's own kernel: the folder deleted and made again, bursts of atomic replaces, a change
// no folder event reports, and SIGTERM in the middle of a burst. What the daemon programmed is
// read back with `nft`; its loads and syncs are counted from /metrics and its log. A burst comes
// while a load is held under way by the test (a lease on a file the load reads), so what waits
// for that load does not depend on how fast loads are (issue #58).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { nftSetElements, waitFor } from '../e2e/helpers/kernel.js';
import { startProxy, type RunningProxy } from '../e2e/helpers/proxy.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const METRICS = '127.0.0.1:10249';

/** A Service with one port and one endpoint, and its slice. */
function service(name: string, clusterIP: string, port: number): Array<V1Service | V1EndpointSlice> {
  return [svc(name, { clusterIP, ports: [{ name: 'http', port }] }), slice(name, `${name}-1`, [{ name: 'http', port: 8080 }], [{ ip: '10.244.1.2' }])];
}

function list(items: Array<V1Service | V1EndpointSlice>): string {
  return JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
}

/** Replaces `file` in `dir` atomically, as a deploy tool does: a hidden temporary file, then
 *  a rename over the old one (four folder events, one of them for `file`). */
function replace(dir: string, file: string, text: string): void {
  writeFileSync(join(dir, `.${file}.tmp`), text);
  renameSync(join(dir, `.${file}.tmp`), join(dir, file));
}

/** 2,000 services in one file: every load of the folder parses them all again. */
function bulk(): string {
  const items: Array<V1Service | V1EndpointSlice> = [];
  for (let i = 0; i < 2000; i++) items.push(...service(`bulk-${i}`, `10.97.${i >> 8}.${i & 255}`, 80));
  return list(items);
}

/** The cluster-ips elements of one address ("10.96.0.10 . tcp . 80"). */
async function frontends(address: string): Promise<string[]> {
  return (await nftSetElements('cluster-ips').catch(() => [])).filter((e) => e.startsWith(`${address} `));
}

/** The daemon's /metrics, one scrape. */
const scrape = async (): Promise<string> => (await fetch(`http://${METRICS}/metrics`)).text();

/** An unlabelled series of the daemon's /metrics (there must be one), from `text` or a scrape. */
async function metric(name: string, text?: string): Promise<number> {
  text ??= await scrape();
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  assert.ok(m, `${name} in /metrics`);
  return Number(m[1]);
}

interface Daemon extends RunningProxy {
  lines(): Array<Record<string, any>>;
  syncs(): Array<Record<string, any>>;
  last(): Promise<string>;
}

function daemon(t: { after(fn: () => void): void }, dir: string, ...flags: string[]): Daemon {
  const p = startProxy(['--manifests', dir], '--proxy-mode', 'nftables', '--metrics-bind-address', METRICS, '--healthz-bind-address', '127.0.0.1:10256', ...flags);
  t.after(() => {
    if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
    spawnSync('nft', ['flush', 'ruleset']);
  });
  const lines = () => p.log.map((l) => JSON.parse(l) as Record<string, any>);
  return {
    ...p,
    lines,
    syncs: () => lines().filter((l) => l.msg === 'sync'),
    last: async () => `daemon log:\n${p.log.join('\n')}\n${p.stderr()}`,
  };
}

/** The file of the folder a load reads last (the reader reads names in sorted order). */
const HELD = 'zz-held.json';

/** The daemon on a folder of 2,000 services, web.json (web at port 20000) and HELD, synced
 *  once. No periodic resync comes during a test (it would load the folder once more). */
async function bulkFolder(t: { after(fn: () => void): void }, tag: string): Promise<{ dir: string; d: Daemon }> {
  const dir = mkdtempSync(join(tmpdir(), `folder-${tag}-`));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'bulk.json'), bulk());
  writeFileSync(join(dir, HELD), list(service('held', '10.96.0.12', 80)));
  replace(dir, 'web.json', list(service('web', '10.96.0.10', 20000)));
  const d = daemon(t, dir, '--iptables-sync-period', '1h');
  await started(d);
  return { dir, d };
}

/** Takes a write lease on a file and gives it up when told: the daemon's open() of it blocks
 *  until then, and the kernel tells us of that open with SIGIO (fcntl(2), "Leases"). */
const LEASE = String.raw`
import fcntl, os, signal, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
signal.signal(signal.SIGIO, lambda *_: print('opened', flush=True))
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
print('held', flush=True)
sys.stdin.readline()
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
print('released', flush=True)
`;

interface Hold {
  /** Whether a load has reached the file: its open() waits. */
  reached(): boolean;
  /** Whether that open still waits: the kernel ends a lease's break itself after
   *  /proc/sys/fs/lease-break-time (45 s by default), a hang guard on the test. */
  waiting(): boolean;
  /** Lets the waiting open go on. */
  release(): Promise<void>;
}

/**
 * Holds the folder's next load under way: a load reads `file` (after the names sorted before
 * it) and waits at its open() until release(). No other process may have `file` open (a lease
 * needs that), so this comes once the daemon's load of it has ended.
 */
async function hold(t: { after(fn: () => void): void }, file: string): Promise<Hold> {
  const child = spawn('python3', ['-c', LEASE, file], { stdio: ['pipe', 'pipe', 'inherit'] });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const said = new Set<string>();
  const lines = createInterface({ input: child.stdout! }).on('line', (l) => said.add(l));
  const until = (word: string) =>
    new Promise<void>((resolve, reject) => {
      if (said.has(word)) return resolve();
      const onLine = (l: string) => l === word && done(resolve);
      // (after its stdout is read to the end)
      const onClose = (code: number | Error | null) => done(() => reject(new Error(`the lease holder ended (${code}) before "${word}"`)));
      const done = (then: () => void) => (lines.off('line', onLine), child.off('close', onClose).off('error', onClose), then());
      lines.on('line', onLine);
      child.on('close', onClose).on('error', onClose);
    });
  await until('held');
  const ino = statSync(file).ino;
  return {
    reached: () => said.has('opened'),
    // /proc/locks: "1: LEASE  BREAKING  READ 4242 fe:00:2171505 0 EOF" while an open waits
    waiting: () => readFileSync('/proc/locks', 'utf8').split('\n').some((l) => / LEASE +BREAKING /.test(l) && l.includes(`:${ino} `)),
    release: async () => {
      child.stdin!.end('release\n');
      await until('released');
    },
  };
}

async function started(d: Daemon): Promise<void> {
  await waitFor(
    'the first sync',
    async () => {
      if (d.child.exitCode !== null || d.child.signalCode !== null) assert.fail(`the daemon exited before its first sync\n${await d.last()}`);
      return d.syncs().length ? true : undefined;
    },
    { timeoutMs: 120_000, last: d.last },
  );
  assert.equal(d.syncs()[0]!.errors, 0, await d.last());
}

test('the folder deleted and made again: the daemon reads the new folder, and a file written there later is programmed', async (t) => {
  const parent = mkdtempSync(join(tmpdir(), 'folder-again-'));
  t.after(() => rmSync(parent, { recursive: true, force: true }));
  const dir = join(parent, 'manifests');
  mkdirSync(dir);
  writeFileSync(join(dir, 'a.json'), list(service('a', '10.96.0.21', 80)));
  const d = daemon(t, dir);
  await started(d);
  assert.deepEqual(await frontends('10.96.0.21'), ['10.96.0.21 . tcp . 80']);

  rmSync(dir, { recursive: true });
  mkdirSync(dir);
  // the new, empty folder is what the objects are now
  await waitFor('a removed', async () => ((await frontends('10.96.0.21')).length === 0 ? true : undefined), { timeoutMs: 60_000, last: d.last });
  // a file written into it afterwards: seen through the new folder's own watch
  writeFileSync(join(dir, 'b.json'), list(service('b', '10.96.0.22', 80)));
  await waitFor('b programmed', async () => ((await frontends('10.96.0.22')).length === 1 ? true : undefined), { timeoutMs: 60_000, last: d.last });
  assert.deepEqual(await frontends('10.96.0.22'), ['10.96.0.22 . tcp . 80']);
  assert.ok(d.syncs().every((s) => s.errors === 0), await d.last());
});

test('300 atomic replaces of a file, 299 of them while a folder load is under way: no load starts during it, one load after it reads them all, and nothing older is programmed after the last', async (t) => {
  const { dir, d } = await bulkFolder(t, 'burst');
  assert.deepEqual(await frontends('10.96.0.10'), ['10.96.0.10 . tcp . 20000']);
  const loads0 = await metric('ipvsync_manifest_loads_total');
  const syncs0 = d.syncs().length;
  const held = await hold(t, join(dir, HELD));

  // Version 1 starts a load, which reads web.json and then waits at HELD.
  replace(dir, 'web.json', list(service('web', '10.96.0.10', 20001)));
  await waitFor('a load waiting at the held file', async () => (held.reached() ? true : undefined), { timeoutMs: 120_000, last: d.last });
  // 299 versions while it waits (1,196 folder events, 598 of them for temporary names)
  for (let v = 2; v <= 300; v++) replace(dir, 'web.json', list(service('web', '10.96.0.10', 20000 + v)));
  assert.ok(held.waiting(), `the load still waits (lease-break-time passed?)\n${await d.last()}`);
  assert.equal((await metric('ipvsync_manifest_loads_total')) - loads0, 1, 'no load starts while one is under way');
  await held.release();

  // The held load read version 1: version 300 comes from a load after it.
  await waitFor('the last version programmed', async () => ((await frontends('10.96.0.10')).join() === '10.96.0.10 . tcp . 20300' ? true : undefined), { timeoutMs: 120_000, last: d.last });
  assert.equal((await metric('ipvsync_manifest_loads_total')) - loads0, 2, `one load after the held one, for all 299 versions\n${await d.last()}`);
  // A later file is programmed too, by one more load, and the last version stays: nothing
  // older comes after it. (Replaced atomically too: one event for its name.)
  replace(dir, 'marker.json', list(service('marker', '10.96.0.11', 80)));
  await waitFor('the marker programmed', async () => ((await frontends('10.96.0.11')).length === 1 ? true : undefined), { timeoutMs: 120_000, last: d.last });
  assert.deepEqual(await frontends('10.96.0.10'), ['10.96.0.10 . tcp . 20300']);

  const after = await scrape();
  assert.equal((await metric('ipvsync_manifest_loads_total', after)) - loads0, 3, await d.last());
  assert.equal(await metric('ipvsync_manifest_load_failures_total', after), 0, 'no load failed');
  // each of the three loads asks for a sync; requests close together take one
  const syncs = d.syncs().slice(syncs0);
  assert.ok(syncs.length >= 1 && syncs.length <= 3, `${syncs.length} syncs\n${await d.last()}`);
  assert.ok(syncs.every((s) => s.trigger === 'request' && s.errors === 0), await d.last());
  // the process's own metrics, as kube-proxy serves Go's: its RSS and its event loop's delay
  // over the burst (the longest block since the previous scrape; a figure, not a bound)
  assert.ok((await metric('process_resident_memory_bytes', after)) > 10 << 20, 'the RSS is served');
  const lag = await metric('nodejs_eventloop_lag_max_seconds', after);
  assert.ok(Number.isFinite(lag) && lag > 0, `the event loop's delay is measured: ${lag}`);
});

test('a change no folder event reports (written through a hard link outside the folder) is programmed by the next periodic resync', async (t) => {
  const parent = mkdtempSync(join(tmpdir(), 'folder-resync-'));
  t.after(() => rmSync(parent, { recursive: true, force: true }));
  const dir = join(parent, 'manifests');
  const outside = join(parent, 'outside');
  mkdirSync(dir);
  mkdirSync(outside);
  writeFileSync(join(outside, 'web.json'), list(service('web', '10.96.0.30', 30001)));
  linkSync(join(outside, 'web.json'), join(dir, 'web.json'));
  const d = daemon(t, dir, '--iptables-sync-period', '1s');
  await started(d);
  assert.deepEqual(await frontends('10.96.0.30'), ['10.96.0.30 . tcp . 30001']);

  // written in place through the other name: inotify tells the other folder's watchers only
  const before = d.syncs().length;
  writeFileSync(join(outside, 'web.json'), list(service('web', '10.96.0.30', 30002)));
  await waitFor('the new port programmed', async () => ((await frontends('10.96.0.30')).join() === '10.96.0.30 . tcp . 30002' ? true : undefined), { timeoutMs: 60_000, last: d.last });
  const wrote = d.syncs().slice(before).filter((s) => s.writes > 0);
  assert.deepEqual(wrote.map((s) => s.trigger), ['periodic'], await d.last());
});

test('SIGTERM in the middle of a burst of replaces, a folder load under way: every stop step ends, that load\'s end starts no load or sync, and nothing is written after "stopped"', async (t) => {
  const { dir, d } = await bulkFolder(t, 'stop');
  const held = await hold(t, join(dir, HELD));

  let released: Promise<void> | undefined;
  // the ruleset as the daemon's last line says it stopped
  let atStop: string | undefined;
  createInterface({ input: d.child.stderr! }).on('line', (l) => {
    // The stop's first step has ended the folder's loads (in the same turn as this line): the
    // held load ends after it. (The sync thread's step waits for it: a thread ends once its
    // open() returns.)
    if (released === undefined && l.includes('"stopping; the data plane stays programmed"')) released = held.release();
    if (atStop === undefined && l.includes('"stopped; the data plane stays in place"')) atStop = execFileSync('nft', ['list', 'ruleset'], { encoding: 'utf8' });
  });
  // a load under way, waiting at HELD, and 199 versions after it, due for the next load
  replace(dir, 'web.json', list(service('web', '10.96.0.10', 20001)));
  await waitFor('a load waiting at the held file', async () => (held.reached() ? true : undefined), { timeoutMs: 120_000, last: d.last });
  for (let v = 2; v <= 200; v++) replace(dir, 'web.json', list(service('web', '10.96.0.10', 20000 + v)));
  assert.ok(held.waiting(), `the load still waits (lease-break-time passed?)\n${await d.last()}`);
  d.child.kill('SIGTERM');
  // the burst goes on while the daemon stops
  for (let v = 201; v <= 300; v++) replace(dir, 'web.json', list(service('web', '10.96.0.10', 20000 + v)));
  const end = await waitFor('the daemon exited', async () => (d.child.exitCode !== null || d.child.signalCode !== null ? d.exited : undefined), { timeoutMs: 60_000, last: d.last });
  assert.deepEqual(end, { code: 0, signal: null }, await d.last());
  assert.ok(released !== undefined, await d.last());
  await released;
  assert.ok(atStop !== undefined, await d.last());
  assert.equal(execFileSync('nft', ['list', 'ruleset'], { encoding: 'utf8' }), atStop, 'the ruleset did not change after "stopped"');

  const lines = d.lines();
  const stopping = lines.findIndex((l) => l.msg === 'stopping; the data plane stays programmed');
  const stopped = lines.findIndex((l) => l.msg === 'stopped');
  assert.ok(stopping >= 0 && stopped > stopping, await d.last());
  assert.deepEqual(lines[stopped]!.failed, [], `every stop step ended within the daemon's limit\n${await d.last()}`);
  // No sync was under way (none was asked for since the first), the held load's end is not
  // reported, and the versions after it are no load's: nothing while stopping...
  assert.deepEqual(lines.slice(stopping + 1, stopped).map((l) => l.msg), [], await d.last());
  // ...and nothing after it but the daemon's own last line: no load, no sync, no failure of either
  assert.deepEqual(lines.slice(stopped + 1).map((l) => l.msg), ['stopped; the data plane stays in place'], await d.last());
  assert.equal(lines.at(-1)!.ok, true);
  assert.equal(d.stderr(), '', await d.last());
});
