// The daemon's configuration: a YAML file whose fields are named like kube-proxy's
// KubeProxyConfiguration (the subset that means something for an IPVS proxy, plus ipvsync's
// own), command-line flags named like kube-proxy's that override it, kube-proxy's defaults, and
// validation that names the field and says what is wrong — all problems at once.
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import { hostname } from 'node:os';
import { BadInputError } from '../errors.js';
import { yaml } from '../yaml.js';
import { cidrText, parseCidr, validIp } from '../net/address.js';
import { isKnownScheduler } from '../kube/scheduler.js';
import type { Scheduler } from '../kernel/ipvs.js';
import { LABEL_TOPOLOGY_ZONE, type ProxyConfig } from '../kube/types.js';
import type { ProxierOptions } from '../proxy/proxier.js';

export type BindMode = 'address' | 'route';
/** kube-proxy's mode: the data plane. */
export type ProxyMode = 'ipvs' | 'nftables';
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type IpvsStatsMetrics = 'none' | 'services' | 'all';

export interface HostPort {
  host: string;
  port: number;
}

/** The effective, validated configuration. Durations are milliseconds. */
export interface IpvsyncConfig {
  /** The data plane ('' in a file: ipvs). */
  mode: ProxyMode;
  /** Pod CIDRs (one per family). Traffic to VIPs from outside them is masqueraded. */
  clusterCIDRs: string[];
  /** NodePorts only on node addresses inside these CIDRs; empty: every local address. */
  nodePortAddresses: string[];
  /** The node's addresses for NodePorts, canonical; empty: every local address but the VIP link's. */
  nodeIPs: string[];
  /** This node's name; '' means the hostname. */
  hostnameOverride: string;
  /** Labels of this node, over its Node object's (the zone of topology hints). */
  nodeLabels: Record<string, string>;
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
    scheduler: Scheduler;
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
     * and destination every 2 s in softirq, holding a CPU whoever runs there for a time that
     * grows with the table (docs/performance.md, "IPVS rate estimation").
     */
    runEstimation?: boolean;
    /** IPVS services in these ranges are never touched (kube-proxy's excludeCIDRs). */
    excludeCIDRs: string[];
    /** ipvsync's traffic counters on /metrics, from one IPVS dump per scrape: none, per
     *  virtual server, or per virtual and real server. A scrape's cost grows with the table
     *  (per real server at 10k services x 10: ~850k lines), so they are asked for. */
    statsMetrics: IpvsStatsMetrics;
  };
  // ---- ipvsync's own ----
  /** 'address': every VIP as an address on vipLink (kube-proxy). 'route': local routes covering
   *  serviceCIDRs (large clusters). */
  bindMode: BindMode;
  /** The service CIDRs, when the API serves no ServiceCIDR objects (those win): the nftables
   *  data plane drops new connections to an address in them that no Service holds; required
   *  by bindMode 'route' (its local routes). */
  serviceCIDRs: string[];
  vipLink: string;
  /** A removed TCP real server is deleted after this even with connections left. */
  drainTimeoutMs: number;
  /** Serve Services labelled service.kubernetes.io/service-proxy-name=<proxyName>. */
  proxyName: string;
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

// ---- the fields: one table ----

type Raw = Record<string, unknown>;

