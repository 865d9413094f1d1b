// The daemon on a manifests folder (issue 44), as a process in the nftables data plane on the
// machine's own kernel: the folder deleted and made again, bursts of atomic replaces, a change
// no folder event reports, and SIGTERM in the middle of a burst. What the daemon programmed is
// read back with `nft`; its loads and syncs are counted from /metrics and its log.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
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

/** Between two replaces of a burst. */
const pause = () => new Promise((r) => setTimeout(r, 15));

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

/** The daemon on a folder of 2,000 services and web.json (web at port 20000), synced once. */
async function bulkFolder(t: { after(fn: () => void): void }, tag: string): Promise<{ dir: string; d: Daemon }> {
  const dir = mkdtempSync(join(tmpdir(), `folder-${tag}-`));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'bulk.json'), bulk());
  replace(dir, 'web.json', list(service('web', '10.96.0.10', 20000)));
  const d = daemon(t, dir);
  await started(d);
  return { dir, d };
}

async function started(d: Daemon): Promise<void> {
  await waitFor('the first sync', async () => (d.syncs().length ? true : undefined), { timeoutMs: 120_000, last: d.last });
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

test('300 atomic replaces of a file next to 2,000 services: the final version is programmed, in a bounded number of folder loads and syncs', async (t) => {
  const { dir, d } = await bulkFolder(t, 'burst');
  assert.deepEqual(await frontends('10.96.0.10'), ['10.96.0.10 . tcp . 20000']);
  const loads0 = await metric('ipvsync_manifest_loads_total');
  const syncs0 = d.syncs().length;

  // 300 versions in a few seconds (1,200 folder events, 600 of them for temporary names), so
  // that loads run while the versions keep coming
  for (let v = 1; v <= 300; v++) {
    replace(dir, 'web.json', list(service('web', '10.96.0.10', 20000 + v)));
    await pause();
  }
  await waitFor('the last version programmed', async () => ((await frontends('10.96.0.10')).join() === '10.96.0.10 . tcp . 20300' ? true : undefined), { timeoutMs: 120_000, last: d.last });
  // A later file is programmed too, and the last version stays: nothing older comes after it.
  writeFileSync(join(dir, 'marker.json'), list(service('marker', '10.96.0.11', 80)));
  await waitFor('the marker programmed', async () => ((await frontends('10.96.0.11')).length === 1 ? true : undefined), { timeoutMs: 120_000, last: d.last });
  assert.deepEqual(await frontends('10.96.0.10'), ['10.96.0.10 . tcp . 20300']);

  const after = await scrape();
  const loads = (await metric('ipvsync_manifest_loads_total', after)) - loads0;
  const syncs = d.syncs().slice(syncs0);
  // every load starts after the previous one ended, and a burst of events waits for one load:
  // a few loads and syncs, not one per event (1,200) or per replace (300)
  assert.ok(loads >= 2 && loads <= 30, `${loads} folder loads\n${await d.last()}`);
  assert.ok(syncs.length >= 2 && syncs.length <= 30, `${syncs.length} syncs\n${await d.last()}`);
  assert.ok(syncs.every((s) => s.errors === 0), await d.last());
  assert.equal(await metric('ipvsync_manifest_load_failures_total'), 0, 'no load failed');
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
  const d = daemon(t, dir, '--ipvs-sync-period', '1s');
  await started(d);
  assert.deepEqual(await frontends('10.96.0.30'), ['10.96.0.30 . tcp . 30001']);

  // written in place through the other name: inotify tells the other folder's watchers only
  const before = d.syncs().length;
  writeFileSync(join(outside, 'web.json'), list(service('web', '10.96.0.30', 30002)));
  await waitFor('the new port programmed', async () => ((await frontends('10.96.0.30')).join() === '10.96.0.30 . tcp . 30002' ? true : undefined), { timeoutMs: 60_000, last: d.last });
  const wrote = d.syncs().slice(before).filter((s) => s.writes > 0);
  assert.deepEqual(wrote.map((s) => s.trigger), ['periodic'], await d.last());
});

test('SIGTERM in the middle of a burst of replaces: every stop step ends in time, the loads that were due are dropped, and nothing is written after "stopped"', async (t) => {
  const { dir, d } = await bulkFolder(t, 'stop');

  // the ruleset as the daemon's last line says it stopped
  let atStop: string | undefined;
  createInterface({ input: d.child.stderr! }).on('line', (l) => {
    if (atStop === undefined && l.includes('"stopped; the data plane stays in place"')) atStop = execFileSync('nft', ['list', 'ruleset'], { encoding: 'utf8' });
  });
  // the signal two thirds into the burst: loads have run, and more are due
  for (let v = 1; v <= 300; v++) {
    replace(dir, 'web.json', list(service('web', '10.96.0.10', 20000 + v)));
    await pause();
    if (v === 200) d.child.kill('SIGTERM');
  }
  const end = await waitFor('the daemon exited', async () => (d.child.exitCode !== null || d.child.signalCode !== null ? d.exited : undefined), { timeoutMs: 60_000, last: d.last });
  assert.deepEqual(end, { code: 0, signal: null }, await d.last());
  assert.ok(atStop !== undefined, await d.last());
  assert.equal(execFileSync('nft', ['list', 'ruleset'], { encoding: 'utf8' }), atStop, 'the ruleset did not change after "stopped"');

  const lines = d.lines();
  const stopping = lines.findIndex((l) => l.msg === 'stopping; the data plane stays programmed');
  const stopped = lines.findIndex((l) => l.msg === 'stopped');
  assert.ok(stopping >= 0 && stopped > stopping, await d.last());
  assert.deepEqual(lines[stopped]!.failed, [], `every stop step finished in time\n${await d.last()}`);
  // while stopping, the sync under way may end; no load starts or fails (a due one is dropped)
  const during = lines.slice(stopping + 1, stopped).map((l) => l.msg);
  assert.ok(during.length <= 1 && during.every((m) => m === 'sync'), `${during.length} lines while stopping: ${[...new Set(during)].join(', ')}`);
  // nothing after it but the daemon's own last line: no load, no sync, no failure of either
  assert.deepEqual(lines.slice(stopped + 1).map((l) => l.msg), ['stopped; the data plane stays in place'], await d.last());
  assert.equal(lines.at(-1)!.ok, true);
  assert.equal(d.stderr(), '', await d.last());
});
