// `ipvsync`: the netlink library — the kernel handles, their text formats, the sync engine and
// its runner. What an embedder programs the kernel with, and nothing of Kubernetes: the proxy
// (its Kubernetes semantics, manifests and daemon pieces) is `ipvsync/proxy` (src/api/proxy.ts),
// the in-memory kernel `ipvsync/testing`.
// Only what an embedder calls or must name is exported: each handle, its interface (to take the
// real handle or the in-memory one) and its ops; the engine's inputs and outputs. A type that is
// only a part of another (a listing's rows, an options field) stays reachable through it.
// docs/api.md documents every name exported here.
export { NetlinkError, type NetlinkErrorKind } from './errors.js';
export { ApplyResult } from './kernel/batch.js';
export { Genl } from './kernel/genl.js';
export {
  Nftables, NftTransaction, NftCommitResult, PRIORITY,
  type NftablesApi, type NftOp, type TableSpec, type ChainSpec, type SetSpec, type SetElement, type RuleSpec,
} from './kernel/nftables.js';
export * as nftExpr from './kernel/nft-expr.js';
export * as nftRules from './kernel/nft-rules.js';
export { Links, type LinkOp, type LinksApi } from './kernel/links.js';
export { Routes, type RouteOp, type RoutesApi } from './kernel/routes.js';
export {
  Ipvs,
  type IpvsApi,
  type IpvsOp,
  type Service,
  type ServiceConfig,
  type ServiceId,
  type Destination,
  type DestinationConfig,
} from './kernel/ipvs.js';
export { formatList, formatSave, parseRules, RulesParseError, fileResolver } from './formats/ipvsadm.js';
export { addonCpuUsage, memoryPressure } from './native.js';
export { IpSets, type IpSetMember, type IpSetOp, type IpSetsApi } from './kernel/ipsets.js';
export { formatSave as formatIpsetSave, parseRestore as parseIpsetRestore, RestoreSyntaxError } from './formats/ipset.js';
export { Conntrack, type ConntrackApi } from './kernel/conntrack.js';
export {
  Engine,
  planWrites,
  type DesiredState,
  type DesiredChanges,
  type EngineKernel,
  type EngineOptions,
  type Plan,
  type SyncReport,
} from './engine/engine.js';
export { serviceKey, type DesiredService } from './engine/ipvs-model.js';
export { canonicalAddress } from './net/address.js';
export { elementChanges, type DesiredNftTable } from './engine/nft-diff.js';
export { SyncRunner } from './daemon/runner.js';
