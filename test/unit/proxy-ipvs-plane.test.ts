// The IPVS data plane kept between steps must give exactly what the plane from nothing gives
// (translate(), its desired state), after any sequence of changes; the changes it names, made to
// the last step's desired state, give the new one; and a step takes only the services changed.
import { test } from 'node:test';
import { elementList } from '../../src/kernel/nftables.js';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { IpvsPlane } from '../../src/proxy/ipvs/plane.js';
import { serviceKey, type DesiredService } from '../../src/engine/ipvs-model.js';
import type { NodeInfo, ProxyConfig } from '../../src/kube/types.js';
import type { DesiredChanges, DesiredState } from '../../src/engine/engine.js';
import type { PlaneSources } from '../../src/proxy/data-plane.js';
import { keyText } from '../../src/proxy/element-store.js';
import { slice, svc } from '../fixtures/kube/builders.js';
import { prng as rng } from '../helpers/bytes.js';

const NODE: NodeInfo = { name: 'node-a', addresses: ['10.0.0.11', '2001:db8::11'] };
const CONFIG: ProxyConfig = { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/29'] };

function makeService(r: () => number, i: number, version: number): V1Service {
  const pick = <T>(xs: T[]): T => xs[Math.floor(r() * xs.length)]!;
  // A small address space, so services collide on virtual servers now and then.
  const clusterIP = `10.96.0.${1 + Math.floor(r() * 12)}`;
  const type = pick(['ClusterIP', 'ClusterIP', 'NodePort', 'LoadBalancer'] as const);
  const ports = [{ name: 'http', port: pick([80, 80, 443]), protocol: pick(['TCP', 'TCP', 'UDP']), ...(type !== 'ClusterIP' ? { nodePort: 30000 + Math.floor(r() * 20) } : {}) }];
  return svc(
    `s${i}`,
    {
      type,
      clusterIP,
      ports,
      ...(r() < 0.2 ? { externalIPs: [pick(['192.0.2.1', '192.0.2.2', '10.0.0.11'])] } : {}),
      ...(r() < 0.3 && type !== 'ClusterIP' ? { externalTrafficPolicy: 'Local' } : {}),
      ...(r() < 0.2 ? { internalTrafficPolicy: 'Local' } : {}),
      ...(r() < 0.2 ? { sessionAffinity: 'ClientIP' } : {}),
      ...(type === 'LoadBalancer' && r() < 0.5 ? { loadBalancerSourceRanges: ['203.0.113.0/24'], healthCheckNodePort: 32000 + i } : {}),
    },
    {
      annotations: { version: String(version), ...(r() < 0.2 ? { 'ipvs.ipvsync.io/scheduler': pick(['lc', 'sh', 'bogus']) } : {}) },
      ...(type === 'LoadBalancer' ? { ingress: [{ ip: `198.51.100.${1 + Math.floor(r() * 4)}` }] } : {}),
    },
  );
}

function makeSlice(r: () => number, i: number, k: number): V1EndpointSlice {
  const n = Math.floor(r() * 4);
  const eps = Array.from({ length: n }, (_, j) => ({
    // now and then a pod that other services select too (their hairpin entries are shared)
    ip: r() < 0.4 ? `10.244.200.${1 + Math.floor(r() * 2)}` : `10.244.${i}.${1 + Math.floor(r() * 50) + j}`,
    node: r() < 0.4 ? 'node-a' : 'node-b',
    ...(r() < 0.15 ? { ready: false, serving: r() < 0.5, terminating: true } : {}),
  }));
  return slice(`s${i}`, `s${i}-${k}`, [{ name: 'http', port: 8080 + Math.floor(r() * 2) }], eps);
}


/** What the proxier hands a plane, over these objects. */
function sources(services: Map<string, V1Service>, slices: Map<string, V1EndpointSlice>, node: NodeInfo, config: ProxyConfig): PlaneSources {
  return {
    node,
    config,
    serviceCIDRs: undefined,
    size: services.size,
    names: () => [...services.keys()].map((n) => `default/${n}`).sort(),
    objectsOf: (name) => {
      const s = services.get(name.slice('default/'.length));
      return s && { svc: s, slices: [...slices.values()].filter((sl) => `default/${sl.metadata!.labels!['kubernetes.io/service-name']}` === name) };
    },
  };
}

/** A desired state in one order: virtual servers by key, VIPs, set elements by key. */
function normal(d: DesiredState) {
  return {
    services: [...d.services].sort((a, b) => (serviceKey(a) < serviceKey(b) ? -1 : 1)),
    vips: [...(d.vips?.addresses ?? [])].sort(),
    routes: d.routes,
    nft: [d.nft ?? []].flat().map((t) => ({ ...t, sets: t.sets.map((s) => ({ ...s, elements: [...elementList(s.elements)].sort((a, b) => (keyText(a) < keyText(b) ? -1 : 1)) })) })),
    ipsets: d.ipsets,
  };
}

/** The kernel as the engine would leave it: the last desired state with the changes named made
 *  to it (none named: the desired state itself, compared in full). */
class Applied {
  services = new Map<string, DesiredService>();
  sets = new Map<string, Map<string, unknown>>();
  take(d: DesiredState, c: DesiredChanges | undefined): void {
    if (c?.services) for (const [k, v] of c.services) v ? this.services.set(k, v) : this.services.delete(k);
    else this.services = new Map(d.services.map((s) => [serviceKey(s), s]));
    if (c?.nft)
      for (const x of c.nft) {
        const m = this.sets.get(`${x.family} ${x.set}`)!;
        for (const e of x.delete) m.delete(keyText(e));
        for (const e of elementList(x.add)) m.set(keyText(e), e);
      }
    else this.sets = new Map([d.nft ?? []].flat().flatMap((t) => t.sets.map((s) => [`${t.family} ${s.name}`, new Map(elementList(s.elements).map((e) => [keyText(e), e]))] as const)));
  }
  check(d: DesiredState, what: string): void {
    assert.deepStrictEqual(new Map([...this.services].sort()), new Map(d.services.map((s) => [serviceKey(s), s] as const).sort()), `${what}: virtual servers`);
    for (const t of [d.nft ?? []].flat())
      for (const s of t.sets) assert.deepStrictEqual([...this.sets.get(`${t.family} ${s.name}`)!.keys()].sort(), elementList(s.elements).map(keyText).sort(), `${what}: ${t.family} ${s.name}`);
  }
}

test('the IPVS plane kept between steps equals the plane from nothing through random changes, and names exactly what changed', () => {
  let patched = 0;
  let sawConflict = false;
  let sawHandOver = false;
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    const r = rng(seed);
    const services = new Map<string, V1Service>();
    const slices = new Map<string, V1EndpointSlice>();
    let version = 0;
    for (let i = 0; i < 25; i++) {
      services.set(`s${i}`, makeService(r, i, version++));
      slices.set(`s${i}-0`, makeSlice(r, i, 0));
      if (r() < 0.3) slices.set(`s${i}-1`, makeSlice(r, i, 1));
    }
    let node = NODE;
    let config = CONFIG;
    for (const bindMode of ['address', 'route'] as const) {
      const opts = { vipLink: 'kube-ipvs0', glue: true, kubeIpsets: bindMode === 'address', bindMode };
      const plane = new IpvsPlane(opts);
      const applied = new Applied();
      let step0 = plane.step(true, new Set(), sources(services, slices, node, config));
      applied.take(step0.desired, step0.changes);
      plane.applied(true);
      for (let step = 0; step < 60; step++) {
        const touched = new Set<string>();
        const changes = 1 + Math.floor(r() * 3);
        const context = JSON.stringify([node, config]);
        for (let c = 0; c < changes; c++) {
          const i = Math.floor(r() * 30);
          const what = r();
          if (what < 0.35) {
            slices.set(`s${i}-0`, makeSlice(r, i, 0));
            touched.add(`default/s${i}`);
          } else if (what < 0.55) {
            services.set(`s${i}`, makeService(r, i, version++));
            touched.add(`default/s${i}`);
          } else if (what < 0.65) {
            if (services.delete(`s${i}`)) touched.add(`default/s${i}`);
          } else if (what < 0.75) {
            if (slices.delete(`s${i}-1`) || slices.delete(`s${i}-0`)) touched.add(`default/s${i}`);
          } else if (what < 0.78) {
            node = { ...node, addresses: r() < 0.5 ? ['10.0.0.11'] : ['10.0.0.11', '10.0.0.12', '2001:db8::11'] };
          } else if (what < 0.8) {
            config = { ...config, scheduler: r() < 0.5 ? 'wrr' : 'rr' };
          } // else: nothing changes (a no-op resync)
        }
        const src = sources(services, slices, node, config);
        const warned = (s: typeof step0) => s.summary.warnings.filter((w) => w.message.includes('already belongs to')).map((w) => w.service);
        const before = warned(step0);
        step0 = plane.step(r() < 0.1, touched, src);
        plane.applied(true);
        if (step0.changes?.services && step0.changes.services.size < 50) patched++;
        const fresh = new IpvsPlane(opts);
        const want = fresh.step(true, new Set(), src);
        const what = `seed ${seed} ${bindMode} step ${step}`;
        assert.deepStrictEqual(normal(step0.desired), normal(want.desired), `${what}: desired state`);
        assert.deepStrictEqual(step0.summary, want.summary, `${what}: summary`);
        assert.deepStrictEqual(plane.model(true), fresh.model(true), `${what}: model`);
        applied.take(step0.desired, step0.changes);
        applied.check(step0.desired, what);
        if (warned(step0).length) sawConflict = true;
        if (before.some((s) => !warned(step0).includes(s) && services.has(s.slice('default/'.length)))) sawHandOver = true;
        if (!touched.size && step0.changes?.services && context === JSON.stringify([node, config])) assert.equal(step0.changes.services.size + (step0.changes.nft?.length ?? 0), 0, `${what}: nothing changed, nothing named`);
      }
    }
  }
  assert.ok(patched >= 400, `steps patched: ${patched}`);
  assert.ok(sawConflict && sawHandOver, 'conflicts and hand-overs were taken');
});

