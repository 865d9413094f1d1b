// FolderWatch on real folders (inotify): events only for the names that matter, and a watch
// that follows the folder at its path when it is deleted and made again, appears late, or is a
// symlink swapped to another folder.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FolderWatch } from '../../src/daemon/folder-watch.js';
import { affectsManifests } from '../../src/kube/manifest-names.js';

/** A watch of `dir` that records its changes, the names it was asked about and its errors. */
function watching(t: { after(fn: () => void): void }, dir: string) {
  const seen = { changes: 0, asked: [] as string[], errors: [] as Error[] };
  const w = new FolderWatch(dir, {
    relevant: (name) => (seen.asked.push(name), affectsManifests(name)),
    onChange: () => seen.changes++,
    onError: (e) => seen.errors.push(e),
  });
  w.start();
  t.after(() => w.close());
  return { w, seen };
}

/** Polls `cond` until it holds; the 60-s deadline only bounds a hang (1,000 tries of 10 ms
 *  were a few seconds of a loaded machine's time). */
async function until(what: string, cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!cond() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  assert.ok(cond(), `not reached: ${what}`);
}

function tmp(t: { after(fn: () => void): void }, tag: string): string {
  const d = mkdtempSync(join(tmpdir(), `ipvsync-watch-${tag}-`));
  t.after(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

test('FolderWatch: only events for names the reader reads are changes; temporary files, hidden names and other suffixes are not', async (t) => {
  const dir = tmp(t, 'names');
  const { seen } = watching(t, dir);
  writeFileSync(join(dir, '.web.json.tmp'), '{}');
  writeFileSync(join(dir, 'web.json.tmp'), '{}');
  writeFileSync(join(dir, 'notes.txt'), '');
  rmSync(join(dir, 'notes.txt'));
  // inotify reports a folder's events in order: the ones above have come once this one has
  renameSync(join(dir, '.web.json.tmp'), join(dir, 'web.json'));
  await until('the rename to web.json', () => seen.asked.includes('web.json'));
  assert.ok(['.web.json.tmp', 'web.json.tmp', 'notes.txt'].every((n) => seen.asked.includes(n)), seen.asked.join());
  assert.equal(seen.changes, seen.asked.filter(affectsManifests).length, seen.asked.join());
  assert.ok(seen.changes >= 1);
  assert.deepEqual(seen.errors, []);
});

test('FolderWatch: the folder deleted and made again is a change, and the new folder is watched', async (t) => {
  const dir = join(tmp(t, 'again'), 'manifests');
  mkdirSync(dir);
  const { seen } = watching(t, dir);
  writeFileSync(join(dir, 'a.yaml'), '');
  await until('a.yaml', () => seen.changes > 0);
  rmSync(dir, { recursive: true });
  mkdirSync(dir);
  // (written again until it is seen: the parent's event for the new folder comes first)
  // (the deadline only bounds a hang: 500 tries of 20 ms were not that on a loaded machine)
  const deadline = Date.now() + 60_000;
  for (let i = 0; !seen.asked.includes('b.yaml') && Date.now() < deadline; i++) {
    writeFileSync(join(dir, 'b.yaml'), String(i));
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.ok(seen.asked.includes('b.yaml'), `the new folder's events: ${seen.asked.join()}`);
  assert.ok(seen.changes >= 3, 'a.yaml, the folder gone, the new folder and b.yaml are changes');
  assert.deepEqual(seen.errors, []);
});

test('FolderWatch: a folder that appears after the start is watched from then on', async (t) => {
  const dir = join(tmp(t, 'late'), 'manifests');
  const { seen } = watching(t, dir);
  mkdirSync(dir);
  await until('the folder made', () => seen.changes > 0);
  writeFileSync(join(dir, 'a.json'), '');
  await until('a.json', () => seen.asked.includes('a.json'));
  assert.deepEqual(seen.errors, []);
});

test('FolderWatch: a symlink swapped to another folder moves the watch; the old folder\'s events are gone', async (t) => {
  const root = tmp(t, 'swap');
  mkdirSync(join(root, 'v1'));
  mkdirSync(join(root, 'v2'));
  const dir = join(root, 'manifests');
  symlinkSync('v1', dir);
  const { seen } = watching(t, dir);
  writeFileSync(join(root, 'v1', 'one.yaml'), '');
  await until('v1/one.yaml', () => seen.asked.includes('one.yaml'));
  // atomically, as kubelet and deploy tools swap a symlink
  symlinkSync('v2', join(root, 'manifests.tmp'));
  renameSync(join(root, 'manifests.tmp'), dir);
  const changes = seen.changes;
  await until('the swap', () => seen.changes > changes);
  writeFileSync(join(root, 'v1', 'old.yaml'), '');
  writeFileSync(join(root, 'v2', 'two.yaml'), '');
  await until('v2/two.yaml', () => seen.asked.includes('two.yaml'));
  assert.ok(!seen.asked.includes('old.yaml'), seen.asked.join());
});

test('FolderWatch: recheck() moves the watch to a folder replaced where the parent cannot see it (behind a symlink); close() ends every event', async (t) => {
  const root = tmp(t, 'recheck');
  mkdirSync(join(root, 'target'));
  const dir = join(root, 'link');
  symlinkSync(join(root, 'target'), dir);
  const { w, seen } = watching(t, dir);
  rmSync(join(root, 'target'), { recursive: true });
  mkdirSync(join(root, 'target'));
  w.recheck();
  writeFileSync(join(root, 'target', 'a.yaml'), '');
  await until('a.yaml in the new target', () => seen.asked.includes('a.yaml'));
  w.close();
  const after = seen.asked.length;
  writeFileSync(join(root, 'target', 'b.yaml'), '');
  rmSync(join(root, 'target'), { recursive: true });
  // a watch of its own to know the events have been delivered
  const probe = watching(t, root);
  writeFileSync(join(root, 'probe.yaml'), '');
  await until('the probe', () => probe.seen.asked.includes('probe.yaml'));
  assert.equal(seen.asked.length, after);
  assert.deepEqual(seen.errors, []);
});
