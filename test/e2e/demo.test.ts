// The README's first command (`npm run demo`) runs scripts/demo-guest.sh in a VM: the built-in
// example end to end. This runs the same script, in a network namespace of its own, and checks
// what the README shows: the sync's summary, round robin over the three pods through the
// ClusterIP and the NodePort, ClientIP affinity pinning one pod, masquerade seen at the pods,
// and a second sync planning nothing. The namespace's IPVS table, VIPs and nftables tables are
// then read back with ipvsadm, ip and nft.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { ipvsadmList, linkAddresses, nftTables, ROOT, run, sh } from './helpers/kernel.js';

const skip = process.env.IPVSYNC_VM !== 'qemu' ? 'the demo needs IPVS and nftables: run in qemu (node dist/test/vm/cli.js --kernel qemu --suite e2e)' : false;
const NS = 'ipvsync-demo';
const PODS = ['pod-a', 'pod-b', 'pod-c'];

/** Stops a namespace's processes (the pods' servers) and deletes it; quiet when it is not there. */
async function dropNetns(ns: string): Promise<void> {
  const pids = (await run('ip', ['netns', 'pids', ns])).stdout.split(/\s+/).filter(Boolean);
  for (const pid of pids) {
    try {
      process.kill(Number(pid), 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await run('ip', ['netns', 'del', ns]);
}

async function cleanup(): Promise<void> {
  for (const ns of [...PODS, NS]) await dropNetns(ns);
}

let demo: { code: number; stdout: string; stderr: string };

before(async () => {
  if (skip) return;
  await cleanup(); // the pods' names are the other e2e files' too
  await sh('ip', 'netns', 'add', NS);
  await sh('ip', '-n', NS, 'link', 'set', 'lo', 'up');
  demo = await run('ip', ['netns', 'exec', NS, 'bash', join(ROOT, 'scripts', 'demo-guest.sh')], { timeoutMs: 300_000 });
});

after(async () => {
  if (!skip) await cleanup();
});

test('the demo script runs to the end', { skip }, () => {
  assert.equal(demo.code, 0, `scripts/demo-guest.sh exited ${demo.code}\n${demo.stdout}\n${demo.stderr}`);
});

test('the sync programs 4 virtual services with 12 destinations and 3 VIPs, and the glue', { skip }, () => {
  assert.match(demo.stdout, /^synced 4 virtual services, 3 VIPs: addresses \{"addLink":1,"setLink":1,"addAddr":3\}, ipsets \{"create":1,"add":1\}, nft \{.+\}, ipvs \{"addService":4,"addDestination":12\} \(\d+(\.\d+)? ms\)$/m);
});

test('round robin over the three pods through the ClusterIP and the NodePort, masqueraded at the bridge address', { skip }, () => {
  for (const url of ['http://10.96.0.10/', 'http://192.168.50.10:30080/']) {
    const line = demo.stdout.split('\n').find((l) => l.startsWith(`${url}:`));
    assert.equal(line, `${url}: pod-a=10 pod-b=10 pod-c=10   (pods saw clients: 10.244.1.1)`, demo.stdout);
  }
});

test('ClientIP affinity sends all 30 requests to one pod', { skip }, () => {
  assert.match(demo.stdout, /^http:\/\/10\.96\.0\.30\/: pod-[abc]=30   \(pods saw clients: 10\.244\.1\.1\)$/m);
});

test('a second sync of the same manifests plans no write', { skip }, () => {
  assert.match(demo.stdout, /^"ops": \[\]$/m);
});

test('ipvsadm, ip and nft read back what the demo programmed', { skip }, async () => {
  const ipvs = await ipvsadmList(NS);
  const table = () => JSON.stringify([...ipvs.values()], null, 1);
  assert.equal(ipvs.size, 4, table());
  assert.equal([...ipvs.values()].reduce((n, s) => n + s.dests.length, 0), 12, table());
  assert.equal(ipvs.get('TCP 10.96.0.30:80')?.persistent, 600, `the affinity service persistent 600 s:\n${table()}`);
  assert.ok(ipvs.has('TCP 192.168.50.10:30080'), `the NodePort on the node address:\n${table()}`);
  assert.deepEqual(await linkAddresses('kube-ipvs0', NS), ['10.96.0.10/32', '10.96.0.20/32', '10.96.0.30/32']);
  assert.ok((await nftTables(NS)).includes('ip ipvsync'));
});
