// Seeded random desired states for the engine's real-kernel property tests (host and VM), the
// size of the difference between two of them counted naively (independently of the engine's
// diffs), and readers of the kernel through the independent tools (`ipvsadm -Sn`, `ip -j addr`,
// `ipset save`, `nft -j list table`) that turn what they print into the same canonical lines as
// the desired state, so "the kernel equals B" is a plain deepEqual of sorted string lists.
import { execFileSync } from 'node:child_process';
import type { DesiredState, Plan } from '../../src/engine/engine.js';
import { planWrites } from '../../src/engine/engine.js';
import { IPVS_RECORD_SETS } from '../../src/engine/ownership.js';
import type { DesiredService } from '../../src/engine/ipvs-model.js';
import type { DesiredIpSet } from '../../src/engine/ipsets-diff.js';
import type { DesiredNftTable } from '../../src/engine/nft-diff.js';
import type { IpSetMember } from '../../src/kernel/ipsets.js';
import type { SetElement } from '../../src/kernel/nftables.js';
import { elementList } from '../../src/kernel/nftables.js';
import * as R from '../../src/kernel/nft-rules.js';
import type { Expr } from '../../src/kernel/nft-expr.js';

export type Rand = () => number;

/** mulberry32: small, fast, and the same sequence everywhere for a seed. */
export function prng(seed: number): Rand {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const int = (r: Rand, n: number) => Math.floor(r() * n);
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[int(r, xs.length)]!;

export const SET_PREFIX = 'EKT-';
export const VIP_LINK = 'kube-ipvs0';
export const NFT_TABLE = 'ekt';
/** What the engine owns in these tests (VIPs are drawn from inside these). */
export const OWNERSHIP = {
  managedCidrs: ['10.96.0.0/16', 'fd00:96::/64'],
  managedFwmarks: { min: 100, max: 199 },
  ipsetPrefix: SET_PREFIX,
};

// ---- IPVS ----------------------------------------------------------------------------------

export interface GenOptions {
  /** Services in a fresh state (a mutation keeps most and adds ~1/6 more). */
  services: number;
  /** Upper bound of destinations per service (0..max). */
  maxDests: number;
  /** Include fwmark services (v4 and v6). */
  fwmark?: boolean;
}

function vip(r: Rand, v6: boolean, pool: number): string {
  const i = 1 + int(r, pool);
  return v6 ? `fd00:96::${i.toString(16)}` : `10.96.${i >> 8}.${i & 255}`;
}

function destAddr(r: Rand, v6: boolean): string {
  const i = 1 + int(r, 600);
  return v6 ? `fd00:244::${i.toString(16)}` : `10.244.${i >> 8}.${i & 255}`;
}

function randomDests(r: Rand, v6: boolean, max: number): DesiredService['destinations'] {
  const m = new Map<string, DesiredService['destinations'][number]>();
  const n = int(r, max + 1);
  for (let j = 0; j < n; j++) {
    const address = destAddr(r, v6);
    m.set(address, { address, port: pick(r, [8080, 80, 53]), forward: r() < 0.8 ? 'masq' : 'droute', weight: 1 + int(r, 3) });
  }
  return [...m.values()];
}

function randomOptions(r: Rand): Partial<DesiredService> {
  const o: Partial<DesiredService> = { scheduler: pick(r, ['rr', 'wrr', 'lc', 'sh']) };
  if (r() < 0.2) Object.assign(o, { flags: ['persistent'], timeout: pick(r, [60, 10800]) });
  return o;
}

export function serviceKeyOf(s: DesiredService): string {
  if ('fwmark' in s && s.fwmark !== undefined) return `${s.family ?? 'inet'}|fwmark|${s.fwmark}`;
  const a = s as { protocol: string; address: string; port: number };
  return `${a.address.includes(':') ? 'inet6' : 'inet'}|${a.protocol}|${a.address}|${a.port}`;
}

function randomService(r: Rand, o: GenOptions): DesiredService {
  const v6 = r() < 0.35;
  const pool = Math.max(8, Math.ceil(o.services / 2));
  if (o.fwmark && r() < 0.1) {
    return { family: v6 ? 'inet6' : 'inet', fwmark: 100 + int(r, 100), ...randomOptions(r), destinations: randomDests(r, v6, o.maxDests) } as DesiredService;
  }
  return {
    protocol: pick(r, ['tcp', 'tcp', 'udp', 'sctp'] as const),
    address: vip(r, v6, pool),
    port: pick(r, [80, 443, 53, 8443]),
    ...randomOptions(r),
    destinations: randomDests(r, v6, o.maxDests),
  } as DesiredService;
}

export function randomServices(r: Rand, o: GenOptions): DesiredService[] {
  const m = new Map<string, DesiredService>();
  for (let i = 0; i < o.services; i++) {
    const s = randomService(r, o);
    m.set(serviceKeyOf(s), s);
  }
  return [...m.values()];
}

/** B from A: most services kept, some dropped, some with other options, destinations added,
 *  dropped, re-weighted or re-forwarded, and new services — every kind of difference. */
export function mutateServices(r: Rand, a: readonly DesiredService[], o: GenOptions): DesiredService[] {
  const m = new Map<string, DesiredService>();
  for (const s of a) {
    const x = r();
    if (x < 0.12) continue;
    const v6 = serviceKeyOf(s).startsWith('inet6');
    let next: DesiredService = { ...s, destinations: s.destinations.map((d) => ({ ...d })) };
    if (x < 0.25) {
      const { scheduler: _s, flags: _f, timeout: _t, ...rest } = next as DesiredService & { flags?: unknown; timeout?: unknown };
      next = { ...rest, ...randomOptions(r) } as DesiredService;
    }
    if (r() < 0.5) {
      const dests = new Map(next.destinations.filter(() => r() >= 0.15).map((d) => [d.address, d]));
      for (const d of dests.values()) {
        const y = r();
        if (y < 0.12) d.weight = 1 + ((d.weight ?? 1) % 3);
        else if (y < 0.18) d.forward = d.forward === 'masq' ? 'droute' : 'masq';
      }
      for (const d of randomDests(r, v6, 2)) if (!dests.has(d.address) && dests.size < o.maxDests) dests.set(d.address, d);
      next.destinations = [...dests.values()];
    }
    m.set(serviceKeyOf(next), next);
  }
  for (let i = 0; i < Math.ceil(o.services / 6); i++) {
    const s = randomService(r, o);
    if (!m.has(serviceKeyOf(s))) m.set(serviceKeyOf(s), s);
  }
  return [...m.values()];
}

function optsText(s: DesiredService): string {
  const persistent = (s.flags ?? []).includes('persistent');
  return `${s.scheduler ?? 'wlc'} ${persistent ? `p${s.timeout ?? 360}` : '-'}`;
}

/** IPVS writes from A to B, counted naively: a new service and each of its destinations, a
 *  changed option set, a destination added / re-weighted / re-forwarded / removed, a removed
 *  service (its destinations go with it). Destinations here carry no connections, so removal is
 *  one delete whatever the protocol. */
export function ipvsDifference(a: readonly DesiredService[], b: readonly DesiredService[]): number {
  const am = new Map(a.map((s) => [serviceKeyOf(s), s]));
  const bm = new Map(b.map((s) => [serviceKeyOf(s), s]));
  let n = 0;
  for (const [k, s] of bm) {
    const old = am.get(k);
    if (!old) {
      n += 1 + s.destinations.length;
      continue;
    }
    if (optsText(old) !== optsText(s)) n++;
    // a destination is its address and port: another port is another destination
    const od = new Map(old.destinations.map((d) => [`${d.address}|${d.port}`, d]));
    const nd = new Map(s.destinations.map((d) => [`${d.address}|${d.port}`, d]));
    for (const [addr, d] of nd) {
      const o = od.get(addr);
      if (!o || o.weight !== d.weight || o.forward !== d.forward) n++;
    }
    for (const addr of od.keys()) if (!nd.has(addr)) n++;
  }
  for (const k of am.keys()) if (!bm.has(k)) n++;
  return n;
}

/** Canonical lines of a desired IPVS table (the same shape ipvsadmLines() reads back). */
export function expectedIpvsLines(services: readonly DesiredService[]): string[] {
  const out: string[] = [];
  for (const s of services) {
    const k = serviceKeyOf(s);
    out.push(`S ${k} ${optsText(s)}`);
    for (const d of s.destinations) out.push(`D ${k} ${d.address.includes(':') ? `[${d.address}]` : d.address}:${d.port} ${d.forward ?? 'droute'} w${d.weight ?? 1}`);
  }
  return out.sort();
}

/** `ipvsadm -Sn` read back as canonical lines, only for services inside the managed ranges
 *  unless `all`. */
export function ipvsadmLines(text: string, all = false): string[] {
  const out: string[] = [];
  const svcKey = (flag: string, arg: string, v6flag: boolean): string => {
    if (flag === '-f') return `${v6flag ? 'inet6' : 'inet'}|fwmark|${arg}`;
    const proto = flag === '-t' ? 'tcp' : flag === '-u' ? 'udp' : 'sctp';
    const m = /^\[(.*)\]:(\d+)$/.exec(arg) ?? /^(.*):(\d+)$/.exec(arg)!;
    return `${m[1]!.includes(':') ? 'inet6' : 'inet'}|${proto}|${m[1]}|${m[2]}`;
  };
  for (const line of text.split('\n')) {
    const t = line.trim().split(/\s+/);
    if (t.length < 3) continue;
    const get = (f: string) => {
      const i = t.indexOf(f);
      return i < 0 ? undefined : t[i + 1];
    };
    const key = svcKey(t[1]!, t[2]!, t.includes('-6'));
    if (!all && !ownedKey(key)) continue;
    if (t[0] === '-A') out.push(`S ${key} ${get('-s')} ${get('-p') ? `p${get('-p')}` : '-'}`);
    else if (t[0] === '-a') {
      const fwd = t.includes('-m') ? 'masq' : t.includes('-g') ? 'droute' : t.includes('-i') ? 'tunnel' : 'local';
      out.push(`D ${key} ${get('-r')} ${fwd} w${get('-w')}`);
    }
  }
  return out.sort();
}

function ownedKey(key: string): boolean {
  const [, proto, a] = key.split('|') as [string, string, string];
  if (proto === 'fwmark') return Number(a) >= 100 && Number(a) <= 199;
  return a.startsWith('10.96.') || a.startsWith('fd00:96::');
}

// ---- VIPs ----------------------------------------------------------------------------------

/** The VIPs of a state: every service address, plus a few addresses with no service. */
export function vipsOf(r: Rand, services: readonly DesiredService[]): string[] {
  const s = new Set<string>();
  for (const x of services) if ('address' in x && x.address) s.add(x.address);
  for (let i = 0; i < 3; i++) s.add(r() < 0.5 ? `10.96.200.${1 + int(r, 30)}` : `fd00:96::c8:${(1 + int(r, 30)).toString(16)}`);
  return [...s];
}

export function setDifference<T>(a: Iterable<T>, b: Iterable<T>): number {
  const A = new Set(a);
  const B = new Set(b);
  let n = 0;
  for (const x of A) if (!B.has(x)) n++;
  for (const x of B) if (!A.has(x)) n++;
  return n;
}

/** `ip -j addr show dev LINK` as sorted "addr/len" (global scope only). */
export function ipAddrs(link: string, netnsPrefix: string[] = []): string[] {
  const j = JSON.parse(execFileSync(netnsPrefix[0] ?? 'ip', [...netnsPrefix.slice(1), ...(netnsPrefix.length ? ['ip'] : []), '-j', 'addr', 'show', 'dev', link], { encoding: 'utf8' })) as Array<{
    addr_info: Array<{ local: string; prefixlen: number; scope: string }>;
  }>;
  return j
    .flatMap((x) => x.addr_info)
    .filter((a) => a.scope === 'global')
    .map((a) => `${a.local}/${a.prefixlen}`)
    .sort();
}

export const hostAddrs = (vips: readonly string[]) => vips.map((a) => `${a}/${a.includes(':') ? 128 : 32}`).sort();

// ---- ipsets --------------------------------------------------------------------------------

const PROTOS = ['tcp', 'udp', 'sctp'] as const;

/** Three owned sets of three types (hash:ip,port v4 and v6, hash:ip,port,ip), derived from the
 *  services, plus hash:net when `withNet`; each state leaves one set out at random. */
export function randomIpSets(r: Rand, services: readonly DesiredService[], withNet = true): DesiredIpSet[] {
  const v4: IpSetMember[] = [];
  const v6: IpSetMember[] = [];
  const loop: IpSetMember[] = [];
  for (const s of services) {
    if (!('address' in s) || !s.address) continue;
    const m = { ip: s.address, proto: s.protocol, port: s.port };
    (s.address.includes(':') ? v6 : v4).push(m);
    if (!s.address.includes(':')) for (const d of s.destinations) if (r() < 0.4) loop.push({ ip: d.address, proto: pick(r, PROTOS), port: d.port, ip2: d.address });
  }
  const sets: DesiredIpSet[] = [
    { name: `${SET_PREFIX}VIP`, type: 'hash:ip,port', family: 'inet', members: v4 },
    { name: `${SET_PREFIX}VIP6`, type: 'hash:ip,port', family: 'inet6', members: v6 },
    { name: `${SET_PREFIX}LOOP`, type: 'hash:ip,port,ip', family: 'inet', members: dedupe(loop) },
  ];
  if (withNet) {
    const nets = new Map<string, IpSetMember>();
    for (let i = 0; i < 20; i++) {
      const m = netMember(`172.${16 + int(r, 16)}.${int(r, 256)}.0/${pick(r, [16, 20, 24])}`);
      nets.set(memberText('hash:net', m), m);
    }
    sets.push({ name: `${SET_PREFIX}NET`, type: 'hash:net', family: 'inet', members: [...nets.values()] });
  }
  const drop = int(r, sets.length + 2); // sometimes keep all
  return sets.filter((_, i) => i !== drop);
}

function netMember(cidr: string): IpSetMember {
  const [a, l] = cidr.split('/') as [string, string];
  const len = Number(l);
  const parts = a.split('.').map(Number);
  const n = (((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0) & (len === 0 ? 0 : (~0 << (32 - len)) >>> 0);
  return { ip: [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.'), cidr: len };
}

function dedupe(ms: IpSetMember[]): IpSetMember[] {
  return [...new Map(ms.map((m) => [memberText('hash:ip,port,ip', m), m])).values()];
}

/** A member as `ipset save` prints it. */
export function memberText(type: string, m: IpSetMember): string {
  if (type === 'hash:net') return `${m.ip}/${m.cidr}`;
  if (type === 'hash:ip') return `${m.ip}`;
  const base = `${m.ip},${m.proto}:${m.port}`;
  return type === 'hash:ip,port,ip' ? `${base},${m.ip2}` : base;
}

export function expectedIpsetLines(sets: readonly DesiredIpSet[]): string[] {
  const out: string[] = [];
  for (const s of sets) {
    out.push(`set ${s.name} ${s.type} ${s.family}`);
    for (const m of s.members) out.push(`${s.name} ${memberText(s.type, m)}`);
  }
  return out.sort();
}

/** `ipset save` as sorted canonical lines for the sets whose names start with `prefix`. */
export function ipsetSaveLines(text: string, prefix: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const t = line.trim().split(/\s+/);
    if (t.length < 3 || !t[1]!.startsWith(prefix)) continue;
    if (t[0] === 'create') out.push(`set ${t[1]} ${t[2]} ${t[t.indexOf('family') + 1]}`);
    else if (t[0] === 'add') out.push(`${t[1]} ${t[2]}`);
  }
  return out.sort();
}

/** Writes from A to B in objects: a created set and each of its members, a destroyed set, each
 *  member added or removed. */
export function ipsetDifference(a: readonly DesiredIpSet[], b: readonly DesiredIpSet[]): number {
  const am = new Map(a.map((s) => [s.name, s]));
  let n = 0;
  for (const s of b) {
    const old = am.get(s.name);
    if (!old) n += 1 + s.members.length;
    else n += setDifference(old.members.map((m) => memberText(s.type, m)), s.members.map((m) => memberText(s.type, m)));
  }
  const bn = new Set(b.map((s) => s.name));
  for (const s of a) if (!bn.has(s.name)) n++;
  return n;
}

// ---- nftables ------------------------------------------------------------------------------

const RULE_TEMPLATES: Array<{ comment: string; exprs: () => Expr[] }> = [
  { comment: 'count', exprs: () => [R.counter()] },
  { comment: 'mark', exprs: () => R.setMarkBits(0x4000) },
  { comment: 'mark2', exprs: () => R.setMarkBits(0x8000) },
  { comment: 'accept-marked', exprs: () => [...R.markMatch('meta', 0x4000), R.accept()] },
  { comment: 'drop-src', exprs: () => [...R.inSet([R.F.ipSaddr], 'src'), R.drop()] },
];

function randomRules(r: Rand, chain: string): DesiredNftTable['rules'] {
  const n = int(r, 4);
  return Array.from({ length: n }, (_, i) => {
    const t = pick(r, RULE_TEMPLATES);
    return { chain, exprs: t.exprs(), comment: `${chain}:${t.comment}:${i}` };
  });
}

/** An `ip` table with a base chain, two regular chains with random rule lists, a verdict map
 *  keyed by ipv4_addr . inet_proto . inet_service, an ipv6 concatenated set, and two interval
 *  sets (v4 with CIDRs and single addresses, v6 with prefixes). */
export function randomNft(r: Rand, services: readonly DesiredService[]): DesiredNftTable {
  const svc: SetElement[] = [];
  const svc6: SetElement[] = [];
  for (const s of services) {
    if (!('address' in s) || !s.address) continue;
    if (s.address.includes(':')) svc6.push({ key: [s.address, s.protocol, s.port] });
    else svc.push({ key: [s.address, s.protocol, s.port], verdict: { code: 'goto', chain: r() < 0.5 ? 'svc-a' : 'svc-b' } });
  }
  const src = new Set<string>();
  for (let i = 0; i < 12; i++) src.add(r() < 0.7 ? `10.${2 * int(r, 60)}.0.0/16` : `192.168.${2 * int(r, 60)}.1`);
  const src6 = new Set<string>();
  for (let i = 0; i < 6; i++) {
    const g = 2 * int(r, 60);
    src6.add(g === 0 ? 'fd10::/32' : `fd10:${g.toString(16)}::/32`);
  }
  return {
    family: 'ip',
    name: NFT_TABLE,
    chains: [{ name: 'pre', hook: { type: 'filter', hook: 'prerouting', priority: -110, policy: 'accept' } }, { name: 'svc-a' }, { name: 'svc-b' }],
    sets: [
      { name: 'svc', key: ['ipv4_addr', 'inet_proto', 'inet_service'], map: 'verdict', elements: svc },
      { name: 'svc6', key: ['ipv6_addr', 'inet_proto', 'inet_service'], elements: svc6 },
      { name: 'src', key: ['ipv4_addr'], interval: true, elements: [...src].map((k) => ({ key: [k] })) },
      { name: 'src6', key: ['ipv6_addr'], interval: true, elements: [...src6].map((k) => ({ key: [k] })) },
    ],
    rules: [
      { chain: 'pre', exprs: R.vmap([R.F.ipDaddr, R.F.l4proto, R.F.thDport], 'svc'), comment: 'pre:dispatch' },
      ...randomRules(r, 'svc-a'),
      ...randomRules(r, 'svc-b'),
    ],
  };
}

function elementText(e: SetElement): string {
  const key = e.key.map(String).join(' . ');
  return e.verdict ? `${key} : ${e.verdict.code} ${'chain' in e.verdict ? e.verdict.chain : ''}` : key;
}

export function expectedNftLines(t: DesiredNftTable): string[] {
  const out: string[] = [];
  for (const c of t.chains) out.push(`chain ${c.name}`);
  for (const c of t.chains) out.push(`rules ${c.name} ${t.rules.filter((x) => x.chain === c.name).map((x) => x.comment).join(',')}`);
  for (const s of t.sets) for (const e of elementList(s.elements)) out.push(`elem ${s.name} ${elementText(e)}`);
  for (const s of t.sets) out.push(`set ${s.name}`);
  return out.sort();
}

type NftJsonValue = string | number | { concat?: NftJsonValue[]; prefix?: { addr: string; len: number }; elem?: { val: NftJsonValue } };

function jsonValue(v: NftJsonValue): string {
  if (typeof v === 'string' || typeof v === 'number') return String(v);
  if (v.concat) return v.concat.map(jsonValue).join(' . ');
  if (v.prefix) return `${v.prefix.addr}/${v.prefix.len}`;
  if (v.elem) return jsonValue(v.elem.val);
  return JSON.stringify(v);
}

/** `nft -j list table ip NAME` as the same canonical lines. */
export function nftLines(jsonText: string): string[] {
  const j = JSON.parse(jsonText) as { nftables: Array<Record<string, Record<string, unknown>>> };
  const out: string[] = [];
  const rules = new Map<string, string[]>();
  for (const o of j.nftables) {
    if (o.chain) {
      out.push(`chain ${o.chain.name}`);
      rules.set(o.chain.name as string, []);
    }
    if (o.rule) rules.get(o.rule.chain as string)?.push(String(o.rule.comment ?? ''));
    if (o.set || o.map) {
      const s = (o.set ?? o.map)!;
      out.push(`set ${s.name}`);
      for (const e of (s.elem as unknown[] | undefined) ?? []) {
        if (Array.isArray(e)) {
          const [k, v] = e as [NftJsonValue, Record<string, { target: string }>];
          const [code, arg] = Object.entries(v)[0]!;
          out.push(`elem ${s.name} ${jsonValue(k)} : ${code} ${arg.target}`);
        } else out.push(`elem ${s.name} ${jsonValue(e as NftJsonValue)}`);
      }
    }
  }
  for (const [c, list] of rules) out.push(`rules ${c} ${list.join(',')}`);
  return out.sort();
}

/** nftables writes from A to B in objects: each element added or removed (a changed verdict is
 *  both), and per chain whose rule list differs a flush plus each rule of B's list. The static
 *  part (chains, set declarations) is the same in every state. */
export function nftDifference(a: DesiredNftTable | undefined, b: DesiredNftTable): number {
  if (!a) return 1 + b.chains.length + b.sets.length + b.sets.reduce((n, s) => n + s.elements.length, 0) + b.rules.length;
  let n = 0;
  for (const s of b.sets) {
    const old = a.sets.find((x) => x.name === s.name)!;
    n += setDifference(elementList(old.elements).map(elementText), elementList(s.elements).map(elementText));
  }
  for (const c of b.chains) {
    const ra = a.rules.filter((x) => x.chain === c.name).map((x) => x.comment);
    const rb = b.rules.filter((x) => x.chain === c.name).map((x) => x.comment);
    // an empty chain is not flushed
    if (ra.join('\n') !== rb.join('\n')) n += (ra.length ? 1 : 0) + rb.length;
  }
  return n;
}

// ---- writes in objects -----------------------------------------------------------------------

/** The writes of a plan counted in objects (a member or element batch counts its members). */
/** A plan's writes per kind, counted in objects (a member, an element); the ownership
 *  record's ipset writes (engine/ownership.ts) apart from the owned sets'. */
export function planObjects(p: Plan): { ipvs: number; addresses: number; routes: number; ipsets: number; record: number; nft: number; total: number } {
  const c = { ipvs: 0, addresses: 0, routes: 0, ipsets: 0, record: 0, nft: 0, total: 0 };
  for (const w of planWrites(p)) {
    let n = 1;
    if (w.kind === 'ipset' && (w.op.op === 'add' || w.op.op === 'del')) n = w.op.members.length;
    if (w.kind === 'nft' && w.op.kind === 'elements') n = w.op.elements.length;
    const record = w.kind === 'ipset' && IPVS_RECORD_SETS.includes(w.op.name);
    c[w.kind === 'link' ? 'addresses' : record ? 'record' : w.kind === 'ipset' ? 'ipsets' : w.kind === 'route' ? 'routes' : w.kind] += n;
    c.total += n;
  }
  return c;
}

/** A whole random state: services, their VIPs, owned ipsets, and (when `nft`) the table. */
export function randomState(r: Rand, services: DesiredService[], opts: { nft: boolean; ipsetNet?: boolean }): DesiredState & { nft?: DesiredNftTable } {
  const s: DesiredState & { nft?: DesiredNftTable } = {
    services,
    vips: { link: VIP_LINK, addresses: vipsOf(r, services) },
    ipsets: randomIpSets(r, services, opts.ipsetNet ?? true),
  };
  if (opts.nft) s.nft = randomNft(r, services);
  return s;
}
