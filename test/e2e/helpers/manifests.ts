// Manifests for the end-to-end tests: fixtures from test/fixtures/e2e/, changed copies written
// to a fresh folder under /tmp (the guest's only writable place besides /run).
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ROOT } from './kernel.js';
import { CLUSTER_CIDR, CLUSTER_CIDR6, NODE_NAME } from './podnet.js';

export type Doc = Record<string, any>;

export async function fixture(name: string): Promise<Doc[]> {
  const text = await readFile(join(ROOT, 'test', 'fixtures', 'e2e', name), 'utf8');
  return parseAllDocuments(text).map((d) => d.toJS() as Doc);
}

export function manifestDir(tag: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `ipvsync-e2e-${tag}-`));
}

/** Writes the documents as one multi-document YAML file, atomically (a hidden temporary name
 *  first: the manifest loader skips hidden names, so a watcher never reads half a file). */
export async function writeManifests(dir: string, file: string, docs: readonly Doc[]): Promise<string> {
  const path = join(dir, file);
  const tmp = join(dir, `.${file}.tmp`);
  await writeFile(tmp, docs.map((d) => JSON.stringify(d, null, 1)).join('\n---\n') + '\n');
  await rename(tmp, path);
  return path;
}

export async function removeManifests(dir: string, file: string): Promise<void> {
  await rm(join(dir, file));
}

/** A copy of the documents with the endpoint at `address` gone from the EndpointSlices of one
 *  service. */
export function withoutEndpoint(docs: readonly Doc[], service: string, address: string): Doc[] {
  return docs.map((d) => {
    const c = structuredClone(d);
    if (c.kind === 'EndpointSlice' && c.metadata?.labels?.['kubernetes.io/service-name'] === service) c.endpoints = (c.endpoints as Array<{ addresses: string[] }>).filter((e) => !e.addresses.includes(address));
    return c;
  });
}

/** `ipvsync sync -f DIR` arguments for this node. */
export function syncArgs(dir: string, ...extra: string[]): string[] {
  return ['sync', '-f', dir, '--node-name', NODE_NAME, '--cluster-cidr', `${CLUSTER_CIDR},${CLUSTER_CIDR6}`, ...extra];
}
