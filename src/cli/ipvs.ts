import type { Command } from 'commander';
import { Ipvs, formatInfo } from '../kernel/ipvs.js';
import { fileResolver, formatList, formatSave, numeric, parseRules, RulesParseError } from '../formats/ipvsadm.js';
import type { HandleOptions } from '../native.js';
import { excerpt, NetlinkError } from '../errors.js';
import { readInput } from './input.js';


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

  ipvs
    .command('save')
    .description('print the table as `ipvsadm -S` does (rules `ipvsadm -R` reads)')
    .option('-n, --numeric', 'numeric addresses and ports')
    .action(async (o: { numeric?: boolean }) => {
      const h = await Ipvs.open(handleOptions());
      const services = await h.services({ withDestinations: true });
      process.stdout.write(formatSave(services, o.numeric ? numeric : fileResolver()));
    });

  ipvs
    .command('restore')
    .description('apply `ipvsadm -R` rules from stdin in batches (names from /etc/hosts and /etc/services); bad input applies nothing')
    .option('--continue', 'keep going after a kernel error (default: stop at the first; lines after it never reach the kernel)')
    .option('--batch <n>', 'with --continue, at most this many requests per sendmsg (default 1024); without it lines go one at a time', (v) => Number.parseInt(v, 10))
    .action(async (o: { continue?: boolean; batch?: number }) => {
      const text = await readInput(undefined);
      let rules;
      try {
        rules = parseRules(text, fileResolver());
      } catch (e) {
        if (e instanceof RulesParseError) {
          console.error(`ipvsync: ${e.message} (nothing applied)`);
          process.exit(2);
        }
        throw e;
      }
      const h = await Ipvs.open(handleOptions());
      let result;
      try {
        result = await h.apply(
          rules.map((r) => r.op),
          { stopOnError: !o.continue, ...(o.batch && o.batch > 0 ? { maxBatchMessages: o.batch } : {}) },
        );
      } catch (e) {
        // A value the rules syntax lets through and the addon refuses (an over-long scheduler
        // name …): refused before anything is sent, named by its line.
        const rule = e instanceof NetlinkError && e.kind === 'invalid' && e.index !== undefined ? rules[e.index] : undefined;
        if (!rule) throw e;
        console.error(`ipvsync: line ${rule.line}: ${excerpt((e as NetlinkError).message)} (nothing applied)`);
        process.exit(2);
      }
      for (const e of [...result.errors].sort((a, b) => (a.index ?? 0) - (b.index ?? 0))) {
        const rule = e.index !== undefined ? rules[e.index] : undefined;
        console.error(`ipvsync: line ${rule?.line ?? '?'}: ${e.code}: ${e.message}`);
      }
      if (!result.ok) {
        const notSent = result.count('not-sent');
        if (notSent > 0) console.error(`ipvsync: stopped; ${notSent} later line(s) not applied (use --continue to go on past errors)`);
        console.error(`ipvsync: ${result.count('ok')} of ${result.size} line(s) applied`);
        process.exit(1);
      }
    });

  ipvs
    .command('list')
    .description('list virtual services and their real servers (like `ipvsadm -Ln`)')
    .option('--json', 'print the typed model as JSON')
    .option('--stats', 'include counters')
    .option('--names', 'resolve addresses and ports from /etc/hosts and /etc/services')
    .action(async (o: { json?: boolean; stats?: boolean; names?: boolean }) => {
      const h = await Ipvs.open(handleOptions());
      const services = await h.services({ withDestinations: true, stats: !!o.stats });
      if (o.json) {
        process.stdout.write(JSON.stringify(services, null, 2) + '\n');
        return;
      }
      const info = await h.info();
      process.stdout.write(formatList(info, services, o.names ? fileResolver() : numeric, o.stats ? 'stats' : 'default'));
    });

  ipvs
    .command('flush')
    .description('delete every virtual service (like `ipvsadm -C`)')
    .action(async () => {
      const h = await Ipvs.open(handleOptions());
      await h.flush();
    });
}
