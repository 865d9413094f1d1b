// The daemon's configuration: a YAML file whose fields are named like kube-proxy's
// KubeProxyConfiguration (the subset that means something for an IPVS proxy, plus ipvsync's
// own), command-line flags named like kube-proxy's that override it, kube-proxy's defaults, and
// validation that names the field and says what is wrong — all problems at once.
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { BadInputError } from '../errors.js';
import { yaml } from '../yaml.js';
import { cidrText, parseCidr } from '../net/address.js';
import { isKnownScheduler } from '../kube/scheduler.js';
import type { ProxyConfig } from '../kube/types.js';

export type BindMode = 'address' | 'route';
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface HostPort {
  host: string;
  port: number;
}

/** The effective, validated configuration. Durations are milliseconds. */
export interface IpvsyncConfig {
  /** Pod CIDRs (one per family). Traffic to VIPs from outside them is masqueraded. */
  clusterCIDRs: string[];
  /** NodePorts only on node addresses inside these CIDRs; empty: every local address. */
  nodePortAddresses: string[];
  /** This node's name; '' means the hostname. */
  hostnameOverride: string;
  /** null: the server is off (port 0). */
  metricsBindAddress: HostPort | null;
  healthzBindAddress: HostPort | null;
  masqueradeAll: boolean;
  /** kube-proxy's clientConnection.kubeconfig ('' : in-cluster). */
  kubeconfig: string;
  /** API server URL overriding the kubeconfig (kube-proxy's --master). */
  master: string;
  ipvs: {
    /** Default scheduler; '' means rr. */
    scheduler: string;
    syncPeriodMs: number;
    minSyncPeriodMs: number;
    /** IPVS connection timeouts (whole seconds in ms); 0 leaves the kernel's value. */
    tcpTimeoutMs: number;
    tcpFinTimeoutMs: number;
    udpTimeoutMs: number;
    strictARP: boolean;
    /**
     * net.ipv4.vs.run_estimation (Linux 5.18+), written at start when set; unset leaves the
     * kernel's value. false stops IPVS's rate estimation (the conns/s, packets/s and bytes/s of
     * `ipvsadm -L --rate`; the counters stay). Before Linux 6.2 one timer walks every service
     * and destination every 2 s in softirq: at 20k services × 10 that held a CPU for ~80–95 ms
     * per walk under qemu, whoever was running there.
     */
    runEstimation?: boolean;
    /** IPVS services in these ranges are never touched (kube-proxy's excludeCIDRs). */
    excludeCIDRs: string[];
  };
  // ---- ipvsync's own ----
  /** 'address': every VIP as an address on vipLink (kube-proxy). 'route': local routes covering
   *  serviceCIDRs (large clusters). */
  bindMode: BindMode;
  /** Service CIDRs; required by bindMode 'route'. */
  serviceCIDRs: string[];
  vipLink: string;
  /** A removed TCP real server is deleted after this even with connections left. */
  drainTimeoutMs: number;
  /** Serve Services labelled service.kubernetes.io/service-proxy-name=<proxyName>. */
  proxyName: string;
  /** Translate, diff and apply on a thread of their own (ThreadedProxier): the daemon's event
   *  loop (watches, /healthz, /metrics) is not blocked by a full sync's GC pauses. */
  syncThread: boolean;
  logLevel: LogLevel;
}

export interface ConfigIssue {
  /** Field path as written in the file ("ipvs.syncPeriod"), or the flag ("--ipvs-sync-period"). */
  path: string;
  message: string;
}

export class ConfigError extends BadInputError {
  override readonly name = 'ConfigError';
  constructor(
    readonly issues: ConfigIssue[],
    source?: string,
  ) {
    super(`${source ? `${source}: ` : ''}invalid configuration:\n${issues.map((i) => `  ${i.path}: ${i.message}`).join('\n')}`);
  }
}

export const DEFAULT_HEALTHZ_PORT = 10256;
export const DEFAULT_METRICS_PORT = 10249;

