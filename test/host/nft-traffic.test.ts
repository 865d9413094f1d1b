// Packet-level check of a table programmed by ipvsync: a client namespace reaches a service
// VIP (10.96.0.1) through this namespace acting as the node; the verdict map sends the flow to
// the service chain, which marks it and DNATs it to a server in a third namespace; postrouting
// masquerades marked packets. The server has no route back to the client, so a reply proves the
// masquerade, and the address it saw proves which source it was given. UDP and TCP.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { Nftables, NftTransaction, type SetSpec } from '../../src/kernel/nftables.js';
import * as R from '../../src/kernel/nft-rules.js';

const F = R.F;
const ip = (...a: string[]) => execFileSync('ip', a, { encoding: 'utf8' });

const SERVER = `
const dgram = require('node:dgram'), net = require('node:net');
const u = dgram.createSocket('udp4');
u.on('message', (m, r) => u.send('udp saw ' + r.address, r.port, r.address));
u.bind(5353, '10.9.1.2');
net.createServer((c) => c.end('tcp saw ' + c.remoteAddress)).listen(8080, '10.9.1.2', () => console.log('ready'));
`;

/** Gives up (exit 1) after argv[1] ms: where answers are expected only a hang's bound (3 s was a
 *  race with a loaded machine); where none may come, a short wait that can only confirm it. */
const CLIENT = `
const dgram = require('node:dgram'), net = require('node:net');
const out = [];
const u = dgram.createSocket('udp4');
const t = setTimeout(() => { console.log(JSON.stringify(out)); process.exit(1); }, +process.argv[1]);
u.on('message', (m) => {
  out.push(String(m));
  u.close();
  const c = net.connect(80, '10.96.0.1');
  let s = '';
  c.on('data', (d) => (s += d));
  c.on('end', () => { out.push(s); clearTimeout(t); console.log(JSON.stringify(out)); });
  c.on('error', (e) => { out.push('tcp error ' + e.code); clearTimeout(t); console.log(JSON.stringify(out)); });
});
u.send('hi', 53, '10.96.0.1');
`;

