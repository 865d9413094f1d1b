// Static manifests: Services, EndpointSlices and legacy Endpoints from YAML/JSON files or folders
// (multi-document, `List` kinds too), checked just enough that translate() can trust their
// shape. Errors name the file and the document (1-based) and, inside a List, the item.
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { isIP } from 'node:net';
import { yaml } from '../yaml.js';
import type { V1EndpointSlice, V1Endpoints, V1Service } from '@kubernetes/client-node';
import { objectKey } from './change-tracker.js';
import { LABEL_SERVICE_NAME, type ObjectHandlers } from './types.js';

export class ManifestError extends Error {
  constructor(
    readonly file: string,
    /** 1-based document number in the file (0: the file itself). */
    readonly document: number,
    detail: string,
    /** 0-based item of a List document. */
    readonly item?: number,
  ) {
    super(`${file}${document ? `: document ${document}` : ''}${item !== undefined ? `, item ${item}` : ''}: ${detail}`);
    this.name = 'ManifestError';
  }
}

export interface ManifestSet {
  services: V1Service[];
  endpointSlices: V1EndpointSlice[];
  /** Legacy Endpoints, as read (translate() only reads slices: see resolveLegacyEndpoints). */
  endpoints: V1Endpoints[];
  /** Documents of other kinds (a Deployment next to its Service): listed, not an error. */
  skipped: Array<{ source: string; kind: string; name: string }>;
}

const MANIFEST_EXT = /\.(ya?ml|json)$/i;

interface Entry {
  kind: 'Service' | 'EndpointSlice' | 'Endpoints';
  object: V1Service | V1EndpointSlice | V1Endpoints;
  file: string;
  document: number;
  item?: number;
}

/** Reads files and folders (a folder: its *.yaml, *.yml, *.json, not recursive, hidden names
 *  skipped), and converts legacy Endpoints of services that have no EndpointSlice. */
export async function loadManifests(paths: readonly string[]): Promise<ManifestSet> {
  const entries: Entry[] = [];
  const skipped: ManifestSet['skipped'] = [];
  for (const file of await expand(paths)) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      throw new ManifestError(file, 0, (e as Error).message);
    }
    entries.push(...parseDocuments(text, file, skipped));
  }
  return resolveLegacyEndpoints(collect(entries, skipped));
}

/** How many objects a folder's load gave its handlers. */
export interface FolderLoad {
  services: number;
  endpointSlices: number;
}

/**
 * A manifests folder as a source of objects (`proxy --manifests DIR`): each load() reads it
 * again, gives the handlers every object and deletes the ones that disappeared since the last
 * load. A load that fails (a file that does not parse) changes nothing, so the objects of the
 * load before stay.
 */
export class ManifestFolder {
  private known = { services: new Set<string>(), slices: new Set<string>() };

  constructor(readonly dir: string) {}

  async load(h: ObjectHandlers): Promise<FolderLoad> {
    const m = await loadManifests([this.dir]);
    // the trackers' keys (every manifest object has a name: parseManifests refuses one without)
    const services = new Set(m.services.map(objectKey));
    const slices = new Set(m.endpointSlices.map(objectKey));
    for (const k of this.known.services) if (!services.has(k)) h.onServiceDelete(k);
    for (const k of this.known.slices) if (!slices.has(k)) h.onSliceDelete(k);
    for (const s of m.services) h.onServiceUpdate(s);
    for (const s of m.endpointSlices) h.onSliceUpdate(s);
    this.known = { services, slices };
    return { services: m.services.length, endpointSlices: m.endpointSlices.length };
  }
}

/** Parses one file's text (`source` names it in errors); legacy Endpoints are kept as read. */
export function parseManifests(text: string, source: string): ManifestSet {
  const skipped: ManifestSet['skipped'] = [];
  return collect(parseDocuments(text, source, skipped), skipped);
}

async function expand(paths: readonly string[]): Promise<string[]> {
  const files: string[] = [];
  for (const p of paths) {
    let st;
    try {
      st = await stat(p);
    } catch (e) {
      throw new ManifestError(p, 0, (e as Error).message);
    }
    if (!st.isDirectory()) {
      files.push(p);
      continue;
    }
    const names = (await readdir(p)).filter((n) => !n.startsWith('.') && MANIFEST_EXT.test(n)).sort();
    for (const n of names) if ((await stat(join(p, n))).isFile()) files.push(join(p, n));
  }
  return files;
}

