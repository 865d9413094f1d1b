// The README's first command (`npm run demo`) runs scripts/demo-guest.sh in the nftables data
// plane on the machine's own kernel (scripts/demo.sh). This runs the same script in this
// suite's private namespace and checks what the README shows: the sync's summary, every pod
// reached through the ClusterIP and the NodePort, masquerade seen at the pods, ClientIP
// affinity pinning one pod, a second sync planning nothing; then reads the table back with nft.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { nftJsonElements } from '../helpers/nft-shards.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const PODS = ['pod-a', 'pod-b', 'pod-c'];

function cleanup(): void {
  for (const ns of PODS) {
    for (const pid of spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).stdout.split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // already gone
      }
    }
    spawnSync('ip', ['netns', 'del', ns]);
  }
  for (const l of ['node0', 'cni0']) spawnSync('ip', ['link', 'del', l]);
  spawnSync('nft', ['flush', 'ruleset']);
}

let demo: { status: number | null; stdout: string; stderr: string };

before(() => {
  cleanup();
  demo = spawnSync('bash', [join(ROOT, 'scripts', 'demo-guest.sh'), 'nftables'], { encoding: 'utf8', timeout: 120_000 });
});
after(cleanup);

test('the nftables demo runs to the end and shows what the README says', () => {
  assert.equal(demo.status, 0, `${demo.stdout}\n${demo.stderr}`);
  assert.match(demo.stdout, /^synced 3 services \(nftables data plane\): nft \{"add-table":2,.+\} \(\d+(\.\d+)? ms\)$/m);
  for (const url of ['http://10.96.0.10/', 'http://192.168.50.10:30080/']) {
    const line = demo.stdout.split('\n').find((l) => l.startsWith(`${url}:`)) ?? '';
    assert.match(line, /: pod-a=\d+ pod-b=\d+ pod-c=\d+ {3}\(pods saw clients: 10\.244\.1\.1\)$/, demo.stdout);
    assert.equal([...line.matchAll(/=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0), 30);
  }
  assert.match(demo.stdout, /^http:\/\/10\.96\.0\.30\/: pod-[abc]=30 {3}\(pods saw clients: 10\.244\.1\.1\)$/m);
  assert.match(demo.stdout, /^"ops": \[\]$/m);
  assert.match(demo.stdout, /^# nft list map ip ipvsync endpoints-3-\d+ /m, 'the endpoint map of the first service\'s shard');
  assert.match(demo.stdout, /10\.96\.0\.10 \. tcp \. 80 \. 0x00000000 : 10\.244\.1\.\d \. 8080/);
  assert.doesNotMatch(demo.stderr, /warning/);
});

test('nft reads back the table the demo programmed', () => {
  const t = JSON.parse(execFileSync('nft', ['-j', 'list', 'table', 'ip', 'ipvsync'], { encoding: 'utf8' })) as { nftables: Array<Record<string, any>> };
  assert.equal(nftJsonElements(t, 'endpoints-3'), 4 * 3, 'three cluster IPs and the NodePort, three endpoints each');
  const affinity = t.nftables.find((o) => o.map?.name === 'affinity')!.map;
  assert.equal(affinity.elem.length, 1, 'the one client of the affinity service, remembered');
});
