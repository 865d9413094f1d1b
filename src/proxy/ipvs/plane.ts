// The IPVS data plane behind the proxier's DataPlane seam: the services translated (only the
// changed ones, patched into the last model, when that can be done), then the engine's desired
// state: IPVS services, VIPs on the link (or local routes), the nftables glue and kube-proxy's
// ipsets. A model patched from the last clean one names its changed virtual servers and glue
// elements; otherwise the engine compares.
import type { DesiredChanges } from '../../engine/engine.js';
import type { FlowFilter } from '../../kernel/conntrack.js';
import type { DataPlane, PlaneSources, PlaneStep } from '../data-plane.js';
import { GlueCache, desiredState } from './desired.js';
import { changedServices } from './model-diff.js';
import { TranslateCache, translate, translatePatch } from './translate.js';
import type { ProxyModel } from './types.js';

export interface IpvsPlaneOptions {
  vipLink: string;
  glue: boolean;
  kubeIpsets: boolean;
  bindMode: 'address' | 'route';
}

export class IpvsPlane implements DataPlane {
  /** The translation and the IPVS diff leave their garbage behind the plan (docs/performance.md). */
  readonly collectBeforeApply = true;
  /** Per-service translations: a step translates only the services that changed. */
  private readonly translations = new TranslateCache();
  /** The glue tables last built: reused, or patched when only hairpin changed. */
  private readonly glueCache = new GlueCache();
  /** The model of the last step the engine applied cleanly. */
  private last: ProxyModel | undefined;
  /** The last step's model, until it is applied. */
  private stepped: ProxyModel | undefined;

  constructor(private readonly opts: IpvsPlaneOptions) {}

  step(full: boolean, changed: ReadonlySet<string>, src: PlaneSources): PlaneStep {
    // The cache already misses on replaced objects; this also covers an object changed in place.
    this.translations.invalidate(changed);
    const model =
      translatePatch(this.translations, changed, (name) => src.objectsOf(name), src.size, src.node, src.config) ?? translate(src.input(), this.translations);
    // A model patched from the last one applied names what it changed; otherwise compare.
    const patched = this.translations.patched;
    const last = this.last;
    // Its lists are the patched model's (changed in place): a base again once this applies.
    if (patched) this.last = undefined;
    const fromLast = patched && patched.from === last ? patched : undefined;
    const desired = desiredState(
      model,
      { vipLink: this.opts.vipLink, glue: this.opts.glue, kubeIpsets: this.opts.kubeIpsets, bindMode: this.opts.bindMode, serviceCidrs: src.serviceCIDRs ?? src.config.serviceCIDRs ?? [] },
      this.glueCache,
      patched,
    );
    let changes: DesiredChanges | undefined;
    if (last) {
      // the glue's element changes, when they are from the tables of the last step (which
      // applied cleanly): in a full step too (the engine takes them while nobody committed)
      const nft = this.opts.glue && this.glueCache.from === last.glue ? this.glueCache.changes : undefined;
      const services = full ? undefined : fromLast ? fromLast.services : changedServices(last.services, model.services);
      if (services || nft) changes = { ...(services ? { services } : {}), ...(nft ? { nft } : {}) };
    }
    this.stepped = model;
    return { desired, ...(changes ? { changes } : {}), summary: model, model, staleFlows: [] };
  }

  applied(clean: boolean): void {
    // Only a clean sync is a base for incremental ones; otherwise the next is full.
    this.last = clean ? this.stepped : undefined;
  }

  reset(): void {
    this.last = undefined;
  }

  /** The IPVS reconciler deletes a removed UDP real server's flows itself. */
  serves(_f: FlowFilter): boolean {
    return false;
  }
}
