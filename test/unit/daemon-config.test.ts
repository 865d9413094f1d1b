// The daemon config: kube-proxy field names and defaults, every validation case with its
// message, flags over the file, --write-config-to round trip.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { applySysctls, proxySysctls } from '../../src/proxy/sysctl.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { parseAllDocuments } from 'yaml';
import { registerProxy } from '../../src/cli/proxy.js';
import {
  ConfigError,
  CONFIG_FLAGS,
  defaultConfig,
  formatDuration,
  loadConfig,
  logLevel,
  mergeFlags,
  modeSettings,
  COMMAND_FLAGS,
  nodeName,
  parseConfigCidr,
  parseDuration,
  parseHostPort,
  renderConfig,
  toProxierOptions,
  toProxyConfig,
  validateConfig,
  writeConfigTo,
  type IpvsyncConfig,
} from '../../src/daemon/config.js';

/** The head of ipvsync's own document. */
const OWN = 'apiVersion: ipvsync.io/v1alpha1\nkind: IpvsyncConfiguration\n';

function issuesOf(fn: () => unknown): Array<[string, string]> {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ConfigError, `expected ConfigError, got ${e}`);
    return e.issues.map((i) => [i.path, i.message]);
  }
  assert.fail('expected a ConfigError');
}

test('defaults are kube-proxy IPVS mode defaults', () => {
  const { config, warnings } = loadConfig();
  assert.deepEqual(warnings, []);
  assert.deepEqual(config, defaultConfig());
  assert.equal(config.ipvs.syncPeriodMs, 30_000);
  assert.equal(config.ipvs.minSyncPeriodMs, 0);
  assert.deepEqual(config.healthzBindAddress, { host: '0.0.0.0', port: 10256 });
  assert.deepEqual(config.metricsBindAddress, { host: '127.0.0.1', port: 10249 });
  assert.equal(config.vipLink, 'kube-ipvs0');
  assert.equal(config.bindMode, 'address');
  assert.equal(config.drainTimeoutMs, 15 * 60_000);
  assert.deepEqual(loadConfig({ text: '' }).config, defaultConfig(), 'an empty file is the defaults');
});

test('a full KubeProxyConfiguration document', () => {
  const { config, warnings } = loadConfig({
    text: `
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
nodePortAddresses: [192.168.0.0/24, "fd00::/64"]
hostnameOverride: " Node-A.example "
metricsBindAddress: 0.0.0.0:9100
healthzBindAddress: "[::]"
clientConnection:
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 5
ipvs:
  scheduler: wrr
  syncPeriod: 1m
  minSyncPeriod: 1s
  tcpTimeout: 900s
  tcpFinTimeout: 2m
  udpTimeout: 300s
  strictARP: true
  excludeCIDRs: [10.10.0.0/16]
iptables:
  masqueradeAll: true
  masqueradeBit: 14
nftables:
  syncPeriod: 2m
conntrack:
  maxPerCore: 32768
oomScoreAdj: -999
logging:
  verbosity: 4
  format: json
  flushFrequency: 5s
---
apiVersion: ipvsync.io/v1alpha1
kind: IpvsyncConfiguration
bindMode: route
serviceCIDRs: [10.96.0.0/12]
vipLink: ipvs0
nodeLabels:
  topology.kubernetes.io/zone: z1
drainTimeout: 5m
proxyName: ipvsync
ipvs:
  statsMetrics: services
apiWatch:
  timeout: 10m
  silenceLimit: 90s
`,
  });
  assert.deepEqual(config, {
    mode: 'ipvs',
    clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/56'],
    nodePortAddresses: ['192.168.0.0/24', 'fd00::/64'],
    nodeIPs: [],
    hostnameOverride: 'node-a.example',
    nodeLabels: { 'topology.kubernetes.io/zone': 'z1' },
    metricsBindAddress: { host: '0.0.0.0', port: 9100 },
    healthzBindAddress: { host: '::', port: 10256 },
    kubeconfig: '/var/lib/kube-proxy/kubeconfig.conf',
    master: '',
    iptables: { masqueradeAll: true },
    nftables: { syncPeriodMs: 120_000, minSyncPeriodMs: 1000, masqueradeAll: false },
    logging: { verbosity: 4, format: 'json' },
    ipvs: {
      scheduler: 'wrr',
      syncPeriodMs: 60_000,
      minSyncPeriodMs: 1000,
      tcpTimeoutMs: 900_000,
      tcpFinTimeoutMs: 120_000,
      udpTimeoutMs: 300_000,
      strictARP: true,
      excludeCIDRs: ['10.10.0.0/16'],
      statsMetrics: 'services',
    },
    bindMode: 'route',
    serviceCIDRs: ['10.96.0.0/12'],
    vipLink: 'ipvs0',
    drainTimeoutMs: 300_000,
    proxyName: 'ipvsync',
    apiWatch: { timeoutMs: 600_000, silenceLimitMs: 90_000 },
  });
  assert.equal(logLevel(config), 'debug');
  assert.deepEqual(warnings.sort(), [
    'clientConnection.qps: kube-proxy field ignored by ipvsync',
    'conntrack: kube-proxy field ignored by ipvsync',
    'iptables.masqueradeBit: kube-proxy field ignored by ipvsync',
    'logging.flushFrequency: kube-proxy field ignored by ipvsync',
    'oomScoreAdj: kube-proxy field ignored by ipvsync',
  ]);
  assert.deepEqual(toProxyConfig(config), {
    scheduler: 'wrr',
    nodePortAddresses: ['192.168.0.0/24', 'fd00::/64'],
    clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/56'],
    masqueradeAll: true,
    serviceCIDRs: ['10.96.0.0/12'],
    proxyName: 'ipvsync',
  });
});

