#!/usr/bin/env -S MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072 MALLOC_TRIM_THRESHOLD_=131072 node --max-semi-space-size=4 --v8-pool-size=1 --heap-growing-percent=20 --no-memory-reducer
// The ipvsync command line. Each command group lives in its own module (ipvs.ts, …).
// Node runs with these settings for a node agent (the Dockerfile passes the same):
// - a 4 MB semi-space (the young generation's half; Node's default grows it to 16 MB on a
//   machine with memory to spare): the larger young generation only added to the resident set
//   (~10–20 MB at 10k services × 10, measured) without making a full sync faster;
// - one V8 background thread (Node's default is 4, whatever the CPUs): during a full sync V8's
//   helpers (concurrent marking, parallel scavenges, optimizing compiles) took ~0.5 s of CPU
//   beside the main thread and the libuv threads' kernel work, and on a 2-vCPU node the main
//   thread then waited 0.2–0.4 s for a CPU; with one the event loop's longest block at 10k
//   services went from 33–73 to 25–36 ms, the sync no slower (measured);
// - an old generation allowed to grow 20% past what the last full collection kept before the
//   next one starts (V8 otherwise picks up to 4× for a heap that collects fast): a full sync at
//   10k services × 10 allocates ~190 MB, and what survives the young generation only for the
//   sync (the translation's accumulators, the diff's intermediates) piled up until the sync
//   ended: its first sync peaked at 143–156 MB resident in 11 runs, 139–142 MB in 7 with this
//   (qemu). It costs GC work: the suite's 10k full sync under qemu took 15.2 s against 13.4 s in
//   the run before (whose legacy restore was 12% faster too);
// - two malloc arenas (glibc's default is up to 8 per CPU: the main thread's, and one more per
//   thread that allocates, here the libuv pool where the addon encodes and decodes netlink):
//   each arena keeps its own freed memory, and at 10k services × 10 the daemon's resident set
//   was ~5–10 MB larger through its periodic full resyncs with one per thread (measured under
//   qemu); one arena (shared with the main thread) made the resyncs slower, two did not;
// - glibc's mmap and trim thresholds fixed at their defaults (128 KB): glibc otherwise raises
//   them after a large block is freed (the mmap threshold to that block's size, up to 32 MB, and
//   the trim threshold to twice it), so after the first sync's multi-MB buffers blocks that size
//   came from the arenas and several MB freed at their tops stayed resident. The daemon from the
//   API at 10k peaked at 142–147 MB in six runs with this, 144–150 MB in five without
//   (interleaved, qemu), the syncs no slower;
// - no memory reducer (V8's collections of a heap that has gone idle, on a timer): with the
//   proxier on its sync thread the daemon's thread idles through a full sync, and the reducer
//   collected its small heap in the middle of it, holding its event loop 31–60 ms under qemu
//   (10k; the loop 33–68 ms in 3 runs of 4, 13–33 ms in 4 without the reducer). The daemon
//   asks for its collections itself (memoryPressure after every full sync, and on the daemon's
//   thread once the sync thread has its objects).
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { BadInputError, NetlinkError } from '../errors.js';
import type { HandleOptions } from '../native.js';
import { registerIpvs } from './ipvs.js';
import { registerProxy } from './proxy.js';
import { registerIpset } from './ipset.js';

const program = new Command();
program
  .name('ipvsync')
  .description('Program IPVS, VIPs, ipsets and nftables over netlink')
  // dist/src/cli/main.js -> the package's package.json
  .version((JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version)
  .option('--netns <path>', 'operate inside this network namespace (/run/netns/NAME)');

function handleOptions(): HandleOptions {
  const ns = program.opts<{ netns?: string }>().netns;
  return ns ? { netns: ns } : {};
}

registerIpvs(program, handleOptions);
registerProxy(program, handleOptions);
registerIpset(program, handleOptions);

program.parseAsync(process.argv).catch((e: unknown) => {
  // 2: bad input (a configuration or flag value), refused before anything was applied.
  if (e instanceof BadInputError) {
    console.error(`ipvsync: ${e.message}`);
    process.exit(2);
  }
  if (e instanceof NetlinkError) {
    console.error(`ipvsync: ${e.message}`);
    // 3: the kernel lacks the feature (module not loaded), distinct from a failed operation.
    process.exit(e.kind === 'unsupported' ? 3 : 1);
  }
  console.error(e instanceof Error ? `ipvsync: ${e.message}` : e);
  process.exit(1);
});
