// The soak and chaos tests compare the daemon's tables with a fresh sync's through
// normaliseRuleset (test/helpers/api-daemon.ts): what two equal data planes may list
// differently (block order, element order, the endpoint counts' rules in each shard's chain and
// the maps of counts no longer in use) is put in order or left out; anything else still differs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { normaliseRuleset } from '../helpers/api-daemon.js';

const table = (chain: string[], maps: Array<[string, string[]]>) =>
  [
    'table ip ipvsync {',
    ...maps.flatMap(([name, els]) => [`\tmap ${name} {`, '\t\ttype ipv4_addr . inet_proto . inet_service . mark : ipv4_addr . inet_service', ...(els.length ? [`\t\telements = { ${els.join(',\n\t\t\t     ')} }`] : []), '\t}', '']),
    '\tchain services-3 {',
    ...chain.map((r) => `\t\t${r}`),
    '\t}',
    '}',
  ].join('\n');

const rule = (n: number) => `dnat ip to ip daddr . meta l4proto . th dport . numgen random mod ${n} map @endpoints-${n}-3`;
const e3 = '10.96.0.1 . tcp . 80 . 0x00000000 : 10.244.0.2 . 8080';
const e4 = '10.96.0.2 . tcp . 80 . 0x00000000 : 10.244.0.3 . 8080';

test("a shard chain's endpoint-count rules in another order, and a count's empty map and its rule, normalise away", () => {
  const daemon = table([rule(4), rule(3), rule(7)], [['endpoints-4-3', [e4]], ['endpoints-3-3', [e3]], ['endpoints-7-3', []]]);
  const fresh = table([rule(3), rule(4)], [['endpoints-3-3', [e3]], ['endpoints-4-3', [e4]]]);
  assert.equal(normaliseRuleset(daemon), normaliseRuleset(fresh));
});

test('an element of a shard map that differs still differs', () => {
  const daemon = table([rule(3)], [['endpoints-3-3', [e3]]]);
  const fresh = table([rule(3)], [['endpoints-3-3', [e3.replace('10.244.0.2', '10.244.0.9')]]]);
  assert.notEqual(normaliseRuleset(daemon), normaliseRuleset(fresh));
});
