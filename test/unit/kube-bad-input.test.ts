// One broken Service never affects the others (issue 43). Every field translate reads, of a
// Service (two: source ranges in the spec and in the legacy annotation) and of an
// EndpointSlice, gets each of a set of bad values — host bits, a /33, leading zeros, a
// v4-mapped address, whitespace, the empty string, huge, negative and non-integer numbers,
// NaN, wrong types — next to a good ClusterIP service, through the Proxier onto the fake
// kernel: the sync reports no error, the good virtual server and its glue are programmed every
// time, and every value in the model is one the kernel layer takes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { Proxier } from '../../src/proxy/proxier.js';
import { translate } from '../../src/proxy/ipvs/plane.js';
import { FakeIpvs } from '../../src/testing/fake-ipvs.js';
import { FakeLinks, FakeNftables } from '../../src/testing/fake-kernel.js';
import { loadConfig } from '../../src/daemon/config.js';
import { canonicalAddress, cidrText, parseCidrText, validIp } from '../../src/net/address.js';
import type { ProxyModel } from '../../src/proxy/ipvs/types.js';
import { slice, svc } from '../fixtures/kube/builders.js';

const NODE = { name: 'node-a', addresses: ['10.0.0.11', '127.0.0.1'], zone: 'zone-a' };
const CONFIG = { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] };

const good = svc('good', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] });
const goodSlice = slice('good', 'good-1', [{ name: 'http', port: 8080 }], [{ ip: '10.244.1.5' }]);

/** A Service with every field translate reads set (good values; its addresses and ports by
 *  `i`): the one that is broken. */
function victim(name: string, i = 20): V1Service {
  return svc(
    name,
    {
      type: 'LoadBalancer',
      clusterIP: `10.96.0.${i}`,
      clusterIPs: [`10.96.0.${i}`, `fd00:96::${i}`],
      externalIPs: [`203.0.113.${i}`, `2001:db8::9:${i}`],
      ports: [{ name: 'https', port: 443, protocol: 'TCP', nodePort: 30000 + i, targetPort: 8443 as never }],
      loadBalancerSourceRanges: ['198.51.100.0/24', '2001:db8:1::/48'],
      sessionAffinity: 'ClientIP',
      sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } },
      healthCheckNodePort: 32000 + i,
      externalTrafficPolicy: 'Local',
      internalTrafficPolicy: 'Cluster',
    },
    {
      ingress: [{ ip: `192.0.2.${i}` }, { ip: `2001:db8::10:${i}`, ipMode: 'VIP' }],
      annotations: {
        'ipvsync.io/scheduler': 'mh',
        'ipvsync.io/scheduler-flags': 'mh-fallback,mh-port',
      },
    },
  );
}

function victimSlice(service: string): V1EndpointSlice {
  const s = slice(service, `${service}-1`, [{ name: 'https', port: 8443, protocol: 'TCP' }], [
    { ip: '10.244.2.7', node: 'node-a', zones: ['zone-a'], nodes: ['node-a'], ready: true, serving: true, terminating: false },
    { ip: '10.244.3.7', node: 'node-b', zones: ['zone-b'], nodes: ['node-b'] },
  ]);
  (s.endpoints[0] as { zone?: string }).zone = 'zone-a';
  return s;
}

type Path = ReadonlyArray<string | number>;