/** kube-proxy's defaults for IPVS mode (pkg/proxy/apis/config/v1alpha1/defaults.go). */
export function defaultConfig(): IpvsyncConfig {
  return {
    clusterCIDRs: [],
    nodePortAddresses: [],
    hostnameOverride: '',
    metricsBindAddress: { host: '127.0.0.1', port: DEFAULT_METRICS_PORT },
    healthzBindAddress: { host: '0.0.0.0', port: DEFAULT_HEALTHZ_PORT },
    masqueradeAll: false,
    kubeconfig: '',
    master: '',
    ipvs: {
      scheduler: '',
      syncPeriodMs: 30_000,
      minSyncPeriodMs: 0,
      tcpTimeoutMs: 0,
      tcpFinTimeoutMs: 0,
      udpTimeoutMs: 0,
      strictARP: false,
      excludeCIDRs: [],
    },
    bindMode: 'address',
    serviceCIDRs: [],
    vipLink: 'kube-ipvs0',
    drainTimeoutMs: 15 * 60_000,
    proxyName: '',
    // a full sync never holds the daemon's event loop (health, metrics, watches); ~5 MB more
    syncThread: true,
    logLevel: 'info',
  };
}

// ---- durations (Go's time.ParseDuration syntax, as metav1.Duration) ----

const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** "30s", "1m30s", "250ms", "1.5h", "0" → milliseconds; undefined when not a duration. */
export function parseDuration(text: string): number | undefined {
  const t = text.trim();
  if (t === '0') return 0;
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(t)) return undefined;
  let ms = 0;
  for (const m of t.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(m[1]) * UNIT_MS[m[2]!]!;
  return Math.round(ms * 1e6) / 1e6;
}

/** Go's Duration.String() for whole milliseconds: "30s", "15m0s", "1h0m0s", "250ms", "0s". */
export function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  const sec = `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, '')}s`;
  if (h) return `${h}h${m}m${sec}`;
  if (m) return `${m}m${sec}`;
  return sec;
}

// ---- field specification ----

/** kube-proxy fields that are accepted and ignored (they configure other modes or things
 *  ipvsync does not do); reported as warnings so a kube-proxy config file loads unchanged. */
const IGNORED_KUBE_PROXY_FIELDS = new Set([
  'bindAddress',
  'bindAddressHardFail',
  'configSyncPeriod',
  'conntrack',
  'detectLocal',
  'detectLocalMode',
  'enableProfiling',
  'featureGates',
  'logging',
  'nftables',
  'oomScoreAdj',
  'portRange',
  'showHiddenMetricsForVersion',
  'udpIdleTimeout',
  'winkernel',
]);

const TOP_FIELDS = new Set([
  'apiVersion',
  'kind',
  'mode',
  'clusterCIDR',
  'nodePortAddresses',
  'hostnameOverride',
  'metricsBindAddress',
  'healthzBindAddress',
  'masqueradeAll',
  'clientConnection',
  'master',
  'iptables',
  'ipvs',
  'syncPeriod',
  'minSyncPeriod',
  'bindMode',
  'serviceCIDRs',
  'vipLink',
  'drainTimeout',
  'proxyName',
  'syncThread',
  'logLevel',
]);
const IPVS_FIELDS = new Set(['scheduler', 'syncPeriod', 'minSyncPeriod', 'tcpTimeout', 'tcpFinTimeout', 'udpTimeout', 'strictARP', 'runEstimation', 'excludeCIDRs']);
const API_VERSIONS = new Set(['kubeproxy.config.k8s.io/v1alpha1', 'ipvsync.io/v1alpha1']);

export interface LoadedConfig {
  config: IpvsyncConfig;
  /** Accepted-but-ignored kube-proxy fields and similar notes. */
  warnings: string[];
}

type Raw = Record<string, unknown>;

function isObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

class Checker {
  readonly issues: ConfigIssue[] = [];
  readonly warnings: string[] = [];

  bad(path: string, message: string): void {
    this.issues.push({ path, message });
  }

  string(v: unknown, path: string): string | undefined {
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') return this.bad(path, `must be a string, not ${describe(v)}`), undefined;
    return v;
  }

  bool(v: unknown, path: string): boolean | undefined {
    if (v === undefined || v === null) return undefined;
    if (typeof v === 'boolean') return v;
    if (v === 'true' || v === 'false') return v === 'true';
    return this.bad(path, `must be true or false, not ${describe(v)}`), undefined;
  }

  duration(v: unknown, path: string, opts: { wholeSeconds?: boolean; positive?: boolean } = {}): number | undefined {
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string' && v !== 0) return this.bad(path, `must be a duration such as "30s" or "1m", not ${describe(v)}`), undefined;
    if (String(v).trim().startsWith('-')) return this.bad(path, `"${v}" is negative`), undefined;
    const ms = parseDuration(String(v));
    if (ms === undefined) return this.bad(path, `"${v}" is not a duration (examples: "30s", "1m", "1h30m", "250ms")`), undefined;
    if (opts.positive && ms <= 0) return this.bad(path, 'must be greater than 0'), undefined;
    if (opts.wholeSeconds && ms % 1000 !== 0) return this.bad(path, `"${v}" is not a whole number of seconds (IPVS timeouts are in seconds)`), undefined;
    return ms;
  }

