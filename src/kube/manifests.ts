// Static manifests: Services, EndpointSlices, legacy Endpoints, Nodes and ServiceCIDRs from YAML/JSON files or folders
// (multi-document, `List` kinds too), checked as the API server would check the fields the proxy
// reads. A file that cannot be read or parsed as YAML, two objects with one name, or an object
// over the API server's limits (limits.ts: no cluster holds it; a 10 MB name is an attack or an
// accident, not an object to skip quietly) is an error; an object of the wrong shape (any
// well-formed YAML) is a warning naming it, and is skipped: one broken object never keeps the
// others out. Errors and warnings name the file and the document (1-based) and, inside a List,
// the item.
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { BadInputError, excerpt } from '../errors.js';
import { parseYamlDocuments, YamlSyntaxError } from '../yaml.js';
import type { V1Endpoint, V1EndpointSlice, V1Endpoints, V1Node, V1Service, V1ServiceCIDR } from './api-types.js';
import { objectKey } from './change-tracker.js';
import { parseCidrText, sloppyIp } from '../net/address.js';
import { arr, field, int, isMapping, member, present, show, str } from './fields.js';
import { overLimits } from './limits.js';
import { isManifestName } from './manifest-names.js';
import { LABEL_SERVICE_NAME, type ObjectHandlers } from './types.js';

export class ManifestError extends BadInputError {
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
  /** Nodes: the proxy reads the labels of its own (the zone of topology hints). */
  nodes: V1Node[];
  /** ServiceCIDRs (networking.k8s.io/v1): the cluster's service CIDRs, over the configuration's. */
  serviceCIDRs: V1ServiceCIDR[];
  /** Documents of other kinds (a Deployment next to its Service): listed, not an error. */
  skipped: Array<{ source: string; kind: string; name: string }>;
  /** Objects of the wrong shape, skipped: where ("file: document 2, item 1") and why (naming
   *  the object, "Service default/web: spec.ports[0].port must be 1..65535"). */
  warnings: ManifestWarning[];
}

export interface ManifestWarning {
  source: string;
  message: string;
}

interface Entry {
  kind: 'Service' | 'EndpointSlice' | 'Endpoints' | 'Node' | 'ServiceCIDR';
  object: V1Service | V1EndpointSlice | V1Endpoints | V1Node | V1ServiceCIDR;
  file: string;
  document: number;
  item?: number;
}

/** Reads files and folders (a folder: its *.yaml, *.yml, *.json, not recursive, hidden names
 *  skipped), and converts legacy Endpoints of services that have no EndpointSlice. */
export async function loadManifests(paths: readonly string[]): Promise<ManifestSet> {
  const entries: Entry[] = [];
  const notes: Notes = { skipped: [], warnings: [] };
  for (const file of await expand(paths)) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      throw new ManifestError(file, 0, (e as Error).message);
    }
    entries.push(...parseDocuments(text, file, notes));
  }
  return resolveLegacyEndpoints(collect(entries, notes));
}

/** How many objects a folder's load gave its handlers. */
export interface FolderLoad {
  services: number;
  endpointSlices: number;
  nodes: number;
  serviceCIDRs: number;
  /** The objects skipped for their shape (ManifestSet.warnings). */
  warnings: ManifestWarning[];
}

/**
 * A manifests folder as a source of objects (`proxy --manifests DIR`): each load() reads it
 * again, gives the handlers every object and deletes the ones that disappeared since the last
 * load. A load that fails (a file that does not parse) changes nothing, so the objects of the
 * load before stay. Loads called while one runs wait their turn: each reads the folder after
 * the one called before it has finished, so the handlers end with the newest call's read (a
 * slow older read never lands after a newer one), and each call resolves with its own load.
 */
export class ManifestFolder {
  private known = { services: new Set<string>(), slices: new Set<string>(), nodes: new Set<string>(), serviceCIDRs: new Set<string>() };
  /** The last load called, settled or not: the next one starts after it. */
  private last: Promise<unknown> = Promise.resolve();

  constructor(readonly dir: string) {}

  load(h: ObjectHandlers): Promise<FolderLoad> {
    const run = this.last.then(() => this.loadNow(h));
    this.last = run.catch(() => undefined); // a failed load does not stop the ones after it
    return run;
  }