/** Every field of a Service translate reads. */
const SERVICE_FIELDS: Path[] = [
  ['spec', 'clusterIP'], ['spec', 'clusterIPs'], ['spec', 'clusterIPs', 0], ['spec', 'clusterIPs', 1],
  ['spec', 'externalIPs'], ['spec', 'externalIPs', 0], ['spec', 'externalIPs', 1],
  ['spec', 'ports'], ['spec', 'ports', 0], ['spec', 'ports', 0, 'port'], ['spec', 'ports', 0, 'protocol'], ['spec', 'ports', 0, 'nodePort'],
  ['spec', 'ports', 0, 'name'], ['spec', 'ports', 0, 'targetPort'],
  ['spec', 'loadBalancerSourceRanges'], ['spec', 'loadBalancerSourceRanges', 0], ['spec', 'loadBalancerSourceRanges', 1],
  ['status'], ['status', 'loadBalancer'], ['status', 'loadBalancer', 'ingress'], ['status', 'loadBalancer', 'ingress', 0],
  ['status', 'loadBalancer', 'ingress', 0, 'ip'], ['status', 'loadBalancer', 'ingress', 1, 'ipMode'],
  ['spec', 'sessionAffinity'], ['spec', 'sessionAffinityConfig'], ['spec', 'sessionAffinityConfig', 'clientIP', 'timeoutSeconds'],
  ['spec', 'healthCheckNodePort'], ['spec', 'externalTrafficPolicy'], ['spec', 'internalTrafficPolicy'], ['spec', 'type'],
  ['metadata', 'annotations'], ['metadata', 'annotations', 'ipvsync.io/scheduler'], ['metadata', 'annotations', 'ipvsync.io/scheduler-flags'],
  ['metadata', 'labels'], ['metadata', 'labels', 'service.kubernetes.io/service-proxy-name'], ['metadata', 'namespace'], ['spec'],
];

/** Every field of an EndpointSlice translate reads. */
const SLICE_FIELDS: Path[] = [
  ['addressType'], ['endpoints'], ['endpoints', 0], ['endpoints', 0, 'addresses'], ['endpoints', 0, 'addresses', 0],
  ['endpoints', 0, 'conditions'], ['endpoints', 0, 'conditions', 'ready'], ['endpoints', 0, 'conditions', 'serving'],
  ['endpoints', 0, 'conditions', 'terminating'], ['endpoints', 0, 'nodeName'], ['endpoints', 0, 'zone'], ['endpoints', 0, 'hints'],
  ['endpoints', 0, 'hints', 'forZones'], ['endpoints', 0, 'hints', 'forZones', 0], ['endpoints', 0, 'hints', 'forZones', 0, 'name'],
  ['endpoints', 0, 'hints', 'forNodes'], ['endpoints', 0, 'hints', 'forNodes', 0, 'name'],
  ['ports'], ['ports', 0], ['ports', 0, 'port'], ['ports', 0, 'protocol'], ['ports', 0, 'name'],
  ['metadata', 'labels'], ['metadata', 'labels', 'kubernetes.io/service-name'], ['metadata', 'name'], ['metadata', 'namespace'],
];

const BAD: readonly unknown[] = [
  '203.0.113.7/24', '10.0.0.0/33', '2001:db8::1/129', '10.0.0.01', '::ffff:1.2.3.4', '::ffff:1.2.3.4/120', ' 10.96.0.99 ', ' 198.51.100.0/24 ',
  '', '   ', 'x'.repeat(300), 1e308, 2 ** 53 + 2, -1, 0, 1.5, 65536, NaN, Infinity, true, null, {}, [], ['10.0.0.1/8'], [7], { ip: '10.0.0.1' },
];

function setAt(root: unknown, path: Path, value: unknown): void {
  let o = root as Record<string | number, unknown>;
  for (const k of path.slice(0, -1)) {
    if (typeof o[k] !== 'object' || o[k] === null) o[k] = {};
    o = o[k] as Record<string | number, unknown>;
  }
  o[path[path.length - 1]!] = value;
}

function withValue<T>(obj: T, path: Path, value: unknown): T {
  const copy = structuredClone(obj);
  setAt(copy, path, value);
  return copy;
}

