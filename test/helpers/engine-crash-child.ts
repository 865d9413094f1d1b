// A process that runs one big engine sync against the real kernel, for the crash-and-resume
// test (test/kernel/engine-ipvs.test.ts), which SIGKILLs it in the middle of the apply.
//   node dist/test/helpers/engine-crash-child.js STATE.json
// STATE.json: { desired: DesiredState, ownership: Ownership }. Prints "planned <writes>" once
// the plan is made (the reads are done), then "done <writes>" if it lives that long.
import { readFileSync } from 'node:fs';
import { Engine, planWrites } from '../../src/engine/engine.js';
import { Ipvs } from '../../src/kernel/ipvs.js';
import { Links } from '../../src/kernel/links.js';
import { IpSets } from '../../src/kernel/ipsets.js';

const file = process.argv[2];
if (!file) throw new Error('usage: engine-crash-child.js STATE.json');
const { desired, ownership } = JSON.parse(readFileSync(file, 'utf8'));
const engine = new Engine({ ipvs: await Ipvs.open(), links: await Links.open(), ipsets: await IpSets.open() }, ownership);
const plan = await engine.plan(desired);
process.stdout.write(`planned ${planWrites(plan).length}\n`);
const report = await engine.apply(plan);
process.stdout.write(`done ${report.ipvs.writes + report.addresses.writes + report.ipsets.writes} errors ${report.errors.length}\n`);
