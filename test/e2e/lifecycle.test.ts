// End to end on a real kernel: what ipvsync owns and what it leaves alone. Foreign IPVS
// services, nftables tables and links survive `ipvsync sync` and `ipvsync cleanup`; cleanup
// removes every virtual server, VIP and glue table ipvsync made. `ipvsync proxy --manifests DIR`
// follows the folder and leaves the data plane in place when stopped.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { destsOf, ipvsadmKeys, ipvsadmList, ipvsyncOk, linkAddresses, linkExists, nftTables, resetDataPlane, run, sh, sysctl, waitFor } from './helpers/kernel.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { fixture, manifestDir, removeManifests, syncArgs, writeManifests, type Doc } from './helpers/manifests.js';
import { BRIDGE_IP, EXT_GW, NODE_IP, NODE_NAME, PODS, withPodNetwork } from './helpers/podnet.js';
import { startProxy } from './helpers/proxy.js';
import { connectOutcome, httpMany, tally } from './helpers/traffic.js';

const skip = process.env.IPVSYNC_VM !== 'qemu' ? 'needs IPVS and nftables: run in qemu (node dist/test/vm/cli.js --kernel qemu --suite e2e)' : false;
const POD_DESTS = PODS.map((p) => `${p.ip}:8080`).sort();
const FOREIGN = ['FWM 77', 'TCP 192.168.70.1:80', 'UDP 192.168.70.1:53'];

/** Where the daemon reads its Services and EndpointSlices: a manifests folder, or a fake API
 *  server holding the same documents (a file's documents created, and deleted with it). */
interface ObjectSource {
  args: string[];
  add(file: string, docs: Doc[]): Promise<void>;
  remove(file: string): Promise<void>;
  close(): Promise<void>;
}

