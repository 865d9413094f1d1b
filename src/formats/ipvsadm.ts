// ipvsadm's text formats: the rules `ipvsadm -S` prints and `ipvsadm -R` reads, and the
// `ipvsadm -L` listing. Pure functions over the typed model (no I/O), so the CLI, the tests and
// the benchmark share one implementation. Output follows ipvsadm 1.31 byte for byte (option
// order, spacing, its sort order including its int-overflowing comparisons).
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { excerpt } from '../errors.js';
import { ipv6Words } from '../net/address.js';
import type {
  AddressFamily,
  Destination,
  DestinationConfig,
  ForwardMethod,
  IpvsInfo,
  IpvsOp,
  IpvsProtocol,
  Service,
  ServiceConfig,
  ServiceFlag,
  ServiceId,
} from '../kernel/ipvs.js';
import { formatInfo } from '../kernel/ipvs.js';

// ---------------------------------------------------------------------------------------------
// Parsing (ipvsadm -R input)

/** A rules line ipvsadm would reject: nothing of the input is applied. */
export class RulesParseError extends Error {
  constructor(
    readonly line: number,
    readonly text: string,
    why: string,
  ) {
    super(`line ${line}: ${excerpt(`${why}: ${text.trim()}`)}`);
    this.name = 'RulesParseError';
  }
}

export interface ParsedRule {
  /** 1-based line number in the input. */
  line: number;
  op: IpvsOp;
}

const LONG: Record<string, string> = {
  '--add-service': '-A',
  '--edit-service': '-E',
  '--delete-service': '-D',
  '--clear': '-C',
  '--add-server': '-a',
  '--edit-server': '-e',
  '--delete-server': '-d',
  '--tcp-service': '-t',
  '--udp-service': '-u',
  '--fwmark-service': '-f',
  '--scheduler': '-s',
  '--persistent': '-p',
  '--netmask': '-M',
  '--real-server': '-r',
  '--gatewaying': '-g',
  '--ipip': '-i',
  '--masquerading': '-m',
  '--weight': '-w',
  '--u-threshold': '-x',
  '--l-threshold': '-y',
  '--ipv6': '-6',
  '--ops': '-o',
  '--sched-flags': '-b',
};

const COMMANDS = new Set(['-A', '-E', '-D', '-C', '-a', '-e', '-d']);

function tokens(line: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(line))) out.push(m[1] ?? m[2] ?? m[3]!);
  return out;
}

function integer(s: string, lo: number, hi: number, what: string): number {
  if (!/^\d+$/.test(s)) throw new Error(`invalid ${what} '${s}'`);
  const n = Number(s);
  if (n < lo || n > hi) throw new Error(`${what} ${s} out of range ${lo}-${hi}`);
  return n;
}

/** Where a name in the rules is looked up (restore): the service's family and protocol. */
interface NameContext {
  names: NameResolver;
  family: AddressFamily;
  protocol: IpvsProtocol;
}

/**
 * "10.0.0.1:80", "[fd00::1]:80", "10.0.0.1" (port optional when `portOptional`), or with names
 * ("localhost:http", what `ipvsadm -S` prints without -n) looked up as ipvsadm's C library
 * would: the host in `ctx.family` (IPv4 unless the line has -6), the port for the service's
 * protocol.
 */
