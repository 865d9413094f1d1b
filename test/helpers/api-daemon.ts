// The daemon as a node runs it for months, on the machine's own kernel: `ipvsync proxy --master`
// in nftables mode against the fake API server (test/helpers/fake-apiserver.ts), with a cluster
// of Services and EndpointSlices whose endpoints churn, and what the soak and chaos tests read
// back: the process's RSS, fds, threads and heap, /healthz, /metrics, its log, and whether the
// kernel's tables equal what a fresh `ipvsync sync -f` of the server's objects programs in a
// namespace of its own.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ipvsyncOk, run, sh, waitFor } from '../e2e/helpers/kernel.js';
import { CLUSTER_CIDR, NODE_IP, NODE_NAME } from '../e2e/helpers/podnet.js';
import { startProxy, type RunningProxy } from '../e2e/helpers/proxy.js';
import { FakeApiServer, type FakeApiServerOptions, type KubeObject } from './fake-apiserver.js';

const METRICS = '127.0.0.1:10249';
const HEALTHZ = '127.0.0.1:10256';
/** The namespace a fresh `sync -f` programs in, for the comparison. */
const FRESH_NS = 'ipvsync-fresh';
/** kube-proxy's annotation on a slice: when the change that made it happened. */
const TRIGGER = 'endpoints.kubernetes.io/last-change-trigger-time';

export interface ClusterShape {
  services: number;
  /** Endpoints per Service (one slice each). */
  endpoints: number;
}

/** The i-th Service: TCP, every 4th UDP, every 10th also a NodePort, every 7th with ClientIP
 *  affinity; its cluster IP in 10.96.0.0/12. */
function service(i: number): KubeObject {
  const udp = i % 4 === 3;
  const nodePort = i % 10 === 0 && i / 10 < 2700;
  const ip = 10 + i;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: `svc-${i}`, namespace: 'default' },
    spec: {
      type: nodePort ? 'NodePort' : 'ClusterIP',
      clusterIP: `10.96.${(ip >> 8) & 255}.${ip & 255}`,
      ports: [{ name: 'p', port: udp ? 53 : 80, protocol: udp ? 'UDP' : 'TCP', ...(nodePort ? { nodePort: 30000 + i / 10 } : {}) }],
      ...(i % 7 === 5 ? { sessionAffinity: 'ClientIP' } : {}),
    },
  };
}

function sliceOf(i: number, ips: string[], ready: boolean[], trigger?: string): KubeObject {
  const udp = i % 4 === 3;
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: `svc-${i}-1`,
      namespace: 'default',
      labels: { 'kubernetes.io/service-name': `svc-${i}` },
      ...(trigger ? { annotations: { [TRIGGER]: trigger } } : {}),
    },
    addressType: 'IPv4',
    ports: [{ name: 'p', port: 8080, protocol: udp ? 'UDP' : 'TCP' }],
    endpoints: ips.map((ip, k) => ({ addresses: [ip], conditions: { ready: ready[k]! }, nodeName: k % 3 === 0 ? NODE_NAME : 'other-node' })),
  };
}

/** Pod addresses, never one twice: 10.244.0.0/16 from 10.244.0.2 up, then around again (by
 *  then the address's old holder has long been replaced). */
class PodAddresses {
  private next = 2;
  take(): string {
    const n = this.next;
    this.next = this.next >= 65_000 ? 2 : this.next + 1;
    return `10.244.${n >> 8}.${n & 255}`;
  }
}

/** The cluster on the fake API server, and its churn: each update replaces one endpoint of a
 *  Service's slice with a new pod, or flips one endpoint's readiness. */
export class ChurningCluster {
  readonly api: FakeApiServer;
  private readonly ips: string[][] = [];
  private readonly ready: boolean[][] = [];
  private readonly pods = new PodAddresses();
  private seed = 12345;
  /** Updates the server accepted. */
  updates = 0;

  private constructor(
    api: FakeApiServer,
    readonly shape: ClusterShape,
  ) {
    this.api = api;
  }