/** Sorts entries into a set; the same kind/namespace/name twice is an error naming both places. */
function collect(entries: readonly Entry[], skipped: ManifestSet['skipped']): ManifestSet {
  const set: ManifestSet = { services: [], endpointSlices: [], endpoints: [], skipped };
  const seen = new Map<string, Entry>();
  for (const e of entries) {
    const id = `${e.kind} ${e.object.metadata!.namespace}/${e.object.metadata!.name}`;
    const first = seen.get(id);
    if (first) throw new ManifestError(e.file, e.document, `duplicate ${id} (first in ${first.file}: document ${first.document})`, e.item);
    seen.set(id, e);
    if (e.kind === 'Service') set.services.push(e.object as V1Service);
    else if (e.kind === 'EndpointSlice') set.endpointSlices.push(e.object as V1EndpointSlice);
    else set.endpoints.push(e.object as V1Endpoints);
  }
  return set;
}

/** A JSON file (or a YAML file that is one JSON document) through JSON.parse, which is some
 *  50x faster than the YAML parser on large lists; anything else (or JSON.parse failing, e.g.
 *  on YAML that merely starts with a brace) through the YAML parser, which reports errors. */
function documents(text: string): Array<{ value: unknown; error?: string }> {
  const head = text.trimStart()[0];
  if (head === '{' || head === '[') {
    try {
      return [{ value: JSON.parse(text) as unknown }];
    } catch {
      // not JSON after all: YAML flow style, or an error the YAML parser will name
    }
  }
  return yaml().parseAllDocuments(text).map((doc) =>
    doc.errors.length ? { value: undefined, error: doc.errors[0]!.message } : { value: doc.toJS() as unknown },
  );
}

