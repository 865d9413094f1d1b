// The daemon's configuration: a YAML file of up to two documents — kube-proxy's
// KubeProxyConfiguration (v1alpha1: the fields that mean something to ipvsync, each mode reading
// its own section as kube-proxy does) and ipvsync's IpvsyncConfiguration (its own fields) —,
// command-line flags named like kube-proxy's that override it, kube-proxy's defaults, and
// validation that names the field and says what is wrong — all problems at once.
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import { hostname } from 'node:os';
import { BadInputError } from '../errors.js';
import { parseYamlDocuments, renderYaml, YamlSyntaxError } from '../yaml.js';
import { cidrText, parseCidr, validIp } from '../net/address.js';
import { isKnownScheduler } from '../proxy/ipvs/scheduler.js';
import type { Scheduler } from '../kernel/ipvs.js';
import { isMapping } from '../kube/fields.js';
import { LABEL_TOPOLOGY_ZONE, type ProxyConfig } from '../kube/types.js';
import type { ProxierOptions } from '../proxy/proxier.js';

export type BindMode = 'address' | 'route';
/** kube-proxy's mode: the data plane. */
export type ProxyMode = 'ipvs' | 'nftables';
/** How log lines are written: klog's text (kube-proxy's) or one JSON object per line. */
export type LogFormat = 'text' | 'json';
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
  /** kube-proxy's clientConnection.kubeconfig ('' : in-cluster). */
  kubeconfig: string;
  /** API server URL overriding the kubeconfig (kube-proxy's --master). */
  master: string;
  /** IPVS mode's masquerade-all: kube-proxy reads it from the iptables section in IPVS mode. */
  iptables: { masqueradeAll: boolean };
  /** nftables mode's periods and masquerade-all (kube-proxy's nftables section). */
  nftables: { syncPeriodMs: number; minSyncPeriodMs: number; masqueradeAll: boolean };
  /** kube-proxy's logging section: verbosity 4 and more logs debug lines. */
  logging: { verbosity: number; format: LogFormat };
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
  /** The informers' watches: the server-side timeout asked for (whole seconds; 0: client-go's
   *  random 5–10 min), and the silence after which one is taken for hung and resumed (0: never). */
  apiWatch: { timeoutMs: number; silenceLimitMs: number };
}

/** What the mode reads from its own section (kube-proxy's conversion: IPVS mode the ipvs
 *  section's periods and iptables.masqueradeAll, nftables mode the nftables section's). */
export function modeSettings(cfg: IpvsyncConfig): { syncPeriodMs: number; minSyncPeriodMs: number; masqueradeAll: boolean } {
  if (cfg.mode === 'nftables') return { ...cfg.nftables };
  return { syncPeriodMs: cfg.ipvs.syncPeriodMs, minSyncPeriodMs: cfg.ipvs.minSyncPeriodMs, masqueradeAll: cfg.iptables.masqueradeAll };
}