export function parseAddrPort(s: string, portOptional: boolean, ctx?: NameContext): { address: string; port?: number; family: AddressFamily } {
  let addr: string;
  let port: string | undefined;
  const v6 = /^\[([^\]]+)\](?::(.*))?$/.exec(s);
  if (v6) {
    addr = v6[1]!;
    port = v6[2];
  } else if (s.split(':').length === 2) {
    [addr, port] = s.split(':') as [string, string];
  } else {
    addr = s;
  }
  let family: AddressFamily | undefined = isIP(addr) === 4 ? 'inet' : isIP(addr) === 6 ? 'inet6' : undefined;
  if (!family && ctx) {
    const a = ctx.names.address?.(addr, ctx.family);
    if (a !== undefined) {
      addr = a;
      family = isIP(a) === 6 ? 'inet6' : 'inet';
    }
  }
  if (!family) throw new Error(`invalid address '${s}'`);
  if (port === undefined || port === '') {
    if (!portOptional) throw new Error(`missing port in '${s}'`);
    return { address: addr, family };
  }
  if (!/^\d+$/.test(port) && ctx) {
    const p = ctx.names.port?.(port, ctx.protocol);
    if (p !== undefined) return { address: addr, port: p, family };
  }
  return { address: addr, port: integer(port, 0, 65535, 'port'), family };
}

interface LineState {
  cmd?: string;
  service?: ServiceId;
  scheduler?: string;
  persistent?: boolean;
  timeout?: number;
  netmask?: string | number;
  pe?: string;
  onePacket?: boolean;
  schedFlags?: string[];
  v6?: boolean;
  /** The -r text, read once the service is known (a name is looked up in its family). */
  real?: string;
  forward?: ForwardMethod;
  weight?: number;
  upper?: number;
  lower?: number;
  tunType?: 'ipip' | 'gue' | 'gre';
  tunPort?: number;
  checksum?: 'none' | 'csum' | 'remcsum';
}

