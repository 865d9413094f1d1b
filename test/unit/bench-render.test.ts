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
