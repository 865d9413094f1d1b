import { native, type HandleOptions, type NativeGenlHandle } from '../native.js';
import { ApplyResult, HandleFacade, type BatchOptions } from './batch.js';

export interface GenlFamily {
  name: string;
  id: number;
  version: number;
  maxAttr: number;
}

export interface GenlOptions extends HandleOptions {
  /** Receive buffer to ask the kernel for (default 16 MiB). */
  rcvbufBytes?: number;
}

/** Generic netlink control (nlctrl): which families the kernel has. */
export class Genl extends HandleFacade<NativeGenlHandle> {
  static async open(opts: GenlOptions = {}): Promise<Genl> {
    const h = new (native().GenlHandle)(opts);
    await h.ready();
    return new Genl(h);
  }

  /** Resolves many family names in one batch; `families[i]` is null where name i is unknown. */
  async families(names: string[], opts: BatchOptions = {}): Promise<{ result: ApplyResult; families: Array<GenlFamily | null> }> {
    const raw = await this.h.families(names, opts);
    return { result: new ApplyResult(raw), families: raw.families };
  }

  /** One family, or null when the kernel has none by that name. */
  async family(name: string): Promise<GenlFamily | null> {
    const { result, families } = await this.families([name]);
    if (result.status(0) === 'error' && result.errors[0]?.code !== 'ENOENT') throw result.errors[0];
    return families[0] ?? null;
  }
}
