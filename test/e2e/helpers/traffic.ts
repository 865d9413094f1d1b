// Real connections for the end-to-end tests. Every HTTP request is a new TCP connection (no
// agent), every wait is bounded.
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { get } from 'node:http';
import { connect, type Socket } from 'node:net';

/** What a pod answers: its name and the client address it saw. */
/** Timeouts of the traffic helpers where an answer is expected: only a bound for a hang,
 *  generous for qemu's TCG (~10x slower, and varying): a few seconds there made a slow answer a
 *  failure (issue #58). A caller expecting no answer (a dropped connection) passes a short bound
 *  of its own: waiting longer can only confirm the drop, never fail it. */
export const ANSWER_TIMEOUT_MS = 30_000;

export interface Answer {
  pod: string;
  client: string;
}

function parseAnswer(text: string): Answer {
  const a = JSON.parse(text) as Answer;
  if (typeof a.pod !== 'string' || typeof a.client !== 'string') throw new Error(`not a pod answer: ${text}`);
  return a;
}

/** One HTTP GET on a new connection. */
export function httpAsk(url: string, timeoutMs = ANSWER_TIMEOUT_MS): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = get(url, { agent: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        try {
          resolve(parseAnswer(body));
        } catch (e) {
          reject(e);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeoutMs} ms: ${url}`)));
    req.on('error', reject);
  });
}

/** n GETs one after the other, each on its own connection. */
export async function httpMany(url: string, n: number, timeoutMs = ANSWER_TIMEOUT_MS): Promise<Answer[]> {
  const out: Answer[] = [];
  for (let i = 0; i < n; i++) out.push(await httpAsk(url, timeoutMs));
  return out;
}

/** One HTTP GET on a new connection: its status and body, whatever the server. */
export function httpStatus(url: string, timeoutMs = ANSWER_TIMEOUT_MS): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = get(url, { agent: false, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error(`timeout: ${url}`)));
    req.on('error', reject);
  });
}

/** Answers per pod, keys sorted. */
export function tally(answers: readonly Answer[]): Record<string, number> {
  const t: Record<string, number> = {};
  for (const a of [...answers].sort((x, y) => x.pod.localeCompare(y.pod))) t[a.pod] = (t[a.pod] ?? 0) + 1;
  return t;
}

/** The client addresses the pods saw, per pod. */
export function clientsByPod(answers: readonly Answer[]): Record<string, string[]> {
  const m: Record<string, Set<string>> = {};
  for (const a of answers) (m[a.pod] ??= new Set()).add(a.client);
  return Object.fromEntries(Object.entries(m).sort().map(([p, s]) => [p, [...s].sort()]));
}

/** 'connected', or the error code of a failed connection ('ECONNREFUSED', 'ETIMEDOUT' for no
 *  answer within the bound …). */
export function connectOutcome(host: string, port: number, timeoutMs = ANSWER_TIMEOUT_MS): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    const timer = setTimeout(() => {
      s.destroy();
      resolve('ETIMEDOUT');
    }, timeoutMs);
    s.once('connect', () => {
      clearTimeout(timer);
      s.destroy();
      resolve('connected');
    });
    s.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(e.code ?? e.message);
    });
  });
}

/** A persistent TCP connection to the line server (port 9000 in the pods): one answer per line. */
export class LineConn {
  private buf = '';
  private waiting: Array<(line: string) => void> = [];
  private failure: Error | undefined;

  private constructor(private readonly sock: Socket) {
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      this.buf += d;
      for (let i = this.buf.indexOf('\n'); i >= 0 && this.waiting.length; i = this.buf.indexOf('\n')) {
        const line = this.buf.slice(0, i);
        this.buf = this.buf.slice(i + 1);
        this.waiting.shift()!(line);
      }
    });
    sock.on('error', (e) => (this.failure = e));
    sock.on('close', () => (this.failure ??= new Error('connection closed')));
  }

  static open(host: string, port: number, timeoutMs = ANSWER_TIMEOUT_MS): Promise<LineConn> {
    return new Promise((resolve, reject) => {
      const s = connect({ host, port });
      const timer = setTimeout(() => {
        s.destroy();
        reject(new Error(`connect ${host}:${port}: timeout after ${timeoutMs} ms`));
      }, timeoutMs);
      s.once('connect', () => {
        clearTimeout(timer);
        resolve(new LineConn(s));
      });
      s.once('error', (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
  }

  /** Sends one line on this same connection and reads the answer. */
  ask(timeoutMs = ANSWER_TIMEOUT_MS): Promise<Answer> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      this.waiting.push((line) => {
        clearTimeout(timer);
        try {
          resolve(parseAnswer(line));
        } catch (e) {
          reject(e);
        }
      });
      this.sock.write('?\n');
    });
  }

  /** The local port: identifies this connection in ipvsadm -Lnc and conntrack. */
  get localPort(): number {
    return this.sock.localPort!;
  }

  /** Closes with a FIN. */
  end(): void {
    this.sock.end();
  }

  /** Closes with a RST: IPVS moves the entry to CLOSE (10 s) instead of TIME_WAIT (2 min). */
  reset(): void {
    this.sock.resetAndDestroy();
  }
}

/** A UDP client socket that keeps its source port across requests. */
export class UdpClient {
  private constructor(private readonly sock: UdpSocket) {}

  static async open(): Promise<UdpClient> {
    const s = createSocket('udp4');
    await new Promise<void>((resolve) => s.bind(0, resolve));
    return new UdpClient(s);
  }

  get localPort(): number {
    return this.sock.address().port;
  }

  /** One datagram out, the first answer back, or a timeout error. */
  ask(host: string, port: number, timeoutMs = ANSWER_TIMEOUT_MS): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const onMessage = (m: Buffer) => {
        clearTimeout(timer);
        try {
          resolve(parseAnswer(m.toString('utf8')));
        } catch (e) {
          reject(e);
        }
      };
      const timer = setTimeout(() => {
        this.sock.off('message', onMessage);
        reject(new Error(`udp ${host}:${port}: no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.sock.once('message', onMessage);
      this.sock.send('?\n', port, host);
    });
  }

  close(): void {
    this.sock.close();
  }
}

/** n UDP requests, each from a fresh socket (a new source port: a new IPVS connection). */
export async function udpMany(host: string, port: number, n: number): Promise<Answer[]> {
  const out: Answer[] = [];
  for (let i = 0; i < n; i++) {
    const c = await UdpClient.open();
    try {
      out.push(await c.ask(host, port));
    } finally {
      c.close();
    }
  }
  return out;
}
