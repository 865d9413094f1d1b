// Where the proxy finds the API server: a kubeconfig file, the in-cluster service account, or an
// explicit server URL (kube-proxy's --master, and the tests' fake API server).
import { KubeConfig } from '@kubernetes/client-node';

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
}

export class KubeConfigError extends Error {
  override readonly name = 'KubeConfigError';
}

/**
 * kubeconfig file if given; else the in-cluster service account when KUBERNETES_SERVICE_HOST is
 * set; else `server` alone. `server` always overrides the chosen cluster's URL.
 */
export function loadKubeConfig(src: KubeConfigSource): KubeConfig {
  const env = src.env ?? process.env;
  const kc = new KubeConfig();
  if (src.kubeconfig) {
    try {
      kc.loadFromFile(src.kubeconfig);
    } catch (e) {
      throw new KubeConfigError(`kubeconfig ${src.kubeconfig}: ${(e as Error).message}`);
    }
    if (src.context) {
      if (!kc.getContextObject(src.context)) throw new KubeConfigError(`kubeconfig ${src.kubeconfig}: no context "${src.context}"`);
      kc.setCurrentContext(src.context);
    }
  } else if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT && !src.server) {
    kc.loadFromCluster();
  } else if (src.server) {
    kc.loadFromClusterAndUser(
      { name: 'server', server: src.server, skipTLSVerify: serverSkipsTls(src) },
      { name: 'anonymous' },
    );
    return kc;
  } else {
    throw new KubeConfigError('no API server: give a kubeconfig, a server URL, or run in a pod (KUBERNETES_SERVICE_HOST)');
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new KubeConfigError(`kubeconfig ${src.kubeconfig ?? '(in-cluster)'}: no current cluster`);
  if (src.server) {
    // Clusters are read-only objects in the client: replace the cluster entry.
    const replaced = { ...cluster, server: src.server, skipTLSVerify: serverSkipsTls(src) || cluster.skipTLSVerify };
    kc.clusters = kc.clusters.map((c) => (c.name === cluster.name ? replaced : c));
  }
  return kc;
}

function serverSkipsTls(src: KubeConfigSource): boolean {
  // The client refuses plain http unless TLS verification is off (nothing to verify).
  return Boolean(src.insecureSkipTLSVerify) || Boolean(src.server?.startsWith('http:'));
}