/** Every value of the model is one the kernel layer takes. */
function assertKernelValues(m: ProxyModel, what: string): void {
  const port = (p: unknown) => Number.isInteger(p) && (p as number) >= 1 && (p as number) <= 65535;
  const ip = (a: unknown) => typeof a === 'string' && validIp(a) === a;
  const cidr = (c: string) => {
    const p = parseCidrText(c);
    return p !== undefined && cidrText(p) === c;
  };
  for (const s of m.services) {
    const a = s as { address: string; port: number };
    assert.ok(ip(a.address) && port(a.port), `${what}: virtual server ${a.address}:${a.port}`);
    for (const d of s.destinations) assert.ok(ip(d.address) && port(d.port), `${what}: destination ${d.address}:${d.port}`);
    if (s.timeout !== undefined) assert.ok(Number.isInteger(s.timeout) && s.timeout > 0 && s.timeout <= 86400, `${what}: timeout ${s.timeout}`);
  }
  for (const v of m.vips) assert.ok(ip(v), `${what}: vip ${v}`);
  const g = m.glue;
  for (const c of g.clusterCIDRs) assert.ok(cidr(c), `${what}: cluster CIDR ${c}`);
  for (const v of [...g.vips, ...g.hairpin, ...g.sourceRanges]) assert.ok(ip(v.address) && port(v.port), `${what}: glue ${v.address}:${v.port}`);
  for (const r of g.sourceRanges) for (const c of r.cidrs) assert.ok(cidr(c), `${what}: source range ${c}`);
  for (const n of g.nodePorts) assert.ok(port(n.port), `${what}: node port ${n.port}`);
  for (const a of g.nodePortAddresses) assert.ok(ip(a), `${what}: node port address ${a}`);
  for (const p of g.healthCheckNodePorts) assert.ok(port(p), `${what}: health check node port ${p}`);
  for (const w of m.warnings) assert.ok(typeof w.service === 'string' && typeof w.message === 'string' && w.service !== 'default/good', `${what}: warning ${JSON.stringify(w)}`);
  // Every bad value is a typed warning, none a JavaScript error caught around a service.
  for (const w of m.warnings) assert.ok(!w.message.startsWith('not programmed:'), `${what}: raw error ${JSON.stringify(w)}`);
}

/** A sync of the good service and `objects` on a fresh fake kernel: the good one programmed. */
async function assertGoodProgrammed(services: V1Service[], slices: V1EndpointSlice[], what: string): Promise<ProxyModel> {
  const kernel = { ipvs: new FakeIpvs(), links: new FakeLinks(), nft: new FakeNftables() };
  const p = new Proxier(kernel, { node: NODE, config: CONFIG, vipLink: 'kube-ipvs0', glue: true });
  for (const s of [good, ...services]) p.onServiceUpdate(s);
  for (const s of [goodSlice, ...slices]) p.onSliceUpdate(s);
  const r = await p.sync(true);
  assert.deepEqual(r.report.errors.map((e) => e.message), [], what);
  const vs = (await kernel.ipvs.services({ withDestinations: true })).find((s) => s.address === '10.96.0.10' && s.port === 80 && s.protocol === 'tcp');
  assert.ok(vs, `${what}: the good virtual server`);
  assert.deepEqual(vs.destinations?.map((d) => `${d.address}:${d.port}`), ['10.244.1.5:8080'], what);
  const clusterIps = (await kernel.nft.list()).sets.find((s) => s.family === 'ip' && s.name === 'cluster-ips');
  assert.ok(clusterIps?.elements?.some((e) => e.key.join(' . ') === '10.96.0.10 . tcp . 80'), `${what}: the good cluster IP in the glue`);
  assert.ok((await kernel.links.addresses({ link: 'kube-ipvs0' })).some((a) => a.address === '10.96.0.10'), `${what}: the good VIP bound`);
  assertKernelValues(r.model!, what);
  return r.model!;
}

test('the broken objects themselves, unbroken, are programmed in full (so the cases below break something that counts)', async () => {
  const m = await assertGoodProgrammed([victim('lb', 1), victim('lb-2', 2)], [victimSlice('lb'), victimSlice('lb-2')], 'unbroken');
  assert.deepEqual(m.warnings, []);
  for (const [name, i] of [['lb', 1], ['lb-2', 2]] as const) {
    const ranges = m.glue.sourceRanges.filter((r) => r.servicePort === `default/${name}:https`);
    assert.deepEqual(ranges.map((r) => `${r.address} ${r.cidrs.join(',')}`), [`192.0.2.${i} 198.51.100.0/24`, `2001:db8::10:${i} 2001:db8:1::/48`]);
    assert.ok(m.services.some((s) => 'address' in s && s.address === `203.0.113.${i}`));
    assert.ok(m.services.some((s) => 'address' in s && s.address === '10.0.0.11' && s.port === 30000 + i));
  }
  assert.deepEqual(m.healthChecks.map((h) => `${h.service} ${h.nodePort} ${h.localEndpoints}`), ['default/lb 32001 1', 'default/lb-2 32002 1']);
});

