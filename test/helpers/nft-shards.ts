// The nftables data plane splits the sets that grow with the endpoints into shards
// (`endpoints-N-S`, `hairpin-S`). Tests speak of the logical set ('endpoints-N', 'hairpin'):
// its shards together, each element checked to sit in the shard the kernel's hash sends its
// packets to (the hash itself is checked against the kernel in test/host/nft-proxy.test.ts).
import { elementList, type PackedElements, type SetElement } from '../../src/kernel/nftables.js';
import { addressShard, frontendShard, SHARDS } from '../../src/proxy/nftables/table.js';

interface NamedSet {
  name: string;
  elements?: SetElement[] | PackedElements;
}

/** The logical set's elements ('endpoints-N' and 'hairpin': their shards'; any other set its
 *  own), or undefined when there is no such set. */
export function logicalElements(sets: readonly NamedSet[], name: string): SetElement[] | undefined {
  const endpoints = /^endpoints-\d+$/.test(name);
  if (!endpoints && name !== 'hairpin') {
    const els = sets.find((s) => s.name === name)?.elements;
    return els && [...elementList(els)];
  }
  const out: SetElement[] = [];
  let found = false;
  for (let s = 0; s < SHARDS; s++) {
    const shard = sets.find((x) => x.name === `${name}-${s}`);
    if (!shard) continue;
    found = true;
    for (const e of elementList(shard.elements ?? [])) {
      const want = endpoints ? frontendShard(String(e.key[0]), Number(e.key[2])) : addressShard(String(e.key[0]));
      if (want !== s) throw new Error(`${JSON.stringify(e.key)} is in ${shard.name}, its shard is ${want}`);
      out.push(e);
    }
  }
  return found ? out : undefined;
}

/** A set's logical name: `endpoints-N-S` → `endpoints-N`, `hairpin-S` → `hairpin`. */
export function logicalName(name: string): string {
  return /^(endpoints-\d+|hairpin)-\d+$/.test(name) ? name.replace(/-\d+$/, '') : name;
}

/** How many elements `nft -j list` shows in a logical set's shards (`endpoints-N-*`). */
export function nftJsonElements(listing: { nftables: Array<Record<string, any>> }, name: string): number {
  return listing.nftables.filter((o) => (o.map ?? o.set) && String((o.map ?? o.set).name).startsWith(`${name}-`)).reduce((n, o) => n + ((o.map ?? o.set).elem?.length ?? 0), 0);
}
