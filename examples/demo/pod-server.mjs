// A demo "pod": answers every HTTP request with its name and the client address it saw.
import { createServer } from 'node:http';
const name = process.argv[2] ?? 'pod';
createServer((req, res) => {
  res.end(JSON.stringify({ pod: name, client: req.socket.remoteAddress }) + '\n');
}).listen(8080, '0.0.0.0');
