// Routes over rtnetlink (RTM_NEWROUTE / RTM_DELROUTE / RTM_GETROUTE dump), IPv4 and IPv6: the
// RoutesApi interface (an in-memory double implements the same) and the real implementation
// over the addon's rtnetlink handle. Ops are validated before anything is sent (bad CIDR, host
// bits set, prefix out of range, mixed families, unknown names: a NetlinkError of kind
// 'invalid'); kernel failures keep errno, op text and op index.
import {
  native,
  type HandleOptions,
  type NativeRoute,
  type NativeRouteFilter,
  type NativeRouteOp,
  type NativeRtnlHandle,
} from '../native.js';
import { NetlinkError } from '../errors.js';
import { ApplyResult, HandleFacade, checkOpList, redoInterrupted, type BatchOptions } from './batch.js';

export type Route = NativeRoute;
export type RouteOp = NativeRouteOp;
export type RouteFilter = NativeRouteFilter;

/** The rtm_protocol that marks ipvsync's routes (unassigned in rtnetlink.h and iproute2's
 *  rt_protos; `ip route` shows it as "proto 249"). Only routes carrying it are ever deleted. */
export const IPVSYNC_ROUTE_PROTOCOL = 249;
export const RT_TABLE_LOCAL = 255;
export const RT_TABLE_MAIN = 254;

/** What the sync engine needs from rtnetlink routes; the real class and test doubles implement it. */
export interface RoutesApi {
  /** The routes that match (one dump; filtered by family, table, protocol, type). */
  list(filter?: RouteFilter): Promise<Route[]>;
  /** Ops in order (many per sendmsg unless `stopOnError`, which stops at the first failure);
   *  an existing route fails its add with EEXIST unless `exist` is set, a missing one its
   *  delete with ESRCH. */
  apply(ops: RouteOp[], opts?: BatchOptions): Promise<ApplyResult>;
}

/** Routes over rtnetlink. One handle owns one netlink socket (per namespace). */
export class Routes extends HandleFacade<NativeRtnlHandle> implements RoutesApi {
  /** Opens a handle: its socket is opened now, in `opts.netns` (a missing namespace or
   *  missing permission rejects here). */
  static async open(opts: HandleOptions = {}): Promise<Routes> {
    const h = new (native().RtnlHandle)(opts);
    await h.ready();
    return new Routes(h);
  }

  list(filter: RouteFilter = {}): Promise<Route[]> {
    return redoInterrupted(() => this.h.routes(filter));
  }

  async apply(ops: RouteOp[], opts: BatchOptions = {}): Promise<ApplyResult> {
    checkRouteOps(ops);
    return new ApplyResult(await this.h.apply(ops, opts));
  }
}

/** The ops of a routes apply: a list of route ops. The rtnetlink handle takes link ops too, so
 *  this surface refuses them (a NetlinkError of kind 'invalid' naming the op). */
export function checkRouteOps(ops: unknown): asserts ops is RouteOp[] {
  checkOpList(ops, 'routes apply');
  ops.forEach((o, i) => {
    let op: unknown;
    try {
      op = (o as { op?: unknown }).op;
    } catch (e) {
      throw NetlinkError.atOp(e, { index: i });
    }
    if (op !== 'addRoute' && op !== 'delRoute')
      throw NetlinkError.invalid(`op ${i}`, `not a route op (${typeof op === 'string' ? JSON.stringify(op) : typeof op})`, { index: i });
  });
}