async function objectSource(from: 'manifests' | 'api', tag: string): Promise<ObjectSource> {
  if (from === 'manifests') {
    const dir = await manifestDir(tag);
    return {
      args: ['--manifests', dir],
      add: async (file, docs) => void (await writeManifests(dir, file, docs)),
      remove: (file) => removeManifests(dir, file),
      close: async () => undefined,
    };
  }
  const api = await FakeApiServer.start();
  api.create('nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE_NAME } });
  const resource = (d: Doc) => (d.kind === 'Service' ? 'services' : d.kind === 'EndpointSlice' ? 'endpointslices' : undefined);
  const files = new Map<string, Doc[]>();
  return {
    args: ['--master', api.url],
    add: async (file, docs) => {
      for (const d of docs) api.create(resource(d)!, d);
      files.set(file, docs);
    },
    remove: async (file) => {
      for (const d of files.get(file) ?? []) api.delete(resource(d)!, d.metadata.name, d.metadata.namespace);
      files.delete(file);
    },
    close: () => api.stop(),
  };
}

async function links(): Promise<string[]> {
  const info = JSON.parse(await sh('ip', '-j', 'link', 'show')) as Array<{ ifname: string }>;
  return info.map((l) => l.ifname).sort();
}

describe('ownership and the proxy daemon end to end', { skip }, () => {

  withPodNetwork({
    teardown: async () => {
      await run('nft', ['delete', 'table', 'ip', 'foreign']);
      await run('ip', ['link', 'del', 'foreign0']);
    },
  });

  test('foreign IPVS services, tables, links, and a chain and set in ip ipvsync survive sync; cleanup removes everything ipvsync made', async () => {
    // Someone else's objects: virtual servers on an address that is neither a VIP nor the
    // node's, a fwmark service, an nftables table, a dummy link with a local address.
    await sh('ipvsadm', '-A', '-t', '192.168.70.1:80', '-s', 'wlc');
    await sh('ipvsadm', '-a', '-t', '192.168.70.1:80', '-r', '10.244.1.3:8080', '-m', '-w', '5');
    await sh('ipvsadm', '-A', '-u', '192.168.70.1:53', '-s', 'rr');
    await sh('ipvsadm', '-A', '-f', '77', '-s', 'rr');
    await sh('nft', 'add', 'table', 'ip', 'foreign');
    await sh('nft', 'add', 'chain', 'ip', 'foreign', 'input', '{ type filter hook input priority 10; }');
    await sh('ip', 'link', 'add', 'foreign0', 'type', 'dummy');
    await sh('ip', 'addr', 'add', '192.168.71.1/32', 'dev', 'foreign0');
    const tablesBefore = await nftTables();
    const linksBefore = await links();
    const foreignBefore = (await sh('ipvsadm', '-Ln', '-t', '192.168.70.1:80')).trim();
    // … and a chain and a set of theirs in an `ip ipvsync` that is there before ipvsync
    const planted = await run('nft', ['-f', '-'], { input: 'table ip ipvsync {\n set their-set { type ipv4_addr; elements = { 192.0.2.7 } }\n chain theirs { ip saddr @their-set counter drop; }\n}\n' });
    assert.equal(planted.code, 0, planted.stderr);
    const theirs = async () => (await sh('nft', 'list', 'chain', 'ip', 'ipvsync', 'theirs')) + (await sh('nft', 'list', 'set', 'ip', 'ipvsync', 'their-set'));
    const theirsBefore = await theirs();

    const dir = await manifestDir('lifecycle');
    await writeManifests(dir, 'services.yaml', await fixture('lifecycle.yaml'));
    await ipvsyncOk(...syncArgs(dir));
    const keys = await ipvsadmKeys();
    for (const k of FOREIGN) assert.ok(keys.includes(k), `${k} gone after sync: ${keys.join(', ')}`);
    assert.equal((await sh('ipvsadm', '-Ln', '-t', '192.168.70.1:80')).trim(), foreignBefore);
    // ipvsync's own: the cluster IP and the NodePort on every local address (the foreign
    // link's address is a local address too).
    for (const k of ['TCP 10.96.0.10:80', `TCP ${NODE_IP}:30080`, `TCP ${BRIDGE_IP}:30080`, `TCP ${EXT_GW}:30080`, 'TCP 192.168.71.1:30080']) {
      assert.deepEqual(await destsOf(k), POD_DESTS, k);
    }
    assert.deepEqual(tally(await httpMany('http://10.96.0.10/', 3)), { 'pod-a': 1, 'pod-b': 1, 'pod-c': 1 });
    assert.equal(await theirs(), theirsBefore, 'their chain and set in ip ipvsync after the sync');
    // A second sync leaves the foreign services alone too.
    await ipvsyncOk(...syncArgs(dir));
    assert.equal((await sh('ipvsadm', '-Ln', '-t', '192.168.70.1:80')).trim(), foreignBefore);
    assert.equal(await theirs(), theirsBefore, 'their chain and set after a resync');

    await ipvsyncOk('cleanup');
    assert.deepEqual(await ipvsadmKeys(), FOREIGN);
    assert.equal((await sh('ipvsadm', '-Ln', '-t', '192.168.70.1:80')).trim(), foreignBefore);
    const tablesAfter = await nftTables();
    assert.deepEqual(tablesAfter, tablesBefore.filter((t) => t !== 'ip ipvsync' && t !== 'ip6 ipvsync'));
    assert.ok(tablesAfter.includes('ip foreign'));
    assert.deepEqual(await links(), linksBefore.filter((l) => l !== 'kube-ipvs0'));
    assert.equal(await linkExists('kube-ipvs0'), false);
    assert.deepEqual(await linkAddresses('foreign0'), ['192.168.71.1/32']);
    // Nothing answers on the VIP any more.
    assert.notEqual(await connectOutcome('10.96.0.10', 80, 3000), 'connected'); // a short wait can only confirm a drop
    // A second cleanup finds nothing to remove and still touches nothing foreign.
    assert.match(await ipvsyncOk('cleanup'), /removed 0 virtual services, 0 nftables tables, no link/);
    assert.deepEqual(await ipvsadmKeys(), FOREIGN);
    await sh('ipvsadm', '-C');
  });

  // From a manifests folder and from an API server (the fake one the informer tests use, on
  // 127.0.0.1: the real list/watch protocol), with the proxier on its own thread (the thread
  // reads the folder, or lists and watches the API, itself), each from a clean data plane.
  for (const from of ['manifests', 'api'] as const) {
    test(`proxy ${from === 'api' ? '--master URL' : '--manifests DIR'} programs an added service, removes a deleted one, and leaves the data plane in place on SIGTERM`, async (t) => {
      await resetDataPlane();
      assert.equal(await linkExists('kube-ipvs0'), false);
      const source = await objectSource(from, `proxy-${from}`);
      t.after(() => source.close());
      await source.add('web.yaml', await fixture('lifecycle.yaml'));
      // The proxy logs JSON lines on stderr; anything else there is kept for failure messages.
      const { child, log, stderr, exited } = startProxy(source.args);
      t.after(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      });
      const last = async () => `ipvsadm -Ln:\n${await sh('ipvsadm', '-Ln')}\nproxy log:\n${log.join('\n')}\n${stderr()}`;

      // The folder's service, programmed by the first sync.
      await waitFor('TCP 10.96.0.10:80 programmed', async () => ((await destsOf('TCP 10.96.0.10:80'))?.length === 3 ? true : undefined), { timeoutMs: 60_000, last });
      assert.deepEqual(await destsOf(`TCP ${NODE_IP}:30080`), POD_DESTS);
      assert.ok(log.some((l) => JSON.parse(l).msg === 'proxy started'), log.join('\n'));

      // A service dropped into the folder (created in the API).
      await source.add('added.yaml', await fixture('added-service.yaml'));
      await waitFor('TCP 10.96.0.70:80 programmed', async () => ((await destsOf('TCP 10.96.0.70:80'))?.length === 2 ? true : undefined), { timeoutMs: 120_000, last });
      assert.deepEqual(await destsOf('TCP 10.96.0.70:80'), ['10.244.1.3:8080', '10.244.1.4:8080']);
      assert.ok((await linkAddresses('kube-ipvs0')).includes('10.96.0.70/32'));
      assert.deepEqual(tally(await httpMany('http://10.96.0.70/', 4)), { 'pod-b': 2, 'pod-c': 2 });

      // … and taken out again.
      await source.remove('added.yaml');
      await waitFor('TCP 10.96.0.70:80 removed', async () => ((await ipvsadmList()).has('TCP 10.96.0.70:80') ? undefined : true), { timeoutMs: 120_000, last });
      assert.deepEqual(await linkAddresses('kube-ipvs0'), ['10.96.0.10/32']);
      assert.notEqual(await connectOutcome('10.96.0.70', 80, 3000), 'connected'); // a short wait can only confirm a drop
      assert.deepEqual(await destsOf('TCP 10.96.0.10:80'), POD_DESTS);

      // SIGTERM: a clean exit, and everything stays programmed and working.
      const tables = await nftTables();
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 120_000); // a hang's bound (TCG), not a speed
      const end = await exited;
      clearTimeout(timer);
      assert.deepEqual(end, { code: 0, signal: null }, await last());
      assert.ok(log.some((l) => /the data plane stays in place/.test(JSON.parse(l).msg)), log.join('\n'));
      assert.ok(log.filter((l) => JSON.parse(l).msg === 'sync').every((l) => JSON.parse(l).errors === 0), log.join('\n'));
      assert.deepEqual(await destsOf('TCP 10.96.0.10:80'), POD_DESTS);
      assert.deepEqual(await destsOf(`TCP ${NODE_IP}:30080`), POD_DESTS);
      assert.deepEqual(await linkAddresses('kube-ipvs0'), ['10.96.0.10/32']);
      assert.deepEqual(await nftTables(), tables);
      assert.ok(tables.includes('ip ipvsync'));
      assert.deepEqual(tally(await httpMany('http://10.96.0.10/', 3)), { 'pod-a': 1, 'pod-b': 1, 'pod-c': 1 });
    });
  }

  // A sync the kernel refuses: IPv6 is disabled on the VIP link (as an operator's sysctl would
  // have it), so the IPv6 Service's VIP cannot be bound, every sync. Each failed sync is one
  // `sync failed` line naming the kernel's error, the address and link, what was left
  // unprogrammed and the retry; the IPv4 Service beside it is programmed all the same.
  test('proxy: a sync the kernel refuses is logged as `sync failed` with the error, its object, what is unprogrammed and the retry; the rest is programmed', async (t) => {
    await resetDataPlane();
    await sh('ip', 'link', 'add', 'kube-ipvs0', 'type', 'dummy');
    await sh('sysctl', '-q', '-w', 'net.ipv6.conf.kube-ipvs0.disable_ipv6=1');
    t.after(() => resetDataPlane());
    const source = await objectSource('manifests', 'proxy-refused');
    await source.add('web.yaml', await fixture('lifecycle.yaml'));
    const web6 = (await fixture('cluster-ip.yaml')).filter((d) => d.metadata.name === 'web6' || d.metadata.labels?.['kubernetes.io/service-name'] === 'web6');
    assert.equal(web6.length, 2);
    await source.add('web6.yaml', web6);
    const { child, log, stderr, exited } = startProxy(source.args);
    t.after(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    const output = async () => `proxy log:\n${log.join('\n')}\n${stderr()}`;
    const failed = () => log.map((l) => JSON.parse(l) as Record<string, any>).filter((l) => l.msg === 'sync failed');
    // the first sync and its retry
    await waitFor('two `sync failed` lines', async () => (failed().length >= 2 ? true : undefined), { timeoutMs: 60_000, last: output });
    const [first, retry] = failed();
    assert.equal(first!.level, 'error');
    assert.equal(first!.trigger, 'initial');
    assert.equal(first!.error.code, 'EACCES', await output());
    assert.equal(first!.error.kind, 'kernel');
    // the VIP carries the engine's address protocol (IPVSYNC_ADDRESS_PROTOCOL)
    assert.match(first!.error.op, /^RTM_NEWADDR fd00:96::10\/128 dev kube-ipvs0 proto 249$/);
    assert.equal(first!.object, 'fd00:96::10/128 dev kube-ipvs0 proto 249');
    assert.equal(first!.errors, 1);
    assert.deepEqual(first!.failedWrites, { addresses: 1 });
    assert.ok(first!.appliedWrites.ipvs > 0 && first!.appliedWrites.nft > 0, JSON.stringify(first));
    assert.equal(typeof first!.retryInMs, 'number');
    assert.equal(retry!.trigger, 'retry');
    assert.deepEqual(retry!.failedWrites, { addresses: 1 });
    assert.ok(retry!.retryInMs > first!.retryInMs, JSON.stringify([first, retry]));
    // the IPv4 service and the IPv6 virtual server are there: only the VIP address is not
    assert.deepEqual(await destsOf('TCP 10.96.0.10:80'), POD_DESTS);
    assert.ok((await ipvsadmList()).has('TCP [fd00:96::10]:80'), await sh('ipvsadm', '-Ln'));
    assert.deepEqual(await linkAddresses('kube-ipvs0'), ['10.96.0.10/32']);
    child.kill('SIGTERM');
    assert.deepEqual(await exited, { code: 0, signal: null }, await output());
  });

  // ipvs.runEstimation: the flag writes net.ipv4.vs.run_estimation before the first sync, read
  // back with sysctl(8); without it the value someone else set stays.
  test('proxy --no-ipvs-run-estimation / --ipvs-run-estimation set net.ipv4.vs.run_estimation; without either the value is left alone', async (t) => {
    await resetDataPlane();
    const source = await objectSource('manifests', 'proxy-run-estimation');
    await source.add('web.yaml', await fixture('lifecycle.yaml'));
    const before = await sysctl('net.ipv4.vs.run_estimation');
    t.after(() => sh('sysctl', '-q', '-w', `net.ipv4.vs.run_estimation=${before}`));
    /** The value once the daemon's first sync is done. */
    const runProxy = async (...flags: string[]): Promise<string> => {
      const { child, log, stderr, exited } = startProxy(source.args, ...flags);
      const output = () => `${log.join('\n')}\n${stderr()}`;
      try {
        // the service may be there from the run before: wait for this daemon's first sync
        await waitFor(`the first sync (${flags.join(' ') || 'no flag'})`, async () => (log.some((l) => l.includes('"msg":"sync"')) ? true : undefined), {
          timeoutMs: 60_000,
          last: async () => output(),
        });
        assert.deepEqual(await destsOf('TCP 10.96.0.10:80'), POD_DESTS);
        assert.ok(!log.some((l) => l.includes('"msg":"sysctl"')), output());
        return await sysctl('net.ipv4.vs.run_estimation');
      } finally {
        child.kill('SIGTERM');
        assert.deepEqual(await exited, { code: 0, signal: null }, output());
      }
    };
    await sh('sysctl', '-q', '-w', 'net.ipv4.vs.run_estimation=1');
    assert.equal(await runProxy('--no-ipvs-run-estimation'), '0');
    assert.equal(await runProxy(), '0', 'no flag: the value is left as it was');
    assert.equal(await runProxy('--ipvs-run-estimation'), '1');
    await sh('sysctl', '-q', '-w', 'net.ipv4.vs.run_estimation=0');
    assert.equal(await runProxy(), '0');
  });
  // Signals from the first line of startup on: a SIGTERM while the daemon waits for its first
  // list, and a SIGHUP once it runs, each give the stop's log lines and a clean exit.
  test('proxy: SIGTERM while waiting for the first list, and SIGHUP once started, stop it in order with log lines', async (t) => {
    await resetDataPlane();
    // An API server address where nobody answers: the first list never completes.
    const nobody = createServer();
    await new Promise<void>((r) => nobody.listen(0, '127.0.0.1', () => r()));
    const port = (nobody.address() as { port: number }).port;
    await new Promise((r) => nobody.close(r));
    const parsed = (log: string[]) => log.map((l) => JSON.parse(l) as Record<string, any>);

    const waiting = startProxy(['--master', `http://127.0.0.1:${port}`]);
    t.after(() => {
      if (waiting.child.exitCode === null && waiting.child.signalCode === null) waiting.child.kill('SIGKILL');
    });
    const output1 = async () => `proxy log:\n${waiting.log.join('\n')}\n${waiting.stderr()}`;
    await waitFor('a failed list', async () => (parsed(waiting.log).some((l) => l.msg === 'informer') ? true : undefined), { timeoutMs: 60_000, last: output1 });
    waiting.child.kill('SIGTERM');
    assert.deepEqual(await waiting.exited, { code: 0, signal: null }, await output1());
    const lines1 = parsed(waiting.log);
    assert.ok(!lines1.some((l) => l.msg === 'proxy started'), await output1());
    assert.equal(lines1.find((l) => l.msg === 'stopping; the data plane stays programmed')?.reason, 'SIGTERM', await output1());
    const last1 = lines1.find((l) => l.msg === 'stopped; the data plane stays in place');
    assert.deepEqual([last1?.ok, last1?.duringStartup], [true, true], await output1());

    const source = await objectSource('manifests', 'proxy-sighup');
    await source.add('web.yaml', await fixture('lifecycle.yaml'));
    const running = startProxy(source.args);
    t.after(() => {
      if (running.child.exitCode === null && running.child.signalCode === null) running.child.kill('SIGKILL');
    });
    const output2 = async () => `proxy log:\n${running.log.join('\n')}\n${running.stderr()}`;
    await waitFor('the first sync', async () => (parsed(running.log).some((l) => l.msg === 'sync') ? true : undefined), { timeoutMs: 60_000, last: output2 });
    running.child.kill('SIGHUP');
    assert.deepEqual(await running.exited, { code: 0, signal: null }, await output2());
    const lines2 = parsed(running.log);
    assert.equal(lines2.find((l) => l.msg === 'stopping; the data plane stays programmed')?.reason, 'SIGHUP', await output2());
    const last2 = lines2.find((l) => l.msg === 'stopped; the data plane stays in place');
    assert.deepEqual([last2?.ok, last2?.duringStartup], [true, false], await output2());
    assert.deepEqual(await destsOf('TCP 10.96.0.10:80'), POD_DESTS, 'the data plane stays programmed');
  });
});
