// bench/event-loop.ts's table, rendered from the committed results' rows, is the committed
// markdown's table (both layouts: the host's two variants, qemu's three with run_estimation=0).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { eventLoopTable, type EventLoopRow } from '../../bench/lib/event-loop-table.js';

const results = (f: string) => readFileSync(fileURLToPath(new URL(`../../../bench/results/${f}`, import.meta.url)), 'utf8');

for (const env of ['host', 'qemu']) {
  test(`event-loop table (${env}): the committed rows render to the committed markdown`, () => {
    const rows = (JSON.parse(results(`event-loop-${env}.json`)) as { rows: EventLoopRow[] }).rows;
    const three = rows.every((r) => r.threadNoEstimation);
    const table = results(`event-loop-${env}.md`).split('\n').filter((l) => l.startsWith('|'));
    assert.ok(table.length >= 3);
    assert.deepEqual(eventLoopTable(rows, three), table);
  });
}

test('event-loop table: the middle column is the in-process / thread ratio, or every run of the two threads', () => {
  const run = (loopMaxMs: number) => ({ ms: 1000, loopMaxMs, loopP99Ms: 5, gcMaxMs: 1, hwmMB: 100 });
  const row: EventLoopRow = { services: 1000, mode: 'route', inProcess: [run(90), run(120)], thread: [run(30), run(20)], threadNoEstimation: [run(10), run(12)] };
  assert.equal(eventLoopTable([row], false)[2], '| 1000 | route | 120 ms | 30 ms | 4.0× | 5 / 5 ms | 1.00 / 1.00 s | 100 / 100 MB |');
  assert.equal(eventLoopTable([row], true)[2], '| 1000 | route | 120 ms | 30 ms | 12 ms | 30, 20 / 10, 12 ms | 5 / 5 / 5 ms | 1.00 / 1.00 / 1.00 s | 100 / 100 / 100 MB |');
});