test('validation: every problem reported at once with its field path', () => {
  const cases: Array<[string, Array<[string, RegExp]>]> = [
    ['kind: Pod', [['kind', /must be KubeProxyConfiguration or IpvsyncConfiguration, not string "Pod"/]]],
    ['apiVersion: v1', [['apiVersion', /must be kubeproxy.config.k8s.io\/v1alpha1 or ipvsync.io\/v1alpha1, not string "v1"/]]],
    ['apiVersion: ipvsync.io/v1alpha1\nkind: KubeProxyConfiguration', [['apiVersion', /a KubeProxyConfiguration is kubeproxy.config.k8s.io\/v1alpha1, not "ipvsync.io\/v1alpha1"/]]],
    ['kind: KubeProxyConfiguration\n---\nkind: KubeProxyConfiguration', [['kind', /a second KubeProxyConfiguration document/]]],
    ['bindMode: route\nvipLink: x', [['bindMode', /an ipvsync field: it belongs in the IpvsyncConfiguration \(apiVersion ipvsync.io\/v1alpha1\) document/], ['vipLink', /an ipvsync field/]]],
    ['ipvs: {statsMetrics: all, scheduler: rr}', [['ipvs.statsMetrics', /an ipvsync field/]]],
    [`${OWN}clusterCIDR: 10.0.0.0/8\nipvs: {scheduler: rr}`, [['clusterCIDR', /a KubeProxyConfiguration field: it belongs in that document/], ['ipvs.scheduler', /a KubeProxyConfiguration field/]]],
    [`${OWN}conntrack: {min: 1}`, [['conntrack', /unknown field/]]],
    ['masqueradeAll: true', [['masqueradeAll', /not a field of a KubeProxyConfiguration: iptables.masqueradeAll \(IPVS mode\) or nftables.masqueradeAll \(nftables mode\)/]]],
    ['syncPeriod: 1m', [['syncPeriod', /not a field of a KubeProxyConfiguration: ipvs.syncPeriod \(IPVS mode\) or nftables.syncPeriod/]]],
    ['logLevel: debug', [['logLevel', /logging.verbosity/]]],
    ['logging: {verbosity: -1}', [['logging.verbosity', /must be a whole number from 0 \(kube-proxy's verbosity\), not number -1/]]],
    ['logging: {format: xml}', [['logging.format', /must be "text" or "json", not "xml"/]]],
    ['mode: nftables\nnftables: {syncPeriod: 0s}', [['nftables.syncPeriod', /must be greater than 0/]]],
    ['mode: nftables\nnftables: {syncPeriod: 10s, minSyncPeriod: 1m}', [['nftables.minSyncPeriod', /must not exceed nftables.syncPeriod \(1m0s > 10s\)/]]],
    ['mode: iptables', [['mode', /must be "ipvs" or "nftables" \(or empty: ipvs\), not "iptables"/]]],
    ['clusterCIDR: 10.0.0.0', [['clusterCIDR', /"10.0.0.0" is not a CIDR/]]],
    ['clusterCIDR: 10.0.0.0/33', [['clusterCIDR', /prefix length 33 is too long for IPv4/]]],
    ['clusterCIDR: 10.0.0.0/8,10.1.0.0/16', [['clusterCIDR', /at most one CIDR per IP family/]]],
    ['clusterCIDR: 10.0.0.0/8,fd00::/64,fd01::/64', [['clusterCIDR', /at most one CIDR per IP family/]]],
    ['clusterCIDR: 42', [['clusterCIDR', /must be a list of CIDRs or a comma-separated string, not number 42/]]],
    ['nodePortAddresses: [10.0.0.0/8, bogus]', [['nodePortAddresses[1]', /"bogus" is not a CIDR/]]],
    ['nodePortAddresses: [primary]', [['nodePortAddresses', /"primary" is not supported/]]],
    ['hostnameOverride: "bad_name!"', [['hostnameOverride', /not a valid node name/]]],
    ['metricsBindAddress: "127.0.0.1:99999"', [['metricsBindAddress', /port "99999" must be a number from 0 to 65535/]]],
    ['metricsBindAddress: "localhost:10249"', [['metricsBindAddress', /"localhost" is not an IP address/]]],
    ['healthzBindAddress: 10256', [['healthzBindAddress', /must be "host:port", not number 10256/]]],
    ['healthzBindAddress: "0.0.0.0:abc"', [['healthzBindAddress', /port "abc" must be a number/]]],
    ['iptables: {masqueradeAll: yes-please}', [['iptables.masqueradeAll', /must be true or false, not string "yes-please"/]]],
    ['nftables: {masqueradeAll: 1}', [['nftables.masqueradeAll', /must be true or false, not number 1/]]],
    ['ipvs: {syncPeriod: 30}', [['ipvs.syncPeriod', /must be a duration such as "30s" or "1m", not number 30/]]],
    ['ipvs: {syncPeriod: 30 seconds}', [['ipvs.syncPeriod', /"30 seconds" is not a duration/]]],
    ['ipvs: {syncPeriod: 0s}', [['ipvs.syncPeriod', /must be greater than 0/]]],
    ['ipvs: {minSyncPeriod: -1s}', [['ipvs.minSyncPeriod', /"-1s" is negative/]]],
    ['ipvs: {syncPeriod: 10s, minSyncPeriod: 1m}', [['ipvs.minSyncPeriod', /must not exceed ipvs.syncPeriod \(1m0s > 10s\)/]]],
    ['ipvs: {tcpTimeout: 1500ms}', [['ipvs.tcpTimeout', /not a whole number of seconds/]]],
    ['ipvs: {scheduler: fastest}', [['ipvs.scheduler', /unknown IPVS scheduler "fastest"/]]],
    ['ipvs: {strictArp: true}', [['ipvs.strictArp', /unknown field/]]],
    [`${OWN}ipvs: {runEstimation: off}`, [['ipvs.runEstimation', /must be true or false, not string "off"/]]],
    ['ipvs: {excludeCIDRs: [1.2.3.4/40]}', [['ipvs.excludeCIDRs[0]', /too long/]]],
    ['ipvs: [1, 2]', [['ipvs', /must be a mapping, not a list/]]],
    ['clusterCidr: 10.0.0.0/8', [['clusterCidr', /unknown field/]]],
    [`${OWN}bindMode: tunnel`, [['bindMode', /must be "address" or "route", not "tunnel"/]]],
    [`${OWN}bindMode: route`, [['serviceCIDRs', /required with bindMode "route"/]]],
    [`${OWN}vipLink: "kube ipvs0"`, [['vipLink', /not a link name/]]],
    [`${OWN}vipLink: a-very-long-link-name`, [['vipLink', /not a link name/]]],
    [`${OWN}drainTimeout: forever`, [['drainTimeout', /"forever" is not a duration/]]],
    [`${OWN}proxyName: "-bad"`, [['proxyName', /not a valid label value/]]],
    ['clientConnection: {kubeconfig: 7}', [['clientConnection.kubeconfig', /must be a string, not number 7/]]],
    [
      `ipvs: {syncPeriod: 1x, udpTimeout: 1.5s}\nfoo: 1\n---\n${OWN}vipLink: "a/b"`,
      [
        ['foo', /unknown field/],
        ['ipvs.syncPeriod', /not a duration/],
        ['ipvs.udpTimeout', /not a whole number of seconds/],
        ['vipLink', /not a link name/],
      ],
    ],
  ];
  for (const [text, expected] of cases) {
    const got = issuesOf(() => loadConfig({ text, file: 'proxy.yaml' }));
    assert.equal(got.length, expected.length, `${text}: ${JSON.stringify(got)}`);
    for (const [i, [path, re]] of expected.entries()) {
      assert.equal(got[i]![0], path, `${text}: path`);
      assert.match(got[i]![1], re, `${text}: message`);
    }
  }
});

test('the error message names the file and lists every issue', () => {
  try {
    loadConfig({ text: 'ipvs: {syncPeriod: nope}\nlogging: {format: loud}', file: '/etc/ipvsync/config.yaml' });
    assert.fail('expected a ConfigError');
  } catch (e) {
    assert.equal(
      (e as Error).message,
      '/etc/ipvsync/config.yaml: invalid configuration:\n' +
        '  logging.format: must be "text" or "json", not "loud"\n' +
        '  ipvs.syncPeriod: "nope" is not a duration (examples: "30s", "1m", "1h30m", "250ms")',
    );
  }
});

test('YAML syntax errors and unreadable files', () => {
  // the line (1-based) the parser stopped at: the end of the text for a flow list never closed
  assert.deepEqual(issuesOf(() => loadConfig({ text: 'ipvs:\n  syncPeriod: [1s\n', file: 'x.yaml' })), [['line 3, column 1', 'YAML syntax: unexpected end of the stream within a flow collection']]);
  assert.deepEqual(issuesOf(() => loadConfig({ text: 'mode: ipvs\nipvs:\n  scheduler: rr\n bad: 1\n', file: 'x.yaml' })), [['line 4, column 2', 'YAML syntax: bad indentation of a mapping entry']]);
  assert.deepEqual(issuesOf(() => loadConfig({ text: 'ipvs:\n  syncPeriod: 1s\n  syncPeriod: 2s\n', file: 'x.yaml' })), [['line 3, column 3', 'YAML syntax: duplicated mapping key']]);
  assert.deepEqual(issuesOf(() => loadConfig({ text: '- a\n- b' })), [['(document)', 'must be a mapping, not a list']]);
  assert.deepEqual(issuesOf(() => loadConfig({ file: '/nonexistent/ipvsync.yaml' })), [['(file)', 'cannot read: ENOENT']]);
});

test('durations: Go syntax in, Go Duration.String() out', () => {
  const ok: Array<[string, number]> = [
    ['0', 0],
    ['0s', 0],
    ['30s', 30_000],
    ['1m', 60_000],
    ['1h30m', 5_400_000],
    ['250ms', 250],
    ['1.5s', 1500],
    ['1m30s', 90_000],
    ['500us', 0.5],
  ];
  for (const [t, ms] of ok) assert.equal(parseDuration(t), ms, t);
  for (const t of ['', '30', 's', '1d', '1 s', '-1s', '1s2', 'abc']) assert.equal(parseDuration(t), undefined, t);
  const fmt: Array<[number, string]> = [
    [0, '0s'],
    [250, '250ms'],
    [30_000, '30s'],
    [60_000, '1m0s'],
    [900_000, '15m0s'],
    [3_600_000, '1h0m0s'],
    [5_430_000, '1h30m30s'],
    [1500, '1.5s'],
  ];
  for (const [ms, t] of fmt) {
    assert.equal(formatDuration(ms), t);
    assert.equal(parseDuration(t), ms, `round trip ${t}`);
  }
});

test('bind addresses: kube-proxy AppendPortIfNeeded semantics, IPv6 brackets, port 0 turns the server off', () => {
  assert.deepEqual(parseHostPort('0.0.0.0', 10256), { host: '0.0.0.0', port: 10256 });
  assert.deepEqual(parseHostPort('::1', 10249), { host: '::1', port: 10249 });
  assert.deepEqual(parseHostPort('[::1]:9000', 10249), { host: '::1', port: 9000 });
  assert.deepEqual(parseHostPort('[fd00::1]', 10249), { host: 'fd00::1', port: 10249 });
  assert.deepEqual(parseHostPort('10.0.0.1:0', 10249), { host: '10.0.0.1', port: 0 });
  assert.match(parseHostPort('[nope]:1', 1) as string, /"nope" is not an IP address/);
  assert.equal(loadConfig({ text: 'metricsBindAddress: 127.0.0.1:0' }).config.metricsBindAddress, null);
});

test('flags override the file; their problems are reported under the flag name', () => {
  const text = 'ipvs:\n  syncPeriod: 1m\n  scheduler: lc\nclusterCIDR: 10.244.0.0/16\nlogging: {verbosity: 2}\n';
  const { config } = loadConfig({
    text,
    flags: {
      'ipvs-sync-period': '45s',
      ipvsMinSyncPeriod: '2s', // commander's camelCase
      masqueradeAll: true,
      clusterCidr: '10.1.0.0/16,fd00::/48',
      kubeconfig: '/k.conf',
      hostnameOverride: undefined, // not given
      'unrelated-option': 'x',
    },
  });
  assert.equal(config.ipvs.syncPeriodMs, 45_000);
  assert.equal(config.ipvs.minSyncPeriodMs, 2000);
  assert.equal(config.ipvs.scheduler, 'lc', 'file value kept where no flag');
  assert.equal(config.iptables.masqueradeAll, true);
  assert.equal(config.nftables.masqueradeAll, false, "IPVS mode's --masquerade-all");
  assert.deepEqual(config.clusterCIDRs, ['10.1.0.0/16', 'fd00::/48']);
  assert.equal(config.kubeconfig, '/k.conf');
  assert.equal(config.logging.verbosity, 2);

  assert.deepEqual(
    issuesOf(() => loadConfig({ text, flags: { 'ipvs-sync-period': 'soon', 'nodeport-addresses': '10.0.0.0/8,x', v: '3' } })),
    [
      ['--nodeport-addresses', '"x" is not a CIDR (address/prefix-length, e.g. 10.244.0.0/16 or fd00::/64)'],
      ['--ipvs-sync-period', '"soon" is not a duration (examples: "30s", "1m", "1h30m", "250ms")'],
    ],
  );
  // A conflict between a flag and a file value names whichever field the rule is attached to.
  assert.deepEqual(issuesOf(() => loadConfig({ text, flags: { 'ipvs-min-sync-period': '5m' } })), [
    ['--ipvs-min-sync-period', 'must not exceed ipvs.syncPeriod (5m0s > 1m0s)'],
  ]);
});

test('every CIDR field: host bits cleared to the network with a warning naming the field (as kube-proxy parses them); what is not a CIDR refused with the reason', () => {
  const { config, warnings } = loadConfig({
    text: `
clusterCIDR: 10.244.1.5/16,fd00:10:244::1/56
nodePortAddresses: [192.168.0.7/24, "FD00::/64"]
ipvs: {excludeCIDRs: [10.10.3.4/16]}
---
${OWN}serviceCIDRs: [10.96.0.1/12]
`,
  });
  assert.deepEqual(config.clusterCIDRs, ['10.244.0.0/16', 'fd00:10:244::/56']);
  assert.deepEqual(config.nodePortAddresses, ['192.168.0.0/24', 'fd00::/64'], 'a network already: canonical text, no warning');
  assert.deepEqual(config.ipvs.excludeCIDRs, ['10.10.0.0/16']);
  assert.deepEqual(config.serviceCIDRs, ['10.96.0.0/12']);
  assert.deepEqual(warnings, [
    'clusterCIDR: "10.244.1.5/16" has host bits set: using 10.244.0.0/16, its network (as kube-proxy does)',
    'clusterCIDR: "fd00:10:244::1/56" has host bits set: using fd00:10:244::/56, its network (as kube-proxy does)',
    'nodePortAddresses[0]: "192.168.0.7/24" has host bits set: using 192.168.0.0/24, its network (as kube-proxy does)',
    'ipvs.excludeCIDRs[0]: "10.10.3.4/16" has host bits set: using 10.10.0.0/16, its network (as kube-proxy does)',
    'serviceCIDRs[0]: "10.96.0.1/12" has host bits set: using 10.96.0.0/12, its network (as kube-proxy does)',
  ]);
  // The same from a flag: the warning names the flag.
  const flagged = loadConfig({ flags: { clusterCidr: '10.244.1.5/16' } });
  assert.deepEqual(flagged.config.clusterCIDRs, ['10.244.0.0/16']);
  assert.deepEqual(flagged.warnings, ['--cluster-cidr: "10.244.1.5/16" has host bits set: using 10.244.0.0/16, its network (as kube-proxy does)']);

  assert.deepEqual(
    issuesOf(() => loadConfig({ text: `clusterCIDR: fe80::1%eth0/64\nipvs: {excludeCIDRs: [010.1.0.0/16]}\n---\n${OWN}serviceCIDRs: [10.96.0.0/33, 10.96.0.0, 10.96.0.0/12/1]\n` })),
    [
      ['clusterCIDR', '"fe80::1%eth0/64" is not a CIDR: a zone index ("%…") has no place in one'],
      ['ipvs.excludeCIDRs[0]', '"010.1.0.0/16" is not a CIDR (address/prefix-length, e.g. 10.244.0.0/16 or fd00::/64)'],
      ['serviceCIDRs[0]', '"10.96.0.0/33": prefix length 33 is too long for IPv4'],
      ['serviceCIDRs[1]', '"10.96.0.0" is not a CIDR (address/prefix-length, e.g. 10.244.0.0/16 or fd00::/64)'],
      ['serviceCIDRs[2]', '"10.96.0.0/12/1" is not a CIDR (address/prefix-length, e.g. 10.244.0.0/16 or fd00::/64)'],
    ],
  );
  assert.deepEqual(issuesOf(() => loadConfig({ flags: { 'ipvs-exclude-cidrs': 'fd00::/129' } })), [['--ipvs-exclude-cidrs', '"fd00::/129": prefix length 129 is too long for IPv6']]);

  // the one parser, as the commands' flags give it: a list (repeated or comma-separated)
  assert.deepEqual(parseConfigCidr(' 10.0.0.0/8 '), { cidr: '10.0.0.0/8' });
  assert.deepEqual(parseConfigCidr('0.0.0.1/0'), { cidr: '0.0.0.0/0', note: '"0.0.0.1/0" has host bits set: using 0.0.0.0/0, its network (as kube-proxy does)' });
  const listed = loadConfig({ flags: { clusterCidr: ['10.244.1.5/16', 'fd00::/64'] } });
  assert.deepEqual(listed.config.clusterCIDRs, ['10.244.0.0/16', 'fd00::/64']);
  assert.deepEqual(listed.warnings, ['--cluster-cidr: "10.244.1.5/16" has host bits set: using 10.244.0.0/16, its network (as kube-proxy does)']);
  assert.deepEqual(issuesOf(() => loadConfig({ flags: { nodeportAddresses: ['10.0.0.0/8', 'garbage', '1.2.3.4/40'] } })), [
    ['--nodeport-addresses', '"garbage" is not a CIDR (address/prefix-length, e.g. 10.244.0.0/16 or fd00::/64)'],
    ['--nodeport-addresses', '"1.2.3.4/40": prefix length 40 is too long for IPv4'],
  ]);
});

test('the proxy and sync commands: a CIDR with host bits is its network (a warning says so); one that is not a CIDR stops the command with the flag, the reason and exit code 2, before anything is opened', () => {
  const cmd = proxyCommand();
  const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
  const normalised = cmd.effective('--cluster-cidr', '10.244.1.5/16', '--ipvs-exclude-cidrs', '10.10.3.4/16');
  assert.deepEqual(normalised.config.clusterCIDRs, ['10.244.0.0/16']);
  assert.deepEqual(normalised.config.ipvs.excludeCIDRs, ['10.10.0.0/16']);
  assert.match(normalised.text, /clusterCIDR: 10\.244\.0\.0\/16\n/);
  const file = cmd.file('host-bits.yaml', 'clusterCIDR: 10.244.1.5/16\n');
  assert.deepEqual(cmd.effective('--config', file).config.clusterCIDRs, ['10.244.0.0/16']);

  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-cidr-'));
  const refused: Array<[string[], RegExp]> = [
    [['proxy', '--write-config-to', join(dir, 'out.yaml'), '--cluster-cidr', '10.244.0.0/33'], /--cluster-cidr: "10\.244\.0\.0\/33": prefix length 33 is too long for IPv4/],
    [['proxy', '--write-config-to', join(dir, 'out.yaml'), '--service-cidrs', 'fe80::1%eth0/64'], /--service-cidrs: "fe80::1%eth0\/64" is not a CIDR: a zone index/],
    // sync: refused before the manifests are read (the file does not exist) or a handle opened
    [['sync', '-f', join(dir, 'missing.yaml'), '--cluster-cidr', 'garbage'], /--cluster-cidr: "garbage" is not a CIDR/],
    [['sync', '-f', join(dir, 'missing.yaml'), '--nodeport-addresses', '10.0.0.0/8,10.1.2.3/40'], /--nodeport-addresses: "10\.1\.2\.3\/40": prefix length 40 is too long for IPv4/],
    [['sync', '-f', join(dir, 'missing.yaml'), '--bind-mode', 'route', '--service-cidrs', '10.96.0.0/12/3'], /--service-cidrs: "10\.96\.0\.0\/12\/3" is not a CIDR/],
    [['sync', '-f', join(dir, 'missing.yaml'), '--node-ip', '10.0.0.1,fe80::1%eth9'], /--node-ip: "fe80::1%eth9" is not an IP address/],
    // the configuration's other checks, as `proxy` makes them; with no file, a field is named by its flag
    [['sync', '-f', join(dir, 'missing.yaml'), '--bind-mode', 'tunnel'], /--bind-mode: must be "address" or "route", not "tunnel"/],
    [['sync', '-f', join(dir, 'missing.yaml'), '--bind-mode', 'route'], /--service-cidrs: required with bindMode "route"/],
    [['sync', '-f', join(dir, 'missing.yaml'), '--scheduler', 'fastest'], /--scheduler: unknown IPVS scheduler "fastest"/],
    [['sync', '-f', join(dir, 'missing.yaml'), '--node-name', 'bad_name!'], /--node-name: "bad_name!" is not a valid node name/],
    [['sync', '-f', join(dir, 'missing.yaml'), '--vip-link', 'a/b'], /--vip-link: "a\/b" is not a link name/],
    [['sync', '-f', join(dir, 'missing.yaml'), '--cluster-cidr', '10.0.0.0/8', '--cluster-cidr', '10.1.0.0/16'], /--cluster-cidr: at most one CIDR per IP family/],
  ];
  for (const [args, why] of refused) {
    const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
    assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, why, args.join(' '));
    assert.doesNotMatch(r.stderr, /ENOENT|missing\.yaml/, 'nothing read');
  }
  assert.equal(readdirSync(dir).length, 0, 'no configuration written');
});

test('mergeFlags is pure and knows every flag', () => {
  const doc = { ipvs: { scheduler: 'rr' } };
  const { doc: merged } = mergeFlags(doc, { 'ipvs-strict-arp': true, 'vip-link': 'ipvs1' });
  assert.deepEqual(doc, { ipvs: { scheduler: 'rr' } }, 'input untouched');
  assert.deepEqual(merged, { ipvs: { scheduler: 'rr', strictARP: true }, vipLink: 'ipvs1' });
  assert.deepEqual(mergeFlags({}, { nodeName: 'n1', scheduler: 'wrr' }).doc, { hostnameOverride: 'n1', ipvs: { scheduler: 'wrr' } }, "`sync`'s spellings");
});

/** For every field's flag: a value other than the default, and one its check refuses (with the message). */
const FLAG_SAMPLES: Record<string, [unknown, unknown, RegExp]> = {
  'cluster-cidr': [['10.1.0.0/16', 'fd00::/48'], '10.0.0.0/8,10.1.0.0/16', /at most one CIDR per IP family/],
  'nodeport-addresses': [['192.168.0.0/24'], ['primary'], /"primary" is not supported/],
  'node-ip': [['10.0.0.7', 'FD00::7'], ['10.0.0.1', '10.0.0.01'], /"10\.0\.0\.01" is not an IP address/],
  'node-labels': [['topology.kubernetes.io/zone=z1', 'tier=edge'], ['zone'], /string "zone" is not KEY=VALUE/],
  'hostname-override': ['node-7', 'Bad_Name', /not a valid node name/],
  'metrics-bind-address': ['[::1]:9100', 'localhost:1', /"localhost" is not an IP address/],
  'healthz-bind-address': ['10.0.0.1:0', '0.0.0.0:abc', /port "abc" must be a number/],
  'masquerade-all': [true, 'yes', /must be true or false/],
  kubeconfig: ['/k.conf', 7, /must be a string, not number 7/],
  master: ['https://10.0.0.1:6443', 7, /must be a string/],
  'ipvs-scheduler': ['wrr', 'fastest', /unknown IPVS scheduler "fastest"/],
  'ipvs-sync-period': ['1m', '0s', /must be greater than 0/],
  'ipvs-min-sync-period': ['1s', '-1s', /is negative/],
  'ipvs-tcp-timeout': ['15m', '1500ms', /not a whole number of seconds/],
  'ipvs-tcpfin-timeout': ['2m', '1.5s', /not a whole number of seconds/],
  'ipvs-udp-timeout': ['5m', 'soon', /is not a duration/],
  'ipvs-strict-arp': [true, 'on', /must be true or false/],
  'ipvs-run-estimation': [false, 'off', /must be true or false/],
  'ipvs-exclude-cidrs': [['10.10.0.0/16'], ['10.10.0.0'], /is not a CIDR/],
  'ipvs-stats-metrics': ['all', 'some', /must be "none", "services" or "all"/],
  'bind-mode': ['route', 'tunnel', /must be "address" or "route"/],
  'service-cidrs': [['10.96.0.0/12'], 'fd00::/129', /too long for IPv6/],
  'vip-link': ['ipvs1', 'a b', /not a link name/],
  'drain-timeout': ['90s', 'forever', /is not a duration/],
  'proxy-name': ['ipvsync', '-bad', /not a valid label value/],
  'api-watch-timeout': ['10m', '1500ms', /not a whole number of seconds/],
  'api-watch-silence-limit': ['30s', 'soon', /is not a duration/],
  'proxy-mode': ['nftables', 'iptables', /must be "ipvs" or "nftables"/],
  'iptables-sync-period': ['1m', '0s', /must be greater than 0/],
  'iptables-min-sync-period': ['2s', '-1s', /is negative/],
  v: ['4', 'loud', /must be a whole number from 0/],
  'logging-format': ['json', 'xml', /must be "text" or "json"/],
};

test('every field of the table: a flag that sets it, a default, a check that refuses under the flag name, and a rendering that loads back the same', () => {
  assert.deepEqual([...new Set(CONFIG_FLAGS.map((f) => f.flag))].sort(), Object.keys(FLAG_SAMPLES).sort(), 'a sample for every flag');
  const at = (cfg: IpvsyncConfig, key: string) => key.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], cfg);
  const defaults = defaultConfig();
  assert.deepEqual(loadConfig({ text: renderConfig(defaults) }).config, defaults, 'the defaults round-trip');
  const paths = new Set<string>();
  for (const f of CONFIG_FLAGS) {
    const [good, bad, why] = FLAG_SAMPLES[f.flag]!;
    assert.ok(!paths.has(f.path), `${f.flag}: one field per path`);
    paths.add(f.path);
    assert.deepEqual(at(defaults, f.key), f.default, `${f.flag}: the default`);
    assert.match(f.help, /\w/, `${f.flag}: help`);
    // a field of one mode, in that mode
    const mode = f.mode === 'nftables' ? { 'proxy-mode': 'nftables' } : {};
    const flags = { [f.flag]: good, ...mode, ...(f.flag === 'bind-mode' ? { 'service-cidrs': '10.96.0.0/12' } : {}) };
    const { config } = loadConfig({ flags });
    assert.notDeepEqual(at(config, f.key), f.default, `${f.flag}: sets ${f.key}`);
    const text = renderConfig(config);
    assert.ok(text.includes(`${f.path.split('.').at(-1)}:`), `${f.flag}: written as ${f.path}`);
    assert.deepEqual(loadConfig({ text }).config, config, `${f.flag}: render → load is the same config`);
    const refused = issuesOf(() => loadConfig({ flags: { [f.flag]: bad, ...mode } }));
    assert.equal(refused.length, 1, `${f.flag}: ${JSON.stringify(refused)}`);
    assert.equal(refused[0]![0], `--${f.flag}`);
    assert.match(refused[0]![1], why, f.flag);
    // the file's path, refused the same way under its own name
    const doc: Record<string, unknown> = f.own ? { apiVersion: 'ipvsync.io/v1alpha1', kind: 'IpvsyncConfiguration' } : { mode: f.mode ?? 'ipvs' };
    f.path.split('.').reduce((o, k, i, all) => (o[k] = i === all.length - 1 ? bad : {}) as Record<string, unknown>, doc);
    assert.match(issuesOf(() => validateConfig(doc))[0]![0], new RegExp(`^${f.path.replace('.', '\\.')}(\\[\\d+\\])?$`), f.path);
  }
});

test('`sync` and `proxy` spell every shared field\'s flag the same, and build the proxier\'s options through the same conversion', () => {
  const program = new Command();
  registerProxy(program, () => ({}));
  const longs = (name: string) => new Set(program.commands.find((c) => c.name() === name)!.options.map((o) => o.long!));
  const sync = longs('sync');
  const proxy = longs('proxy');
  for (const f of COMMAND_FLAGS) {
    const spellings = [`--${f.flag}`, ...(f.alias ? [`--${f.alias}`] : []), ...(f.negatedHelp ? [`--no-${f.flag}`] : [])];
    for (const s of spellings) {
      assert.ok(proxy.has(s), `proxy ${s}`);
      assert.equal(sync.has(s), !!f.sync, `sync ${s}`);
    }
  }
  for (const s of ['--node-name', '--scheduler', '--cluster-cidr', '--nodeport-addresses', '--masquerade-all', '--vip-link', '--bind-mode', '--service-cidrs', '--node-ip', '--no-glue', '--kube-proxy-ipsets'])
    assert.ok(sync.has(s) && proxy.has(s), s);
  // what `sync` was given, as `proxy` would have it
  const { config } = loadConfig({ flags: { nodeName: 'Node-1', scheduler: 'sh', clusterCidr: ['10.244.0.0/16'], bindMode: 'route', serviceCidrs: ['10.96.0.0/12'], vipLink: 'ipvs1' } });
  assert.deepEqual(toProxierOptions(config, { addresses: ['10.0.0.1'], glue: false, kubeIpsets: true }), {
    mode: 'ipvs',
    node: { name: 'node-1', addresses: ['10.0.0.1'] },
    config: { scheduler: 'sh', nodePortAddresses: [], clusterCIDRs: ['10.244.0.0/16'], masqueradeAll: false, serviceCIDRs: ['10.96.0.0/12'] },
    vipLink: 'ipvs1',
    glue: false,
    kubeIpsets: true,
    excludeCidrs: [],
    drainTimeoutMs: 15 * 60_000,
    bindMode: 'route',
  });
});

test('--write-config-to writes the effective config, which loads back to the same config', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-config-'));
  const src = join(dir, 'in.yaml');
  writeFileSync(src, 'clusterCIDR: 10.244.0.0/16\nipvs:\n  scheduler: sh\n  tcpTimeout: 15m\nhealthzBindAddress: "[::]:10256"\nmetricsBindAddress: 127.0.0.1:0\n');
  const { config } = loadConfig({ file: src, flags: { 'drain-timeout': '90s' } });
  const out = join(dir, 'out.yaml');
  await writeConfigTo(out, config);
  const text = readFileSync(out, 'utf8');
  assert.match(text, /^apiVersion: kubeproxy.config.k8s.io\/v1alpha1$/m);
  assert.match(text, /^kind: KubeProxyConfiguration$/m);
  assert.match(text, /^ {2}tcpTimeout: 15m0s$/m);
  assert.match(text, /^drainTimeout: 1m30s$/m);
  assert.match(text, /^healthzBindAddress: "?\[::\]:10256"?$/m);
  const back = loadConfig({ file: out });
  assert.deepEqual(back.config, config);
  assert.deepEqual(back.warnings, []);
  assert.equal(renderConfig(back.config), text);
  assert.deepEqual(validateConfig(undefined).config, defaultConfig());
});

