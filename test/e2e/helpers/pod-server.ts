// A "pod" process for the end-to-end tests, started inside the pod's network namespace. It
// answers with its name and the client address it saw, over three protocols:
//   HTTP on 8080 (one answer per request),
//   TCP on 9000, line by line on a persistent connection (for draining),
//   UDP on 5300 (one datagram per datagram).
// Dual-stack: IPv4 clients are reported as plain IPv4 addresses. It prints "ready" once all
// three listen.
import { createSocket } from 'node:dgram';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createTcpServer } from 'node:net';

const name = process.argv[2] ?? 'pod';
const answer = (client: string | undefined) => JSON.stringify({ pod: name, client: client?.replace(/^::ffff:(?=\d+\.)/, '') }) + '\n';

const http = createHttpServer((req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(answer(req.socket.remoteAddress));
});
http.on('clientError', (_e, socket) => socket.destroy());

const lines = createTcpServer((sock) => {
  // A client resetting its connection is part of the tests.
  sock.on('error', () => sock.destroy());
  let buf = '';
  sock.on('data', (d) => {
    buf += d.toString('utf8');
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      buf = buf.slice(i + 1);
      sock.write(answer(sock.remoteAddress));
    }
  });
});

const udp = createSocket({ type: 'udp6', ipv6Only: false });
udp.on('message', (_m, r) => udp.send(answer(r.address), r.port, r.address));

await Promise.all([
  new Promise<void>((resolve) => http.listen({ port: 8080, host: '::', ipv6Only: false }, resolve)),
  new Promise<void>((resolve) => lines.listen({ port: 9000, host: '::', ipv6Only: false }, resolve)),
  new Promise<void>((resolve) => udp.bind(5300, '::', resolve)),
]);
process.stdout.write('ready\n');
process.on('SIGTERM', () => process.exit(0));
