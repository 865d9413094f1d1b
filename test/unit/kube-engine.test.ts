// End to end without a kernel: manifests → translate → Engine → FakeIpvs. The fake's table must
// be exactly kube-proxy's IPVS table, a resync must write nothing, and an endpoint going away
// must cost exactly the writes it implies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { Engine } from '../../src/engine/engine.js';
import { serviceKey } from '../../src/engine/ipvs-model.js';
import type { Service } from '../../src/kernel/ipvs.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { FakeConntrack } from '../../src/testing/fake-kernel.js';
import { loadManifests } from '../../src/kube/manifests.js';
import { changedServices, translate } from '../../src/proxy/ipvs/plane.js';
import { EndpointSliceTracker } from '../../src/kube/change-tracker.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const EXAMPLE = join(import.meta.dirname, '../../../test/fixtures/kube/example');
const node = { name: 'node-a', addresses: ['10.0.0.11'] };

/** The fake kernel's table, ipvsadm -Ln style. */
async function kernelTable(ipvs: FakeIpvs): Promise<string[]> {
  const lines: string[] = [];
  const services: Service[] = await ipvs.services({ withDestinations: true });
  services.sort((a, b) => serviceKey(a).localeCompare(serviceKey(b)));
  for (const s of services) {
    const persist = s.flags.includes('persistent') ? ` persistent ${s.timeout}` : '';
    lines.push(`${s.protocol!.toUpperCase()} ${s.address}:${s.port} ${s.scheduler}${persist}`);
    const dests = [...(s.destinations ?? [])].sort((a, b) => a.address.localeCompare(b.address));
    for (const d of dests) lines.push(`  -> ${d.address}:${d.port} ${d.forward === 'masq' ? 'Masq' : d.forward} ${d.weight}`);
  }
  return lines;
}

const dns = svc('kube-dns', { clusterIP: '10.96.0.10', ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] }, { namespace: 'kube-system' });
const dnsSlice = (ips: string[]): V1EndpointSlice => slice('kube-dns', 'kube-dns-1', [{ name: 'dns', port: 53, protocol: 'UDP' }], ips.map((ip) => ({ ip })), { namespace: 'kube-system' });

test('engine e2e: the example programs exactly the expected table; a resync writes nothing', async () => {
  const set = await loadManifests([EXAMPLE]);
  const model = translate({ services: [...set.services, dns], endpointSlices: [...set.endpointSlices, dnsSlice(['10.244.0.2', '10.244.0.3'])], node });
  const ipvs = new FakeIpvs();
  const engine = new Engine({ ipvs }, { managedCidrs: ['10.96.0.0/12'] });
  const r1 = await engine.sync({ services: model.services });
  assert.deepEqual(r1.errors, []);
  const table = [
    'TCP 10.0.0.11:30080 rr',
    '  -> 192.168.1.10:8000 Masq 1',
    '  -> 192.168.2.10:8000 Masq 1',
    'TCP 10.105.250.129:80 rr',
    '  -> 192.168.0.7:80 Masq 1',
    '  -> 192.168.1.3:80 Masq 1',
    '  -> 192.168.1.4:80 Masq 1',
    'TCP 10.96.100.10:8080 rr',
    '  -> 192.168.1.10:8000 Masq 1',
    '  -> 192.168.2.10:8000 Masq 1',
    'TCP 10.96.100.20:80 rr persistent 600',
    '  -> 192.168.1.20:8080 Masq 1',
    '  -> 192.168.1.21:8080 Masq 1',
    'UDP 10.96.0.10:53 rr',
    '  -> 10.244.0.2:53 Masq 1',
    '  -> 10.244.0.3:53 Masq 1',
  ];
  assert.deepEqual(await kernelTable(ipvs), table);
  assert.equal(r1.ipvs.writes, 5 + 11);

  const writes = ipvs.writes;
  const again = translate({ services: [...set.services, dns], endpointSlices: [...set.endpointSlices, dnsSlice(['10.244.0.2', '10.244.0.3'])], node });
  const r2 = await engine.sync({ services: again.services });
  assert.equal(r2.ipvs.writes, 0);
  assert.equal(ipvs.writes, writes, 'not one write on an unchanged resync');
  assert.deepEqual(await kernelTable(ipvs), table);
});