  private async loadNow(h: ObjectHandlers): Promise<FolderLoad> {
    const m = await loadManifests([this.dir]);
    // the trackers' keys (every manifest object has a name: parseManifests refuses one without)
    const services = new Set(m.services.map(objectKey));
    const slices = new Set(m.endpointSlices.map(objectKey));
    const nodes = new Set(m.nodes.map((n) => n.metadata!.name!));
    const serviceCIDRs = new Set(m.serviceCIDRs.map((n) => n.metadata!.name!));
    for (const k of this.known.services) if (!services.has(k)) h.onServiceDelete(k);
    for (const k of this.known.slices) if (!slices.has(k)) h.onSliceDelete(k);
    for (const k of this.known.nodes) if (!nodes.has(k)) h.onNodeDelete?.(k);
    for (const k of this.known.serviceCIDRs) if (!serviceCIDRs.has(k)) h.onServiceCIDRDelete?.(k);
    for (const s of m.services) h.onServiceUpdate(s);
    for (const s of m.endpointSlices) h.onSliceUpdate(s);
    for (const n of m.nodes) h.onNode?.(n);
    for (const c of m.serviceCIDRs) h.onServiceCIDR?.(c);
    this.known = { services, slices, nodes, serviceCIDRs };
    return { services: m.services.length, endpointSlices: m.endpointSlices.length, nodes: m.nodes.length, serviceCIDRs: m.serviceCIDRs.length, warnings: m.warnings };
  }
}

/** Parses one file's text (`source` names it in errors); legacy Endpoints are kept as read. */
export function parseManifests(text: string, source: string): ManifestSet {
  const notes: Notes = { skipped: [], warnings: [] };
  return collect(parseDocuments(text, source, notes), notes);
}

/** What a read notes beside the objects it keeps. */
type Notes = Pick<ManifestSet, 'skipped' | 'warnings'>;

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
    const names = (await readdir(p)).filter(isManifestName).sort();
    for (const n of names) if ((await stat(join(p, n))).isFile()) files.push(join(p, n));
  }
  return files;
}

/** Sorts entries into a set; the same kind/namespace/name twice is an error naming both places. */
function collect(entries: readonly Entry[], notes: Notes): ManifestSet {
  const set: ManifestSet = { services: [], endpointSlices: [], endpoints: [], nodes: [], serviceCIDRs: [], ...notes };
  const seen = new Map<string, Entry>();
  for (const e of entries) {
    const id = `${e.kind} ${CLUSTER_SCOPED.has(e.kind) ? e.object.metadata!.name! : objectKey(e.object)}`;
    const first = seen.get(id);
    if (first) throw new ManifestError(e.file, e.document, `duplicate ${id} (first in ${first.file}: document ${first.document})`, e.item);
    seen.set(id, e);
    if (e.kind === 'Service') set.services.push(e.object as V1Service);
    else if (e.kind === 'EndpointSlice') set.endpointSlices.push(e.object as V1EndpointSlice);
    else if (e.kind === 'Node') set.nodes.push(e.object as V1Node);
    else if (e.kind === 'ServiceCIDR') set.serviceCIDRs.push(e.object as V1ServiceCIDR);
    else set.endpoints.push(e.object as V1Endpoints);
  }
  return set;
}

/** A JSON file (or a YAML file that is one JSON document) through JSON.parse, some 5x faster
 *  than the YAML parser on large lists; anything else (or JSON.parse failing, e.g. on YAML that
 *  merely starts with a brace) through the YAML parser, which names the line of an error. */
function documents(text: string, source: string): unknown[] {
  const head = text.trimStart()[0];
  if (head === '{' || head === '[') {
    try {
      return [JSON.parse(text) as unknown];
    } catch {
      // not JSON after all: YAML flow style, or an error the YAML parser will name
    }
  }
  refuseLongLine(text, source);
  try {
    return parseYamlDocuments(text);
  } catch (e) {
    if (e instanceof YamlSyntaxError) throw new ManifestError(source, e.document, `YAML: ${e.message}`);
    throw e;
  }
}

/** The API server's limit on a request body (MaxRequestBodyBytes, 3 MiB: twice etcd's default
 *  request size). No object it accepts, hence no line of one in YAML, is longer. */
