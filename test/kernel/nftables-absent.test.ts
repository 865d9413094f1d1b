// A kernel without nf_tables (issue #58): nfnetlink answers NFT_MSG_GETGEN with EINVAL once the
// module autoload (request_module "nfnetlink-subsys-10") fails. The condition made for real: the
// guest's module autoloader pointed at /bin/false, nf_tables and every module holding it
// unloaded; all restored after. Then the nftables handle is refused as `unsupported` naming
// nf_tables, `ipvsync cleanup` skips nftables as it skips the other absent families (exit 0),
// and what needs nftables — the IPVS glue of `sync -f`, the nftables data plane — exits 3 naming
// the module (and `proxy --proxy-mode nftables` refuses to start, exit 3), while
// `sync -f --no-glue` runs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NetlinkError } from '../../src/errors.js';
import { Nftables } from '../../src/kernel/nftables.js';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'main.js');
const MODPROBE = '/proc/sys/kernel/modprobe';
const NETNS = 'ipvsync-nonft';

function cli(args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, '--netns', `/run/netns/${NETNS}`, ...args], { encoding: 'utf8' });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** A loaded module (built-in ones have no refcnt). */
const loaded = (m: string) => existsSync(`/sys/module/${m}/refcnt`);

/** Unloads `m` after every module holding it; returns them in the order unloaded. */
function unload(m: string, out: string[] = []): string[] {
  if (!loaded(m)) return out;
  for (const h of readdirSync(`/sys/module/${m}/holders`)) unload(h, out);
  const refs = readFileSync(`/sys/module/${m}/refcnt`, 'utf8').trim();
  const r = spawnSync('rmmod', [m], { encoding: 'utf8' });
  assert.equal(r.status, 0, `rmmod ${m} (refcnt ${refs}): ${r.stderr}`);
  out.push(m);
  return out;
}

let skip: string | undefined;
let modprobe = '';
let removed: string[] = [];

before(() => {
  if (existsSync('/sys/module/nf_tables') && !loaded('nf_tables')) {
    skip = 'nf_tables is built into this kernel: it cannot be made absent';
    return;
  }
  modprobe = readFileSync(MODPROBE, 'utf8').trim();
  writeFileSync(MODPROBE, '/bin/false\n'); // every module autoload fails from here on
  spawnSync('nft', ['flush', 'ruleset']); // rules hold their expressions' modules
  removed = unload('nf_tables');
  spawnSync('ip', ['netns', 'del', NETNS]);
  execFileSync('ip', ['netns', 'add', NETNS]);
  execFileSync('ip', ['-n', NETNS, 'link', 'set', 'lo', 'up']);
});

after(() => {
  spawnSync('ip', ['netns', 'del', NETNS]);
  if (modprobe) writeFileSync(MODPROBE, `${modprobe}\n`);
  // what the guest had loaded, back for the test files after this one
  // (through the guest's own helper: under UML a wrapper that knows where its modules are)
  for (const m of removed.reverse()) spawnSync(modprobe, [m]);
});

test('without nf_tables the nftables handle is refused as unsupported, naming the module (GETGEN answered EINVAL)', async (t) => {
  if (skip) return t.skip(skip);
  assert.equal(loaded('nf_tables'), false, 'nf_tables is not loaded');
  await assert.rejects(Nftables.open({ netns: `/run/netns/${NETNS}` }), (e: unknown) => {
    assert.ok(e instanceof NetlinkError, String(e));
    assert.equal(e.kind, 'unsupported');
    assert.equal(e.code, 'EINVAL');
    assert.equal(e.op, 'NFT_MSG_GETGEN');
    assert.match(e.message, /module nf_tables is not loaded/);
    return true;
  });
  assert.equal(loaded('nf_tables'), false, 'nothing loaded it meanwhile');
});

test('cleanup skips nftables as it skips the other families the kernel lacks (exit 0, named in the output)', (t) => {
  if (skip) return t.skip(skip);
  const r = cli(['cleanup']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /removed .* \(not in this kernel, skipped: .*nftables/);
});

test('sync -f: the IPVS glue and the nftables data plane need nf_tables (exit 3, naming it); --no-glue runs without it', (t) => {
  if (skip) return t.skip(skip);
  const dir = mkdtempSync(join(tmpdir(), 'ipvsync-nonft-'));
  writeFileSync(
    join(dir, 'svc.yaml'),
    'apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\nspec: {clusterIP: 10.96.0.10, ports: [{name: http, port: 80}]}\n---\n' +
      'apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: web-1, namespace: default, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\nendpoints: [{addresses: [10.244.1.5]}]\nports: [{name: http, port: 8080}]\n',
  );
  const common = ['--hostname-override', 'node-a', '--node-ip', '10.0.0.11', '--no-sysctl', '--vip-link', 'ipvsync-nonft0'];
  for (const mode of [[], ['--proxy-mode', 'nftables']]) {
    const r = cli(['sync', '-f', dir, ...common, ...mode]);
    assert.equal(r.code, 3, `sync -f ${mode.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, /nf_tables/);
    assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
  }
  // the daemon's preflight says the same before it starts
  const d = spawnSync(process.execPath, [CLI, '--netns', `/run/netns/${NETNS}`, 'proxy', '--proxy-mode', 'nftables', '--manifests', dir, '--hostname-override', 'node-a'], { encoding: 'utf8', timeout: 120_000 });
  assert.equal(d.status, 3, `proxy --proxy-mode nftables: ${d.stderr}`);
  assert.match(d.stderr, /nftables is not available in this kernel .*nf_tables/);
  const ok = cli(['sync', '-f', dir, ...common, '--no-glue']);
  assert.equal(ok.code, 0, ok.stderr);
  const ipvs = execFileSync('ip', ['netns', 'exec', NETNS, 'ipvsadm', '-Ln'], { encoding: 'utf8' });
  assert.match(ipvs, /TCP\s+10\.96\.0\.10:80/);
  assert.equal(cli(['cleanup', '--vip-link', 'ipvsync-nonft0']).code, 0);
});