  /** Bookmarks every minute unless told otherwise, as kube-apiserver's watch cache sends them. */
  static async start(shape: ClusterShape, options: FakeApiServerOptions = { bookmarkIntervalMs: 60_000 }): Promise<ChurningCluster> {
    const c = new ChurningCluster(await FakeApiServer.start(0, options), shape);
    c.api.create('nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE_NAME } });
    for (let i = 0; i < shape.services; i++) {
      c.ips.push(Array.from({ length: shape.endpoints }, () => c.pods.take()));
      c.ready.push(Array.from({ length: shape.endpoints }, () => true));
      c.api.create('services', service(i));
      c.api.create('endpointslices', sliceOf(i, c.ips[i]!, c.ready[i]!));
    }
    return c;
  }

  /** A deterministic pseudo-random number in [0, n). */
  private random(n: number): number {
    this.seed = (this.seed * 1_103_515_245 + 12_345) & 0x7fff_ffff;
    return this.seed % n;
  }

  /** One endpoint change, stamped with its time as the endpoints controller does. */
  update(): void {
    const i = this.random(this.shape.services);
    const k = this.random(this.shape.endpoints);
    if (this.random(4) === 0) this.ready[i]![k] = !this.ready[i]![k];
    else this.ips[i]![k] = this.pods.take();
    this.api.update('endpointslices', sliceOf(i, this.ips[i]!, this.ready[i]!, new Date().toISOString()));
    this.updates++;
  }

  /** `n` updates at `perSecond`, on a steady schedule (late ticks catch up); `between` runs
   *  after each (a test's chaos step at the right update). */
  async churn(n: number, perSecond: number, between?: (done: number) => Promise<void> | void): Promise<{ seconds: number; rate: number }> {
    const start = performance.now();
    for (let done = 0; done < n; ) {
      const due = Math.min(n, Math.floor(((performance.now() - start) / 1000) * perSecond) + 1);
      while (done < due) {
        this.update();
        done++;
        if (between) await between(done);
      }
      await new Promise((r) => setTimeout(r, 1000 / perSecond));
    }
    const seconds = (performance.now() - start) / 1000;
    return { seconds, rate: n / seconds };
  }

  /** Every Service and EndpointSlice the server holds. */
  objects(): KubeObject[] {
    const items: KubeObject[] = [];
    for (let i = 0; i < this.shape.services; i++) {
      const s = this.api.get('services', `svc-${i}`);
      const e = this.api.get('endpointslices', `svc-${i}-1`);
      if (s) items.push(s);
      if (e) items.push(e);
    }
    return items;
  }

  close(): Promise<void> {
    return this.api.stop();
  }
}

/** The flags both the daemon (startProxy adds the node's) and the fresh `sync -f` run with. */
const NODE_FLAGS = ['--hostname-override', NODE_NAME, '--node-ip', NODE_IP, '--cluster-cidr', CLUSTER_CIDR];

export interface ProcessSample {
  rssKb: number;
  fds: number;
  threads: number;
  /** The daemon thread's V8 heap in use (nodejs_heap_size_used_bytes). */
  heapBytes: number;
}

/** `ipvsync proxy --master` on the cluster's API server, in this network namespace. */
export class SoakDaemon {
  private constructor(readonly proxy: RunningProxy) {}

  static start(cluster: ChurningCluster, ...flags: string[]): SoakDaemon {
    return new SoakDaemon(
      startProxy(['--master', cluster.api.url], '--proxy-mode', 'nftables', '--metrics-bind-address', METRICS, '--healthz-bind-address', HEALTHZ, ...flags),
    );
  }

  get pid(): number {
    return this.proxy.child.pid!;
  }

  lines(): Array<Record<string, any>> {
    return this.proxy.log.map((l) => JSON.parse(l) as Record<string, any>);
  }

  syncs(): Array<Record<string, any>> {
    return this.lines().filter((l) => l.msg === 'sync');
  }

  /** For a failure message: the log's last lines and the rest of stderr. */
  async last(): Promise<string> {
    return `daemon log (last 40 lines):\n${this.proxy.log.slice(-40).join('\n')}\n${this.proxy.stderr()}`;
  }

  async metrics(): Promise<string> {
    return (await fetch(`http://${METRICS}/metrics`)).text();
  }

