// What an operator replacing kube-proxy runs into first (issue 56), tried on the machine's own
// kernel — which has nftables and no IPVS, the kernels the nftables data plane is for: cleanup,
// exit statuses, a stop signal during start-up, log lines (klog's text, JSON, --v), each mode
// reading its own section of the configuration, and `sync --dry-run`'s summary.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, closeSync, rmSync, writeFileSync, constants } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../e2e/helpers/kernel.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const CLI = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
/** No IPVS here unless the module is loaded (the harness never loads it). */
const NO_IPVS = !existsSync('/proc/net/ip_vs');
const NODE = ['--hostname-override', 'node-a', '--node-ip', '10.0.0.1', '--cluster-cidr', '10.244.0.0/16'];

function manifests(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-operator-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const items = [svc('web', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }] }), slice('web', 'web-1', [{ name: 'http', port: 8080 }], [{ ip: '10.244.1.2', node: 'node-b' }])];
  writeFileSync(join(dir, 'objects.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  return dir;
}

const run = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
const tables = () => execFileSync('nft', ['list', 'tables'], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).sort();

/** `ipvsync proxy …` in the background: its stderr lines as they come, and its exit. */
function daemon(t: { after(fn: () => void): void }, ...args: string[]) {
  const child = spawn(process.execPath, [CLI, 'proxy', '--metrics-bind-address', '127.0.0.1:0', '--healthz-bind-address', '127.0.0.1:0', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  const lines: string[] = [];
  createInterface({ input: child.stderr! }).on('line', (l) => lines.push(l));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    spawnSync('nft', ['flush', 'ruleset']);
  });
  const until = (what: string, re: RegExp) => waitFor(what, async () => lines.find((l) => re.test(l)), { timeoutMs: 60_000, last: async () => lines.join('\n') });
  return { child, lines, exited, until };
}

test('cleanup on a kernel without IPVS: removes the nftables data plane\'s tables, skips IPVS, leaves a foreign table, exits 0', (t) => {
  t.after(() => spawnSync('nft', ['flush', 'ruleset']));
  const dir = manifests(t);
  execFileSync('nft', ['add', 'table', 'ip', 'foreign']);
  const synced = run('sync', '-f', dir, '--proxy-mode', 'nftables', '--no-sysctl', ...NODE);
  assert.equal(synced.status, 0, synced.stderr);
  assert.deepEqual(tables(), ['table ip foreign', 'table ip ipvsync', 'table ip6 ipvsync']);
  const r = run('cleanup');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^removed 0 virtual services, 2 nftables tables, no link, 0 addresses, 0 routes, 0 ipsets/);
  if (NO_IPVS) assert.match(r.stdout, /\(not in this kernel, skipped: IPVS\)$/m);
  assert.deepEqual(tables(), ['table ip foreign'], 'ours gone, the foreign one kept');
  // again: nothing left, still fine
  const again = run('cleanup');
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stdout, /^removed 0 virtual services, 0 nftables tables/);
});

test('proxy in IPVS mode on a kernel without IPVS: exit 3 (a missing kernel feature), naming --proxy-mode nftables', { skip: !NO_IPVS && 'this kernel has IPVS' }, (t) => {
  const r = run('proxy', '--manifests', manifests(t), ...NODE);
  assert.equal(r.status, 3, r.stderr);
  assert.match(r.stderr, /IPVS is not available in this kernel .*--proxy-mode nftables/);
});

test('a stop signal while the daemon is still loading is caught: it stops in order, says so, and exits 0', async (t) => {
  // The configuration is a FIFO: the daemon blocks reading it until it is written, well after
  // the command line caught the signal, and before it installed the daemon's own handlers.
  const dir = manifests(t);
  const fifo = join(dir, 'config.fifo');
  execFileSync('mkfifo', [fifo]);
  const d = daemon(t, '--config', fifo, '--manifests', dir, '--proxy-mode', 'nftables', ...NODE);
  // a writer can open the FIFO (without blocking) only once the daemon has it open to read
  const fd = await waitFor('the daemon reading its configuration', async () => {
    try {
      return openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENXIO') return undefined;
      throw e;
    }
  }, { timeoutMs: 60_000, last: async () => d.lines.join('\n') });
  d.child.kill('SIGTERM');
  writeFileSync(fd, 'mode: nftables\n');
  closeSync(fd);
  const { code, signal } = await d.exited;
  assert.deepEqual({ code, signal }, { code: 0, signal: null }, d.lines.join('\n'));
  assert.ok(d.lines.some((l) => /^I\d{4} [\d:.]+ +\d+ ipvsync\] "stopping; the data plane stays programmed" reason="SIGTERM"$/.test(l)), d.lines.join('\n'));
  assert.ok(d.lines.some((l) => /"stopped; the data plane stays in place" ok=true duringStartup=true/.test(l)), d.lines.join('\n'));
});

