// Random IPVS op batches, valid and not (bad values of every kind, shared service objects for
// back-references), for the packed form's differential test (test/unit/ipvs-pack.test.ts).
import { prng } from './bytes.js';

export function* randomIpvsBatches(seed: number, rounds: number): Generator<unknown[]> {
  const rand = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const maybe = <T>(p: number, v: () => T): T | undefined => (rand() < p ? v() : undefined);
  const ints = [0, 1, 2, 80, 255, 256, 65535, 65536, -1, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 360, 129, 128, 24];
  const addrs = ['10.0.0.1', '10.96.1.2', 'fd00::1', '::1', '0.0.0.0', '10.0.0.256', 'nope', '', '224.0.0.81', 'ff02::1', '127.0.0.1'];
  const strs = ['rr', 'wlc', 'sh', 'mh', '', 'x'.repeat(16), 'sip', 'masq', 'tunnel', 'droute', 'local', 'nat', 'gue', 'gre', 'ipip', 'vxlan', 'csum', 'remcsum', 'none', 'inet', 'inet6', 'lo', 'master', 'backup'];
  const flags = ['persistent', 'one-packet', 'sh-fallback', 'sh-port', 'mh-fallback', 'mh-port', 'flag-1', 'flag-2', 'flag-3', 'sticky'];
  const service = (): Record<string, unknown> => {
    const s: Record<string, unknown> = {};
    if (rand() < 0.15) s.fwmark = pick(ints);
    if (rand() < 0.9) s.protocol = pick(['tcp', 'udp', 'sctp', 'icmp']);
    if (rand() < 0.9) s.address = pick(addrs);
    if (rand() < 0.9) s.port = pick(ints);
    if (rand() < 0.1) s.family = pick(['inet', 'inet6', 'ipx']);
    if (rand() < 0.6) s.scheduler = pick(strs);
    if (rand() < 0.2) s.flags = Array.from({ length: Math.floor(rand() * 3) }, () => pick(flags));
    if (rand() < 0.1) s.timeout = pick(ints);
    if (rand() < 0.1) s.netmask = rand() < 0.5 ? pick(ints) : pick(['255.255.255.0', '255.0.0.0', 'fd00::', 'mask']);
    if (rand() < 0.05) s.pe = pick(strs);
    return s;
  };
  const dest = (): Record<string, unknown> => {
    const d: Record<string, unknown> = {};
    if (rand() < 0.95) d.address = pick(addrs);
    if (rand() < 0.95) d.port = pick(ints);
    if (rand() < 0.05) d.family = pick(['inet', 'inet6']);
    if (rand() < 0.7) d.forward = pick(['masq', 'droute', 'tunnel', 'local', 'nat']);
    if (rand() < 0.6) d.weight = pick(ints);
    if (rand() < 0.1) d.upperThreshold = pick(ints);
    if (rand() < 0.1) d.lowerThreshold = pick(ints);
    if (rand() < 0.1) d.tunnel = { type: maybe(0.8, () => pick(['ipip', 'gue', 'gre', 'vxlan'])), port: maybe(0.5, () => pick(ints)), checksum: maybe(0.5, () => pick(['none', 'csum', 'remcsum', 'x'])) };
    return d;
  };
  for (let round = 0; round < rounds; round++) {
    const services = Array.from({ length: 3 }, service);
    const ops: unknown[] = [];
    const n = 1 + Math.floor(rand() * 12);
    for (let i = 0; i < n; i++) {
      const kind = pick(['addService', 'updateService', 'deleteService', 'addDestination', 'addDestination', 'updateDestination', 'deleteDestination', 'flush', 'zero', 'setTimeouts', 'startDaemon', 'stopDaemon', 'bogus']);
      const svc = pick(services); // shared objects: back-references
      if (kind.endsWith('Service')) ops.push({ op: kind, service: svc });
      else if (kind.endsWith('Destination')) ops.push({ op: kind, service: svc, dest: dest() });
      else if (kind === 'zero') ops.push(rand() < 0.5 ? { op: kind } : { op: kind, service: svc });
      else if (kind === 'setTimeouts') ops.push({ op: kind, timeouts: { tcp: maybe(0.7, () => pick(ints)), tcpFin: maybe(0.5, () => pick(ints)), udp: maybe(0.5, () => pick(ints)) } });
      else if (kind.endsWith('Daemon'))
        ops.push({ op: kind, daemon: { state: pick(['master', 'backup', 'both']), interface: maybe(0.9, () => pick(strs)), syncId: maybe(0.3, () => pick(ints)), mcastGroup: maybe(0.3, () => pick(addrs)), mcastPort: maybe(0.3, () => pick(ints)), mcastTtl: maybe(0.3, () => pick(ints)), syncMaxLen: maybe(0.3, () => pick(ints)) } });
      else ops.push({ op: kind });
    }
    yield ops;
  }
}
