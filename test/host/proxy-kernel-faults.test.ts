// Kernel faults (issue 58): the daemon (`ipvsync proxy --proxy-mode nftables` on the fake API
// server, as a process) with a test-only fault hook preloaded into its sync thread
// (test/helpers/kernel-faults.ts). Every kind of kernel call the nftables data plane's sync makes
// fails once, in turn: the dumps (nftables generation, tables, set elements; the VIP link and
// its addresses; the owned routes), the nftables commit, the address and route deletes (of what
// an IPVS-mode run left: the only address and route writes this mode makes), and the conntrack
// delete of a UDP endpoint's flows. Each failure must be in the log and in /metrics, the next
// sync must repair it (the owned tables as a fresh `ipvsync sync` of the same objects programs
// them in another namespace), foreign objects must stay byte for byte, and between the failure
// and the retry (the hook holds the thread's next kernel call) the owned tables must be the old
// state or the new one, never a mix. Address and route adds do not occur in this mode (it
// creates no VIP link and binds nothing); the IPVS and ipset handles are not opened on a kernel
// without IPVS (this one). The flows of a removed UDP endpoint go with the repair too, after a
// failed conntrack delete and after a failed commit.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { CLI, conntrackList, sh, waitFor } from '../e2e/helpers/kernel.js';
import { freshSync, ownedTables } from '../helpers/api-daemon.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { FAULT_MARK, type FaultMethod, type FiredFault } from '../helpers/kernel-faults.js';
import { slice, svc } from '../fixtures/kube/builders.js';
import { addProtoAddress, protoAddresses } from '../helpers/ifa-proto.js';

const NODE = 'faults-node';
const NODE_IP = '192.168.50.10';
const CLUSTER_CIDR = '10.244.0.0/16';
const METRICS = '127.0.0.1:10249';
const HOOK = new URL('../helpers/kernel-faults.js', import.meta.url).href;
const SYNC_FLAGS = ['--proxy-mode', 'nftables', '--hostname-override', NODE, '--cluster-cidr', CLUSTER_CIDR, '--node-ip', NODE_IP];
/** Bound on waiting for one event (a loaded machine: generous; never a decision). */
const BOUND = 120_000;

// ---- the objects ----

type Obj = V1Service | V1EndpointSlice;
const web = (ips: string[]) => [svc('web', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }] }), slice('web', 'web-1', [{ name: 'http', port: 8080 }], ips.map((ip) => ({ ip })))];
const dns = (ips: string[]) => [
  svc('dns', { clusterIP: '10.96.0.53', ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] }),
  slice('dns', 'dns-1', [{ name: 'dns', port: 53, protocol: 'UDP' }], ips.map((ip) => ({ ip }))),
];
const api = (ips: string[]) => [svc('api', { clusterIP: '10.96.0.20', ports: [{ name: 'https', port: 443 }] }), slice('api', 'api-1', [{ name: 'https', port: 6443 }], ips.map((ip) => ({ ip })))];

// ---- what the kernel holds ----

/** The owned tables, normalised (helpers/api-daemon.ts: what may differ between two tables that
 *  act the same, e.g. the empty endpoint-count maps the plane keeps, left out). */
const owned = () => ownedTables();

/** What a fresh `ipvsync sync -f` of `objects` programs, in a namespace of its own. */
const reference = (objects: Obj[]) => freshSync(objects, SYNC_FLAGS);

/** Someone else's objects, as the independent tools show them (a flow's countdown left out). */
async function foreign(): Promise<string> {
  const parts = [
    await sh('nft', '-a', 'list', 'table', 'ip', 'foreign'),
    await sh('nft', '-a', 'list', 'table', 'ip6', 'foreign6'),
    await sh('ip', '-o', 'address', 'show', 'dev', 'fx0'),
    (await sh('ip', '-o', 'address', 'show', 'dev', 'kube-ipvs0')).split('\n').filter((l) => l.includes('10.96.7.7')).join('\n'),
    await sh('ip', '-o', 'route', 'show', 'table', 'main'),
    await sh('ip', '-o', 'route', 'show', 'table', 'local', 'proto', 'static'),
    (await conntrackList('-p', 'udp', '--orig-src', '10.5.5.5')).map((l) => l.replace(/^(\S+\s+\d+\s+)\d+/, '$1_')).join('\n'),
  ];
  return parts.join('\n---\n');
}