test('vmap -> mark -> dnat -> masquerade on real UDP and TCP traffic between namespaces', async (t) => {
  ip('netns', 'add', 'nft-cli');
  ip('netns', 'add', 'nft-srv');
  let server: ChildProcess | undefined;
  t.after(() => {
    if (server?.pid) process.kill(server.pid);
    spawnSync('ip', ['link', 'del', 'nc0']);
    spawnSync('ip', ['link', 'del', 'ns0']);
    spawnSync('ip', ['netns', 'del', 'nft-cli']);
    spawnSync('ip', ['netns', 'del', 'nft-srv']);
    spawnSync('nft', ['flush', 'ruleset']);
  });
  ip('link', 'add', 'nc0', 'type', 'veth', 'peer', 'name', 'nc1', 'netns', 'nft-cli');
  ip('link', 'add', 'ns0', 'type', 'veth', 'peer', 'name', 'ns1', 'netns', 'nft-srv');
  ip('addr', 'add', '10.9.0.1/24', 'dev', 'nc0');
  ip('addr', 'add', '10.9.1.1/24', 'dev', 'ns0');
  ip('link', 'set', 'nc0', 'up');
  ip('link', 'set', 'ns0', 'up');
  ip('-n', 'nft-cli', 'addr', 'add', '10.9.0.2/24', 'dev', 'nc1');
  ip('-n', 'nft-cli', 'link', 'set', 'nc1', 'up');
  ip('-n', 'nft-cli', 'link', 'set', 'lo', 'up');
  ip('-n', 'nft-cli', 'route', 'add', 'default', 'via', '10.9.0.1');
  ip('-n', 'nft-srv', 'addr', 'add', '10.9.1.2/24', 'dev', 'ns1');
  ip('-n', 'nft-srv', 'link', 'set', 'ns1', 'up');
  ip('-n', 'nft-srv', 'link', 'set', 'lo', 'up'); // no default route: replies need the masquerade
  execFileSync('sysctl', ['-qw', 'net.ipv4.ip_forward=1']);

  const T = 'proxy';
  const svc: SetSpec = { family: 'ip', table: T, name: 'services', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict' };
  const tx = new NftTransaction()
    .addTable({ family: 'ip', name: T })
    .addChain({ family: 'ip', table: T, name: 'svc-dns' })
    .addChain({ family: 'ip', table: T, name: 'svc-web' })
    .addChain({ family: 'ip', table: T, name: 'prerouting', hook: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } })
    .addChain({ family: 'ip', table: T, name: 'postrouting', hook: { type: 'nat', hook: 'postrouting', priority: 100, policy: 'accept' } })
    .addChain({ family: 'ip', table: T, name: 'forward', hook: { type: 'filter', hook: 'forward', priority: 0, policy: 'drop' } })
    .addSet(svc)
    .addElements(svc, [
      { key: ['10.96.0.1', 'udp', 53], verdict: { code: 'goto', chain: 'svc-dns' } },
      { key: ['10.96.0.1', 'tcp', 80], verdict: { code: 'goto', chain: 'svc-web' } },
    ])
    .addRule({ family: 'ip', table: T, chain: 'prerouting', exprs: R.vmap([F.ipDaddr, F.l4proto, F.thDport], 'services') })
    .addRule({ family: 'ip', table: T, chain: 'svc-dns', exprs: R.rule(R.setMarkBits(0x4000), R.counter(), R.dnat('ip', '10.9.1.2', 5353)) })
    .addRule({ family: 'ip', table: T, chain: 'svc-web', exprs: R.rule(R.setMarkBits(0x4000), R.counter(), R.dnat('ip', '10.9.1.2', 8080)) })
    .addRule({ family: 'ip', table: T, chain: 'postrouting', exprs: R.rule(R.markMatch('meta', 0x4000), R.counter(), R.masquerade({ fullyRandom: true })) })
    // forward policy drop: only established flows and DNATed service traffic pass
    .addRule({ family: 'ip', table: T, chain: 'forward', exprs: R.rule(R.ctState('established', 'related'), R.accept()) })
    .addRule({ family: 'ip', table: T, chain: 'forward', exprs: R.rule(R.ctStatus('dnat'), R.counter(), R.accept()) });
  const nft = await Nftables.open();
  (await nft.commit(tx)).orThrow();

  server = spawn('ip', ['netns', 'exec', 'nft-srv', process.execPath, '-e', SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  await new Promise<void>((resolve, reject) => {
    server!.stdout!.once('data', () => resolve());
    server!.once('exit', (c) => reject(new Error(`server exited ${c}`)));
  });
  const out = execFileSync('ip', ['netns', 'exec', 'nft-cli', process.execPath, '-e', CLIENT, '60000'], { encoding: 'utf8', timeout: 120_000 });
  assert.deepEqual(JSON.parse(out), ['udp saw 10.9.1.1', 'tcp saw 10.9.1.1'], 'both flows DNATed and masqueraded behind the node address');

  // The counters the rules carried saw the traffic (read back through the listing).
  const rules = (await nft.list({ table: T, counters: true })).rules;
  const packets = (chain: string) => {
    let n = 0;
    for (const r of rules.filter((x) => x.chain === chain))
      for (const e of r.exprs) if (e.type === 'counter') n += e.packets ?? 0;
    return n;
  };
  assert.equal(packets('svc-dns'), 1, 'one UDP flow through the nat chain (first packet only)');
  assert.equal(packets('svc-web'), 1, 'one TCP flow');
  assert.equal(packets('postrouting'), 2, 'both flows masqueraded');
  assert.ok(packets('forward') >= 2, 'DNATed packets forwarded');
  // Without the element the flow is not translated: remove the UDP service, the client times out.
  const del = await nft.commit(new NftTransaction().deleteElements(svc, [{ key: ['10.96.0.1', 'udp', 53] }]));
  assert.ok(del.ok);
  const r = spawnSync('ip', ['netns', 'exec', 'nft-cli', process.execPath, '-e', CLIENT, '3000'], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 1, 'no UDP reply once the service element is gone');
});