function isObject(v: unknown): v is Raw {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describe(v: unknown): string {
  if (Array.isArray(v)) return 'a list';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'a mapping';
  return `${typeof v} ${JSON.stringify(v)}`;
}

/** The value at a dotted path ("ipvs.syncPeriod"); undefined where a step is not a mapping. */
function getAt(obj: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((o, k) => (isObject(o) ? o[k] : undefined), obj);
}

/** Sets a dotted path, making (or replacing by) mappings on the way. */
function setAt(obj: object, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = obj as Raw;
  for (const p of parts.slice(0, -1)) node = (isObject(node[p]) ? node[p] : (node[p] = {})) as Raw;
  node[parts.at(-1)!] = value;
}

class Checker {
  readonly issues: ConfigIssue[] = [];
  readonly warnings: string[] = [];

  bad(path: string, message: string): undefined {
    this.issues.push({ path, message });
    return undefined;
  }
}

/** How a field is read from the document or a flag (never given null or undefined), and written back. */
export interface Kind<T> {
  read(c: Checker, v: unknown, path: string): T | undefined;
  render(v: T): unknown;
  /** The flag's argument; none: a switch. */
  arg?: string;
  /** The flag repeats and takes comma-separated lists. */
  list?: true;
}

/** A string; `check` (given the value as normalised and as written) says what is wrong with it. */
function text<T extends string = string>(check?: (v: string, written: string) => string | undefined, normalise = (s: string) => s): Kind<T> {
  return {
    arg: '<value>',
    render: (v) => v,
    read(c, v, path) {
      if (typeof v !== 'string') return c.bad(path, `must be a string, not ${describe(v)}`);
      const n = normalise(v);
      const problem = check?.(n, v);
      return problem ? c.bad(path, problem) : (n as T);
    },
  };
}

const bool: Kind<boolean> = {
  render: (v) => v,
  read(c, v, path) {
    if (typeof v === 'boolean') return v;
    if (v === 'true' || v === 'false') return v === 'true';
    return c.bad(path, `must be true or false, not ${describe(v)}`);
  },
};

/** A Go duration, in milliseconds. */
function duration(opts: { wholeSeconds?: boolean; positive?: boolean } = {}): Kind<number> {
  return {
    arg: '<value>',
    render: formatDuration,
    read(c, v, path) {
      if (typeof v !== 'string' && v !== 0) return c.bad(path, `must be a duration such as "30s" or "1m", not ${describe(v)}`);
      if (String(v).trim().startsWith('-')) return c.bad(path, `"${v}" is negative`);
      const ms = parseDuration(String(v));
      if (ms === undefined) return c.bad(path, `"${v}" is not a duration (examples: "30s", "1m", "1h30m", "250ms")`);
      if (opts.positive && ms <= 0) return c.bad(path, 'must be greater than 0');
      if (opts.wholeSeconds && ms % 1000 !== 0) return c.bad(path, `"${v}" is not a whole number of seconds (IPVS timeouts are in seconds)`);
      return ms;
    },
  };
}

/** A list of CIDRs given as a YAML list or one comma-separated string, each through parseConfigCidr. */
function cidrs(check?: (list: string[]) => string | undefined): Kind<string[]> {
  return {
    arg: '<cidrs>',
    list: true,
    render: (v) => v,
    read(c, v, path) {
      const list = items(v);
      if (!list) return c.bad(path, `must be a list of CIDRs or a comma-separated string, not ${describe(v)}`);
      const out: string[] = [];
      list.forEach((it, i) => {
        const p = Array.isArray(v) ? `${path}[${i}]` : path;
        if (typeof it !== 'string') return c.bad(p, `must be a CIDR string, not ${describe(it)}`);
        const r = parseConfigCidr(it);
        if ('problem' in r) return c.bad(p, r.problem);
        if (r.note) c.warnings.push(`${p}: ${r.note}`);
        out.push(r.cidr);
      });
      const problem = out.length === list.length ? check?.(out) : undefined;
      return problem ? c.bad(path, problem) : out;
    },
  };
}

/** Items of a YAML list or of one comma-separated string. */
function items(v: unknown): unknown[] | undefined {
  if (typeof v === 'string') return v.split(',').map((s) => s.trim()).filter((s) => s !== '');
  return Array.isArray(v) ? v : undefined;
}

/** A list of IP addresses given as a YAML list or one comma-separated string, each canonical. */
const ips: Kind<string[]> = {
  arg: '<ips>',
  list: true,
  render: (v) => v,
  read(c, v, path) {
    const list = items(v);
    if (!list) return c.bad(path, `must be a list of IP addresses or a comma-separated string, not ${describe(v)}`);
    const out: string[] = [];
    list.forEach((it, i) => {
      const p = Array.isArray(v) ? `${path}[${i}]` : path;
      if (typeof it !== 'string') return c.bad(p, `must be an IP address string, not ${describe(it)}`);
      const ip = validIp(it);
      if (ip === undefined) return c.bad(p, `"${it}" is not an IP address`);
      out.push(ip);
    });
    return out.length === list.length ? out : undefined;
  },
};

const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** What is wrong with a label key or value, as the API server checks them (a key: an optional
 *  DNS-subdomain prefix and "/", then a name of up to 63 characters; a value: such a name or ''). */
function labelProblem(key: string, value: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const [prefix, name] = slash < 0 ? [undefined, key] : [key.slice(0, slash), key.slice(slash + 1)];
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) return `"${key}": the prefix is not a DNS subdomain`;
  if (name.length > 63 || !LABEL_NAME.test(name)) return `"${key}" is not a label key`;
  if (value !== '' && (value.length > 63 || !LABEL_NAME.test(value))) return `"${value}" is not a label value (of "${key}")`;
  return undefined;
}

