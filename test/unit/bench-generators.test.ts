// The benchmark suite's workload generators (bench/lib): kube-proxy's iptables-mode ruleset for
// the example service of docs/kube-proxy.md, the real chain-name hash scheme and probabilities, and how
// every rendering (manifests, iptables, ipvsadm/ipset, nft) scales with S.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { base32, extChain, iptablesRestore, probability, savedProbability, sepChain, svcChain } from '../../bench/lib/iptables.js';
import { ipBatchVips, ipsetRestore, ipvsadmRestore } from '../../bench/lib/ipvs-mode.js';
import { manifestFiles, sliceObject } from '../../bench/lib/manifests.js';
import { nftRuleset } from '../../bench/lib/nft-mode.js';
import { changedIndex, NODE_IP, NODE_NAME, REPLACEMENT_IP, withOneEndpointChanged, workload } from '../../bench/lib/workload.js';
import { parseManifests } from '../../src/kube/manifests.js';
import { translate } from '../../src/proxy/ipvs/plane.js';
import { parseRules } from '../../src/formats/ipvsadm.js';
import { NGINX } from '../fixtures/kube/nginx-basic.js';


test('base32 is RFC 4648 (Go base32.StdEncoding without padding)', () => {
  assert.equal(base32(Buffer.from('foobar')), 'MZXW6YTBOI');
  assert.equal(base32(Buffer.from('f')), 'MY');
  assert.equal(base32(createHash('sha256').update('').digest()).length, 52);
});

test('iptables: the example service of docs/kube-proxy.md: chain names, probabilities, rules as kube-proxy writes them', () => {
  assert.equal(svcChain(NGINX), 'KUBE-SVC-WWRFY3PZ7W3FGMQW');
  assert.deepEqual(
    NGINX.endpoints.map((e) => sepChain(NGINX, `${e.ip}:${e.port}`)),
    ['KUBE-SEP-BEMSLTMJA26ZCLYL', 'KUBE-SEP-UF65ZV4QBOPNRP6O', 'KUBE-SEP-WQR67ZLSTPDXXME4'],
  );
  // kube-proxy writes "%0.10f"; iptables-save prints the kernel's fixed-point value with 11 decimals.
  assert.equal(probability(3), '0.3333333333');
  assert.equal(probability(2), '0.5000000000');
  assert.equal(savedProbability(probability(3)), '0.33333333349');
  assert.equal(savedProbability(probability(2)), '0.50000000000');
  assert.equal(savedProbability(probability(10)), '0.10000000009');

  const r = iptablesRestore([NGINX], { clusterCidr: '192.168.0.0/16' });
  const nat = r.text.slice(r.text.indexOf('*nat'));
  assert.equal(
    nat,
    [
      '*nat',
      ':KUBE-SERVICES - [0:0]',
      ':KUBE-NODEPORTS - [0:0]',
      ':KUBE-POSTROUTING - [0:0]',
      ':KUBE-MARK-MASQ - [0:0]',
      ':KUBE-SVC-WWRFY3PZ7W3FGMQW - [0:0]',
      ':KUBE-SEP-BEMSLTMJA26ZCLYL - [0:0]',
      ':KUBE-SEP-UF65ZV4QBOPNRP6O - [0:0]',
      ':KUBE-SEP-WQR67ZLSTPDXXME4 - [0:0]',
      '-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN',
      '-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000',
      '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
      '-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000',
      '-A KUBE-SERVICES -m comment --comment "default/nginx-basic:http cluster IP" -m tcp -p tcp -d 10.105.250.129 --dport 80 -j KUBE-SVC-WWRFY3PZ7W3FGMQW',
      '-A KUBE-SVC-WWRFY3PZ7W3FGMQW -m comment --comment "default/nginx-basic:http cluster IP" -m tcp -p tcp -d 10.105.250.129 --dport 80 ! -s 192.168.0.0/16 -j KUBE-MARK-MASQ',
      '-A KUBE-SVC-WWRFY3PZ7W3FGMQW -m comment --comment "default/nginx-basic:http -> 192.168.0.7:80" -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-BEMSLTMJA26ZCLYL',
      '-A KUBE-SVC-WWRFY3PZ7W3FGMQW -m comment --comment "default/nginx-basic:http -> 192.168.1.3:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-UF65ZV4QBOPNRP6O',
      '-A KUBE-SVC-WWRFY3PZ7W3FGMQW -m comment --comment "default/nginx-basic:http -> 192.168.1.4:80" -j KUBE-SEP-WQR67ZLSTPDXXME4',
      '-A KUBE-SEP-BEMSLTMJA26ZCLYL -m comment --comment default/nginx-basic:http -s 192.168.0.7 -j KUBE-MARK-MASQ',
      '-A KUBE-SEP-BEMSLTMJA26ZCLYL -m comment --comment default/nginx-basic:http -m tcp -p tcp -j DNAT --to-destination 192.168.0.7:80',
      '-A KUBE-SEP-UF65ZV4QBOPNRP6O -m comment --comment default/nginx-basic:http -s 192.168.1.3 -j KUBE-MARK-MASQ',
      '-A KUBE-SEP-UF65ZV4QBOPNRP6O -m comment --comment default/nginx-basic:http -m tcp -p tcp -j DNAT --to-destination 192.168.1.3:80',
      '-A KUBE-SEP-WQR67ZLSTPDXXME4 -m comment --comment default/nginx-basic:http -s 192.168.1.4 -j KUBE-MARK-MASQ',
      '-A KUBE-SEP-WQR67ZLSTPDXXME4 -m comment --comment default/nginx-basic:http -m tcp -p tcp -j DNAT --to-destination 192.168.1.4:80',
      '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS',
      'COMMIT',
      '',
    ].join('\n'),
  );
  assert.ok(r.text.startsWith('*filter\n:KUBE-SERVICES - [0:0]\n'));
});