/** The logger's level for kube-proxy's verbosity: its debug lines (V(4)) from 4 on. */
export function logLevel(cfg: IpvsyncConfig): 'debug' | 'info' {
  return cfg.logging.verbosity >= 4 ? 'debug' : 'info';
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

function describe(v: unknown): string {
  if (Array.isArray(v)) return 'a list';
  if (v === null) return 'null';
  if (typeof v === 'object') return 'a mapping';
  return `${typeof v} ${JSON.stringify(v)}`;
}

/** The value at a dotted path ("ipvs.syncPeriod"); undefined where a step is not a mapping. */
function getAt(obj: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((o, k) => (isMapping(o) ? o[k] : undefined), obj);
}

/** Sets a dotted path, making (or replacing by) mappings on the way. */
function setAt(obj: object, path: string, value: unknown): void {
  const parts = path.split('.');
  let node = obj as Raw;
  for (const p of parts.slice(0, -1)) node = (isMapping(node[p]) ? node[p] : (node[p] = {})) as Raw;
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
function duration(opts: { wholeSeconds?: string } = {}): Kind<number> {
  return {
    arg: '<value>',
    render: formatDuration,
    read(c, v, path) {
      if (typeof v !== 'string' && v !== 0) return c.bad(path, `must be a duration such as "30s" or "1m", not ${describe(v)}`);
      if (String(v).trim().startsWith('-')) return c.bad(path, `"${v}" is negative`);
      const ms = parseDuration(String(v));
      if (ms === undefined) return c.bad(path, `"${v}" is not a duration (examples: "30s", "1m", "1h30m", "250ms")`);
      if (opts.wholeSeconds && ms % 1000 !== 0) return c.bad(path, `"${v}" is not a whole number of seconds (${opts.wholeSeconds})`);
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
    if (isMapping(v)) pairs.push(...Object.entries(v));
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
  kind: Kind<T>;
  default: T;
  /** kube-proxy's flag name, without dashes (ipvsync's own where kube-proxy has none). Two
   *  fields of different modes may share one (--masquerade-all): it sets the running mode's. */
  flag: string;
  /** A one-letter spelling of the flag (-v). */
  short?: string;
  help: string;
  /** A bool flag that defaults to true or to the kernel's value: `--no-<flag>` sets it false, with this help. */
  negatedHelp?: string;
  /** Another spelling of the flag, accepted and not listed (what `sync` called it). */
  alias?: string;
  /** `ipvsync sync` has the flag too (the one-shot sync uses the field). */
  sync?: true;
  /** Not written by --write-config-to while it has its default (fields kube-proxy does not write). */
  omitDefault?: true;
  /** Read only in this mode: its flag given in the other mode is ignored, with a warning. */
  mode?: ProxyMode;
  /** ipvsync's own field, which kube-proxy does not know: in the IpvsyncConfiguration document. */
  own?: true;
}

type Section = 'ipvs' | 'nftables' | 'iptables' | 'logging' | 'apiWatch';
type ConfigKey = Exclude<keyof IpvsyncConfig, Section> | { [S in Section]: `${S}.${keyof IpvsyncConfig[S] & string}` }[Section];
type ValueAt<K> = K extends `${infer S extends Section}.${infer F}` ? (F extends keyof IpvsyncConfig[S] ? IpvsyncConfig[S][F] : never) : K extends keyof IpvsyncConfig ? IpvsyncConfig[K] : never;

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const nodePortCidrs = cidrs();
const ipFamily = (cidr: string) => isIP(cidr.split('/')[0]!);

/** kube-proxy's --v: a whole number from 0. */
const verbosity: Kind<number> = {
  arg: '<level>',
  render: (v) => v,
  read(c, v, path) {
    const n = typeof v === 'string' && /^\d+$/.test(v.trim()) ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0) return c.bad(path, `must be a whole number from 0 (kube-proxy's verbosity), not ${describe(v)}`);
    return n;
  },
};

/**
 * Every field of IpvsyncConfig (the type checks that each is here, with a kind and a default of
 * its type), in the order --write-config-to writes them and validation reports them. kube-proxy's
 * defaults (pkg/proxy/apis/config/v1alpha1/defaults.go).
 */
const FIELDS: { [K in ConfigKey]: FlagSpec<ValueAt<K>> } = {
  mode: {
    kind: text<ProxyMode>((m, w) => (m !== 'ipvs' && m !== 'nftables' ? `must be "ipvs" or "nftables" (or empty: ipvs), not "${w}"` : undefined), (s) => s.trim() || 'ipvs'),
    default: 'ipvs', flag: 'proxy-mode', help: 'the data plane: ipvs (default), or nftables (the kernel needs no IPVS)', sync: true,
  },
  clusterCIDRs: {
    path: 'clusterCIDR',
    kind: { ...cidrs((l) => (l.length > 2 || (l.length === 2 && ipFamily(l[0]!) === ipFamily(l[1]!)) ? 'at most one CIDR per IP family (one, or one IPv4 and one IPv6 for dual-stack)' : undefined)), render: (v) => v.join(',') },
    default: [], flag: 'cluster-cidr', help: 'pod CIDR(s), comma separated; traffic to service addresses from outside is masqueraded', sync: true,
  },
  nodePortAddresses: {
    kind: { ...nodePortCidrs, read: (c, v, p) => (Array.isArray(v) && v.includes('primary') ? c.bad(p, '"primary" is not supported: list CIDRs') : nodePortCidrs.read(c, v, p)) },
    default: [], flag: 'nodeport-addresses', help: 'NodePorts only on node addresses in these CIDRs (comma separated)', sync: true,
  },
  // ipvsync's: kube-proxy takes its node IPs from the Node object
  nodeIPs: {
    kind: ips, default: [], flag: 'node-ip', help: 'node addresses for NodePorts (repeatable or comma-separated; default every local address)', sync: true, omitDefault: true, own: true,
  },
  hostnameOverride: {
    // kube-proxy trims and lowercases it
    kind: text((h, written) => (h !== '' && (h.length > 253 || !DNS_SUBDOMAIN.test(h)) ? `"${written}" is not a valid node name (a DNS subdomain)` : undefined), (s) => s.trim().toLowerCase()),
    default: '', flag: 'hostname-override', alias: 'node-name', help: "this node's name, if not the hostname", sync: true,
  },
  // ipvsync's: kube-proxy reads them from the Node object (so does ipvsync; these win)
  nodeLabels: {
    kind: labels, default: {}, flag: 'node-labels', help: 'labels of this node over its Node object\'s (KEY=VALUE, repeatable or comma-separated; the proxy reads topology.kubernetes.io/zone)', sync: true, omitDefault: true, own: true,
  },
  metricsBindAddress: { kind: hostPort(DEFAULT_METRICS_PORT, '127.0.0.1'), default: { host: '127.0.0.1', port: DEFAULT_METRICS_PORT }, flag: 'metrics-bind-address', help: 'metrics server ip:port (port 0: off; default 127.0.0.1:10249)' },
  healthzBindAddress: { kind: hostPort(DEFAULT_HEALTHZ_PORT, '0.0.0.0'), default: { host: '0.0.0.0', port: DEFAULT_HEALTHZ_PORT }, flag: 'healthz-bind-address', help: 'health server ip:port (port 0: off; default 0.0.0.0:10256)' },
  kubeconfig: { path: 'clientConnection.kubeconfig', kind: text(), default: '', flag: 'kubeconfig', help: 'kubeconfig file (default: in-cluster config)' },
  // ipvsync's, for kube-proxy's --master flag
  master: { kind: text(), default: '', flag: 'master', help: 'API server URL (overrides the kubeconfig)', omitDefault: true, own: true },
  'iptables.masqueradeAll': { kind: bool, default: false, flag: 'masquerade-all', mode: 'ipvs', help: 'masquerade all traffic to service addresses (the file: iptables.masqueradeAll in IPVS mode, nftables.masqueradeAll in nftables mode)', sync: true },
  'nftables.masqueradeAll': { kind: bool, default: false, flag: 'masquerade-all', mode: 'nftables', help: 'nftables mode: masquerade all traffic to service addresses', sync: true },
  'nftables.syncPeriodMs': { path: 'nftables.syncPeriod', kind: duration(), default: 30_000, flag: 'iptables-sync-period', mode: 'nftables', help: 'nftables mode: full resync at least this often (default 30s)' },
  'nftables.minSyncPeriodMs': { path: 'nftables.minSyncPeriod', kind: duration(), default: 1000, flag: 'iptables-min-sync-period', mode: 'nftables', help: 'nftables mode: no two syncs closer than this (default 1s)' },
  'logging.verbosity': { kind: verbosity, default: 0, flag: 'v', short: 'v', help: "log verbosity, as kube-proxy's: 4 or more adds the debug lines (default 0)" },
  'logging.format': {
    kind: text<LogFormat>((f) => (f !== 'text' && f !== 'json' ? `must be "text" or "json", not "${f}"` : undefined)),
    default: 'text', flag: 'logging-format', help: "text (klog's lines, as kube-proxy; default) or json (one JSON object per line)",
  },
  'ipvs.scheduler': {
    kind: text((s) => (s !== '' && !isKnownScheduler(s) ? `unknown IPVS scheduler "${s}"` : undefined)),
    default: '', flag: 'ipvs-scheduler', alias: 'scheduler', help: 'default IPVS scheduler (default rr)', sync: true, mode: 'ipvs',
  },
  'ipvs.syncPeriodMs': { path: 'ipvs.syncPeriod', kind: duration(), default: 30_000, flag: 'ipvs-sync-period', mode: 'ipvs', help: 'IPVS mode: full resync at least this often (default 30s)' },
  'ipvs.minSyncPeriodMs': { path: 'ipvs.minSyncPeriod', kind: duration(), default: 0, flag: 'ipvs-min-sync-period', mode: 'ipvs', help: 'IPVS mode: no two syncs closer than this (default 0s)' },
  'ipvs.tcpTimeoutMs': { path: 'ipvs.tcpTimeout', kind: duration({ wholeSeconds: 'IPVS timeouts are in seconds' }), default: 0, flag: 'ipvs-tcp-timeout', mode: 'ipvs', help: 'IPVS TCP idle timeout (0: kernel value)' },
  'ipvs.tcpFinTimeoutMs': { path: 'ipvs.tcpFinTimeout', kind: duration({ wholeSeconds: 'IPVS timeouts are in seconds' }), default: 0, flag: 'ipvs-tcpfin-timeout', mode: 'ipvs', help: 'IPVS TCP FIN_WAIT timeout (0: kernel value)' },
  'ipvs.udpTimeoutMs': { path: 'ipvs.udpTimeout', kind: duration({ wholeSeconds: 'IPVS timeouts are in seconds' }), default: 0, flag: 'ipvs-udp-timeout', mode: 'ipvs', help: 'IPVS UDP timeout (0: kernel value)' },
  'ipvs.strictARP': { kind: bool, default: false, flag: 'ipvs-strict-arp', mode: 'ipvs', help: 'arp_ignore=1, arp_announce=2' },
  'ipvs.excludeCIDRs': { kind: cidrs(), default: [], flag: 'ipvs-exclude-cidrs', mode: 'ipvs', help: 'never touch IPVS services in these CIDRs' },
  'ipvs.runEstimation': {
    kind: bool, default: undefined, flag: 'ipvs-run-estimation', help: "net.ipv4.vs.run_estimation=1 (default: the kernel's value is left as it is)", omitDefault: true, mode: 'ipvs', own: true,
    negatedHelp: 'net.ipv4.vs.run_estimation=0: no IPVS rate estimation (before Linux 6.2 its timer walks every service and destination every 2 s in softirq)',
  },
  'ipvs.statsMetrics': {
    kind: text<IpvsStatsMetrics>((m) => (m !== 'none' && m !== 'services' && m !== 'all' ? `must be "none", "services" or "all", not "${m}"` : undefined)),
    default: 'none', flag: 'ipvs-stats-metrics', mode: 'ipvs', own: true,
    help: "IPVS traffic counters on /metrics: none (default), services (per virtual server) or all (and per real server); each scrape dumps the table",
  },
  bindMode: {
    kind: text<BindMode>((m) => (m !== 'address' && m !== 'route' ? `must be "address" or "route", not "${m}"` : undefined)),
    default: 'address', flag: 'bind-mode', mode: 'ipvs', own: true, help: 'IPVS mode: address (VIPs on the link) or route (local routes over serviceCIDRs)', sync: true,
  },
  serviceCIDRs: { kind: cidrs(), default: [], flag: 'service-cidrs', own: true, help: 'service CIDRs, when the API serves no ServiceCIDR objects: traffic to an address in them no Service holds is dropped (nftables mode); required by --bind-mode route', sync: true },
  vipLink: {
    kind: text((l) => (!/^[^\s/:]{1,15}$/.test(l) || l === '.' || l === '..' ? `"${l}" is not a link name (1-15 characters, no spaces, "/" or ":")` : undefined)),
    default: 'kube-ipvs0', flag: 'vip-link', own: true, help: 'dummy link holding the VIPs (default kube-ipvs0; nftables mode removes what IPVS mode left there)', sync: true,
  },
  drainTimeoutMs: { path: 'drainTimeout', kind: duration(), default: 15 * 60_000, flag: 'drain-timeout', mode: 'ipvs', own: true, help: 'delete a draining TCP real server after this (default 15m)' },
  proxyName: {
    kind: text((n) => (n !== '' && (n.length > 63 || !/^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(n)) ? `"${n}" is not a valid label value` : undefined)),
    default: '', flag: 'proxy-name', own: true, help: 'also serve Services labelled service.kubernetes.io/service-proxy-name=NAME',
  },
  // ipvsync's: client-go's reflector picks its watch timeout and has no silence limit
  'apiWatch.timeoutMs': {
    path: 'apiWatch.timeout', kind: duration({ wholeSeconds: 'the API server takes timeoutSeconds' }), default: 0, flag: 'api-watch-timeout', own: true, omitDefault: true,
    help: 'API watches: the server ends each after this (default 0: a random 5-10m, as client-go)',
  },
  'apiWatch.silenceLimitMs': {
    path: 'apiWatch.silenceLimit', kind: duration(), default: 150_000, flag: 'api-watch-silence-limit', own: true, omitDefault: true,
    help: 'API watches: one with no event and no bookmark this long is taken for hung, aborted and resumed (default 150s; 0: never)',
  },
};

/** The fields, each with `key`, where IpvsyncConfig has it, and `path`, where the file has it. */
export const CONFIG_FLAGS = Object.entries(FIELDS).map(([key, f]) => ({ key, ...f, path: f.path ?? key })) as ReadonlyArray<FlagSpec & { key: ConfigKey; path: string }>;

/** The table's defaults: kube-proxy's. */
export function defaultConfig(): IpvsyncConfig {
  const cfg = { ipvs: {}, nftables: {}, iptables: {}, logging: {}, apiWatch: {} } as IpvsyncConfig;
  for (const f of CONFIG_FLAGS) if (f.default !== undefined) setAt(cfg, f.key, structuredClone(f.default));
  return cfg;
}

/** The two documents a file may hold: kube-proxy's and ipvsync's own. */
export const KUBE_PROXY_DOCUMENT = { apiVersion: 'kubeproxy.config.k8s.io/v1alpha1', kind: 'KubeProxyConfiguration' } as const;
export const IPVSYNC_DOCUMENT = { apiVersion: 'ipvsync.io/v1alpha1', kind: 'IpvsyncConfiguration' } as const;
const DOCUMENTS = [KUBE_PROXY_DOCUMENT, IPVSYNC_DOCUMENT];
const documentName = (d: (typeof DOCUMENTS)[number]) => `${d.kind} (apiVersion ${d.apiVersion})`;

/** kube-proxy fields that are accepted and ignored (they configure other modes or things
 *  ipvsync does not do), by mapping; reported as warnings so a kube-proxy config file loads unchanged. */
const IGNORED: Record<string, string[]> = {
  '': ['bindAddress', 'bindAddressHardFail', 'configSyncPeriod', 'conntrack', 'detectLocal', 'detectLocalMode', 'enableProfiling', 'featureGates', 'oomScoreAdj', 'portRange', 'showHiddenMetricsForVersion', 'winkernel', 'windowsRunAsService'],
  clientConnection: ['acceptContentTypes', 'contentType', 'qps', 'burst'],
  iptables: ['masqueradeBit', 'localhostNodePorts', 'syncPeriod', 'minSyncPeriod'],
  nftables: ['masqueradeBit'],
  ipvs: ['ipSet'],
  logging: ['flushFrequency', 'vmodule', 'options'],
};

/** Fields that are in no v1alpha1 KubeProxyConfiguration (older ipvsync files had them): where they go. */
const MOVED: Record<string, string> = {
  masqueradeAll: 'iptables.masqueradeAll (IPVS mode) or nftables.masqueradeAll (nftables mode), as kube-proxy reads it',
  syncPeriod: 'ipvs.syncPeriod (IPVS mode) or nftables.syncPeriod (nftables mode), as kube-proxy reads it',
  minSyncPeriod: 'ipvs.minSyncPeriod (IPVS mode) or nftables.minSyncPeriod (nftables mode), as kube-proxy reads it',
  logLevel: 'logging.verbosity (kube-proxy\'s: 4 and more logs debug lines)',
};

/** The known fields of each mapping ('' the document) of each document, from the table. */
function knownFields(own: boolean): Map<string, Set<string>> {
  const known = new Map<string, Set<string>>([['', new Set(['apiVersion', 'kind'])]]);
  for (const f of CONFIG_FLAGS.filter((x) => !!x.own === own)) {
    const [section, key] = (f.path.includes('.') ? f.path.split('.') : ['', f.path]) as [string, string];
    if (section) known.get('')!.add(section);
    known.set(section, (known.get(section) ?? new Set()).add(key));
  }
  return known;
}
const KNOWN = { kubeProxy: knownFields(false), ipvsync: knownFields(true) };

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

/** Validates a file's documents (one mapping, or the list of a multi-document file; flags
 *  already merged: mergeFlags) onto the defaults. */
export function validateConfig(raw: unknown, source?: string): LoadedConfig {
  const c = new Checker();
  const doc = combineDocuments(Array.isArray(raw) ? raw : [raw], c, source);
  return validate(doc, c, source);
}

/**
 * The file's documents as one mapping: each is kube-proxy's KubeProxyConfiguration (also when it
 * names no kind) or ipvsync's IpvsyncConfiguration, at most one of each, holding only its own
 * fields (a field in the other document, or in none, is a problem that says where it goes).
 */
function combineDocuments(docs: readonly unknown[], c: Checker, source?: string): Raw {
  const out: Raw = {};
  const seen = new Set<string>();
  for (const raw of docs) {
    if (raw === undefined || raw === null) continue;
    if (!isMapping(raw)) throw new ConfigError([{ path: '(document)', message: `must be a mapping, not ${describe(raw)}` }], source);
    const type = documentType(raw, c);
    if (!type) continue;
    if (seen.has(type.kind)) c.bad('kind', `a second ${type.kind} document`);
    seen.add(type.kind);
    const own = type === IPVSYNC_DOCUMENT;
    const [known, other] = own ? [KNOWN.ipvsync, KNOWN.kubeProxy] : [KNOWN.kubeProxy, KNOWN.ipvsync];
    const elsewhere = own ? `a ${KUBE_PROXY_DOCUMENT.kind} field: it belongs in that document` : `an ipvsync field: it belongs in the ${documentName(IPVSYNC_DOCUMENT)} document`;
    // what is read of it: its own fields (a misplaced one is reported, not read)
    const kept = structuredClone(raw);
    for (const section of known.keys()) {
      const obj = section ? kept[section] : kept;
      if (obj === undefined || obj === null) continue;
      if (!isMapping(obj)) {
        c.bad(section, `must be a mapping, not ${describe(obj)}`);
        continue;
      }
      const prefix = section ? `${section}.` : '';
      for (const k of Object.keys(obj)) {
        if (known.get(section)!.has(k)) continue;
        delete obj[k];
        if (!own && IGNORED[section]?.includes(k)) c.warnings.push(`${prefix}${k}: kube-proxy field ignored by ipvsync`);
        else if (other.get(section)?.has(k)) c.bad(`${prefix}${k}`, elsewhere);
        else if (!section && MOVED[k]) c.bad(k, `not a field of a ${KUBE_PROXY_DOCUMENT.kind}: ${MOVED[k]}`);
        else c.bad(`${prefix}${k}`, 'unknown field');
      }
    }
    for (const [k, v] of Object.entries(kept)) {
      if (k === 'apiVersion' || k === 'kind') continue;
      out[k] = isMapping(v) && isMapping(out[k]) ? { ...(out[k] as Raw), ...v } : v;
    }
  }
  return out;
}

/** Which document this is, from its apiVersion and kind (neither: kube-proxy's). */
function documentType(raw: Raw, c: Checker): (typeof DOCUMENTS)[number] | undefined {
  const { apiVersion, kind } = raw;
  if (apiVersion === undefined && kind === undefined) return KUBE_PROXY_DOCUMENT;
  if (kind === undefined) {
    const byVersion = DOCUMENTS.find((d) => d.apiVersion === apiVersion);
    if (byVersion) return byVersion;
    c.bad('apiVersion', `must be ${DOCUMENTS.map((d) => d.apiVersion).join(' or ')}, not ${describe(apiVersion)}`);
    return undefined;
  }
  const found = DOCUMENTS.find((d) => d.apiVersion === apiVersion && d.kind === kind);
  if (found) return found;
  const byKind = DOCUMENTS.find((d) => d.kind === kind);
  if (byKind && apiVersion !== undefined) c.bad('apiVersion', `a ${byKind.kind} is ${byKind.apiVersion}, not ${JSON.stringify(apiVersion)}`);
  else if (byKind) return byKind;
  else c.bad('kind', `must be ${DOCUMENTS.map((d) => d.kind).join(' or ')}, not ${describe(kind)}`);
  return undefined;
}

/** The combined document (flags merged) onto the defaults. */
function validate(raw: Raw, c: Checker, source?: string): LoadedConfig {
  const cfg = defaultConfig();
  for (const f of CONFIG_FLAGS) {
    const v = getAt(raw, f.path);
    const value = v !== undefined && v !== null ? f.kind.read(c, v, f.path) : undefined;
    if (value !== undefined) setAt(cfg, f.key, value);
  }
  // The running mode's periods, as kube-proxy validates them (the other's are not read).
  const section = cfg.mode === 'nftables' ? 'nftables' : 'ipvs';
  const { syncPeriodMs, minSyncPeriodMs } = cfg[section];
  if (syncPeriodMs <= 0) c.bad(`${section}.syncPeriod`, 'must be greater than 0');
  else if (minSyncPeriodMs > syncPeriodMs)
    c.bad(`${section}.minSyncPeriod`, `must not exceed ${section}.syncPeriod (${formatDuration(minSyncPeriodMs)} > ${formatDuration(syncPeriodMs)})`);
  if (cfg.bindMode === 'route' && cfg.serviceCIDRs.length === 0 && !c.issues.some((i) => i.path.startsWith('serviceCIDRs')))
    c.bad('serviceCIDRs', 'required with bindMode "route" (the ranges the local routes cover)');

  if (c.issues.length) throw new ConfigError(c.issues, source);
  return { config: cfg, warnings: c.warnings };
}

/** Parses YAML text, one document or several (a syntax error names the line). Empty text is an empty config. */
export function parseConfigText(text: string, source = 'config'): unknown[] {
  try {
    return parseYamlDocuments(text);
  } catch (e) {
    if (!(e instanceof YamlSyntaxError)) throw e;
    const where = e.line !== undefined ? `line ${e.line}, column ${e.column}` : '(document)';
    throw new ConfigError([{ path: where, message: `YAML syntax: ${e.reason}` }], source);
  }
}

// ---- flags ----

const kebab = (k: string) => k.replace(/[A-Z]/g, (ch) => `-${ch.toLowerCase()}`);
/** Each flag's fields (two for a flag of both modes, one of each). */
const BY_FLAG = new Map<string, Array<(typeof CONFIG_FLAGS)[number]>>();
for (const f of CONFIG_FLAGS) for (const name of [f.flag, ...(f.alias ? [f.alias] : [])]) BY_FLAG.set(name, [...(BY_FLAG.get(name) ?? []), f]);

/** The flags of the commands: one per name, the first field's (the table's order). */
export const COMMAND_FLAGS = CONFIG_FLAGS.filter((f) => BY_FLAG.get(f.flag)![0] === f);

/**
 * Flags onto the file's document (pure: returns a new document). `flags` is keyed by flag name
 * ("ipvs-sync-period") or its camelCase form as commander gives it ("ipvsSyncPeriod"); undefined
 * values are flags not given. Unknown keys are ignored (other commands' options). A flag's
 * problem is reported under its own name. A flag of one mode only, given in the other, is
 * ignored with a note (kube-proxy ignores it silently).
 */
export function mergeFlags(doc: unknown, flags: Record<string, unknown>): { doc: Raw; flagPaths: Map<string, string>; notes: string[] } {
  const out: Raw = isMapping(doc) ? structuredClone(doc) : {};
  const flagPaths = new Map<string, string>();
  const notes: string[] = [];
  const modeFlag = flags['proxy-mode'] ?? flags.proxyMode ?? out.mode;
  const mode: ProxyMode = typeof modeFlag === 'string' && modeFlag.trim() === 'nftables' ? 'nftables' : 'ipvs';
  for (const [key, value] of Object.entries(flags)) {
    const flag = BY_FLAG.has(key) ? key : kebab(key);
    const specs = BY_FLAG.get(flag);
    if (value === undefined || !specs) continue;
    const spec = specs.find((s) => !s.mode || s.mode === mode);
    if (!spec) {
      const instead = CONFIG_FLAGS.find((s) => s.mode === mode && s.key.split('.')[1] === specs[0]!.key.split('.')[1]);
      notes.push(`--${flag}: ignored in ${mode} mode${instead ? ` (its setting there is --${instead.flag})` : ''}`);
      continue;
    }
    setAt(out, spec.path, value);
    flagPaths.set(spec.path, `--${flag}`);
  }
  return { doc: out, flagPaths, notes };
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
  let docs: unknown[] = [];
  if (opts.text !== undefined) docs = parseConfigText(opts.text, source);
  else if (opts.file) {
    let text: string;
    try {
      text = readFileSync(opts.file, 'utf8');
    } catch (e) {
      throw new ConfigError([{ path: '(file)', message: `cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` }], source);
    }
    docs = parseConfigText(text, source);
  }
  const c = new Checker();
  const { doc: merged, flagPaths, notes } = mergeFlags(combineDocuments(docs, c, source), opts.flags ?? {});
  // A problem or a note on a value that came from a flag names the flag; with no file (`sync`
  // has none) every field is its flag's.
  const named = source ? flagPaths : new Map([...CONFIG_FLAGS.map((f) => [f.path, `--${f.flag}`] as const), ...flagPaths]);
  const flagOf = (path: string) => named.get(path.replace(/\[\d+\]$/, ''));
  try {
    const loaded = validate(merged, c, source);
    loaded.warnings = [
      ...loaded.warnings.map((w) => {
        const m = /^([^:\s]+): /.exec(w);
        const flag = m && flagOf(m[1]!);
        return flag ? `${flag}${w.slice(m[1]!.length)}` : w;
      }),
      ...notes,
    ];
    return loaded;
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    throw new ConfigError(e.issues.map((i) => ({ path: flagOf(i.path) ?? i.path, message: i.message })), source);
  }
}

/**
 * The effective config as YAML (--write-config-to): a KubeProxyConfiguration holding only
 * kube-proxy's v1alpha1 fields (kube-proxy loads it), then, as a second document, an
 * IpvsyncConfiguration with ipvsync's own; ipvsync loads both back to the same config.
 */
export function renderConfig(cfg: IpvsyncConfig): string {
  const kubeProxy: Raw = { ...KUBE_PROXY_DOCUMENT };
  const own: Raw = { ...IPVSYNC_DOCUMENT };
  for (const f of CONFIG_FLAGS) {
    const v = getAt(cfg, f.key);
    if (!(f.omitDefault && isDeepStrictEqual(v, f.default))) setAt(f.own ? own : kubeProxy, f.path, f.kind.render(v));
  }
  return `${renderYaml(kubeProxy)}---\n${renderYaml(own)}`;
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
    masqueradeAll: modeSettings(cfg).masqueradeAll,
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