  /** The sum of a family's samples (or its one unlabelled sample) in `text`. */
  static metric(text: string, name: string, labels = ''): number {
    let n = 0;
    let found = false;
    for (const line of text.split('\n')) {
      if (!line.startsWith(name)) continue;
      const rest = line.slice(name.length);
      if (!(rest.startsWith(' ') || rest.startsWith('{'))) continue;
      if (labels && !rest.includes(labels)) continue;
      n += Number(line.slice(line.lastIndexOf(' ') + 1));
      found = true;
    }
    return found ? n : NaN;
  }

  async healthz(): Promise<number> {
    const r = await fetch(`http://${HEALTHZ}/healthz`);
    await r.arrayBuffer();
    return r.status;
  }

  async started(): Promise<void> {
    await waitFor('the first sync', async () => (this.syncs().length ? true : undefined), { timeoutMs: 300_000, last: () => this.last() });
  }

  async sample(): Promise<ProcessSample> {
    const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
    const field = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(status)?.[1]);
    return {
      rssKb: field('VmRSS'),
      fds: readdirSync(`/proc/${this.pid}/fd`).length,
      threads: field('Threads'),
      heapBytes: SoakDaemon.metric(await this.metrics(), 'nodejs_heap_size_used_bytes'),
    };
  }

  async stop(): Promise<void> {
    const p = this.proxy.child;
    if (p.exitCode === null && p.signalCode === null) {
      p.kill('SIGTERM');
      await this.proxy.exited;
    }
  }
}

/**
 * The ruleset as text with what may differ between two equal data planes left out or put in
 * order: the blocks of a table (sets, maps, chains) by name, and the elements of each set by
 * value (a hash set lists in no fixed order). A chain's rules keep their order, but for the
 * one history may change on purpose (src/proxy/nftables/plane.ts): the tables keep every
 * endpoint count's `endpoints-N-S` maps and their dnat rules (one in each shard's chain) once
 * made, in the order the counts came
 * (so a sync never moves a rule), where a fresh sync makes only the counts in use, in service
 * order. Each frontend's elements are in one such map, so those rules' order does not matter,
 * and an empty map's rule matches nothing: they are compared sorted, the empty ones left out.
 */
export function normaliseRuleset(text: string): string {
  const out: string[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; ) {
    const line = lines[i]!;
    if (!line.startsWith('table ')) {
      i++;
      continue;
    }
    const blocks: string[][] = [];
    i++;
    while (i < lines.length && lines[i] !== '}') {
      if (lines[i]!.trim() === '') {
        i++;
        continue;
      }
      const body: string[] = [lines[i]!];
      i++;
      while (i < lines.length && lines[i] !== '\t}') body.push(lines[i++]!);
      i++;
      blocks.push(normaliseBlock(body));
    }
    i++;
    const unused = new Set(blocks.filter((b) => /^map endpoints-\d+-\d+ \{$/.test(b[0]!) && !b.includes('elements')).map((b) => b[0]!.split(' ')[1]!));
    const uses = (rule: string) => /@endpoints-\d+-\d+$/.test(rule);
    const kept = blocks
      .filter((b) => !unused.has(b[0]!.split(' ')[1]!))
      .map((b) => {
        if (!b[0]!.startsWith('chain ')) return b;
        const rules = b.filter((r) => !(uses(r) && unused.has(r.slice(r.lastIndexOf('@') + 1))));
        const sorted = rules.filter(uses).sort();
        return rules.map((r) => (uses(r) ? sorted.shift()! : r));
      })
      .map((b) => b.join('\n'));
    out.push(line, ...kept.sort(), '}');
  }
  return out.join('\n');
}

/** One set, map or chain, trimmed: an `elements = { … }` list sorted, one element per line. */
function normaliseBlock(body: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < body.length; i++) {
    const l = body[i]!;
    const at = l.indexOf('elements = {');
    if (at < 0) {
      out.push(l.trim());
      continue;
    }
    // (the list's lines joined once: at 10k services a set lists 100,000 elements)
    const parts = [l.slice(at + 'elements = {'.length)];
    while (!parts.at(-1)!.trimEnd().endsWith('}') && i + 1 < body.length) parts.push(body[++i]!);
    const elements = parts.join('').trimEnd().slice(0, -1).split(',').map((e) => e.trim()).filter(Boolean);
    out.push('elements');
    for (const e of elements.sort()) out.push(e);
  }
  return out;
}

