// A patch that only adds services hands the engine the bytes the plane's stores appended (the
// endpoint maps, the hairpin sets, the sets of frontend keys), and the engine writes them as
// they are. On the kernel, read back by the independent tool (`nft -j list`), the tables it
// leaves are those a full sync of the same services writes, and a fresh process over them
// plans nothing (its rules too: each endpoint count's rule stands in ascending order, however
// the counts came).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { openKernel } from '../../src/proxy/kernel.js';
import { Proxier } from '../../src/proxy/proxier.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const NODE = { name: 'node-a', addresses: ['10.9.0.1', 'fd00:9::1'] };
const CONFIG = { clusterCIDRs: ['10.244.0.0/16', 'fd00:244::/48'] };

/** The services the first sync has; those after come in one patch. */
const FIRST = 60;

/** Service i: TCP and UDP ports, 1-6 endpoints before FIRST and 1-12 after (a patch's new
 *  endpoint counts are maps and rules it adds), its first endpoint's address the service
 *  before's (a hairpin key two owners put), every 10th a NodePort, every 25th IPv6. */
function objects(i: number): [V1Service, V1EndpointSlice] {
  const v6 = i % 25 === 0;
  const n = 1 + (i % (i < FIRST ? 6 : 12));
  const host = (j: number) => (j === 0 && i > 0 ? i - 1 : i) * 16 + j;
  const ip = (j: number) => (v6 ? `fd00:244::${host(j).toString(16)}` : `10.244.${host(j) >> 8}.${host(j) & 255}`);
  const ports = [{ name: 'http', port: 80 }, { name: 'dns', port: 53, protocol: 'UDP' }];
  const s = svc(`s${i}`, {
    clusterIP: v6 ? `fd00:96::${i.toString(16)}` : `10.96.${i >> 8}.${i & 255}`,
    ...(v6 ? { ipFamilies: ['IPv6'] } : {}),
    ...(i % 10 === 0 ? { type: 'NodePort', ports: ports.map((p, k) => ({ ...p, nodePort: 30000 + 2 * i + k })) } : { ports }),
  });
  const sl = slice(`s${i}`, `s${i}-1`, [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }], Array.from({ length: n }, (_, j) => ({ ip: ip(j), node: j % 3 ? 'node-b' : 'node-a' })));
  return [s, sl];
}

function proxier(k: Awaited<ReturnType<typeof openKernel>>, upTo: number, from = 0): Proxier {
  const p = new Proxier(k, { mode: 'nftables', node: NODE, config: CONFIG });
  add(p, from, upTo);
  return p;
}

function add(p: Proxier, from: number, upTo: number): void {
  for (let i = from; i < upTo; i++) {
    const [s, sl] = objects(i);
    p.onServiceUpdate(s);
    p.onSliceUpdate(sl);
  }
}

/** Both tables as nft lists them, each object (table, chain, set, rule) as its text without
 *  handles and with its elements sorted, in the order of those texts. */
function tables(): string[] {
  const out: string[] = [];
  for (const family of ['ip', 'ip6']) {
    const text = execFileSync('nft', ['-j', 'list', 'table', family, 'ipvsync'], { encoding: 'utf8' });
    const listed = JSON.parse(text, (k, v) => (k === 'handle' ? undefined : v)) as { nftables: Array<Record<string, any>> };
    for (const o of listed.nftables) {
      if (o.metainfo) continue;
      const s = o.set ?? o.map;
      if (s?.elem) s.elem = (s.elem as unknown[]).map((e) => JSON.stringify(e)).sort();
      out.push(JSON.stringify(o));
    }
  }
  return out.sort();
}

test('services added in a patch (their elements as the bytes the plane holds) leave the tables a full sync writes; a fresh process plans nothing', async (t) => {
  t.after(() => {
    for (const family of ['ip', 'ip6']) spawnSync('nft', ['delete', 'table', family, 'ipvsync']);
  });
  const k = await openKernel({}, { glue: true, mode: 'nftables' });
  const p = proxier(k, FIRST);
  assert.deepEqual((await p.sync(true)).report.errors, []);
  // 140 new services in one patch: new endpoint counts (new maps), shared hairpin addresses
  add(p, FIRST, 200);
  const patched = await p.sync(false);
  assert.deepEqual(patched.report.errors, []);
  assert.equal(patched.report.mode, 'incremental');
  const afterPatch = tables();
  assert.deepEqual((await proxier(k, 200).plan(true)).plan.nft?.ops, [], 'a fresh process over the patched tables');

  for (const family of ['ip', 'ip6']) execFileSync('nft', ['delete', 'table', family, 'ipvsync']);
  assert.deepEqual((await proxier(k, 200).sync(true)).report.errors, []);
  const full = tables();
  assert.ok(JSON.stringify(full).includes('endpoints-12-'), 'every endpoint count is there');
  assert.deepEqual(afterPatch, full);
});
