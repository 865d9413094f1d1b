// kube-proxy's own IPVS-mode tests (pkg/proxy/ipvs/proxier_test.go), replayed on a real IPVS:
// each fixture of test/fixtures/kube-proxy/ipvs/ (upstream's objects and what it asserts after a
// sync, with the test, commit and line it came from) is programmed by `ipvsync sync -f` in a
// network namespace of its own test (a test's states in order, as upstream syncs them), then
// read back with ipvsadm -Sn, ipset list and ip -j addr — independent readers — and compared
// with exactly what upstream asserts. The one difference by design: virtual servers ipvsync
// did not create are kept (its ownership record), where kube-proxy deletes them; in those
// fixtures (`byDesign`) the test asserts they survive, with their real servers.
// user-mode-linux has no nftables ip tables: --no-glue (the glue has tests of its own).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { BlockList } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = join(HERE, '..', '..', 'src', 'cli', 'main.js');
const FIXTURES = join(HERE, '..', '..', '..', 'test', 'fixtures', 'kube-proxy', 'ipvs');
const NS = 'kp-ipvs';

interface RealServer {
  address: string;
  port: number;
  weight?: number;
}
interface VsCheck {
  protocol?: string;
  address?: string;
  port?: number;
  match?: Array<'address' | 'port' | 'protocol'>;
  ifPresent?: boolean;
  scheduler?: string;
  persistentTimeout?: number;
  realServers?: RealServer[];
  realServerCount?: number;
  realServersInclude?: RealServer[];
}
interface Fixture {
  file: string;
  upstream: { test: string; case?: string; line?: number; checkLine?: number };
  family: 'ipv4' | 'ipv6';
  nodeName: string;
  nodeIPs: string[];
  interfaceAddresses?: string[];
  nodePortAddresses: string[];
  excludeCIDRs?: string[];
  scheduler: string;
  masqueradeAll: boolean;
  foreign: Array<{ protocol: string; address: string; port: number; scheduler: string; realServers: RealServer[] }>;
  foreignBound?: string[];
  objects: Array<Record<string, unknown>>;
  expect: {
    complete?: boolean;
    virtualServerCount?: number;
    virtualServers?: VsCheck[];
    atLeastOneOf?: VsCheck[];
    everyVirtualServer?: VsCheck;
    absentVirtualServers?: VsCheck[];
    ipsets?: Record<string, string[]>;
    ipsetEntryCounts?: Record<string, number>;
    bound?: string[];
  };
  byDesign?: string;
}

const fixtures: Fixture[] = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => ({ ...(parse(readFileSync(join(FIXTURES, f), 'utf8')) as Omit<Fixture, 'file'>), file: f }));

