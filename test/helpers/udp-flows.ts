/**
 * A node script (for `node -e`, run inside a client namespace) that sends one UDP datagram from
 * each source port to each target, so conntrack records one flow per (source port, target).
 * One socket per family and source port (a v6 socket only for v6, so both can share a port).
 */
export function udpFlowScript(targets: Array<[string, number]>, sourcePorts: readonly number[]): string {
  return `
    const dgram = require('node:dgram');
    const targets = ${JSON.stringify(targets)};
    const jobs = [];
    for (const v6 of [false, true]) {
      const mine = targets.filter(([h]) => h.includes(':') === v6);
      if (mine.length) for (const sport of ${JSON.stringify(sourcePorts)}) jobs.push([v6, sport, mine]);
    }
    let left = jobs.length;
    for (const [v6, sport, mine] of jobs) {
      const s = dgram.createSocket({ type: v6 ? 'udp6' : 'udp4', ipv6Only: v6 });
      s.bind(sport, async () => {
        for (const [host, port] of mine) await new Promise((ok, bad) => s.send('x', port, host, (e) => (e ? bad(e) : ok())));
        s.close();
        if (--left === 0) process.exit(0);
      });
    }`;
}