const MAX_YAML_LINE = 3 * 1024 * 1024;

/** A YAML line longer than MAX_YAML_LINE refuses the file before the YAML parser reads it: the
 *  `yaml` parser took 0.1–1 s here (4 s on a loaded machine) over a 10 MB scalar (a 10 MB name),
 *  the scan milliseconds. A JSON file is not scanned: JSON.parse reads 10 MB in milliseconds, and
 *  the field limits (limits.ts) refuse the object after it. */
function refuseLongLine(text: string, source: string): void {
  if (text.length <= MAX_YAML_LINE) return;
  for (let start = 0, line = 1; start < text.length; line++) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    if (end - start > MAX_YAML_LINE)
      throw new ManifestError(source, 0, `line ${line} has ${end - start} characters, more than ${MAX_YAML_LINE} (3 MiB, the API server's largest request body: no object it accepts has a line that long): ${excerpt(text.slice(start, start + 80), 80)}`);
    start = end + 1;
  }
}

function parseDocuments(text: string, source: string, notes: Notes): Entry[] {
  const entries: Entry[] = [];
  documents(text, source).forEach((value, i) => {
    const n = i + 1;
    if (value === null || value === undefined) return; // an empty document ("---" at the end)
    const add = (obj: unknown, item?: number): void => {
      const e = toEntry(obj, source, n, item, notes);
      if (e) entries.push(e);
    };
    const kind = member(value, 'kind');
    if (typeof kind === 'string' && kind.endsWith('List')) {
      const items = member(value, 'items');
      if (!Array.isArray(items)) return void warnAt(notes, source, n, undefined, `${kind} without an items list, skipped`);
      items.forEach((item: unknown, j: number) => add(item, j));
    } else {
      add(value);
    }
  });
  return entries;
}

function warnAt(notes: Notes, file: string, document: number, item: number | undefined, message: string): void {
  notes.warnings.push({ source: `${file}: document ${document}${item !== undefined ? `, item ${item}` : ''}`, message });
}

/** An object's first problem, or undefined: it can be kept. */
type Check = (o: Record<string, unknown>) => string | undefined;

const CHECKS: Record<Entry['kind'], { api: string; check: Check }> = {
  Service: { api: 'v1', check: checkService },
  EndpointSlice: { api: 'discovery.k8s.io/v1', check: checkSlice },
  Endpoints: { api: 'v1', check: checkEndpoints },
  Node: { api: 'v1', check: checkNode },
  ServiceCIDR: { api: 'networking.k8s.io/v1', check: checkServiceCIDR },
};

/** Kinds without a namespace: their key is their name. */
const CLUSTER_SCOPED = new Set(['Node', 'ServiceCIDR']);

/** The object as an entry, or undefined: another kind (noted as skipped) or the wrong shape
 *  (a warning naming it). */
function toEntry(obj: unknown, file: string, document: number, item: number | undefined, notes: Notes): Entry | undefined {
  const skip = (detail: string): undefined => void warnAt(notes, file, document, item, `${detail}, skipped`);
  if (!isMapping(obj)) return skip('not a Kubernetes object (expected a mapping)');
  const kind = obj.kind;
  if (typeof kind !== 'string' || !kind) return skip('missing kind');
  const meta = obj.metadata;
  if (!isMapping(meta) || typeof meta.name !== 'string' || !meta.name) return skip(`${kind} without metadata.name`);
  if (Object.hasOwn(CHECKS, kind)) {
    // before anything else reads the object or quotes its name: over the API server's limits,
    // it is no object a cluster can hold, and the file is refused
    const over = overLimits(kind as Entry['kind'], obj);
    if (over !== undefined) {
      const ns = CLUSTER_SCOPED.has(kind) ? '' : `${typeof meta.namespace === 'string' ? excerpt(meta.namespace, 80) : 'default'}/`;
      throw new ManifestError(file, document, `${kind} ${ns}${excerpt(meta.name, 80)}: ${over}`, item);
    }
  }
  if (CLUSTER_SCOPED.has(kind)) delete meta.namespace;
  else {
    if (meta.namespace === undefined || meta.namespace === null) meta.namespace = 'default';
    if (typeof meta.namespace !== 'string' || !meta.namespace) return skip(`${kind} ${meta.name}: metadata.namespace ${show(meta.namespace)} is not a name`);
  }
  const name = CLUSTER_SCOPED.has(kind) ? meta.name : `${meta.namespace as string}/${meta.name}`;
  const label = `${kind} ${name}`;
  if (!Object.hasOwn(CHECKS, kind)) {
    notes.skipped.push({ source: `${file}: document ${document}`, kind, name });
    return undefined;
  }
  const rule = CHECKS[kind as Entry['kind']];
  if (obj.apiVersion !== rule.api) return skip(`${label}: apiVersion ${show(obj.apiVersion)} (expected ${rule.api})`);
  const problem = rule.check(obj);
  if (problem !== undefined) return skip(`${label}: ${problem}`);
  return { kind: kind as Entry['kind'], object: obj as never, file, document, ...(item !== undefined ? { item } : {}) };
}