/** ipvsync's tables (ip and ip6 ipvsync) in a namespace (the current one unless named),
 *  normalised; "absent" for a family without one. */
export async function ownedTables(netns?: string): Promise<string> {
  const out: string[] = [];
  for (const fam of ['ip', 'ip6']) {
    const args = ['list', 'table', fam, 'ipvsync'];
    const r = netns ? await run('ip', ['netns', 'exec', netns, 'nft', ...args]) : await run('nft', args);
    out.push(r.code === 0 ? normaliseRuleset(r.stdout) : `${fam}: absent`);
  }
  return out.join('\n');
}

/** What a fresh `ipvsync sync -f` of `objects` (with `flags`: the mode and the node's) programs,
 *  in a namespace of its own, made anew each time: nothing of an earlier comparison in it. */
export async function freshSync(objects: readonly unknown[], flags: readonly string[]): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'fresh-sync-'));
  try {
    const file = join(dir, 'objects.json');
    writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
    await run('ip', ['netns', 'del', FRESH_NS]);
    await sh('ip', 'netns', 'add', FRESH_NS);
    await sh('ip', '-n', FRESH_NS, 'link', 'set', 'lo', 'up');
    await ipvsyncOk('--netns', `/run/netns/${FRESH_NS}`, 'sync', '-f', file, ...flags, '--no-sysctl');
    return await ownedTables(FRESH_NS);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await run('ip', ['netns', 'del', FRESH_NS]);
  }
}

/** Waits until the daemon's tables equal a fresh sync's of the server's objects as they are
 *  now (the churn stopped: a quiet point); returns how long that took from the call. */
export async function converged(cluster: ChurningCluster, daemon: SoakDaemon, timeoutMs = 300_000): Promise<number> {
  const start = performance.now();
  const want = await freshSync(cluster.objects(), ['--proxy-mode', 'nftables', ...NODE_FLAGS]);
  let have = '';
  await waitFor(
    'the daemon’s tables equal a fresh sync -f of the server’s objects',
    async () => ((have = await ownedTables()) === want ? true : undefined),
    { timeoutMs, intervalMs: 200, last: async () => `${firstDifference(have, want)}\n${await daemon.last()}` },
  );
  return performance.now() - start;
}

/** The first line where two normalised rulesets differ, for a failure message. */
export function firstDifference(have: string, want: string): string {
  const a = have.split('\n');
  const b = want.split('\n');
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) return `first difference at line ${i + 1}: daemon has ${JSON.stringify(a[i])}, a fresh sync ${JSON.stringify(b[i])} (${a.length} vs ${b.length} lines)`;
  }
  return 'equal';
}

/** The soak's verdict on a series of samples taken after warm-up: no growth trend. The bound
 *  is on memory, never on time: the last third's peak may exceed the first third's by at most
 *  `slack` (and the fds and threads not at all). */
export function assertFlat(samples: ProcessSample[], slack: { rssKb: number; heapBytes: number }): void {
  assert.ok(samples.length >= 6, `${samples.length} samples: too few to see a trend`);
  const third = Math.floor(samples.length / 3);
  const first = samples.slice(0, third);
  const last = samples.slice(-third);
  const peak = (xs: ProcessSample[], k: keyof ProcessSample) => Math.max(...xs.map((x) => x[k]));
  const show = JSON.stringify(samples);
  assert.ok(peak(last, 'rssKb') <= peak(first, 'rssKb') + slack.rssKb, `RSS grows: ${show}`);
  assert.ok(peak(last, 'heapBytes') <= peak(first, 'heapBytes') + slack.heapBytes, `heap grows: ${show}`);
  assert.ok(peak(last, 'fds') <= peak(first, 'fds'), `fds grow: ${show}`);
  assert.ok(peak(last, 'threads') <= peak(first, 'threads'), `threads grow: ${show}`);
}