/** ipvsync's address and route protocol (IPVSYNC_ADDRESS_PROTOCOL, IPVSYNC_ROUTE_PROTOCOL). */
const IPVSYNC_PROTO = 249;

/** The addresses and routes an IPVS-mode run leaves (ipvsync's protocol): what this mode
 *  deletes. Read and written with independent tools (iproute2 here neither shows nor sets an
 *  address's protocol: test/helpers/ifa-proto.ts speaks rtnetlink itself). */
async function leftovers(): Promise<string[]> {
  const addrs = protoAddresses().filter((a) => a.protocol === IPVSYNC_PROTO).map((a) => `addr ${a.address}/${a.prefixlen} on ${a.index}`);
  const routes = (await sh('ip', '-o', 'route', 'show', 'table', 'all', 'proto', String(IPVSYNC_PROTO))).split('\n').filter(Boolean).map((l) => `route ${l.trim()}`);
  return [...addrs, ...routes].sort();
}

async function plantAddress(...addresses: string[]): Promise<void> {
  const index = (JSON.parse(await sh('ip', '-j', 'link', 'show', 'kube-ipvs0')) as Array<{ ifindex: number }>)[0]!.ifindex;
  for (const a of addresses) addProtoAddress(index, `${a}/32`, IPVSYNC_PROTO);
}

async function plantRoute(...dsts: string[]): Promise<void> {
  for (const d of dsts) await sh('ip', 'route', 'add', 'local', d, 'dev', 'lo', 'table', 'local', 'proto', String(IPVSYNC_PROTO));
}

/** A UDP flow to the dns service, translated to `endpoint` (what conntrack holds for a client
 *  of it), from `sport`. */
async function dnsFlow(endpoint: string, sport: number): Promise<void> {
  await sh('conntrack', '-I', '-p', 'udp', '-s', '10.244.9.9', '-d', '10.96.0.53', '--sport', String(sport), '--dport', '53',
    '--reply-src', endpoint, '--reply-dst', '10.244.9.9', '--reply-port-src', '53', '--reply-port-dst', String(sport), '-t', '600', '-u', 'SEEN_REPLY');
}
const flowsTo = async (endpoint: string) => (await conntrackList('-p', 'udp', '--reply-src', endpoint)).length;

// ---- the daemon ----

interface Daemon {
  lines(): Array<{ raw: string; msg: string; [k: string]: unknown }>;
  last(): Promise<string>;
  exited: Promise<unknown>;
  kill(): void;
}

function daemon(faultsDir: string, apiUrl: string): Daemon {
  const child = spawn(
    process.execPath,
    [CLI, 'proxy', '--master', apiUrl, ...SYNC_FLAGS, '--logging-format', 'json', '--metrics-bind-address', METRICS, '--healthz-bind-address', '127.0.0.1:10256',
      '--iptables-min-sync-period', '0s', '--iptables-sync-period', '2s'],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_OPTIONS: `--import=${HOOK}`, KERNEL_FAULTS_DIR: faultsDir } },
  );
  const log: string[] = [];
  let stderr = '';
  createInterface({ input: child.stderr! }).on('line', (l) => (l.startsWith('{') ? log.push(l) : (stderr += `${l}\n`)));
  child.stdout!.resume();
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return {
    lines: () => log.map((raw) => ({ raw, ...(JSON.parse(raw) as { msg: string }) })),
    last: async () => `daemon log:\n${log.slice(-40).join('\n')}\n${stderr}`,
    exited,
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}

/** The sum of a counter's series in one scrape. */
async function counters(): Promise<{ nft: number; all: number }> {
  const text = await (await fetch(`http://${METRICS}/metrics`)).text();
  const sum = (name: string) => {
    let n = 0;
    let found = false;
    for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) (n += Number(m[1])), (found = true);
    assert.ok(found, `${name} in /metrics`);
    return n;
  };
  return { nft: sum('kubeproxy_sync_proxy_rules_nftables_sync_failures_total'), all: sum('ipvsync_sync_failures_total') };
}

