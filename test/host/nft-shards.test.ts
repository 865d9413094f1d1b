// The nftables data plane splits its largest sets into shards by a hash the kernel computes
// on each packet (`jhash … mod 16 seed 0`), and ipvsync computes the same hash to put each
// element where that packet looks. Checked here with the independent tool: a table written
// by `nft` that records each packet's shard, real packets to random frontends and endpoint
// addresses of both families, and frontendShard/addressShard against what the kernel recorded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { addressShard, frontendShard, SHARDS } from '../../src/proxy/nftables/table.js';

const nft = (text: string) => execFileSync('nft', ['-f', '-'], { input: text, encoding: 'utf8' });
const ip = (...a: string[]) => execFileSync('ip', a, { encoding: 'utf8' });

/** A deterministic stream of numbers in [0, 2^32) (the run is reproducible). */
function* numbers(seed: number): Generator<number> {
  let x = seed >>> 0;
  for (;;) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    yield (x >>>= 0);
  }
}

test("the shard ipvsync computes for a frontend and an endpoint address is the kernel's, IPv4 and IPv6", async (t) => {
  // every address of these prefixes is the node's own: packets to them pass the output hook
  ip('route', 'replace', 'local', '10.0.0.0/8', 'dev', 'lo');
  ip('-6', 'route', 'replace', 'local', 'fd00:5a::/32', 'dev', 'lo');
  t.after(() => {
    ip('route', 'del', 'local', '10.0.0.0/8', 'dev', 'lo');
    ip('-6', 'route', 'del', 'local', 'fd00:5a::/32', 'dev', 'lo');
    execFileSync('nft', ['delete', 'table', 'inet', 'shardcheck']);
  });
  const shards = Array.from({ length: SHARDS }, (_, s) => s);
  const dispatch = (prefix: string) => shards.map((s) => `${s} : jump ${prefix}${s}`).join(', ');
  nft(`table inet shardcheck {
${shards.map((s) => `  set fe4-${s} { type ipv4_addr . inet_service; flags dynamic; }
  set fe6-${s} { type ipv6_addr . inet_service; flags dynamic; }
  set ad4-${s} { type ipv4_addr; flags dynamic; }
  set ad6-${s} { type ipv6_addr; flags dynamic; }
  chain fe4-${s} { update @fe4-${s} { ip daddr . udp dport }; }
  chain fe6-${s} { update @fe6-${s} { ip6 daddr . udp dport }; }
  chain ad4-${s} { update @ad4-${s} { ip daddr }; }
  chain ad6-${s} { update @ad6-${s} { ip6 daddr }; }`).join('\n')}
  chain out {
    type filter hook output priority 0; policy accept;
    meta l4proto udp ip daddr 10.0.0.0/9 jhash ip daddr . udp dport mod ${SHARDS} seed 0x0 vmap { ${dispatch('fe4-')} }
    meta l4proto udp ip6 daddr fd00:5a::/48 jhash ip6 daddr . udp dport mod ${SHARDS} seed 0x0 vmap { ${dispatch('fe6-')} }
    meta l4proto udp ip daddr 10.128.0.0/9 jhash ip daddr mod ${SHARDS} seed 0x0 vmap { ${dispatch('ad4-')} }
    meta l4proto udp ip6 daddr fd00:5a:1::/48 jhash ip6 daddr mod ${SHARDS} seed 0x0 vmap { ${dispatch('ad6-')} }
  }
}`);
  // frontends (address and port hashed) in the lower halves, endpoint addresses in the upper
  const r = numbers(0x5a17);
  const next = () => r.next().value as number;
  const v4 = (hi: number) => `10.${hi + (next() & 127)}.${next() & 255}.${(next() >>> 16) & 255}`;
  const v6 = (net: number) => `fd00:5a:${net}:${(next() & 0xffff).toString(16)}::${(next() & 0xffff).toString(16)}`;
  const port = () => 1 + (next() % 65535);
  const probes = {
    fe4: Array.from({ length: 300 }, () => [v4(0), port()] as const),
    fe6: Array.from({ length: 150 }, () => [v6(0), port()] as const),
    ad4: Array.from({ length: 300 }, () => [v4(128), port()] as const),
    ad6: Array.from({ length: 150 }, () => [v6(1), port()] as const),
  };
  for (const [kind, list] of Object.entries(probes)) {
    const sock = createSocket(kind.endsWith('6') ? 'udp6' : 'udp4');
    for (const [addr, port] of list) await new Promise<void>((res) => sock.send('x', port, addr, () => res()));
    sock.close();
  }
  const listing = JSON.parse(execFileSync('nft', ['-j', 'list', 'table', 'inet', 'shardcheck'], { encoding: 'utf8' })) as { nftables: Array<Record<string, any>> };
  const kernel = new Map<string, number>();
  for (const o of listing.nftables) {
    if (!o.set) continue;
    const [kind, s] = String(o.set.name).split('-') as [string, string];
    for (const e of o.set.elem ?? []) {
      const v = e.elem?.val ?? e;
      const key = typeof v === 'object' && v.concat ? v.concat.join(' ') : String(v);
      kernel.set(`${kind} ${key}`, Number(s));
    }
  }
  let checked = 0;
  for (const [kind, list] of Object.entries(probes))
    for (const [addr, port] of list) {
      const frontend = kind.startsWith('fe');
      const got = kernel.get(frontend ? `${kind} ${addr} ${port}` : `${kind} ${addr}`);
      assert.notEqual(got, undefined, `${kind} ${addr} ${port}: the kernel recorded its packet`);
      assert.equal(frontend ? frontendShard(addr, port) : addressShard(addr), got, `${kind} ${addr} ${port}`);
      checked++;
    }
  assert.equal(checked, 900);
  // every shard in use: the hash spreads
  assert.deepEqual([...new Set(kernel.values())].sort((a, b) => a - b), shards);
});
