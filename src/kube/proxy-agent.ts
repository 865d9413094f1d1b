// A kubeconfig cluster's proxy-url (client-go's Cluster.ProxyURL): the API server reached
// through an HTTP(S) proxy, on node:http(s) alone.
//   https:// server — a CONNECT tunnel to the server through the proxy, then TLS to the server
//                     inside it (the cluster's CA, client certificate and server name, as direct)
//   http:// server  — each request sent to the proxy with the absolute URI
// The proxy itself may be http:// or https://, with credentials in the URL (user:password@ →
// Proxy-Authorization: Basic). TLS to an https:// proxy uses the cluster's TLS settings (its CA,
// client certificate, insecure-skip-tls-verify) as client-go's transport does for its proxy; for
// an http:// server, which has none, the system's CAs.
//
// Not the client's createAgent: @kubernetes/client-node 1.4 builds http(s)-proxy-agent 7's agents
// with an options object where they take the proxy URL, and every request through them fails
// ("socket hang up"). SOCKS proxies (client-go's socks5://) are not supported: a clear error.
import http from 'node:http';
import https from 'node:https';
import net, { isIP } from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';

/** How long a proxy may take to answer a CONNECT (client-go dials with a 30-s timeout). */
const CONNECT_TIMEOUT_MS = 30_000;

export class ProxyUrlError extends Error {
  override readonly name = 'ProxyUrlError';
}

/** The proxy URL checked: http:// or https://, with a host. */
export function parseProxyUrl(proxyUrl: string): URL {
  let u: URL;
  try {
    u = new URL(proxyUrl);
  } catch {
    throw new ProxyUrlError(`proxy-url ${JSON.stringify(proxyUrl)} is not a URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new ProxyUrlError(`proxy-url ${u.protocol}// proxies are not supported (http:// and https:// are)`);
  if (!u.hostname) throw new ProxyUrlError(`proxy-url ${JSON.stringify(proxyUrl)} has no host`);
  return u;
}

function proxyAuthorization(proxy: URL): string | undefined {
  if (!proxy.username && !proxy.password) return undefined;
  const creds = `${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`;
  return `Basic ${Buffer.from(creds).toString('base64')}`;
}

function proxyPort(proxy: URL): number {
  return Number(proxy.port) || (proxy.protocol === 'https:' ? 443 : 80);
}

/** A host without the brackets a URL puts around an IPv6 address. */
function unbracketed(host: string): string {
  return host.replace(/^\[|\]$/g, '');
}

/** The host as a URL or a CONNECT target writes it (IPv6 in brackets). */
function hostPort(host: string, port: number | string): string {
  return `${isIP(host) === 6 ? `[${host}]` : host}:${port}`;
}

/** A connection to the proxy itself (`settings`: the TLS settings for an https:// proxy). */
function connectToProxy(proxy: URL, settings: tls.ConnectionOptions = {}): Duplex {
  const host = unbracketed(proxy.hostname);
  const port = proxyPort(proxy);
  if (proxy.protocol !== 'https:') return net.connect(port, host);
  const { ca, cert, key, pfx, passphrase, rejectUnauthorized } = settings;
  return tls.connect({ ca, cert, key, pfx, passphrase, rejectUnauthorized, host, port, servername: isIP(host) ? undefined : host, ALPNProtocols: ['http/1.1'] });
}

type ConnectOptions = tls.ConnectionOptions & { host?: string; port?: number | string };
type Oncreate = (err: Error | null, socket?: Duplex) => void;

/** For an http:// server: the proxy's socket, each request with the absolute URI. */
class ForwardingAgent extends http.Agent {
  private readonly auth: string | undefined;

  constructor(private readonly proxy: URL) {
    super();
    this.auth = proxyAuthorization(proxy);
  }

  addRequest(req: http.ClientRequest, options: http.ClientRequestArgs): void {
    // The request line is written later (with the headers), so the path can still change here.
    req.path = `http://${hostPort(options.host ?? 'localhost', options.port ?? 80)}${req.path}`;
    if (this.auth && !req.hasHeader('proxy-authorization')) req.setHeader('Proxy-Authorization', this.auth);
    (http.Agent.prototype as unknown as { addRequest(r: http.ClientRequest, o: http.ClientRequestArgs): void }).addRequest.call(this, req, options);
  }

  override createConnection(): Duplex {
    return connectToProxy(this.proxy);
  }
}

/** For an https:// server: TLS to the server inside a CONNECT tunnel through the proxy. */
class TunnelingAgent extends https.Agent {
  private readonly auth: string | undefined;

  constructor(
    private readonly proxy: URL,
    options: https.AgentOptions,
    private readonly connectTimeoutMs: number,
  ) {
    super(options);
    this.auth = proxyAuthorization(proxy);
  }

  override createConnection(options: ConnectOptions, oncreate: Oncreate): undefined {
    const host = unbracketed(options.host ?? 'localhost');
    const target = hostPort(host, options.port ?? 443);
    const headers: Record<string, string> = { host: target };
    if (this.auth) headers['proxy-authorization'] = this.auth;
    let done = false;
    const finish = (err: Error | null, socket?: Duplex) => {
      if (done) return;
      done = true;
      oncreate(err, socket);
    };
    const proxy = this.proxy;
    // no agent: the request's own connection, to the proxy
    const req = http.request({ method: 'CONNECT', path: target, headers, createConnection: () => connectToProxy(proxy, options) as net.Socket });
    req.once('connect', (res: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        finish(new ProxyUrlError(`proxy ${proxy.host}: CONNECT ${target}: HTTP ${res.statusCode} ${res.statusMessage ?? ''}`.trimEnd()));
        return;
      }
      socket.setTimeout(0); // the CONNECT's timeout, not the tunnel's: a watch may be idle for minutes
      if (head.length) socket.unshift(head);
      // TLS to the server with the request's settings (CA, client certificate, verification).
      const servername = options.servername ?? (isIP(host) ? undefined : host);
      const secure = tls.connect({ ...options, host, socket, servername });
      // A TLS socket over a given socket leaves that one open when it closes.
      secure.once('close', () => socket.destroy());
      finish(null, secure);
    });
    req.once('error', (e) => finish(new ProxyUrlError(`proxy ${proxy.host}: CONNECT ${target}: ${e.message}`)));
    // A proxy that takes the connection but never answers would hold it (and this request) forever.
    req.setTimeout(this.connectTimeoutMs, () => req.destroy(new Error(`no answer in ${this.connectTimeoutMs} ms`)));
    req.end();
    return undefined;
  }
}

/** An agent that reaches `server` through `proxyUrl`, with `tlsOptions` for an https server. */
export function proxyAgent(proxyUrl: string, server: string, tlsOptions: https.AgentOptions, connectTimeoutMs = CONNECT_TIMEOUT_MS): http.Agent {
  const proxy = parseProxyUrl(proxyUrl);
  return server.startsWith('http:') ? new ForwardingAgent(proxy) : new TunnelingAgent(proxy, tlsOptions, connectTimeoutMs);
}
