// `ipvsync sync -f` on a real kernel with the manifest values a mutation campaign found crashing
// the translation (issue 44) beside a good Service: the command exits 0, the good Service is in
// the kernel (ipvsadm as the independent reader), and each bad object or value is named in a
// warning instead of failing the sync. Bad flag values are refused as bad input (exit 2) before
// anything is opened.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'main.js');
const LINK = 'ipvsync-bad0';

function cli(args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

after(() => {
  execFileSync('ipvsadm', ['-C']);
  spawnSync('ip', ['link', 'del', LINK]);
});

const svc = (name: string, spec: Record<string, unknown>, status?: unknown) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'default' },
  spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP' }], ...spec },
  ...(status !== undefined ? { status } : {}),
});
const slice = (name: string, service: string, endpoints: unknown, ports: unknown = [{ name: 'http', port: 8080, protocol: 'TCP' }]) => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace: 'default', labels: { 'kubernetes.io/service-name': service } },
  addressType: 'IPv4',
  endpoints,
  ports,
});

test('sync -f programs the good Service and warns about each bad one (values that crashed the translation)', () => {
  execFileSync('ipvsadm', ['-C']);
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-bad-'));
  const objects = [
    svc('good', { clusterIP: '10.96.0.10' }),
    slice('good-1', 'good', [{ addresses: ['10.244.1.5'], conditions: { ready: true } }]),
    svc('zone-cluster-ip', { clusterIP: 'fe80::1%eth0' }),
    svc('zone-external-ip', { clusterIP: '10.96.0.11', externalIPs: ['fe80::1%eth0'] }),
    slice('zone-external-ip-1', 'zone-external-ip', [{ addresses: ['10.244.1.6'] }]),
    svc('numeric-protocol', { clusterIP: '10.96.0.12' }),
    slice('numeric-protocol-1', 'numeric-protocol', [{ addresses: ['10.244.1.7'] }], [{ name: 'http', port: 8080, protocol: 6 }]),
    svc('null-ingress', { clusterIP: '10.96.0.13', type: 'LoadBalancer' }, { loadBalancer: { ingress: [null] } }),
    svc('legacy', { clusterIP: '10.96.0.14' }),
    { apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'legacy', namespace: 'default' }, subsets: [{ addresses: '10.244.9.9', ports: [{ name: 'http', port: 8080 }] }] },
    svc('hints', { clusterIP: '10.96.0.15' }),
    slice('hints-1', 'hints', [{ addresses: ['10.244.1.8'], hints: { forZones: 'zone-a' } }]),
    svc('number-address', { clusterIP: '10.96.0.16' }),
    slice('number-address-1', 'number-address', [{ addresses: [167772161] }]),
    svc('host-bits', { clusterIP: '10.96.0.17', type: 'LoadBalancer', loadBalancerSourceRanges: ['203.0.113.7/24'] }, { loadBalancer: { ingress: [{ ip: '192.0.2.17' }] } }),
  ];
  writeFileSync(join(dir, 'all.json'), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
  const r = cli(['sync', '-f', dir, '--no-glue', '--no-sysctl', '--node-ip', '10.0.0.1', '--vip-link', LINK, '--node-name', 'n1']);
  assert.equal(r.code, 0, r.stderr);
  assert.doesNotMatch(r.stderr, /TypeError|Invalid URL|is not a function|Cannot read properties/, 'no raw JavaScript error');
  const table = execFileSync('ipvsadm', ['-Sn'], { encoding: 'utf8' });
  assert.match(table, /-A -t 10\.96\.0\.10:80 -s rr/);
  assert.match(table, /-a -t 10\.96\.0\.10:80 -r 10\.244\.1\.5:8080 -m -w 1/);
  // The services around the bad values are programmed where a value, not the object, was bad.
  assert.match(table, /-A -t 10\.96\.0\.11:80/, 'the bad external IP is dropped, the service kept');
  assert.match(table, /-A -t 10\.96\.0\.13:80/, 'a null ingress entry is ignored');
  assert.match(table, /-A -t 192\.0\.2\.17:80/, 'the source range with host bits does not keep the LB IP out');
  assert.doesNotMatch(table, /fe80/);
  for (const named of ['default/zone-cluster-ip', 'default/zone-external-ip', 'default/numeric-protocol', 'default/number-address'])
    assert.match(r.stderr, new RegExp(`warning: .*${named}`), `${named} is named in a warning:\n${r.stderr}`);
  assert.match(r.stderr, /warning: skipped .*all\.json.*Endpoints default\/legacy/, `the Endpoints of the wrong shape is skipped by name:\n${r.stderr}`);
});

test('bad --node-ip and a missing manifest file are bad input: exit 2, nothing opened', () => {
  execFileSync('ipvsadm', ['-C']);
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-bad-'));
  writeFileSync(join(dir, 'svc.json'), JSON.stringify(svc('good', { clusterIP: '10.96.0.10' })));
  const zone = cli(['sync', '-f', dir, '--no-glue', '--node-ip', 'fe80::1%eth9', '--vip-link', LINK]);
  assert.equal(zone.code, 2, zone.stderr);
  assert.match(zone.stderr, /--node-ip: "fe80::1%eth9" is not an IP address/);
  const missing = cli(['sync', '-f', join(dir, 'nope.yaml'), '--no-glue', '--vip-link', LINK]);
  assert.equal(missing.code, 2, missing.stderr);
  assert.match(missing.stderr, /nope\.yaml/);
  assert.equal(execFileSync('ipvsadm', ['-Sn'], { encoding: 'utf8' }).trim(), '', 'nothing programmed');
});
