// The one address/CIDR module every layer uses: validity as inet_pton has it, RFC 5952 text,
// one total order, kube-proxy's sloppy CIDRs next to the engine's parse, and membership.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isIP } from 'node:net';
import {
  addressFamily,
  anyContains,
  canonicalAddress,
  canonicalNetwork,
  cidrContains,
  cidrText,
  sloppyIp,
  compareAddress,
  familyOf,
  formatIPv6Words,
  hostPrefix,
  ipFamily,
  isIpv6LinkLocal,
  ipv4Number,
  ipv6Words,
  networkText,
  parseCidr,
  parseCidrText,
  validIp,
} from '../../src/net/address.js';
import { encodeValue } from '../../src/kernel/nft-types.js';
import { prng } from '../helpers/bytes.js';

test('IPv4: a dotted quad without leading zeros, as a number', () => {
  assert.equal(ipv4Number('0.0.0.0'), 0);
  assert.equal(ipv4Number('255.255.255.255'), 0xffffffff);
  assert.equal(ipv4Number('10.1.2.3'), 0x0a010203);
  for (const bad of ['010.1.2.3', '10.01.2.3', '00.1.2.3', '256.1.2.3', '1.2.3', '1.2.3.4.5', '1..2.3', '.1.2.3', '1.2.3.', '', ' 1.2.3.4', '1.2.3.4/32', '::1'])
    assert.equal(ipv4Number(bad), -1, bad);
  assert.equal(addressFamily('010.1.2.3'), 0);
  assert.equal(validIp('010.1.2.3'), undefined);
  // the nftables codec reads addresses with the same parser
  assert.throws(() => encodeValue('ipv4_addr', '010.1.2.3', Buffer.alloc(4), 0), /not an IPv4 address/);
  assert.throws(() => encodeValue('ipv6_addr', '::ffff:010.1.2.3', Buffer.alloc(16), 0), /not an IPv6 address/);
});

test('a zone index is no address for the kernel, though isIP takes it', () => {
  assert.equal(isIP('fe80::1%eth0'), 6);
  assert.equal(addressFamily('fe80::1%eth0'), 0);
  assert.equal(ipv6Words('fe80::1%eth0'), undefined);
  assert.equal(validIp('fe80::1%eth0'), undefined);
  assert.equal(ipFamily('fe80::1%eth0'), undefined);
  assert.equal(canonicalAddress('fe80::1%eth0'), 'fe80::1%eth0', 'unchanged, never thrown on');
  assert.throws(() => parseCidr('fe80::1%eth0/64'), RangeError);
  assert.equal(parseCidrText('fe80::%eth0/64'), undefined);
});

test('IPv6 canonical text: lower case, no leading zeros, the first longest zero run (≥ 2) as ::', () => {
  const cases: [string, string][] = [
    ['::', '::'],
    ['0:0:0:0:0:0:0:0', '::'],
    ['::1', '::1'],
    ['FD00:0000:0000:0000:0000:0000:0000:0001', 'fd00::1'],
    ['fd00:0:0:1:0:0:0:1', 'fd00:0:0:1::1'],
    ['fd00:0:0:1:1:0:0:1', 'fd00::1:1:0:0:1'],
    ['1:0:2:3:4:5:6:7', '1:0:2:3:4:5:6:7'],
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0'],
    ['fd00:0096::', 'fd00:96::'],
    ['::ffff:1.2.3.4', '::ffff:102:304'],
    ['64:ff9b::192.0.2.1', '64:ff9b::c000:201'],
  ];
  for (const [text, canon] of cases) {
    assert.equal(canonicalAddress(text), canon, text);
    assert.equal(formatIPv6Words(ipv6Words(text)!), canon, text);
  }
  assert.equal(canonicalAddress('10.0.0.1'), '10.0.0.1');
  assert.equal(canonicalAddress('not an address'), 'not an address');
  for (const bad of ['1::2::3', '12345::', ':::', '1:2:3:4:5:6:7:8:9', 'g::1', '1:2:3:4:5:6:7', '::1.2.3', '::01.2.3.4', '1.2.3.4', ':1::'])
    assert.equal(ipv6Words(bad), undefined, bad);
});