  /** A list of CIDRs given as a YAML list or one comma-separated string. */
  cidrs(v: unknown, path: string): string[] | undefined {
    if (v === undefined || v === null) return undefined;
    let items: unknown[];
    if (typeof v === 'string') items = v.split(',').map((s) => s.trim()).filter((s) => s !== '');
    else if (Array.isArray(v)) items = v;
    else return this.bad(path, `must be a list of CIDRs or a comma-separated string, not ${describe(v)}`), undefined;
    const out: string[] = [];
    items.forEach((it, i) => {
      const p = Array.isArray(v) ? `${path}[${i}]` : path;
      if (typeof it !== 'string') return this.bad(p, `must be a CIDR string, not ${describe(it)}`);
      const r = parseConfigCidr(it);
      if ('problem' in r) return this.bad(p, r.problem);
      if (r.note) this.warnings.push(`${p}: ${r.note}`);
      out.push(r.cidr);
    });
    return out;
  }

  hostPort(v: unknown, path: string, defaultPort: number): HostPort | null | undefined {
    if (v === undefined || v === null || v === '') return undefined;
    if (typeof v !== 'string') return this.bad(path, `must be "host:port", not ${describe(v)}`), undefined;
    const r = parseHostPort(v, defaultPort);
    if (typeof r === 'string') return this.bad(path, r), undefined;
    return r.port === 0 ? null : r;
  }

  unknownFields(obj: Raw, known: Set<string>, prefix: string, ignored?: Set<string>): void {
    for (const k of Object.keys(obj)) {
      if (known.has(k)) continue;
      if (ignored?.has(k)) {
        this.warnings.push(`${prefix}${k}: kube-proxy field ignored by ipvsync`);
        continue;
      }
      this.bad(`${prefix}${k}`, 'unknown field');
    }
  }
}

function describe(v: unknown): string {
  if (Array.isArray(v)) return 'a list';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'a mapping';
  return `${typeof v} ${JSON.stringify(v)}`;
}

/**
 * One CIDR of the configuration or of a flag, "address/prefix-length": as kube-proxy parses
 * them (net.ParseCIDR, then the network), host bits are cleared — "10.244.1.5/16" is
 * 10.244.0.0/16 — with a note saying so; the glue's sets take only networks, and the kernel
 * would refuse the value at every sync. The network comes back in canonical text. Anything that
 * is not a CIDR (a bare address, a prefix too long for its family, a zone index) is a problem.
 */
export function parseConfigCidr(text: string): { cidr: string; note?: string } | { problem: string } {
  const t = text.trim();
  const m = /^([^/]+)\/(\d{1,3})$/.exec(t);
  if (m?.[1]!.includes('%')) return { problem: `"${t}" is not a CIDR: a zone index ("%…") has no place in one` };
  const family = m ? isIP(m[1]!) : 0;
  if (!m || !family) return { problem: `"${t}" is not a CIDR (address/prefix-length, e.g. 10.244.0.0/16 or fd00::/64)` };
  if (Number(m[2]) > (family === 4 ? 32 : 128)) return { problem: `"${t}": prefix length ${m[2]} is too long for IPv${family}` };
  const c = parseCidr(t);
  const cidr = cidrText(c);
  const host = parseCidr(m[1]!);
  return host.base === c.base ? { cidr } : { cidr, note: `"${t}" has host bits set: using ${cidr}, its network (as kube-proxy does)` };
}

/**
 * A list of CIDRs given on the command line (`sync`'s --cluster-cidr, …), through the
 * configuration's parser: the networks, notes for host bits cleared, and a ConfigError naming
 * `flag` for every value that is not a CIDR.
 */
export function parseCidrFlag(values: readonly string[], flag: string): { cidrs: string[]; warnings: string[] } {
  const cidrs: string[] = [];
  const warnings: string[] = [];
  const issues: ConfigIssue[] = [];
  for (const v of values) {
    const r = parseConfigCidr(v);
    if ('problem' in r) issues.push({ path: flag, message: r.problem });
    else {
      cidrs.push(r.cidr);
      if (r.note) warnings.push(`${flag}: ${r.note}`);
    }
  }
  if (issues.length) throw new ConfigError(issues);
  return { cidrs, warnings };
}

