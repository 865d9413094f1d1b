export { NetlinkError, type NetlinkErrorFields, type NetlinkErrorKind } from './errors.js';
export { ApplyResult, type BatchOptions, type OpStatus } from './kernel/batch.js';
export { Genl, type GenlFamily, type GenlOptions } from './kernel/genl.js';
export { Ipvs, formatInfo, type IpvsInfo } from './kernel/ipvs.js';
export { Links, type Address, type Link, type LinkOp, type LinksApi } from './kernel/links.js';
export type { HandleOptions, SocketStats } from './native.js';
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
export { formatSave as formatIpsetSave, parseRestore as parseIpsetRestore, RestoreSyntaxError } from './kernel/ipset-format.js';
export { Conntrack, type ConntrackApi, type DeleteFlowsResult, type Flow, type FlowFilter } from './kernel/conntrack.js';