function isPort(v: unknown): boolean {
  return Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535;
}

/** A list member: its items (none when absent or null); undefined when it is not a list. */
function listAt(o: unknown, name: string): readonly unknown[] | undefined {
  const v = member(o, name);
  return Array.isArray(v) ? v : present(v) ? undefined : [];
}

function checkService(obj: Record<string, unknown>): string | undefined {
  const spec = obj.spec;
  if (!isMapping(spec)) return 'without spec';
  const ports = listAt(spec, 'ports');
  if (!ports) return 'spec.ports is not a list';
  for (let i = 0; i < ports.length; i++) {
    const p = ports[i];
    if (!isMapping(p) || !isPort(p.port)) return `spec.ports[${i}].port must be 1..65535`;
    if (present(p.nodePort) && !isPort(p.nodePort)) return `spec.ports[${i}].nodePort must be 1..65535`;
  }
  for (const f of ['clusterIPs', 'externalIPs', 'loadBalancerSourceRanges', 'ipFamilies'] as const) {
    const v = spec[f];
    if (present(v) && !(Array.isArray(v) && v.every((x) => typeof x === 'string'))) return `spec.${f} must be a list of strings`;
  }
  return undefined;
}

function checkSlice(obj: Record<string, unknown>): string | undefined {
  if (obj.addressType !== 'IPv4' && obj.addressType !== 'IPv6' && obj.addressType !== 'FQDN') return 'addressType must be IPv4, IPv6 or FQDN';
  const endpoints = obj.endpoints;
  if (!Array.isArray(endpoints)) return 'endpoints must be a list';
  for (let i = 0; i < endpoints.length; i++) {
    const a = arr(endpoints[i], 'addresses');
    if (!a || a.length === 0 || !a.every((x) => typeof x === 'string')) return `endpoints[${i}].addresses must be a non-empty list of strings`;
  }
  const ports = listAt(obj, 'ports');
  if (!ports) return 'ports must be a list';
  for (let i = 0; i < ports.length; i++) {
    const p = ports[i];
    if (!isMapping(p) || (present(p.port) && !isPort(p.port))) return `ports[${i}].port must be 1..65535`;
  }
  return undefined;
}

function checkEndpoints(obj: Record<string, unknown>): string | undefined {
  const subsets = listAt(obj, 'subsets');
  if (!subsets) return 'subsets must be a list';
  for (let i = 0; i < subsets.length; i++) {
    const s = subsets[i];
    if (!isMapping(s)) return `subsets[${i}] is not a mapping`;
    for (const f of ['addresses', 'notReadyAddresses'] as const) {
      const list = listAt(s, f);
      if (!list) return `subsets[${i}].${f} must be a list`;
      for (let j = 0; j < list.length; j++) if (!sloppyIp(member(list[j], 'ip'))) return `subsets[${i}].${f}[${j}].ip is not an IP address`;
    }
    const ports = listAt(s, 'ports');
    if (!ports) return `subsets[${i}].ports must be a list`;
    for (let j = 0; j < ports.length; j++) if (!isPort(member(ports[j], 'port'))) return `subsets[${i}].ports[${j}].port must be 1..65535`;
  }
  return undefined;
}

