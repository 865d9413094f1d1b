// conntrack over nfnetlink (CTNETLINK): list, count and delete flows by filter. The ConntrackApi
// interface is what the sync engine uses (an in-memory double implements the same).
import type { NetlinkError } from '../errors.js';
import {
  native,
  type HandleOptions,
  type NativeConntrackHandle,
  type NativeFlow,
  type NativeFlowFilter,
} from '../native.js';
import { HandleFacade, redoInterrupted } from './batch.js';

export type Flow = NativeFlow;
export type FlowFilter = NativeFlowFilter;

export interface DeleteFlowsResult {
  /** Flows the dump matched. */
  matched: number;
  deleted: number;
  /** Matched, but gone before the delete reached them (expired): not an error. */
  gone: number;
  errors: NetlinkError[];
  sendmsgCalls: number;
}

export interface ConntrackApi {
  list(filter?: FlowFilter): Promise<Flow[]>;
  count(filter?: FlowFilter): Promise<number>;
  /** Deletes every matching flow: one dump, then one batch of deletes by tuple. */
  delete(filter: FlowFilter): Promise<DeleteFlowsResult>;
}

/**
 * Stale flows to delete, kept until a delete of them succeeds: a filter whose delete fails (or
 * that a failed sync could not reach) is tried again at the next flush, so a sync that repairs
 * the tables repairs the flows too, though its own diff no longer sees the endpoint go.
 */
export class StaleFlows {
  private readonly pending = new Map<string, FlowFilter>();

  get size(): number {
    return this.pending.size;
  }

  add(filters: readonly FlowFilter[]): void {
    for (const f of filters) this.pending.set(JSON.stringify([f.family, f.proto, f.origDst, f.origDport, f.replySrc, f.replySport]), f);
  }

  /** Deletes the flows of every pending filter (one dump and one batch of deletes each) but
   *  those `serving` says lead to an endpoint that serves again (dropped: its flows are live);
   *  the errors go to `errors`, their filters stay. Returns how many flows were deleted. */
  async flush(ct: ConntrackApi, errors: NetlinkError[], serving: (f: FlowFilter) => boolean = () => false): Promise<number> {
    let n = 0;
    for (const [key, f] of this.pending) {
      if (serving(f)) {
        this.pending.delete(key);
        continue;
      }
      try {
        const r = await ct.delete(f);
        n += r.deleted;
        errors.push(...r.errors);
        if (!r.errors.length) this.pending.delete(key);
      } catch (e) {
        errors.push(e as NetlinkError);
      }
    }
    return n;
  }
}

/**
 * Flows are dumped per family (the kernel filters by family) and matched in C++ against the
 * rest of the filter, as conntrack-tools does; only matching flows cross into JS.
 */
export class Conntrack extends HandleFacade<NativeConntrackHandle> implements ConntrackApi {
  /** Opens a handle: its socket is opened now, in `opts.netns` (a missing namespace or
   *  missing permission rejects here). */
  static async open(opts: HandleOptions = {}): Promise<Conntrack> {
    const h = new (native().ConntrackHandle)(opts);
    await h.ready();
    return new Conntrack(h);
  }

  // async: invalid input rejects the promise like every other failure.
  async list(filter: FlowFilter = {}): Promise<Flow[]> {
    return redoInterrupted(() => this.h.list(filter));
  }

  async count(filter: FlowFilter = {}): Promise<number> {
    return this.h.count(filter);
  }

  async delete(filter: FlowFilter): Promise<DeleteFlowsResult> {
    return this.h.delete(filter);
  }

  /** kube-proxy's flush for a UDP endpoint that went away: flows of `proto` whose reply comes
   *  from the endpoint. */
  flushEndpoint(endpoint: string, port: number, proto: FlowFilter['proto'] = 'udp'): Promise<DeleteFlowsResult> {
    return this.delete({ proto, replySrc: endpoint, replySport: port });
  }

  /** Flows to a service address (ClusterIP, NodePort address …) of `proto`. */
  flushService(address: string, port: number | undefined, proto: FlowFilter['proto'] = 'udp'): Promise<DeleteFlowsResult> {
    return this.delete({ proto, origDst: address, ...(port === undefined ? {} : { origDport: port }) });
  }
}
