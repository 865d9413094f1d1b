#!/usr/bin/env -S MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072 MALLOC_TRIM_THRESHOLD_=131072 node --max-semi-space-size=1 --v8-pool-size=1 --heap-growing-percent=20 --no-memory-reducer
// The ipvsync command line. Each command group lives in its own module (ipvs.ts, …).
// Node runs with these settings for a node agent (the Dockerfile passes the same; the
// measurements behind each: docs/performance.md, "Memory and process settings"):
// - a 1 MB semi-space: a larger young generation only adds to the resident set;
// - one V8 background thread: on a small node V8's helpers otherwise compete with the main
//   thread and the addon's pool for the CPUs during a full sync;
// - the old generation grows at most 20% past what the last full collection kept: what a full
//   sync allocates is collected during it instead of piling up to its end (the memory target);
// - two malloc arenas, and glibc's mmap/trim thresholds fixed at their defaults: freed memory
//   goes back to the system instead of staying in per-thread arenas and raised thresholds;
// - no memory reducer: the daemon asks for its collections itself (after full syncs), and the
//   reducer's collection of an idle heap held the daemon's event loop mid-sync.
// first: a stop signal from here on is caught (early-signals.ts)
import { releaseEarlySignals } from '../daemon/early-signals.js';
import { readFileSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';
import { Command } from 'commander';
import { BadInputError, NetlinkError, errorJson } from '../errors.js';
import { PreflightError } from '../daemon/lifecycle.js';
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
  .option('--netns <path>', 'operate inside this network namespace (/run/netns/NAME)')
  // A usage error (an unknown option, a missing argument) is bad input: 2, as the README says;
  // help and --version: 0. (Set before the commands are added: they inherit it.)
  .exitOverride((e) => process.exit(e.exitCode === 0 ? 0 : 2));

function handleOptions(): HandleOptions {
  const ns = program.opts<{ netns?: string }>().netns;
  return ns ? { netns: ns } : {};
}

registerIpvs(program, handleOptions);
registerProxy(program, handleOptions);
registerIpset(program, handleOptions);

/** The command asked for JSON (`--json`): its failure is JSON too, where its output goes. */
let json = false;
program.hook('preAction', (_program, action) => {
  json = action.opts<{ json?: boolean }>().json === true;
  // The daemon handles stop signals (and adopts one caught so far); the others die of them.
  if (action.name() !== 'proxy') releaseEarlySignals();
  // The settings above are the daemon's (`proxy`, a node agent with a memory target). A one-shot
  // command (sync, restore, save…) only has to finish: V8's own heap growing, without which
  // its full collections ran every 20% of growth (3 of `sync -f`'s 8.6 s at 20k services).
  if (action.name() !== 'proxy') setFlagsFromString('--heap-growing-percent=0');
});

/** 2: bad input (a configuration or flag value), refused before anything was applied; 3: the
 *  kernel lacks the feature (module not loaded), distinct from a failed operation (1). */
function exitCode(e: unknown): number {
  if (e instanceof BadInputError) return 2;
  if (e instanceof PreflightError) return e.exitCode;
  if (e instanceof NetlinkError) return e.kind === 'unsupported' ? 3 : 1;
  return 1;
}

program.parseAsync(process.argv).catch((e: unknown) => {
  const code = exitCode(e);
  if (json) console.log(JSON.stringify({ error: { ...errorJson(e), exitCode: code } }));
  console.error(e instanceof Error ? `ipvsync: ${e.message}` : e);
  process.exit(code);
});