test('iptables: a NodePort service gets KUBE-NODEPORTS → KUBE-EXT (mark for masquerade) → KUBE-SVC', () => {
  const s = { ...NGINX, nodePort: 30080 };
  const r = iptablesRestore([s], { clusterCidr: '192.168.0.0/16' });
  assert.equal(extChain(s), 'KUBE-EXT-WWRFY3PZ7W3FGMQW');
  assert.ok(r.text.includes('-A KUBE-NODEPORTS -m comment --comment default/nginx-basic:http -m tcp -p tcp --dport 30080 -j KUBE-EXT-WWRFY3PZ7W3FGMQW\n'));
  assert.ok(r.text.includes('-A KUBE-EXT-WWRFY3PZ7W3FGMQW -m comment --comment "masquerade traffic for default/nginx-basic:http external destinations" -j KUBE-MARK-MASQ\n-A KUBE-EXT-WWRFY3PZ7W3FGMQW -j KUBE-SVC-WWRFY3PZ7W3FGMQW\n'));
});

test('iptables: counts scale with S × 10; large-cluster mode drops the per-endpoint comments', () => {
  for (const S of [100, 1000]) {
    const w = workload(S);
    const np = w.services.filter((s) => s.nodePort !== undefined).length;
    assert.equal(np, S / 10);
    const r = iptablesRestore(w.services);
    // chains: 4 top + per service SVC + 10 SEP, + EXT per NodePort service
    assert.equal(r.natChains, 4 + S * 11 + np);
    // rules: 4 fixed + KUBE-SERVICES S + KUBE-NODEPORTS np + masq S + EXT 2np + SVC jumps 10S + SEP 20S + the nodeports tail
    assert.equal(r.natRules, 4 + S + np + S + 2 * np + 10 * S + 20 * S + 1);
    assert.equal(r.text.split('\n').filter((l) => l.startsWith('-A KUBE-SEP-')).length, 20 * S);
    // kube-proxy's large-cluster mode starts above 1000 endpoints
    assert.equal(/-A KUBE-SEP-\S+ -m comment/.test(r.text), S * 10 <= 1000);
    assert.equal(r.text.split('\n').filter((l) => l.includes('--probability 0.1000000000')).length, S);
  }
});