// ---- the faults ----

class Faults {
  private seq = 0;
  constructor(readonly dir: string) {}

  /** Arms one failure of `method`, holding the thread's kernel calls after it. */
  arm(method: FaultMethod): string {
    const seq = String(++this.seq).padStart(4, '0');
    // written whole, then renamed in: the hook never reads half a file
    writeFileSync(join(this.dir, `.${seq}.tmp`), JSON.stringify({ method, hold: true }));
    renameSync(join(this.dir, `.${seq}.tmp`), join(this.dir, 'armed', `${seq}.json`));
    return seq;
  }

  fired(): FiredFault[] {
    const f = join(this.dir, 'faults.log');
    return existsSync(f) ? readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as FiredFault) : [];
  }

  release(seq: string): void {
    writeFileSync(join(this.dir, 'release', seq), '');
  }
}

interface Episode {
  method: FaultMethod;
  /** What a sync must do once the change is made. */
  change: string;
  /** The objects on the API server once the change is made. */
  objects: Obj[];
  /** Makes the change (before the fault is armed when `changeFirst`: for a dump every full
   *  sync makes, so that the sync it fails is one that has the change to read). */
  cause: () => Promise<void>;
  changeFirst?: boolean;
  /** The change is someone else's commit into the owned tables: the old state (what the gate
   *  may show) is the tables as changed. Armed first, the listing it needs is the one that fails
   *  (nothing else moves the generation). */
  changesTables?: boolean;
  /** More to check between the failure and the retry. */
  atGate?: () => Promise<void>;
}

