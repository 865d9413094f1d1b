// End to end on a real kernel: endpoints going away. A removed TCP endpoint drains (weight 0:
// its open connection keeps working, new connections avoid it) and is deleted once its
// connections are gone; a removed UDP endpoint is deleted at once and its conntrack flows are
// flushed, so a client that keeps its socket moves to a live endpoint.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { conntrackList, destsOf, ipvsadmList, ipvsyncOk, sh, sysctl, waitFor } from './helpers/kernel.js';
import { fixture, manifestDir, syncArgs, withoutEndpoint, writeManifests, type Doc } from './helpers/manifests.js';
import { BRIDGE_IP, withPodNetwork } from './helpers/podnet.js';
import { LineConn, tally, UdpClient, udpMany, type Answer } from './helpers/traffic.js';

const skip = process.env.IPVSYNC_VM !== 'qemu' ? 'needs IPVS and nftables: run in qemu (node dist/test/vm/cli.js --kernel qemu --suite e2e)' : false;
const POD_A = '10.244.1.2';

describe('endpoint removal end to end', { skip }, () => {
  let dir: string;
  /** The manifests as last written: each test removes an endpoint from them. */
  let docs: Doc[];

  withPodNetwork({
    setup: async () => {
      dir = await manifestDir('endpoints');
      docs = await fixture('endpoints.yaml');
      await writeManifests(dir, 'services.yaml', docs);
      await ipvsyncOk(...syncArgs(dir));
    },
  });

  test('a removed TCP endpoint drains: weight 0, its open connection still works, new connections avoid it, deleted once closed', async (t) => {
    const KEY = 'TCP 10.96.0.40:9000';
    assert.deepEqual(await destsOf(KEY), ['10.244.1.2:9000', '10.244.1.3:9000', '10.244.1.4:9000']);
    // Open connections until one reaches pod-a (round robin: at most three); keep that one.
    let toA: LineConn | undefined;
    for (let i = 0; i < 3 && !toA; i++) {
      const c = await LineConn.open('10.96.0.40', 9000);
      const a = await c.ask();
      if (a.pod === 'pod-a') toA = c;
      else c.end();
    }
    assert.ok(toA, 'no connection reached pod-a in three tries');
    const conn = toA;
    t.after(() => conn.reset());
    const before = (await ipvsadmList()).get(KEY)!.dests.find((d) => d.address === `${POD_A}:9000`)!;
    assert.equal(before.active, 1);

    // pod-a's endpoint goes away.
    docs = withoutEndpoint(docs, 'lines', POD_A);
    await writeManifests(dir, 'services.yaml', docs);
    await ipvsyncOk(...syncArgs(dir));
    const draining = (await ipvsadmList()).get(KEY)!.dests;
    assert.deepEqual(
      draining.map((d) => [d.address, d.weight]).sort(),
      [[`${POD_A}:9000`, 0], ['10.244.1.3:9000', 1], ['10.244.1.4:9000', 1]],
    );
    assert.equal(draining.find((d) => d.address === `${POD_A}:9000`)!.active, 1);

    // The open connection still reaches pod-a (several round trips), new ones never do.
    for (let i = 0; i < 3; i++) assert.deepEqual(await conn.ask(), { pod: 'pod-a', client: BRIDGE_IP });
    const fresh: Answer[] = [];
    for (let i = 0; i < 6; i++) {
      const c = await LineConn.open('10.96.0.40', 9000);
      fresh.push(await c.ask());
      c.end();
    }
    assert.deepEqual(tally(fresh), { 'pod-b': 3, 'pod-c': 3 });

    // Another sync while the connection is open keeps the destination at weight 0 (a fresh
    // process has no drain start time: the kernel's connection counts decide).
    await ipvsyncOk(...syncArgs(dir));
    assert.deepEqual((await ipvsadmList()).get(KEY)!.dests.find((d) => d.address === `${POD_A}:9000`)?.weight, 0);
    assert.deepEqual(await conn.ask(), { pod: 'pod-a', client: BRIDGE_IP });

    // Closed with a RST, IPVS keeps the entry in CLOSE for ~10 s; syncs then delete the
    // destination (bounded polling).
    conn.reset();
    const dests = await waitFor(
      'pod-a removed from 10.96.0.40:9000',
      async () => {
        await ipvsyncOk(...syncArgs(dir));
        const d = await destsOf(KEY);
        return d && !d.includes(`${POD_A}:9000`) ? d : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 2_000, last: async () => JSON.stringify((await ipvsadmList()).get(KEY)) },
    );
    assert.deepEqual(dests, ['10.244.1.3:9000', '10.244.1.4:9000']);
  });

  test('a removed UDP endpoint is deleted at once, ipvsync flushes its conntrack flows, a client keeping its socket moves on', async (t) => {
    const KEY = 'UDP 10.96.0.50:53';
    assert.deepEqual(await destsOf(KEY), ['10.244.1.2:5300', '10.244.1.3:5300']);
    // Fresh sockets alternate between the two pods.
    assert.deepEqual(tally(await udpMany('10.96.0.50', 53, 4)), { 'pod-a': 2, 'pod-b': 2 });
    // A client that keeps its socket (one source port, one flow) on pod-a.
    let sticky: UdpClient | undefined;
    for (let i = 0; i < 2 && !sticky; i++) {
      const c = await UdpClient.open();
      if ((await c.ask('10.96.0.50', 53)).pod === 'pod-a') sticky = c;
      else c.close();
    }
    assert.ok(sticky, 'no UDP socket reached pod-a in two tries');
    const client = sticky;
    t.after(() => client.close());
    assert.equal((await client.ask('10.96.0.50', 53)).pod, 'pod-a');
    const flowsBefore = await conntrackList('-p', 'udp', '--reply-src', POD_A);
    assert.ok(flowsBefore.some((l) => l.includes(`sport=${client.localPort} `)), `no flow of the kept socket:\n${flowsBefore.join('\n')}`);

    // With expire_nodest_conn=1 (kube-proxy's setting) the kernel (5.9+) expires the IPVS
    // connections of a deleted destination from a work queue and drops their conntrack entries
    // itself, racing ipvsync's flush. Turned off here, only ipvsync's flush can remove them.
    await sh('sysctl', '-q', '-w', 'net.ipv4.vs.expire_nodest_conn=0');
    t.after(() => sh('sysctl', '-q', '-w', 'net.ipv4.vs.expire_nodest_conn=1'));
    docs = withoutEndpoint(docs, 'echo', POD_A);
    await writeManifests(dir, 'services.yaml', docs);
    const out = JSON.parse(await ipvsyncOk(...syncArgs(dir, '--json', '--no-sysctl'))) as { report: { flowsFlushed: number; ipvs: { ops: Record<string, number> } } };
    // UDP has nothing to drain: deleted in this very sync, its flows with it.
    assert.deepEqual(await destsOf(KEY), ['10.244.1.3:5300']);
    assert.deepEqual(out.report.ipvs.ops, { deleteDestination: 1 });
    assert.ok(out.report.flowsFlushed >= 1, `flowsFlushed: ${JSON.stringify(out.report)}`);
    assert.deepEqual(await conntrackList('-p', 'udp', '--reply-src', POD_A), []);
    // pod-b's flows stay.
    assert.ok((await conntrackList('-p', 'udp', '--reply-src', '10.244.1.3')).length >= 1);
    // New sockets only reach pod-b.
    assert.deepEqual(tally(await udpMany('10.96.0.50', 53, 3)), { 'pod-b': 3 });

    // The kept socket: its IPVS connection still names the deleted destination; with
    // expire_nodest_conn=1 (set again by a normal sync) IPVS drops that datagram, expires the
    // connection and schedules the next one to a live endpoint (bounded retries).
    await ipvsyncOk(...syncArgs(dir));
    assert.equal(await sysctl('net.ipv4.vs.expire_nodest_conn'), '1');
    // Asked until answered: the first datagram may be dropped (no answer ever comes), so each
    // ask waits 2 s; a slow answer is not a failure either, only no answer for 120 s is.
    let moved: Answer | undefined;
    for (const deadline = Date.now() + 120_000; !moved && Date.now() < deadline; ) moved = await client.ask('10.96.0.50', 53, 2000).catch(() => undefined);
    assert.equal(moved?.pod, 'pod-b');
    assert.deepEqual(await conntrackList('-p', 'udp', '--reply-src', POD_A), []);
  });
});