test('IPv6 canonical text is the URL parser\'s for every address isIP takes', () => {
  const rand = prng(41);
  for (let i = 0; i < 2000; i++) {
    const w = Array.from({ length: 8 }, () => (rand() < 0.4 ? 0 : Math.floor(rand() * 65536)));
    let text = w.map((x) => x.toString(16)).join(':');
    const from = Math.floor(rand() * 8);
    const to = from + Math.floor(rand() * (9 - from));
    if (rand() < 0.5) text = `${w.slice(0, from).map((x) => x.toString(16)).join(':')}::${w.slice(to).map((x) => x.toString(16)).join(':')}`;
    if (rand() < 0.3) text = text.toUpperCase();
    if (isIP(text) !== 6) continue;
    assert.equal(canonicalAddress(text), new URL(`http://[${text}]/`).hostname.slice(1, -1), text);
  }
});

test('an IPv4-mapped IPv6 address is IPv6 to the kernel and not a valid IP for kube', () => {
  assert.equal(addressFamily('::ffff:1.2.3.4'), 6);
  assert.equal(familyOf('::ffff:1.2.3.4'), 'inet6');
  assert.equal(validIp('::ffff:1.2.3.4'), undefined);
  assert.equal(validIp('::ffff:102:304'), undefined);
  assert.equal(validIp('::fffe:1.2.3.4'), '::fffe:102:304');
});

test('families', () => {
  assert.equal(addressFamily('10.0.0.1'), 4);
  assert.equal(addressFamily('fd00::1'), 6);
  assert.equal(addressFamily(7), 0);
  assert.equal(ipFamily('10.0.0.1'), 'inet');
  assert.equal(ipFamily('fd00::1'), 'inet6');
  assert.equal(ipFamily('x'), undefined);
  assert.equal(ipFamily('010.0.0.1'), undefined);
  assert.ok(isIpv6LinkLocal('FE80::1') && isIpv6LinkLocal('febf::1') && !isIpv6LinkLocal('fec0::1') && !isIpv6LinkLocal('10.0.0.1'));
  assert.equal(familyOf('x'), 'inet');
  assert.equal(hostPrefix('10.0.0.1'), 32);
  assert.equal(hostPrefix('fd00::1'), 128);
  assert.equal(validIp(' 10.0.0.1 '), '10.0.0.1');
  assert.equal(validIp('FD00:0::1'), 'fd00::1');
  assert.equal(validIp(''), undefined);
  assert.equal(validIp(undefined), undefined);
});

test('one total order: IPv4 by number, then IPv6 by number, then anything else', () => {
  const sorted = ['0.0.0.0', '9.255.255.255', '10.0.0.2', '10.0.0.10', '255.255.255.255', '::', '::1', '::ffff:1.2.3.4', '::ffff:102:305', 'fd00::2', 'fd00::10', 'fd00:1::', 'ffff::', 'x'];
  const rand = prng(7);
  const shuffled = sorted.map((a) => [rand(), a] as const).sort((x, y) => x[0] - y[0]).map(([, a]) => a);
  assert.deepEqual(shuffled.sort(compareAddress), sorted);
  assert.equal(compareAddress('fd00::1', 'FD00:0::1'), 0, 'the same address in two texts');
});

test('parseCidr: /0, /32, /128, a bare address, host bits dropped; refuses what is no CIDR', () => {
  const v4 = parseCidr('10.1.2.3/16');
  assert.equal(cidrText(v4), '10.1.0.0/16');
  assert.equal(cidrText(parseCidr('0.0.0.0/0')), '0.0.0.0/0');
  assert.equal(cidrText(parseCidr('203.0.113.7/0')), '0.0.0.0/0');
  assert.equal(cidrText(parseCidr('203.0.113.7')), '203.0.113.7/32');
  assert.equal(cidrText(parseCidr('203.0.113.7/32')), '203.0.113.7/32');
  assert.equal(cidrText(parseCidr('::/0')), '::/0');
  assert.equal(cidrText(parseCidr('fd00::1')), 'fd00::1/128');
  assert.equal(cidrText(parseCidr('fd00:0096::1/108')), 'fd00:96::/108');
  assert.equal(networkText(parseCidr('fd00:1:2:3::/48')), 'fd00:1:2::');
  assert.equal(canonicalNetwork('FD00:0:0:0:1::/64'), 'fd00::/64');
  for (const bad of ['10.0.0.0/33', 'fd00::/129', '10.0.0.0/-1', '10.0.0.0/1.5', 'x/8', '010.0.0.0/8', ''])
    assert.throws(() => parseCidr(bad), RangeError, bad);
});