/** Labels: a mapping in the file; KEY=VALUE items (comma-separated, repeatable) as flags. */
const labels: Kind<Record<string, string>> = {
  arg: '<key=value>',
  list: true,
  render: (v) => v,
  read(c, v, path) {
    const pairs: Array<[string, unknown]> = [];
    if (isObject(v)) pairs.push(...Object.entries(v));
    else {
      const list = items(v);
      if (!list) return c.bad(path, `must be a mapping of labels or KEY=VALUE items, not ${describe(v)}`);
      for (const it of list) {
        const eq = typeof it === 'string' ? it.indexOf('=') : -1;
        if (eq < 0) return c.bad(path, `${describe(it)} is not KEY=VALUE`);
        pairs.push([(it as string).slice(0, eq).trim(), (it as string).slice(eq + 1).trim()]);
      }
    }
    const out: Record<string, string> = {};
    for (const [k, val] of pairs) {
      if (typeof val !== 'string') return c.bad(`${path}.${k}`, `must be a string, not ${describe(val)}`);
      const problem = labelProblem(k, val);
      if (problem) return c.bad(path, problem);
      out[k] = val;
    }
    return out;
  },
};

/** "host:port" with kube-proxy's default port; port 0 is null (the server off), written back on `offHost`. */
function hostPort(defaultPort: number, offHost: string): Kind<HostPort | null> {
  return {
    arg: '<value>',
    render: (hp) => (!hp ? `${offHost}:0` : isIP(hp.host) === 6 ? `[${hp.host}]:${hp.port}` : `${hp.host}:${hp.port}`),
    read(c, v, path) {
      if (v === '') return undefined;
      if (typeof v !== 'string') return c.bad(path, `must be "host:port", not ${describe(v)}`);
      const r = parseHostPort(v, defaultPort);
      if (typeof r === 'string') return c.bad(path, r);
      return r.port === 0 ? null : r;
    },
  };
}

/** One field: where the file has it, its kube-proxy default, its flag, how it is read and written. */
export interface FlagSpec<T = any> {
  /** Where the file has it ("ipvs.syncPeriod"), and where its flag puts it; default the key. */
  path?: string;
  /** Other places a kube-proxy file may have it, read when `path` is absent. */
  also?: string[];
  kind: Kind<T>;
  default: T;
  /** kube-proxy's flag name, without dashes (ipvsync's own where kube-proxy has none). */
  flag: string;
  help: string;
  /** A bool flag that defaults to true or to the kernel's value: `--no-<flag>` sets it false, with this help. */
  negatedHelp?: string;
  /** Another spelling of the flag, accepted and not listed (what `sync` called it). */
  alias?: string;
  /** `ipvsync sync` has the flag too (the one-shot sync uses the field). */
  sync?: true;
  /** Not written by --write-config-to while it has its default (fields kube-proxy does not write). */
  omitDefault?: true;
}

type IpvsKey = keyof IpvsyncConfig['ipvs'];
type ConfigKey = Exclude<keyof IpvsyncConfig, 'ipvs'> | `ipvs.${IpvsKey}`;
type ValueAt<K> = K extends `ipvs.${infer S extends IpvsKey}` ? IpvsyncConfig['ipvs'][S] : K extends keyof IpvsyncConfig ? IpvsyncConfig[K] : never;

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const nodePortCidrs = cidrs();
const ipFamily = (cidr: string) => isIP(cidr.split('/')[0]!);

/**
 * Every field of IpvsyncConfig (the type checks that each is here, with a kind and a default of
 * its type), in the order --write-config-to writes them and validation reports them. kube-proxy's
 * defaults for IPVS mode (pkg/proxy/apis/config/v1alpha1/defaults.go).
 */
