// Where the proxy finds the API server: a kubeconfig file, the in-cluster service account, or an
// explicit server URL (kube-proxy's --master, and the tests' fake API server).
//
// @kubernetes/client-node's KubeConfig class imports the client's whole generated API (~20 MB of
// JavaScript: a long-running process keeps ~20 MB more heap and starts ~60 MB larger for it),
// though the informers use none of it. So the kubeconfig is read here (client-go's v1 schema:
// clusters, users, contexts, with the client's validation messages) and requests are
// authenticated here for what a node daemon uses: the in-cluster service account, a bearer token
// or token file (client-go's `tokenFile`, which kubeadm's kube-proxy kubeconfig uses, and
// `token-file`; re-read when a minute old, as client-go does, so rotated service-account tokens
// are picked up), client certificates, basic auth, a CA, tls-server-name,
// insecure-skip-tls-verify and a cluster's proxy-url (proxy-agent.ts). A user with an exec plugin
// or an auth provider (OIDC, GCP, Azure) is handed to the full client, an optional peer
// dependency loaded on the first request that needs it: nothing else here needs the client.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { isIPv6 } from 'node:net';
import { dirname, isAbsolute, join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { parseYamlDocuments } from '../yaml.js';
import { parseProxyUrl, proxyAgent } from './proxy-agent.js';

export interface KubeConfigSource {
  /** Path of a kubeconfig file (kube-proxy's clientConnection.kubeconfig / --kubeconfig). */
  kubeconfig?: string;
  /** Context to use from the kubeconfig (default: its current-context). */
  context?: string;
  /** API server URL; overrides the kubeconfig's server (kube-proxy's --master). Alone, it is the
   *  whole configuration: no credentials, TLS verified unless `insecureSkipTLSVerify`. */
  server?: string;
  insecureSkipTLSVerify?: boolean;
  /** Environment for in-cluster detection (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** The pod's service-account directory (default /var/run/secrets/kubernetes.io/serviceaccount). */
  serviceAccountDir?: string;
}

/** A kubeconfig cluster: the members of the client's Cluster, declared here so that no
 *  declaration of ipvsync refers to the client (these fit what its KubeConfig takes). */
export interface Cluster {
  readonly name: string;
  readonly caData?: string;
  caFile?: string;
  readonly server: string;
  readonly tlsServerName?: string;
  readonly skipTLSVerify: boolean;
  readonly proxyUrl?: string;
}

/** A kubeconfig user: the members of the client's User (exec plugins and auth providers are the
 *  client's to run: opaque here). */
export interface User {
  readonly name: string;
  readonly certData?: string;
  certFile?: string;
  readonly exec?: unknown;
  readonly keyData?: string;
  keyFile?: string;
  readonly authProvider?: unknown;
  readonly token?: string;
  readonly username?: string;
  readonly password?: string;
  readonly impersonateUser?: string;
}

export class KubeConfigError extends Error {
  override readonly name = 'KubeConfigError';
}

/** What the informers need of a configuration: the API server and how to authenticate to it
 *  (the members of the client's KubeConfig that the informers' lists and watches call). */
export interface ApiAccess {
  getCurrentCluster(): Cluster | null;
  getCurrentUser(): User | null;
  /** Credentials and TLS settings for a node:http(s) request, and an agent. */
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const TOKEN_REREAD_MS = 60_000;

/** One cluster and one user, as the chosen context names them. */
export class ApiConfig implements ApiAccess {
  private token: { value: string; readAt: number } | undefined;
  private full: Promise<KubeConfig> | undefined;

  constructor(
    readonly cluster: Cluster,
    readonly user: User,
    /** A token file to re-read (the in-cluster token; a kubeconfig user's tokenFile or token-file). */
    readonly tokenFile?: string,
  ) {}

  getCurrentCluster(): Cluster {
    return this.cluster;
  }

  getCurrentUser(): User {
    return this.user;
  }

  /** Whether requests go through the full client (exec plugins, auth providers). */
  get usesFullClient(): boolean {
    return Boolean(this.user.exec || this.user.authProvider);
  }

  /** Loads the full client now when the user needs it (else nothing to do): rejects with a
   *  KubeConfigError saying why when it is missing or cannot load on this Node.js. */
  async ready(): Promise<void> {
    if (this.usesFullClient) await this.fullClient();
  }

  async applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    if (this.usesFullClient) {
      await (await this.fullClient()).applyToHTTPSOptions(opts);
      // The client's own agent for a proxy-url does not work (proxy-agent.ts): ours, with the
      // TLS settings the client put on the request.
      if (this.cluster.proxyUrl) {
        const { ca, cert, key, pfx, passphrase, rejectUnauthorized, servername } = opts;
        opts.agent = proxyAgent(this.cluster.proxyUrl, this.cluster.server, { ca, cert, key, pfx, passphrase, rejectUnauthorized, servername });
      } else if (this.cluster.server.startsWith('http:')) {
        // the client before 1.4 puts an https agent on a plain http server's requests
        opts.agent = this.agent({});
      }
      return;
    }
    const { cluster, user } = this;
    // TLS settings go on the request and on its agent.
    const tls: https.AgentOptions = {};
    if (cluster.skipTLSVerify) tls.rejectUnauthorized = false;
    if (cluster.tlsServerName) tls.servername = cluster.tlsServerName;
    const ca = fileOrData(cluster.caFile, cluster.caData);
    if (ca) tls.ca = ca;
    const cert = fileOrData(user.certFile, user.certData);
    if (cert) tls.cert = cert;
    const key = fileOrData(user.keyFile, user.keyData);
    if (key) tls.key = key;
    Object.assign(opts, tls);
    const headers = (opts.headers ??= {}) as Record<string, string>;
    if (user.impersonateUser) headers['Impersonate-User'] = user.impersonateUser;
    const token = this.tokenFile ? this.fileToken(this.tokenFile) : user.token;
    if (token) headers.Authorization = `Bearer ${token.trim()}`;
    if (user.username) opts.auth = `${user.username}:${user.password ?? ''}`;
    opts.agent = this.agent(tls);
  }

  /** A fresh agent per request, as the client makes one (CA and certificate files are re-read:
   *  they may be rotated). Plain http only with TLS verification off, as the client allows. */
  private agent(tls: https.AgentOptions): http.Agent {
    const plain = this.cluster.server.startsWith('http:');
    if (plain && !this.cluster.skipTLSVerify) throw new KubeConfigError(`${this.cluster.server}: plain http needs insecure-skip-tls-verify`);
    if (this.cluster.proxyUrl) return proxyAgent(this.cluster.proxyUrl, this.cluster.server, tls);
    return plain ? new http.Agent() : new https.Agent(tls);
  }

  private fileToken(path: string): string {
    const now = Date.now();
    if (!this.token || now - this.token.readAt > TOKEN_REREAD_MS) this.token = { value: readFileSync(path, 'utf8'), readAt: now };
    return this.token.value;
  }

  private fullClient(): Promise<KubeConfig> {
    return (this.full ??= loadClient().then(({ KubeConfig }) => {
      const kc = new KubeConfig();
      kc.loadFromClusterAndUser(this.cluster, this.user);
      return kc;
    }));
  }
}

/** The full client, for exec plugins and auth providers. */
const loadClient = () => importClient('@kubernetes/client-node') as Promise<typeof import('@kubernetes/client-node')>;

/** The client's module (`specifier`: its name, or a test's module; typed by the caller, so that
 *  no declaration names the client). Its absence, or a release that cannot run on this Node.js
 *  (2.x's undici 8 needs Node.js >= 22.19: on Node.js 20 it fails as it loads), is said
 *  plainly: the user's kubeconfig is what needs it. */
export async function importClient(specifier: string): Promise<unknown> {
  // A module that throws as it loads, imported from two modules of the client, rejects the
  // import and also, from the loader's other job for it, a promise nobody holds: that rejection
  // is this same failure, said below; left alone it would end the process (or the sync thread).
  let failure: unknown;
  const echo = (reason: unknown): void => {
    if (reason !== failure) throw reason;
  };
  process.on('unhandledRejection', echo);
  try {
    return (await import(specifier)) as unknown;
  } catch (e) {
    failure = e;
    const notFound = (e as { code?: unknown }).code === 'ERR_MODULE_NOT_FOUND' && String((e as Error).message).includes(`'${specifier}`);
    throw new KubeConfigError(
      notFound
        ? `${CLIENT_NEEDED}: install it beside ipvsync`
        : `${CLIENT_NEEDED}, and it failed to load on Node.js ${process.version} (@kubernetes/client-node 2.x needs Node.js >= 22.19; 1.x runs on Node.js 20): ${(e as Error).message}`,
      { cause: e },
    );
  } finally {
    // the loader reports its rejections when the microtasks of this turn have run
    setImmediate(() => process.off('unhandledRejection', echo));
  }
}

/** The peer range of package.json, said where the client is missing. */
const CLIENT_NEEDED = "a kubeconfig user with an exec plugin or an auth provider needs @kubernetes/client-node ^1.0.0 || ^2.0.0 (an optional peer dependency of ipvsync)";

/**
 * kubeconfig file if given; else the in-cluster service account when KUBERNETES_SERVICE_HOST is
 * set; else `server` alone. `server` always overrides the chosen cluster's URL.
 */
export function loadKubeConfig(src: KubeConfigSource): ApiConfig {
  const env = src.env ?? process.env;
  let chosen: ApiConfig;
  if (src.kubeconfig) {
    chosen = fromFile(src.kubeconfig, src.context);
  } else if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT && !src.server) {
    chosen = inCluster(env.KUBERNETES_SERVICE_HOST, env.KUBERNETES_SERVICE_PORT, src.serviceAccountDir ?? SERVICE_ACCOUNT_DIR);
  } else if (src.server) {
    return new ApiConfig({ name: 'server', server: src.server, skipTLSVerify: serverSkipsTls(src) }, { name: 'anonymous' });
  } else {
    throw new KubeConfigError('no API server: give a kubeconfig, a server URL, or run in a pod (KUBERNETES_SERVICE_HOST)');
  }
  if (!src.server) return chosen;
  const cluster = { ...chosen.cluster, server: src.server, skipTLSVerify: serverSkipsTls(src) || chosen.cluster.skipTLSVerify };
  return new ApiConfig(cluster, chosen.user, chosen.tokenFile);
}