test("parseCidrText is kube-proxy's (ParseCIDRSloppy): trimmed, an IP as sloppyIp reads it, decimal length, host bits to the network", () => {
  assert.equal(cidrText(parseCidrText(' 203.0.113.7/24 ')!), '203.0.113.0/24');
  assert.equal(cidrText(parseCidrText('203.0.113.7')!), '203.0.113.7/32');
  assert.equal(cidrText(parseCidrText('fd00::1/128')!), 'fd00::1/128');
  assert.equal(cidrText(parseCidrText('10.0.0.0/008')!), '10.0.0.0/8');
  assert.equal(cidrText(parseCidrText('010.0.0.0/8')!), '10.0.0.0/8', 'leading zeros are decimal');
  assert.equal(cidrText(parseCidrText('203.0.113.000/025')!), '203.0.113.0/25');
  for (const bad of ['10.0.0.0/33', '10.0.0.0/0x8', '10.0.0.0/ 8', '10.0.0.0/', '010.0.0.256/8', '::ffff:10.0.0.0/104', 'fd00::/1280', 7, undefined])
    assert.equal(parseCidrText(bad), undefined, String(bad));
});

test("sloppyIp is kube-proxy's ParseIPSloppy: leading zeros decimal, an IPv4-mapped IPv6 address its IPv4 one; validIp stays strict", () => {
  assert.equal(sloppyIp('172.30.0.041'), '172.30.0.41');
  assert.equal(sloppyIp('10.180.00.001'), '10.180.0.1');
  assert.equal(sloppyIp(' 1.2.3.004 '), '1.2.3.4');
  assert.equal(sloppyIp('0000010.0.0.1'), '10.0.0.1');
  assert.equal(sloppyIp('::ffff:1.2.3.4'), '1.2.3.4');
  assert.equal(sloppyIp('::FFFF:0102:0304'), '1.2.3.4');
  assert.equal(sloppyIp('10.0.0.1'), '10.0.0.1');
  assert.equal(sloppyIp('FD00:0::1'), 'fd00::1');
  for (const bad of ['10.0.0.256', '10.0.0.0256', '10.0.0', '10.0.0.1.1', '0x10.0.0.1', '1e1.0.0.1', '', ' ', 'fe80::1%eth0', '::fffe:1.2.3.4x', 7, undefined])
    assert.equal(sloppyIp(bad), undefined, String(bad));
  assert.equal(validIp('172.30.0.041'), undefined);
  assert.equal(validIp('::ffff:1.2.3.4'), undefined);
});

test('membership: family, boundaries, /0 and the host prefix', () => {
  const c = parseCidr('10.96.0.0/12');
  assert.ok(cidrContains(c, '10.96.0.0'));
  assert.ok(cidrContains(c, '10.111.255.255'));
  assert.ok(!cidrContains(c, '10.112.0.0'));
  assert.ok(!cidrContains(c, '010.96.0.1'));
  assert.ok(!cidrContains(c, 'fd00::1'));
  assert.ok(cidrContains(parseCidr('0.0.0.0/0'), '255.255.255.255'));
  assert.ok(!cidrContains(parseCidr('0.0.0.0/0'), '::1'));
  assert.ok(cidrContains(parseCidr('::/0'), '::ffff:1.2.3.4'));
  assert.ok(!cidrContains(parseCidr('::/0'), '1.2.3.4'));
  assert.ok(cidrContains(parseCidr('fd00:96::/108'), 'FD00:96::F:FFFF'));
  assert.ok(!cidrContains(parseCidr('fd00:96::/108'), 'fd00:96::10:0'));
  assert.ok(cidrContains(parseCidr('10.0.0.1/32'), '10.0.0.1'));
  assert.ok(!cidrContains(parseCidr('10.0.0.1/32'), '10.0.0.2'));
  assert.ok(cidrContains(parseCidr('fd00::1/128'), 'fd00:0::1'));
  assert.ok(!cidrContains(parseCidr('fd00::1/128'), 'fd00::1%eth0'));
  const cidrs = ['10.0.0.0/8', 'fd00::/16'].map(parseCidr);
  assert.ok(anyContains(cidrs, '10.1.1.1') && anyContains(cidrs, 'fd00::5'));
  assert.ok(!anyContains(cidrs, '11.0.0.1') && !anyContains([], '10.0.0.1'));
});
