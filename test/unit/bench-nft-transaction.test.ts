// kube-proxy's nftables-mode full sync as it sends it (bench/lib/nft-mode.ts nftTransaction,
// nftTransactionPieces) and the benchmarks' spread (bench/lib/spread.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { nftRuleset, nftTransaction, nftTransactionPieces } from '../../bench/lib/nft-mode.js';
import { fmtRuns, ratio, summarize } from '../../bench/lib/spread.js';
import { workload } from '../../bench/lib/workload.js';

test('nftTransaction: one add/flush command a line, every chain of the declarative ruleset added and flushed once', () => {
  const w = workload(100);
  const lines = nftTransaction(w.services).trimEnd().split('\n');
  assert.match(lines[0]!, /^add table ip kube-proxy \{ comment "rules for kube-proxy" ; \}$/);
  assert.ok(lines.every((l) => /^(add|flush) (table|chain|rule|map|element) ip kube-proxy /.test(l)), 'commands only');
  const added = lines.filter((l) => l.startsWith('add chain ')).map((l) => l.split(' ')[4]);
  const flushed = lines.filter((l) => l.startsWith('flush chain ')).map((l) => l.split(' ')[4]);
  assert.deepEqual(flushed, added);
  assert.equal(new Set(added).size, added.length);
  // the service and endpoint chains are the declarative ruleset's (100 + 10 external + 1000)
  assert.equal(added.filter((c) => c!.includes('/')).length, nftRuleset(w.services).chains - 6);
  assert.equal(lines.filter((l) => l.includes('numgen random mod 10 vmap')).length, 100);
  assert.equal(lines.filter((l) => l.startsWith('add element ip kube-proxy service-ips ')).length, 100);
  assert.equal(lines.filter((l) => l.startsWith('add element ip kube-proxy service-nodeports ')).length, 10);
});

test('nftTransactionPieces: the same commands cut by services, the setup (and its map flushes) in the first only', () => {
  const w = workload(2500);
  const pieces = nftTransactionPieces(w.services, 1000);
  assert.equal(pieces.length, 3);
  assert.equal(pieces.join(''), nftTransaction(w.services));
  for (const p of pieces.slice(1)) assert.ok(!/^(add table|flush map)/m.test(p), 'no setup past the first piece');
  assert.equal(nftTransactionPieces([], 1000).length, 1, 'an empty workload is the setup alone');
});

test('summarize: median and spread, a capped run above every finished one', () => {
  assert.deepEqual(summarize({ runs: [3, 1, 2] }), { median: 2, min: 1, max: 3, capped: false, n: 3 });
  assert.deepEqual(summarize({ runs: [1, 2], timeouts: 1, capS: 10 }), { median: 2, min: 1, max: 10_000, capped: false, n: 3 });
  assert.deepEqual(summarize({ runs: [], timeouts: 1, capS: 10 }), { median: 10_000, min: 10_000, max: 10_000, capped: true, n: 1 });
  assert.equal(summarize({ runs: [], skipped: 'capped at 5k' }), undefined);
  assert.equal(fmtRuns({ runs: [], timeouts: 1, capS: 120 }), '> 120 s');
  assert.equal(fmtRuns({ runs: [200, 100, 300] }), '200 ms (100 ms–300 ms)');
  assert.equal(ratio({ runs: [], timeouts: 1, capS: 120 }, { runs: [1000] }), '> 120×');
  assert.equal(ratio({ runs: [3000] }, { runs: [1000] }), '3.0×');
});
