// Loading @kubernetes/client-node (for a kubeconfig user with an exec plugin or an auth
// provider): a client that throws as it loads (2.x's undici 8 on Node.js 20) is one
// KubeConfigError, and nothing else: the loader's second rejection of the same failure, which
// nobody holds, does not end the process (it ended the sync thread now and then before the
// refusal reached the main thread).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { importClient, KubeConfigError } from '../../src/kube/kubeconfig.js';

const FIXTURES = join(import.meta.dirname, '../../../test/fixtures/client-load');

test('a client that throws as it loads: one KubeConfigError naming Node.js and the cause; the process goes on, no listener left', () => {
  // in a process of its own, with no listener of the test runner: an unhandled rejection ends it
  const code = `
    const { importClient } = await import(${JSON.stringify(pathToFileURL(join(import.meta.dirname, '../../src/kube/kubeconfig.js')).href)});
    try { await importClient(${JSON.stringify(pathToFileURL(join(FIXTURES, 'a.mjs')).href)}); } catch (e) { console.log(e.name + ': ' + e.message); }
    await new Promise((r) => setTimeout(r, 50));
    console.log('listeners ' + process.listenerCount('unhandledRejection'));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const [refusal, listeners] = r.stdout.trim().split('\n');
  assert.match(refusal!, /^KubeConfigError: .*failed to load on Node\.js v\d+.*reading 'bind'/);
  assert.equal(listeners, 'listeners 0');
});

test('a client that is not installed: said as such', async () => {
  await assert.rejects(importClient('ipvsync-no-such-client'), (e: unknown) => e instanceof KubeConfigError && /install it beside ipvsync/.test(e.message));
});
