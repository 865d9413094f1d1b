// translate's orders without comparators that parse text on every call: the numeric keys agree
// with the comparators, a keyed sort equals a comparator sort, and a service port's endpoints
// come sorted and unique as a Map by address and port would have them (a later slice wins).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EndpointSlice } from '@kubernetes/client-node';
import { addressProtoPortKey, compareAddressProtoPort } from '../../src/kube/address.js';
import { addressKey, compareAddress } from '../../src/net/address.js';
import { endpointsForPort, type EndpointInfo } from '../../src/kube/endpoints.js';
import { sortByKey } from '../../src/util/sorted.js';
import { prng } from '../helpers/bytes.js';
import { IpvsPlane } from '../../src/proxy/ipvs/plane.js';
import { NODE, slice as kubeSlice, svc } from '../fixtures/kube/builders.js';

type Vip = { address: string; protocol: string; port: number };

function randomVip(r: () => number): Vip {
  const v4 = () => `10.${Math.floor(r() * 3)}.${Math.floor(r() * 3)}.${Math.floor(r() * 12)}`;
  const v6 = () => (r() < 0.5 ? `fd00::${Math.floor(r() * 20).toString(16)}` : `2001:db8:0:${Math.floor(r() * 4)}::1`);
  const protocols = ['tcp', 'udp', 'sctp', 'icmp'];
  return {
    address: r() < 0.8 ? v4() : v6(),
    protocol: protocols[Math.floor(r() * (r() < 0.95 ? 3 : 4))]!,
    port: [0, 1, 53, 80, 443, 8080, 65535][Math.floor(r() * 7)]!,
  };
}

test('addressProtoPortKey and addressKey agree with compareAddressProtoPort and compareAddress wherever they give numbers', () => {
  const r = prng(21);
  let compared = 0;
  for (let i = 0; i < 20000; i++) {
    const a = randomVip(r);
    const b = randomVip(r);
    const ka = addressProtoPortKey(a);
    const kb = addressProtoPortKey(b);
    assert.equal(Number.isNaN(ka), a.address.includes(':') || a.protocol === 'icmp', JSON.stringify(a));
    if (!Number.isNaN(ka) && !Number.isNaN(kb)) {
      compared++;
      assert.equal(Math.sign(ka - kb), Math.sign(compareAddressProtoPort(a, b)), `${JSON.stringify(a)} ${JSON.stringify(b)}`);
    }
    const na = addressKey(a.address);
    const nb = addressKey(b.address);
    if (!Number.isNaN(na) && !Number.isNaN(nb)) assert.equal(Math.sign(na - nb), Math.sign(compareAddress(a.address, b.address)));
  }
  assert.ok(compared > 10000, `${compared} pairs compared by key`);
  assert.ok(Number.isNaN(addressKey('fd00::1')) && Number.isNaN(addressKey('010.0.0.1')) && Number.isNaN(addressKey('')));
  assert.ok(Number.isNaN(addressProtoPortKey({ address: '10.0.0.1', protocol: '__proto__', port: 80 })));
});

test('sortByKey sorts as Array.prototype.sort with the comparator does (stable; NaN keys and equal keys by the comparator), in place', () => {
  const r = prng(22);
  for (let round = 0; round < 120; round++) {
    const n = round < 100 ? Math.floor(r() * 300) : 5000 + Math.floor(r() * 20000);
    // kind: what the key leaves out (translate's glue VIPs: equal keys ordered by kind)
    const items = Array.from({ length: n }, (_, i) => ({ ...randomVip(r), kind: r() < 0.5 ? 'b' : 'a', i }));
    const full = (a: Vip & { kind: string }, b: Vip & { kind: string }) => compareAddressProtoPort(a, b) || (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0);
    const want = [...items].sort(full);
    const a = [...items];
    assert.equal(sortByKey(a, addressProtoPortKey, full), a, 'sorted in place');
    assert.deepEqual(a, want, `round ${round} (n ${n})`);
  }
});

test('sortByKey over long lists (IPv4 only, keys across all 50 bits, long runs of equal keys that the comparator orders, keyless elements among them) equals Array.prototype.sort', () => {
  const r = prng(24);
  const kinds = ['a', 'b', 'c'];
  for (let round = 0; round < 24; round++) {
    const n = 256 + Math.floor(r() * (round % 3 === 0 ? 300 : 30000));
    const wide = round % 2 === 0; // addresses over the whole IPv4 space, or a few (long runs)
    const v6share = round % 4 === 1 ? 0.3 : 0;
    const items = Array.from({ length: n }, (_, i) => {
      const address = r() < v6share
        ? `fd00::${Math.floor(r() * 50).toString(16)}`
        : wide
          ? `${Math.floor(r() * 256)}.${Math.floor(r() * 256)}.${Math.floor(r() * 256)}.${Math.floor(r() * 256)}`
          : `10.96.0.${Math.floor(r() * 4)}`;
      return { address, protocol: ['tcp', 'udp', 'sctp'][Math.floor(r() * 3)]!, port: wide ? Math.floor(r() * 65536) : 80, kind: kinds[Math.floor(r() * 3)]!, i };
    });
    const full = (a: (typeof items)[number], b: (typeof items)[number]) => compareAddressProtoPort(a, b) || (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0);
    const want = [...items].sort(full);
    const a = [...items];
    sortByKey(a, addressProtoPortKey, full);
    // deepEqual on the objects: stability too (each item's `i` is its place given)
    assert.deepEqual(a, want, `round ${round} (n ${n}, ${wide ? 'wide' : 'narrow'}, IPv6 ${v6share})`);
  }
});

