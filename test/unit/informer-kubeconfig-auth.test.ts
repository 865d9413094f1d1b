// The kubeconfig without the client's generated API: the in-cluster service account (token
// re-read as it ages), a token file, client certificates and a CA over real TLS, an exec plugin
// handed to the full client; and that the informers and the config load no generated API.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { connect, createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApiConfig, KubeConfigError, loadKubeConfig } from '../../src/kube/kubeconfig.js';
import { KubeSources, type KubeSourcesOptions } from '../../src/kube/informers.js';
import { proxyAgent } from '../../src/kube/proxy-agent.js';
import { FakeApiServer } from '../helpers/fake-apiserver.js';
import { NODE, nodeObj, svcObj, TEST_OPTS } from '../helpers/informer-harness.js';

const tmp = () => mkdtempSync(join(tmpdir(), 'ipvsync-kc-'));
const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');

/** Lists and watches Services, Slices and the Node through `kubeConfig` until synced and the
 *  four watches are open; returns the Service names seen. */
async function syncThrough(api: FakeApiServer, kubeConfig: KubeSourcesOptions['kubeConfig']): Promise<string[]> {
  const seen: string[] = [];
  const sources = new KubeSources({
    kubeConfig,
    nodeName: NODE,
    ...TEST_OPTS,
    handlers: {
      onServiceUpdate: (s) => seen.push(s.metadata?.name ?? ''),
      onServiceDelete: () => {},
      onSliceUpdate: () => {},
      onSliceDelete: () => {},
      onNode: () => {},
    },
  });
  sources.start();
  try {
    await sources.synced();
    await api.waitFor(() => api.openWatches() === 4, 'four watches');
  } finally {
    await sources.stop();
  }
  return seen;
}

