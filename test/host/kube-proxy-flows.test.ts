// kube-proxy's own nftables-mode packet-flow tests, replayed with real packets through
// `ipvsync sync -f --proxy-mode nftables` on the machine's kernel. The cases are upstream's
// runPacketFlowTests calls, transcribed as data in test/fixtures/kube-proxy/nftables/ (each
// names the upstream test, the commit it came from, and the line of the call); the lab
// (test/helpers/packet-flows.ts) sends each flow's packets and judges them from the node's
// conntrack and nftables trace events. A flow passes when the packets reached exactly the
// endpoints upstream expects (or were dropped, rejected, or left untranslated as it expects)
// and were masqueraded exactly when it expects.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FlowLab, expectedOutput, loadCases } from '../helpers/packet-flows.js';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'test', 'fixtures', 'kube-proxy', 'nftables');
const CASES = loadCases(FIXTURES);

test('kube-proxy nftables packet flows, with real packets', async (t) => {
  assert.ok(CASES.length >= 43, `${CASES.length} cases`);
  const lab = await FlowLab.open(CASES[0]!.nodeIPs);
  t.after(() => lab.dispose());
  for (const c of CASES) {
    await t.test(`${c.file} (${c.upstream.test}${c.upstream.case ? `: ${c.upstream.case}` : ''}, upstream line ${(c.upstream as { line?: number }).line ?? '?'})`, async () => {
      await lab.program(c);
      const wrong: string[] = [];
      for (const f of c.flows) {
        const got = await lab.flow(f);
        const want = { output: expectedOutput(f.output), masq: f.masq };
        if (got.output !== want.output || got.masq !== want.masq)
          wrong.push(`${f.name} (${f.protocol} ${f.source} → ${f.dest}:${f.port}): got ${JSON.stringify({ output: got.output, masq: got.masq })}, want ${JSON.stringify(want)} (${got.packets} packets)`);
      }
      assert.deepEqual(wrong, [], `${wrong.length} of ${c.flows.length} flows`);
    });
  }
});
