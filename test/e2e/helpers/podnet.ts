// A one-node "cluster" inside the test VM, built like a node with a bridge CNI:
//   node0   dummy, 192.168.50.10/24 and fd00:50::10/64: the node's addresses (NodePorts)
//   cni0    bridge, 10.244.1.1/24 and fd00:10:244:1::1/64: the pod network's gateway (cluster
//           CIDRs 10.244.0.0/16 and fd00:10:244::/56)
//   pod-a/b/c  network namespaces, eth0 10.244.1.2-4 and fd00:10:244:1::2-4 on a veth in cni0,
//              each running the dual-stack pod server (HTTP 8080, TCP lines 9000, UDP 5300)
//   ext     a network namespace outside the node, 192.168.60.2/24 and fd00:60::2/64, its veth
//           peer (.1, ::1) on the node, default routes through the node: a client with a real
//           non-local address
// Like the CNI bridge plugin and kubelet set up a node: br_netfilter on with
// bridge-nf-call-iptables=1 and -ip6tables=1 (a pod reaching another pod on the same bridge through a VIP gets its
// reply un-NATed by IPVS only if bridged frames pass netfilter) and hairpin mode on the pods'
// bridge ports (a pod reaching itself through a VIP: the reply goes back out the port it came in).
// IPv6 forwarding is on, as kubeadm's preflight demands of an IPv6 node (ipvsync, like
// kube-proxy, sets only net.ipv4.ip_forward): a masqueraded reply un-NATed towards an outside
// client is forwarded, and without it the IPv6 answers to the ext namespace are dropped.
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before } from 'node:test';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Answer } from './traffic.js';
import { HELPERS, resetDataPlane, run, sh } from './kernel.js';

export const NODE_NAME = 'e2e-node';
export const NODE_IP = '192.168.50.10';
export const BRIDGE_IP = '10.244.1.1';
export const CLUSTER_CIDR = '10.244.0.0/16';
export const CLUSTER_CIDR6 = 'fd00:10:244::/56';
export const NODE_IP6 = 'fd00:50::10';
export const BRIDGE_IP6 = 'fd00:10:244:1::1';
export const EXT_GW6 = 'fd00:60::1';
export const EXT_IP6 = 'fd00:60::2';
export const EXT_GW = '192.168.60.1';
export const EXT_IP = '192.168.60.2';

export interface Pod {
  name: string;
  ip: string;
  ip6: string;
}

export const PODS: readonly Pod[] = [
  { name: 'pod-a', ip: '10.244.1.2', ip6: 'fd00:10:244:1::2' },
  { name: 'pod-b', ip: '10.244.1.3', ip6: 'fd00:10:244:1::3' },
  { name: 'pod-c', ip: '10.244.1.4', ip6: 'fd00:10:244:1::4' },
];

/** Runs `ip` commands from one process (`ip -batch`); `force` goes on past failures. */
async function ipBatch(lines: string[], opts: { netns?: string; force?: boolean } = {}): Promise<void> {
  const args = [...(opts.netns ? ['-n', opts.netns] : []), ...(opts.force ? ['-force'] : []), '-batch', '-'];
  const r = await run('ip', args, { input: lines.join('\n') + '\n' });
  if (r.code !== 0 && !opts.force) throw new Error(`ip ${args.join(' ')} exited ${r.code}: ${r.stderr.trim()}\n${lines.join('\n')}`);
}

async function removeLeftovers(): Promise<void> {
  await ipBatch(
    [
      ...[...PODS.map((p) => p.name), 'ext'].map((ns) => `netns del ${ns}`),
      ...['node0', 'cni0', 'v-ext', ...PODS.map((p) => `v-${p.name}`)].map((l) => `link del ${l}`),
    ],
    { force: true },
  );
}

export class PodNetwork {
  private readonly servers: ChildProcess[] = [];

  private constructor() {}