const FIELDS: { [K in ConfigKey]: FlagSpec<ValueAt<K>> } = {
  mode: {
    kind: text<ProxyMode>((m, w) => (m !== 'ipvs' && m !== 'nftables' ? `must be "ipvs" or "nftables" (or empty: ipvs), not "${w}"` : undefined), (s) => s.trim() || 'ipvs'),
    default: 'ipvs', flag: 'proxy-mode', help: 'the data plane: ipvs (default), or nftables (the kernel needs no IPVS)', sync: true,
  },
  clusterCIDRs: {
    path: 'clusterCIDR',
    kind: { ...cidrs((l) => (l.length > 2 || (l.length === 2 && ipFamily(l[0]!) === ipFamily(l[1]!)) ? 'at most one CIDR per IP family (one, or one IPv4 and one IPv6 for dual-stack)' : undefined)), render: (v) => v.join(',') },
    default: [], flag: 'cluster-cidr', help: 'pod CIDR(s), comma separated; traffic to VIPs from outside is masqueraded', sync: true,
  },
  nodePortAddresses: {
    kind: { ...nodePortCidrs, read: (c, v, p) => (Array.isArray(v) && v.includes('primary') ? c.bad(p, '"primary" is not supported: list CIDRs') : nodePortCidrs.read(c, v, p)) },
    default: [], flag: 'nodeport-addresses', help: 'NodePorts only on node addresses in these CIDRs (comma separated)', sync: true,
  },
  // ipvsync's: kube-proxy takes its node IPs from the Node object
  nodeIPs: {
    kind: ips, default: [], flag: 'node-ip', help: 'node addresses for NodePorts (repeatable or comma-separated; default every local address)', sync: true, omitDefault: true,
  },
  hostnameOverride: {
    // kube-proxy trims and lowercases it
    kind: text((h, written) => (h !== '' && (h.length > 253 || !DNS_SUBDOMAIN.test(h)) ? `"${written}" is not a valid node name (a DNS subdomain)` : undefined), (s) => s.trim().toLowerCase()),
    default: '', flag: 'hostname-override', alias: 'node-name', help: "this node's name, if not the hostname", sync: true,
  },
  // ipvsync's: kube-proxy reads them from the Node object (so does ipvsync; these win)
  nodeLabels: {
    kind: labels, default: {}, flag: 'node-labels', help: 'labels of this node over its Node object\'s (KEY=VALUE, repeatable or comma-separated; the proxy reads topology.kubernetes.io/zone)', sync: true, omitDefault: true,
  },
  metricsBindAddress: { kind: hostPort(DEFAULT_METRICS_PORT, '127.0.0.1'), default: { host: '127.0.0.1', port: DEFAULT_METRICS_PORT }, flag: 'metrics-bind-address', help: 'metrics server ip:port (port 0: off; default 127.0.0.1:10249)' },
  healthzBindAddress: { kind: hostPort(DEFAULT_HEALTHZ_PORT, '0.0.0.0'), default: { host: '0.0.0.0', port: DEFAULT_HEALTHZ_PORT }, flag: 'healthz-bind-address', help: 'health server ip:port (port 0: off; default 0.0.0.0:10256)' },
  masqueradeAll: { also: ['iptables.masqueradeAll'], kind: bool, default: false, flag: 'masquerade-all', help: 'masquerade all traffic to service VIPs', sync: true },
  kubeconfig: { path: 'clientConnection.kubeconfig', kind: text(), default: '', flag: 'kubeconfig', help: 'kubeconfig file (default: in-cluster config)' },
  // ipvsync's, for kube-proxy's --master flag
  master: { kind: text(), default: '', flag: 'master', help: 'API server URL (overrides the kubeconfig)', omitDefault: true },
  'ipvs.scheduler': {
    kind: text((s) => (s !== '' && !isKnownScheduler(s) ? `unknown IPVS scheduler "${s}"` : undefined)),
    default: '', flag: 'ipvs-scheduler', alias: 'scheduler', help: 'default IPVS scheduler (default rr)', sync: true,
  },
  // newer kube-proxy has syncPeriod and minSyncPeriod at the top level; ipvs.* wins when both are set
  'ipvs.syncPeriodMs': { path: 'ipvs.syncPeriod', also: ['syncPeriod'], kind: duration({ positive: true }), default: 30_000, flag: 'ipvs-sync-period', help: 'full resync at least this often (default 30s)' },
  'ipvs.minSyncPeriodMs': { path: 'ipvs.minSyncPeriod', also: ['minSyncPeriod'], kind: duration(), default: 0, flag: 'ipvs-min-sync-period', help: 'no two syncs closer than this (default 0s)' },
  'ipvs.tcpTimeoutMs': { path: 'ipvs.tcpTimeout', kind: duration({ wholeSeconds: true }), default: 0, flag: 'ipvs-tcp-timeout', help: 'IPVS TCP idle timeout (0: kernel value)' },
  'ipvs.tcpFinTimeoutMs': { path: 'ipvs.tcpFinTimeout', kind: duration({ wholeSeconds: true }), default: 0, flag: 'ipvs-tcpfin-timeout', help: 'IPVS TCP FIN_WAIT timeout (0: kernel value)' },
  'ipvs.udpTimeoutMs': { path: 'ipvs.udpTimeout', kind: duration({ wholeSeconds: true }), default: 0, flag: 'ipvs-udp-timeout', help: 'IPVS UDP timeout (0: kernel value)' },
  'ipvs.strictARP': { kind: bool, default: false, flag: 'ipvs-strict-arp', help: 'arp_ignore=1, arp_announce=2' },
  'ipvs.runEstimation': {
    kind: bool, default: undefined, flag: 'ipvs-run-estimation', help: "net.ipv4.vs.run_estimation=1 (default: the kernel's value is left as it is)", omitDefault: true,
    negatedHelp: 'net.ipv4.vs.run_estimation=0: no IPVS rate estimation (before Linux 6.2 its timer walks every service and destination every 2 s in softirq)',
  },
  'ipvs.excludeCIDRs': { kind: cidrs(), default: [], flag: 'ipvs-exclude-cidrs', help: 'never touch IPVS services in these CIDRs' },
  'ipvs.statsMetrics': {
    kind: text<IpvsStatsMetrics>((m) => (m !== 'none' && m !== 'services' && m !== 'all' ? `must be "none", "services" or "all", not "${m}"` : undefined)),
    default: 'none', flag: 'ipvs-stats-metrics', help: "IPVS traffic counters on /metrics: none (default), services (per virtual server) or all (and per real server); each scrape dumps the table",
  },
  bindMode: {
    kind: text<BindMode>((m) => (m !== 'address' && m !== 'route' ? `must be "address" or "route", not "${m}"` : undefined)),
    default: 'address', flag: 'bind-mode', help: 'address (VIPs on the link) or route (local routes over serviceCIDRs)', sync: true,
  },
  serviceCIDRs: { kind: cidrs(), default: [], flag: 'service-cidrs', help: 'service CIDRs, when the API serves no ServiceCIDR objects: traffic to an address in them no Service holds is dropped (nftables mode); required by --bind-mode route', sync: true },
  vipLink: {
    kind: text((l) => (!/^[^\s/:]{1,15}$/.test(l) || l === '.' || l === '..' ? `"${l}" is not a link name (1-15 characters, no spaces, "/" or ":")` : undefined)),
    default: 'kube-ipvs0', flag: 'vip-link', help: 'dummy link holding the VIPs (default kube-ipvs0)', sync: true,
  },
  drainTimeoutMs: { path: 'drainTimeout', kind: duration(), default: 15 * 60_000, flag: 'drain-timeout', help: 'delete a draining TCP real server after this (default 15m)' },
  proxyName: {
    kind: text((n) => (n !== '' && (n.length > 63 || !/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(n)) ? `"${n}" is not a valid label value` : undefined)),
    default: '', flag: 'proxy-name', help: 'also serve Services labelled service.kubernetes.io/service-proxy-name=NAME',
  },
  logLevel: {
    kind: text<LogLevel>((l) => (!['debug', 'info', 'warn', 'error'].includes(l) ? `must be one of debug, info, warn, error, not "${l}"` : undefined)),
    default: 'info', flag: 'log-level', help: 'debug, info, warn or error (default info)',
  },
};

