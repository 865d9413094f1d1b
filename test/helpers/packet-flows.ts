// kube-proxy's packet-flow tests replayed with real packets. kube-proxy's own tests
// (pkg/proxy/nftables/proxier_test.go, runPacketFlowTests) trace a packet — source IP,
// destination IP and port — through the rules it generated, and expect the endpoints it may
// reach (or DROP, REJECT, or nothing), and whether it is masqueraded. Here the same objects
// are programmed by `ipvsync sync -f` into a "node" network namespace of the machine's own
// kernel, and each packet is really sent:
//
//   pf-ext  (external clients, the node's gateway) ──eth0── pf-node ──pv0── pf-pods (pods, endpoints)
//
// A source that is a node IP sends from the node itself (the output path); a source in the
// pod CIDRs or an endpoint address sends from pf-pods; any other from pf-ext. Each packet is
// judged from the node's own events, never from how long an answer takes: a conntrack NEW event
// (`conntrack -E`) says it passed every hook, and its reply tuple says where it was DNATed to
// and whether its source was rewritten (masqueraded); an nftables trace event (`nft monitor
// trace`, a foreign table of the test's sets nftrace on new connections) says a rule dropped
// or rejected it. One of the two always comes. Expected endpoints are "any of these": the
// packet is sent again (a new source port each time) until every one of them was reached.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parse, stringify } from 'yaml';
import { fileURLToPath } from 'node:url';
import { CLI, run, sh } from '../e2e/helpers/kernel.js';

/** One packet of an upstream test table. */
export interface FlowSpec {
  name: string;
  source: string;
  protocol: 'TCP' | 'UDP' | 'SCTP';
  dest: string;
  port: number;
  /** Comma-separated endpoints ("10.180.0.1:80, [fd00::1]:80"), or DROP, REJECT, or "". */
  output: string;
  masq: boolean;
}

/** One call of upstream's runPacketFlowTests: the objects and configuration, and its table. */
export interface FlowCase {
  /** The file it was read from. */
  file: string;
  upstream: { repo: string; path: string; commit: string; test: string; case?: string };
  family: 'ipv4' | 'ipv6';
  nodeName: string;
  nodeIPs: string[];
  /** The local detector's CIDR; null: no detector (nothing is "pod traffic"). */
  clusterCIDR: string | null;
  serviceCIDRs: string[];
  /** [] : every node address. */
  nodePortAddresses: string[];
  masqueradeAll: boolean;
  other: string[];
  objects: Array<Record<string, unknown>>;
  flows: FlowSpec[];
}

export function loadCases(dir: string): FlowCase[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => ({ ...(parse(readFileSync(join(dir, f), 'utf8')) as Omit<FlowCase, 'file'>), file: f }));
}

/** What happened to the packets of one flow. */
export interface Outcome {
  /** As upstream writes it: the endpoints reached ("a:p, b:p", in the expected order where
   *  expected), DROP, REJECT, or "" (accepted, not translated). */
  output: string;
  masq: boolean;
  /** Packets sent. */
  packets: number;
}

// ---- addresses (the test's own reading, independent of ipvsync's) ----

/** An IPv4 address as kube-proxy's ParseIPSloppy reads it (leading zeros are decimal), IPv6
 *  canonical; undefined for neither. */
export function sloppyIp(text: string): string | undefined {
  const t = text.trim();
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(t)) {
    const parts = t.split('.').map((p) => Number.parseInt(p, 10));
    return parts.every((p) => p <= 255) ? parts.join('.') : undefined;
  }
  if (isIPv6(t)) return new URL(`http://[${t}]/`).hostname.slice(1, -1);
  return isIPv4(t) ? t : undefined;
}

const v6 = (a: string) => a.includes(':');
const hostPort = (a: string, p: number | string) => (v6(a) ? `[${a}]:${p}` : `${a}:${p}`);