test('every field of a Service, every bad value: the good service is programmed, the model only holds what the kernel takes', async () => {
  const cases: Array<{ svc: V1Service; what: string }> = [];
  for (const path of SERVICE_FIELDS) for (const v of BAD) cases.push({ svc: withValue(victim('lb'), path, v), what: `Service ${path.join('.')} = ${String(v)}` });
  for (const c of cases) await assertGoodProgrammed([c.svc], [victimSlice(c.svc.metadata!.name!)], c.what);
});

test('every field of an EndpointSlice, every bad value: the good service is programmed', async () => {
  for (const path of SLICE_FIELDS) {
    for (const v of BAD) await assertGoodProgrammed([victim('lb')], [withValue(victimSlice('lb'), path, v)], `EndpointSlice ${path.join('.')} = ${String(v)}`);
  }
});

test('issue 43: a source range with host bits set is programmed as its network, the service kept', async () => {
  const lb = svc('lb', { type: 'LoadBalancer', clusterIP: '10.96.0.20', loadBalancerSourceRanges: ['203.0.113.7/24', '10.0.0.0/33', ' 2001:db8::1/64 '], ports: [{ port: 443, nodePort: 30443 }] }, { ingress: [{ ip: '198.51.100.7' }] });
  const m = await assertGoodProgrammed([lb], [], 'host bits');
  assert.deepEqual(m.glue.sourceRanges.map((r) => r.cidrs), [['203.0.113.0/24']]);
  assert.deepEqual(m.warnings, [{ service: 'default/lb', message: 'loadBalancerSourceRanges: "10.0.0.0/33" is not a CIDR, ignored' }]);
  assert.ok(m.services.some((s) => 'address' in s && s.address === '198.51.100.7' && s.port === 443));
});

test('config CIDRs reach the model as their network: clusterCIDRs with host bits or whitespace, a bad one a warning; nodePortAddresses likewise', () => {
  const lb = svc('np', { type: 'NodePort', clusterIP: '10.96.0.20', ports: [{ port: 80, nodePort: 30080 }] });
  const m = translate({
    services: [good, lb],
    endpointSlices: [goodSlice],
    node: { name: 'node-a', addresses: ['10.0.0.11', '192.168.7.1', 'fd00:1::11'] },
    config: { clusterCIDRs: ['10.244.3.1/16', ' fd00:244::1/64 ', '10.0.0.0/33', '10.244.0.0/16'], nodePortAddresses: ['10.0.0.99/24', '192.168.7.01/32', '10.0.0.1/8/8'] },
  });
  assert.deepEqual(m.glue.clusterCIDRs, ['10.244.0.0/16', 'fd00:244::/64']);
  assert.deepEqual(m.glue.nodePortAddresses, ['10.0.0.11', '192.168.7.1', 'fd00:1::11'], 'a leading zero is decimal, as kube-proxy reads it');
  assert.deepEqual(m.warnings, [
    { service: '', message: 'clusterCIDRs: "10.0.0.0/33" is not a CIDR, ignored' },
    { service: '', message: 'nodePortAddresses: "10.0.0.1/8/8" is not a CIDR, ignored' },
  ]);
  assertKernelValues(m, 'config CIDRs');
});