function parseLine(args: string[], names: NameResolver): IpvsOp {
  const st: LineState = {};
  let svcKind: IpvsProtocol | 'fwmark' | undefined;
  let svcText: string | undefined;
  for (let i = 0; i < args.length; i++) {
    let a = args[i]!;
    let inline: string | undefined;
    if (a.startsWith('--') && a.includes('=')) {
      inline = a.slice(a.indexOf('=') + 1);
      a = a.slice(0, a.indexOf('='));
    }
    a = LONG[a] ?? a;
    const value = (what: string): string => {
      if (inline !== undefined) return inline;
      const v = args[++i];
      if (v === undefined) throw new Error(`option ${what} needs a value`);
      return v;
    };
    if (COMMANDS.has(a)) {
      if (st.cmd) throw new Error(`two commands (${st.cmd} and ${a})`);
      st.cmd = a;
      continue;
    }
    switch (a) {
      case '-t':
      case '-u':
      case '--sctp-service':
      case '-f':
        if (svcKind) throw new Error('more than one service');
        svcKind = a === '-t' ? 'tcp' : a === '-u' ? 'udp' : a === '-f' ? 'fwmark' : 'sctp';
        svcText = value(a);
        break;
      case '-6':
        st.v6 = true;
        break;
      case '-s':
        st.scheduler = value('-s');
        break;
      case '-p': {
        st.persistent = true;
        const next = inline ?? args[i + 1];
        if (next !== undefined && /^\d+$/.test(next)) {
          if (inline === undefined) i++;
          st.timeout = integer(next, 1, 0x7fffffff, 'timeout');
        }
        break;
      }
      case '-M': {
        const v = value('-M');
        st.netmask = /^\d+$/.test(v) ? integer(v, 1, 128, 'netmask') : v;
        if (typeof st.netmask === 'string' && isIP(st.netmask) !== 4) throw new Error(`invalid netmask '${v}'`);
        break;
      }
      case '--pe':
        st.pe = value('--pe');
        break;
      case '-o':
        st.onePacket = true;
        break;
      case '-b':
        st.schedFlags = value('-b').split(',').filter((x) => x !== '');
        break;
      case '-r':
        st.real = value('-r');
        break;
      case '-g':
      case '-i':
      case '-m': {
        const f: ForwardMethod = a === '-g' ? 'droute' : a === '-i' ? 'tunnel' : 'masq';
        if (st.forward && st.forward !== f) throw new Error('more than one forwarding method');
        st.forward = f;
        break;
      }
      case '-w':
        st.weight = integer(value('-w'), 0, 65535, 'weight');
        break;
      case '-x':
        st.upper = integer(value('-x'), 0, 0x7fffffff, 'upper threshold');
        break;
      case '-y':
        st.lower = integer(value('-y'), 0, 0x7fffffff, 'lower threshold');
        break;
      case '--tun-type': {
        const t = value('--tun-type');
        if (t !== 'ipip' && t !== 'gue' && t !== 'gre') throw new Error(`illegal tunnel type '${t}'`);
        st.tunType = t;
        break;
      }
      case '--tun-port':
        st.tunPort = integer(value('--tun-port'), 1, 65535, 'tunnel port');
        break;
      case '--tun-nocsum':
      case '--tun-csum':
      case '--tun-remcsum': {
        const c = a === '--tun-nocsum' ? 'none' : a === '--tun-csum' ? 'csum' : 'remcsum';
        if (st.checksum && st.checksum !== c) throw new Error('conflicting tunnel checksum options');
        st.checksum = c;
        break;
      }
      default:
        throw new Error(`invalid option '${args[i]}'`);
    }
  }
  if (!st.cmd) throw new Error('no command (-A, -E, -D, -a, -e, -d or -C)');
  if (st.cmd === '-C') {
    if (svcKind) throw new Error('-C takes no service');
    return { op: 'flush' };
  }
  if (!svcKind || svcText === undefined) throw new Error(`${st.cmd} needs a service (-t, -u, --sctp-service or -f)`);
  let service: ServiceId;
  let svcPort = 0;
  if (svcKind === 'fwmark') {
    const mark = integer(svcText, 1, 0xffffffff, 'fwmark');
    service = { fwmark: mark, family: st.v6 ? 'inet6' : 'inet' };
  } else {
    const ap = parseAddrPort(svcText, false, { names, family: st.v6 ? 'inet6' : 'inet', protocol: svcKind });
    svcPort = ap.port!;
    service = { protocol: svcKind, address: ap.address, port: ap.port!, family: ap.family };
  }
  const serviceFamily = service.family ?? 'inet';
  const isService = st.cmd === '-A' || st.cmd === '-E' || st.cmd === '-D';
  const serverOpts = st.real || st.forward || st.weight !== undefined || st.upper !== undefined || st.lower !== undefined || st.tunType || st.tunPort !== undefined || st.checksum;
  const serviceOpts = st.scheduler || st.persistent || st.netmask !== undefined || st.pe || st.onePacket || st.schedFlags;
  if (isService && serverOpts) throw new Error(`real-server options are illegal with ${st.cmd}`);
  // as ipvsadm: the kernel would take it, and ignore it
  if (st.onePacket && (svcKind === 'tcp' || svcKind === 'sctp')) throw new Error('One-Packet Scheduling is only for UDP virtual services');
  if (!isService && serviceOpts) throw new Error(`service options are illegal with ${st.cmd}`);

  if (st.cmd === '-D') return { op: 'deleteService', service };
  if (st.cmd === '-A' || st.cmd === '-E') {
    const scheduler = st.scheduler ?? 'wlc';
    const flags: ServiceFlag[] = [];
    if (st.persistent) flags.push('persistent');
    if (st.onePacket) flags.push('one-packet');
    for (const f of st.schedFlags ?? []) {
      if (!['sh-fallback', 'sh-port', 'mh-fallback', 'mh-port', 'flag-1', 'flag-2', 'flag-3'].includes(f))
        throw new Error(`invalid scheduler flag '${f}'`);
      if ((f.startsWith('sh-') && scheduler !== 'sh') || (f.startsWith('mh-') && scheduler !== 'mh'))
        throw new Error(`incompatible scheduler flag '${f}'`);
      flags.push(f as ServiceFlag);
    }
    if (st.netmask !== undefined && typeof st.netmask !== (serviceFamily === 'inet' ? 'string' : 'number'))
      throw new Error(`netmask '${st.netmask}' does not fit an ${serviceFamily === 'inet' ? 'IPv4' : 'IPv6'} service`);
    const cfg: ServiceConfig = { ...service, scheduler, flags };
    if (st.persistent) cfg.timeout = st.timeout ?? 360;
    if (st.netmask !== undefined) cfg.netmask = st.netmask;
    if (st.pe) cfg.pe = st.pe;
    return { op: st.cmd === '-A' ? 'addService' : 'updateService', service: cfg };
  }
  // -a / -e / -d
  if (st.real === undefined) throw new Error(`${st.cmd} needs a real server (-r)`);
  const real = parseAddrPort(st.real, true, { names, family: serviceFamily, protocol: svcKind === 'fwmark' ? 'tcp' : svcKind });
  const forward = st.forward ?? 'droute';
  let port = real.port ?? svcPort;
  if (st.cmd === '-d') return { op: 'deleteDestination', service, dest: { address: real.address, port, family: real.family } };
  // As ipvsadm (-a/-e): direct routing and tunnelling cannot change the port, so the real server
  // of an address service gets the service's port.
  if (!('fwmark' in service) && (forward === 'droute' || forward === 'tunnel')) port = svcPort;
  if (real.family !== serviceFamily && forward !== 'tunnel')
    throw new Error('Different address family is allowed only for tunneling servers');
  const dest: DestinationConfig = { address: real.address, port, family: real.family, forward, weight: st.weight ?? 1 };
  if (st.upper !== undefined) dest.upperThreshold = st.upper;
  if (st.lower !== undefined) dest.lowerThreshold = st.lower;
  if (st.tunType || st.tunPort !== undefined || st.checksum) {
    if (forward !== 'tunnel') throw new Error('tunnel options need -i (tunnelling)');
    const type = st.tunType ?? 'ipip';
    if (type === 'ipip' && (st.tunPort !== undefined || st.checksum)) throw new Error('ipip tunnels take no --tun-port or checksum option');
    if (type === 'gue' && st.tunPort === undefined) throw new Error("You need to supply the 'tun-port' option for the 'gue' tunnel type");
    if (type === 'gre' && st.tunPort !== undefined) throw new Error("Illegal 'tun-port' option with the 'gre' tunnel type");
    if (type === 'gre' && st.checksum === 'remcsum') throw new Error("Illegal 'tun-remcsum' option with the 'gre' tunnel type");
    dest.tunnel = { type, ...(st.tunPort !== undefined ? { port: st.tunPort } : {}), ...(st.checksum ? { checksum: st.checksum } : {}) };
  }
  return { op: st.cmd === '-a' ? 'addDestination' : 'updateDestination', service, dest };
}