test('node name: hostnameOverride, else the lowercased hostname', () => {
  assert.equal(nodeName(loadConfig({ text: 'hostnameOverride: Node-7' }).config, () => 'ignored'), 'node-7');
  assert.equal(nodeName(defaultConfig(), () => ' Worker-1.Example '), 'worker-1.example');
});

/** The proxy command's effective config for `args` (through --write-config-to), and the file's
 *  text; `file(name, text)` writes a config for `--config` beside it. */
function proxyCommand(): { effective(...args: string[]): { config: IpvsyncConfig; text: string }; file(name: string, text: string): string } {
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-config-'));
  const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
  return {
    effective(...args) {
      const out = join(dir, 'out.yaml');
      const r = spawnSync(process.execPath, [cli, 'proxy', '--write-config-to', out, ...args], { encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      return { config: loadConfig({ file: out }).config, text: readFileSync(out, 'utf8') };
    },
    file(name, text) {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    },
  };
}

test('the proxy command: a flag overrides the file (through --write-config-to)', () => {
  const cmd = proxyCommand();
  const on = cmd.file('on.yaml', 'iptables: {masqueradeAll: true}\nipvs: {strictARP: false}\n');
  const effective = (...args: string[]) => cmd.effective(...args).config;
  assert.equal(effective().iptables.masqueradeAll, false);
  assert.equal(effective('--masquerade-all').iptables.masqueradeAll, true);
  assert.equal(effective('--config', on).iptables.masqueradeAll, true, 'the file, no flag');
  assert.equal(effective('--config', on, '--ipvs-strict-arp').ipvs.strictARP, true, 'the flag over the file');
});

test('ipvs.runEstimation: unset by default (the kernel\'s value left), from the file, from the flags, and written back', () => {
  assert.equal('runEstimation' in defaultConfig().ipvs, false);
  assert.equal('runEstimation' in loadConfig({ text: 'ipvs: {strictARP: true}' }).config.ipvs, false);
  assert.equal(loadConfig({ text: `${OWN}ipvs: {runEstimation: false}` }).config.ipvs.runEstimation, false);
  assert.equal(loadConfig({ text: `${OWN}ipvs: {runEstimation: true}` }).config.ipvs.runEstimation, true);
  const cmd = proxyCommand();
  const file = cmd.file('on.yaml', `${OWN}ipvs:\n  runEstimation: true\n`);
  const effective = (...args: string[]): boolean | undefined => {
    const { config, text } = cmd.effective(...args);
    if (config.ipvs.runEstimation === undefined) assert.doesNotMatch(text, /runEstimation/);
    return config.ipvs.runEstimation;
  };
  const cases: Array<[string[], boolean | undefined, string?]> = [
    [[], undefined, 'no flag, no file: left unset'],
    [['--no-ipvs-run-estimation'], false],
    [['--ipvs-run-estimation'], true],
    [['--config', file], true, 'the file, no flag'],
    [['--config', file, '--no-ipvs-run-estimation'], false, 'the flag over the file'],
  ];
  for (const [args, want, why] of cases) assert.equal(effective(...args), want, why ?? args.join(' '));
});

test('the proxy\'s sysctls: run_estimation only when set; written to /proc/sys only where the value differs', () => {
  assert.deepEqual(
    proxySysctls(false).map(([n]) => n),
    ['net/ipv4/ip_forward', 'net/ipv4/vs/conntrack', 'net/ipv4/vs/expire_nodest_conn', 'net/ipv4/vs/expire_quiescent_template'],
  );
  assert.deepEqual(proxySysctls(false, false).at(-1), ['net/ipv4/vs/run_estimation', '0']);
  assert.deepEqual(proxySysctls(true, true, 'nftables'), [['net/ipv4/ip_forward', '1']], 'no IPVS sysctl in nftables mode');
  assert.deepEqual(proxySysctls(true, true).slice(-3), [['net/ipv4/conf/all/arp_ignore', '1'], ['net/ipv4/conf/all/arp_announce', '2'], ['net/ipv4/vs/run_estimation', '1']]);
  // a /proc/sys of files: one to change, one already right, one the kernel does not have
  const root = mkdtempSync(join(tmpdir(), 'ipvsync-sysctl-'));
  mkdirSync(join(root, 'net/ipv4/vs'), { recursive: true });
  writeFileSync(join(root, 'net/ipv4/vs/run_estimation'), '1\n');
  writeFileSync(join(root, 'net/ipv4/vs/conntrack'), '1\n');
  const res = applySysctls([['net/ipv4/vs/run_estimation', '0'], ['net/ipv4/vs/conntrack', '1'], ['net/ipv4/vs/missing', '1']], root);
  assert.equal(readFileSync(join(root, 'net/ipv4/vs/run_estimation'), 'utf8'), '0');
  assert.equal(readFileSync(join(root, 'net/ipv4/vs/conntrack'), 'utf8'), '1\n', 'not rewritten');
  assert.deepEqual(res.map((r) => [r.name, r.ok]), [['net.ipv4.vs.run_estimation', true], ['net.ipv4.vs.conntrack', true], ['net.ipv4.vs.missing', false]]);
  assert.match(res[2]!.error!, /ENOENT/);
});

test('--version prints the package version', () => {
  const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  for (const flag of ['--version', '-V']) {
    const r = spawnSync(process.execPath, [cli, flag], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, `${pkg.version}\n`);
  }
});

test('mode / --proxy-mode: ipvs (also empty, the default) or nftables, in the file, by flag, and rendered back', () => {
  assert.equal(loadConfig({ text: 'mode: ""' }).config.mode, 'ipvs');
  assert.equal(loadConfig({ text: '' }).config.mode, 'ipvs');
  const nft = loadConfig({ text: 'mode: nftables' }).config;
  assert.equal(nft.mode, 'nftables');
  assert.match(renderConfig(nft), /^mode: nftables$/m);
  assert.equal(loadConfig({ flags: { proxyMode: 'nftables' } }).config.mode, 'nftables');
  assert.equal(loadConfig({ text: 'mode: ipvs', flags: { proxyMode: 'nftables' } }).config.mode, 'nftables', 'the flag over the file');
  assert.throws(() => loadConfig({ flags: { proxyMode: 'iptables' } }), /--proxy-mode: must be "ipvs" or "nftables"/);
});

test("each mode reads its own section, as kube-proxy's conversion: IPVS mode ipvs.* and iptables.masqueradeAll, nftables mode nftables.*", () => {
  const text = 'ipvs: {syncPeriod: 5s, minSyncPeriod: 1s}\niptables: {masqueradeAll: true}\nnftables: {syncPeriod: 45s, minSyncPeriod: 2s, masqueradeAll: false}\n';
  const ipvs = loadConfig({ text }).config;
  assert.deepEqual(modeSettings(ipvs), { syncPeriodMs: 5000, minSyncPeriodMs: 1000, masqueradeAll: true });
  assert.equal(toProxyConfig(ipvs).masqueradeAll, true);
  const nft = loadConfig({ text: `mode: nftables\n${text}` }).config;
  assert.deepEqual(modeSettings(nft), { syncPeriodMs: 45_000, minSyncPeriodMs: 2000, masqueradeAll: false });
  assert.equal(toProxyConfig(nft).masqueradeAll, false);
  // kube-proxy's defaults for each: nftables 30s/1s, IPVS 30s/0s
  assert.deepEqual(modeSettings(loadConfig({ flags: { proxyMode: 'nftables' } }).config), { syncPeriodMs: 30_000, minSyncPeriodMs: 1000, masqueradeAll: false });
  assert.deepEqual(modeSettings(defaultConfig()), { syncPeriodMs: 30_000, minSyncPeriodMs: 0, masqueradeAll: false });
  // only the running mode's periods are checked (kube-proxy's own file has 0s in the others)
  assert.equal(loadConfig({ text: 'mode: nftables\nipvs: {syncPeriod: 0s}' }).config.mode, 'nftables');
  assert.deepEqual(issuesOf(() => loadConfig({ text: 'ipvs: {syncPeriod: 0s}' })), [['ipvs.syncPeriod', 'must be greater than 0']]);

  // flags: --masquerade-all sets the running mode's; kube-proxy's --iptables-*-sync-period are
  // nftables mode's, --ipvs-*-sync-period IPVS mode's; one for the other mode is ignored, with a warning
  const f = loadConfig({ flags: { proxyMode: 'nftables', masqueradeAll: true, iptablesSyncPeriod: '1m', ipvsSyncPeriod: '5s', ipvsScheduler: 'lc' } });
  assert.deepEqual(modeSettings(f.config), { syncPeriodMs: 60_000, minSyncPeriodMs: 1000, masqueradeAll: true });
  assert.equal(f.config.iptables.masqueradeAll, false);
  assert.equal(f.config.ipvs.syncPeriodMs, 30_000);
  assert.deepEqual(f.warnings, ['--ipvs-sync-period: ignored in nftables mode (its setting there is --iptables-sync-period)', '--ipvs-scheduler: ignored in nftables mode']);
  const g = loadConfig({ text: 'mode: ipvs', flags: { iptablesMinSyncPeriod: '3s', masqueradeAll: true } });
  assert.deepEqual(modeSettings(g.config), { syncPeriodMs: 30_000, minSyncPeriodMs: 0, masqueradeAll: true });
  assert.deepEqual(g.warnings, ['--iptables-min-sync-period: ignored in ipvs mode (its setting there is --ipvs-min-sync-period)']);
});

test("kube-proxy's own written configuration loads unchanged: its unused fields are warnings, each mode takes its section", () => {
  const file = fileURLToPath(new URL('../../../test/fixtures/kube-proxy/config/v1alpha1-defaults.yaml', import.meta.url));
  const { config, warnings } = loadConfig({ file });
  assert.equal(config.mode, 'ipvs', "mode \"\" is ipvsync's default, IPVS");
  assert.deepEqual(modeSettings(config), { syncPeriodMs: 30_000, minSyncPeriodMs: 0, masqueradeAll: false });
  assert.deepEqual(config.logging, { verbosity: 0, format: 'text' });
  assert.ok(warnings.length > 10 && warnings.every((w) => / kube-proxy field ignored by ipvsync$/.test(w)), warnings.join('\n'));
  assert.ok(warnings.includes('conntrack: kube-proxy field ignored by ipvsync') && warnings.includes('nftables.masqueradeBit: kube-proxy field ignored by ipvsync'));
  assert.deepEqual(modeSettings(loadConfig({ file, flags: { proxyMode: 'nftables' } }).config), { syncPeriodMs: 30_000, minSyncPeriodMs: 1000, masqueradeAll: false });
});

/** KubeProxyConfiguration v1alpha1's fields (k8s.io/kube-proxy/config/v1alpha1 types.go), by mapping. */
const V1ALPHA1: Record<string, string[]> = {
  '': ['apiVersion', 'kind', 'featureGates', 'clientConnection', 'logging', 'hostnameOverride', 'bindAddress', 'healthzBindAddress', 'metricsBindAddress', 'bindAddressHardFail', 'enableProfiling', 'showHiddenMetricsForVersion', 'mode', 'iptables', 'ipvs', 'nftables', 'winkernel', 'detectLocalMode', 'detectLocal', 'clusterCIDR', 'nodePortAddresses', 'oomScoreAdj', 'conntrack', 'configSyncPeriod', 'portRange', 'windowsRunAsService'],
  clientConnection: ['kubeconfig', 'acceptContentTypes', 'contentType', 'qps', 'burst'],
  logging: ['format', 'flushFrequency', 'verbosity', 'vmodule', 'options'],
  iptables: ['masqueradeBit', 'masqueradeAll', 'localhostNodePorts', 'syncPeriod', 'minSyncPeriod'],
  ipvs: ['syncPeriod', 'minSyncPeriod', 'scheduler', 'excludeCIDRs', 'strictARP', 'tcpTimeout', 'tcpFinTimeout', 'udpTimeout'],
  nftables: ['masqueradeBit', 'masqueradeAll', 'syncPeriod', 'minSyncPeriod'],
};

test("--write-config-to: a KubeProxyConfiguration with kube-proxy's v1alpha1 fields only, ipvsync's own in an IpvsyncConfiguration after it; both load back", () => {
  const { config } = loadConfig({
    text: `mode: nftables\nlogging: {verbosity: 2}\n---\n${OWN}bindMode: route\nserviceCIDRs: [10.96.0.0/12]\nnodeIPs: [10.0.0.1]\nmaster: https://10.0.0.1:6443\nipvs: {runEstimation: false, statsMetrics: all}\n`,
  });
  const text = renderConfig(config);
  const docs = parseAllDocuments(text).map((d) => d.toJS() as Record<string, any>);
  assert.equal(docs.length, 2);
  const [kubeProxy, own] = docs as [Record<string, any>, Record<string, any>];
  assert.deepEqual([kubeProxy.apiVersion, kubeProxy.kind], ['kubeproxy.config.k8s.io/v1alpha1', 'KubeProxyConfiguration']);
  for (const [k, v] of Object.entries(kubeProxy)) {
    assert.ok(V1ALPHA1['']!.includes(k), `${k}: not a v1alpha1 field`);
    if (V1ALPHA1[k] && typeof v === 'object') for (const sub of Object.keys(v)) assert.ok(V1ALPHA1[k]!.includes(sub), `${k}.${sub}: not a v1alpha1 field`);
  }
  assert.deepEqual(kubeProxy.nftables, { masqueradeAll: false, syncPeriod: '30s', minSyncPeriod: '1s' });
  assert.deepEqual(kubeProxy.logging, { verbosity: 2, format: 'text' });
  assert.deepEqual([own.apiVersion, own.kind], ['ipvsync.io/v1alpha1', 'IpvsyncConfiguration']);
  assert.deepEqual(own.ipvs, { runEstimation: false, statsMetrics: 'all' });
  assert.deepEqual([own.bindMode, own.nodeIPs, own.master], ['route', ['10.0.0.1'], 'https://10.0.0.1:6443']);
  const back = loadConfig({ text });
  assert.deepEqual(back.config, config);
  assert.deepEqual(back.warnings, []);
});

test('the command line: usage errors are bad input (2); help and --version 0; a missing manifests folder is refused (2) before anything is opened; --help names both modes', () => {
  const cli = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
  const status = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });
  for (const args of [['proxy', '--bogus'], ['no-such-command'], [], ['sync'], ['ipvs', 'bogus'], ['proxy', '--v']]) assert.equal(status(...args).status, 2, args.join(' '));
  for (const args of [['--help'], ['proxy', '--help'], ['--version']]) assert.equal(status(...args).status, 0, args.join(' '));
  const missing = status('proxy', '--manifests', '/nonexistent/manifests');
  assert.equal(missing.status, 2, missing.stderr);
  assert.match(missing.stderr, /--manifests \/nonexistent\/manifests: no such folder/);
  assert.doesNotMatch(missing.stderr, /cannot start|CAP_NET_ADMIN|IPVS/, 'refused before the preflight');
  for (const cmd of ['proxy', 'sync']) {
    const help = status(cmd, '--help').stdout.replace(/\s+/g, ' ');
    assert.match(help, /IPVS mode .*nftables/, `${cmd} --help`);
    assert.doesNotMatch(help, /kube-proxy IPVS semantics/);
  }
});