test("the daemon's log: klog's text lines by default; JSON with --logging-format json; debug lines from --v=4", async (t) => {
  const dir = manifests(t);
  const klog = /^[IWE]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ ipvsync\] "/;

  const text = daemon(t, '--manifests', dir, '--proxy-mode', 'nftables', ...NODE);
  await text.until('the first sync', /"sync" trigger="initial"/);
  assert.ok(text.lines.every((l) => klog.test(l)), text.lines.join('\n'));
  assert.ok(!text.lines.some((l) => /"configuration"|"sync details"/.test(l)), 'no debug line at --v=0');
  text.child.kill('SIGTERM');
  assert.equal((await text.exited).code, 0);
  spawnSync('nft', ['flush', 'ruleset']); // the next one programs the tables anew

  const json = daemon(t, '--manifests', dir, '--proxy-mode', 'nftables', '--logging-format', 'json', '--v=4', ...NODE);
  await json.until('the first sync', /"msg":"sync details"/);
  const parsed = json.lines.map((l) => JSON.parse(l) as Record<string, any>);
  const config = parsed.find((l) => l.msg === 'configuration');
  assert.equal(config?.level, 'debug');
  assert.deepEqual(config?.config.logging, { verbosity: 4, format: 'json' });
  const details = parsed.find((l) => l.msg === 'sync details')!;
  assert.equal(details.full, true);
  assert.ok(details.ops.nft['add-table'] >= 2, JSON.stringify(details));
  json.child.kill('SIGTERM');
  assert.equal((await json.exited).code, 0);
});

test("nftables mode reads the configuration's nftables section (periods, masqueradeAll), IPVS mode its own, as kube-proxy", async (t) => {
  const dir = manifests(t);
  const file = join(dir, 'config.yaml');
  writeFileSync(
    file,
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n' +
      'nftables: {syncPeriod: 45s, minSyncPeriod: 2s, masqueradeAll: true}\nipvs: {syncPeriod: 5s, minSyncPeriod: 1s}\niptables: {masqueradeAll: false}\n',
  );
  const d = daemon(t, '--config', file, '--manifests', dir, '--logging-format', 'json', ...NODE);
  const started = JSON.parse(await d.until('the start', /"msg":"proxy started"/)) as Record<string, unknown>;
  assert.deepEqual([started.mode, started.syncPeriod, started.minSyncPeriod, started.masqueradeAll], ['nftables', '45s', '2s', true]);
  await d.until('the first sync', /"msg":"sync"/);
  // masqueradeAll: every packet to a cluster IP is marked, whatever its source
  const services = execFileSync('nft', ['list', 'chain', 'ip', 'ipvsync', 'services'], { encoding: 'utf8' });
  const all = services.split('\n').filter((l) => /@cluster-ips/.test(l) && /mark set/.test(l) && !/saddr/.test(l));
  assert.equal(all.length, 1, services);
  d.child.kill('SIGTERM');
  assert.equal((await d.exited).code, 0);

});

test("sync --dry-run prints a summary of the writes that does not pass for nft input: base chains with their hooks, sets with their keys", (t) => {
  const dir = manifests(t);
  const r = run('sync', '-f', dir, '--proxy-mode', 'nftables', '--dry-run', ...NODE);
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.match(lines[0]!, /^# the writes a sync would make, one per line: a summary \(not nft, ipvsadm or ip input/);
  assert.match(lines.at(-1)!, /^# \d+ write\(s\) planned; nothing changed$/);
  assert.ok(!lines.some((l) => /^nft /.test(l)), 'no line reads as an nft command');
  assert.ok(lines.includes('nftables: add chain ip ipvsync prerouting { type nat hook prerouting priority -100; policy accept; }'), r.stdout);
  assert.ok(lines.includes('nftables: add set ip ipvsync cluster-ips { type ipv4_addr . inet_proto . inet_service; }'), r.stdout);
  assert.ok(lines.includes('nftables: add map ip ipvsync affinity { type ipv4_addr . ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service; flags dynamic,timeout; }'), r.stdout);
  assert.ok(lines.includes('nftables: add element ip ipvsync cluster-ips { 10.96.0.10 . tcp . 80 }'), r.stdout);
  assert.ok(lines.some((l) => /^nftables: add rule ip ipvsync services \(\d+ expressions\)$/.test(l)), r.stdout);
  assert.deepEqual(tables(), [], 'nothing written');
});
