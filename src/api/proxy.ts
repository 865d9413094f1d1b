// `ipvsync/proxy`: the Kubernetes service proxy as a library — the Proxier (in process or on its
// sync thread), kube-proxy's semantics (the service model, translation to the IPVS data plane),
// manifests, the configuration, and the daemon's health and metrics servers. The Kubernetes
// objects are ipvsync's own structural types (the client's objects fit them): nothing here needs
// @kubernetes/client-node, which watchKube loads only for a kubeconfig user with an exec plugin or
// an auth provider.
// It lives here, not in src/proxy/, because it also exports the daemon's pieces: the proxier
// layer below the daemon imports nothing of it.
// Only what an embedder calls or must name is exported; a type that is only a part of another
// (an options field, a Kubernetes object's spec) stays reachable through the one it is part of.
// docs/api.md documents every name exported here.
export { Proxier, type ProxierOptions, type ProxySyncResult } from '../proxy/proxier.js';
export { ThreadedProxier, SyncThreadError, type SyncThreadOptions, type ThreadSyncResult } from '../proxy/sync-thread.js';
export { loadManifests, parseManifests, resolveLegacyEndpoints, ManifestFolder, ManifestError, type ManifestSet } from '../kube/manifests.js';
export type { V1Service, V1EndpointSlice, V1Endpoints, V1Node } from '../kube/api-types.js';
export type { NodeInfo, ProxyConfig } from '../kube/types.js';
export { serviceModel, modelContext, type ServiceModel } from '../kube/service-model.js';
export { translate } from '../proxy/ipvs/plane.js';
export type { ProxyModel } from '../proxy/ipvs/types.js';
export { loadConfig, validateConfig, defaultConfig, toProxyConfig, ConfigError, type IpvsyncConfig } from '../daemon/config.js';
export { ProxyMetrics, MetricsServer } from '../daemon/metrics.js';
export { ProxierHealth, HealthzServer, ServiceHealthServers } from '../daemon/healthz.js';
