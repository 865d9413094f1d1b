import type { Command } from 'commander';
import { Ipvs, formatInfo } from '../kernel/ipvs.js';
import type { HandleOptions } from '../native.js';

/** `ipvsync ipvs …` */
export function registerIpvs(program: Command, handleOptions: () => HandleOptions): void {
  const ipvs = program.command('ipvs').description('IPVS virtual and real servers');

  ipvs
    .command('info')
    .description('print the IPVS version and connection table size (as ipvsadm does)')
    .action(async () => {
      const h = await Ipvs.open(handleOptions());
      console.log(formatInfo(await h.info()));
    });
}