function checkNode(obj: Record<string, unknown>): string | undefined {
  const labels = member(obj.metadata, 'labels');
  if (!present(labels)) return undefined;
  if (!isMapping(labels)) return 'metadata.labels is not a mapping';
  for (const [k, v] of Object.entries(labels)) if (typeof v !== 'string') return `metadata.labels["${k}"] is not a string`;
  return undefined;
}

/** As the API server validates a ServiceCIDR: one or two CIDRs, of different families. */
function checkServiceCIDR(obj: Record<string, unknown>): string | undefined {
  const cidrs = listAt(obj.spec, 'cidrs');
  if (!cidrs) return 'spec.cidrs is not a list';
  if (cidrs.length < 1 || cidrs.length > 2) return `spec.cidrs must hold one or two CIDRs, not ${cidrs.length}`;
  const families = cidrs.map((c) => parseCidrText(c)?.family);
  const bad = families.indexOf(undefined);
  if (bad >= 0) return `spec.cidrs[${bad}] ${show(cidrs[bad])} is not a CIDR`;
  if (families.length === 2 && families[0] === families[1]) return 'spec.cidrs must be of different families';
  return undefined;
}

/**
 * Legacy Endpoints → EndpointSlices, as the EndpointSlice mirroring controller does it: one
 * slice per subset and address family; `addresses` are ready, `notReadyAddresses` not ready.
 */
export function endpointsToSlices(ep: V1Endpoints): Array<V1EndpointSlice & { endpoints: V1Endpoint[] }> {
  const name = str(ep, 'metadata', 'name') ?? '';
  const namespace = str(ep, 'metadata', 'namespace') ?? 'default';
  const labels = field(ep, 'metadata', 'labels');
  const slices: Array<V1EndpointSlice & { endpoints: V1Endpoint[] }> = [];
  (arr(ep, 'subsets') ?? []).forEach((subset, i) => {
    const all = [
      ...(arr(subset, 'addresses') ?? []).map((a) => ({ a, ready: true })),
      ...(arr(subset, 'notReadyAddresses') ?? []).map((a) => ({ a, ready: false })),
    ];
    for (const [family, addressType] of [['inet', 'IPv4'], ['inet6', 'IPv6']] as const) {
      const endpoints: V1EndpointSlice['endpoints'] = [];
      for (const { a, ready } of all) {
        const ip = sloppyIp(member(a, 'ip'));
        if (!ip || (ip.includes(':') ? 'inet6' : 'inet') !== family) continue;
        const nodeName = str(a, 'nodeName');
        const hostname = str(a, 'hostname');
        endpoints.push({ addresses: [ip], conditions: { ready }, ...(nodeName ? { nodeName } : {}), ...(hostname ? { hostname } : {}) });
      }
      if (endpoints.length === 0) continue;
      slices.push({
        apiVersion: 'discovery.k8s.io/v1',
        kind: 'EndpointSlice',
        metadata: {
          name: `${name}-mirror-${i}-${addressType.toLowerCase()}`,
          namespace,
          labels: { ...stringMembers(labels), [LABEL_SERVICE_NAME]: name },
        },
        addressType,
        endpoints,
        ports: (arr(subset, 'ports') ?? []).map((p) => ({ name: str(p, 'name') ?? '', port: int(p, 'port'), protocol: str(p, 'protocol') ?? 'TCP' })),
      });
    }
  });
  return slices;
}

/** The members of a mapping whose values are strings (labels as the API server has them). */
function stringMembers(m: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (isMapping(m)) for (const [k, v] of Object.entries(m)) if (typeof v === 'string') out[k] = v;
  return out;
}

/** Adds slices for legacy Endpoints whose service has no EndpointSlice of its own (as in a
 *  cluster, where the mirroring controller leaves alone Endpoints that slices already cover). */
export function resolveLegacyEndpoints(set: ManifestSet): ManifestSet {
  const covered = new Set(set.endpointSlices.map((s) => `${str(s, 'metadata', 'namespace') ?? 'default'}/${str(s, 'metadata', 'labels', LABEL_SERVICE_NAME) ?? ''}`));
  const mirrored = set.endpoints.filter((e) => !covered.has(objectKey(e))).flatMap(endpointsToSlices);
  return { ...set, endpointSlices: [...set.endpointSlices, ...mirrored] };
}