function fromFile(file: string, context: string | undefined): ApiConfig {
  const fail = (msg: string) => new KubeConfigError(`kubeconfig ${file}: ${msg}`);
  let docs: unknown[];
  try {
    docs = parseYamlDocuments(readFileSync(file, 'utf8'));
  } catch (e) {
    throw fail((e as Error).message);
  }
  if (docs.length > 1) throw fail(`${docs.length} YAML documents, not one`);
  const doc = (docs[0] ?? {}) as Record<string, unknown>;
  // Relative paths are relative to the file, as kubectl takes them.
  const root = dirname(file);
  const abs = (p: string | undefined) => (p && !isAbsolute(p) ? join(root, p) : p);
  let clusters: Cluster[], users: ParsedUser[], contexts: Context[];
  try {
    clusters = parseClusters(doc.clusters, abs);
    users = parseUsers(doc.users, abs);
    contexts = parseContexts(doc.contexts);
  } catch (e) {
    throw fail((e as Error).message);
  }
  const name = context ?? (doc['current-context'] as string | undefined);
  const ctx = contexts.find((c) => c.name === name);
  if (!ctx) throw fail(context ? `no context "${context}"` : name ? `current-context "${name}" is not defined` : 'no current cluster');
  const cluster = clusters.find((c) => c.name === ctx.cluster);
  if (!cluster) throw fail(`context "${ctx.name}" names cluster "${ctx.cluster}", which is not defined`);
  const { tokenFile, ...user } = users.find((u) => u.name === ctx.user) ?? { name: ctx.user ?? 'anonymous' };
  if (cluster.proxyUrl) {
    // checked here, at start, rather than failing every request after it
    try {
      parseProxyUrl(cluster.proxyUrl);
    } catch (e) {
      throw fail(`cluster "${cluster.name}": ${(e as Error).message}`);
    }
  }
  return new ApiConfig(cluster, user, tokenFile);
}