const inNs = (cmd: string, ...args: string[]) => execFileSync('ip', ['netns', 'exec', NS, cmd, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const v6 = (a: string) => a.includes(':');
function inAny(cidrs: readonly string[], address: string): boolean {
  const b = new BlockList();
  for (const c of cidrs) {
    const [a, len] = c.split('/');
    b.addSubnet(a!, Number(len), v6(a!) ? 'ipv6' : 'ipv4');
  }
  return b.check(address, v6(address) ? 'ipv6' : 'ipv4');
}
const hostPort = (a: string, p: number) => (v6(a) ? `[${a}]:${p}` : `${a}:${p}`);

interface Vs {
  protocol: string;
  address: string;
  port: number;
  scheduler: string;
  persistent: number | undefined;
  realServers: RealServer[];
}

/** The namespace's IPVS table, as ipvsadm -Sn prints it. */
function ipvsTable(): Vs[] {
  const out: Vs[] = [];
  const proto: Record<string, string> = { '-t': 'TCP', '-u': 'UDP', '--sctp-service': 'SCTP' };
  const addrPort = (s: string): [string, number] => {
    const m = /^\[(.+)\]:(\d+)$/.exec(s) ?? /^(.+):(\d+)$/.exec(s)!;
    return [m[1]!, Number(m[2])];
  };
  for (const line of inNs('ipvsadm', '-Sn').split('\n').filter(Boolean)) {
    const w = line.split(' ');
    if (w[0] === '-A') {
      const [address, port] = addrPort(w[2]!);
      const p = w.indexOf('-p');
      out.push({ protocol: proto[w[1]!] ?? w[1]!, address, port, scheduler: w[w.indexOf('-s') + 1]!, persistent: p > 0 ? Number(w[p + 1]) : undefined, realServers: [] });
    } else if (w[0] === '-a') {
      const [address, port] = addrPort(w[w.indexOf('-r') + 1]!);
      out.at(-1)!.realServers.push({ address, port, weight: Number(w[w.indexOf('-w') + 1]) });
    }
  }
  return out;
}

/** An ipset's members as ipset lists them; undefined when there is no such set. */
function ipsetMembers(name: string): string[] | undefined {
  const r = spawnSync('ip', ['netns', 'exec', NS, 'ipset', 'list', name], { encoding: 'utf8' });
  if (r.status !== 0) return undefined;
  const text = r.stdout;
  return text.slice(text.indexOf('Members:') + 'Members:'.length).split('\n').map((l) => l.trim()).filter(Boolean).sort();
}

/** kube-proxy's name of a set in this family: an IPv6 proxier's hash sets are KUBE-6-… (the port
 *  bitmaps have no family, and ipvsync keeps one of each). */
function setName(name: string, family: Fixture['family']): string {
  if (family === 'ipv4' || /^KUBE-(NODE-PORT-(LOCAL-)?(TCP|UDP)|HEALTH-CHECK-NODE-PORT)$/.test(name)) return name;
  return name.replace(/^KUBE-/, 'KUBE-6-').slice(0, 31);
}

/** The addresses on kube-ipvs0 but the kernel's link-local. */
function bound(): string[] {
  const r = spawnSync('ip', ['-n', NS, '-j', 'addr', 'show', 'kube-ipvs0'], { encoding: 'utf8' });
  if (r.status !== 0) return [];
  const links = JSON.parse(r.stdout) as Array<{ addr_info: Array<{ local: string; scope: string }> }>;
  return links.flatMap((l) => l.addr_info.filter((a) => a.scope !== 'link').map((a) => a.local)).sort();
}

const rsText = (rs: RealServer[], weights: boolean) => rs.map((r) => `${hostPort(r.address, r.port)}${weights && r.weight !== undefined ? ` w${r.weight}` : ''}`).sort();
const vsText = (v: { protocol?: string; address?: string; port?: number }) => `${v.protocol} ${hostPort(v.address ?? '?', v.port ?? 0)}`;

function matches(vs: Vs, c: VsCheck): boolean {
  const fields = c.match ?? ['protocol', 'address', 'port'];
  return fields.every((f) => (f === 'address' ? vs.address === c.address : f === 'port' ? vs.port === c.port : vs.protocol === c.protocol));
}

/** A virtual server's checks; the problems found. */
function checkVs(vs: Vs, c: VsCheck, what: string): string[] {
  const bad: string[] = [];
  if (c.scheduler !== undefined && vs.scheduler !== c.scheduler) bad.push(`${what}: scheduler ${vs.scheduler}, want ${c.scheduler}`);
  if (c.persistentTimeout !== undefined && vs.persistent !== c.persistentTimeout) bad.push(`${what}: persistent ${vs.persistent}, want ${c.persistentTimeout}`);
  if (c.realServers) {
    const weights = c.realServers.some((r) => r.weight !== undefined);
    const got = rsText(vs.realServers, weights);
    const want = rsText(c.realServers, weights);
    if (JSON.stringify(got) !== JSON.stringify(want)) bad.push(`${what}: real servers ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
  if (c.realServerCount !== undefined && vs.realServers.length !== c.realServerCount) bad.push(`${what}: ${vs.realServers.length} real servers, want ${c.realServerCount}`);
  for (const r of c.realServersInclude ?? [])
    if (!vs.realServers.some((x) => x.address === r.address && x.port === r.port)) bad.push(`${what}: no real server ${hostPort(r.address, r.port)}`);
  return bad;
}

/** Everything upstream asserts after this fixture's sync (with foreign virtual servers kept where
 *  kube-proxy would delete them), against the namespace's kernel state. */
function check(f: Fixture): string[] {
  const e = f.expect;
  const mine = (a: string) => v6(a) === (f.family === 'ipv6');
  const table = ipvsTable().filter((vs) => mine(vs.address));
  const bad: string[] = [];
  const foreign = f.foreign.filter((x) => mine(x.address));
  if (f.byDesign) {
    for (const x of foreign) {
      const vs = table.find((v) => v.protocol === x.protocol && v.address === x.address && v.port === x.port);
      if (!vs) bad.push(`foreign ${vsText(x)} was deleted (ipvsync keeps what it did not create)`);
      else bad.push(...checkVs(vs, { realServers: x.realServers, scheduler: x.scheduler }, `foreign ${vsText(x)}`));
    }
  }
  if (e.complete) {
    const want = (e.virtualServers ?? []).map((c) => `${vsText(c)} ${c.scheduler ?? ''} ${JSON.stringify(rsText(c.realServers ?? [], true))}`).sort();
    const got = table.map((v) => `${vsText(v)} ${v.scheduler} ${JSON.stringify(rsText(v.realServers, true))}${v.persistent !== undefined ? ` persistent ${v.persistent}` : ''}`).sort();
    if (JSON.stringify(got) !== JSON.stringify(want)) bad.push(`table ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
  if (e.virtualServerCount !== undefined) {
    // by design: the foreign ones upstream deletes (those outside excludeCIDRs) are still there
    const deletedUpstream = f.byDesign ? foreign.filter((x) => !inAny(f.excludeCIDRs ?? [], x.address)).length : 0;
    if (table.length !== e.virtualServerCount + deletedUpstream) bad.push(`${table.length} virtual servers, want ${e.virtualServerCount + deletedUpstream}${deletedUpstream ? ` (upstream's ${e.virtualServerCount} and the ${deletedUpstream} foreign ones it deletes)` : ''}`);
  }
  if (!e.complete)
    for (const c of e.virtualServers ?? []) {
      const found = table.filter((v) => matches(v, c));
      if (c.match && c.match.length === 0) {
        if (table.length !== 1) bad.push(`the only virtual server: there are ${table.length}`);
        else bad.push(...checkVs(table[0]!, c, `the only virtual server ${vsText(table[0]!)}`));
        continue;
      }
      if (found.length === 0) {
        if (!c.ifPresent) bad.push(`no virtual server ${vsText(c)}`);
        continue;
      }
      for (const vs of found) bad.push(...checkVs(vs, c, vsText(vs)));
    }
  if (e.atLeastOneOf) {
    const present = e.atLeastOneOf.flatMap((c) => table.filter((v) => matches(v, c)).map((v) => [v, c] as const));
    if (present.length === 0) bad.push(`none of ${e.atLeastOneOf.map(vsText).join(', ')}`);
    for (const [vs, c] of present) bad.push(...checkVs(vs, c, vsText(vs)));
  }
  if (e.everyVirtualServer) for (const vs of table) bad.push(...checkVs(vs, e.everyVirtualServer, vsText(vs)));
  if (!f.byDesign)
    for (const a of e.absentVirtualServers ?? []) {
      const hit = table.find((v) => matches(v, { ...a, match: Object.keys(a) as VsCheck['match'] }));
      if (hit) bad.push(`${vsText(hit)} should be gone`);
    }
  for (const [name, want] of Object.entries(e.ipsets ?? {})) {
    const got = ipsetMembers(setName(name, f.family));
    if (JSON.stringify(got ?? []) !== JSON.stringify([...want].sort())) bad.push(`ipset ${setName(name, f.family)}: ${JSON.stringify(got)}, want ${JSON.stringify([...want].sort())}`);
  }
  for (const [name, n] of Object.entries(e.ipsetEntryCounts ?? {})) {
    const got = ipsetMembers(setName(name, f.family)) ?? [];
    if (got.length !== n) bad.push(`ipset ${setName(name, f.family)}: ${got.length} entries, want ${n}`);
  }
  if (e.bound && JSON.stringify(bound()) !== JSON.stringify([...e.bound].sort())) bad.push(`kube-ipvs0 ${JSON.stringify(bound())}, want ${JSON.stringify([...e.bound].sort())}`);
  return bad;
}

/** The node's addresses for the fixture: its nodeIPs (and interface addresses) on eth0, nothing
 *  else but loopback. */
function setNodeAddresses(f: Fixture): void {
  spawnSync('ip', ['-n', NS, 'addr', 'flush', 'dev', 'eth0']);
  for (const a of f.nodeIPs) execFileSync('ip', ['-n', NS, 'addr', 'add', v6(a) ? `${a}/64` : `${a}/24`, 'dev', 'eth0', ...(v6(a) ? ['nodad'] : [])]);
  for (const a of f.interfaceAddresses ?? []) execFileSync('ip', ['-n', NS, 'addr', 'add', a, 'dev', 'eth0', ...(v6(a) ? ['nodad'] : [])]);
}

/** Upstream's objects as manifests: a port the Go leaves unset (0, which the API never allows
 *  and ipvsync refuses) numbered 80; the fixtures check those services' virtual servers by
 *  "the only one", whatever its port. */
function manifests(f: Fixture): string {
  return f.objects
    .map((o) => {
      const copy = structuredClone(o) as { kind?: string; spec?: { ports?: Array<{ port?: number }> } };
      if (copy.kind === 'Service') for (const p of copy.spec?.ports ?? []) if (!p.port) p.port = 80;
      return stringify(copy);
    })
    .join('---\n');
}

function sync(f: Fixture, dir: string): void {
  const file = join(dir, `${f.file}`);
  writeFileSync(file, manifests(f));
  const args = ['--netns', `/run/netns/${NS}`, 'sync', '-f', file, '--no-glue', '--no-sysctl', '--kube-proxy-ipsets', '--hostname-override', f.nodeName, '--ipvs-scheduler', f.scheduler];
  if (f.nodePortAddresses.length) args.push('--nodeport-addresses', f.nodePortAddresses.join(','));
  if (f.masqueradeAll) args.push('--masquerade-all');
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, `ipvsync sync -f ${f.file}: ${r.stderr}${r.stdout}`);
}

// A test's fixtures in the order upstream checks them (its states: added, then deleted).
const groups = new Map<string, Fixture[]>();
for (const f of fixtures) groups.set(f.upstream.test, [...(groups.get(f.upstream.test) ?? []), f]);
for (const g of groups.values()) g.sort((a, b) => (a.upstream.checkLine ?? a.upstream.line ?? 0) - (b.upstream.checkLine ?? b.upstream.line ?? 0));

test('kube-proxy IPVS-mode tests, replayed: the virtual servers, real servers, ipsets and kube-ipvs0 addresses upstream asserts', async (t) => {
  assert.ok(fixtures.length >= 54, `${fixtures.length} fixtures`);
  const dir = mkdtempSync(join(tmpdir(), 'kp-ipvs-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const [name, group] of groups) {
    await t.test(name, () => {
      spawnSync('ip', ['netns', 'del', NS]);
      execFileSync('ip', ['netns', 'add', NS]);
      try {
        execFileSync('ip', ['-n', NS, 'link', 'set', 'lo', 'up']);
        execFileSync('ip', ['-n', NS, 'link', 'add', 'eth0', 'type', 'dummy']);
        execFileSync('ip', ['-n', NS, 'link', 'set', 'eth0', 'up']);
        const problems: string[] = [];
        for (const f of group) {
          setNodeAddresses(f);
          for (const x of f.foreign) {
            const flag = x.protocol === 'TCP' ? '-t' : x.protocol === 'UDP' ? '-u' : '--sctp-service';
            if (!ipvsTable().some((v) => v.protocol === x.protocol && v.address === x.address && v.port === x.port)) {
              inNs('ipvsadm', '-A', flag, hostPort(x.address, x.port), '-s', x.scheduler);
              for (const r of x.realServers) inNs('ipvsadm', '-a', flag, hostPort(x.address, x.port), '-r', hostPort(r.address, r.port), '-m', '-w', String(r.weight ?? 1));
            }
          }
          sync(f, dir);
          for (const p of check(f)) problems.push(`${f.file} (upstream line ${f.upstream.checkLine ?? f.upstream.line}): ${p}`);
        }
        assert.deepEqual(problems, []);
      } finally {
        spawnSync('ip', ['netns', 'del', NS]);
      }
    });
  }
});
