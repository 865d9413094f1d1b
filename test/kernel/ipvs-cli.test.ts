// The `ipvsync ipvs …` command line as a black box (spawned like a user would), on a real
// kernel inside the test VM, with ipvsadm as the independent reader.
import { test, beforeEach, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'main.js');

function ipvsadm(args: string[], input?: string): string {
  return execFileSync('ipvsadm', args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
}

function cli(args: string[], input?: string): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', input });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

after(() => {
  // Leave the kernel's table empty (the suite's files share one guest kernel).
  ipvsadm(['-C']);
});

beforeEach(() => {
  ipvsadm(['-C']);
});

test('restore applies every rule kind: -A/-E/-D, -a/-e/-d, -C, long options, comments', () => {
  const r = cli(
    ['ipvs', 'restore'],
    `# a comment, then a blank line

-A -t 10.0.0.9:80 -s rr
-C
-A --tcp-service 10.0.0.1:80 --scheduler rr
-E -t 10.0.0.1:80 -s wlc -p 120 -M 255.255.0.0
-a -t 10.0.0.1:80 -r 127.0.0.2:8080 -m -w 3 -x 50 -y 5
-a -t 10.0.0.1:80 -r 127.0.0.3 -g
-e -t 10.0.0.1:80 -r 127.0.0.2:8080 --masquerading --weight 7
-a -t 10.0.0.1:80 -r 127.0.0.4:80 -i --tun-type gue --tun-port 7000 --tun-csum
-a -t 10.0.0.1:80 -r 127.0.0.5:80 --ipip --tun-type gre --tun-csum
-A -u [fd00::1]:53 -s sh -b sh-port
-a -u [fd00::1]:53 -r [fd00::2]:5353 -m
-A -f 9 -6 -s mh -b mh-fallback -p
-A --sctp-service 10.0.0.2:9 -s lc
-D --sctp-service 10.0.0.2:9
-a -t 10.0.0.1:80 -r 127.0.0.6:80 -m
-d -t 10.0.0.1:80 -r 127.0.0.6:80
`,
  );
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    ipvsadm(['-Sn']),
    `-A -t 10.0.0.1:80 -s wlc -p 120 -M 255.255.0.0
-a -t 10.0.0.1:80 -r 127.0.0.2:8080 -m -w 7
-a -t 10.0.0.1:80 -r 127.0.0.3:80 -g -w 1
-a -t 10.0.0.1:80 -r 127.0.0.4:80 -i -w 1 --tun-type gue --tun-port 7000 --tun-csum
-a -t 10.0.0.1:80 -r 127.0.0.5:80 -i -w 1 --tun-type gre --tun-csum
-A -u [fd00::1]:53 -s sh -b sh-port
-a -u [fd00::1]:53 -r [fd00::2]:5353 -m -w 1
-A -f 9 -6 -s mh -p 360 -b mh-fallback
`,
  );
  // -e reset the thresholds (it sends a full destination, as ipvsadm does).
  assert.match(ipvsadm(['-Ln', '--thresholds']), /127\.0\.0\.2:8080 +0 +0 /);
});