/**
 * Parses `ipvsadm -R` input (what `ipvsadm -S` prints, plus -E/-e/-D/-d/-C lines). Blank lines
 * and lines starting with '#' are skipped. Host and service names are looked up in `names`
 * (the CLI: fileResolver(); default: numeric only). Throws RulesParseError naming the first
 * bad line.
 */
export function parseRules(text: string, names: NameResolver = numeric): ParsedRule[] {
  const out: ParsedRule[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i]!.replace(/\r$/, '');
    const t = raw.trim();
    if (t === '' || t.startsWith('#')) continue;
    let args = tokens(t);
    if (args[0] === 'ipvsadm') args = args.slice(1);
    try {
      out.push({ line: i + 1, op: parseLine(args, names) });
    } catch (e) {
      throw new RulesParseError(i + 1, raw, e instanceof Error ? e.message : String(e));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Sorting as ipvsadm does (libipvs ipvs_cmp_services / ipvs_cmp_dests: int subtraction of
// host-order words, which wraps; reproduced so the order matches exactly).

function words(family: AddressFamily, address: string): number[] {
  if (family === 'inet') {
    const p = address.split('.').map(Number);
    return [((p[0]! << 24) | (p[1]! << 16) | (p[2]! << 8) | p[3]!) >>> 0];
  }
  const w = ipv6Words(address) ?? [0, 0, 0, 0, 0, 0, 0, 0];
  return [0, 1, 2, 3].map((i) => ((w[i * 2]! << 16) | w[i * 2 + 1]!) >>> 0);
}

/**
 * glibc's qsort (2.36: a top-down merge sort, msort_with_tmp), step for step. libipvs's
 * comparators overflow and are not transitive for some address sets (10.0.0.1 < 127.0.0.1 <
 * 200.0.0.1 < 10.0.0.1), so ipvsadm's order then depends on the kernel's dump order and on
 * this exact algorithm; reproducing both keeps the output identical.
 */
export function glibcSort<T>(items: readonly T[], cmp: (a: T, b: T) => number): T[] {
  const a = [...items];
  const tmp: T[] = new Array<T>(a.length);
  const sort = (lo: number, n: number): void => {
    if (n <= 1) return;
    const n1 = Math.floor(n / 2);
    sort(lo, n1);
    sort(lo + n1, n - n1);
    let i = lo;
    let j = lo + n1;
    let l = n1;
    let r = n - n1;
    let k = 0;
    while (l > 0 && r > 0) {
      if (cmp(a[i]!, a[j]!) <= 0) {
        tmp[k++] = a[i++]!;
        l--;
      } else {
        tmp[k++] = a[j++]!;
        r--;
      }
    }
    while (l-- > 0) tmp[k++] = a[i++]!;
    for (let m = 0; m < k; m++) a[lo + m] = tmp[m]!;
  };
  sort(0, a.length);
  return a;
}

const PROTO_NUM: Record<string, number> = { tcp: 6, udp: 17, sctp: 132 };
const AF_NUM: Record<AddressFamily, number> = { inet: 2, inet6: 10 };

/** Difference as C's `int r = a - b` with unsigned operands. */
function cdiff(a: number, b: number): number {
  return (a - b) | 0;
}

export function compareServices(a: Service, b: Service): number {
  let r = cdiff(a.fwmark ?? 0, b.fwmark ?? 0);
  if (r) return r;
  r = AF_NUM[a.family] - AF_NUM[b.family];
  if (r) return r;
  r = (a.fwmark ? 6 : PROTO_NUM[a.protocol!]!) - (b.fwmark ? 6 : PROTO_NUM[b.protocol!]!);
  if (r) return r;
  if (!a.fwmark) {
    const wa = words(a.family, a.address!);
    const wb = words(b.family, b.address!);
    for (let i = 0; !r && i < wa.length; i++) r = cdiff(wa[i]!, wb[i]!);
    if (r) return r;
    return (a.port ?? 0) - (b.port ?? 0);
  }
  // A fwmark service's address and port are zero in the kernel.
  return 0;
}

export function compareDests(svcFamily: AddressFamily, a: Destination, b: Destination): number {
  // ipvsadm compares with the service's family (a mixed-family dest is compared as such too).
  let r = 0;
  const wa = words(a.family, a.address);
  const wb = words(b.family, b.address);
  if (svcFamily === 'inet6') {
    const pa = a.family === 'inet' ? [wa[0]!, 0, 0, 0] : wa;
    const pb = b.family === 'inet' ? [wb[0]!, 0, 0, 0] : wb;
    for (let i = 0; !r && i < 4; i++) r = cdiff(pa[i]!, pb[i]!);
  } else {
    r = cdiff(wa[0]!, wb[0]!);
  }
  if (r) return r;
  return a.port - b.port;
}

// ---------------------------------------------------------------------------------------------
// Name resolution for the non-numeric forms (ipvsadm uses gethostbyaddr and getservbyport).

export interface NameResolver {
  host(family: AddressFamily, address: string): string | undefined;
  service(port: number, protocol: IpvsProtocol): string | undefined;
  /** The other way (restore): a host name's address, in `family` when it has one there. */
  address?(name: string, family: AddressFamily): string | undefined;
  /** A service name's port for `protocol`. */
  port?(name: string, protocol: IpvsProtocol): number | undefined;
}

/** Numeric output (-n). */
export const numeric: NameResolver = { host: () => undefined, service: () => undefined };

/**
 * Names from the files the C library would read first (/etc/hosts, /etc/services); no DNS.
 * Pure file reads, no processes.
 */
export function fileResolver(hostsFile = '/etc/hosts', servicesFile = '/etc/services'): NameResolver {
  const hosts = new Map<string, string>();
  const addresses = new Map<string, string[]>();
  const services = new Map<string, string>();
  const ports = new Map<string, number>();
  try {
    for (const line of readFileSync(hostsFile, 'utf8').split('\n')) {
      const f = line.replace(/#.*/, '').trim().split(/\s+/);
      if (f.length < 2 || !isIP(f[0]!)) continue;
      if (!hosts.has(f[0]!)) hosts.set(f[0]!, f[1]!);
      for (const name of f.slice(1)) addresses.set(name, [...(addresses.get(name) ?? []), f[0]!]);
    }
  } catch {
    // no hosts file: numeric
  }
  try {
    for (const line of readFileSync(servicesFile, 'utf8').split('\n')) {
      const m = /^(\S+)\s+(\d+)\/(\w+)([^#]*)/.exec(line);
      if (!m) continue;
      if (!services.has(`${m[2]}/${m[3]}`)) services.set(`${m[2]}/${m[3]}`, m[1]!);
      for (const name of [m[1]!, ...m[4]!.trim().split(/\s+/).filter(Boolean)]) if (!ports.has(`${name}/${m[3]}`)) ports.set(`${name}/${m[3]}`, Number(m[2]));
    }
  } catch {
    // no services file: numeric
  }
  return {
    host: (_family, address) => hosts.get(address),
    service: (port, protocol) => services.get(`${port}/${protocol}`),
    address: (name, family) => {
      const all = addresses.get(name) ?? [];
      return all.find((a) => (isIP(a) === 6) === (family === 'inet6')) ?? all[0];
    },
    port: (name, protocol) => ports.get(`${name}/${protocol}`),
  };
}

function addrPort(r: NameResolver, family: AddressFamily, address: string, port: number, protocol: IpvsProtocol): string {
  const host = r.host(family, address) ?? address;
  const svc = r.service(port, protocol) ?? String(port);
  return family === 'inet6' && host === address ? `[${host}]:${svc}` : `${host}:${svc}`;
}

// ---------------------------------------------------------------------------------------------
// ipvsadm -S

function schedFlags(s: Service): string[] {
  const out: string[] = [];
  const has = (f: ServiceFlag): boolean => s.flags.includes(f);
  if (s.scheduler === 'sh') {
    if (has('sh-fallback')) out.push('sh-fallback');
    if (has('sh-port')) out.push('sh-port');
  } else if (s.scheduler === 'mh') {
    if (has('mh-fallback')) out.push('mh-fallback');
    if (has('mh-port')) out.push('mh-port');
  } else {
    if (has('flag-1')) out.push('flag-1');
    if (has('flag-2')) out.push('flag-2');
  }
  if (has('flag-3')) out.push('flag-3');
  return out;
}

function ruleService(s: Service, r: NameResolver): string {
  if (s.fwmark) return s.family === 'inet6' ? `-f ${s.fwmark} -6` : `-f ${s.fwmark}`;
  const sw = s.protocol === 'tcp' ? '-t' : s.protocol === 'udp' ? '-u' : '--sctp-service';
  return `${sw} ${addrPort(r, s.family, s.address!, s.port!, s.protocol!)}`;
}

const FWD_SWITCH: Record<ForwardMethod, string> = { masq: '-m', local: '-g', tunnel: '-i', droute: '-g' };

/** `ipvsadm -S [-n]` for services listed with their destinations, in the kernel's dump order
 *  (as services() returns them): the order matters where ipvsadm's comparators are not
 *  transitive (see glibcSort). */
export function formatSave(services: Service[], resolver: NameResolver = numeric): string {
  const lines: string[] = [];
  for (const s of glibcSort(services, compareServices)) {
    const name = ruleService(s, resolver);
    let l = `-A ${name} -s ${s.scheduler}`;
    if (s.flags.includes('persistent')) {
      l += ` -p ${s.timeout}`;
      if (s.family === 'inet' && s.netmask !== '255.255.255.255') l += ` -M ${s.netmask}`;
      if (s.family === 'inet6' && s.netmask !== 128) l += ` -M ${s.netmask}`;
    }
    if (s.pe) l += ` --pe ${s.pe}`;
    if (s.flags.includes('one-packet')) l += ' -o';
    const sf = schedFlags(s);
    if (sf.length) l += ` -b ${sf.join(',')}`;
    lines.push(l);
    const proto: IpvsProtocol = s.protocol ?? 'tcp';
    for (const d of glibcSort(s.destinations ?? [], (a, b) => compareDests(s.family, a, b))) {
      let dl = `-a ${name} -r ${addrPort(resolver, d.family, d.address, d.port, proto)} ${FWD_SWITCH[d.forward]} -w ${d.weight}`;
      if (d.forward === 'tunnel' && d.tunnel) {
        const csum = d.tunnel.checksum === 'csum' ? '--tun-csum' : d.tunnel.checksum === 'remcsum' ? '--tun-remcsum' : '--tun-nocsum';
        if (d.tunnel.type === 'ipip') dl += ' --tun-type ipip';
        else if (d.tunnel.type === 'gue') dl += ` --tun-type gue --tun-port ${d.tunnel.port ?? 0} ${csum}`;
        else dl += ` --tun-type gre ${csum}`;
      }
      lines.push(dl);
    }
  }
  return lines.map((l) => l + '\n').join('');
}

// ---------------------------------------------------------------------------------------------
// ipvsadm -L [-n] [--stats|--rate|--thresholds|--persistent-conn]

export type ListFormat = 'default' | 'stats' | 'rate' | 'thresholds' | 'persistent-conn';

const FWD_NAME: Record<ForwardMethod, string> = { masq: 'Masq', local: 'Local', tunnel: 'Tunnel', droute: 'Route' };

/** ipvsadm's print_largenum (non-exact form): 9 columns, K/M/G/T above 100 million. */
function largenum(n: number): string {
  if (n < 1e8) return String(n).padStart(9);
  if (n < 1e9) return `${String(Math.floor(n / 1e3)).padStart(8)}K`;
  if (n < 1e11) return `${String(Math.floor(n / 1e6)).padStart(8)}M`;
  if (n < 1e14) return `${String(Math.floor(n / 1e9)).padStart(8)}G`;
  return `${String(Math.floor(n / 1e12)).padStart(8)}T`;
}

export function formatList(info: IpvsInfo | null, services: Service[], resolver: NameResolver = numeric, format: ListFormat = 'default'): string {
  const out: string[] = [];
  if (info) out.push(formatInfo(info));
  switch (format) {
    case 'stats':
      out.push('Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes', '  -> RemoteAddress:Port');
      break;
    case 'rate':
      out.push('Prot LocalAddress:Port                 CPS    InPPS   OutPPS    InBPS   OutBPS', '  -> RemoteAddress:Port');
      break;
    case 'thresholds':
      out.push('Prot LocalAddress:Port            Uthreshold Lthreshold ActiveConn InActConn ', '  -> RemoteAddress:Port');
      break;
    case 'persistent-conn':
      out.push('Prot LocalAddress:Port            Weight    PersistConn ActiveConn InActConn ', '  -> RemoteAddress:Port');
      break;
    default:
      out.push('Prot LocalAddress:Port Scheduler Flags', '  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn');
  }
  const zero = { conns: 0, inPackets: 0, outPackets: 0, inBytes: 0, outBytes: 0, cps: 0, inPps: 0, outPps: 0, inBps: 0, outBps: 0 };
  for (const s of glibcSort(services, compareServices)) {
    const proto: IpvsProtocol = s.protocol ?? 'tcp';
    let name: string;
    if (s.fwmark) name = s.family === 'inet6' ? `FWM  ${s.fwmark} IPv6` : `FWM  ${s.fwmark}`;
    else {
      name = `${s.protocol!.toUpperCase().padEnd(4)} ${addrPort(resolver, s.family, s.address!, s.port!, proto)}`;
      if (s.family === 'inet') name = name.slice(0, 33);
    }
    const st = s.stats ?? zero;
    if (format === 'stats') {
      out.push(name.padEnd(33) + largenum(st.conns) + largenum(st.inPackets) + largenum(st.outPackets) + largenum(st.inBytes) + largenum(st.outBytes));
    } else if (format === 'rate') {
      out.push(name.padEnd(33) + largenum(st.cps) + largenum(st.inPps) + largenum(st.outPps) + largenum(st.inBps) + largenum(st.outBps));
    } else {
      let l = `${name} ${s.scheduler}`;
      const sf = schedFlags(s);
      if (sf.length) l += ` (${sf.join(',')})`;
      if (s.flags.includes('persistent')) {
        l += ` persistent ${s.timeout}`;
        if (s.family === 'inet' && s.netmask !== '255.255.255.255') l += ` mask ${s.netmask}`;
        if (s.family === 'inet6' && s.netmask !== 128) l += ` mask ${s.netmask}`;
        if (s.pe) l += ` pe ${s.pe}`;
      }
      if (s.flags.includes('one-packet')) l += ' ops';
      out.push(l);
    }
    for (const d of glibcSort(s.destinations ?? [], (a, b) => compareDests(s.family, a, b))) {
      let dn = addrPort(resolver, d.family, d.address, d.port, proto);
      if (s.family === 'inet') dn = dn.slice(0, 28);
      const ds = d.stats ?? zero;
      if (format === 'stats')
        out.push(`  -> ${dn.padEnd(28)}` + largenum(ds.conns) + largenum(ds.inPackets) + largenum(ds.outPackets) + largenum(ds.inBytes) + largenum(ds.outBytes));
      else if (format === 'rate')
        out.push(`  -> ${dn.padEnd(28)} ${String(ds.cps).padStart(8)} ${String(ds.inPps).padStart(8)} ${String(ds.outPps).padStart(8)}` + largenum(ds.inBps) + largenum(ds.outBps));
      else if (format === 'thresholds')
        out.push(`  -> ${dn.padEnd(28)} ${String(d.upperThreshold).padEnd(10)} ${String(d.lowerThreshold).padEnd(10)} ${String(d.activeConns).padEnd(10)} ${String(d.inactiveConns).padEnd(10)}`);
      else if (format === 'persistent-conn')
        out.push(`  -> ${dn.padEnd(28)} ${String(d.weight).padEnd(9)} ${String(d.persistentConns).padEnd(11)} ${String(d.activeConns).padEnd(10)} ${String(d.inactiveConns).padEnd(10)}`);
      else
        out.push(`  -> ${dn.padEnd(28)} ${FWD_NAME[d.forward].padEnd(7)} ${String(d.weight).padEnd(6)} ${String(d.activeConns).padEnd(10)} ${String(d.inactiveConns).padEnd(10)}`);
    }
  }
  return out.map((l) => l + '\n').join('');
}