function slice(name: string, port: number, endpoints: Array<{ ip: string; ready: boolean; node?: string }>, portName = 'http'): V1EndpointSlice {
  return {
    metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': 'svc' } },
    addressType: endpoints.some((e) => e.ip.includes(':')) ? 'IPv6' : 'IPv4',
    ports: [{ name: portName, port, protocol: 'TCP' }],
    endpoints: endpoints.map((e) => ({ addresses: [e.ip], conditions: { ready: e.ready }, ...(e.node ? { nodeName: e.node } : {}) })),
  };
}

/** The specification: one per (address, port), the last seen (slices in the order given,
 *  endpoints in theirs), sorted by address then port. */
function reference(slices: V1EndpointSlice[], family: 'inet' | 'inet6'): Array<Pick<EndpointInfo, 'address' | 'port' | 'ready' | 'local'>> {
  const byKey = new Map<string, Pick<EndpointInfo, 'address' | 'port' | 'ready' | 'local'>>();
  for (const s of slices) {
    if ((s.addressType === 'IPv6' ? 'inet6' : 'inet') !== family) continue;
    for (const e of s.endpoints) {
      const info = { address: e.addresses[0]!, port: s.ports![0]!.port!, ready: e.conditions!.ready!, local: e.nodeName === 'me' };
      byKey.set(`${info.address}|${info.port}`, info);
    }
  }
  return [...byKey.values()].sort((a, b) => compareAddress(a.address, b.address) || a.port - b.port);
}

test('endpointsForPort: sorted by address and port, one per address and port, the later one winning — small lists and long ones', () => {
  const r = prng(23);
  for (let round = 0; round < 400; round++) {
    const v6 = round % 5 === 4;
    const pool = Array.from({ length: 1 + Math.floor(r() * (round % 2 ? 80 : 12)) }, (_, i) => (v6 ? `fd00::${(i * 7 + 1).toString(16)}` : `10.1.${i % 3}.${(i * 37) % 256}`));
    const slices = Array.from({ length: 1 + Math.floor(r() * 4) }, (_, k) =>
      slice(
        `svc-${k}`,
        r() < 0.7 ? 8080 : 9090,
        Array.from({ length: Math.floor(r() * (round % 2 ? 60 : 10)) }, () => ({ ip: pool[Math.floor(r() * pool.length)]!, ready: r() < 0.5, ...(r() < 0.3 ? { node: 'me' } : {}) })),
      ),
    );
    const family = v6 ? 'inet6' : 'inet';
    const got = endpointsForPort(slices, 'http', 'tcp', family, 'me').map((e) => ({ address: e.address, port: e.port, ready: e.ready, local: e.local }));
    assert.deepEqual(got, reference(slices, family), `round ${round}`);
  }
});

test("translate: a service's hairpin entries are unique whether it has a few node-local endpoints (found by a scan) or many (by key), over ports and traffic policies that use the same endpoints twice", () => {
  for (const n of [3, 15, 16, 17, 40]) {
    const eps = Array.from({ length: n }, (_, i) => ({ ip: `10.244.${i >> 8}.${i & 255}`, node: i % 4 === 3 ? 'node-b' : 'node-a' }));
    // two service ports on one target port (same endpoints, same hairpin entries), and a
    // second target port; Local external policy: the external endpoints are a second list
    const s = svc('many', {
      type: 'NodePort',
      externalTrafficPolicy: 'Local',
      clusterIP: '10.96.0.50',
      ports: [
        { name: 'a', port: 80, nodePort: 30080 },
        { name: 'b', port: 81, nodePort: 30081 },
        { name: 'c', port: 82, nodePort: 30082 },
      ],
    });
    const ports = [{ name: 'a', port: 8080 }, { name: 'b', port: 8080 }, { name: 'c', port: 9090 }];
    const plane = new IpvsPlane({ vipLink: 'kube-ipvs0', glue: true, kubeIpsets: false, bindMode: 'address' });
    const step = (e: typeof eps, full: boolean) =>
      plane.step(full, new Set(['default/many']), { node: NODE, config: {}, serviceCIDRs: undefined, size: 1, names: () => ['default/many'], objectsOf: () => ({ svc: s, slices: [kubeSlice('many', 'many-1', ports, e)] }) }).model!;
    const m = step(eps, true);
    const hairpin = (e: typeof eps) => {
      const local = e.filter((x) => x.node === 'node-a').map((x) => x.ip);
      return [...local.map((address) => ({ address, protocol: 'tcp', port: 8080 })), ...local.map((address) => ({ address, protocol: 'tcp', port: 9090 }))].sort(compareAddressProtoPort);
    };
    assert.deepEqual(m.glue.hairpin, hairpin(eps), `${n} endpoints`);
    // Each entry counted once for the service (not as shared by two): the first local endpoint
    // moved away, the next step drops its entries, from the glue's hairpin set too.
    const moved = eps.map((e, i) => (i === 0 ? { ip: e.ip, node: 'node-b' } : e));
    const m2 = step(moved, false);
    assert.deepEqual(m2.glue.hairpin, hairpin(moved), `${n} endpoints, one moved away`);
    assert.ok(![plane.step(false, new Set(['default/many']), { node: NODE, config: {}, serviceCIDRs: undefined, size: 1, names: () => ['default/many'], objectsOf: () => undefined }).desired.nft!].flat().some((t) => t.sets.some((x) => x.name === 'hairpin' && x.elements.length)), 'the service gone: no hairpin element left');
  }
});