test('every bad value at once, in one sync: the good service is programmed', async () => {
  const services: V1Service[] = [];
  const slices: V1EndpointSlice[] = [];
  let n = 0;
  for (const path of SERVICE_FIELDS) {
    for (const v of BAD) {
      const name = `s${n++}`;
      const s = withValue(victim(name), path, v);
      services.push(s);
      slices.push(victimSlice(name));
    }
  }
  for (const path of SLICE_FIELDS) {
    for (const v of BAD) {
      const name = `e${n++}`;
      services.push(victim(name));
      slices.push(withValue(victimSlice(name), path, v));
    }
  }
  await assertGoodProgrammed(services, slices, 'all at once');
});

test('issue 44: the reported inputs are typed warnings, the rest programmed', async () => {
  const zoned = svc('zoned', { clusterIP: 'fe80::1%eth0', ports: [{ port: 80 }] });
  const ext = svc('ext', { clusterIP: '10.96.0.30', externalIPs: ['fe80::1%eth9', '203.0.113.30'], ports: [{ port: 80 }] });
  const lb = svc('lb', { type: 'LoadBalancer', clusterIP: '10.96.0.40', ports: [{ port: 80 }] }, { ingress: [null as never, { ip: '192.0.2.40' }] });
  const proto = svc('proto', { clusterIP: '10.96.0.50', ports: [{ port: 80 }] });
  const protoSlice = slice('proto', 'proto-1', [{ port: 8080 }], [{ ip: '10.244.5.1' }]);
  protoSlice.ports![0]!.protocol = 6 as never;
  const hinted = svc('hinted', { clusterIP: '10.96.0.60', ports: [{ port: 80 }] });
  const hintedSlice = slice('hinted', 'hinted-1', [{ port: 8080 }], [{ ip: '10.244.6.1', zones: ['zone-a'] }, { ip: '10.244.6.2', zones: ['zone-a'] }]);
  hintedSlice.endpoints[0]!.hints = { forZones: 'zone-a' as never };
  hintedSlice.endpoints[1]!.addresses = [7 as never];
  const m = await assertGoodProgrammed([zoned, ext, lb, proto, hinted], [protoSlice, hintedSlice], 'issue 44');
  const table = m.services.map((s) => {
    const a = s as { address: string; port: number };
    return `${a.address}:${a.port} ${s.destinations.map((d) => `${d.address}:${d.port}`).join(',')}`;
  });
  assert.deepEqual(table.sort(), [
    '10.96.0.10:80 10.244.1.5:8080',
    '10.96.0.30:80 ',
    '10.96.0.40:80 ',
    '10.96.0.50:80 ', // a slice port of protocol 6 is no TCP port: no endpoints
    '10.96.0.60:80 10.244.6.1:8080', // hints of the wrong type are none; a number is no address
    '192.0.2.40:80 ',
    '203.0.113.30:80 ',
  ]);
  assert.deepEqual(m.warnings, [
    { service: 'default/ext', message: 'externalIP "fe80::1%eth9" is not an IP address, ignored' },
    { service: 'default/proto', message: 'EndpointSlice default/proto-1: ports[0].protocol 6 is not a protocol name, port ignored' },
    { service: 'default/zoned', message: 'clusterIP "fe80::1%eth0" is not an IP address, ignored' },
  ]);
});

test('zone-indexed addresses: not IPs; canonicalAddress never throws; nodeIPs (--node-ip) names a bad value', () => {
  assert.equal(validIp('fe80::1%eth0'), undefined);
  assert.equal(validIp('fe80::1'), 'fe80::1');
  assert.equal(canonicalAddress('fe80::1%eth0'), 'fe80::1%eth0');
  assert.equal(canonicalAddress('fd00:0::1'), 'fd00::1');
  assert.deepEqual(loadConfig({ flags: { nodeIp: [' 10.0.0.11', '2001:DB8::1'] } }).config.nodeIPs, ['10.0.0.11', '2001:db8::1']);
  assert.deepEqual(loadConfig({}).config.nodeIPs, []);
  for (const bad of ['fe80::1%eth9', '10.0.0.01'])
    assert.throws(() => loadConfig({ flags: { nodeIp: ['10.0.0.1', bad] } }), (e: Error) => e.message.includes(`--node-ip: "${bad}" is not an IP address`));
});