/** A kubeconfig context (client-go's v1 NamedContext). */
interface Context {
  readonly name: string;
  readonly cluster: string;
  readonly user?: string;
  readonly namespace?: string;
}

/** A user and the token file to re-read (a token file, and no token). */
type ParsedUser = User & { tokenFile?: string };

type Entry = Record<string, unknown> | null | undefined;
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
/** Entries of a list: none when it is not a list (as client-go and the client read it). */
const entries = (list: unknown): Entry[] => (Array.isArray(list) ? (list as Entry[]) : []);
/** The members whose value is defined, so that absent fields stay absent. */
const defined = <T extends object>(o: T): T => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;

// client-go's v1 kubeconfig schema (k8s.io/client-go/tools/clientcmd/api/v1), with the client's
// messages for a missing name, cluster, server or context.
function parseClusters(list: unknown, abs: (p: string | undefined) => string | undefined): Cluster[] {
  return entries(list).map((e, i) => {
    if (!e?.name) throw new Error(`clusters[${i}].name is missing`);
    const c = e.cluster as Entry;
    if (!c) throw new Error(`clusters[${i}].cluster is missing`);
    if (!c.server) throw new Error(`clusters[${i}].cluster.server is missing`);
    return defined({
      name: String(e.name),
      server: String(c.server).replace(/\/$/, ''),
      caData: str(c['certificate-authority-data']),
      caFile: abs(str(c['certificate-authority'])),
      skipTLSVerify: c['insecure-skip-tls-verify'] === true,
      tlsServerName: str(c['tls-server-name']),
      proxyUrl: str(c['proxy-url']),
    });
  });
}

