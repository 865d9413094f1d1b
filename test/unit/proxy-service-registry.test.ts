// The frontend registry both planes keep their services in: after any sequence of changes,
// what it owns, warns and has put into its sink is what a build from nothing in name order
// gives — the first service by name claiming a frontend keeps it, through hand-overs both ways.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ServiceRegistry, type FrontendClaim, type Made, type PlaneParts } from '../../src/proxy/service-registry.js';
import type { ServiceModel } from '../../src/kube/service-model.js';
import { prng } from '../helpers/bytes.js';

type Parts = PlaneParts<FrontendClaim> & { tag: string };

/** A sink recording what is in the plane: each owned frontend once, and each service's tag. */
function sink() {
  const owned = new Map<string, string>();
  const tags = new Map<string, number>();
  return {
    owned,
    tags,
    put(p: Parts, fes: readonly FrontendClaim[]) {
      tags.set(p.tag, (tags.get(p.tag) ?? 0) + 1);
      for (const f of fes) {
        assert.ok(!owned.has(f.key), `${f.key} put twice`);
        owned.set(f.key, f.portName);
      }
    },
    take(p: Parts, fes: readonly FrontendClaim[]) {
      const n = tags.get(p.tag)! - 1;
      if (n) tags.set(p.tag, n);
      else tags.delete(p.tag);
      for (const f of fes) {
        assert.equal(owned.get(f.key), f.portName, `${f.key} taken by one who does not own it`);
        owned.delete(f.key);
      }
    },
  };
}

const model = (name: string): ServiceModel => ({ name, ports: [], externalLocal: false, healthCheck: undefined, warnings: [] });

function made(name: string, keys: number[], version: number): Made<Parts> {
  const frontends = keys.map((k): FrontendClaim => ({ key: `10.0.0.${k} tcp 80`, service: name, portName: `${name}:p`, kind: 'clusterIP', address: `10.0.0.${k}`, protocol: 'tcp', port: 80 }));
  return { model: model(name), parts: { frontends, tag: `${name}@${version}` } };
}

test('updates with hand-overs both ways end where a build from nothing in name order does', () => {
  const rnd = prng(59);
  for (let round = 0; round < 200; round++) {
    const names = Array.from({ length: 6 }, (_, i) => `default/s${i}`);
    const state = new Map<string, { keys: number[]; version: number }>();
    const pick = () => Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => Math.floor(rnd() * 5));
    for (const n of names) if (rnd() < 0.7) state.set(n, { keys: pick(), version: 0 });
    const live = sink();
    const reg = new ServiceRegistry(live);
    reg.build([...state.keys()].sort(), (n) => made(n, state.get(n)!.keys, state.get(n)!.version));
    for (let step = 0; step < 5; step++) {
      const changed = new Map<string, Made<Parts> | undefined>();
      for (const n of names) {
        if (rnd() > 0.4) continue;
        if (rnd() < 0.2) state.delete(n);
        else state.set(n, { keys: pick(), version: step + 1 });
        const s = state.get(n);
        changed.set(n, s && made(n, s.keys, s.version));
      }
      reg.update(changed.keys(), (n) => changed.get(n));
      const fresh = sink();
      const ref = new ServiceRegistry(fresh);
      ref.build([...state.keys()].sort(), (n) => made(n, state.get(n)!.keys, state.get(n)!.version));
      assert.deepEqual([...live.owned].sort(), [...fresh.owned].sort(), `round ${round} step ${step}: owners`);
      assert.deepEqual([...live.tags].sort(), [...fresh.tags].sort(), `round ${round} step ${step}: every service's parts once`);
      assert.deepEqual(reg.summary(), ref.summary(), `round ${round} step ${step}: warnings`);
    }
  }
});

test('a conflict warns the service that lost, naming the frontend and its owner; a service that throws is not programmed', () => {
  const live = sink();
  const reg = new ServiceRegistry(live, [{ service: '', message: 'config' }]);
  reg.build(['default/a', 'default/b', 'default/c'], (n) => (n === 'default/c' ? { error: new Error('boom') } : made(n, [1], 0)));
  assert.deepEqual(reg.summary().warnings, [
    { service: '', message: 'config' },
    { service: 'default/b', message: 'clusterIP 10.0.0.1:80/tcp already belongs to default/a:p, ignored' },
    { service: 'default/c', message: 'not programmed: boom' },
  ]);
  // a gives the frontend up: b, which wanted it, has it now
  const readded = reg.update(['default/a'], () => undefined);
  assert.deepEqual(readded.map((r) => r.name), ['default/a', 'default/b']);
  assert.deepEqual([...live.owned], [['10.0.0.1 tcp 80', 'default/b:p']]);
  assert.equal(reg.owner('10.0.0.1 tcp 80')?.service, 'default/b');
});
