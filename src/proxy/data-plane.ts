// The proxier's one seam to a data plane. The proxier keeps the Kubernetes objects (change
// trackers) and drives the engine; a plane turns the services into the engine's desired state,
// and names what changed since the last step the engine applied cleanly. Each plane is a
// folder (ipvs/, nftables/) behind this interface: the proxier has no mode branches.
import type { DesiredChanges, DesiredState } from '../engine/engine.js';
import type { FlowFilter } from '../kernel/conntrack.js';
import type { V1EndpointSlice, V1Service } from '../kube/api-types.js';
import type { NodeInfo, ProxyConfig, ServiceSummary } from '../kube/types.js';
import type { ProxyModel } from './ipvs/types.js';

/** A service's Service and EndpointSlices (undefined: no Service). */
export type ServiceObjects = { svc: V1Service; slices: readonly V1EndpointSlice[] } | undefined;

/** What a plane reads of the proxier's objects and configuration for a step. */
export interface PlaneSources {
  readonly node: NodeInfo;
  readonly config: ProxyConfig;
  /** The ServiceCIDR objects' CIDRs (undefined: none, the configuration's apply). */
  readonly serviceCIDRs: string[] | undefined;
  /** How many services there are. */
  readonly size: number;
  /** Every service's name, sorted. */
  names(): string[];
  objectsOf(name: string): ServiceObjects;
}

/** A plane's step: the engine's desired state, and what changed since the last clean one. */
export interface PlaneStep {
  desired: DesiredState;
  /** The changes since the last step the engine applied cleanly (undefined: the engine
   *  compares everything; without services, every IPVS service). */
  changes?: DesiredChanges;
  /** What the services' semantics leave the daemon to report and serve: health-check ports,
   *  policies without local endpoints, warnings. */
  summary: ServiceSummary;
  /** The IPVS data plane's translation (its virtual servers, VIPs and glue). */
  model?: ProxyModel;
  /** UDP and SCTP flows the step leaves stale: deleted once it is applied. */
  staleFlows: FlowFilter[];
}

export interface DataPlane {
  /** A full sync collects garbage once the step built its state from nothing and again before
   *  the engine applies (ProxierOptions.collectGarbage): worth it where a step and a plan
   *  leave much garbage. */
  readonly collectsGarbage: boolean;
  /** The step for the services named in `changed` (full: every service compared). */
  step(full: boolean, changed: ReadonlySet<string>, src: PlaneSources): PlaneStep;
  /** The engine applied the last step; `clean`: without an error (the base of the next). */
  applied(clean: boolean): void;
  /** A step threw, or was only planned: the next one starts from nothing. */
  reset(): void;
  /** Whether a stale flow's endpoint serves its frontend again (its flows are kept). */
  serves(f: FlowFilter): boolean;
}
