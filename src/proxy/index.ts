// `ipvsync/proxy`: the Kubernetes service proxy as a library — the Proxier (in process or on its
// sync thread), kube-proxy's semantics (the service model, translation to the IPVS data plane),
// manifests, the configuration, and the daemon's health and metrics servers. The Kubernetes
// objects are ipvsync's own structural types (the client's objects fit them): nothing here needs
// @kubernetes/client-node, which watchKube loads only for a kubeconfig user with an exec plugin or
// an auth provider.
// docs/api.md documents every name exported here.
export { Proxier, type ProxierOptions, type ProxySyncResult, type PendingChanges } from './proxier.js';
export {
  ThreadedProxier,
  SyncThreadError,
  type SyncThreadOptions,
  type ThreadSyncResult,
  type ModelSummary,
  type ThreadKubeOptions,
  type ThreadKube,
  type ThreadInformerOptions,
} from './sync-thread.js';
export type { KubeConfigSource } from '../kube/kubeconfig.js';
export type { InformerError, ResourceName } from '../kube/informers.js';
export {
  loadManifests,
  parseManifests,
  endpointsToSlices,
  resolveLegacyEndpoints,
  ManifestFolder,
  ManifestError,
  type ManifestSet,
  type ManifestWarning,
  type FolderLoad,
} from '../kube/manifests.js';
export type {
  KubernetesObject,
  V1ObjectMeta,
  V1Service,
  V1ServiceSpec,
  V1ServicePort,
  V1LoadBalancerIngress,
  V1EndpointSlice,
  V1Endpoint,
  V1EndpointConditions,
  V1EndpointHints,
  V1EndpointSlicePort,
  V1Endpoints,
  V1EndpointSubset,
  V1EndpointAddress,
  V1EndpointPort,
  V1Node,
  V1Taint,
} from '../kube/api-types.js';
export {
  ANNOTATION_SCHEDULER,
  ANNOTATION_SCHEDULER_FLAGS,
  LABEL_SERVICE_NAME,
  LABEL_SERVICE_PROXY_NAME,
  LABEL_TOPOLOGY_ZONE,
  type HealthCheck,
  type ModelWarning,
  type NodeInfo,
  type ObjectHandlers,
  type ProxyConfig,
  type TranslateInput,
} from '../kube/types.js';
export {
  serviceModel,
  modelContext,
  servedBy,
  DEFAULT_AFFINITY_TIMEOUT,
  type ServiceModel,
  type ServicePortModel,
  type ModelContext,
} from '../kube/service-model.js';
export { ServiceTracker, EndpointSliceTracker, objectKey } from '../kube/change-tracker.js';
export { translate, TranslateCache } from './ipvs/translate.js';
export { DEFAULT_SCHEDULER } from './ipvs/scheduler.js';
export { changedServiceKeys } from './ipvs/model-diff.js';
export type { FrontendKind, GlueHairpin, GlueNodePort, GlueSourceRange, GlueSpec, GlueVip, ProxyModel } from './ipvs/types.js';
export {
  loadConfig,
  validateConfig,
  defaultConfig,
  toProxyConfig,
  ConfigError,
  type IpvsyncConfig,
  type ConfigIssue,
  type LoadedConfig,
  type BindMode,
} from '../daemon/config.js';
export { ProxyMetrics, MetricsServer, type ProxyMetricsOptions, type MetricsServerOptions } from '../daemon/metrics.js';
export { ProxierHealth, HealthzServer, ServiceHealthServers, type HealthState, type HealthzServerOptions, type ServiceHealthOptions } from '../daemon/healthz.js';
