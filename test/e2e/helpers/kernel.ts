// Commands and independent readers of the kernel state for the end-to-end tests: the ipvsync
// CLI as a user runs it, and ipvsadm / nft / ip / conntrack as cross-checks.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The checkout (dist/test/e2e/helpers/ is four levels below it). */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
export const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
export const HELPERS = dirname(fileURLToPath(import.meta.url));

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command (no shell) with a bound; never throws for a non-zero exit. */
export function run(cmd: string, args: readonly string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { encoding: 'utf8', timeout: opts.timeoutMs ?? 60_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      if (err && typeof err.code !== 'number') {
        if (err.killed) reject(new Error(`${cmd} ${args.join(' ')}: killed after ${opts.timeoutMs ?? 60_000} ms\n${stderr}`));
        else if (err.code !== undefined && err.code !== null) reject(err);
        else resolve({ code: -1, stdout, stderr });
        return;
      }
      resolve({ code: err ? (err.code as number) : 0, stdout, stderr });
    });
    if (opts.input !== undefined) child.stdin!.end(opts.input);
  });
}

/** Runs a command that must succeed; returns its stdout. */
export async function sh(cmd: string, ...args: string[]): Promise<string> {
  const r = await run(cmd, args);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${r.code}: ${r.stderr.trim() || r.stdout.trim()}`);
  return r.stdout;
}

/** `ipvsync ARGS…`, as a user would run it. */
export function ipvsync(...args: string[]): Promise<RunResult> {
  return run(process.execPath, [CLI, ...args], { timeoutMs: 120_000 });
}

/** `ipvsync ARGS…` that must exit 0; returns stdout. */
export async function ipvsyncOk(...args: string[]): Promise<string> {
  const r = await ipvsync(...args);
  if (r.code !== 0) throw new Error(`ipvsync ${args.join(' ')} exited ${r.code}:\n${r.stderr}${r.stdout}`);
  return r.stdout;
}

/** Starts `ipvsync ARGS…` in the background. */
export function ipvsyncBackground(...args: string[]): ChildProcess {
  return spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
}

// ---- ipvsadm -Ln ----

export interface IpvsadmDest {
  /** "10.244.1.2:8080" */
  address: string;
  forward: string;
  weight: number;
  active: number;
  inactive: number;
}

export interface IpvsadmService {
  /** "TCP 10.96.0.10:80", "UDP 10.96.0.50:53", "FWM 77" */
  key: string;
  scheduler: string;
  /** The rest of the service line ("persistent 600", …). */
  flags: string;
  persistent?: number;
  dests: IpvsadmDest[];
}

/** `cmd args…` in the named network namespace `netns` (`ip netns exec`), or in this one. */
function inNetns(netns: string | undefined, cmd: string, ...args: string[]): [string, ...string[]] {
  return netns ? ['ip', 'netns', 'exec', netns, cmd, ...args] : [cmd, ...args];
}

/** Parses `ipvsadm -Ln` (the independent reader of the IPVS table), of network namespace
 *  `netns` when given. */
export async function ipvsadmList(netns?: string): Promise<Map<string, IpvsadmService>> {
  const out = await sh(...inNetns(netns, 'ipvsadm', '-Ln'));
  const services = new Map<string, IpvsadmService>();
  let cur: IpvsadmService | undefined;
  for (const line of out.split('\n')) {
    const svc = /^(TCP|UDP|SCTP|FWM)\s+(\S+)\s+(\S+)\s*(.*)$/.exec(line);
    if (svc) {
      const flags = svc[4]!.trim();
      const p = /persistent (\d+)/.exec(flags);
      cur = { key: `${svc[1]} ${svc[2]}`, scheduler: svc[3]!, flags, ...(p ? { persistent: Number(p[1]) } : {}), dests: [] };
      services.set(cur.key, cur);
      continue;
    }
    const d = /^\s+->\s+(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+)/.exec(line);
    if (d && cur && d[1] !== 'RemoteAddress:Port') {
      cur.dests.push({ address: d[1]!, forward: d[2]!, weight: Number(d[3]), active: Number(d[4]), inactive: Number(d[5]) });
    }
  }
  return services;
}

/** Service keys in the IPVS table, sorted. */
export async function ipvsadmKeys(): Promise<string[]> {
  return [...(await ipvsadmList()).keys()].sort();
}

/** Destination addresses of one virtual server, sorted ([] if it has none, undefined if absent). */
export async function destsOf(key: string): Promise<string[] | undefined> {
  const s = (await ipvsadmList()).get(key);
  return s?.dests.map((d) => d.address).sort();
}

// ---- ip, nft, conntrack ----

/** The IPv4/IPv6 addresses on a link per `ip -j addr` ([] if the link is absent), in network
 *  namespace `netns` when given. */
export async function linkAddresses(link: string, netns?: string): Promise<string[]> {
  const r = await run('ip', [...(netns ? ['-n', netns] : []), '-j', 'addr', 'show', 'dev', link]);
  if (r.code !== 0) return [];
  const info = JSON.parse(r.stdout) as Array<{ addr_info: Array<{ local: string; prefixlen: number }> }>;
  return info.flatMap((l) => l.addr_info.map((a) => `${a.local}/${a.prefixlen}`)).sort();
}

export async function linkExists(link: string): Promise<boolean> {
  return (await run('ip', ['link', 'show', 'dev', link])).code === 0;
}

/** `nft list tables` as ["ip ipvsync", …], of network namespace `netns` when given. */
export async function nftTables(netns?: string): Promise<string[]> {
  const out = await sh(...inNetns(netns, 'nft', 'list', 'tables'));
  return out.split('\n').map((l) => l.replace(/^table\s+/, '').trim()).filter(Boolean).sort();
}

/** The elements of a set of the ip glue table as nft prints them ("10.96.0.10 . tcp . 80"). */
export async function nftSetElements(set: string, family = 'ip'): Promise<string[]> {
  const out = await sh('nft', 'list', 'set', family, 'ipvsync', set);
  const m = /elements = \{([^}]*)\}/s.exec(out);
  if (!m) return [];
  return m[1]!.split(',').map((e) => e.replace(/\s+/g, ' ').trim()).filter(Boolean).sort();
}

/** `conntrack -L ARGS…` flow lines (the summary goes to stderr). */
export async function conntrackList(...args: string[]): Promise<string[]> {
  const r = await run('conntrack', ['-L', ...args]);
  if (r.code !== 0) throw new Error(`conntrack -L ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return r.stdout.split('\n').filter((l) => l.trim());
}