function parseDocuments(text: string, source: string, skipped: ManifestSet['skipped']): Entry[] {
  const entries: Entry[] = [];
  documents(text).forEach(({ value, error }, i) => {
    const n = i + 1;
    if (error !== undefined) throw new ManifestError(source, n, `YAML: ${error}`);
    if (value === null || value === undefined) return; // an empty document ("---" at the end)
    if (!isObject(value)) throw new ManifestError(source, n, 'not a Kubernetes object (expected a mapping)');
    const kind = value.kind;
    const add = (obj: unknown, item?: number): void => {
      const e = toEntry(obj, source, n, item, skipped);
      if (e) entries.push(e);
    };
    if (typeof kind === 'string' && kind.endsWith('List')) {
      if (!Array.isArray(value.items)) throw new ManifestError(source, n, `${kind} without an items list`);
      value.items.forEach((item: unknown, j: number) => add(item, j));
    } else {
      add(value);
    }
  });
  return entries;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const CHECKS: Record<Entry['kind'], { api: string; check: (o: Record<string, unknown>, label: string, fail: Fail) => void }> = {
  Service: { api: 'v1', check: checkService },
  EndpointSlice: { api: 'discovery.k8s.io/v1', check: checkSlice },
  Endpoints: { api: 'v1', check: checkEndpoints },
};

function toEntry(obj: unknown, file: string, document: number, item: number | undefined, skipped: ManifestSet['skipped']): Entry | undefined {
  const fail = (detail: string): never => {
    throw new ManifestError(file, document, detail, item);
  };
  if (!isObject(obj)) return fail('not a Kubernetes object (expected a mapping)');
  const kind = obj.kind;
  if (typeof kind !== 'string' || !kind) return fail('missing kind');
  const meta = obj.metadata;
  if (!isObject(meta) || typeof meta.name !== 'string' || !meta.name) return fail(`${kind} without metadata.name`);
  if (meta.namespace === undefined || meta.namespace === null) meta.namespace = 'default';
  const label = `${kind} ${String(meta.namespace)}/${meta.name}`;
  const rule = CHECKS[kind as Entry['kind']];
  if (!Object.hasOwn(CHECKS, kind) || !rule) {
    skipped.push({ source: `${file}: document ${document}`, kind, name: `${String(meta.namespace)}/${meta.name}` });
    return undefined;
  }
  if (obj.apiVersion !== rule.api) fail(`${label}: apiVersion ${String(obj.apiVersion)} (expected ${rule.api})`);
  rule.check(obj, label, fail);
  return { kind: kind as Entry['kind'], object: obj as never, file, document, ...(item !== undefined ? { item } : {}) };
}

type Fail = (detail: string) => never;

function isPort(v: unknown): boolean {
  return Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535;
}

function checkService(obj: Record<string, unknown>, label: string, fail: Fail): void {
  const spec = obj.spec;
  if (!isObject(spec)) return void fail(`${label} without spec`);
  if (spec.ports !== undefined && !Array.isArray(spec.ports)) fail(`${label}: spec.ports is not a list`);
  ((spec.ports as unknown[]) ?? []).forEach((p, i) => {
    if (!isObject(p) || !isPort(p.port)) fail(`${label}: spec.ports[${i}].port must be 1..65535`);
    const pp = p as Record<string, unknown>;
    if (pp.nodePort !== undefined && !isPort(pp.nodePort)) fail(`${label}: spec.ports[${i}].nodePort must be 1..65535`);
  });
  for (const f of ['clusterIPs', 'externalIPs', 'loadBalancerSourceRanges', 'ipFamilies'] as const) {
    if (spec[f] !== undefined && !(Array.isArray(spec[f]) && (spec[f] as unknown[]).every((x) => typeof x === 'string')))
      fail(`${label}: spec.${f} must be a list of strings`);
  }
}

function checkSlice(obj: Record<string, unknown>, label: string, fail: Fail): void {
  if (!['IPv4', 'IPv6', 'FQDN'].includes(obj.addressType as string)) fail(`${label}: addressType must be IPv4, IPv6 or FQDN`);
  if (!Array.isArray(obj.endpoints)) fail(`${label}: endpoints must be a list`);
  (obj.endpoints as unknown[]).forEach((e, i) => {
    if (!isObject(e) || !Array.isArray(e.addresses) || e.addresses.length === 0 || !e.addresses.every((a) => typeof a === 'string'))
      fail(`${label}: endpoints[${i}].addresses must be a non-empty list of strings`);
  });
  if (obj.ports !== undefined && !Array.isArray(obj.ports)) fail(`${label}: ports must be a list`);
  ((obj.ports as unknown[]) ?? []).forEach((p, i) => {
    if (!isObject(p) || (p.port !== undefined && p.port !== null && !isPort(p.port))) fail(`${label}: ports[${i}].port must be 1..65535`);
  });
}

function checkEndpoints(obj: Record<string, unknown>, label: string, fail: Fail): void {
  if (obj.subsets !== undefined && obj.subsets !== null && !Array.isArray(obj.subsets)) fail(`${label}: subsets must be a list`);
  ((obj.subsets as unknown[]) ?? []).forEach((s, i) => {
    if (!isObject(s)) return void fail(`${label}: subsets[${i}] is not a mapping`);
    for (const f of ['addresses', 'notReadyAddresses'] as const) {
      ((s[f] as unknown[]) ?? []).forEach((a, j) => {
        if (!isObject(a) || typeof a.ip !== 'string' || !isIP(a.ip)) fail(`${label}: subsets[${i}].${f}[${j}].ip is not an IP address`);
      });
    }
    ((s.ports as unknown[]) ?? []).forEach((p, j) => {
      if (!isObject(p) || !isPort(p.port)) fail(`${label}: subsets[${i}].ports[${j}].port must be 1..65535`);
    });
  });
}

/**
 * Legacy Endpoints → EndpointSlices, as the EndpointSlice mirroring controller does it: one
 * slice per subset and address family; `addresses` are ready, `notReadyAddresses` not ready.
 */
export function endpointsToSlices(ep: V1Endpoints): V1EndpointSlice[] {
  const name = ep.metadata?.name ?? '';
  const namespace = ep.metadata?.namespace ?? 'default';
  const slices: V1EndpointSlice[] = [];
  (ep.subsets ?? []).forEach((subset, i) => {
    for (const [family, addressType] of [[4, 'IPv4'], [6, 'IPv6']] as const) {
      const endpoints = [
        ...(subset.addresses ?? []).map((a) => ({ a, ready: true })),
        ...(subset.notReadyAddresses ?? []).map((a) => ({ a, ready: false })),
      ]
        .filter(({ a }) => isIP(a.ip) === family)
        .map(({ a, ready }) => ({
          addresses: [a.ip],
          conditions: { ready },
          ...(a.nodeName ? { nodeName: a.nodeName } : {}),
          ...(a.hostname ? { hostname: a.hostname } : {}),
        }));
      if (endpoints.length === 0) continue;
      slices.push({
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: {
          name: `${name}-mirror-${i}-${addressType.toLowerCase()}`,
          namespace,
          labels: { ...(ep.metadata?.labels ?? {}), [LABEL_SERVICE_NAME]: name },
        },
        addressType,
        endpoints,
        ports: (subset.ports ?? []).map((p) => ({ name: p.name ?? '', port: p.port, protocol: p.protocol ?? 'TCP' })),
      });
    }
  });
  return slices;
}

/** Adds slices for legacy Endpoints whose service has no EndpointSlice of its own (as in a
 *  cluster, where the mirroring controller leaves alone Endpoints that slices already cover). */
export function resolveLegacyEndpoints(set: ManifestSet): ManifestSet {
  const covered = new Set(
    set.endpointSlices.map((s) => `${s.metadata?.namespace ?? 'default'}/${s.metadata?.labels?.[LABEL_SERVICE_NAME] ?? ''}`),
  );
  const mirrored = set.endpoints.filter((e) => !covered.has(`${e.metadata?.namespace ?? 'default'}/${e.metadata?.name}`)).flatMap(endpointsToSlices);
  return { ...set, endpointSlices: [...set.endpointSlices, ...mirrored] };
}
