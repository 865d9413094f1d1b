// Routes the engine owns (bindMode 'route': one local route per service CIDR, so every address
// in it is delivered locally, to IPVS, without one address per VIP). Ownership is the route's
// protocol (IPVSYNC_ROUTE_PROTOCOL): only routes carrying it are observed, replaced or deleted;
// a foreign route in the way makes the add fail (EEXIST), it is never touched. Pure.
import { IPVSYNC_ROUTE_PROTOCOL, RT_TABLE_LOCAL, RT_TABLE_MAIN, type Route, type RouteOp } from '../kernel/routes.js';
import type { NativeRouteType } from '../native.js';
import { canonicalNetwork } from '../net/address.js';
import { compareText } from '../util/sorted.js';

export interface DesiredRoute {
  /** A network, "10.96.0.0/12" or "fd00:96::/108". */
  dst: string;
  type: 'local' | 'unicast' | 'blackhole' | 'unreachable';
  /** 'local' (255) by default for local routes, else 'main' (254). */
  table?: 'local' | 'main' | number;
  /** The link (none for blackhole/unreachable). */
  dev?: string;
}

export interface DesiredRoutes {
  /** Every route the engine should own; owned routes not listed are deleted. */
  routes: DesiredRoute[];
}

export interface RoutesDelta {
  /** Adds and replacements: before IPVS services that rely on them. */
  early: RouteOp[];
  /** Deletions: after IPVS stopped using them. */
  late: RouteOp[];
}

function tableNumber(r: DesiredRoute): number {
  if (typeof r.table === 'number') return r.table;
  if (r.table === 'main') return RT_TABLE_MAIN;
  if (r.table === 'local') return RT_TABLE_LOCAL;
  return r.type === 'local' ? RT_TABLE_LOCAL : RT_TABLE_MAIN;
}

/** The kernel's identity of a route in one table (one route per destination: no metrics here). */
function identity(family: string, table: number, dst: string): string {
  return `${family}|${table}|${dst}`;
}

export function diffRoutes(desired: DesiredRoutes, observed: readonly Route[]): RoutesDelta {
  const early: RouteOp[] = [];
  const late: RouteOp[] = [];
  const want = new Map<string, { r: DesiredRoute; table: number; dst: string }>();
  for (const r of desired.routes) {
    const dst = canonicalNetwork(r.dst);
    const table = tableNumber(r);
    want.set(identity(dst.includes(':') ? 'inet6' : 'inet', table, dst), { r, table, dst });
  }
  const have = new Set<string>();
  for (const o of observed) {
    if (o.protocol !== IPVSYNC_ROUTE_PROTOCOL) continue; // not ours: never touched
    const dst = canonicalNetwork(o.dst);
    const key = identity(o.family, o.table, dst);
    const w = want.get(key);
    if (w && !have.has(key)) {
      have.add(key);
      if (o.type !== w.r.type || (o.dev ?? undefined) !== w.r.dev) early.push(addOp(w.r, w.table, w.dst, true));
      continue;
    }
    const del: RouteOp = { op: 'delRoute', dst, table: o.table, protocol: IPVSYNC_ROUTE_PROTOCOL };
    if (typeof o.type === 'string') del.type = o.type as NativeRouteType;
    if (o.metric !== undefined) del.metric = o.metric;
    late.push(del);
  }
  // Adds in a fixed order: IPv4 before IPv6, then by table and destination.
  const v6 = (dst: string) => (dst.includes(':') ? 1 : 0);
  const order = ([, a]: [string, { table: number; dst: string }], [, b]: [string, { table: number; dst: string }]) =>
    v6(a.dst) - v6(b.dst) || a.table - b.table || compareText(a.dst, b.dst);
  for (const [key, w] of [...want].sort(order)) {
    if (!have.has(key)) early.push(addOp(w.r, w.table, w.dst, false));
  }
  return { early, late };
}

function addOp(r: DesiredRoute, table: number, dst: string, replace: boolean): RouteOp {
  const op: RouteOp = { op: 'addRoute', type: r.type, dst, table, protocol: IPVSYNC_ROUTE_PROTOCOL };
  if (r.dev !== undefined) op.dev = r.dev;
  if (replace) op.exist = true;
  return op;
}
