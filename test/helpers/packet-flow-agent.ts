// One network namespace's sender for the packet-flow lab (packet-flows.ts): reads JSON lines
// on stdin, opens one socket per line from the given source address and port, and sends one
// packet (a TCP SYN, or one UDP datagram). It never waits for an answer: the lab judges each
// packet from the node's conntrack and nftables trace events. A socket stays open until the
// lab closes it, so nothing else (a FIN, a second datagram) follows the packet.
//   {"op":"send","id":7,"proto":"tcp","src":"10.0.0.2","sport":20001,"dst":"172.30.0.41","dport":80}
//   {"op":"close","id":7}
// Answers, one JSON line each, only for a packet that never left:
// {"id":7,"error":"EADDRNOTAVAIL"} (an address this namespace lacks, no route). Errors after the
// packet left (a refusal, an unreachable, EPERM from a drop in the output hook) are the lab's
// to judge from the node's events, and are not reported.
import { spawnSync } from 'node:child_process';
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { connect, isIPv6, type Socket } from 'node:net';
import { createInterface } from 'node:readline';

interface Send {
  op: 'send';
  id: number;
  proto: 'tcp' | 'udp' | 'sctp';
  src: string;
  sport: number;
  dst: string;
  dport: number;
}

/** An SCTP INIT from a raw socket (the kernel may lack SCTP sockets while its conntrack and
 *  nftables know SCTP): Node.js has no raw sockets, Python's socket module does. */
const SCTP_INIT = `
import socket, struct, sys
src, sport, dst, dport = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff
init = struct.pack('!BBHIIHHI', 1, 0, 20, 0x1234abcd, 65536, 1, 1, 1)
hdr = struct.pack('!HHII', sport, dport, 0, 0)
crc = crc32c(hdr + init)
pkt = struct.pack('!HHI', sport, dport, 0) + struct.pack('<I', crc) + init
fam = socket.AF_INET6 if ':' in dst else socket.AF_INET
s = socket.socket(fam, socket.SOCK_RAW, 132)
s.bind((src, 0))
s.sendto(pkt, (dst, 0))
`;

/** Errors of a packet that was never sent. */
const NOT_SENT = new Set(['EADDRNOTAVAIL', 'EADDRINUSE', 'EINVAL', 'ENETUNREACH', 'EACCES']);

const open = new Map<number, Socket | UdpSocket>();
const answer = (o: object) => process.stdout.write(`${JSON.stringify(o)}\n`);

function send(m: Send): void {
  const failed = (e: NodeJS.ErrnoException) => {
    if (NOT_SENT.has(e.code ?? '')) answer({ id: m.id, error: e.code });
  };
  if (m.proto === 'sctp') {
    const r = spawnSync('python3', ['-c', SCTP_INIT, m.src, String(m.sport), m.dst, String(m.dport)], { encoding: 'utf8' });
    if (r.status !== 0) answer({ id: m.id, error: `python3 exited ${r.status}: ${r.stderr.trim().split('\n').pop()}` });
    return;
  }
  if (m.proto === 'udp') {
    const s = createSocket({ type: isIPv6(m.src) ? 'udp6' : 'udp4' });
    open.set(m.id, s);
    s.on('error', failed);
    s.bind({ address: m.src, port: m.sport }, () => s.send('probe', m.dport, m.dst, (e) => e && failed(e)));
    return;
  }
  const s = connect({ host: m.dst, port: m.dport, localAddress: m.src, localPort: m.sport });
  open.set(m.id, s);
  s.on('error', failed);
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const m = JSON.parse(line) as Send | { op: 'close'; id: number };
  if (m.op === 'send') return send(m);
  const s = open.get(m.id);
  open.delete(m.id);
  if (s instanceof Object && 'destroy' in s) s.destroy();
  else s?.close();
});
answer({ ready: true });
