export { NetlinkError, type NetlinkErrorFields, type NetlinkErrorKind } from './errors.js';
export { ApplyResult, type BatchOptions, type OpStatus } from './kernel/batch.js';
export { Genl, type GenlFamily, type GenlOptions } from './kernel/genl.js';
export { Ipvs, formatInfo, type IpvsInfo } from './kernel/ipvs.js';
export { Links, type Link } from './kernel/links.js';
export type { HandleOptions, SocketStats } from './native.js';