function blockList(cidrs: readonly string[]): BlockList {
  const b = new BlockList();
  for (const c of cidrs) {
    const [a, len] = c.trim().split('/');
    const addr = sloppyIp(a!)!;
    b.addSubnet(addr, Number(len), v6(addr) ? 'ipv6' : 'ipv4');
  }
  return b;
}
const inList = (b: BlockList, a: string) => b.check(a, v6(a) ? 'ipv6' : 'ipv4');

/** The fake proxier's pod networks: sources there are pods whatever the case's detector. */
const POD_NETS = ['10.0.0.0/8', 'fd00:10::/64'];
/** The node's address on the pods' link: what a masqueraded packet to a pod carries. */
const NODE_POD_SIDE = { v4: '100.64.0.1', v6: 'fd00:ffff::1' };
/** The node's gateway in pf-ext. */
const GATEWAY = { v4: '192.168.0.250', v6: '2001:db8::250' };
const NS = { node: 'pf-node', pods: 'pf-pods', ext: 'pf-ext' } as const;
type Side = keyof typeof NS;

interface CtEvent {
  replySrc: string;
  replyDst: string;
  replySport: number;
  origDst: string;
  origDport: number;
}

/** The lab: three namespaces, a sender in each, and the node's event streams. */
export class FlowLab {
  private agents = new Map<Side, { child: ChildProcess; errors: Map<number, string> }>();
  private watchers: ChildProcess[] = [];
  private trace: ChildProcess | undefined;
  /** The node address the watchers' readiness packets come from. */
  private pokeFrom = '';
  /** Events by "source sport" (proto-agnostic: source ports are never reused in a run). */
  private conntrack = new Map<string, CtEvent>();
  private drops = new Map<string, string>();
  private traceKeys = new Map<string, string>();
  /** Keys of the packets traced. */
  private traced = new Set<string>();
  private waiters = new Set<() => void>();
  /** The addresses a case added: its side, the address, the command that added it. */
  private caseAddrs: Array<[Side, string, string[]]> = [];
  private nextPort = 20000;
  private nextId = 1;
  private dir = mkdtempSync(join(tmpdir(), 'ipvsync-flows-'));
  /** The node's IPs of the running case. */
  private nodeIPs = new Set<string>();
  private pods = blockList(POD_NETS);
  private endpoints = new Set<string>();
  /** The case's external and load-balancer IPs. */
  private frontends = new Set<string>();

  static async open(nodeIPs: readonly string[]): Promise<FlowLab> {
    const lab = new FlowLab();
    await lab.build(nodeIPs);
    return lab;
  }

