// Drives the real KubeSources against a FakeApiServer and records what the handlers receive as
// one line per event, so tests can assert exact sequences ("no duplicates, nothing lost").
import { KubeSources, type InformerError, type InformerOptions, type KubeHandlers } from '../../src/kube/informers.js';
import { loadKubeConfig } from '../../src/kube/kubeconfig.js';
import type { KubernetesObject } from '../../src/kube/api-types.js';
import { FakeApiServer, type KubeObject } from './fake-apiserver.js';

export interface Harness {
  api: FakeApiServer;
  sources: KubeSources;
  /** "svc+ ns/name@rv", "svc- ns/name", "slice+ …", "slice- …", "node+ name@rv", "node- name",
   *  "cidr+ name@rv", "cidr- name". */
  events: string[];
  /** The objects handed to the handlers, in order. */
  objects: KubernetesObject[];
  errors: InformerError[];
  handlerErrors: unknown[];
  /** Waits until `events` has at least `n` entries (bounded only against a hang). */
  waitEvents(n: number, ms?: number): Promise<string[]>;
  close(): Promise<void>;
}

export const NODE = 'node-a';

export function svcObj(name: string, clusterIP: string, namespace = 'default'): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace, creationTimestamp: '2024-01-01T00:00:00Z' },
    spec: { type: 'ClusterIP', clusterIP, clusterIPs: [clusterIP], ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
  };
}

export function sliceObj(service: string, name: string, ips: string[], namespace = 'default'): KubeObject {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name, namespace, labels: { 'kubernetes.io/service-name': service } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true }, nodeName: NODE })),
  };
}

export function nodeObj(name: string, zone = 'z1'): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { 'topology.kubernetes.io/zone': zone } },
    status: { addresses: [{ type: 'InternalIP', address: '192.0.2.10' }] },
  };
}

export function serviceCIDRObj(name: string, cidrs: string[]): KubeObject {
  return { apiVersion: 'networking.k8s.io/v1', kind: 'ServiceCIDR', metadata: { name }, spec: { cidrs } };
}

/** Fast, deterministic backoff for tests (no jitter). The request timeout only bounds a hang
 *  (a list answered after 5 s on a loaded machine would have been an extra failure, issue #58);
 *  and no watch of a test lives long enough to count as healthy by its age, so a watch closed
 *  with no events is always a failure, however slowly the test runs. */
export const TEST_OPTS: InformerOptions = { backoffInitialMs: 10, backoffMaxMs: 80, jitter: 0, requestTimeoutMs: 60_000, healthyAfterMs: 3_600_000 };

export async function startHarness(api: FakeApiServer, opts: InformerOptions = {}): Promise<Harness> {
  const events: string[] = [];
  const objects: KubernetesObject[] = [];
  const errors: InformerError[] = [];
  const handlerErrors: unknown[] = [];
  const rv = (o: KubernetesObject) => `${o.metadata?.resourceVersion ?? ''}`;
  const handlers: KubeHandlers = {
    onServiceUpdate: (o) => (objects.push(o), events.push(`svc+ ${o.metadata?.namespace}/${o.metadata?.name}@${rv(o)}`)),
    onServiceDelete: (k) => events.push(`svc- ${k}`),
    onSliceUpdate: (o) => (objects.push(o), events.push(`slice+ ${o.metadata?.namespace}/${o.metadata?.name}@${rv(o)}`)),
    onSliceDelete: (k) => events.push(`slice- ${k}`),
    onNode: (o) => (objects.push(o), events.push(`node+ ${o.metadata?.name}@${rv(o)}`)),
    onNodeDelete: (n) => events.push(`node- ${n}`),
    onServiceCIDR: (o) => (objects.push(o), events.push(`cidr+ ${o.metadata?.name}@${rv(o)}`)),
    onServiceCIDRDelete: (n) => events.push(`cidr- ${n}`),
  };
  const sources = new KubeSources({
    kubeConfig: loadKubeConfig({ server: api.url, env: {} }),
    nodeName: NODE,
    handlers,
    ...TEST_OPTS,
    ...opts,
    onError: (e) => errors.push(e),
    onHandlerError: (_r, e) => handlerErrors.push(e),
  });
  sources.start();
  return {
    api,
    sources,
    events,
    objects,
    errors,
    handlerErrors,
    async waitEvents(n, ms) {
      await api.waitFor(() => events.length >= n, `${n} events (have ${events.length}: ${events.join(', ')})`, ms);
      return events;
    },
    async close() {
      await sources.stop();
      await api.stop();
    },
  };
}

let sentinels = 0;

/**
 * Creates a fresh Service and waits until its event arrives: every event the server emitted
 * before it on the services watch has then been delivered, so a following exact-sequence
 * assertion also proves nothing extra came. Returns the sentinel's event line.
 */
export async function sentinel(h: Harness, resource: 'services' | 'endpointslices' = 'services'): Promise<string> {
  const name = `zz-sentinel-${++sentinels}`;
  const o =
    resource === 'services'
      ? h.api.create('services', svcObj(name, `10.96.255.${sentinels % 250}`))
      : h.api.create('endpointslices', sliceObj(name, `${name}-x`, ['10.0.255.1']));
  const line = `${resource === 'services' ? 'svc' : 'slice'}+ default/${o.metadata!.name}@${o.metadata!.resourceVersion}`;
  await h.api.waitFor(() => h.events.includes(line), `sentinel ${line} (have: ${h.events.join(', ')})`);
  return line;
}
