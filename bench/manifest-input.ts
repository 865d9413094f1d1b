// `ipvsync sync -f DIR --dry-run` over the same workload as JSON and as YAML (a List per file as
// `kubectl get -o yaml` writes it, and one document per object), the whole process timed: its
// wall time and peak RSS, median and range of the rounds, and YAML's ratio to JSON in the same
// run. Formats alternate within each round; every run is a fresh command process (under the
// command's shebang flags) in a network namespace of its own, so the dry run plans against an
// empty kernel; each size is a process of its own (generation included).
//   node dist/bench/manifest-input.js [--sizes 5000,20000] [--rounds 3] [--baseline OTHER/dist/src/cli/main.js]
// --baseline: the same YAML runs under another build's command too (before/after a parser change).
// Writes bench/results/manifest-input.json and .md.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CLI, NODE_ENV_VARS, NODE_FLAGS } from './lib/command-env.js';
import { MANIFEST_FORMATS, manifestFiles, syncFlags, type ManifestFormat } from './lib/manifests.js';
import { median } from './lib/median.js';
import { NODE_IP, workload } from './lib/workload.js';

const here = dirname(fileURLToPath(import.meta.url));
const RESULTS = join(here, '..', '..', 'bench', 'results');

const { values: a } = parseArgs({
  options: {
    sizes: { type: 'string', default: '5000,20000' },
    rounds: { type: 'string', default: '3' },
    baseline: { type: 'string' },
    // the process of one size: this file again
    size: { type: 'string' },
    'row-file': { type: 'string' },
  },
});
const ROUNDS = Number(a.rounds);
const loadavg = () => os.loadavg().map((x) => Number(x.toFixed(2)));

interface Variant {
  name: string;
  cli: string;
  format: ManifestFormat;
}

interface Stat {
  medianS: number;
  minS: number;
  maxS: number;
  medianRssMb: number;
}

interface Row {
  size: number;
  bytes: Record<ManifestFormat, number>;
  loadStart: number[];
  loadEnd: number[];
  variants: Record<string, Stat & { samplesS: number[] }>;
}

/** One `sync -f DIR --dry-run` in a fresh network namespace: seconds and peak RSS (MB). */
function runOnce(cli: string, dir: string): { s: number; rssMb: number } {
  const args = ['-f', '%M', 'unshare', '--net', 'env', ...NODE_ENV_VARS, process.execPath, ...NODE_FLAGS, cli, 'sync', '-f', dir, '--proxy-mode', 'nftables', ...syncFlags(NODE_IP), '--dry-run', '--json'];
  const t0 = process.hrtime.bigint();
  const r = spawnSync('/usr/bin/time', args, { stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 64 << 20 });
  const s = Number(process.hrtime.bigint() - t0) / 1e9;
  const err = r.stderr.toString();
  if (r.status !== 0) throw new Error(`sync -f ${dir} (${cli}) exited ${r.status}: ${err.slice(-2000)}`);
  return { s, rssMb: Number(err.trim().split('\n').at(-1)) / 1024 };
}

function oneSize(size: number): Row {
  const root = mkdtempSync(join(os.tmpdir(), 'manifest-input-'));
  try {
    const services = workload(size).services;
    const bytes = {} as Record<ManifestFormat, number>;
    for (const f of MANIFEST_FORMATS) {
      mkdirSync(join(root, f));
      bytes[f] = 0;
      for (const [name, text] of Object.entries(manifestFiles(services, f))) {
        writeFileSync(join(root, f, name), text);
        bytes[f] += Buffer.byteLength(text);
      }
    }
    const variants: Variant[] = MANIFEST_FORMATS.map((format) => ({ name: format, cli: CLI, format }));
    if (a.baseline) for (const format of MANIFEST_FORMATS.filter((f) => f !== 'json')) variants.push({ name: `${format} (baseline)`, cli: a.baseline, format });
    const samples = new Map<string, Array<{ s: number; rssMb: number }>>(variants.map((v) => [v.name, []]));
    const loadStart = loadavg();
    for (let round = 0; round < ROUNDS; round++) {
      // alternated, each round in the other order: a drift in the machine's load falls on both
      const order = round % 2 ? [...variants].reverse() : variants;
      for (const v of order) {
        const r = runOnce(v.cli, join(root, v.format));
        samples.get(v.name)!.push(r);
        console.error(`${size} ${v.name}: ${r.s.toFixed(2)} s, ${r.rssMb.toFixed(0)} MB`);
      }
    }
    const stats: Row['variants'] = {};
    for (const [name, xs] of samples) {
      const secs = xs.map((x) => x.s);
      stats[name] = { medianS: median(secs), minS: Math.min(...secs), maxS: Math.max(...secs), medianRssMb: median(xs.map((x) => x.rssMb)), samplesS: secs };
    }
    return { size, bytes, loadStart, loadEnd: loadavg(), variants: stats };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

if (a.size) {
  writeFileSync(a['row-file']!, JSON.stringify(oneSize(Number(a.size))));
  process.exit(0);
}

const rows: Row[] = [];
for (const size of a.sizes!.split(',').map(Number)) {
  const rowFile = join(os.tmpdir(), `manifest-input-${process.pid}-${size}.json`);
  const args = [fileURLToPath(import.meta.url), '--size', String(size), '--rounds', String(ROUNDS), '--row-file', rowFile, ...(a.baseline ? ['--baseline', a.baseline] : [])];
  const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
  if (r.status !== 0) throw new Error(`size ${size}: exited ${r.status}`);
  rows.push(JSON.parse(readFileSync(rowFile, 'utf8')) as Row);
  rmSync(rowFile);
}

const fmt = (x: Stat) => `${x.medianS.toFixed(2)} s (${x.minS.toFixed(2)}–${x.maxS.toFixed(2)}), ${x.medianRssMb.toFixed(0)} MB`;
const md = [
  `# YAML vs JSON manifests: \`ipvsync sync -f DIR --proxy-mode nftables --dry-run\`, whole process`,
  '',
  `${os.cpus().length} CPUs, node ${process.version}, ${ROUNDS} rounds alternated; median (min–max) wall time, median peak RSS; ratio: the median over JSON's.`,
  '',
  '| services × 10 endpoints | input | size | time | ratio to JSON | load avg start → end |',
  '|---|---|---|---|---|---|',
];
for (const row of rows) {
  const json = row.variants.json!;
  for (const [name, v] of Object.entries(row.variants)) {
    const format = name.split(' ')[0] as ManifestFormat;
    md.push(`| ${row.size} | ${name} | ${(row.bytes[format] / 1e6).toFixed(1)} MB | ${fmt(v)} | ${(v.medianS / json.medianS).toFixed(2)}× | ${row.loadStart.join(' ')} → ${row.loadEnd.join(' ')} |`);
  }
}
mkdirSync(RESULTS, { recursive: true });
writeFileSync(join(RESULTS, 'manifest-input.json'), JSON.stringify({ bench: 'manifest-input', nproc: os.cpus().length, node: process.version, date: new Date().toISOString(), rounds: ROUNDS, baseline: a.baseline ?? null, rows }, null, 2) + '\n');
writeFileSync(join(RESULTS, 'manifest-input.md'), md.join('\n') + '\n');
console.log(md.join('\n'));
