// The suite's markdown names the run of each qemu row when the table holds rows of several runs
// (the qemu phase keeps rows of sizes it did not measure again).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderMarkdown, type SuiteResult } from '../../bench/lib/render.js';

const environment = { env: 'qemu', kernel: '6.1', cpu: 'TCG', nproc: 2, memMB: 3000, loadavg: '0', node: 'v20', tools: {}, date: '2026-11-25T12:58:41.564Z' };
const row = (services: number, measuredAt?: string) => ({ services, endpoints: services * 10, sizes: {}, peers: {}, ...(measuredAt ? { measuredAt } : {}) });

test('the qemu environment line names each row’s run when the rows come from several runs, and only then', () => {
  const mixed: SuiteResult = { date: 'd', hostUptime: 'u', phases: { qemu: { environment, loadavgEnd: '1', rows: [row(1000, '2026-11-25T06:56:03.918Z'), row(10000, '2026-11-25T12:58:41.564Z')] } } };
  const md = renderMarkdown(mixed);
  assert.match(md, /Rows from different runs \(compare within a row\): 1k 2026-11-25T06:56:03\.918Z, 10k 2026-11-25T12:58:41\.564Z/);
  const one: SuiteResult = { date: 'd', hostUptime: 'u', phases: { qemu: { environment, loadavgEnd: '1', rows: [row(1000), row(10000, environment.date)] } } };
  assert.doesNotMatch(renderMarkdown(one), /Rows from different runs/);
});

test('the where-the-time-goes table shows the main thread’s run-queue wait beside the event loop when the worker measured it', () => {
  const threads = { main: { user: 1200, sys: 50 }, others: { user: 30, sys: 900 } };
  const full = (cpu: Record<string, unknown>) => ({
    ms: 2300, translateMs: 400, observeMs: 50, diffMs: 150, applyMs: 1300, writes: 1, messages: 10, sendmsg: 2,
    cpu: { userMs: 1, sysMs: 1, threads, ...cpu }, eventLoop: { maxMs: 111.2, p99Ms: 40.4, meanMs: 12, samples: 900 },
  });
  const step = { ms: 2.5, messages: 8 };
  const worker = (cpu: Record<string, unknown>) => ({
    manifestsLoadMs: 900, full: full(cpu), oneEndpointProxier: step, oneEndpointEngine: step, noop: step, memory: { afterFullSync: { vmHWMkB: 150000, vmRSSkB: 1 } },
  });
  const res = (cpu: Record<string, unknown>): SuiteResult => ({
    date: 'd', hostUptime: 'u',
    phases: { host: { environment: { ...environment, env: 'host' }, loadavgEnd: '1', rows: [{ ...row(10000), worker: worker(cpu) }] } },
  });
  assert.match(renderMarkdown(res({ mainRunQueueWaitMs: 512.6 })), /\| 111 \/ 40 ms \(513 ms\) \|/);
  const without = renderMarkdown(res({}));
  assert.match(without, /\| 111 \/ 40 ms \|/);
  assert.doesNotMatch(without, /111 \/ 40 ms \(/);
});
