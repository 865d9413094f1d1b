// The engine's own routes (protocol IPVSYNC_ROUTE_PROTOCOL): checked, observed (one dump of
// the owned routes), diffed (routes-diff) and written: adds before what may use them, deletes
// after. Nothing is kept between syncs (a handful of routes: every plan reads them).
import { IPVSYNC_ROUTE_PROTOCOL, type Route, type RoutesApi } from '../kernel/routes.js';
import { applyBatch, type KindReport } from './apply-batch.js';
import type { InvalidObject } from './types.js';
import { diffRoutes, type DesiredRoutes, type RoutesDelta } from './routes-diff.js';
import { checkRoutes } from './validate.js';

/** A plan's routes before the kernel is read. */
export interface RoutesStart {
  /** The routes without the invalid ones (undefined: routes are not managed). */
  want: DesiredRoutes | undefined;
  invalid: InvalidObject[];
  /** "table|dst" of the kernel's owned routes to leave as they are (invalid desired ones). */
  kept: ReadonlySet<string>;
}

export class RoutesReconciler {
  constructor(private readonly routes: RoutesApi | undefined) {}

  start(desired: DesiredRoutes | undefined): RoutesStart {
    if (!desired) return { want: undefined, invalid: [], kept: new Set() };
    const r = checkRoutes(desired);
    return { want: r.valid, invalid: r.invalid, kept: new Set(r.kept) };
  }

  observe(s: RoutesStart): Promise<Route[] | undefined> {
    return s.want && this.routes ? this.routes.list({ protocol: IPVSYNC_ROUTE_PROTOCOL }) : Promise.resolve(undefined);
  }

  diff(s: RoutesStart, listed: readonly Route[] | undefined): RoutesDelta | undefined {
    if (!s.want || !this.routes) return undefined;
    const delta = diffRoutes(s.want, listed ?? []);
    if (s.kept.size) delta.late = delta.late.filter((o) => !(o.op === 'delRoute' && s.kept.has(`${String(o.table)}|${o.dst}`)));
    return delta;
  }

  async applyEarly(delta: RoutesDelta | undefined, report: KindReport): Promise<void> {
    if (delta && this.routes) await applyBatch(report, delta.early, (o) => this.routes!.apply(o, { stopOnError: false }));
  }

  async applyLate(delta: RoutesDelta | undefined, report: KindReport): Promise<void> {
    if (delta && this.routes) await applyBatch(report, delta.late, (o) => this.routes!.apply(o, { stopOnError: false }));
  }
}
