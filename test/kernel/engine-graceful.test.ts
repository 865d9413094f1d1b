// Graceful termination with real connections through IPVS, inside the test VM: three "pods"
// (network namespaces joined to the node by veth pairs) run a small node TCP + UDP server that
// answers with its own name; the engine binds a VIP on kube-ipvs0 and points an IPVS service at
// the pods (masq). A TCP connection from the node to the VIP stays open while its pod leaves the
// desired state: the destination goes to weight 0 and stays, the connection keeps working, new
// connections go to the other pods, and the destination is deleted only after the connection is
// closed (RST: IPVS's CLOSE state, ~10 s) — or, with a short drainTimeoutMs, when the timeout
// passes. A UDP destination is deleted at once.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as net from 'node:net';
import * as dgram from 'node:dgram';
import { Engine, type DesiredState } from '../../src/engine/engine.js';
import type { DesiredService } from '../../src/engine/ipvs-model.js';
import { Ipvs, type Destination } from '../../src/kernel/ipvs.js';
import { Links } from '../../src/kernel/links.js';
import { Conntrack } from '../../src/kernel/conntrack.js';

const run = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const quiet = (cmd: string, ...args: string[]) => spawnSync(cmd, args, { encoding: 'utf8' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Bounds on waits for an answer or a kernel timer: only against a hang, generous for qemu's TCG
 *  (~10x slower, and varying); 10 s there made a slow answer a failure (issue #58). */
const HANG_MS = 120_000;

const LINK = 'kube-ipvs0';
const VIP = '10.96.100.1';
const PODS = ['pod-a', 'pod-b', 'pod-c'] as const;
type Pod = (typeof PODS)[number];
const podIp = (p: Pod) => `10.200.${PODS.indexOf(p) + 1}.2`;
const servers: ChildProcess[] = [];
const CT_RULE = (verb: string) => [verb, 'OUTPUT', '-m', 'conntrack', '--ctstate', 'NEW', '-j', 'ACCEPT'];

const SERVER = `
  const net = require('node:net'); const dgram = require('node:dgram');
  const name = process.argv[1];
  net.createServer((c) => { c.on('data', (d) => c.write(name + ':' + d)); c.on('error', () => {}); }).listen(8080, '0.0.0.0');
  const u = dgram.createSocket('udp4'); u.on('message', (m, r) => u.send(name + ':' + m, r.port, r.address)); u.bind(5353, '0.0.0.0');
  process.stdout.write('ready\\n');`;

before(async () => {
  quiet('ipvsadm', '-C');
  quiet('ip', 'link', 'del', LINK);
  run('sysctl', '-qw', 'net.ipv4.ip_forward=1');
  run('sysctl', '-qw', 'net.ipv4.vs.conntrack=1');
  // conntrack only tracks a namespace once something uses it (kube-proxy's iptables rules do);
  // this rule makes the node's flows tracked, so IPVS's masq flows show in conntrack -L.
  run('iptables-legacy', ...CT_RULE('-A'));
  for (const [i, pod] of PODS.entries()) {
    quiet('ip', 'netns', 'del', pod);
    run('ip', 'netns', 'add', pod);
    run('ip', 'link', 'add', `veth-${i}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', pod);
    run('ip', 'addr', 'add', `10.200.${i + 1}.1/24`, 'dev', `veth-${i}`);
    run('ip', 'link', 'set', `veth-${i}`, 'up');
    run('ip', 'netns', 'exec', pod, 'ip', 'link', 'set', 'lo', 'up');
    run('ip', 'netns', 'exec', pod, 'ip', 'addr', 'add', `${podIp(pod)}/24`, 'dev', 'eth0');
    run('ip', 'netns', 'exec', pod, 'ip', 'link', 'set', 'eth0', 'up');
    run('ip', 'netns', 'exec', pod, 'ip', 'route', 'add', 'default', 'via', `10.200.${i + 1}.1`);
    const s = spawn('ip', ['netns', 'exec', pod, process.execPath, '-e', SERVER, pod], { stdio: ['ignore', 'pipe', 'inherit'] });
    servers.push(s);
    await new Promise<void>((ok, bad) => {
      const t = setTimeout(() => bad(new Error(`${pod} server did not start`)), HANG_MS);
      s.stdout!.once('data', () => {
        clearTimeout(t);
        ok();
      });
    });
  }
});

after(() => {
  for (const s of servers) if (s.exitCode === null) s.kill('SIGKILL');
  quiet('ipvsadm', '-C');
  quiet('ip', 'link', 'del', LINK);
  quiet('iptables-legacy', ...CT_RULE('-D'));
  for (const pod of PODS) quiet('ip', 'netns', 'del', pod);
});

function state(pods: readonly Pod[], proto: 'tcp' | 'udp' = 'tcp'): DesiredState {
  const svc: DesiredService = {
    protocol: proto,
    address: VIP,
    port: proto === 'tcp' ? 80 : 53,
    scheduler: 'rr',
    destinations: pods.map((p) => ({ address: podIp(p), port: proto === 'tcp' ? 8080 : 5353, forward: 'masq' as const, weight: 1 })),
  };
  return { services: [svc], vips: { link: LINK, addresses: [VIP] } };
}

/** An open TCP connection to the VIP with a line-at-a-time exchange. */
class Conn {
  private buf = '';
  private waiters: Array<() => void> = [];
  constructor(readonly sock: net.Socket) {
    sock.on('data', (d) => {
      this.buf += d.toString();
      for (const w of this.waiters.splice(0)) w();
    });
    sock.on('error', () => {});
  }
  static open(): Promise<Conn> {
    return new Promise((ok, bad) => {
      const s = net.connect({ host: VIP, port: 80 });
      const t = setTimeout(() => {
        s.destroy();
        bad(new Error('connect to the VIP timed out'));
      }, HANG_MS);
      s.once('connect', () => {
        clearTimeout(t);
        ok(new Conn(s));
      });
      s.once('error', (e) => {
        clearTimeout(t);
        bad(e);
      });
    });
  }
  /** Sends `msg`, resolves with the pod's answer ("pod-x:msg"). */
  async ask(msg: string): Promise<string> {
    this.buf = '';
    this.sock.write(msg);
    const end = Date.now() + HANG_MS;
    while (!this.buf.endsWith(msg)) {
      if (Date.now() > end) throw new Error(`no answer to ${msg} (got ${JSON.stringify(this.buf)})`);
      await new Promise<void>((ok) => {
        this.waiters.push(ok);
        setTimeout(ok, 200);
      });
    }
    return this.buf;
  }
}

async function oneShot(msg: string): Promise<Pod> {
  const c = await Conn.open();
  const answer = await c.ask(msg);
  c.sock.end();
  return answer.split(':')[0] as Pod;
}

async function dest(ipvs: Ipvs, pod: Pod, proto: 'tcp' | 'udp' = 'tcp'): Promise<Destination | undefined> {
  const s = await ipvs.service({ protocol: proto, address: VIP, port: proto === 'tcp' ? 80 : 53 }, { withDestinations: true });
  return s?.destinations?.find((d) => d.address === podIp(pod));
}

/** The service's destinations as ipvsadm lists them: "10.200.1.2:8080 w0". */
function ipvsadmDests(proto: 'tcp' | 'udp' = 'tcp'): string[] {
  return run('ipvsadm', '-Sn')
    .split('\n')
    .filter((l) => l.startsWith(`-a ${proto === 'tcp' ? '-t' : '-u'} ${VIP}:`))
    .map((l) => `${/-r (\S+)/.exec(l)![1]} w${/-w (\d+)/.exec(l)![1]}`)
    .sort();
}

test('TCP: the open connection keeps working while its pod drains at weight 0; new connections go elsewhere; deleted only after the connection closes', async (t) => {
  quiet('ipvsadm', '-C');
  const ipvs = await Ipvs.open();
  const e = new Engine({ ipvs, links: await Links.open() }, { managedCidrs: ['10.96.0.0/16'] });
  assert.deepEqual((await e.sync(state(PODS))).errors, []);
  const c = await Conn.open();
  const first = await c.ask('hello');
  const gone = first.split(':')[0] as Pod;
  assert.ok(PODS.includes(gone), first);
  const rest = PODS.filter((p) => p !== gone);

  const rep = await e.sync(state(rest));
  assert.deepEqual(rep.errors, []);
  assert.deepEqual(rep.ipvs.ops, { updateDestination: 1 }, 'one SET_DEST: weight 0');
  assert.equal(rep.draining, 1, 'the report says one destination is draining');
  assert.deepEqual(ipvsadmDests(), [...rest.map((p) => `${podIp(p)}:8080 w1`), `${podIp(gone)}:8080 w0`].sort(), 'ipvsadm -Sn: weight 0, still there');
  assert.ok((await dest(ipvs, gone))!.activeConns >= 1, 'the kernel counts the open connection');

  assert.equal(await c.ask('still-there'), `${gone}:still-there`, 'the open connection keeps working');
  const fresh: Pod[] = [];
  for (let i = 0; i < 6; i++) fresh.push(await oneShot(`new-${i}`));
  assert.ok(fresh.every((p) => rest.includes(p)), `new connections avoid the draining pod: ${fresh.join(' ')}`);
  assert.deepEqual(new Set(fresh), new Set(rest), 'and reach both remaining pods');

  // Syncing again while the connection is open changes nothing.
  for (let i = 0; i < 3; i++) {
    const r = await e.sync(state(rest));
    assert.equal(r.ipvs.writes, 0);
    assert.equal(r.draining, 1);
    assert.equal((await dest(ipvs, gone))?.weight, 0, 'still there at weight 0 while the connection is open');
  }
  assert.equal(await c.ask('after-resyncs'), `${gone}:after-resyncs`);

  // Close with a RST: IPVS moves the entry to CLOSE (10 s) instead of TIME_WAIT (2 min).
  const closedAt = Date.now();
  c.sock.resetAndDestroy();
  let removedAt = 0;
  let syncs = 0;
  // until the sync deletes it, after the kernel's CLOSE timer (10 s) — the deadline only bounds
  // a hang (40 rounds were about that under qemu TCG)
  for (const deadline = Date.now() + HANG_MS; !removedAt && Date.now() < deadline; ) {
    await sleep(1000);
    // read before the sync: a count only falls once the connection is closed, so a count of 0
    // here is 0 when the sync reads it too (a read after the sync can see the entry expire
    // after the sync counted it)
    const before = await dest(ipvs, gone);
    const counted = before!.activeConns + before!.inactiveConns > 0;
    const r = await e.sync(state(rest));
    syncs++;
    assert.deepEqual(r.errors, []);
    if (r.ipvs.ops.deleteDestination === 1) {
      removedAt = Date.now();
      assert.equal(r.draining, 0);
    } else {
      assert.ok(counted, 'kept only while the kernel still counts a connection');
      assert.equal((await dest(ipvs, gone))?.weight, 0, 'waits at weight 0');
    }
  }
  assert.ok(removedAt > closedAt, `removed ${removedAt - closedAt} ms after the connection closed (${syncs} syncs)`);
  t.diagnostic(`destination removed ${removedAt - closedAt} ms after the RST, at sync ${syncs}`);
  assert.deepEqual(ipvsadmDests(), rest.map((p) => `${podIp(p)}:8080 w1`).sort());
  assert.equal((await e.sync(state(rest))).ipvs.writes, 0);
});

test('TCP: with a short drainTimeoutMs a destination whose connection stays open is deleted when the timeout passes', async (t) => {
  quiet('ipvsadm', '-C');
  const ipvs = await Ipvs.open();
  const drainTimeoutMs = 3000;
  const e = new Engine({ ipvs, links: await Links.open() }, { managedCidrs: ['10.96.0.0/16'], drainTimeoutMs });
  assert.deepEqual((await e.sync(state(PODS))).errors, []);
  const c = await Conn.open();
  const gone = (await c.ask('hi')).split(':')[0] as Pod;
  const rest = PODS.filter((p) => p !== gone);
  const drainStart = Date.now();
  const rep = await e.sync(state(rest));
  assert.equal(rep.draining, 1);
  let removedAt = 0;
  // until the sync deletes it; the deadline only bounds a hang. removedAt - drainStart >=
  // drainTimeoutMs holds however slow the machine: drainStart is read before the sync that
  // starts the drain, on the engine's clock
  for (const deadline = Date.now() + HANG_MS; !removedAt && Date.now() < deadline; ) {
    await sleep(500);
    const before = await dest(ipvs, gone);
    const r = await e.sync(state(rest));
    if (r.ipvs.ops.deleteDestination === 1) {
      removedAt = Date.now();
      assert.ok(before!.activeConns >= 1, 'the connection was still open when it was deleted');
    } else assert.equal(before?.weight, 0);
  }
  assert.ok(removedAt - drainStart >= drainTimeoutMs, `deleted ${removedAt - drainStart} ms after draining started`);
  t.diagnostic(`deleted ${removedAt - drainStart} ms after draining started (timeout ${drainTimeoutMs} ms), connection still open`);
  assert.equal(await dest(ipvs, gone), undefined);
  c.sock.resetAndDestroy();
});

test('UDP: a destination with a live flow is deleted at once (no drain) and its flows flushed', async (t) => {
  quiet('ipvsadm', '-C');
  const ipvs = await Ipvs.open();
  const e = new Engine({ ipvs, links: await Links.open(), conntrack: await Conntrack.open() }, { managedCidrs: ['10.96.0.0/16'] });
  assert.deepEqual((await e.sync(state(PODS, 'udp'))).errors, []);
  const sock = dgram.createSocket('udp4');
  t.after(() => sock.close());
  await new Promise<void>((ok) => sock.bind(0, ok));
  const answer = await new Promise<string>((ok, bad) => {
    const t = setTimeout(() => bad(new Error('no UDP answer')), HANG_MS);
    sock.once('message', (m) => {
      clearTimeout(t);
      ok(m.toString());
    });
    sock.send('ping', 53, VIP);
  });
  const gone = answer.split(':')[0] as Pod;
  assert.ok(PODS.includes(gone), answer);
  const d = (await dest(ipvs, gone, 'udp'))!;
  assert.ok(d.activeConns + d.inactiveConns > 0, 'the kernel counts the UDP flow');
  const flowsBefore = quiet('conntrack', '-L', '-p', 'udp', '--reply-src', podIp(gone)).stdout;
  assert.ok(flowsBefore.includes(`src=${podIp(gone)}`), `conntrack -L: the flow through IPVS is tracked\n${flowsBefore}`);
  const rest = PODS.filter((p) => p !== gone);
  const rep = await e.sync(state(rest, 'udp'));
  assert.deepEqual(rep.errors, []);
  assert.deepEqual(rep.ipvs.ops, { deleteDestination: 1 }, 'deleted, not set to weight 0');
  assert.equal(rep.draining, 0);
  assert.ok(rep.flowsFlushed >= 1, `flows flushed: ${rep.flowsFlushed}`);
  assert.deepEqual(ipvsadmDests('udp'), rest.map((p) => `${podIp(p)}:5353 w1`).sort());
  const flows = quiet('conntrack', '-L', '-p', 'udp', '--reply-src', podIp(gone)).stdout;
  assert.ok(!flows.includes(`src=${podIp(gone)}`), `conntrack -L: no flow of the removed endpoint left\n${flows}`);
});
