// The benchmark suite's peer inputs load into the real kernel with the real tools, and the
// kube-proxy iptables-mode ruleset reads back with iptables-legacy-save exactly as docs/kube-proxy.md
// shows a kube-proxy-written table (chain names, 0.33333333349 / 0.50000000000, rule order).
// Runs inside the private namespace scripts/host-tests.sh gives it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { iptablesRestore, JUMP_RULES } from '../../bench/lib/iptables.js';
import { ipsetRestore, IPSET_NAMES } from '../../bench/lib/ipvs-mode.js';
import { nftRuleset, nftTransaction, nftTransactionPieces, NFT_TABLE } from '../../bench/lib/nft-mode.js';
import { withOneEndpointChanged, workload } from '../../bench/lib/workload.js';
import { NGINX } from '../fixtures/kube/nginx-basic.js';

const run = (cmd: string, args: string[], input?: string) => execFileSync(cmd, args, { encoding: 'utf8', ...(input !== undefined ? { input } : {}), maxBuffer: 1 << 28 });


// docs/kube-proxy.md's iptables-save lines of the example (the SEP chain of the first endpoint shown).
const EXAMPLE = `-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SERVICES -d 10.105.250.129/32 -p tcp -m comment --comment "default/nginx-basic:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-WWRFY3PZ7W3FGMQW
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SVC-WWRFY3PZ7W3FGMQW ! -s 192.168.0.0/16 -d 10.105.250.129/32 -p tcp -m comment --comment "default/nginx-basic:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-WWRFY3PZ7W3FGMQW -m comment --comment "default/nginx-basic:http -> 192.168.0.7:80" -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-BEMSLTMJA26ZCLYL
-A KUBE-SVC-WWRFY3PZ7W3FGMQW -m comment --comment "default/nginx-basic:http -> 192.168.1.3:80" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-UF65ZV4QBOPNRP6O
-A KUBE-SVC-WWRFY3PZ7W3FGMQW -m comment --comment "default/nginx-basic:http -> 192.168.1.4:80" -j KUBE-SEP-WQR67ZLSTPDXXME4
-A KUBE-SEP-BEMSLTMJA26ZCLYL -s 192.168.0.7/32 -m comment --comment "default/nginx-basic:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-BEMSLTMJA26ZCLYL -p tcp -m comment --comment "default/nginx-basic:http" -m tcp -j DNAT --to-destination 192.168.0.7:80`.split('\n');

function legacyFlush(): void {
  for (const t of ['nat', 'filter']) {
    run('iptables-legacy', ['-t', t, '-F']);
    run('iptables-legacy', ['-t', t, '-X']);
  }
}

test('iptables-legacy-restore of the example service reads back as docs/kube-proxy.md shows it', () => {
  legacyFlush();
  for (const j of JUMP_RULES) run('iptables-legacy', [...j]);
  run('iptables-legacy-restore', ['--noflush'], iptablesRestore([NGINX], { clusterCidr: '192.168.0.0/16' }).text);
  const saved = run('iptables-legacy-save', ['-t', 'nat']).split('\n').filter((l) => l.startsWith('-A '));
  for (const line of EXAMPLE) assert.ok(saved.includes(line), `missing in iptables-legacy-save: ${line}\n${saved.join('\n')}`);
  // and in the same order within each chain
  const order = (lines: string[], chain: string) => lines.filter((l) => l.startsWith(`-A ${chain} `));
  for (const chain of ['KUBE-SERVICES', 'KUBE-SVC-WWRFY3PZ7W3FGMQW', 'KUBE-POSTROUTING']) assert.deepEqual(order(saved, chain), order(EXAMPLE, chain));
  legacyFlush();
});

test('iptables-legacy-restore: full ruleset at 200 × 10, then the partial --noflush restore of one changed endpoint', () => {
  legacyFlush();
  const w = workload(200);
  const full = iptablesRestore(w.services);
  run('iptables-legacy-restore', ['--noflush'], full.text);
  const count = () => run('iptables-legacy-save', ['-t', 'nat']).split('\n').filter((l) => l.startsWith('-A ')).length;
  assert.equal(count(), full.natRules);
  const w2 = withOneEndpointChanged(w);
  const part = iptablesRestore(w2.services, {}, new Set([100]));
  run('iptables-legacy-restore', ['--noflush'], part.text);
  // the old SEP chain stays (large-cluster mode: stale chains go once per syncPeriod), empty of nothing: same rule count
  assert.equal(count(), full.natRules + 2);
  const saved = run('iptables-legacy-save', ['-t', 'nat']);
  assert.ok(saved.includes('--to-destination 10.127.255.1:8080'));
  legacyFlush();
});

test('nft -f loads the nftables-mode-shaped ruleset; ipset restore loads the IPVS-mode sets', () => {
  const w = workload(100);
  const n = nftRuleset(w.services);
  run('nft', ['-f', '-'], n.text);
  const listed = JSON.parse(run('nft', ['-j', 'list', 'table', 'ip', NFT_TABLE])) as { nftables: Array<Record<string, unknown>> };
  assert.equal(listed.nftables.filter((o) => 'chain' in o).length, n.chains);
  assert.equal(listed.nftables.filter((o) => 'rule' in o).length, n.rules);
  run('nft', ['delete', 'table', 'ip', NFT_TABLE]);

  const sets = ipsetRestore(w.services);
  run('ipset', ['restore'], sets.text);
  const saved = run('ipset', ['save']).split('\n').filter((l) => l.startsWith('add '));
  assert.equal(saved.length, sets.members);
  for (const s of IPSET_NAMES) run('ipset', ['destroy', s]);
});

/** The table's chains (service and endpoint ones: their names have a '/'), rules and map elements. */
function tableShape(): { chains: number; serviceChains: number; rules: number; elements: number } {
  const objs = (JSON.parse(run('nft', ['-j', 'list', 'table', 'ip', NFT_TABLE])) as { nftables: Array<Record<string, any>> }).nftables;
  const chains = objs.filter((o) => 'chain' in o);
  return {
    chains: chains.length,
    serviceChains: chains.filter((o) => String(o.chain.name).includes('/')).length,
    rules: objs.filter((o) => 'rule' in o).length,
    elements: objs.filter((o) => 'map' in o).reduce((n, o) => n + (o.map.elem?.length ?? 0), 0),
  };
}

test('nft -f loads kube-proxy nftables mode\'s full sync as it sends it: one transaction and 1,000-service pieces give the same table', () => {
  const w = workload(1500);
  run('nft', ['-f', '-'], nftTransaction(w.services));
  const one = tableShape();
  run('nft', ['delete', 'table', 'ip', NFT_TABLE]);
  for (const p of nftTransactionPieces(w.services, 1000)) run('nft', ['-f', '-'], p);
  assert.deepEqual(tableShape(), one);
  run('nft', ['delete', 'table', 'ip', NFT_TABLE]);
  const d = nftRuleset(w.services);
  assert.equal(one.elements, d.mapElements);
  // the declarative ruleset's chains less its 6 base ones
  assert.equal(one.serviceChains, d.chains - 6);
});
