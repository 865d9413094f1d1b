// translate() with a TranslateCache must give exactly what a translation from scratch gives, after
// any sequence of changes, while translating only the services whose objects changed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Service } from '@kubernetes/client-node';
import { TranslateCache, translate, translatePatch } from '../../src/proxy/ipvs/translate.js';
import { serviceKey } from '../../src/engine/ipvs-model.js';
import { GlueCache, desiredState } from '../../src/proxy/ipvs/desired.js';
import { glueTables, patchGlueHairpin } from '../../src/proxy/ipvs/glue.js';
import type { NodeInfo, ProxyConfig } from '../../src/kube/types.js';
import type { GlueHairpin, ProxyModel } from '../../src/proxy/ipvs/types.js';
import type { DesiredState } from '../../src/engine/engine.js';
import { compareAddressProtoPort } from '../../src/kube/address.js';
import { compareElements } from '../../src/proxy/nft-sets.js';
import { slice, svc } from '../fixtures/kube/builders.js';
import { prng as rng } from '../helpers/bytes.js';

const NODE: NodeInfo = { name: 'node-a', addresses: ['10.0.0.11', '2001:db8::11'] };
const CONFIG: ProxyConfig = { scheduler: 'rr', clusterCIDRs: ['10.244.0.0/16'] };

/** A model with its hairpin list sorted (a patched one's is in no order; it holds the same
 *  entries, each once): compared as a translation from scratch makes it. */
function sorted(m: ProxyModel): ProxyModel {
  const hairpin = [...m.glue.hairpin].sort(compareAddressProtoPort);
  assert.equal(new Set(hairpin.map((h) => JSON.stringify(h))).size, hairpin.length, 'hairpin entries unique');
  return { ...m, glue: { ...m.glue, hairpin } };
}

/** A desired state with its hairpin sets sorted and claiming their order (a set patched in
 *  place is in no order and claims none), for comparing with one built from scratch. */
function sortedSets(d: DesiredState): DesiredState {
  const tables = [d.nft ?? []].flat().map((t) => ({
    ...t,
    sets: t.sets.map((s) => {
      if (s.name !== 'hairpin') return s;
      const elements = [...s.elements].sort(compareElements);
      for (let i = 1; i < elements.length; i++) assert.ok(compareElements(elements[i - 1]!, elements[i]!) < 0, 'hairpin elements unique');
      return { ...s, elements };
    }),
  }));
  return { ...d, ...(d.nft ? { nft: tables } : {}) };
}

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