  /** Builds the node and starts the pod servers; resolves once every server listens. */
  static async create(): Promise<PodNetwork> {
    await removeLeftovers();
    const net = new PodNetwork();
    await sh('modprobe', 'br_netfilter');
    await sh('sysctl', '-q', '-w', 'net.bridge.bridge-nf-call-iptables=1', 'net.bridge.bridge-nf-call-ip6tables=1', 'net.ipv6.conf.all.forwarding=1');
    await ipBatch([
      'link add node0 type dummy',
      `addr add ${NODE_IP}/24 dev node0`,
      `addr add ${NODE_IP6}/64 dev node0 nodad`,
      'link set node0 up',
      'link add cni0 type bridge',
      `addr add ${BRIDGE_IP}/24 dev cni0`,
      `addr add ${BRIDGE_IP6}/64 dev cni0 nodad`,
      'link set cni0 up',
      ...PODS.flatMap((p) => [
        `netns add ${p.name}`,
        `link add v-${p.name} type veth peer name eth0 netns ${p.name}`,
        `link set v-${p.name} master cni0 up`,
        `link set v-${p.name} type bridge_slave hairpin on`,
      ]),
      'netns add ext',
      'link add v-ext type veth peer name eth0 netns ext',
      `addr add ${EXT_GW}/24 dev v-ext`,
      `addr add ${EXT_GW6}/64 dev v-ext nodad`,
      'link set v-ext up',
    ]);
    // nodad: the addresses are usable at once (no tentative state while DAD runs).
    const inside = (ip: string, gw: string, ip6: string, gw6: string) => [
      `addr add ${ip}/24 dev eth0`,
      `addr add ${ip6}/64 dev eth0 nodad`,
      'link set eth0 up',
      'link set lo up',
      `route add default via ${gw}`,
      `route add ::/0 via ${gw6}`,
    ];
    await Promise.all([
      ...PODS.map((p) => ipBatch(inside(p.ip, BRIDGE_IP, p.ip6, BRIDGE_IP6), { netns: p.name })),
      ipBatch(inside(EXT_IP, EXT_GW, EXT_IP6, EXT_GW6), { netns: 'ext' }),
    ]);
    try {
      await Promise.all(PODS.map((p) => net.startServer(p)));
    } catch (e) {
      await net.destroy();
      throw e;
    }
    return net;
  }

  private startServer(p: Pod): Promise<void> {
    const child = spawn('ip', ['netns', 'exec', p.name, process.execPath, join(HELPERS, 'pod-server.js'), p.name], { stdio: ['ignore', 'pipe', 'inherit'] });
    this.servers.push(child);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${p.name}: server not ready within 60 s`)), 60_000);
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${p.name}: server exited (${signal ?? code})`));
      });
      createInterface({ input: child.stdout! }).once('line', (line) => {
        clearTimeout(timer);
        if (line === 'ready') resolve();
        else reject(new Error(`${p.name}: unexpected first line ${JSON.stringify(line)}`));
      });
    });
  }

  /** Stops the servers and removes the namespaces and links. */
  async destroy(): Promise<void> {
    await Promise.all(
      this.servers.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.kill('SIGTERM');
          }),
      ),
    );
    await removeLeftovers();
  }
}

/** Runs the traffic client inside a namespace: n HTTP requests, each on a new connection. */
export async function httpFrom(ns: string, url: string, n: number): Promise<Answer[]> {
  return JSON.parse(await sh('ip', 'netns', 'exec', ns, process.execPath, join(HELPERS, 'client.js'), 'http', url, String(n))) as Answer[];
}

/** One HTTP GET from inside a namespace: its status and body. */
export async function statusFrom(ns: string, url: string): Promise<{ status: number; body: string }> {
  return JSON.parse(await sh('ip', 'netns', 'exec', ns, process.execPath, join(HELPERS, 'client.js'), 'status', url)) as { status: number; body: string };
}

/** Tries one TCP connection from inside a namespace: 'connected' or the error code. A caller
 *  expecting a drop passes a short `timeoutMs` (the default only bounds a hang). */
export async function connectFrom(ns: string, host: string, port: number, timeoutMs?: number): Promise<string> {
  return JSON.parse(await sh('ip', 'netns', 'exec', ns, process.execPath, join(HELPERS, 'client.js'), 'connect', host, String(port), ...(timeoutMs === undefined ? [] : [String(timeoutMs)]))) as string;
}

/**
 * The hooks every e2e suite shares, in the describe block that calls it: before its tests a
 * clean data plane and a fresh pod network, then `setup`; after them the network torn down, the
 * data plane clean again, then `teardown`.
 */
export function withPodNetwork(hooks: { setup?: () => Promise<void>; teardown?: () => Promise<void> } = {}): void {
  let net: PodNetwork | undefined;
  before(async () => {
    await resetDataPlane();
    net = await PodNetwork.create();
    await hooks.setup?.();
  });
  after(async () => {
    await net?.destroy();
    await resetDataPlane();
    await hooks.teardown?.();
  });
}
