import type { Command } from 'commander';
import { excerpt, NetlinkError } from '../errors.js';
import { readInput } from './input.js';
import { formatSave, parseRestore, RestoreSyntaxError } from '../formats/ipset.js';
import { IpSets, type IpSetFamily, type IpSetType } from '../kernel/ipsets.js';
import type { HandleOptions } from '../native.js';


/** `ipvsync ipset …` */
export function registerIpset(program: Command, handleOptions: () => HandleOptions): void {
  const ipset = program.command('ipset').description('ipsets over nfnetlink (ipset save/restore compatible)');

  ipset
    .command('save')
    .argument('[name]', 'one set (default: every set)')
    .description('print sets and members in `ipset save` format')
    .action(async (name?: string) => {
      const sets = await (await IpSets.open(handleOptions())).list(name);
      process.stdout.write(formatSave(sets));
    });

  ipset
    .command('restore')
    .description('apply `ipset restore` input from stdin in batches; a syntax error applies nothing, a kernel error stops there')
    .option('--exist, -!', 'ignore errors for sets/elements that already exist (ipset -exist)')
    .option('-f, --file <path>', 'read this file instead of stdin')
    .action(async (o: { exist?: boolean; file?: string }) => {
      const text = await readInput(o.file);
      const sets = await IpSets.open(handleOptions());
      const known = new Map<string, { type: IpSetType; family?: IpSetFamily }>();
      for (const s of await sets.headers()) known.set(s.name, { type: s.type, family: s.family });
      let plan;
      try {
        plan = parseRestore(text, known, { exist: o.exist });
      } catch (e) {
        if (e instanceof RestoreSyntaxError) {
          console.error(`ipvsync: ipset restore: ${e.message}; nothing was applied`);
          process.exit(2); // bad input, nothing applied (as ipvs restore)
        }
        throw e;
      }
      let result;
      try {
        result = await sets.apply(plan.ops);
      } catch (e) {
        // Validation in the addon names "op N … member M": point at the input line instead.
        if (e instanceof NetlinkError && e.kind === 'invalid') {
          const m = /^op (\d+)(?: \([^)]*\))?(?: member (\d+))?/.exec(e.message);
          if (m) {
            const lines = plan.lines[Number(m[1])] ?? [];
            const line = lines[m[2] ? Number(m[2]) : 0];
            if (line !== undefined) {
              console.error(`ipvsync: ipset restore: line ${line}: ${excerpt(e.message)}; nothing was applied`);
              process.exit(2);
            }
          }
        }
        throw e;
      }
      if (!result.ok) {
        for (const e of result.errors) {
          const lines = plan.lines[e.index ?? -1] ?? [];
          // The kernel names the failing member of a multi-member message: point at its line.
          const exact = e.member !== undefined ? lines[e.member] : undefined;
          const where =
            exact !== undefined ? `line ${exact}` : lines.length > 1 ? `lines ${lines[0]}-${lines[lines.length - 1]}` : `line ${lines[0] ?? '?'}`;
          console.error(`ipvsync: ipset restore: error in ${where}: ${excerpt(e.message)}`);
        }
        // As `ipset restore`, stop at the first error: nothing after it reached the kernel. Of
        // a failed multi-line add/del, the lines before its failing member were applied.
        let applied = 0;
        let total = 0;
        for (let i = 0; i < plan.ops.length; i++) {
          const lines = plan.lines[i]!.length;
          total += lines;
          if (result.status(i) === 'ok') applied += lines;
          else if (result.status(i) === 'error') applied += result.errorOf(i)?.member ?? 0;
        }
        console.error(`ipvsync: ipset restore: stopped; ${applied} of ${total} line(s) applied`);
        process.exit(1);
      }
    });
}