test('translate with a cache equals translate from scratch through random changes, and re-translates only changed services', () => {
  const paths = { patched: 0, merged: 0 };
  // patched steps that changed the hairpin entries of pods several services share
  let patchedShared = 0;
  const gluePaths = { reused: 0, patched: 0, built: 0 };
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
    const cache = new TranslateCache();
    const glueCache = new GlueCache();
    const routeCache = new GlueCache();
    const input = () => ({ services: [...services.values()], endpointSlices: [...slices.values()], node, config });
    assert.deepStrictEqual(translate(input(), cache), translate(input()));
    assert.equal(cache.translated, 25);
    let sawConflict = false;
    let last = translate(input());
    for (let step = 0; step < 60; step++) {
      const touched = new Set<string>();
      const changes = 1 + Math.floor(r() * 3);
      const contextBefore = JSON.stringify([node, config]);
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
      const contextChanged = JSON.stringify([node, config]) !== contextBefore;
      // The proxier invalidates what its trackers saw change (also objects changed in place).
      if (seed % 2 === 0) cache.invalidate(touched);
      const cached = translate(input(), cache);
      paths[cache.path]++;
      // The desired state built from a patched model (its glue tables patched from the last
      // ones when only hairpin changed) is the one built from scratch.
      const opts = { vipLink: 'kube-ipvs0', glue: true, kubeIpsets: true };
      // (with what translate's patch changed of the hairpin list; each cache patches tables of
      // its own in place)
      const patch = cache.path === 'patched' ? cache.patched : undefined;
      assert.deepStrictEqual(sortedSets(desiredState(cached, opts, glueCache, patch)), desiredState(translate(input()), opts), `seed ${seed} step ${step}: desired state`);
      // route mode: a CIDR holding some of the cluster IPs (the others stay addresses)
      const route = { vipLink: 'kube-ipvs0', glue: true, bindMode: 'route' as const, serviceCidrs: ['10.96.0.0/29'] };
      assert.deepStrictEqual(sortedSets(desiredState(cached, route, routeCache, patch)), desiredState(translate(input()), route), `seed ${seed} step ${step}: route mode`);
      gluePaths[glueCache.path]++;
      const fresh = translate(input());
      assert.deepStrictEqual(sorted(cached), fresh, `seed ${seed} step ${step}`);
      const pooled = (m: typeof fresh) => JSON.stringify(m.glue.hairpin.filter((h) => h.address.startsWith('10.244.200.')));
      if (cache.path === 'patched' && pooled(fresh) !== pooled(last)) patchedShared++;
      last = fresh;
      if (fresh.warnings.some((w) => w.message.includes('already belongs to'))) sawConflict = true;
      const present = [...touched].filter((name) => services.has(name.slice('default/'.length))).length;
      if (contextChanged) assert.equal(cache.translated, services.size, 'a node or config change re-translates everything');
      else assert.ok(cache.translated <= present, `seed ${seed} step ${step}: translated ${cache.translated}, changed ${present}`);
    }
    assert.ok(sawConflict, `seed ${seed}: the random services never collided (the merge of conflicts went untested)`);
  }
  // Both ways of building the model were taken (and matched a translation from scratch).
  assert.ok(paths.patched >= 20 && paths.merged >= 20, JSON.stringify(paths));
  assert.ok(patchedShared >= 5, `patched steps changing shared hairpin entries: ${patchedShared}`);
  assert.ok(gluePaths.reused >= 10 && gluePaths.patched >= 10 && gluePaths.built >= 10, JSON.stringify(gluePaths));
});

test('translatePatch (only the changed services, as the proxier syncs) equals translate from scratch through random changes', () => {
  const taken = { patch: 0, full: 0, onlyChanged: 0 };
  for (const seed of [11, 12, 13, 14, 15, 16]) {
    const r = rng(seed);
    const services = new Map<string, V1Service>();
    const slices = new Map<string, V1EndpointSlice>();
    let version = 0;
    for (let i = 0; i < 30; i++) {
      services.set(`s${i}`, makeService(r, i, version++));
      slices.set(`s${i}-0`, makeSlice(r, i, 0));
      if (r() < 0.3) slices.set(`s${i}-1`, makeSlice(r, i, 1));
    }
    let node = NODE;
    const config = CONFIG;
    const cache = new TranslateCache();
    const input = () => ({ services: [...services.values()], endpointSlices: [...slices.values()], node, config });
    const objects = (name: string) => {
      const svc = services.get(name.slice('default/'.length));
      const mine = [...slices.values()].filter((sl) => `default/${sl.metadata!.labels!['kubernetes.io/service-name']}` === name);
      return svc && { svc, slices: mine };
    };
    translate(input(), cache);
    for (let step = 0; step < 80; step++) {
      const touched = new Set<string>();
      for (let c = 1 + Math.floor(r() * 2); c > 0; c--) {
        const i = Math.floor(r() * 32); // now and then a service that is not there yet
        const what = r();
        if (what < 0.6) slices.set(`s${i}-0`, makeSlice(r, i, 0)); // endpoints moved: patchable
        else if (what < 0.7) slices.set(`s${i}-1`, makeSlice(r, i, 1));
        else if (what < 0.8) services.set(`s${i}`, makeService(r, i, version++));
        else if (what < 0.85) services.delete(`s${i}`);
        else if (what < 0.9) slices.delete(`s${i}-1`);
        else if (what < 0.92) node = { ...node, addresses: r() < 0.5 ? ['10.0.0.11'] : ['10.0.0.11', '2001:db8::11'] };
        else continue; // a resync with nothing changed
        touched.add(`default/s${i}`);
      }
      // As the proxier: invalidate what the trackers report, patch, else translate everything.
      cache.invalidate(touched);
      let model = translatePatch(cache, touched, objects, services.size, node, config);
      if (model) {
        taken.patch++;
        if (cache.translated <= touched.size) taken.onlyChanged++;
      } else {
        taken.full++;
        model = translate(input(), cache);
      }
      assert.deepStrictEqual(sorted(model), translate(input()), `seed ${seed} step ${step}`);
    }
  }
  assert.ok(taken.patch >= 100 && taken.full >= 40, JSON.stringify(taken));
  assert.equal(taken.onlyChanged, taken.patch, 'a patch translates the changed services only');
});

