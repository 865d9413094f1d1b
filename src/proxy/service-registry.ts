// The frontend registry both data planes keep their services in: who owns each frontend
// (address, protocol, port), who wanted one another service owns, and what the service model
// leaves the daemon to report (health checks, Local policies without local endpoints,
// warnings). A plane hands it each service's parts — its frontends, and whatever else it puts
// into the data plane — and a sink that puts and takes them; the registry decides which
// frontends a service owns, as a translation of every service in name order would: the first
// service (by name) claiming a frontend keeps it, and the others are warned.
import { localWithoutEndpoints, notProgrammed, type FrontendKind, type ServiceModel } from '../kube/service-model.js';
import type { HealthCheck, ModelWarning, ServiceSummary } from '../kube/types.js';
import { compareText } from '../util/sorted.js';

/** A frontend a service port claims. */
export interface FrontendClaim {
  /** The service's name ("namespace/name"). */
  readonly service: string;
  /** "address protocol port" (canonical address): one owner per key. */
  readonly key: string;
  /** The service port's name ("namespace/name:port"). */
  readonly portName: string;
  readonly kind: FrontendKind;
  readonly address: string;
  readonly protocol: string;
  readonly port: number;
}

/** What a plane makes of one service: its frontends, and its own warnings (beside the model's). */
export interface PlaneParts<F extends FrontendClaim> {
  readonly frontends: readonly F[];
  readonly warnings?: readonly string[];
}

/** Puts a service's parts into the plane, and takes them out: `owned` is the frontends of
 *  `parts` the service owns. */
export interface PartsSink<F extends FrontendClaim, P extends PlaneParts<F>> {
  put(parts: P, owned: readonly F[]): void;
  take(parts: P, owned: readonly F[]): void;
}

/** A service's model made into a plane's parts, or what made either fail (the service is then
 *  not programmed, and warned about). */
export type Made<P> = { model: ServiceModel; parts: P } | { error: unknown };

/** What the registry keeps of a service's model (not the model: its endpoints are the parts'). */
interface Facts {
  readonly warnings: readonly string[];
  readonly healthCheck: HealthCheck | undefined;
  readonly noLocal: { readonly internal: number; readonly external: number };
}

/** A service as the registry takes it: its parts (none: it failed) and facts. */
interface Taken<P> {
  readonly parts: P | undefined;
  readonly facts: Facts;
}

/** A service as the registry holds it. */
interface Entry<F extends FrontendClaim, P extends PlaneParts<F>> extends Taken<P> {
  readonly owned: readonly F[];
  /** Keys of frontends it claimed that another owns. */
  readonly lost: readonly string[];
  readonly warnings: readonly string[];
}

/** What a change did to one service: the frontends it owned before and owns now. */
export interface Readded<F> {
  name: string;
  was: readonly F[] | undefined;
  now: readonly F[];
}

const NONE: readonly never[] = Object.freeze([]);
const NO_LOCAL_NONE = Object.freeze({ internal: 0, external: 0 });
/** An array as long as its elements (one built by pushing keeps room for 17). */
const exact = <T>(a: T[]): readonly T[] => (a.length ? a.slice() : NONE);

const NO_FACTS: Facts = Object.freeze({ warnings: NONE, healthCheck: undefined, noLocal: NO_LOCAL_NONE });

/** What the registry keeps of a made service: its parts, and its model's facts (the model
 *  itself is dropped: its endpoints are in the parts already). */
function take<P extends PlaneParts<FrontendClaim>>(made: Made<P>): Taken<P> {
  if ('error' in made) return { parts: undefined, facts: { ...NO_FACTS, warnings: [notProgrammed(made.error)] } };
  const { model, parts } = made;
  let internal = 0;
  let external = 0;
  for (const p of model.ports) {
    const n = localWithoutEndpoints(p);
    if (n.internal) internal++;
    if (n.external) external++;
  }
  const warnings = model.warnings.length || parts.warnings?.length ? [...model.warnings, ...(parts.warnings ?? NONE)] : NONE;
  // most services have none of these: one shared object
  const facts = warnings === NONE && !model.healthCheck && !internal && !external ? NO_FACTS : { warnings, healthCheck: model.healthCheck, noLocal: internal || external ? { internal, external } : NO_LOCAL_NONE };
  return { parts, facts };
}

export class ServiceRegistry<F extends FrontendClaim, P extends PlaneParts<F>> {
  private services = new Map<string, Entry<F, P>>();
  /** The services with a health check, a Local policy without local endpoints or a warning:
   *  what the summary lists (few, so a sync does not walk every service). */
  private notable = new Map<string, Entry<F, P>>();
  private owners = new Map<string, F>();
  /** Frontend keys other services claimed too, and which. */
  private wanted = new Map<string, Set<string>>();

  constructor(
    private readonly sink: PartsSink<F, P>,
    /** The configuration's warnings (service ""), first in the summary. */
    private readonly contextWarnings: readonly ModelWarning[] = [],
  ) {}

  get size(): number {
    return this.services.size;
  }

  /** Every service, from nothing, in the order given (by name: the first of two claiming a
   *  frontend keeps it). The sink is expected empty. */
  build(names: Iterable<string>, make: (name: string) => Made<P>): void {
    this.services = new Map();
    this.notable = new Map();
    this.owners = new Map();
    this.wanted = new Map();
    for (const name of names) this.add(name, take(make(name)));
  }

