// Cross-checks with ipvsadm on a real kernel (inside the test VM), both ways:
//  - what ipvsync writes, `ipvsadm -Sn` / `-S` / `-Ln` read identically (text equal, and the
//    parsed rules equal what was written);
//  - a batch with a bad op sends nothing;
//  - what `ipvsadm -R` writes, `ipvsync ipvs save [-n]` / `list` print identically.
import { test, beforeEach, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ipvs, type IpvsOp } from '../../src/kernel/ipvs.js';
import type { NetlinkError } from '../../src/errors.js';
import { fileResolver, formatList, formatSave, parseRules } from '../../src/formats/ipvsadm.js';

const ipvs = await Ipvs.open();
const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'main.js');

function ipvsadm(args: string[], input?: string): string {
  return execFileSync('ipvsadm', args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
}

function cli(args: string[], input?: string): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', input });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

after(async () => {
  // Leave the kernel's table empty (the suite's files share one guest kernel).
  await ipvs.flush();
});

beforeEach(async () => {
  await ipvs.flush();
});

/** Everything the save format can express: both families, fwmark, every option ipvsadm prints. */
const RULES = `-A -t 200.0.0.1:80 -s wrr -b flag-1,flag-3
-A -t 10.0.0.1:80 -s rr
-a -t 10.0.0.1:80 -r 127.0.0.2:8080 -m -w 3
-a -t 10.0.0.1:80 -r 127.0.0.3:80 -g -w 1
-a -t 10.0.0.1:80 -r 127.0.0.4:80 -i -w 1 --tun-type gre --tun-csum
-a -t 10.0.0.1:80 -r 127.0.0.5:80 -i -w 0 --tun-type gre --tun-nocsum
-a -t 10.0.0.1:80 -r 127.0.0.6:80 -i -w 2 --tun-type gue --tun-port 6080 --tun-nocsum
-A -t 10.0.0.1:443 -s lc -p 1800 -M 255.255.255.0
-A -u 10.0.0.1:443 -s lc --pe sip
-A -u 10.0.0.1:5060 -s rr -p 60 --pe sip -o
-A --sctp-service 10.0.0.2:9 -s mh -b mh-fallback,mh-port
-a --sctp-service 10.0.0.2:9 -r 127.0.0.7:9 -m -w 100
-A -t [fd00::2]:80 -s dh
-a -t [fd00::2]:80 -r 127.0.0.1:80 -i -w 1 --tun-type gue --tun-port 5555 --tun-remcsum
-a -t [fd00::2]:80 -r [fd00::9]:80 -m -w 5
-a -t [fd00::2]:80 -r [fd00::10]:80 -m -w 5
-a -t [fd00::2]:80 -r [fd00::a]:8080 -m -w 65535
-A -u [fd00::3]:53 -s sh -p 300 -M 64 -b sh-fallback,sh-port
-A -f 7 -6 -s mh -p 360 -b mh-port
-a -f 7 -6 -r 127.0.0.9:0 -i -w 1 --tun-type ipip
-A -f 1 -s wlc
-a -f 1 -r 127.0.0.10:0 -g -w 1
-a -f 1 -r 127.0.0.11:0 -m -w 4
-A -t 10.255.0.1:0 -s sed -p 10
-A -t 127.0.0.1:22 -s nq
-a -t 127.0.0.1:22 -r 127.0.0.1:22 -m -w 1
`;

test('ipvsync writes, ipvsadm -Sn reads identically (text and parsed rules)', async () => {
  const rules = parseRules(RULES);
  const r = await ipvs.apply(rules.map((x) => x.op));
  assert.deepEqual(r.errors.map((e) => e.message), []);
  const theirs = ipvsadm(['-Sn']);
  // The table ipvsadm reads is the one the rules describe (ipvsadm's order depends on the
  // kernel's dump order for non-transitive address sets, so compare as sets here).
  const lines = (t: string): string[] => t.split('\n').filter(Boolean).sort();
  assert.deepEqual(lines(theirs), lines(formatSave(parseRulesToModel(RULES))));
  const ours = formatSave(await ipvs.services({ withDestinations: true }));
  assert.equal(ours, theirs);
  // Parsed back, ipvsadm's rules are the very ops we applied (same multiset).
  const norm = (ops: IpvsOp[]): string[] => ops.map((o) => JSON.stringify(o)).sort();
  assert.deepEqual(norm(parseRules(theirs).map((x) => x.op)), norm(rules.map((x) => x.op)));
});

test('a batch with a bad op sends nothing, and names the op', async () => {
  const ops = parseRules(RULES).map((x) => x.op);
  const bad = [...ops.slice(0, 5), { op: 'addService', service: { protocol: 'tcp', address: '10.0.0.1', port: 70000 } } as IpvsOp];
  await assert.rejects(ipvs.apply(bad), (e: NetlinkError) => e.kind === 'invalid' && e.index === 5 && /port must be an integer 0-65535, got 70000/.test(e.message));
  assert.equal(ipvsadm(['-Sn']), '');
});

test('ipvsync writes, ipvsadm -S (names), -Ln and -Ln --stats print what ipvsync prints', async () => {
  (await ipvs.apply(parseRules(RULES).map((x) => x.op))).orThrow();
  const services = await ipvs.services({ withDestinations: true, stats: true });
  assert.equal(formatSave(services, fileResolver()), ipvsadm(['-S']));
  assert.equal(formatList(await ipvs.info(), services), ipvsadm(['-Ln']));
  assert.equal(formatList(await ipvs.info(), services, undefined, 'stats'), ipvsadm(['-Ln', '--stats']));
  assert.equal(formatList(await ipvs.info(), services, undefined, 'rate'), ipvsadm(['-Ln', '--rate']));
  assert.equal(formatList(await ipvs.info(), services, undefined, 'thresholds'), ipvsadm(['-Ln', '--thresholds']));
  assert.equal(formatList(await ipvs.info(), services, undefined, 'persistent-conn'), ipvsadm(['-Ln', '--persistent-conn']));
});

test('ipvsadm -R writes, `ipvsync ipvs save -n` / `save` / `list` print identically', () => {
  ipvsadm(['-R'], RULES);
  const saveN = cli(['ipvs', 'save', '-n']);
  assert.equal(saveN.code, 0, saveN.stderr);
  assert.equal(saveN.stdout, ipvsadm(['-Sn']));
  const save = cli(['ipvs', 'save']);
  assert.equal(save.code, 0, save.stderr);
  assert.equal(save.stdout, ipvsadm(['-S']));
  const list = cli(['ipvs', 'list']);
  assert.equal(list.code, 0, list.stderr);
  assert.equal(list.stdout, ipvsadm(['-Ln']));
});

test('save -> flush -> restore reproduces the table; ipvsadm -R accepts what ipvsync saves', () => {
  ipvsadm(['-R'], RULES);
  const before = ipvsadm(['-Sn']);
  const saved = cli(['ipvs', 'save', '-n']).stdout;
  assert.equal(saved, before);
  // ipvsadm sorts with a comparator that overflows (200.0.0.1 sorts before 10.0.0.1, but not
  // always: it is not transitive), so its output depends on the kernel's dump order, and that
  // depends on insertion order within a hash bucket (newest first) — which a flush and restore
  // reverses, for ipvsadm -R as for us (CI saw it once). So: the restored table holds exactly
  // the saved rules, and ipvsync's restore leaves the kernel as ipvsadm -R leaves it, line for line.
  const lines = (t: string): string[] => t.split('\n').filter(Boolean).sort();
  ipvsadm(['-C']);
  ipvsadm(['-R'], saved);
  const viaIpvsadm = ipvsadm(['-Sn']);
  assert.deepEqual(lines(viaIpvsadm), lines(before));
  ipvsadm(['-C']);
  const restored = cli(['ipvs', 'restore'], saved);
  assert.equal(restored.code, 0, restored.stderr);
  assert.equal(ipvsadm(['-Sn']), viaIpvsadm);
  assert.deepEqual(lines(ipvsadm(['-Sn'])), lines(before));
});

test('thresholds ipvsadm writes (-x/-y, not in its save format) are read back by ipvsync', async () => {
  ipvsadm(['-A', '-t', '10.0.0.1:80', '-s', 'rr']);
  ipvsadm(['-a', '-t', '10.0.0.1:80', '-r', '127.0.0.2:8080', '-m', '-w', '3', '-x', '100', '-y', '10']);
  const [d] = await ipvs.destinations({ protocol: 'tcp', address: '10.0.0.1', port: 80 });
  assert.deepEqual([d?.address, d?.port, d?.forward, d?.weight, d?.upperThreshold, d?.lowerThreshold], ['127.0.0.2', 8080, 'masq', 3, 100, 10]);
  const thresholds = ipvsadm(['-Ln', '--thresholds']);
  assert.match(thresholds, /127\.0\.0\.2:8080 +100 +10 /);
});

/** The model ipvsadm -Sn should print for RULES (built from the parsed ops, kernel defaults). */
function parseRulesToModel(text: string): Parameters<typeof formatSave>[0] {
  const services: Parameters<typeof formatSave>[0] = [];
  for (const { op } of parseRules(text)) {
    if (op.op === 'addService') {
      const c = op.service;
      const v6 = 'fwmark' in c ? c.family === 'inet6' : c.address.includes(':');
      const base = 'fwmark' in c ? { family: v6 ? 'inet6' : 'inet', fwmark: c.fwmark } : { family: v6 ? 'inet6' : 'inet', protocol: c.protocol, address: c.address, port: c.port };
      services.push({
        ...base,
        scheduler: c.scheduler ?? 'wlc',
        flags: c.flags ?? [],
        timeout: c.timeout ?? 0,
        netmask: c.netmask ?? (v6 ? 128 : '255.255.255.255'),
        ...(c.pe ? { pe: c.pe } : {}),
        destinations: [],
      } as unknown as Parameters<typeof formatSave>[0][number]);
    } else if (op.op === 'addDestination') {
      const s = services.find((x) => ('fwmark' in op.service ? x.fwmark === op.service.fwmark : x.address === op.service.address && x.port === op.service.port && x.protocol === op.service.protocol))!;
      const d = op.dest;
      const t = d.tunnel ?? (d.forward === 'tunnel' ? { type: 'ipip' as const } : undefined);
      s.destinations!.push({
        family: d.address.includes(':') ? 'inet6' : 'inet',
        address: d.address,
        port: d.port,
        forward: d.forward ?? 'droute',
        weight: d.weight ?? 1,
        upperThreshold: 0,
        lowerThreshold: 0,
        ...(t ? { tunnel: { ...t, checksum: t.checksum ?? 'none' } } : {}),
        activeConns: 0,
        inactiveConns: 0,
        persistentConns: 0,
      });
    }
  }
  return services;
}
