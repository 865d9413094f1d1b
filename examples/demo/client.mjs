// Sends N requests to a URL, each on a new connection, and prints the hits per pod and the
// client addresses the pods saw.
import { get } from 'node:http';
const [url, n = '30'] = process.argv.slice(2);
const hits = {};
const clients = new Set();
for (let i = 0; i < Number(n); i++) {
  const body = await new Promise((resolve, reject) => {
    const req = get(url, { agent: false, timeout: 5000 }, (res) => {
      let b = '';
      res.on('data', (c) => (b += c));
      res.on('end', () => resolve(b));
    });
    req.on('timeout', () => req.destroy(new Error(`timeout: ${url}`)));
    req.on('error', reject);
  });
  const { pod, client } = JSON.parse(body);
  hits[pod] = (hits[pod] ?? 0) + 1;
  clients.add(client);
}
console.log(`${url}: ${Object.entries(hits).sort().map(([p, c]) => `${p}=${c}`).join(' ')}   (pods saw clients: ${[...clients].join(', ')})`);