test('in-cluster: the service account token (re-read once a minute old), its CA, the server from the environment', async (t) => {
  const dir = tmp();
  writeFileSync(join(dir, 'token'), 'tok-1\n');
  writeFileSync(join(dir, 'ca.crt'), 'CA PEM');
  t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 });
  const kc = loadKubeConfig({ env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' }, serviceAccountDir: dir });
  assert.equal(kc.getCurrentCluster().server, 'https://10.96.0.1:443');
  const opts = async () => {
    const o: https.RequestOptions = {};
    await kc.applyToHTTPSOptions(o);
    return o;
  };
  const first = await opts();
  assert.equal((first.headers as Record<string, string>).Authorization, 'Bearer tok-1');
  assert.equal(first.ca?.toString(), 'CA PEM');
  assert.ok(first.agent instanceof https.Agent);
  assert.equal(first.rejectUnauthorized, undefined, 'TLS verified');
  writeFileSync(join(dir, 'token'), 'tok-2\n');
  t.mock.timers.tick(59_000);
  assert.equal(((await opts()).headers as Record<string, string>).Authorization, 'Bearer tok-1', 'not re-read within a minute');
  t.mock.timers.tick(2_000);
  assert.equal(((await opts()).headers as Record<string, string>).Authorization, 'Bearer tok-2', 'the rotated token');
  const v6 = loadKubeConfig({ env: { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' }, serviceAccountDir: dir });
  assert.equal(v6.getCurrentCluster().server, 'https://[fd00::1]:6443');
  const master = loadKubeConfig({ env: { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' }, server: 'https://10.0.0.1:6443', serviceAccountDir: dir });
  assert.equal(master.getCurrentCluster().server, 'https://10.0.0.1:6443', '--master alone wins over the pod environment');
  assert.equal(master.getCurrentUser().name, 'anonymous');
});

test('a kubeconfig token-file (relative to the file): lists and watches carry it', async () => {
  const api = await FakeApiServer.start();
  try {
    api.create('services', svcObj('web', '10.96.0.10'));
    api.create('nodes', nodeObj(NODE));
    const dir = tmp();
    writeFileSync(join(dir, 'sa-token'), 'from-file\n');
    const file = join(dir, 'kubeconfig');
    writeFileSync(file, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${api.url}", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token-file: sa-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`);
    const kc = loadKubeConfig({ kubeconfig: file, env: {} });
    assert.equal(kc.tokenFile, join(dir, 'sa-token'));
    assert.deepEqual(await syncThrough(api, kc), ['web']);
    assert.equal(api.requests.length, 8, 'a list and a watch of each of the four resources');
    for (const r of api.requests) assert.equal(r.authorization, 'Bearer from-file', `${r.resource} ${r.watch ? 'watch' : 'list'}`);
  } finally {
    await api.stop();
  }
});

test("client-go's tokenFile (kubeadm's kube-proxy kubeconfig), relative to the file: lists and watches carry it; a token wins over it; a missing file fails the requests, not the load", async () => {
  const api = await FakeApiServer.start();
  try {
    api.create('services', svcObj('web', '10.96.0.10'));
    api.create('nodes', nodeObj(NODE));
    const dir = tmp();
    writeFileSync(join(dir, 'token'), 'from-tokenfile\n');
    const file = join(dir, 'kubeconfig');
    const write = (user: string) => writeFileSync(file, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${api.url}/", insecure-skip-tls-verify: true}}]
users: [{name: u, user: ${user}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`);
    write('{tokenFile: token}');
    const kc = loadKubeConfig({ kubeconfig: file, env: {} });
    assert.equal(kc.tokenFile, join(dir, 'token'));
    assert.equal(kc.cluster.server, api.url, "the server's trailing slash dropped, as the client does");
    assert.equal('tokenFile' in kc.user, false, 'the user is the client-shaped User');
    assert.deepEqual(await syncThrough(api, kc), ['web']);
    for (const r of api.requests) assert.equal(r.authorization, 'Bearer from-tokenfile', `${r.resource} ${r.watch ? 'watch' : 'list'}`);
    write('{token: inline, tokenFile: token}');
    const both = loadKubeConfig({ kubeconfig: file, env: {} });
    assert.equal(both.tokenFile, undefined);
    const o: https.RequestOptions = {};
    await both.applyToHTTPSOptions(o);
    assert.equal((o.headers as Record<string, string>).Authorization, 'Bearer inline');
    write('{tokenFile: missing}');
    const missing = loadKubeConfig({ kubeconfig: file, env: {} });
    assert.equal(missing.tokenFile, join(dir, 'missing'));
    await assert.rejects(missing.applyToHTTPSOptions({}), /ENOENT.*missing/);
  } finally {
    await api.stop();
  }
});

test('the schema checks of the client: a missing name, cluster, server or context is named by its index', () => {
  const file = join(tmp(), 'kubeconfig');
  const cases: Array<[string, RegExp]> = [
    ['clusters: [{cluster: {server: "https://a"}}]', /clusters\[0\]\.name is missing/],
    ['clusters: [{name: c}]', /clusters\[0\]\.cluster is missing/],
    ['clusters: [{name: c, cluster: {}}]', /clusters\[0\]\.cluster\.server is missing/],
    ['users: [{name: u}, {user: {token: t}}]', /users\[1\]\.name is missing/],
    ['contexts: [{name: x}]', /contexts\[0\]\.context is missing/],
    ['contexts: [{context: {cluster: c}}]', /contexts\[0\]\.name is missing/],
    ['contexts: [{name: x, context: {user: u}}]', /contexts\[0\]\.context\.cluster is missing/],
  ];
  for (const [doc, message] of cases) {
    writeFileSync(file, `${doc}\ncurrent-context: x\n`);
    assert.throws(() => loadKubeConfig({ kubeconfig: file, env: {} }), (e: Error) => e instanceof KubeConfigError && e.message.startsWith(`kubeconfig ${file}: `) && message.test(e.message), doc);
  }
});

test('clear errors: a context naming a missing cluster, plain http without skipping TLS verification', () => {
  const dir = tmp();
  const file = join(dir, 'kubeconfig');
  writeFileSync(file, 'clusters: []\nusers: []\ncontexts: [{name: x, context: {cluster: gone, user: u}}]\ncurrent-context: x\n');
  assert.throws(() => loadKubeConfig({ kubeconfig: file, env: {} }), (e: Error) => e instanceof KubeConfigError && /names cluster "gone", which is not defined/.test(e.message));
  writeFileSync(file, 'clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n');
  return assert.rejects(loadKubeConfig({ kubeconfig: file, env: {} }).applyToHTTPSOptions({}), /plain http needs insecure-skip-tls-verify/);
});

/** One GET through `config`'s credentials, TLS settings and agent: `HTTP <status>` if answered,
 *  else the request's error message. */
async function getOnce(config: ApiConfig, url: string): Promise<string> {
  const o: https.RequestOptions = {};
  await config.applyToHTTPSOptions(o);
  return new Promise((resolve) => https.get(url, o, (res) => resolve(`HTTP ${res.statusCode}`)).on('error', (e) => resolve(e.message)));
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl. */
function certificates(): Record<'ca' | 'serverCert' | 'serverKey' | 'clientCert' | 'clientKey', Buffer> {
  const d = tmp();
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: d, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  ssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=ipvsync-test-ca');
  writeFileSync(join(d, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  for (const [name, cn, ext] of [['server', '127.0.0.1', ['-extfile', 'san.ext']], ['client', 'system:kube-proxy', []]] as const) {
    ssl('req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`);
    ssl('x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', `${name}.crt`, '-days', '1', ...ext);
  }
  const r = (f: string) => readFileSync(join(d, f));
  return { ca: r('ca.crt'), serverCert: r('server.crt'), serverKey: r('server.key'), clientCert: r('client.crt'), clientKey: r('client.key') };
}

/** TLS in front of the fake API server (its certificate for 127.0.0.1 signed by the test CA),
 *  requiring a client certificate signed by the CA when `clientCerts`; `peers` collects the
 *  client certificates' CNs. */
async function tlsFront(api: FakeApiServer, c: ReturnType<typeof certificates>, clientCerts: boolean): Promise<{ server: string; port: number; peers: string[]; close(): Promise<void> }> {
  const peers: string[] = [];
  const tls = https.createServer({ key: c.serverKey, cert: c.serverCert, ca: c.ca, requestCert: clientCerts, rejectUnauthorized: clientCerts }, (req, res) => {
    if (clientCerts) peers.push((req.socket as import('node:tls').TLSSocket).getPeerCertificate().subject.CN as string);
    const up = http.request({ host: '127.0.0.1', port: api.port, path: req.url, method: req.method, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => tls.listen(0, '127.0.0.1', r));
  const port = (tls.address() as AddressInfo).port;
  return {
    server: `https://127.0.0.1:${port}`,
    port,
    peers,
    close: async () => {
      await new Promise((r) => {
        tls.close(r);
        tls.closeAllConnections();
      });
    },
  };
}

test('in-cluster over real TLS: the service account CA verifies the server, every list and watch carries the token', async () => {
  const c = certificates();
  const api = await FakeApiServer.start();
  const front = await tlsFront(api, c, false);
  try {
    api.create('services', svcObj('web', '10.96.0.10'));
    api.create('nodes', nodeObj(NODE));
    const sa = tmp();
    writeFileSync(join(sa, 'token'), 'sa-token\n');
    writeFileSync(join(sa, 'ca.crt'), c.ca);
    const kc = loadKubeConfig({ env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(front.port) }, serviceAccountDir: sa });
    assert.equal(kc.getCurrentCluster().server, front.server);
    assert.deepEqual(await syncThrough(api, kc), ['web']);
    assert.equal(api.requests.length, 8, 'a list and a watch of each of the four resources');
    for (const r of api.requests) assert.equal(r.authorization, 'Bearer sa-token', `${r.resource} ${r.watch ? 'watch' : 'list'}`);
  } finally {
    await front.close();
    await api.stop();
  }
});

test('client certificate and CA from the kubeconfig, over real TLS: lists and watches authenticate; without the CA the server is not trusted', async () => {
  const c = certificates();
  const api = await FakeApiServer.start();
  const { server, peers, close } = await tlsFront(api, c, true);
  try {
    api.create('services', svcObj('web', '10.96.0.10'));
    api.create('nodes', nodeObj(NODE));
    const dir = tmp();
    const file = join(dir, 'kubeconfig');
    writeFileSync(join(dir, 'ca.crt'), c.ca);
    writeFileSync(file, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${server}", certificate-authority: ca.crt}}]
users: [{name: u, user: {client-certificate-data: ${b64(c.clientCert)}, client-key-data: ${b64(c.clientKey)}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`);
    const kc = loadKubeConfig({ kubeconfig: file, env: {} });
    assert.equal(kc.getCurrentCluster().caFile, join(dir, 'ca.crt'), 'relative to the kubeconfig');
    assert.deepEqual(await syncThrough(api, kc), ['web']);
    assert.ok(peers.length >= 8, `${peers.length} requests`);
    assert.deepEqual([...new Set(peers)], ['system:kube-proxy'], 'every request presented the client certificate');
    // the same user without the cluster's CA: the self-signed server is refused
    const untrusted = new ApiConfig({ name: 'c', server, skipTLSVerify: false }, kc.getCurrentUser());
    assert.match(await getOnce(untrusted, `${server}/api/v1/nodes`), /self.signed|unable to verify|local issuer/i);
  } finally {
    await close();
    await api.stop();
  }
});

/** A forward proxy as a kubeconfig's proxy-url names one: CONNECT tunnels (an https cluster)
 *  and absolute-URI requests (a plain-http cluster), spoken to over TLS with `tlsCert`; `log`
 *  records what went through it. */
async function forwardProxy(tlsCert?: { key: Buffer; cert: Buffer }): Promise<{ url: string; log: string[]; auth: Array<string | undefined>; refuse: { status?: number }; close(): Promise<void> }> {
  const log: string[] = [];
  const auth: Array<string | undefined> = [];
  const refuse: { status?: number } = {};
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    log.push(`${req.method} ${req.url}`);
    auth.push(req.headers['proxy-authorization']);
    const up = http.request(req.url!, { method: req.method, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode ?? 502, ur.headers);
      ur.pipe(res);
    });
    up.on('error', () => res.destroy());
    res.on('close', () => up.destroy());
    req.pipe(up);
  };
  const proxy = tlsCert ? https.createServer(tlsCert, handler) : http.createServer(handler);
  proxy.on('connect', (req: http.IncomingMessage, client: import('node:net').Socket, head: Buffer) => {
    log.push(`CONNECT ${req.url}`);
    auth.push(req.headers['proxy-authorization']);
    if (refuse.status) {
      client.end(`HTTP/1.1 ${refuse.status} ${http.STATUS_CODES[refuse.status]}\r\n\r\n`);
      return;
    }
    const [host, port] = req.url!.split(':');
    const up = connect(Number(port), host!, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      up.write(head);
      up.pipe(client);
      client.pipe(up);
    });
    // either side closing closes the tunnel
    up.on('error', () => client.destroy());
    up.on('close', () => client.destroy());
    client.on('error', () => up.destroy());
    client.on('close', () => up.destroy());
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  return {
    url: `${tlsCert ? 'https' : 'http'}://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    log,
    auth,
    refuse,
    close: () =>
      new Promise((r) => {
        proxy.close(() => r());
        proxy.closeAllConnections();
      }),
  };
}

test("a cluster behind the kubeconfig's proxy-url, over real TLS: lists and watches tunnel through the proxy (its credentials from the URL), the CA still verifies the server", async () => {
  const c = certificates();
  const api = await FakeApiServer.start();
  const front = await tlsFront(api, c, false);
  const proxy = await forwardProxy();
  try {
    api.create('services', svcObj('web', '10.96.0.10'));
    api.create('nodes', nodeObj(NODE));
    const file = join(tmp(), 'kubeconfig');
    const proxyUrl = proxy.url.replace('http://', 'http://kube%2Dproxy:pa%3Ass@');
    const config = (server: string, tls: string, user = '{token: via-proxy}') => `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "${server}", ${tls}, proxy-url: "${proxyUrl}"}}]
users: [{name: u, user: ${user}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`;
    writeFileSync(file, config(front.server, `certificate-authority-data: ${b64(c.ca)}`));
    const kc = loadKubeConfig({ kubeconfig: file, env: {} });
    assert.equal(kc.usesFullClient, false);
    assert.deepEqual(await syncThrough(api, kc), ['web']);
    assert.equal(api.requests.length, 8, 'a list and a watch of each of the four resources');
    for (const r of api.requests) assert.equal(r.authorization, 'Bearer via-proxy', `${r.resource} ${r.watch ? 'watch' : 'list'}`);
    assert.equal(proxy.log.length, 8, 'a tunnel per request (a fresh agent per request)');
    assert.deepEqual([...new Set(proxy.log)], [`CONNECT 127.0.0.1:${front.port}`], 'every connection was a tunnel to the API server');
    assert.deepEqual([...new Set(proxy.auth)], [`Basic ${b64('kube-proxy:pa:ss')}`], 'the proxy credentials, URL-decoded');

    // Without the CA the tunnelled server is not trusted; a proxy refusing the tunnel is a clear error.
    const get = (config: ApiConfig) => getOnce(config, `${front.server}/api/v1/nodes`);
    assert.match(await get(new ApiConfig({ ...kc.getCurrentCluster(), caData: undefined }, kc.getCurrentUser())), /self.signed|unable to verify|local issuer/i);
    proxy.refuse.status = 403;
    assert.equal(await get(kc), `proxy 127.0.0.1:${proxy.url.split(':')[2]}: CONNECT 127.0.0.1:${front.port}: HTTP 403 Forbidden`);
    proxy.refuse.status = undefined;

    // An exec user (the full client) behind the same proxy: the client's TLS settings, our tunnel.
    proxy.log.length = 0;
    api.requests.length = 0;
    const credential = JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: 'from-exec' } });
    const exec = JSON.stringify({ exec: { apiVersion: 'client.authentication.k8s.io/v1', command: process.execPath, args: ['-e', `process.stdout.write(${JSON.stringify(credential)})`], interactiveMode: 'Never' } });
    writeFileSync(file, config(front.server, `certificate-authority-data: ${b64(c.ca)}`, exec));
    const viaExec = loadKubeConfig({ kubeconfig: file, env: {} });
    assert.equal(viaExec.usesFullClient, true);
    assert.deepEqual(await syncThrough(api, viaExec), ['web']);
    for (const r of api.requests) assert.equal(r.authorization, 'Bearer from-exec', `${r.resource} ${r.watch ? 'watch' : 'list'}`);
    assert.deepEqual([...new Set(proxy.log)], [`CONNECT 127.0.0.1:${front.port}`]);

    // A plain-http cluster behind the proxy: every list and watch is an absolute-URI request to it.
    proxy.log.length = 0;
    api.requests.length = 0;
    writeFileSync(file, config(api.url, 'insecure-skip-tls-verify: true'));
    assert.deepEqual(await syncThrough(api, loadKubeConfig({ kubeconfig: file, env: {} })), ['web']);
    assert.equal(api.requests.length, 8, 'a list and a watch of each of the four resources');
    assert.equal(proxy.log.length, 8, proxy.log.join('\n'));
    for (const line of proxy.log) assert.match(line, new RegExp(`^GET ${api.url}/api`), 'absolute URI to the API server');
    assert.equal(proxy.log.filter((l) => l.includes('watch=true')).length, 4, 'the four watches: Services, EndpointSlices, the Node, ServiceCIDRs');
  } finally {
    await proxy.close();
    await front.close();
    await api.stop();
  }
});

test('a proxy spoken to over TLS (an https:// proxy-url): verified with the cluster\'s CA, as client-go does; the tunnel inside it as through a plain proxy', async () => {
  const c = certificates();
  const api = await FakeApiServer.start();
  const front = await tlsFront(api, c, false);
  // the proxy's certificate: the test CA's, for 127.0.0.1 (as the API server's)
  const proxy = await forwardProxy({ key: c.serverKey, cert: c.serverCert });
  try {
    api.create('services', svcObj('web', '10.96.0.10'));
    api.create('nodes', nodeObj(NODE));
    const file = join(tmp(), 'kubeconfig');
    writeFileSync(file, `clusters: [{name: c, cluster: {server: "${front.server}", certificate-authority-data: ${b64(c.ca)}, proxy-url: "${proxy.url}"}}]
users: [{name: u, user: {token: tls-proxy}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`);
    const kc = loadKubeConfig({ kubeconfig: file, env: {} });
    assert.deepEqual(await syncThrough(api, kc), ['web']);
    for (const r of api.requests) assert.equal(r.authorization, 'Bearer tls-proxy');
    assert.deepEqual([...new Set(proxy.log)], [`CONNECT 127.0.0.1:${front.port}`]);
    assert.equal(proxy.log.length, 8);
    // without the CA, the proxy's certificate is not trusted: nothing reaches the proxy's handler
    proxy.log.length = 0;
    const untrusted = new ApiConfig({ ...kc.getCurrentCluster(), caData: undefined }, kc.getCurrentUser());
    assert.match(await getOnce(untrusted, `${front.server}/api/v1/nodes`), /CONNECT 127.0.0.1:\d+: .*(self.signed|unable to verify|local issuer)/i);
    assert.deepEqual(proxy.log, []);
  } finally {
    await proxy.close();
    await front.close();
    await api.stop();
  }
});

test('a proxy that takes the connection but never answers the CONNECT: the request fails after the connect timeout and the connection is closed; an idle tunnel is not timed out', async () => {
  const sockets: Array<import('node:net').Socket> = [];
  const closed: boolean[] = [];
  // the first connection's close, as an event (a 50-ms pause before the check raced it)
  let firstClosed!: () => void;
  const firstClose = new Promise<void>((r) => (firstClosed = r));
  const silent = createServer((s) => {
    sockets.push(s);
    closed.push(false);
    const i = closed.length - 1;
    s.on('close', () => ((closed[i] = true), i === 0 && firstClosed()));
    s.on('error', () => {});
    s.resume(); // reads (and drops) what comes, so the client's close is seen
  });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  try {
    const agent = proxyAgent(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`, 'https://127.0.0.1:6443', {}, 200);
    const err = await new Promise<Error>((resolve) => https.get('https://127.0.0.1:6443/api', { agent }, () => resolve(new Error('answered'))).on('error', resolve));
    assert.equal(err.message, 'proxy 127.0.0.1:' + (silent.address() as AddressInfo).port + ': CONNECT 127.0.0.1:6443: no answer in 200 ms');
    await firstClose;
    assert.deepEqual(closed, [true], 'the connection to the proxy is closed');
  } finally {
    await new Promise((r) => silent.close(r));
  }
  // A tunnel idle for longer than the connect timeout stays open (a watch may be quiet for minutes).
  const c = certificates();
  const api = await FakeApiServer.start();
  const front = await tlsFront(api, c, false);
  const proxy = await forwardProxy();
  try {
    api.create('nodes', nodeObj(NODE));
    const agent = proxyAgent(proxy.url, front.server, { ca: c.ca }, 200);
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => https.get(`${front.server}/api/v1/nodes?watch=true&resourceVersion=0`, { agent, ca: c.ca }, resolve).on('error', reject));
    assert.equal(res.statusCode, 200);
    // The connect timer (200 ms) was armed before this 600-ms one, in this process: timers fire in
    // order of expiry, so a connect timer left running has fired by now however loaded the machine.
    await new Promise((r) => setTimeout(r, 600));
    assert.equal(res.socket.destroyed, false, 'the tunnel outlived three connect timeouts');
    res.destroy();
  } finally {
    await proxy.close();
    await front.close();
    await api.stop();
  }
});

test('a proxy-url that is not an http(s) proxy is refused when the kubeconfig is loaded', () => {
  const file = join(tmp(), 'kubeconfig');
  for (const [url, why] of [
    ['socks5://127.0.0.1:1080', /cluster "c": proxy-url socks5:\/\/ proxies are not supported \(http:\/\/ and https:\/\/ are\)/],
    ['127.0.0.1:3128', /cluster "c": proxy-url 127.0.0.1:3128: proxies are not supported|is not a URL/],
    ['http://', /cluster "c": proxy-url "http:\/\/" is not a URL/],
  ] as const) {
    writeFileSync(file, `clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443", proxy-url: "${url}"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`);
    assert.throws(() => loadKubeConfig({ kubeconfig: file, env: {} }), (e: Error) => e instanceof KubeConfigError && why.test(e.message), url);
  }
});

test('an exec credential plugin goes through the full client, loaded on the first request', async () => {
  const api = await FakeApiServer.start();
  try {
    api.create('services', svcObj('web', '10.96.0.10'));
    api.create('nodes', nodeObj(NODE));
    const file = join(tmp(), 'kubeconfig');
    const credential = JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: 'from-exec' } });
    writeFileSync(file, JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: api.url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: process.execPath, args: ['-e', `process.stdout.write(${JSON.stringify(credential)})`], interactiveMode: 'Never' } } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }));
    const kc = loadKubeConfig({ kubeconfig: file, env: {} });
    assert.equal(kc.usesFullClient, true);
    assert.deepEqual(await syncThrough(api, kc), ['web']);
    for (const r of api.requests) assert.equal(r.authorization, 'Bearer from-exec', `${r.resource} ${r.watch ? 'watch' : 'list'}`);
  } finally {
    await api.stop();
  }
});

test('the informers and the kubeconfig load nothing from node_modules (the full client only for an exec user)', () => {
  const here = fileURLToPath(new URL('.', import.meta.url));
  const register = join(here, '../helpers/load-recorder-register.js');
  const loaded = (code: string): string[] => {
    const log = join(tmp(), 'loads');
    writeFileSync(log, '');
    const r = spawnSync(process.execPath, ['--import', register, '--input-type=module', '-e', code], { env: { ...process.env, LOAD_LOG: log }, encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    return readFileSync(log, 'utf8').split('\n').filter(Boolean).map((u) => u.replace(/^.*\/node_modules\//, '').replace(/^@kubernetes\/client-node\//, ''));
  };
  const src = (m: string) => JSON.stringify(new URL(`../../src/kube/${m}`, import.meta.url).href);
  const light = loaded(`const { loadKubeConfig } = await import(${src('kubeconfig.js')}); await import(${src('informers.js')});
    await loadKubeConfig({ server: 'https://10.0.0.1:6443', env: {} }).applyToHTTPSOptions({});`);
  // Nothing of the client: the kubeconfig is parsed here and the watches run on node:http(s),
  // not on the client's Watch and node-fetch (with its URL library: ~2 MB of heap).
  assert.deepEqual(light, []);
  const dir = tmp();
  writeFileSync(join(dir, 'kc'), 'clusters: [{name: c, cluster: {server: "https://10.0.0.1:6443"}}]\nusers: [{name: u, user: {exec: {command: "true", apiVersion: "client.authentication.k8s.io/v1"}}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n');
  const full = loaded(`const { loadKubeConfig } = await import(${src('kubeconfig.js')});
    const kc = loadKubeConfig({ kubeconfig: ${JSON.stringify(join(dir, 'kc'))}, env: {} });
    await kc.applyToHTTPSOptions({}).catch(() => {});`);
  assert.ok(full.includes('dist/index.js') && full.some((u) => u.startsWith('dist/gen/')), 'the recorder sees the full client when it is loaded');
});
