// The daemon's HTTP servers (/healthz, /metrics, healthCheckNodePorts): one way to make, start
// and stop them, each under the same bounds on what one client can make it do.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * Bounds on what one client can make the daemon's servers do. They listen on addresses
 * others on the network may reach, and they share the daemon's event loop with the watches and each other: the
 * HTTP parser runs every request of one socket read (tens of thousands of pipelined requests)
 * in a single turn, so without a bound a single write could hold the loop for seconds.
 */
export interface HttpLimits {
  /** Open connections at once; more are closed on accept. */
  maxConnections: number;
  /** Requests answered on one connection: the last is sent with `Connection: close`, and a
   *  client that pipelines past it has its connection destroyed unanswered, so the rest of its
   *  flood is never read. */
  maxRequestsPerSocket: number;
  /** Time to receive a request's headers / whole request; idle keep-alive time. */
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  maxConnections: 64,
  maxRequestsPerSocket: 100,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 10_000,
  keepAliveTimeoutMs: 5_000,
};

/** An HTTP server for health answers under `limits` (see HttpLimits). */
export function limitedServer(limits: HttpLimits, handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): http.Server {
  const served = new WeakMap<Socket, number>();
  const server = http.createServer(
    { headersTimeout: limits.headersTimeoutMs, requestTimeout: limits.requestTimeoutMs, keepAliveTimeout: limits.keepAliveTimeoutMs },
    (req, res) => {
      const socket = req.socket;
      const n = (served.get(socket) ?? 0) + 1;
      served.set(socket, n);
      if (n > limits.maxRequestsPerSocket) {
        // Pipelined past the last answer: what is already parsed is dropped with the socket.
        socket.destroy();
        return;
      }
      if (n === limits.maxRequestsPerSocket) res.shouldKeepAlive = false;
      handler(req, res);
    },
  );
  server.maxConnections = limits.maxConnections;
  return server;
}

/** Where a daemon server listens, and under which bounds. */
export interface ListenOptions {
  host: string;
  port: number;
  limits?: HttpLimits;
}

/** A daemon server on one address (/healthz, /metrics): a limitedServer started and stopped once. */
export abstract class DaemonServer {
  private server: http.Server | undefined;

  constructor(private readonly listenOn: ListenOptions) {}

  protected abstract handle(req: http.IncomingMessage, res: http.ServerResponse): void;

  async start(): Promise<void> {
    const server = limitedServer(this.listenOn.limits ?? DEFAULT_HTTP_LIMITS, (req, res) => this.handle(req, res));
    await listen(server, this.listenOn.host, this.listenOn.port);
    this.server = server;
  }

  get port(): number {
    return (this.server?.address() as AddressInfo | null)?.port ?? 0;
  }

  async stop(): Promise<void> {
    await close(this.server);
    this.server = undefined;
  }
}

/** The answer to a path no server serves, as Go's net/http (kube-proxy) gives it. */
export function notFound(res: http.ServerResponse): void {
  res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('404 page not found\n');
}

export function listen(server: http.Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error) => reject(e);
    server.once('error', onError);
    server.listen({ host, port }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

export function close(server: http.Server | undefined): Promise<void> {
  if (!server) return Promise.resolve();
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
