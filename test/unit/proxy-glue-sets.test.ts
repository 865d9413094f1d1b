// The glue's sets are sorted, one element per key, whatever order the spec's lists come in:
// translate's lists come sorted and unique (the sets are then the lists as they are, checked in
// one pass), a hand-made spec may not (sorted, repeats dropped). Both give the same tables.
import { test } from 'node:test';
import { elementList } from '../../src/kernel/nftables.js';
import assert from 'node:assert/strict';
import { glueTables } from '../../src/proxy/ipvs/glue.js';
import { compareAddressProtoPort } from '../../src/kube/address.js';
import type { GlueHairpin, GlueSpec, GlueVip } from '../../src/proxy/ipvs/types.js';
import { prng } from '../helpers/bytes.js';

function spec(vips: GlueVip[], hairpin: GlueHairpin[]): GlueSpec {
  return {
    clusterCIDRs: ['10.244.0.0/16'],
    masqueradeAll: false,
    vips,
    nodePorts: [],
    nodePortAddresses: [],
    sourceRanges: [],
    hairpin,
    localTrafficServices: [],
    healthCheckNodePorts: [],
  };
}

/** Each set's element keys, in the order the set holds them. */
const setsOf = (g: GlueSpec) => glueTables(g).flatMap((t) => t.sets.map((s) => [`${t.family} ${s.name}`, elementList(s.elements).map((e) => JSON.stringify(e.key))] as const));
const sorted = (sets: ReturnType<typeof setsOf>) => sets.map(([name, keys]) => [name, [...keys].sort()] as const);

test('glue sets: one element per key, and the same elements from shuffled lists with repeats', () => {
  const r = prng(31);
  for (let round = 0; round < 20; round++) {
    const n = 50 + Math.floor(r() * 3000);
    const hairpin: GlueHairpin[] = [];
    const vips: GlueVip[] = [];
    for (let i = 0; i < n; i++) {
      const v6 = r() < 0.2;
      const address = v6 ? `fd00::${Math.floor(r() * 4000).toString(16)}` : `10.${Math.floor(r() * 3)}.${Math.floor(r() * 256)}.${Math.floor(r() * 256)}`;
      const protocol = (['tcp', 'udp', 'sctp'] as const)[Math.floor(r() * 3)]!;
      const port = [53, 80, 443, 8080][Math.floor(r() * 4)]!;
      hairpin.push({ address, protocol, port });
      const kind = (['clusterIP', 'externalIP', 'loadBalancer'] as const)[r() < 0.8 ? 0 : 1 + Math.floor(r() * 2)]!;
      vips.push({ kind, address: v6 ? `fd01::${(i >> 1).toString(16)}` : `10.96.${i >> 9}.${(i >> 1) & 255}`, protocol, port, localOnly: r() < 0.3, bound: true, servicePort: `default/s${i}:p` });
    }
    const byVip = (a: GlueVip, b: GlueVip) => compareAddressProtoPort(a, b) || (a.kind < b.kind ? -1 : a.kind > b.kind ? 1 : 0);
    // as translate gives them: sorted, one per entry (two service ports share each address: the
    // set of VIP addresses alone has repeats even then)
    const sortedHairpin = hairpin.sort(compareAddressProtoPort).filter((h, i, a) => i === 0 || compareAddressProtoPort(a[i - 1]!, h) !== 0);
    // one record per frontend (address, protocol, port), as one service owns each
    const sortedVips = vips.sort(byVip).filter((v, i, a) => i === 0 || compareAddressProtoPort(a[i - 1]!, v) !== 0);
    const want = setsOf(spec(sortedVips, sortedHairpin));
    // one element per key
    for (const [name, keys] of want) assert.equal(new Set(keys).size, keys.length, `${name}: one element per key`);
    const hp = want.find(([name]) => name === 'ip hairpin' || name.endsWith(' hairpin'));
    assert.ok(hp, 'a hairpin set');
    // shuffled, with a third of the entries given twice
    const shuffle = <T>(a: T[]) => {
      const out = [...a, ...a.filter(() => r() < 0.33)];
      for (let i = out.length - 1; i > 0; i--) {
        const j = Math.floor(r() * (i + 1));
        [out[i], out[j]] = [out[j]!, out[i]!];
      }
      return out;
    };
    assert.deepEqual(sorted(setsOf(spec(shuffle(sortedVips), shuffle(sortedHairpin)))), sorted(want), `round ${round}`);
  }
});