test('iptables: the partial restore of one changed endpoint writes the top-level chains whole and only the changed service chains', () => {
  const w = workload(1000);
  const w2 = withOneEndpointChanged(w);
  const i = changedIndex(w);
  const p = iptablesRestore(w2.services, {}, new Set([i]));
  const full = iptablesRestore(w2.services);
  const s = w2.services[i]!;
  assert.equal(s.nodePort, 30050);
  assert.equal(p.natChains, 4 + 1 + 1 + 10); // top chains, the one KUBE-EXT, KUBE-SVC and its 10 KUBE-SEPs
  assert.equal(p.text.split('\n').filter((l) => l.startsWith('-A KUBE-SERVICES')).length, 1001);
  assert.ok(p.text.includes(`:${sepChain(s, `${REPLACEMENT_IP}:8080`)} - [0:0]`));
  assert.ok(!p.text.includes(`:${svcChain(w2.services[i + 1]!)} `));
  assert.ok(p.text.length * 10 < full.text.length);
});

test('workload: the one-endpoint change touches one endpoint of one service; endpoints stay sorted as kube-proxy sorts them', () => {
  const w = workload(50);
  const w2 = withOneEndpointChanged(w);
  const diff = w.services.map((s, i) => JSON.stringify(s) !== JSON.stringify(w2.services[i]));
  assert.deepEqual(diff.flatMap((d, i) => (d ? [i] : [])), [25]);
  const a = w.services[25]!.endpoints.map((e) => e.ip);
  const b = w2.services[25]!.endpoints.map((e) => e.ip);
  assert.equal(b.filter((x) => !a.includes(x)).length, 1);
  assert.deepEqual([...b].sort(), b);
  assert.equal(new Set(w.services.flatMap((s) => s.endpoints.map((e) => e.ip))).size, 500);
});

test('manifests: sync -f input translates to S ClusterIP + S/10 NodePort virtual servers of 10 destinations', () => {
  const w = workload(200);
  const files = manifestFiles(w.services);
  const svc = parseManifests(files['services.json']!, 'services.json');
  const eps = parseManifests(files['endpointslices.json']!, 'endpointslices.json');
  assert.equal(svc.services.length, 200);
  assert.equal(eps.endpointSlices.length, 200);
  const m = translate({ services: svc.services, endpointSlices: eps.endpointSlices, node: { name: NODE_NAME, addresses: [NODE_IP] }, config: { clusterCIDRs: ['10.64.0.0/10'] } });
  assert.equal(m.services.length, 220);
  assert.ok(m.services.every((s) => s.destinations.length === 10));
  assert.equal(m.vips.length, 200);
  assert.equal(sliceObject(w.services[0]!).addressType, 'IPv4');
});

test('ipvs mode: ipvsadm -R and ipset restore inputs scale with S (and the ipvsadm format reads the rules back)', () => {
  const w = workload(300);
  const v = ipvsadmRestore(w.services);
  assert.equal(v.virtualServers, 330);
  assert.equal(v.destinations, 3300);
  const ops = parseRules(v.text);
  assert.equal(ops.length, 330 + 3300);
  const sets = ipsetRestore(w.services);
  assert.equal(sets.members, 300 + 300 + 30 + 3000);
  assert.equal(sets.text.split('\n').filter((l) => l.startsWith('add KUBE-LOOP-BACK 10.64.0.1,tcp:8080,10.64.0.1')).length, 1);
  assert.equal(ipBatchVips(w.services).split('\n').filter(Boolean).length, 300);
});

test('nft mode: one chain per service, NodePort and endpoint; numgen over the endpoints', () => {
  const w = workload(100);
  const n = nftRuleset(w.services);
  assert.equal(n.chains, 6 + 100 + 10 + 1000);
  assert.equal(n.mapElements, 110);
  assert.equal(n.text.split('\n').filter((l) => l.includes('numgen random mod 10 vmap')).length, 100);
});