test('every kernel call of an nftables-mode sync fails once, in turn: logged, counted, repaired by the next sync, nothing foreign touched, nothing half-applied', { timeout: 20 * 60_000 }, async (t) => {
  // someone else's: a table (a set, a chain with a rule on a hook), another family's table, a link
  // with an address and routes, an address on kube-ipvs0 without ipvsync's protocol, a local
  // route, a UDP flow
  const nftForeign = `table ip foreign {
  set blocked {
    type ipv4_addr
    elements = { 203.0.113.7, 203.0.113.8 }
  }
  chain input {
    type filter hook input priority 10; policy accept;
    ip saddr @blocked counter drop
  }
  chain aside {
    ip daddr 10.96.0.10 accept
  }
}
table ip6 foreign6 {
  chain c {
    type filter hook output priority 5; policy accept;
  }
}
`;
  const nftDir = mkdtempSync(join(tmpdir(), 'kernel-faults-nft-'));
  writeFileSync(join(nftDir, 'foreign.nft'), nftForeign);
  await sh('nft', '-f', join(nftDir, 'foreign.nft'));
  rmSync(nftDir, { recursive: true, force: true });
  await sh('ip', 'link', 'add', 'fx0', 'type', 'bridge');
  await sh('ip', 'address', 'add', '192.0.2.1/24', 'dev', 'fx0');
  // no link-local address: its DAD state ("tentative") changes on its own
  await sh('ip', 'link', 'set', 'fx0', 'addrgenmode', 'none');
  await sh('ip', 'link', 'set', 'fx0', 'up');
  await sh('ip', 'route', 'add', '198.51.100.0/24', 'dev', 'fx0', 'proto', 'static');
  await sh('ip', 'route', 'add', 'local', '10.97.0.0/16', 'dev', 'lo', 'table', 'local', 'proto', 'static');
  // The VIP link an IPVS-mode run leaves (this kernel has no dummy links: a bridge of that name),
  // with someone else's address on it.
  await sh('ip', 'link', 'add', 'kube-ipvs0', 'type', 'bridge');
  await sh('ip', 'address', 'add', '10.96.7.7/32', 'dev', 'kube-ipvs0');
  await sh('conntrack', '-I', '-p', 'udp', '-s', '10.5.5.5', '-d', '10.6.6.6', '--sport', '1111', '--dport', '2222', '-t', '600', '-u', 'SEEN_REPLY');
  const faultsDir = mkdtempSync(join(tmpdir(), 'kernel-faults-'));
  const faults = new Faults(faultsDir);
  const apiServer = await FakeApiServer.start();
  let d: Daemon | undefined;
  t.after(async () => {
    d?.kill();
    await d?.exited;
    await apiServer.stop();
    rmSync(faultsDir, { recursive: true, force: true });
    spawnSync('nft', ['flush', 'ruleset']);
    for (const l of ['fx0', 'kube-ipvs0']) spawnSync('ip', ['link', 'del', l]);
    spawnSync('ip', ['route', 'flush', 'table', 'local', 'proto', '249']);
    spawnSync('ip', ['route', 'del', 'local', '10.97.0.0/16', 'dev', 'lo', 'table', 'local']);
    spawnSync('conntrack', ['-F']);
  });

  let objects: Obj[] = [...web(['10.244.1.2']), ...dns(['10.244.1.3', '10.244.1.4'])];
  apiServer.create('nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE } });
  for (const o of objects) apiServer.create(o.kind === 'Service' ? 'services' : 'endpointslices', o as never);
  const baseline = await foreign();

  d = daemon(faultsDir, apiServer.url);
  const dm = d;
  await waitFor('the first sync', async () => (dm.lines().some((l) => l.msg === 'sync') ? true : undefined), { timeoutMs: BOUND, last: dm.last });
  const first = dm.lines().find((l) => l.msg === 'sync')!;
  assert.equal(first.errors, 0, await dm.last());
  assert.equal(await owned(), await reference(objects), 'the first sync programs what `ipvsync sync` does');
  assert.deepEqual(dm.lines().filter((l) => l.msg === 'sync failed'), [], 'no failure before any fault');

  const put = (o: Obj) => apiServer.update(o.kind === 'Service' ? 'services' : 'endpointslices', o as never);
  const add = (o: Obj) => apiServer.create(o.kind === 'Service' ? 'services' : 'endpointslices', o as never);
  /** Someone commits into the owned table: the next full sync sees the generation moved and
   *  lists the tables (their static part, then each set's elements) to repair it. */
  const tamper = async () => {
    const sets = (JSON.parse(await sh('nft', '-j', 'list', 'sets', 'table', 'ip', 'ipvsync')) as { nftables: Array<{ set?: { name: string } }> }).nftables;
    assert.ok(sets.some((s) => s.set?.name === 'cluster-ips'), 'the owned table has a cluster-ips set');
    await sh('nft', 'flush', 'set', 'ip', 'ipvsync', 'cluster-ips');
  };
  const figures: Array<{ method: string; fired: number; failedSyncs: number; retriesUntilRepaired: number; atGate: string }> = [];

  /** One fault: armed, caused, seen at the gate, released; then the log, /metrics and the kernel. */
  async function episode(e: Episode, extra?: () => Promise<void>): Promise<void> {
    const from = dm.lines().length;
    const before = await counters();
    const old = await owned();
    const want = await reference(e.objects);
    let seq: string;
    if (e.changeFirst) {
      await e.cause();
      seq = faults.arm(e.method);
    } else {
      seq = faults.arm(e.method);
      await e.cause();
    }
    const oldNow = e.changesTables ? await owned() : old;
    const fired = await waitFor(`${e.method} failed (${e.change})`, async () => faults.fired().find((f) => f.seq === seq), { timeoutMs: BOUND, intervalMs: 50, last: dm.last });
    assert.equal(fired.method, e.method);
    assert.ok(fired.thread > 0, 'failed on the sync thread');
    // Held: the thread's next kernel call waits, so this is the kernel between the failure and
    // whatever comes after it.
    let which: string;
    try {
      const atGate = await owned();
      which = atGate === oldNow ? 'old' : atGate === want ? 'new' : 'mixed';
      assert.notEqual(which, 'mixed', `between the failure and the retry the owned tables are the old state or the new one\n${atGate}`);
      assert.equal(await foreign(), baseline, 'foreign objects untouched at the failure');
      await e.atGate?.();
    } finally {
      faults.release(seq);
    }

    const failedAt = await waitFor(`the failure of ${e.method} in the daemon's log`, async () => {
      const i = dm.lines().findIndex((l, j) => j >= from && l.msg === 'sync failed' && l.raw.includes(FAULT_MARK));
      return i >= 0 ? i : undefined;
    }, { timeoutMs: BOUND, last: dm.last });
    const failure = dm.lines()[failedAt]!;
    assert.ok(failure.raw.includes(fired.op), `the log line names the op (${fired.op}): ${failure.raw}`);
    assert.ok(failure.raw.includes(fired.code), `the log line has the errno name: ${failure.raw}`);
    assert.ok(typeof failure.retryInMs === 'number', `the log line says when it retries: ${failure.raw}`);
    const repairedAt = await waitFor(`a sync without errors after the failure of ${e.method}`, async () => {
      const i = dm.lines().findIndex((l, j) => j > failedAt && l.msg === 'sync' && l.errors === 0);
      return i >= 0 ? i : undefined;
    }, { timeoutMs: BOUND, last: dm.last });
    const lines = dm.lines();
    const failedSyncs = lines.slice(from, repairedAt).filter((l) => l.msg === 'sync failed').length;
    const after = await counters();
    const failedNow = dm.lines().slice(from).filter((l) => l.msg === 'sync failed').length;
    assert.ok(failedSyncs >= 1);
    assert.equal(after.nft - before.nft, failedNow, 'kubeproxy_sync_proxy_rules_nftables_sync_failures_total counts each failed sync');
    assert.equal(after.all - before.all, failedNow, 'ipvsync_sync_failures_total counts each failed sync');
    assert.equal(failedNow, failedSyncs, 'no failure after the repair');
    assert.equal(await owned(), want, `after the repair the owned tables are what \`ipvsync sync\` programs (${e.change})`);
    assert.equal(await foreign(), baseline, 'foreign objects untouched');
    assert.deepEqual(await leftovers(), [], 'what an IPVS-mode run left is gone');
    assert.equal(faults.fired().filter((f) => f.seq === seq).length, 1, 'the fault fired once');
    await extra?.();
    // every failed run has one `sync failed` line; the repairing run is the `sync` line
    const retries = lines.slice(failedAt + 1, repairedAt).filter((l) => l.msg === 'sync failed').length + 1;
    figures.push({ method: e.method, fired: 1, failedSyncs, retriesUntilRepaired: retries, atGate: which });
    t.diagnostic(`${e.method}: ${e.change}: fault fired once (${fired.code} at ${fired.op}); ${failedSyncs} failed sync(s); repaired by the ${retries === 1 ? 'next sync' : `${retries}th sync after`}; owned tables at the failure: ${which} state`);
  }

  await t.test('nftables commit (an endpoint added)', async () => {
    objects = [...web(['10.244.1.2', '10.244.1.5']), ...dns(['10.244.1.3', '10.244.1.4'])];
    await episode({ method: 'Nftables.commit', change: 'an endpoint added to web', objects, cause: async () => void put(web(['10.244.1.2', '10.244.1.5'])[1]!) });
  });

  await t.test('nftables generation (a service added)', async () => {
    objects = [...objects, ...api(['10.244.2.2'])];
    await episode({ method: 'Nftables.genId', change: 'service api added', objects, cause: async () => void api(['10.244.2.2']).forEach(add) });
  });

  await t.test('nftables table listing (the owned table changed by someone else)', async () => {
    await episode({ method: 'Nftables.list', change: 'cluster-ips flushed by someone else', objects, cause: tamper, changesTables: true });
  });

  await t.test('nftables set elements listing (the owned table changed by someone else)', async () => {
    await episode({ method: 'Nftables.listElements', change: 'cluster-ips flushed by someone else', objects, cause: tamper, changesTables: true });
  });

  await t.test('VIP link lookup (an IPVS-mode VIP left on kube-ipvs0)', async () => {
    await episode({ method: 'Links.get', change: 'a VIP left on kube-ipvs0', objects, cause: () => plantAddress('10.96.0.77'), changeFirst: true });
  });

  await t.test('VIP link addresses dump (an IPVS-mode VIP left on kube-ipvs0)', async () => {
    await episode({ method: 'Links.addresses', change: 'a VIP left on kube-ipvs0', objects, cause: () => plantAddress('10.96.0.78'), changeFirst: true });
  });

  await t.test('address deletes (two IPVS-mode VIPs left on kube-ipvs0)', async () => {
    await episode({
      method: 'Links.apply', change: 'two VIPs left on kube-ipvs0', objects, cause: () => plantAddress('10.96.0.10', '10.96.0.53'),
      // rtnetlink has no transactions: the kernel refused the first delete and made the second
      atGate: async () => assert.deepEqual((await leftovers()).map((l) => l.replace(/ on \d+$/, '')), ['addr 10.96.0.10/32']),
    });
  });

  await t.test('owned routes dump (an IPVS route-mode route left)', async () => {
    await episode({ method: 'Routes.list', change: 'a local route of protocol 249 left', objects, cause: () => plantRoute('10.100.0.0/16'), changeFirst: true });
  });

  await t.test('route deletes (two IPVS route-mode routes left)', async () => {
    await episode({
      method: 'Routes.apply', change: 'two local routes of protocol 249 left', objects, cause: () => plantRoute('10.100.0.0/16', '10.101.0.0/16'),
      atGate: async () => assert.deepEqual((await leftovers()).map((l) => l.split(' ').slice(0, 3).join(' ')), ['route local 10.100.0.0/16']),
    });
  });

  // The stale flows of a removed UDP endpoint: kube-proxy deletes them after the sync that
  // removed the endpoint, and (since 1.31) finds any left at every later sync. Here they are
  // kept until a delete of them succeeds, across a failed delete and a failed sync
  // (kernel/conntrack.ts StaleFlows).
  let leftAfterDelete = -1;
  await t.test('conntrack delete (a UDP endpoint removed with a flow through it)', async () => {
    await dnsFlow('10.244.1.4', 3333);
    assert.equal(await flowsTo('10.244.1.4'), 1);
    objects = objects.map((o) => (o.metadata?.name === 'dns-1' ? dns(['10.244.1.3'])[1]! : o));
    await episode({ method: 'Conntrack.delete', change: 'endpoint 10.244.1.4 of dns removed', objects, cause: async () => void put(dns(['10.244.1.3'])[1]!) }, async () => {
      leftAfterDelete = await flowsTo('10.244.1.4');
    });
  });
  await t.test('the flow through the removed endpoint is deleted by the sync that repairs the failed conntrack delete', () => {
    assert.equal(leftAfterDelete, 0, 'flows to 10.244.1.4 left after the repair');
  });

  let leftAfterCommit = -1;
  await t.test('nftables commit (a UDP endpoint removed with a flow through it)', async () => {
    objects = objects.map((o) => (o.metadata?.name === 'dns-1' ? dns(['10.244.1.3', '10.244.1.6'])[1]! : o));
    put(dns(['10.244.1.3', '10.244.1.6'])[1]!);
    const want = await reference(objects);
    await waitFor('endpoint 10.244.1.6 of dns programmed', async () => ((await owned()) === want ? true : undefined), { timeoutMs: BOUND, last: dm.last });
    await dnsFlow('10.244.1.6', 4444);
    assert.equal(await flowsTo('10.244.1.6'), 1);
    objects = objects.map((o) => (o.metadata?.name === 'dns-1' ? dns(['10.244.1.3'])[1]! : o));
    await episode({ method: 'Nftables.commit', change: 'endpoint 10.244.1.6 of dns removed', objects, cause: async () => void put(dns(['10.244.1.3'])[1]!) }, async () => {
      leftAfterCommit = await flowsTo('10.244.1.6');
    });
  });
  await t.test('the flow through an endpoint removed by a failed commit is deleted by the sync that repairs it', () => {
    assert.equal(leftAfterCommit, 0, 'flows to 10.244.1.6 left after the repair');
  });

  await t.test('summary', () => {
    assert.equal(figures.length, 11);
    for (const f of figures) t.diagnostic(JSON.stringify(f));
  });
});
