// Serves a manifest folder's services.json and endpointslices.json (and a Node) through the
// tests' fake API server (the list/watch protocol of kube-apiserver, paged lists, watch
// streams), for the suite's measurement of the daemon running from the API (`proxy --master`).
// Prints "@@API <url>" once every object is in; runs until killed.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { FakeApiServer, type KubeObject } from '../../test/helpers/fake-apiserver.js';

const [dir, node] = process.argv.slice(2);
if (!dir || !node) throw new Error('usage: serve-objects DIR NODE-NAME');
const items = (f: string) => (JSON.parse(readFileSync(join(dir, f), 'utf8')) as { items: KubeObject[] }).items;
const api = await FakeApiServer.start();
for (const o of items('services.json')) api.create('services', o);
for (const o of items('endpointslices.json')) api.create('endpointslices', o);
api.create('nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: node } });
console.log(`@@API ${api.url}`);