/** Reads a sysctl from /proc/sys with `sysctl -n`. */
export async function sysctl(name: string): Promise<string> {
  return (await sh('sysctl', '-n', name)).trim();
}

/**
 * Removes what any earlier test may have programmed, with the independent tools (not with
 * ipvsync, whose cleanup is itself under test): the IPVS table, the glue tables, kube-ipvs0,
 * the conntrack table, ipvsync's routes (protocol 249, bindMode route).
 */
export async function resetDataPlane(): Promise<void> {
  await sh('ipvsadm', '-C');
  for (const fam of ['ip', 'ip6']) await run('nft', ['delete', 'table', fam, 'ipvsync']);
  await run('ip', ['link', 'del', 'kube-ipvs0']);
  for (const fam of ['-4', '-6']) await run('ip', [fam, 'route', 'flush', 'table', 'local', 'proto', '249']);
  // the engine's ownership record: a later test's foreign objects must not be found in it
  for (const set of ['ipvsync-ipvs', 'ipvsync-ipvs6']) await run('ipset', ['destroy', set]);
  await run('conntrack', ['-F']);
}

/** Polls `check` until it returns a value other than undefined; fails after the bound with
 *  the last observation. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined>, opts: { timeoutMs?: number; intervalMs?: number; last?: () => Promise<string> } = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${opts.timeoutMs ?? 60_000} ms${opts.last ? `\n${await opts.last()}` : ''}`);
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 500));
  }
}