test('an endpoint-only change patches the last model: one service translated, only its virtual servers new', () => {
  const cache = new TranslateCache();
  const services = [
    svc('a', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] }),
    svc('b', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] }), // conflicts with a: a keeps it
    svc('c', { clusterIP: '10.96.0.3', ports: [{ port: 53, protocol: 'UDP' }, { port: 53, name: 'tcp' }] }),
  ];
  const eps = (svcName: string, ip: string, node = 'node-b') => slice(svcName, `${svcName}-1`, [{ port: 8080 }, { name: 'tcp', port: 8053 }], [{ ip, node }]);
  const [sa, sb] = [eps('a', '10.244.0.5'), eps('b', '10.244.0.6')];
  let slices = [sa, sb, eps('c', '10.244.0.7')];
  const input = () => ({ services, endpointSlices: slices, node: NODE, config: CONFIG });
  const first = translate(input(), cache);
  assert.equal(cache.path, 'merged');
  const firstServices = [...first.services];
  const glueCache = new GlueCache();
  const opts = { vipLink: 'kube-ipvs0', glue: true };
  desiredState(first, opts, glueCache);

  const sc = eps('c', '10.244.0.9');
  slices = [sa, sb, sc];
  const second = translate(input(), cache);
  assert.deepStrictEqual(second, translate(input()));
  assert.equal(cache.path, 'patched');
  assert.equal(cache.translated, 1);
  assert.equal(cache.patched!.from, first);
  assert.equal(second.glue, first.glue, "the glue is the last model's own object");
  assert.equal(second.vips, first.vips);
  // its list, with c's virtual servers swapped in place (the last model's list is the same)
  assert.equal(second.services, first.services);
  assert.deepEqual(second.services.filter((v, i) => v !== firstServices[i]).map((v) => `${serviceKey(v)} ${v.destinations.map((d) => d.address)}`), ['inet|tcp|10.96.0.3|53 10.244.0.9', 'inet|udp|10.96.0.3|53 ']); // c's (its UDP port has no endpoint: no UDP slice port)
  assert.deepEqual([...cache.patched!.services.keys()].sort(), ['inet|tcp|10.96.0.3|53', 'inet|udp|10.96.0.3|53']);
  desiredState(second, opts, glueCache, cache.patched);
  assert.equal(glueCache.path, 'reused');

  // b's virtual server is a's: b's new endpoint changes nothing in the model.
  slices = [sa, eps('b', '10.244.0.8'), sc];
  const third = translate(input(), cache);
  assert.equal(cache.path, 'patched');
  assert.deepStrictEqual(third, translate(input()));
  assert.equal(third, second);

  // Nothing changed: the last model again (the very object: its lists not copied).
  assert.equal(translate(input(), cache), third);
  assert.equal(cache.path, 'patched');
  assert.equal(cache.translated, 0);
  const tables = desiredState(third, opts, glueCache, cache.patched).nft;
  assert.equal(glueCache.path, 'reused');

  // An endpoint moving to this node: a hairpin entry too, patched into a new glue object.
  slices = [eps('a', '10.244.0.5', 'node-a'), slices[1]!, sc];
  const fourth = translate(input(), cache);
  assert.deepStrictEqual(fourth, translate(input()));
  assert.equal(cache.path, 'patched');
  assert.notEqual(fourth.glue, third.glue);
  assert.deepEqual(fourth.glue.hairpin, [{ address: '10.244.0.5', protocol: 'tcp', port: 8080 }]);
  assert.equal(fourth.glue.vips, third.glue.vips, 'the rest of the glue is the same objects');
  assert.deepEqual(cache.patched!.hairpin, { removed: [], added: [{ address: '10.244.0.5', protocol: 'tcp', port: 8080 }] });
  // The glue tables are the last ones with their hairpin sets changed in place, by what
  // translate's patch did (its ModelPatch.hairpin): the element changes are the set's.
  const d = desiredState(fourth, opts, glueCache, cache.patched);
  assert.equal(glueCache.path, 'patched');
  assert.equal(d.nft, tables);
  assert.deepStrictEqual(sortedSets(d), desiredState(translate(input()), opts));
  assert.deepStrictEqual(glueCache.changes, [
    { family: 'ip', table: 'ipvsync', set: 'hairpin', add: [{ key: ['10.244.0.5', 'tcp', 8080, '10.244.0.5'] }], delete: [] },
  ]);
  // Without the patch (or another's), the tables are built again from the model.
  const other = new GlueCache();
  desiredState(third, opts, other);
  desiredState(fourth, opts, other);
  assert.equal(other.path, 'built');

  // patchGlueHairpin reads neither hairpin list: only the change (200k entries at 50k services × 10).
  let read = 0;
  const counted = (list: GlueHairpin[]) => new Proxy(list, { get: (t, k, r) => (typeof k === 'string' && /^\d+$/.test(k) && read++, Reflect.get(t, k, r)) });
  const moved = { address: '10.244.0.9', protocol: 'tcp' as const, port: 8080 };
  const before = { ...fourth.glue, hairpin: counted([...fourth.glue.hairpin]) };
  const after = { ...before, hairpin: counted([moved]) };
  const own = glueTables({ ...fourth.glue });
  const changes = patchGlueHairpin(before, own, after, { removed: [fourth.glue.hairpin[0]!], added: [moved] }, [])!;
  assert.equal(read, 0, 'hairpin entries read');
  assert.deepStrictEqual(sortedSets({ services: [], nft: own }).nft, glueTables({ ...fourth.glue, hairpin: [moved] }));
  assert.deepStrictEqual(changes, [
    { family: 'ip', table: 'ipvsync', set: 'hairpin', add: [{ key: ['10.244.0.9', 'tcp', 8080, '10.244.0.9'] }], delete: [{ key: ['10.244.0.5', 'tcp', 8080, '10.244.0.5'] }] },
  ]);
  // anything but hairpin differing: not patched, the tables left as they were
  assert.equal(patchGlueHairpin(before, own, { ...after, masqueradeAll: !after.masqueradeAll }, { removed: [moved], added: [] }, []), undefined);
  assert.equal(own[0]!.sets.find((x) => x.name === 'hairpin')!.elements.length, 1);

  // A service's port changed: merged.
  services[2] = svc('c', { clusterIP: '10.96.0.3', ports: [{ port: 54, protocol: 'UDP' }, { port: 53, name: 'tcp' }] });
  assert.deepStrictEqual(translate(input(), cache), translate(input()));
  assert.equal(cache.path, 'merged');

  // A service removed: merged.
  services.pop();
  assert.deepStrictEqual(translate(input(), cache), translate(input()));
  assert.equal(cache.path, 'merged');
});

test('an unchanged input translates nothing again, and the result is the same', () => {
  const cache = new TranslateCache();
  const input = {
    services: [svc('a', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] }), svc('b', { clusterIP: '10.96.0.1', ports: [{ port: 80 }] })],
    endpointSlices: [slice('a', 'a-1', [{ port: 8080 }], [{ ip: '10.244.0.5', node: 'node-a' }])],
    node: NODE,
    config: CONFIG,
  };
  const first = translate(input, cache);
  assert.equal(cache.translated, 2);
  const second = translate(input, cache);
  assert.equal(cache.translated, 0);
  assert.deepStrictEqual(second, first);
  assert.deepEqual(second.warnings, [{ service: 'default/b', message: 'clusterIP inet|tcp|10.96.0.1|80 already belongs to default/a, ignored' }]);
});