/** The fields, each with `key`, where IpvsyncConfig has it, and `path`, where the file has it. */
export const CONFIG_FLAGS = Object.entries(FIELDS).map(([key, f]) => ({ key, ...f, path: f.path ?? key })) as ReadonlyArray<FlagSpec & { key: ConfigKey; path: string }>;

/** The table's defaults: kube-proxy's for IPVS mode. */
export function defaultConfig(): IpvsyncConfig {
  const cfg = { ipvs: {} } as IpvsyncConfig;
  for (const f of CONFIG_FLAGS) if (f.default !== undefined) setAt(cfg, f.key, structuredClone(f.default));
  return cfg;
}

/** The document's own fields, checked before the table's. */
const API_VERSIONS = ['kubeproxy.config.k8s.io/v1alpha1', 'ipvsync.io/v1alpha1'];
const META: Record<string, Kind<string>> = {
  apiVersion: text((v) => (API_VERSIONS.includes(v) ? undefined : `must be one of ${API_VERSIONS.join(', ')}, not "${v}"`)),
  kind: text((v) => (v === 'KubeProxyConfiguration' ? undefined : `must be KubeProxyConfiguration, not "${v}"`)),
};

/** kube-proxy fields that are accepted and ignored (they configure other modes or things
 *  ipvsync does not do), by mapping; reported as warnings so a kube-proxy config file loads unchanged. */
