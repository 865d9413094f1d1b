// The text the CLI reads must crash nothing (issue 44): a seeded mutation campaign over the
// three parsers of user text — ipvsadm rules (`ipvs restore`), ipset restore input and the
// daemon's configuration (file and flags). Valid inputs get one to three of their words
// replaced by hostile ones (empty, huge, NUL, half an address, a flag where a value goes …),
// deleted, duplicated or swapped. Each input must parse or be refused with the parser's own
// typed error; a raw JavaScript error (TypeError, RangeError …) fails the campaign.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { BadInputError, NetlinkError } from '../../src/errors.js';
import { packIpvsOps } from '../../src/kernel/ipvs-pack.js';
import { native } from '../../src/native.js';
import { parseRestore, RestoreSyntaxError } from '../../src/formats/ipset.js';
import { fileResolver, parseRules, RulesParseError } from '../../src/formats/ipvsadm.js';
import { loadConfig } from '../../src/daemon/config.js';
import { prng } from '../helpers/bytes.js';

const fixture = (p: string) => readFileSync(fileURLToPath(new URL(`../../../test/fixtures/${p}`, import.meta.url)), 'utf8');

const HOSTILE = [
  '', ' ', '-', '--', '-t', '-A', '-a', '-6', '--pe', '-s', '-r', '-p', '-M', '-b', '-w', 'add', 'create', 'del', '-exist',
  '0', '-1', '1e3', '0x10', 'NaN', 'Infinity', '99999999999999999999', '4294967296', '65536',
  '1.2.3.4:', ':80', '[::1', '::1]:80', ':::', '1.2.3.4/33', '10.0.0.000', 'fe80::1%eth0', '1:2:3:4:5:6:7:8:9',
  'tcp:', 'udp:99999', 'icmp:x/y', ',', ',,', 'hash:ip,port,ip,net', 'bitmap:port', 'range', 'family', 'inet7',
  '"', '"unterminated', '\u0000', '\u2028', 'ﬀ', 'x'.repeat(4096), '{', '[', '}', ']', 'null', 'true', '~', '*', '&a', '!!binary',
];

/** `text` with one to three of its words mutated (seeded). */
function mutate(text: string, rand: () => number): string {
  const lines = text.split('\n');
  for (let k = 0; k < 1 + Math.floor(rand() * 3); k++) {
    const li = Math.floor(rand() * lines.length);
    const words = lines[li]!.split(' ');
    const wi = Math.floor(rand() * words.length);
    const r = rand();
    if (r < 0.55) words[wi] = HOSTILE[Math.floor(rand() * HOSTILE.length)]!;
    else if (r < 0.7) words.splice(wi, 1);
    else if (r < 0.8) words.splice(wi, 0, words[wi]!);
    else if (r < 0.9) words.splice(wi, 0, HOSTILE[Math.floor(rand() * HOSTILE.length)]!);
    else {
      const wj = Math.floor(rand() * words.length);
      [words[wi], words[wj]] = [words[wj]!, words[wi]!];
    }
    lines[li] = words.join(' ');
  }
  return lines.join('\n');
}

/** Runs `parse` over `runs` mutants of `valid`: every throw must be `typed`. */
function campaign(seed: number, valid: string, parse: (text: string) => unknown, typed: (e: unknown) => boolean, runs = 3000): void {
  const rand = prng(seed);
  let parsed = 0;
  let refused = 0;
  const raw: string[] = [];
  for (let i = 0; i < runs; i++) {
    const text = mutate(valid, rand);
    try {
      parse(text);
      parsed++;
    } catch (e) {
      if (typed(e)) refused++;
      else if (raw.length < 5) raw.push(`${String(e)}\n  input: ${JSON.stringify(text.slice(0, 300))}`);
      else raw.push('');
    }
  }
  assert.deepEqual(raw.filter(Boolean), [], `${raw.length} raw errors`);
  assert.ok(parsed > 0 && refused > 0, `${parsed} parsed, ${refused} refused: the campaign reaches both outcomes`);
}

test('ipvsadm rules (ipvs restore): every mutant parses or is a RulesParseError naming a line; what parses, the addon encodes or refuses typed', () => {
  const names = fileResolver();
  campaign(
    41,
    fixture('ipvs/save-sample.txt'),
    // what `ipvs restore` hands the handle: the parsed ops, packed and encoded by the addon
    (t) => native().codec.ipvs.encodeOps(packIpvsOps(parseRules(t, names).map((r) => r.op)), 1),
    (e) => (e instanceof RulesParseError && e.line > 0) || (e instanceof NetlinkError && e.kind === 'invalid' && e.index !== undefined),
  );
});

test('ipset restore input: every mutant parses or is a RestoreSyntaxError', () => {
  campaign(42, fixture('ipset/list-reply.save'), (t) => parseRestore(t, new Map()), (e) => e instanceof RestoreSyntaxError);
  campaign(43, fixture('ipset/list-reply.save'), (t) => parseRestore(t, new Map(), { exist: true }), (e) => e instanceof RestoreSyntaxError);
});

const CONFIG = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
nodePortAddresses: [192.168.0.0/24, "fd00::/64"]
hostnameOverride: node-a
metricsBindAddress: 0.0.0.0:9100
healthzBindAddress: "[::]"
ipvs:
  scheduler: wrr
  syncPeriod: 1m
  minSyncPeriod: 1s
  tcpTimeout: 900s
  strictARP: true
  excludeCIDRs: [10.10.0.0/16]
logging: {verbosity: 4, format: json}
---
apiVersion: ipvsync.io/v1alpha1
kind: IpvsyncConfiguration
bindMode: route
serviceCIDRs: [10.96.0.0/12]
nodeIPs: [10.0.0.5]
drainTimeout: 5m`;

test('configuration file and flags: every mutant loads or is refused as bad input (exit 2)', () => {
  campaign(44, CONFIG, (t) => loadConfig({ text: t }), (e) => e instanceof BadInputError);
  // flags: `--name value` pairs, mutated the same way
  const flags = '--cluster-cidr 10.244.0.0/16 --ipvs-scheduler rr --ipvs-sync-period 30s --node-ip 10.0.0.5 --bind-mode address --drain-timeout 1m --vip-link kube-ipvs0';
  campaign(
    45,
    flags,
    (t) => {
      const words = t.split(' ');
      const f: Record<string, unknown> = {};
      for (let i = 0; i < words.length; i++) if (words[i]!.startsWith('--')) f[words[i]!.slice(2)] = words[i + 1] ?? '';
      return loadConfig({ flags: f });
    },
    (e) => e instanceof BadInputError,
  );
});
