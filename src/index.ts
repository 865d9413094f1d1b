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
export { formatList, formatSave, parseRules, RulesParseError, fileResolver, numeric, type NameResolver, type ParsedRule } from './kernel/ipvsadm-format.js';
export { Links, type Link } from './kernel/links.js';
export type { HandleOptions, SocketStats } from './native.js';
