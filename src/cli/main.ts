#!/usr/bin/env node
// The ipvsync command line. Each command group lives in its own module (ipvs.ts, …).
import { Command } from 'commander';
import { NetlinkError } from '../errors.js';
import type { HandleOptions } from '../native.js';
import { registerIpvs } from './ipvs.js';
import { registerProxy } from './proxy.js';
import { registerIpset } from './ipset.js';

const program = new Command();
program
  .name('ipvsync')
  .description('Program IPVS, VIPs, ipsets and nftables over netlink')
  .option('--netns <path>', 'operate inside this network namespace (/run/netns/NAME)');

function handleOptions(): HandleOptions {
  const ns = program.opts<{ netns?: string }>().netns;
  return ns ? { netns: ns } : {};
}

registerIpvs(program, handleOptions);
registerProxy(program, handleOptions);
registerIpset(program, handleOptions);

program.parseAsync(process.argv).catch((e: unknown) => {
  if (e instanceof NetlinkError) {
    console.error(`ipvsync: ${e.message}`);
    // 3: the kernel lacks the feature (module not loaded), distinct from a failed operation.
    process.exit(e.kind === 'unsupported' ? 3 : 1);
  }
  console.error(e instanceof Error ? `ipvsync: ${e.message}` : e);
  process.exit(1);
});