  private async build(nodeIPs: readonly string[]): Promise<void> {
    for (const ns of Object.values(NS)) await sh('ip', 'netns', 'add', ns);
    const inNs = (ns: string, ...a: string[]) => sh('ip', '-n', ns, ...a);
    await sh('ip', '-n', NS.node, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', NS.ext);
    await sh('ip', '-n', NS.node, 'link', 'add', 'pv0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', NS.pods);
    for (const ns of Object.values(NS)) {
      await inNs(ns, 'link', 'set', 'lo', 'up');
      await inNs(ns, 'link', 'set', 'eth0', 'up').catch(() => undefined);
    }
    await inNs(NS.node, 'link', 'set', 'pv0', 'up');
    const sysctl = (ns: string, kv: string) => sh('ip', 'netns', 'exec', ns, 'sysctl', '-qw', kv);
    for (const kv of ['net.ipv4.ip_forward=1', 'net.ipv6.conf.all.forwarding=1', 'net.ipv4.conf.all.rp_filter=0', 'net.ipv4.conf.default.rp_filter=0', 'net.ipv4.conf.all.send_redirects=0', 'net.ipv4.conf.default.send_redirects=0'])
      await sysctl(NS.node, kv);
    for (const ns of [NS.pods, NS.ext]) for (const kv of ['net.ipv4.conf.all.rp_filter=0', 'net.ipv4.conf.default.rp_filter=0']) await sysctl(ns, kv);
    // the node: its IPs on eth0, the gateway in pf-ext, the pods behind pv0
    for (const a of nodeIPs) await inNs(NS.node, 'addr', 'add', v6(a) ? `${a}/64` : `${a}/24`, 'dev', 'eth0', ...(v6(a) ? ['nodad'] : []));
    await inNs(NS.ext, 'addr', 'add', `${GATEWAY.v4}/24`, 'dev', 'eth0');
    await inNs(NS.ext, 'addr', 'add', `${GATEWAY.v6}/64`, 'dev', 'eth0', 'nodad');
    await inNs(NS.node, 'route', 'add', 'default', 'via', GATEWAY.v4);
    await inNs(NS.node, '-6', 'route', 'add', 'default', 'via', GATEWAY.v6);
    await inNs(NS.ext, 'route', 'add', 'default', 'via', nodeIPs.find((a) => !v6(a))!);
    await inNs(NS.ext, '-6', 'route', 'add', 'default', 'via', nodeIPs.find(v6)!);
    await inNs(NS.node, 'addr', 'add', `${NODE_POD_SIDE.v4}/32`, 'dev', 'pv0');
    await inNs(NS.node, 'addr', 'add', `${NODE_POD_SIDE.v6}/128`, 'dev', 'pv0', 'nodad');
    for (const n of POD_NETS) await inNs(NS.node, ...(v6(n) ? ['-6'] : []), 'route', 'add', n, 'dev', 'pv0');
    // a base address of its own: the routes through the node stay when a case's addresses go
    await inNs(NS.pods, 'addr', 'add', '100.64.0.2/32', 'dev', 'eth0');
    await inNs(NS.pods, 'addr', 'add', 'fd00:ffff::2/128', 'dev', 'eth0', 'nodad');
    await inNs(NS.pods, 'route', 'add', NODE_POD_SIDE.v4, 'dev', 'eth0');
    await inNs(NS.pods, 'route', 'add', 'default', 'via', NODE_POD_SIDE.v4);
    await inNs(NS.pods, '-6', 'route', 'add', NODE_POD_SIDE.v6, 'dev', 'eth0');
    await inNs(NS.pods, '-6', 'route', 'add', 'default', 'via', NODE_POD_SIDE.v6);
    // a foreign table of the test's own: trace every new connection through the node's hooks
    await run('ip', ['netns', 'exec', NS.node, 'nft', '-f', '-'], {
      input: `table inet pf-trace {
  chain pre { type filter hook prerouting priority -150; ct state new meta nftrace set 1; }
  chain out { type filter hook output priority -150; ct state new meta nftrace set 1; }
}
`,
    }).then((r) => {
      if (r.code !== 0) throw new Error(`pf-trace: ${r.stderr}`);
    });
    for (const side of Object.keys(NS) as Side[]) await this.startAgent(side);
    this.pokeFrom = nodeIPs.find((a) => !v6(a))!;
    this.watchConntrack();
    await this.watchTrace();
  }

  private async startAgent(side: Side): Promise<void> {
    const child = spawn('ip', ['netns', 'exec', NS[side], process.execPath, fileURLToPath(new URL('./packet-flow-agent.js', import.meta.url))], { stdio: ['pipe', 'pipe', 'inherit'] });
    const errors = new Map<number, string>();
    this.agents.set(side, { child, errors });
    const lines = createInterface({ input: child.stdout! });
    await new Promise<void>((resolve, reject) => {
      child.once('exit', (c) => reject(new Error(`packet-flow agent in ${NS[side]} exited ${c}`)));
      lines.on('line', (l) => {
        const m = JSON.parse(l) as { ready?: boolean; id?: number; error?: string };
        if (m.ready) resolve();
        else if (m.id !== undefined) {
          errors.set(m.id, m.error ?? 'error');
          this.wake();
        }
      });
    });
  }

  private watchConntrack(): void {
    const ct = spawn('ip', ['netns', 'exec', NS.node, 'stdbuf', '-oL', 'conntrack', '-E', '-e', 'NEW'], { stdio: ['ignore', 'pipe', 'inherit'] });
    this.watchers.push(ct);
    const CT = /src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+) .*?src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+)/;
    createInterface({ input: ct.stdout! }).on('line', (l) => {
      const m = CT.exec(l);
      if (!m) return;
      this.conntrack.set(`${norm(m[1]!)} ${m[3]}`, { origDst: norm(m[2]!), origDport: Number(m[4]), replySrc: norm(m[5]!), replyDst: norm(m[6]!), replySport: Number(m[7]) });
      this.wake();
    });
  }

  /** `nft monitor trace`, (re)started after each sync: it names a rule by its text only if the
   *  rule was there when it started ("unknown rule handle" otherwise), and a drop verdict is a
   *  REJECT when the rule that gave it rejects. */
  private async watchTrace(): Promise<void> {
    this.trace?.kill();
    const tr = spawn('ip', ['netns', 'exec', NS.node, 'nft', 'monitor', 'trace'], { stdio: ['ignore', 'pipe', 'inherit'] });
    this.trace = tr;
    createInterface({ input: tr.stdout! }).on('line', (l) => {
      if (tr !== this.trace) return;
      const id = /^trace id (\S+) /.exec(l)?.[1];
      if (!id) return;
      if (l.includes(' packet: ')) {
        const src = /\bip6? saddr (\S+)/.exec(l)?.[1];
        const sport = /\b(?:tcp|udp|sctp) sport (\d+)/.exec(l)?.[1];
        if (src && sport && !this.traceKeys.has(id)) {
          this.traceKeys.set(id, `${norm(src)} ${sport}`);
          this.traced.add(`${norm(src)} ${sport}`);
          this.wake();
        }
      } else if (l.endsWith('(verdict drop)')) {
        const key = this.traceKeys.get(id);
        if (l.includes(' unknown rule handle ')) throw new Error(`packet-flow lab: nft monitor does not know the rule that dropped ${key}: ${l}`);
        if (key && !this.drops.has(key)) {
          this.drops.set(key, / reject( with [^(]*)? \(verdict drop\)$/.test(l) ? 'REJECT' : 'DROP');
          this.wake();
        }
      }
    });
    await this.ready();
  }

  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /** Resolves when `check` returns a value, re-checked at every event. */
  private until<T>(check: () => T | undefined, what: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const w = () => {
        let v: T | undefined;
        try {
          v = check();
        } catch (e) {
          this.waiters.delete(w);
          return reject(e);
        }
        if (v === undefined) return;
        this.waiters.delete(w);
        clearTimeout(guard);
        resolve(v);
      };
      // A bound for a packet that produced neither event (a lab fault), not a judgement.
      const guard = setTimeout(() => {
        this.waiters.delete(w);
        reject(new Error(`no event for ${what} in 120 s (neither conntrack nor a trace verdict)`));
      }, 120_000);
      this.waiters.add(w);
      w();
    });
  }

  /** Both event streams are subscribed: a packet from the node was seen by both. */
  private async ready(): Promise<void> {
    const nodeIP = this.pokeFrom;
    const pokes: string[] = [];
    const poke = () => {
      const sport = this.nextPort++;
      pokes.push(`${nodeIP} ${sport}`);
      this.send('node', { proto: 'udp', src: nodeIP, sport, dst: '198.51.100.1', dport: 9 });
    };
    poke();
    const timer = setInterval(poke, 200);
    try {
      await this.until(() => (pokes.some((k) => this.conntrack.has(k) && this.traced.has(k)) ? true : undefined), 'the watchers to start');
    } finally {
      clearInterval(timer);
    }
  }

  private send(side: Side, m: { proto: string; src: string; sport: number; dst: string; dport: number }): number {
    const id = this.nextId++;
    this.agents.get(side)!.child.stdin!.write(`${JSON.stringify({ op: 'send', id, ...m })}\n`);
    return id;
  }

  private close(side: Side, id: number): void {
    this.agents.get(side)!.child.stdin!.write(`${JSON.stringify({ op: 'close', id })}\n`);
  }

  private sideOf(source: string): Side {
    if (this.nodeIPs.has(source) || this.frontends.has(source)) return 'node';
    if (inList(this.pods, source) || this.endpoints.has(source)) return 'pods';
    return 'ext';
  }

  /** An address a case's packets come from (or go to, an endpoint's) in its namespace; gone
   *  with the case. On the node: a load-balancer or external IP it sends from, on lo (a
   *  VIP-like load balancer's address is local to the node, and the node's traffic to it
   *  leaves with it as source). */
  private async addAddress(side: Side, a: string): Promise<void> {
    if (this.caseAddrs.some(([, b]) => b === a) || (side === 'node' && this.nodeIPs.has(a))) return;
    const cmd = ['-n', NS[side], 'addr', 'add', v6(a) ? `${a}/128` : `${a}/32`, 'dev', side === 'node' ? 'lo' : 'eth0', ...(v6(a) ? ['nodad'] : [])];
    await sh('ip', ...cmd);
    this.caseAddrs.push([side, a, cmd]);
    // the node reaches a pod outside the pod networks through pv0 (the ext side is its default)
    if (side === 'pods' && !inList(this.pods, a)) await sh('ip', '-n', NS.node, ...(v6(a) ? ['-6'] : []), 'route', 'replace', a, 'dev', 'pv0');
  }

  private async removeCaseAddresses(): Promise<void> {
    for (const [side, a, cmd] of this.caseAddrs.splice(0)) {
      await sh('ip', ...cmd.map((w) => (w === 'add' ? 'del' : w)).filter((w) => w !== 'nodad'));
      if (side === 'pods' && !inList(this.pods, a)) await sh('ip', '-n', NS.node, ...(v6(a) ? ['-6'] : []), 'route', 'del', a, 'dev', 'pv0');
    }
  }

  /** Programs a case: its objects as manifests, `ipvsync sync -f` with its configuration. */
  async program(c: FlowCase, extraArgs: readonly string[] = []): Promise<void> {
    await this.removeCaseAddresses();
    this.nodeIPs = new Set(c.nodeIPs.map((a) => sloppyIp(a)!));
    this.endpoints = new Set();
    this.frontends = new Set();
    for (const o of c.objects) {
      if (o.kind === 'Service') {
        const spec = (o.spec ?? {}) as { externalIPs?: string[] };
        const ingress = ((o.status as { loadBalancer?: { ingress?: Array<{ ip?: string }> } } | undefined)?.loadBalancer?.ingress ?? []).map((i) => i.ip ?? '');
        for (const a of [...(spec.externalIPs ?? []), ...ingress]) if (sloppyIp(a)) this.frontends.add(sloppyIp(a)!);
      }
      if (o.kind !== 'EndpointSlice') continue;
      for (const e of (o.endpoints as Array<{ addresses?: string[] }> | undefined) ?? []) for (const a of e.addresses ?? []) {
        const ip = sloppyIp(a);
        if (ip && !this.nodeIPs.has(ip)) this.endpoints.add(ip);
      }
    }
    for (const a of this.endpoints) await this.addAddress('pods', a);
    const file = join(this.dir, 'objects.yaml');
    writeFileSync(file, c.objects.map((o) => stringify(o)).join('---\n'));
    const args = ['netns', 'exec', NS.node, process.execPath, CLI, 'sync', '-f', file, '--proxy-mode', 'nftables', '--no-sysctl', '--hostname-override', c.nodeName];
    if (c.clusterCIDR) args.push('--cluster-cidr', c.clusterCIDR);
    if (c.nodePortAddresses.length) args.push('--nodeport-addresses', c.nodePortAddresses.join(','));
    if (c.masqueradeAll) args.push('--masquerade-all');
    if (c.serviceCIDRs.length) args.push('--service-cidrs', c.serviceCIDRs.join(','));
    const r = await run('ip', [...args, ...extraArgs], { timeoutMs: 120_000 });
    if (r.code !== 0) throw new Error(`ipvsync sync -f (${c.file}) exited ${r.code}:\n${r.stderr}${r.stdout}`);
    await this.watchTrace();
    // the sources after the sync: a VIP a source puts on the node is no node address for it
    for (const f of c.flows) {
      const a = sloppyIp(f.source)!;
      await this.addAddress(this.sideOf(a), a);
    }
    await sh('ip', 'netns', 'exec', NS.node, 'conntrack', '-F').catch(() => undefined);
  }

  /** Sends one packet and waits for its fate. */
  private async one(f: FlowSpec): Promise<{ output: string; masq: boolean }> {
    const src = sloppyIp(f.source)!;
    const dst = sloppyIp(f.dest)!;
    const side = this.sideOf(src);
    const sport = this.nextPort++;
    if (this.nextPort > 60000) throw new Error('packet-flow lab: source ports used up');
    const proto = f.protocol.toLowerCase();
    if (proto !== 'tcp' && proto !== 'udp' && proto !== 'sctp') throw new Error(`packet-flow lab: ${f.protocol} is not a protocol it sends`);
    const key = `${src} ${sport}`;
    const id = this.send(side, { proto, src, sport, dst, dport: f.port });
    try {
      return await this.until(() => {
        const err = this.agents.get(side)!.errors.get(id);
        if (err) throw new Error(`${f.name}: the packet from ${src}:${sport} in ${NS[side]} was not sent: ${err}`);
        const drop = this.drops.get(key);
        if (drop) return { output: drop, masq: false };
        const ct = this.conntrack.get(key);
        if (!ct) return undefined;
        const translated = ct.replySrc !== ct.origDst || ct.replySport !== ct.origDport;
        return { output: translated ? hostPort(ct.replySrc, ct.replySport) : '', masq: ct.replyDst !== src };
      }, `${f.name} (${key} → ${hostPort(dst, f.port)})`);
    } finally {
      this.close(side, id);
    }
  }

  /** A flow's outcome: packets until every expected endpoint was reached (or one that was not
   *  expected was, or the verdict is not a DNAT). Masquerade is judged per packet: one DNATed
   *  back to its own source must be masqueraded whatever the flow says (kube-proxy's endpoint
   *  chains mark every endpoint's traffic to itself; upstream's tracer, following every numgen
   *  branch at once, can only say so for a flow whose one endpoint is its source), any other as
   *  the flow says. The outcome's `masq` is the flow's when every packet was right, else the
   *  first wrong packet's. */
  async flow(f: FlowSpec): Promise<Outcome> {
    const expected = expectedEndpoints(f.output);
    const src = sloppyIp(f.source)!;
    const seen = new Set<string>();
    let wrongMasq: boolean | undefined;
    let packets = 0;
    for (;;) {
      const r = await this.one(f);
      packets++;
      if (!r.output.includes(':')) return { output: r.output, masq: r.masq, packets };
      const hairpin = r.output === hostPort(src, r.output.slice(r.output.lastIndexOf(':') + 1));
      if (wrongMasq === undefined && r.masq !== (hairpin || f.masq)) wrongMasq = r.masq;
      seen.add(r.output);
      const unexpected = [...seen].some((e) => !expected.includes(e));
      if (unexpected || expected.every((e) => seen.has(e)) || packets >= 20 * expected.length + 10) break;
    }
    const order = [...expected.filter((e) => seen.has(e)), ...[...seen].filter((e) => !expected.includes(e))];
    return { output: order.join(', '), masq: wrongMasq ?? f.masq, packets };
  }

  async dispose(): Promise<void> {
    for (const { child } of this.agents.values()) child.kill();
    for (const w of this.watchers) w.kill();
    this.trace?.kill();
    for (const ns of Object.values(NS)) await run('ip', ['netns', 'del', ns]);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The endpoints an upstream output names, canonical ("a:p" / "[a]:p"). */
export function expectedEndpoints(output: string): string[] {
  if (!output.includes(':')) return [];
  return output.split(',').map((s) => {
    const t = s.trim();
    const m = /^\[(.+)\]:(\d+)$/.exec(t) ?? /^(.+):(\d+)$/.exec(t)!;
    return hostPort(sloppyIp(m[1]!)!, m[2]!);
  });
}

/** The upstream expectation in the form an outcome has (endpoints canonical). */
export function expectedOutput(output: string): string {
  return output.includes(':') ? expectedEndpoints(output).join(', ') : output;
}

function norm(a: string): string {
  return sloppyIp(a) ?? a;
}
