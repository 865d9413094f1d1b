// Links and addresses over rtnetlink: the LinksApi interface (an in-memory double implements the
// same) and the real implementation over the addon.
import {
  native,
  type HandleOptions,
  type NativeAddress,
  type NativeLink,
  type NativeRtnlHandle,
  type NativeRouteOp,
  type NativeRtnlOp,
} from '../native.js';
import { ApplyResult, HandleFacade, checkOpList, redoInterrupted, type BatchOptions } from './batch.js';

export type Link = NativeLink;
export type Address = NativeAddress;
/** The address protocol (IFA_PROTO, Linux 6.1+) that marks the addresses ipvsync adds: an
 *  address on the VIP link is the engine's iff it carries it (the kernel's own, 1-3, and those
 *  added without one, 0, are someone else's). The number is the routes' (IPVSYNC_ROUTE_PROTOCOL);
 *  the kernel keeps the two spaces apart. */
export const IPVSYNC_ADDRESS_PROTOCOL = 249;

/** The alias (IFLA_IFALIAS) of a link the engine created: `cleanup` deletes a VIP link only when
 *  it carries it, so a kube-ipvs0 that was there before ipvsync stays. */
export const IPVSYNC_LINK_ALIAS = 'ipvsync';

/** Link and address ops (routes: RouteOp in routes.ts, over the same kind of handle). */
export type LinkOp = Exclude<NativeRtnlOp, NativeRouteOp>;

/** What the sync engine needs from rtnetlink; the real class and test doubles implement it. */
export interface LinksApi {
  /** Every link (one dump). */
  list(): Promise<Link[]>;
  /** One link by name, or null. */
  get(name: string): Promise<Link | null>;
  /** Every address of the node, or of one link / family, with link names and scopes. */
  addresses(opts?: { family?: 'inet' | 'inet6'; link?: string }): Promise<Address[]>;
  /** Ops in order, many per sendmsg; an address that exists fails its op with EEXIST unless
   *  `exist` is set, so callers can tell "already there" from real failures. */
  apply(ops: LinkOp[], opts?: BatchOptions): Promise<ApplyResult>;
}

/** Links and addresses over rtnetlink. One handle owns one netlink socket (per namespace). */
export class Links extends HandleFacade<NativeRtnlHandle> implements LinksApi {
  /** Opens a handle: its socket is opened now, in `opts.netns` (a missing namespace or
   *  missing permission rejects here). */
  static async open(opts: HandleOptions = {}): Promise<Links> {
    const h = new (native().RtnlHandle)(opts);
    await h.ready();
    return new Links(h);
  }

  /** Every link of the namespace (one RTM_GETLINK dump). */
  list(): Promise<Link[]> {
    return redoInterrupted(() => this.h.links());
  }

  async get(name: string): Promise<Link | null> {
    return this.h.link(name);
  }

  async addresses(opts: { family?: 'inet' | 'inet6'; link?: string } = {}): Promise<Address[]> {
    return redoInterrupted(() => this.h.addresses(opts));
  }

  async apply(ops: LinkOp[], opts: BatchOptions = {}): Promise<ApplyResult> {
    checkOpList(ops, 'links apply');
    return new ApplyResult(await this.h.apply(ops, opts));
  }
}