test('an endpoint change names its virtual server and hairpin element only; a conflict warns the later service', () => {
  const services = new Map([
    ['a', svc('a', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] })],
    ['b', svc('b', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] })], // conflicts with a: a keeps it
    ['c', svc('c', { clusterIP: '10.96.0.3', ports: [{ port: 53, protocol: 'UDP' }, { port: 53, name: 'tcp' }] })],
  ]);
  const eps = (s: string, ip: string, node = 'node-b') => slice(s, `${s}-1`, [{ port: 8080 }, { name: 'tcp', port: 8053 }], [{ ip, node }]);
  const slices = new Map([['a-1', eps('a', '10.244.0.5')], ['b-1', eps('b', '10.244.0.6')], ['c-1', eps('c', '10.244.0.7')]]);
  const plane = new IpvsPlane({ vipLink: 'kube-ipvs0', glue: true, kubeIpsets: false, bindMode: 'address' });
  const first = plane.step(true, new Set(), sources(services, slices, NODE, CONFIG));
  plane.applied(true);
  assert.deepEqual(first.summary.warnings, [{ service: 'default/b', message: 'clusterIP 10.96.0.1:80/tcp already belongs to default/a, ignored' }]);

  slices.set('c-1', eps('c', '10.244.0.9'));
  const second = plane.step(false, new Set(['default/c']), sources(services, slices, NODE, CONFIG));
  plane.applied(true);
  // c's TCP port: its new endpoint; its UDP port has no endpoint (no UDP slice port): unchanged
  assert.deepEqual([...second.changes!.services!].map(([k, v]) => `${k} ${v!.destinations.map((d) => d.address)}`), ['inet|tcp|10.96.0.3|53 10.244.0.9']);
  assert.deepEqual(second.changes!.nft, []);

  // b's virtual server is a's: b's new endpoint changes nothing
  slices.set('b-1', eps('b', '10.244.0.8'));
  const third = plane.step(false, new Set(['default/b']), sources(services, slices, NODE, CONFIG));
  plane.applied(true);
  assert.deepEqual([...third.changes!.services!], []);

  // an endpoint moving to this node: its hairpin element
  slices.set('a-1', eps('a', '10.244.0.5', 'node-a'));
  const fourth = plane.step(false, new Set(['default/a']), sources(services, slices, NODE, CONFIG));
  assert.deepEqual(fourth.changes!.nft, [{ family: 'ip', table: 'ipvsync', set: 'hairpin', add: [{ key: ['10.244.0.5', 'tcp', 8080, '10.244.0.5'] }], delete: [] }]);
  assert.deepEqual(fourth.model!.glue.hairpin, [{ address: '10.244.0.5', protocol: 'tcp', port: 8080 }]);
  plane.applied(true);

  // a goes: b, which wanted its virtual server, has it now, without a rebuild
  services.delete('a');
  const fifth = plane.step(false, new Set(['default/a']), sources(services, slices, NODE, CONFIG));
  assert.deepEqual([...fifth.changes!.services!].map(([k, v]) => `${k} ${v?.destinations.map((d) => d.address)}`), ['inet|tcp|10.96.0.1|80 10.244.0.8']);
  assert.deepEqual(fifth.summary.warnings, []);
});