  /**
   * The changed services (what they are made of now; undefined: gone) put in place of what
   * they were, with every service whose frontends they contend for taken out and put back too
   * (in name order), so that each frontend ends with the owner a build from nothing would give
   * it: a service that gives up a frontend hands it to the first that wanted it, and one that
   * claims a frontend a later service owns takes it. Each changed service is made when the
   * registry takes it (`make`; undefined: gone), as in build. Returns every service put back.
   */
  update(changed: Iterable<string>, make: (name: string) => Made<P> | undefined): Readded<F>[] {
    const redo = new Map<string, Taken<P> | undefined>();
    for (const n of changed) {
      const m = make(n);
      redo.set(n, m && take(m));
    }
    const queue = [...redo.keys()];
    const contend = (key: string) => {
      const owner = this.owners.get(key)?.service;
      for (const s of [...(owner !== undefined ? [owner] : []), ...(this.wanted.get(key) ?? [])]) {
        if (redo.has(s)) continue;
        const e = this.services.get(s)!;
        redo.set(s, { parts: e.parts, facts: e.facts });
        queue.push(s);
      }
    };
    while (queue.length) {
      const name = queue.pop()!;
      const e = this.services.get(name);
      for (const fe of e?.owned ?? NONE) contend(fe.key);
      for (const k of e?.lost ?? NONE) contend(k);
      const t = redo.get(name);
      for (const fe of t?.parts?.frontends ?? NONE) contend(fe.key);
    }
    const names = [...redo.keys()].sort(compareText);
    const was = new Map(names.map((n) => [n, this.services.get(n)?.owned]));
    for (const n of names) this.remove(n);
    const out: Readded<F>[] = [];
    for (const n of names) {
      const t = redo.get(n);
      if (t) this.add(n, t);
      out.push({ name: n, was: was.get(n), now: this.services.get(n)?.owned ?? NONE });
    }
    return out;
  }

  /** The owned frontend of a key. */
  owner(key: string): F | undefined {
    return this.owners.get(key);
  }

  /** Every service's name, owned frontends and parts, in no order. */
  forEach(fn: (name: string, owned: readonly F[], parts: P | undefined) => void): void {
    this.services.forEach((e, name) => fn(name, e.owned, e.parts));
  }

  /** The health checks, the Local policies without local endpoints and the warnings. */
  summary(): ServiceSummary {
    const healthChecks: HealthCheck[] = [];
    const noLocalEndpoints: string[] = [];
    const total = { internal: 0, external: 0 };
    const warnings: ModelWarning[] = [...this.contextWarnings];
    for (const [name, e] of [...this.notable].sort(([a], [b]) => compareText(a, b))) {
      const f = e.facts;
      if (f.healthCheck) healthChecks.push(f.healthCheck);
      if (f.noLocal.internal || f.noLocal.external) noLocalEndpoints.push(name);
      total.internal += f.noLocal.internal;
      total.external += f.noLocal.external;
      for (const message of e.warnings) warnings.push({ service: name, message });
    }
    healthChecks.sort((a, b) => a.nodePort - b.nodePort);
    return { healthChecks, noLocalEndpoints, noLocalEndpointsTotal: total, warnings };
  }

  private add(name: string, taken: Taken<P>): void {
    const { parts, facts } = taken;
    if (!parts) {
      const e: Entry<F, P> = { parts, facts, owned: NONE, lost: NONE, warnings: facts.warnings };
      this.services.set(name, e);
      this.notable.set(name, e);
      return;
    }
    let conflicts: string[] | undefined;
    const owned: F[] = [];
    const lost: string[] = [];
    for (const fe of parts.frontends) {
      const owner = this.owners.get(fe.key);
      if (owner !== undefined) {
        lost.push(fe.key);
        let w = this.wanted.get(fe.key);
        if (!w) this.wanted.set(fe.key, (w = new Set()));
        w.add(name);
        (conflicts ??= []).push(`${fe.kind} ${fe.address}:${fe.port}/${fe.protocol} already belongs to ${owner.portName}, ignored`);
        continue;
      }
      this.owners.set(fe.key, fe);
      owned.push(fe);
    }
    this.sink.put(parts, owned);
    // Kept for every service (10k of them): exact-size arrays, one shared empty one.
    const e: Entry<F, P> = {
      parts,
      facts,
      owned: owned.length === parts.frontends.length ? parts.frontends : exact(owned),
      lost: exact(lost),
      warnings: conflicts ? [...new Set([...facts.warnings, ...conflicts])] : facts.warnings.length ? [...new Set(facts.warnings)] : NONE,
    };
    this.services.set(name, e);
    if (facts.healthCheck || facts.noLocal.internal || facts.noLocal.external || e.warnings.length) this.notable.set(name, e);
  }

  private remove(name: string): void {
    const e = this.services.get(name);
    if (!e) return;
    this.services.delete(name);
    this.notable.delete(name);
    if (e.parts) this.sink.take(e.parts, e.owned);
    for (const fe of e.owned) this.owners.delete(fe.key);
    for (const k of e.lost) {
      const w = this.wanted.get(k);
      w?.delete(name);
      if (w?.size === 0) this.wanted.delete(k);
    }
  }
}
