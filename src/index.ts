// `ipvsync`: the netlink library — the kernel handles, their text formats, the sync engine and
// its runner. What an embedder programs the kernel with, and nothing of Kubernetes: the proxy
// (its Kubernetes semantics, manifests and daemon pieces) is `ipvsync/proxy`, the in-memory
// kernel `ipvsync/testing`. docs/api.md documents every name exported here.
export { NetlinkError, type NetlinkErrorFields, type NetlinkErrorKind } from './errors.js';
export { ApplyResult, type BatchOptions, type OpStatus } from './kernel/batch.js';
export { Genl, type GenlFamily, type GenlOptions } from './kernel/genl.js';
export {
  Nftables, NftTransaction, NftCommitResult, PRIORITY, renderOp,
  type NftablesApi, type NftOp, type NftVerb, type NftOpStatus, type CommitOptions, type NftRuleset,
  type TableSpec, type ChainSpec, type SetSpec, type SetElement, type RuleSpec, type HookName,
  type TableInfo, type ChainInfo, type SetInfo, type RuleInfo, type NftTransactionReport, type ListOptions as NftListOptions,
} from './kernel/nftables.js';
export * as nftExpr from './kernel/nft-expr.js';
export * as nftRules from './kernel/nft-rules.js';
export { type NftFamily, type DataType, type KeyValue } from './kernel/nft-types.js';

export { Links, IPVSYNC_ADDRESS_PROTOCOL, type Address, type Link, type LinkOp, type LinksApi } from './kernel/links.js';
export { Routes, IPVSYNC_ROUTE_PROTOCOL, type Route, type RouteOp, type RouteFilter, type RoutesApi } from './kernel/routes.js';
export {
  Ipvs,
  SCHEDULERS,
  formatInfo,
  serviceId,
  type AddressFamily,
  type AddressServiceId,
  type ApplyOptions,
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
export { formatList, formatSave, parseRules, RulesParseError, fileResolver, numeric, type NameResolver, type ParsedRule } from './formats/ipvsadm.js';
export type { HandleOptions, SocketStats, IpvsSocketStats, MemoryPressureLevel } from './native.js';
export { addonCpuUsage, memoryPressure, type AddonCpuUsage } from './native.js';
export {
  IpSets,
  IPSET_TYPES,
  type IpSet,
  type IpSetFamily,
  type IpSetMember,
  type IpSetOp,
  type IpSetProto,
  type IpSetSpec,
  type IpSetType,
  type IpSetsApi,
} from './kernel/ipsets.js';
export { formatSave as formatIpsetSave, parseRestore as parseIpsetRestore, RestoreSyntaxError } from './formats/ipset.js';
export { Conntrack, type ConntrackApi, type DeleteFlowsResult, type Flow, type FlowFilter } from './kernel/conntrack.js';
export {
  Engine,
  planWrites,
  changesOf,
  type DesiredState,
  type DesiredChanges,
  type NftElementChange,
  type EngineKernel,
  type EngineOptions,
  type Ownership,
  type Plan,
  type PlannedWrite,
  type SyncReport,
  type KindReport,
  type InvalidObject,
} from './engine/engine.js';
export { validateDesired } from './engine/validate.js';
export { serviceKey, destKey, type DesiredService } from './engine/ipvs-model.js';
export { canonicalAddress } from './net/address.js';
export { IPVS_RECORD, IPVS_RECORD_SETS } from './engine/ownership.js';
export type { DesiredVips } from './engine/addresses-diff.js';
export type { DesiredIpSet } from './engine/ipsets-diff.js';
export { elementChanges, type DesiredNftTable } from './engine/nft-diff.js';
export { SyncRunner, type RunnerOptions, type SyncRecord, type SyncTrigger, type Clock } from './daemon/runner.js';