test('a parse error anywhere applies nothing and names the line', () => {
  for (const [text, line, why] of [
    ['-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r 127.0.0.2 -m -w 1\n-A -t 10.0.0.2:80 -s rr --bogus\n', 3, /invalid option '--bogus'/],
    ['-A -t 10.0.0.1:80 -s rr\n\n-a -t 10.0.0.1:80 -r 127.0.0.2 -m -w -1\n', 3, /invalid weight/],
    ['-A -t 10.0.0.1:99999 -s rr\n', 1, /port 99999 out of range/],
    ['-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -r [fd00::1]:80 -m\n', 2, /allowed only for tunneling/],
    ['-A -t 10.0.0.1:80 -s rr -b sh-port\n', 1, /incompatible scheduler flag 'sh-port'/],
    ['-A -f 0 -s rr\n', 1, /fwmark/],
    ['-a -t 10.0.0.1:80 -r 127.0.0.2 -i --tun-type gue\n', 1, /tun-port/],
    ['-A -t 10.0.0.1:80 -s rr\n-X\n', 2, /invalid option '-X'/],
    ['-A -t 10.0.0.1:80 -s rr\n-a -t 10.0.0.1:80 -m\n', 2, /needs a real server/],
  ] as const) {
    const r = cli(['ipvs', 'restore'], text);
    assert.equal(r.code, 2, `exit status for ${JSON.stringify(text)}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`line ${line}: `));
    assert.match(r.stderr, why);
    assert.match(r.stderr, /nothing applied/);
    assert.equal(ipvsadm(['-Sn']), '', 'nothing applied');
  }
});

test('values the addon refuses (over-long scheduler or pe name) exit 2 naming the line, nothing applied', () => {
  for (const [text, line, why] of [
    ['-A -t 10.0.0.1:80 -s rr\n-A -t 10.0.0.2:80 -s abcdefghijklmnop\n', 2, /scheduler name must be 1-15 characters/],
    ['-A -t 10.0.0.1:80 -s rr\n-A -t 10.0.0.2:80 -s rr\n-A -t 10.0.0.3:80 -s rr -p --pe abcdefghijklmnopqrstuvwxyz0123456789abcd\n', 3, /persistence engine name must be 1-15 characters/],
  ] as const) {
    const r = cli(['ipvs', 'restore'], text);
    assert.equal(r.code, 2, `${JSON.stringify(text)}: ${r.stderr}`);
    assert.match(r.stderr, new RegExp(`line ${line}: `));
    assert.match(r.stderr, why);
    assert.match(r.stderr, /nothing applied/);
    assert.equal(ipvsadm(['-Sn']), '', 'nothing applied');
  }
});

test('save with names (as ipvsadm -S) restores to the same table, and so does ipvsadm -S output', () => {
  // names from the guest's /etc/hosts and /etc/services (127.0.0.1 localhost, http 80/tcp)
  ipvsadm(['-A', '-t', '127.0.0.1:80', '-s', 'rr']);
  ipvsadm(['-a', '-t', '127.0.0.1:80', '-r', '127.0.0.2:8080', '-m', '-w', '2']);
  ipvsadm(['-A', '-u', '10.0.0.1:53', '-s', 'wlc', '-o']);
  const numericBefore = ipvsadm(['-Sn']);
  const ours = cli(['ipvs', 'save']);
  assert.equal(ours.code, 0, ours.stderr);
  assert.match(ours.stdout, /^-A -t localhost:http -s rr$/m);
  assert.equal(ours.stdout, ipvsadm(['-S']), 'what ipvsadm -S prints');
  for (const text of [ours.stdout, ipvsadm(['-S'])]) {
    ipvsadm(['-C']);
    const r = cli(['ipvs', 'restore'], text);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(ipvsadm(['-Sn']), numericBefore);
  }
});

test('a kernel error names the line and errno and stops; --continue goes on', () => {
  const text = '-A -t 10.0.0.1:80 -s rr\n-A -t 10.0.0.1:80 -s rr\n-A -t 10.0.0.2:80 -s rr\n-A -t 10.0.0.3:80 -s nosuchsched\n-A -t 10.0.0.4:80 -s rr\n';
  // The stop is exact: lines after the failing one never reach the kernel, whatever --batch.
  for (const batch of [[], ['--batch', '1'], ['--batch', '64']]) {
    ipvsadm(['-C']);
    const stop = cli(['ipvs', 'restore', ...batch], text);
    assert.equal(stop.code, 1);
    assert.match(stop.stderr, /line 2: EEXIST: IPVS_CMD_NEW_SERVICE tcp 10\.0\.0\.1:80/);
    assert.match(stop.stderr, /stopped; 3 later line\(s\) not applied/);
    assert.match(stop.stderr, /ipvsync: 1 of 5 line\(s\) applied/);
    assert.equal(ipvsadm(['-Sn']), '-A -t 10.0.0.1:80 -s rr\n');
  }

  ipvsadm(['-C']);
  const cont = cli(['ipvs', 'restore', '--continue'], text);
  assert.equal(cont.code, 1);
  assert.match(cont.stderr, /line 2: EEXIST/);
  assert.match(cont.stderr, /line 4: ENOENT: .*scheduler nosuchsched/);
  assert.match(cont.stderr, /3 of 5 line\(s\) applied/);
  assert.equal(ipvsadm(['-Sn']), '-A -t 10.0.0.1:80 -s rr\n-A -t 10.0.0.2:80 -s rr\n-A -t 10.0.0.4:80 -s rr\n');

  // A lone failing line is reported by line.
  ipvsadm(['-C']);
  const whole = cli(['ipvs', 'restore'], '-a -t 10.0.0.1:80 -r 127.0.0.2:80 -m\n');
  assert.equal(whole.code, 1);
  assert.match(whole.stderr, /line 1: ESRCH: IPVS_CMD_NEW_DEST tcp 10\.0\.0\.1:80 -> 127\.0\.0\.2:80/);
});

test('restore of three lines, the middle one a duplicate: exit 1, exactly the first applied', () => {
  const r = cli(['ipvs', 'restore'], '-A -t 10.0.0.1:80 -s rr\n-A -t 10.0.0.1:80 -s rr\n-A -t 10.0.0.3:80 -s rr\n');
  assert.equal(r.code, 1);
  assert.match(r.stderr, /line 2: EEXIST/);
  assert.match(r.stderr, /stopped; 1 later line\(s\) not applied/);
  assert.match(r.stderr, /ipvsync: 1 of 3 line\(s\) applied/);
  assert.equal(ipvsadm(['-Sn']), '-A -t 10.0.0.1:80 -s rr\n', 'the third line never reached the kernel');
});

test('list: ipvsadm -Ln text, --json model, --stats counters; flush empties the table', () => {
  ipvsadm(['-A', '-t', '10.0.0.1:80', '-s', 'rr']);
  ipvsadm(['-a', '-t', '10.0.0.1:80', '-r', '127.0.0.2:80', '-m', '-w', '4']);
  ipvsadm(['-A', '-u', '[fd00::1]:53', '-s', 'wlc']);
  const text = cli(['ipvs', 'list']);
  assert.equal(text.code, 0, text.stderr);
  assert.equal(text.stdout, ipvsadm(['-Ln']));
  const stats = cli(['ipvs', 'list', '--stats']);
  assert.equal(stats.stdout, ipvsadm(['-Ln', '--stats']));
  const json = cli(['ipvs', 'list', '--json', '--stats']);
  assert.equal(json.code, 0, json.stderr);
  const model = JSON.parse(json.stdout) as Array<Record<string, unknown>>;
  const tcp = model.find((s) => s.protocol === 'tcp')!;
  assert.deepEqual(
    { ...tcp, stats: undefined, destinations: (tcp.destinations as Array<Record<string, unknown>>).map((d) => ({ ...d, stats: undefined })) },
    {
      family: 'inet',
      protocol: 'tcp',
      address: '10.0.0.1',
      port: 80,
      scheduler: 'rr',
      flags: [],
      timeout: 0,
      netmask: '255.255.255.255',
      stats: undefined,
      destinations: [
        { family: 'inet', address: '127.0.0.2', port: 80, forward: 'masq', weight: 4, upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0, persistentConns: 0, stats: undefined },
      ],
    },
  );
  assert.equal(typeof (tcp.stats as Record<string, number>).conns, 'number');
  assert.ok(model.some((s) => s.address === 'fd00::1' && s.family === 'inet6'));

  const flush = cli(['ipvs', 'flush']);
  assert.equal(flush.code, 0, flush.stderr);
  assert.equal(ipvsadm(['-Sn']), '');
  assert.equal(cli(['ipvs', 'save', '-n']).stdout, '');
});
