// ManifestFolder.load() called while another load runs (issue #58): the loads take turns, so
// the handlers end with the newest call's read, whatever order the reads would finish in.
// The first load's file read is held on a promise the test controls (node:fs/promises patched
// through syncBuiltinESMExports, which the reader's `import { readFile }` follows): no timing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { V1Service } from '@kubernetes/client-node';
import { ManifestError, ManifestFolder } from '../../src/kube/manifests.js';

const fsp = createRequire(import.meta.url)('node:fs/promises') as typeof import('node:fs/promises');

/** Holds the reads of files under `dir` the test asks for: `hold()` makes the next such read
 *  read the file now and return its text only when released. Counts the folder's stats (one per
 *  load, its first step). */
function gateReads(dir: string): { hold(): { started: Promise<void>; release(): void }; stats: () => number; restore(): void } {
  const realRead = fsp.readFile;
  const realStat = fsp.stat;
  let held: { started: () => void; gate: Promise<void> } | undefined;
  let stats = 0;
  fsp.readFile = (async (path: Parameters<typeof realRead>[0], opts?: Parameters<typeof realRead>[1]) => {
    const text = await realRead(path, opts);
    const h = typeof path === 'string' && path.startsWith(dir) ? held : undefined;
    if (h) {
      held = undefined;
      h.started();
      await h.gate;
    }
    return text;
  }) as typeof realRead;
  fsp.stat = ((path: Parameters<typeof realStat>[0], opts?: Parameters<typeof realStat>[1]) => {
    if (path === dir) stats++;
    return realStat(path, opts);
  }) as typeof realStat;
  syncBuiltinESMExports();
  return {
    hold() {
      let started!: () => void;
      let release!: () => void;
      const s = new Promise<void>((r) => (started = r));
      held = { started, gate: new Promise<void>((r) => (release = r)) };
      return { started: s, release };
    },
    stats: () => stats,
    restore() {
      fsp.readFile = realRead;
      fsp.stat = realStat;
      syncBuiltinESMExports();
    },
  };
}

const service = (name: string) => `apiVersion: v1\nkind: Service\nmetadata: {name: ${name}, namespace: ns}\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n`;

function tracker() {
  const have = new Set<string>();
  return {
    have,
    h: {
      onServiceUpdate: (s: V1Service) => void have.add(`${s.metadata?.namespace}/${s.metadata?.name}`),
      onServiceDelete: (k: string) => void have.delete(k),
      onSliceUpdate: () => undefined,
      onSliceDelete: () => undefined,
    },
  };
}

test('ManifestFolder: a load called while an older one still reads ends with the newer read (the older one finishing last does not overwrite it)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-folder-race-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const fs = gateReads(dir);
  t.after(() => fs.restore());
  writeFileSync(join(dir, 'svc.yaml'), service('old'));
  const { have, h } = tracker();
  const folder = new ManifestFolder(dir);

  const first = fs.hold();
  const p1 = folder.load(h);
  await first.started; // the first load has read the folder as it was ("old") and is held
  writeFileSync(join(dir, 'svc.yaml'), service('new'));
  const statsBefore = fs.stats();
  const p2 = folder.load(h);
  // Unserialised, the second load starts reading at once (its stat of the folder is its first,
  // synchronous step): let it finish first, as a faster read would. Serialised, it waits for the
  // first, which waits for the release.
  if (fs.stats() > statsBefore) await p2;
  first.release();
  const [l1, l2] = await Promise.all([p1, p2]);
  assert.equal(l1.services, 1);
  assert.equal(l2.services, 1);
  assert.deepEqual([...have], ['ns/new'], 'the newest call read the folder last');
});

test('ManifestFolder: concurrent loads resolve in call order, each with its own read; one that fails does not stop the next', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-folder-order-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const fs = gateReads(dir);
  t.after(() => fs.restore());
  writeFileSync(join(dir, 'a.yaml'), service('a'));
  writeFileSync(join(dir, 'b.yaml'), service('b'));
  const { have, h } = tracker();
  const folder = new ManifestFolder(dir);
  const order: string[] = [];
  const first = fs.hold();
  const p1 = folder.load(h).then(
    () => assert.fail('the first load read a file that was gone'),
    (e: unknown) => (order.push('1'), e),
  );
  await first.started; // it has listed a.yaml and b.yaml and read a.yaml: b.yaml is gone when it
  // reads it (a ManifestError), and the folder is good for the loads after it
  rmSync(join(dir, 'b.yaml'));
  writeFileSync(join(dir, 'c.yaml'), service('c'));
  const p2 = folder.load(h).then((l) => (order.push('2'), l));
  const p3 = folder.load(h).then((l) => (order.push('3'), l));
  first.release();
  const [e1, l2, l3] = await Promise.all([p1, p2, p3]);
  assert.ok(e1 instanceof ManifestError);
  assert.deepEqual(order, ['1', '2', '3']);
  assert.equal(l2.services, 2);
  assert.equal(l3.services, 2);
  assert.deepEqual([...have].sort(), ['ns/a', 'ns/c']);
});