/** "1.2.3.4:80", "[::1]:80", "0.0.0.0" (default port, as kube-proxy's AppendPortIfNeeded). */
export function parseHostPort(text: string, defaultPort: number): HostPort | string {
  let host: string;
  let portText: string | undefined;
  const v6 = /^\[([^\]]+)\](?::(.*))?$/.exec(text);
  if (v6) {
    host = v6[1]!;
    portText = v6[2];
  } else if (isIP(text)) {
    host = text;
  } else {
    const i = text.lastIndexOf(':');
    if (i < 0) return `"${text}" is not an IP address or "IP:port"`;
    host = text.slice(0, i);
    portText = text.slice(i + 1);
  }
  if (!isIP(host)) return `"${host}" is not an IP address (in "${text}")`;
  if (portText === undefined) return { host, port: defaultPort };
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) return `port "${portText}" must be a number from 0 to 65535 (0 turns the server off)`;
  return { host, port: Number(portText) };
}

function formatHostPort(hp: HostPort | null, family4Default: string): string {
  if (!hp) return `${family4Default}:0`;
  return isIP(hp.host) === 6 ? `[${hp.host}]:${hp.port}` : `${hp.host}:${hp.port}`;
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LOG_LEVELS = new Set<LogLevel>(['debug', 'info', 'warn', 'error']);

/** Validates a parsed config document (already merged with flags) onto the defaults. */
export function validateConfig(raw: unknown, source?: string): LoadedConfig {
  const c = new Checker();
  const cfg = defaultConfig();
  if (raw === undefined || raw === null) raw = {};
  if (!isObject(raw)) throw new ConfigError([{ path: '(document)', message: `must be a mapping, not ${describe(raw)}` }], source);
  c.unknownFields(raw, TOP_FIELDS, '', IGNORED_KUBE_PROXY_FIELDS);

  const apiVersion = c.string(raw.apiVersion, 'apiVersion');
  if (apiVersion !== undefined && !API_VERSIONS.has(apiVersion)) c.bad('apiVersion', `must be one of ${[...API_VERSIONS].join(', ')}, not "${apiVersion}"`);
  const kind = c.string(raw.kind, 'kind');
  if (kind !== undefined && kind !== 'KubeProxyConfiguration') c.bad('kind', `must be KubeProxyConfiguration, not "${kind}"`);
  const mode = c.string(raw.mode, 'mode');
  if (mode !== undefined && mode !== '' && mode !== 'ipvs') c.bad('mode', `ipvsync is an IPVS proxy: mode must be "ipvs" or empty, not "${mode}"`);

  const cluster = c.cidrs(raw.clusterCIDR, 'clusterCIDR');
  if (cluster) {
    if (cluster.length > 2 || (cluster.length === 2 && isIP(cluster[0]!.split('/')[0]!) === isIP(cluster[1]!.split('/')[0]!)))
      c.bad('clusterCIDR', 'at most one CIDR per IP family (one, or one IPv4 and one IPv6 for dual-stack)');
    cfg.clusterCIDRs = cluster;
  }
  const npa = raw.nodePortAddresses;
  if (Array.isArray(npa) && npa.includes('primary')) c.bad('nodePortAddresses', '"primary" is not supported: list CIDRs');
  else cfg.nodePortAddresses = c.cidrs(npa, 'nodePortAddresses') ?? cfg.nodePortAddresses;

  const host = c.string(raw.hostnameOverride, 'hostnameOverride');
  if (host !== undefined) {
    // kube-proxy trims and lowercases it.
    const h = host.trim().toLowerCase();
    if (h !== '' && (h.length > 253 || !DNS_SUBDOMAIN.test(h))) c.bad('hostnameOverride', `"${host}" is not a valid node name (a DNS subdomain)`);
    cfg.hostnameOverride = h;
  }
  const metrics = c.hostPort(raw.metricsBindAddress, 'metricsBindAddress', DEFAULT_METRICS_PORT);
  if (metrics !== undefined) cfg.metricsBindAddress = metrics;
  const healthz = c.hostPort(raw.healthzBindAddress, 'healthzBindAddress', DEFAULT_HEALTHZ_PORT);
  if (healthz !== undefined) cfg.healthzBindAddress = healthz;

  if (raw.clientConnection !== undefined && raw.clientConnection !== null) {
    if (!isObject(raw.clientConnection)) c.bad('clientConnection', `must be a mapping, not ${describe(raw.clientConnection)}`);
    else {
      const cc = raw.clientConnection;
      c.unknownFields(cc, new Set(['kubeconfig']), 'clientConnection.', new Set(['acceptContentTypes', 'contentType', 'qps', 'burst']));
      cfg.kubeconfig = c.string(cc.kubeconfig, 'clientConnection.kubeconfig') ?? '';
    }
  }
  // ipvsync-only field for kube-proxy's --master flag.
  if (raw.master !== undefined) cfg.master = c.string(raw.master, 'master') ?? '';

  // masqueradeAll: top level, or kube-proxy's iptables.masqueradeAll.
  let masq = c.bool(raw.masqueradeAll, 'masqueradeAll');
  if (raw.iptables !== undefined && raw.iptables !== null) {
    if (!isObject(raw.iptables)) c.bad('iptables', `must be a mapping, not ${describe(raw.iptables)}`);
    else {
      c.unknownFields(raw.iptables, new Set(['masqueradeAll']), 'iptables.', new Set(['masqueradeBit', 'localhostNodePorts', 'syncPeriod', 'minSyncPeriod']));
      masq ??= c.bool(raw.iptables.masqueradeAll, 'iptables.masqueradeAll');
    }
  }
  if (masq !== undefined) cfg.masqueradeAll = masq;

  // Newer kube-proxy has syncPeriod/minSyncPeriod at the top level; ipvs.* wins when both are set.
  const topSync = c.duration(raw.syncPeriod, 'syncPeriod', { positive: true });
  const topMin = c.duration(raw.minSyncPeriod, 'minSyncPeriod');
  if (topSync !== undefined) cfg.ipvs.syncPeriodMs = topSync;
  if (topMin !== undefined) cfg.ipvs.minSyncPeriodMs = topMin;
  if (raw.ipvs !== undefined && raw.ipvs !== null) {
    if (!isObject(raw.ipvs)) c.bad('ipvs', `must be a mapping, not ${describe(raw.ipvs)}`);
    else {
      const v = raw.ipvs;
      c.unknownFields(v, IPVS_FIELDS, 'ipvs.');
      const sched = c.string(v.scheduler, 'ipvs.scheduler');
      if (sched !== undefined) {
        if (sched !== '' && !isKnownScheduler(sched)) c.bad('ipvs.scheduler', `unknown IPVS scheduler "${sched}"`);
        cfg.ipvs.scheduler = sched;
      }
      cfg.ipvs.syncPeriodMs = c.duration(v.syncPeriod, 'ipvs.syncPeriod', { positive: true }) ?? cfg.ipvs.syncPeriodMs;
      cfg.ipvs.minSyncPeriodMs = c.duration(v.minSyncPeriod, 'ipvs.minSyncPeriod') ?? cfg.ipvs.minSyncPeriodMs;
      cfg.ipvs.tcpTimeoutMs = c.duration(v.tcpTimeout, 'ipvs.tcpTimeout', { wholeSeconds: true }) ?? 0;
      cfg.ipvs.tcpFinTimeoutMs = c.duration(v.tcpFinTimeout, 'ipvs.tcpFinTimeout', { wholeSeconds: true }) ?? 0;
      cfg.ipvs.udpTimeoutMs = c.duration(v.udpTimeout, 'ipvs.udpTimeout', { wholeSeconds: true }) ?? 0;
      cfg.ipvs.strictARP = c.bool(v.strictARP, 'ipvs.strictARP') ?? false;
      const runEstimation = c.bool(v.runEstimation, 'ipvs.runEstimation');
      if (runEstimation !== undefined) cfg.ipvs.runEstimation = runEstimation;
      cfg.ipvs.excludeCIDRs = c.cidrs(v.excludeCIDRs, 'ipvs.excludeCIDRs') ?? [];
    }
  }
  if (cfg.ipvs.minSyncPeriodMs > cfg.ipvs.syncPeriodMs)
    c.bad('ipvs.minSyncPeriod', `must not exceed ipvs.syncPeriod (${formatDuration(cfg.ipvs.minSyncPeriodMs)} > ${formatDuration(cfg.ipvs.syncPeriodMs)})`);

  const bindMode = c.string(raw.bindMode, 'bindMode');
  if (bindMode !== undefined) {
    if (bindMode !== 'address' && bindMode !== 'route') c.bad('bindMode', `must be "address" or "route", not "${bindMode}"`);
    else cfg.bindMode = bindMode;
  }
  cfg.serviceCIDRs = c.cidrs(raw.serviceCIDRs, 'serviceCIDRs') ?? [];
  if (cfg.bindMode === 'route' && cfg.serviceCIDRs.length === 0 && !c.issues.some((i) => i.path.startsWith('serviceCIDRs')))
    c.bad('serviceCIDRs', 'required with bindMode "route" (the ranges the local routes cover)');
  const link = c.string(raw.vipLink, 'vipLink');
  if (link !== undefined) {
    if (!/^[^\s/:]{1,15}$/.test(link) || link === '.' || link === '..') c.bad('vipLink', `"${link}" is not a link name (1-15 characters, no spaces, "/" or ":")`);
    else cfg.vipLink = link;
  }
  cfg.drainTimeoutMs = c.duration(raw.drainTimeout, 'drainTimeout') ?? cfg.drainTimeoutMs;
  const proxyName = c.string(raw.proxyName, 'proxyName');
  if (proxyName !== undefined) {
    if (proxyName !== '' && (proxyName.length > 63 || !/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(proxyName)))
      c.bad('proxyName', `"${proxyName}" is not a valid label value`);
    cfg.proxyName = proxyName;
  }
  cfg.syncThread = c.bool(raw.syncThread, 'syncThread') ?? cfg.syncThread;
  const level = c.string(raw.logLevel, 'logLevel');
  if (level !== undefined) {
    if (!LOG_LEVELS.has(level as LogLevel)) c.bad('logLevel', `must be one of debug, info, warn, error, not "${level}"`);
    else cfg.logLevel = level as LogLevel;
  }

  if (c.issues.length) throw new ConfigError(c.issues, source);
  return { config: cfg, warnings: c.warnings };
}

/** Parses YAML text (a syntax error names the line). Empty text is an empty config. */
export function parseConfigText(text: string, source = 'config'): unknown {
  try {
    return yaml().parse(text) ?? {};
  } catch (e) {
    if (e instanceof yaml().YAMLParseError) {
      const where = e.linePos?.[0] ? `line ${e.linePos[0].line}, column ${e.linePos[0].col}` : '(document)';
      throw new ConfigError([{ path: where, message: `YAML syntax: ${e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, '')}` }], source);
    }
    throw e;
  }
}

// ---- flags ----

export type FlagKind = 'string' | 'bool' | 'duration' | 'cidrs';

export interface FlagSpec {
  /** kube-proxy's flag name, without dashes. */
  flag: string;
  /** Where it goes in the config document. */
  path: string;
  kind: FlagKind;
  help: string;
  /** A bool flag that defaults to true: `--no-<flag>` sets it false, with this help. */
  negatedHelp?: string;
}

/** The flags that override the file, named as kube-proxy's (ipvsync's own where it has none). */
export const CONFIG_FLAGS: readonly FlagSpec[] = [
  { flag: 'cluster-cidr', path: 'clusterCIDR', kind: 'cidrs', help: 'pod CIDR(s), comma separated; traffic to VIPs from outside is masqueraded' },
  { flag: 'nodeport-addresses', path: 'nodePortAddresses', kind: 'cidrs', help: 'NodePorts only on node addresses in these CIDRs (comma separated)' },
  { flag: 'hostname-override', path: 'hostnameOverride', kind: 'string', help: "this node's name, if not the hostname" },
  { flag: 'metrics-bind-address', path: 'metricsBindAddress', kind: 'string', help: 'metrics server ip:port (port 0: off; default 127.0.0.1:10249)' },
  { flag: 'healthz-bind-address', path: 'healthzBindAddress', kind: 'string', help: 'health server ip:port (port 0: off; default 0.0.0.0:10256)' },
  { flag: 'masquerade-all', path: 'masqueradeAll', kind: 'bool', help: 'masquerade all traffic to service VIPs' },
  { flag: 'kubeconfig', path: 'clientConnection.kubeconfig', kind: 'string', help: 'kubeconfig file (default: in-cluster config)' },
  { flag: 'master', path: 'master', kind: 'string', help: 'API server URL (overrides the kubeconfig)' },
  { flag: 'ipvs-scheduler', path: 'ipvs.scheduler', kind: 'string', help: 'default IPVS scheduler (default rr)' },
  { flag: 'ipvs-sync-period', path: 'ipvs.syncPeriod', kind: 'duration', help: 'full resync at least this often (default 30s)' },
  { flag: 'ipvs-min-sync-period', path: 'ipvs.minSyncPeriod', kind: 'duration', help: 'no two syncs closer than this (default 0s)' },
  { flag: 'ipvs-tcp-timeout', path: 'ipvs.tcpTimeout', kind: 'duration', help: 'IPVS TCP idle timeout (0: kernel value)' },
  { flag: 'ipvs-tcpfin-timeout', path: 'ipvs.tcpFinTimeout', kind: 'duration', help: 'IPVS TCP FIN_WAIT timeout (0: kernel value)' },
  { flag: 'ipvs-udp-timeout', path: 'ipvs.udpTimeout', kind: 'duration', help: 'IPVS UDP timeout (0: kernel value)' },
  { flag: 'ipvs-strict-arp', path: 'ipvs.strictARP', kind: 'bool', help: 'arp_ignore=1, arp_announce=2' },
  {
    flag: 'ipvs-run-estimation',
    path: 'ipvs.runEstimation',
    kind: 'bool',
    help: 'net.ipv4.vs.run_estimation=1 (default: the kernel\'s value is left as it is)',
    negatedHelp: 'net.ipv4.vs.run_estimation=0: no IPVS rate estimation (before Linux 6.2 its timer walks every service and destination every 2 s in softirq)',
  },
  { flag: 'ipvs-exclude-cidrs', path: 'ipvs.excludeCIDRs', kind: 'cidrs', help: 'never touch IPVS services in these CIDRs' },
  { flag: 'bind-mode', path: 'bindMode', kind: 'string', help: 'address (VIPs on the link) or route (local routes over serviceCIDRs)' },
  { flag: 'service-cidrs', path: 'serviceCIDRs', kind: 'cidrs', help: 'service CIDRs (required by --bind-mode route)' },
  { flag: 'vip-link', path: 'vipLink', kind: 'string', help: 'dummy link holding the VIPs (default kube-ipvs0)' },
  { flag: 'drain-timeout', path: 'drainTimeout', kind: 'duration', help: 'delete a draining TCP real server after this (default 15m)' },
  { flag: 'proxy-name', path: 'proxyName', kind: 'string', help: 'also serve Services labelled service.kubernetes.io/service-proxy-name=NAME' },
  {
    flag: 'sync-thread',
    path: 'syncThread',
    kind: 'bool',
    help: 'sync on a thread of its own (the default): a full sync never blocks the watches, /healthz or /metrics',
    negatedHelp: "sync on the daemon's thread: ~5 MB less memory at 10k services, but a full sync holds its event loop",
  },
  { flag: 'log-level', path: 'logLevel', kind: 'string', help: 'debug, info, warn or error (default info)' },
];

const kebab = (k: string) => k.replace(/[A-Z]/g, (ch) => `-${ch.toLowerCase()}`);

/**
 * Flags onto the file's document (pure: returns a new document). `flags` is keyed by flag name
 * ("ipvs-sync-period") or its camelCase form as commander gives it ("ipvsSyncPeriod"); undefined
 * values are flags not given. Unknown keys are ignored (other commands' options). A flag's
 * problem is reported under its own name.
 */
export function mergeFlags(doc: unknown, flags: Record<string, unknown>): { doc: Raw; flagPaths: Map<string, string> } {
  const out: Raw = isObject(doc) ? structuredClone(doc) : {};
  const flagPaths = new Map<string, string>();
  const byName = new Map(CONFIG_FLAGS.map((f) => [f.flag, f]));
  for (const [key, value] of Object.entries(flags)) {
    if (value === undefined) continue;
    const spec = byName.get(key) ?? byName.get(kebab(key));
    if (!spec) continue;
    const parts = spec.path.split('.');
    let node = out;
    for (const p of parts.slice(0, -1)) {
      if (!isObject(node[p])) node[p] = {};
      node = node[p] as Raw;
    }
    node[parts.at(-1)!] = value;
    flagPaths.set(spec.path, `--${spec.flag}`);
  }
  return { doc: out, flagPaths };
}

export interface LoadOptions {
  /** Config file path (YAML). */
  file?: string;
  /** Flag values (see mergeFlags). */
  flags?: Record<string, unknown>;
  /** For tests: the file's text instead of reading `file`. */
  text?: string;
}

/** File (if any) + flags → validated config. Errors name the file field or the flag. */
export function loadConfig(opts: LoadOptions = {}): LoadedConfig {
  const source = opts.file ?? 'config';
  let doc: unknown = {};
  if (opts.text !== undefined) doc = parseConfigText(opts.text, source);
  else if (opts.file) {
    let text: string;
    try {
      text = readFileSync(opts.file, 'utf8');
    } catch (e) {
      throw new ConfigError([{ path: '(file)', message: `cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` }], source);
    }
    doc = parseConfigText(text, source);
  }
  if (!isObject(doc)) throw new ConfigError([{ path: '(document)', message: `must be a mapping, not ${describe(doc)}` }], source);
  const { doc: merged, flagPaths } = mergeFlags(doc, opts.flags ?? {});
  try {
    const loaded = validateConfig(merged, source);
    // A note on a value that came from a flag names the flag too.
    loaded.warnings = loaded.warnings.map((w) => {
      const m = /^([^:\s]+): /.exec(w);
      const flag = m && flagPaths.get(m[1]!.replace(/\[\d+\]$/, ''));
      return flag ? `${flag}${w.slice(m[1]!.length)}` : w;
    });
    return loaded;
  } catch (e) {
    if (!(e instanceof ConfigError) || flagPaths.size === 0) throw e;
    // Name the flag, not the document path, for values that came from flags.
    const issues = e.issues.map((i) => {
      const base = i.path.replace(/\[\d+\]$/, '');
      const flag = flagPaths.get(base);
      return flag ? { path: flag, message: i.message } : i;
    });
    throw new ConfigError(issues, source);
  }
}

/** The effective config as a KubeProxyConfiguration-style YAML document (--write-config-to). */
export function renderConfig(cfg: IpvsyncConfig): string {
  const doc = {
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    mode: 'ipvs',
    clusterCIDR: cfg.clusterCIDRs.join(','),
    nodePortAddresses: cfg.nodePortAddresses,
    hostnameOverride: cfg.hostnameOverride,
    metricsBindAddress: formatHostPort(cfg.metricsBindAddress, '127.0.0.1'),
    healthzBindAddress: formatHostPort(cfg.healthzBindAddress, '0.0.0.0'),
    masqueradeAll: cfg.masqueradeAll,
    clientConnection: { kubeconfig: cfg.kubeconfig },
    ...(cfg.master ? { master: cfg.master } : {}),
    ipvs: {
      scheduler: cfg.ipvs.scheduler,
      syncPeriod: formatDuration(cfg.ipvs.syncPeriodMs),
      minSyncPeriod: formatDuration(cfg.ipvs.minSyncPeriodMs),
      tcpTimeout: formatDuration(cfg.ipvs.tcpTimeoutMs),
      tcpFinTimeout: formatDuration(cfg.ipvs.tcpFinTimeoutMs),
      udpTimeout: formatDuration(cfg.ipvs.udpTimeoutMs),
      strictARP: cfg.ipvs.strictARP,
      ...(cfg.ipvs.runEstimation !== undefined ? { runEstimation: cfg.ipvs.runEstimation } : {}),
      excludeCIDRs: cfg.ipvs.excludeCIDRs,
    },
    bindMode: cfg.bindMode,
    serviceCIDRs: cfg.serviceCIDRs,
    vipLink: cfg.vipLink,
    drainTimeout: formatDuration(cfg.drainTimeoutMs),
    proxyName: cfg.proxyName,
    syncThread: cfg.syncThread,
    logLevel: cfg.logLevel,
  };
  return yaml().stringify(doc);
}

/** --write-config-to FILE: writes the effective config (the caller exits afterwards). */
export async function writeConfigTo(file: string, cfg: IpvsyncConfig): Promise<void> {
  await writeFile(file, renderConfig(cfg), { mode: 0o644 });
}

/** This node's name: hostnameOverride, else the hostname lowercased (kube-proxy's GetHostname). */
export function nodeName(cfg: IpvsyncConfig, host: () => string = hostname): string {
  return cfg.hostnameOverride || host().trim().toLowerCase();
}

/** The part of the config translate() reads. */
export function toProxyConfig(cfg: IpvsyncConfig): ProxyConfig {
  return {
    scheduler: cfg.ipvs.scheduler || 'rr',
    nodePortAddresses: cfg.nodePortAddresses,
    clusterCIDRs: cfg.clusterCIDRs,
    masqueradeAll: cfg.masqueradeAll,
    ...(cfg.proxyName ? { proxyName: cfg.proxyName } : {}),
  };
}