test('engine e2e: an endpoint going away costs exactly its writes (idle TCP: delete; busy TCP: weight 0; UDP: delete + flow flush)', async () => {
  const web = svc('web', { type: 'NodePort', clusterIP: '10.96.0.1', ports: [{ port: 80, nodePort: 30001 }] });
  const webSlice = (ips: string[]): V1EndpointSlice => slice('web', 'web-1', [{ port: 8080 }], ips.map((ip) => ({ ip })));
  const ipvs = new FakeIpvs();
  const conntrack = new FakeConntrack();
  const flushed = conntrack.deletes;
  const engine = new Engine({ ipvs, conntrack }, { managedCidrs: ['10.96.0.0/12'] });
  const slices = new EndpointSliceTracker();
  const run = (endpointSlices: Parameters<typeof translate>[0]['endpointSlices']) => translate({ services: [web, dns], endpointSlices, node });

  slices.update(webSlice(['10.244.0.1', '10.244.0.2', '10.244.0.3']));
  slices.update(dnsSlice(['10.244.0.2', '10.244.0.3']));
  assert.deepEqual(slices.drain(), new Set(['default/web', 'kube-system/kube-dns']));
  let model = run(slices.list());
  await engine.sync({ services: model.services });
  const base = ipvs.log.length;

  // Idle TCP endpoint removed: it backs the ClusterIP and the NodePort virtual server → 2 deletes.
  slices.update(webSlice(['10.244.0.1', '10.244.0.2']));
  assert.deepEqual(slices.drain(), new Set(['default/web']));
  let next = run(slices.list());
  const changed = new Set(changedServices(model.services, next.services).keys());
  assert.deepEqual([...changed].sort(), ['inet|tcp|10.0.0.11|30001', 'inet|tcp|10.96.0.1|80']);
  let r = await engine.sync({ services: next.services }, changed);
  assert.deepEqual(r.ipvs.ops, { deleteDestination: 2 });
  assert.deepEqual(ipvs.log.slice(base).flat(), [
    { op: 'deleteDestination', service: { family: 'inet', protocol: 'tcp', address: '10.0.0.11', port: 30001 }, dest: { address: '10.244.0.3', port: 8080 } },
    { op: 'deleteDestination', service: { family: 'inet', protocol: 'tcp', address: '10.96.0.1', port: 80 }, dest: { address: '10.244.0.3', port: 8080 } },
  ]);
  model = next;

  // A TCP endpoint with an open connection on the ClusterIP: weight 0 there (drain), deleted
  // on the idle NodePort virtual server → 2 writes.
  ipvs.setConnections({ protocol: 'tcp', address: '10.96.0.1', port: 80 }, { address: '10.244.0.2', port: 8080 }, 1);
  const mark = ipvs.log.length;
  slices.update(webSlice(['10.244.0.1']));
  assert.deepEqual(slices.drain(), new Set(['default/web']));
  next = run(slices.list());
  r = await engine.sync({ services: next.services }, new Set(changedServices(model.services, next.services).keys()));
  assert.deepEqual(r.ipvs.ops, { deleteDestination: 1, updateDestination: 1 });
  const ops = ipvs.log.slice(mark).flat();
  assert.equal(ops.length, 2);
  assert.deepEqual(
    ops.map((o) => ('dest' in o ? `${o.op} ${(o.service as { address: string }).address} ${o.dest.address} w=${'weight' in o.dest ? o.dest.weight : '-'}` : o.op)).sort(),
    ['deleteDestination 10.0.0.11 10.244.0.2 w=-', 'updateDestination 10.96.0.1 10.244.0.2 w=0'],
  );
  model = next;

  // A UDP endpoint removed: one delete and its conntrack flows flushed (a client's flow to the
  // DNS VIP answered by that endpoint, and an unrelated one that must stay).
  const flow = (replySrc: string) => ({
    family: 'inet' as const, proto: 'udp' as const, status: 0, timeout: 30, mark: 0, id: 1, use: 1,
    orig: { src: '10.0.0.99', dst: '10.96.0.10', sport: 40000, dport: 53 },
    reply: { src: replySrc, dst: '10.0.0.99', sport: 53, dport: 40000 },
  });
  conntrack.flows = [flow('10.244.0.2'), flow('10.244.0.3')];
  const m3 = ipvs.log.length;
  slices.update(dnsSlice(['10.244.0.3']));
  assert.deepEqual(slices.drain(), new Set(['kube-system/kube-dns']));
  next = run(slices.list());
  r = await engine.sync({ services: next.services }, new Set(changedServices(model.services, next.services).keys()));
  assert.deepEqual(ipvs.log.slice(m3).flat(), [
    { op: 'deleteDestination', service: { family: 'inet', protocol: 'udp', address: '10.96.0.10', port: 53 }, dest: { address: '10.244.0.2', port: 53 } },
  ]);
  assert.equal(r.flowsFlushed, 1);
  assert.deepEqual(conntrack.flows.map((f) => f.reply.src), ['10.244.0.3'], 'the other endpoint\'s flow stays');
  assert.deepEqual(flushed, [{ family: 'inet', proto: 'udp', origDst: '10.96.0.10', origDport: 53, replySrc: '10.244.0.2', replySport: 53 }]);

  // Service deleted: its virtual servers go (they are in the changed set although absent now).
  model = next;
  const m4 = ipvs.log.length;
  next = translate({ services: [dns], endpointSlices: slices.list(), node });
  r = await engine.sync({ services: next.services }, new Set(changedServices(model.services, next.services).keys()));
  assert.equal(r.ipvs.ops.deleteService, 2);
  assert.deepEqual((await ipvs.services()).map((s) => `${s.protocol} ${s.address}:${s.port}`), ['udp 10.96.0.10:53']);
  assert.deepEqual(
    ipvs.log.slice(m4).flat().map((o) => o.op),
    ['deleteService', 'deleteService'],
  );
});
