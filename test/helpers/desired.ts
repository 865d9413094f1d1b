// Desired IPVS services for engine tests.
import type { DesiredService } from '../../src/engine/ipvs-model.js';

/** n TCP services on 10.96.x.y:80, two masqueraded destinations each. */
export function cluster(n: number): DesiredService[] {
  return Array.from({ length: n }, (_, i) => ({
    protocol: 'tcp' as const,
    address: `10.96.${i >> 8}.${i & 255}`,
    port: 80,
    scheduler: 'rr',
    destinations: [1, 2].map((j) => ({ address: `10.244.${j}.${(i % 250) + 1}`, port: 8080, forward: 'masq' as const, weight: 1 })),
  }));
}
