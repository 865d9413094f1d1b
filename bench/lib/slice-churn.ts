// Endpoint churn for the network-programming-latency bench: the k-th change of a workload's
// EndpointSlices, each a real change of what a proxy programs, spread over the services:
//   - a service with a not-ready endpoint gets it ready again (its address is added back);
//   - otherwise, even k: one endpoint's address replaced (a pod rescheduled: the new address
//     is added, the old one removed), odd k: one endpoint turned not ready (its address removed).
// Each slice carries the endpoints controller's last-change-trigger-time annotation, set to the
// time of the change in Go's RFC3339Nano (what kube-proxy parses). Pure, apart from the state
// of the slices it keeps.
import { sliceObject } from './manifests.js';
import { podIpOf, type BenchService, type Workload } from './workload.js';

export const ANNOTATION_LAST_CHANGE_TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';

/** A prime: consecutive changes land on services far apart, each service once per S changes
 *  (the workloads' sizes are not multiples of it). */
const STRIDE = 7919;

/** Go's time.RFC3339Nano of a wall-clock time in ms since the epoch (fraction kept to the ns,
 *  trailing zeros dropped as Go drops them). */
export function rfc3339Nano(ms: number): string {
  const whole = Math.floor(ms);
  const ns = Math.round((ms - whole) * 1e6);
  const iso = new Date(whole).toISOString(); // …T02:52:34.123Z
  const frac = `${iso.slice(20, 23)}${String(Math.min(ns, 999_999)).padStart(6, '0')}`.replace(/0+$/, '');
  return `${iso.slice(0, 19)}${frac ? `.${frac}` : ''}Z`;
}

export interface Change {
  k: number;
  service: number;
  kind: 'replace' | 'not-ready' | 'ready';
  /** The address whose element the change adds to the kernel's tables, or removes. */
  address: string;
  effect: 'add' | 'delete';
  /** The slice to write (annotation set to `at`). */
  slice: Record<string, unknown>;
}

interface SliceEndpoint {
  addresses: string[];
  conditions: { ready: boolean };
  nodeName: string;
}

export class SliceChurn {
  private readonly slices = new Map<number, Record<string, unknown>>();
  private readonly notReady = new Map<number, number>();
  private readonly services: readonly BenchService[];
  private readonly firstFreePod: number;

  constructor(w: Workload) {
    this.services = w.services;
    this.firstFreePod = w.services.length * w.endpointsPerService;
    if (w.services.length % STRIDE === 0) throw new RangeError(`SliceChurn: ${w.services.length} services is a multiple of the stride`);
  }

  /** The k-th change (k from 0, in order), triggered at `atMs` (wall clock, ms since the epoch). */
  next(k: number, atMs: number): Change {
    const service = (k * STRIDE) % this.services.length;
    let slice = this.slices.get(service);
    if (!slice) this.slices.set(service, (slice = sliceObject(this.services[service]!)));
    const eps = slice.endpoints as SliceEndpoint[];
    let change: Omit<Change, 'slice'>;
    const down = this.notReady.get(service);
    if (down !== undefined) {
      eps[down]!.conditions = { ready: true };
      this.notReady.delete(service);
      change = { k, service, kind: 'ready', address: eps[down]!.addresses[0]!, effect: 'add' };
    } else if (k % 2 === 0) {
      const i = k % eps.length;
      const address = podIpOf(this.firstFreePod + k);
      eps[i]!.addresses = [address];
      change = { k, service, kind: 'replace', address, effect: 'add' };
    } else {
      const i = k % eps.length;
      eps[i]!.conditions = { ready: false };
      this.notReady.set(service, i);
      change = { k, service, kind: 'not-ready', address: eps[i]!.addresses[0]!, effect: 'delete' };
    }
    const metadata = slice.metadata as Record<string, unknown>;
    metadata.annotations = { [ANNOTATION_LAST_CHANGE_TRIGGER_TIME]: rfc3339Nano(atMs) };
    return { ...change, slice };
  }
}