const IGNORED: Record<string, string[]> = {
  '': ['bindAddress', 'bindAddressHardFail', 'configSyncPeriod', 'conntrack', 'detectLocal', 'detectLocalMode', 'enableProfiling', 'featureGates', 'logging', 'nftables', 'oomScoreAdj', 'portRange', 'showHiddenMetricsForVersion', 'udpIdleTimeout', 'winkernel'],
  clientConnection: ['acceptContentTypes', 'contentType', 'qps', 'burst'],
  iptables: ['masqueradeBit', 'localhostNodePorts', 'syncPeriod', 'minSyncPeriod'],
};

/** The known fields of each mapping ('' the document), from the table. */
const KNOWN = new Map<string, Set<string>>([['', new Set(Object.keys(META))]]);
for (const p of CONFIG_FLAGS.flatMap((f) => [f.path, ...(f.also ?? [])])) {
  const [section, key] = (p.includes('.') ? p.split('.') : ['', p]) as [string, string];
  if (section) KNOWN.get('')!.add(section);
  KNOWN.set(section, (KNOWN.get(section) ?? new Set()).add(key));
}

export interface LoadedConfig {
  config: IpvsyncConfig;
  /** Accepted-but-ignored kube-proxy fields and similar notes. */
  warnings: string[];
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

/** Validates a parsed config document (already merged with flags) onto the defaults. */
export function validateConfig(raw: unknown, source?: string): LoadedConfig {
  const c = new Checker();
  const cfg = defaultConfig();
  if (raw === undefined || raw === null) raw = {};
  if (!isObject(raw)) throw new ConfigError([{ path: '(document)', message: `must be a mapping, not ${describe(raw)}` }], source);
  for (const [section, known] of KNOWN) {
    const obj = section ? raw[section] : raw;
    if (obj === undefined || obj === null) continue;
    if (!isObject(obj)) {
      c.bad(section, `must be a mapping, not ${describe(obj)}`);
      continue;
    }
    const prefix = section ? `${section}.` : '';
    for (const k of Object.keys(obj)) {
      if (known.has(k)) continue;
      if (IGNORED[section]?.includes(k)) c.warnings.push(`${prefix}${k}: kube-proxy field ignored by ipvsync`);
      else c.bad(`${prefix}${k}`, 'unknown field');
    }
  }
  for (const [path, kind] of Object.entries(META)) if (raw[path] !== undefined && raw[path] !== null) kind.read(c, raw[path], path);

  for (const f of CONFIG_FLAGS) {
    let value: unknown;
    for (const path of [f.path, ...(f.also ?? [])]) {
      const v = getAt(raw, path);
      if (v !== undefined && v !== null) value ??= f.kind.read(c, v, path);
    }
    if (value !== undefined) setAt(cfg, f.key, value);
  }

  if (cfg.ipvs.minSyncPeriodMs > cfg.ipvs.syncPeriodMs)
    c.bad('ipvs.minSyncPeriod', `must not exceed ipvs.syncPeriod (${formatDuration(cfg.ipvs.minSyncPeriodMs)} > ${formatDuration(cfg.ipvs.syncPeriodMs)})`);
  if (cfg.bindMode === 'route' && cfg.serviceCIDRs.length === 0 && !c.issues.some((i) => i.path.startsWith('serviceCIDRs')))
    c.bad('serviceCIDRs', 'required with bindMode "route" (the ranges the local routes cover)');

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

const kebab = (k: string) => k.replace(/[A-Z]/g, (ch) => `-${ch.toLowerCase()}`);
const BY_FLAG = new Map(CONFIG_FLAGS.flatMap((f) => [[f.flag, f] as const, ...(f.alias ? [[f.alias, f] as const] : [])]));

/**
 * Flags onto the file's document (pure: returns a new document). `flags` is keyed by flag name
 * ("ipvs-sync-period") or its camelCase form as commander gives it ("ipvsSyncPeriod"); undefined
 * values are flags not given. Unknown keys are ignored (other commands' options). A flag's
 * problem is reported under its own name.
 */
export function mergeFlags(doc: unknown, flags: Record<string, unknown>): { doc: Raw; flagPaths: Map<string, string> } {
  const out: Raw = isObject(doc) ? structuredClone(doc) : {};
  const flagPaths = new Map<string, string>();
  for (const [key, value] of Object.entries(flags)) {
    const flag = BY_FLAG.has(key) ? key : kebab(key);
    const spec = BY_FLAG.get(flag);
    if (value === undefined || !spec) continue;
    setAt(out, spec.path, value);
    flagPaths.set(spec.path, `--${flag}`);
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
  const source = opts.file ?? (opts.text !== undefined ? 'config' : undefined);
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
  // A problem or a note on a value that came from a flag names the flag; with no file (`sync`
  // has none) every field is its flag's.
  const named = source ? flagPaths : new Map([...CONFIG_FLAGS.map((f) => [f.path, `--${f.flag}`] as const), ...flagPaths]);
  const flagOf = (path: string) => named.get(path.replace(/\[\d+\]$/, ''));
  try {
    const loaded = validateConfig(merged, source);
    loaded.warnings = loaded.warnings.map((w) => {
      const m = /^([^:\s]+): /.exec(w);
      const flag = m && flagOf(m[1]!);
      return flag ? `${flag}${w.slice(m[1]!.length)}` : w;
    });
    return loaded;
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    throw new ConfigError(e.issues.map((i) => ({ path: flagOf(i.path) ?? i.path, message: i.message })), source);
  }
}

/** The effective config as a KubeProxyConfiguration-style YAML document (--write-config-to). */
export function renderConfig(cfg: IpvsyncConfig): string {
  const doc: Raw = { apiVersion: 'kubeproxy.config.k8s.io/v1alpha1', kind: 'KubeProxyConfiguration' };
  for (const f of CONFIG_FLAGS) {
    const v = getAt(cfg, f.key);
    if (!(f.omitDefault && isDeepStrictEqual(v, f.default))) setAt(doc, f.path, f.kind.render(v));
  }
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
    serviceCIDRs: cfg.serviceCIDRs,
    ...(cfg.proxyName ? { proxyName: cfg.proxyName } : {}),
  };
}

/** The proxier's options: `proxy` and `sync` both build them here, from the config and the
 *  options that are not configuration (the node's addresses, the glue, kube-proxy's ipsets). */
export function toProxierOptions(cfg: IpvsyncConfig, o: { addresses: string[]; glue: boolean; kubeIpsets: boolean }): ProxierOptions {
  return {
    mode: cfg.mode,
    node: { name: nodeName(cfg), addresses: o.addresses, ...(cfg.nodeLabels[LABEL_TOPOLOGY_ZONE] ? { zone: cfg.nodeLabels[LABEL_TOPOLOGY_ZONE] } : {}) },
    config: toProxyConfig(cfg),
    vipLink: cfg.vipLink,
    glue: o.glue,
    kubeIpsets: o.kubeIpsets,
    excludeCidrs: cfg.ipvs.excludeCIDRs,
    drainTimeoutMs: cfg.drainTimeoutMs,
    bindMode: cfg.bindMode,
  };
}
