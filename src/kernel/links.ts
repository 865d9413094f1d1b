import { native, type HandleOptions, type NativeLink, type NativeRtnlHandle, type SocketStats } from '../native.js';

export type Link = NativeLink;

/** Links and addresses over rtnetlink. */
export class Links {
  private constructor(private readonly h: NativeRtnlHandle) {}

  static async open(opts: HandleOptions = {}): Promise<Links> {
    return new Links(new (native().RtnlHandle)(opts));
  }

  /** Every link of the namespace (one RTM_GETLINK dump). */
  list(): Promise<Link[]> {
    return this.h.links();
  }

  socketStats(): SocketStats {
    return this.h.stats();
  }
}