function parseUsers(list: unknown, abs: (p: string | undefined) => string | undefined): ParsedUser[] {
  return entries(list).map((e, i) => {
    if (!e?.name) throw new Error(`users[${i}].name is missing`);
    const u = (e.user ?? {}) as Record<string, unknown>;
    // A token takes precedence over a token file, as the client reads `token-file`; `tokenFile`
    // is client-go's key (and kubeadm's). The file is read on the first request and re-read as
    // it ages (ApiConfig), as the in-cluster token is: a file the kubelet has yet to write fails
    // the requests (the informers retry), not the start.
    const token = str(u.token);
    const tokenFile = token ? undefined : abs(str(u.tokenFile) ?? str(u['token-file']));
    return defined({
      name: String(e.name),
      certData: str(u['client-certificate-data']),
      certFile: abs(str(u['client-certificate'])),
      keyData: str(u['client-key-data']),
      keyFile: abs(str(u['client-key'])),
      token,
      tokenFile,
      username: str(u.username),
      password: str(u.password),
      impersonateUser: str(u.as),
      exec: u.exec ?? undefined,
      authProvider: u['auth-provider'] ?? undefined,
    });
  });
}

function parseContexts(list: unknown): Context[] {
  return entries(list).map((e, i) => {
    if (!e?.name) throw new Error(`contexts[${i}].name is missing`);
    const c = e.context as Entry;
    if (!c) throw new Error(`contexts[${i}].context is missing`);
    if (!c.cluster) throw new Error(`contexts[${i}].context.cluster is missing`);
    return defined({ name: String(e.name), cluster: String(c.cluster), user: str(c.user), namespace: str(c.namespace) });
  });
}

function inCluster(host: string, port: string, dir: string): ApiConfig {
  // As the client's loadFromCluster: http on the API server's plain ports, https otherwise.
  const scheme = port === '80' || port === '8080' || port === '8001' ? 'http' : 'https';
  const server = `${scheme}://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  return new ApiConfig({ name: 'inCluster', server, caFile: join(dir, 'ca.crt'), skipTLSVerify: false }, { name: 'inClusterUser' }, join(dir, 'token'));
}

function fileOrData(file: string | undefined | null, data: string | undefined | null): Buffer | undefined {
  if (file) return readFileSync(file);
  if (data) return Buffer.from(data, 'base64');
  return undefined;
}

function serverSkipsTls(src: KubeConfigSource): boolean {
  // The client refuses plain http unless TLS verification is off (nothing to verify).
  return Boolean(src.insecureSkipTLSVerify) || Boolean(src.server?.startsWith('http:'));
}
