export { NetlinkError, type NetlinkErrorFields, type NetlinkErrorKind } from './errors.js';
export { ApplyResult, type BatchOptions, type OpStatus } from './kernel/batch.js';
export { Genl, type GenlFamily, type GenlOptions } from './kernel/genl.js';
export {
  Ipvs,
  SCHEDULERS,
  formatInfo,
  serviceId,
  type AddressFamily,
  type AddressServiceId,
  type Daemon,
  type DaemonConfig,
  type Destination,
  type DestinationConfig,
  type DestinationId,
  type ForwardMethod,
  type FwmarkServiceId,
  type IpvsApi,
  type IpvsInfo,
  type IpvsOp,
  type IpvsOptions,
  type IpvsProtocol,
  type IpvsStats,
  type ListOptions,
  type Scheduler,
  type Service,
  type ServiceConfig,
  type ServiceFlag,
  type ServiceId,
  type ServiceOptions,
  type Timeouts,
  type TunnelOptions,
  type TunnelType,
} from './kernel/ipvs.js';
export { formatList, formatSave, parseRules, RulesParseError, fileResolver, numeric, type NameResolver, type ParsedRule } from './kernel/ipvsadm-format.js';
export { Links, type Link } from './kernel/links.js';
export type { HandleOptions, SocketStats } from './native.js';
// ---- kube ----
export { translate, servedBy, DEFAULT_AFFINITY_TIMEOUT, DEFAULT_SCHEDULER } from './kube/translate.js';
export { ServiceTracker, EndpointSliceTracker, serviceFingerprint, endpointSlicesFingerprint, objectKey } from './kube/change-tracker.js';
export { loadManifests, parseManifests, endpointsToSlices, resolveLegacyEndpoints, ManifestError, type ManifestSet } from './kube/manifests.js';
export { changedServiceKeys } from './kube/model-diff.js';
export { chooseScheduler, type SchedulerChoice } from './kube/scheduler.js';
export {
  ANNOTATION_LB_SOURCE_RANGES,
  ANNOTATION_SCHEDULER,
  ANNOTATION_SCHEDULER_FLAGS,
  LABEL_SERVICE_NAME,
  LABEL_SERVICE_PROXY_NAME,
  type FrontendKind,
  type GlueHairpin,
  type GlueNodePort,
  type GlueSourceRange,
  type GlueSpec,
  type GlueVip,
  type HealthCheck,
  type ModelWarning,
  type NodeInfo,
  type ProxyConfig,
  type ProxyModel,
  type TranslateInput,
} from './kube/types.js';
// ---- daemon ----
// (src/kube/informers.ts and src/kube/kubeconfig.ts load @kubernetes/client-node's runtime:
// imported by the proxy directly, not re-exported here.)
export {
  loadConfig,
  validateConfig,
  mergeFlags,
  renderConfig,
  writeConfigTo,
  toProxyConfig,
  nodeName,
  defaultConfig,
  parseDuration,
  formatDuration,
  CONFIG_FLAGS,
  ConfigError,
  type IpvsyncConfig,
  type ConfigIssue,
  type FlagSpec,
  type LoadedConfig,
  type BindMode,
} from './daemon/config.js';
export { ProxyMetrics, MetricsServer, Registry, Counter, Gauge, Histogram, PROMETHEUS_CONTENT_TYPE, type ServiceLabelSource } from './daemon/metrics.js';
export { ProxierHealth, HealthzServer, ServiceHealthServers, TO_BE_DELETED_TAINT, type HealthState, type ServiceHealthSyncResult } from './daemon/healthz.js';
export { createLogger, type Logger, type LogLevel, type Fields } from './daemon/log.js';
export { Lifecycle, preflight, systemChecks, hasCapability, PreflightError, CAP_NET_ADMIN, type PreflightChecks, type StopReport } from './daemon/lifecycle.js';
