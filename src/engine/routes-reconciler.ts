// The engine's own routes (protocol IPVSYNC_ROUTE_PROTOCOL): checked, observed (one dump of
// the owned routes), diffed (routes-diff) and written: adds before what may use them, deletes
// after. Nothing is kept between syncs (a handful of routes: every plan reads them).
import { IPVSYNC_ROUTE_PROTOCOL, type Route, type RoutesApi } from '../kernel/routes.js';
import { applyBatch } from './apply-batch.js';
import type { Phase, Planned, PlanScope, Reconciler } from './reconciler.js';
import type { InvalidObject, SyncReport } from './types.js';
import { diffRoutes, type DesiredRoutes } from './routes-diff.js';
import { checkRoutes } from './validate.js';

/** A plan's routes before the kernel is read. */
export interface RoutesChecked {
  /** The routes without the invalid ones (undefined: routes are not managed). */
  want: DesiredRoutes | undefined;
  invalid: InvalidObject[];
  /** "table|dst" of the kernel's owned routes to leave as they are (invalid desired ones). */
  kept: ReadonlySet<string>;
}

export class RoutesReconciler implements Reconciler<RoutesChecked, Route[] | undefined> {
  readonly kind = 'routes';

  constructor(private readonly routes: RoutesApi | undefined) {}

  check({ desired }: PlanScope): RoutesChecked {
    if (!desired.routes) return { want: undefined, invalid: [], kept: new Set() };
    const r = checkRoutes(desired.routes);
    return { want: r.valid, invalid: r.invalid, kept: new Set(r.kept) };
  }

  observe(c: RoutesChecked): Promise<Route[] | undefined> {
    return c.want && this.routes ? this.routes.list({ protocol: IPVSYNC_ROUTE_PROTOCOL }) : Promise.resolve(undefined);
  }

  diff(c: RoutesChecked, listed: readonly Route[] | undefined): Planned {
    if (!c.want || !this.routes) return { shown: {}, invalid: c.invalid };
    const delta = diffRoutes(c.want, listed ?? []);
    if (c.kept.size) delta.late = delta.late.filter((o) => !(o.op === 'delRoute' && c.kept.has(`${String(o.table)}|${o.dst}`)));
    return { shown: { routes: delta }, invalid: c.invalid };
  }

  async apply(phase: Phase, p: Planned, report: SyncReport): Promise<void> {
    const d = p.shown.routes;
    if (d && phase !== 'main') await applyBatch(report.routes, d[phase], (o) => this.routes!.apply(o, { stopOnError: false }));
  }
}
