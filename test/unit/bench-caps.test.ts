import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cappedInRows, formatSkip, parseSkip } from '../../bench/lib/caps.js';
import type { SizeRow } from '../../bench/lib/render.js';

const row = (services: number, peers: SizeRow['peers']): SizeRow => ({ services, endpoints: services * 10, sizes: {}, peers });

test('peers capped in kept smaller rows are skipped at a larger size, with the cap they hit', () => {
  const rows = [
    row(1000, { 'iptables-legacy-restore full': { ms: 3072 }, 'iptables-nft-restore full': { ms: 47000 }, 'nft -f': { ms: 7951 } }),
    row(5000, {
      'iptables-legacy-restore full': { ms: 15200 },
      'iptables-nft-restore full': { ms: NaN, timeout: true, timeoutS: 150 },
      'nft -f': { ms: NaN, timeout: true, timeoutS: 150 },
    }),
    row(10000, {
      'iptables-legacy-restore full': { ms: 45700 },
      'iptables-nft-restore full': { ms: NaN, skipped: 'timeout > 150 s already at 5000 services' },
      'nft -f': { ms: NaN, skipped: 'timeout > 150 s already at 5000 services' },
    }),
  ];
  const skips = (rs: SizeRow[], S: number, capS: number) => [...cappedInRows(rs, S, capS)].map(([name, at]) => formatSkip(name, at));
  assert.deepEqual(skips(rows, 20000, 600), ['iptables-nft-restore=5000:150', 'nft -f=5000:150']);
  // only rows smaller than the size run count; a timeout without its cap gets the run's
  assert.deepEqual(skips(rows, 5000, 600), []);
  assert.deepEqual(skips([row(1000, { 'nft -f': { ms: NaN, timeout: true } })], 5000, 600), ['nft -f=1000:600']);
  // the smallest capped row is the one named
  const two = [row(10000, { 'nft -f': { ms: NaN, timeout: true, timeoutS: 300 } }), row(5000, { 'nft -f': { ms: NaN, timeout: true, timeoutS: 150 } })];
  assert.deepEqual(skips(two, 20000, 600), ['nft -f=5000:150']);
});

test('a --skip value reads back as name, S and cap; without a cap the run\'s', () => {
  assert.deepEqual(parseSkip(formatSkip('iptables-nft-restore', { S: 5000, capS: 150 }), 600), ['iptables-nft-restore', { S: 5000, capS: 150 }]);
  assert.deepEqual(parseSkip('nft -f=5000:150', 600), ['nft -f', { S: 5000, capS: 150 }]);
  assert.deepEqual(parseSkip('iptables-nft-restore=1000', 600), ['iptables-nft-restore', { S: 1000, capS: 600 }]);
});
