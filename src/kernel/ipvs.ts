import { native, type HandleOptions, type NativeIpvsHandle, type SocketStats } from '../native.js';

export interface IpvsInfo {
  /** "1.2.1" */
  version: string;
  /** The raw version number (0x010201). */
  versionCode: number;
  /** Size of the connection hash table (`ip_vs_conn_tab_bits`). */
  connTableSize: number;
}

/** IPVS over generic netlink. One handle owns one netlink socket (per network namespace). */
export class Ipvs {
  private constructor(private readonly h: NativeIpvsHandle) {}

  /** Opens a handle and checks that the kernel has IPVS (throws `unsupported` naming ip_vs). */
  static async open(opts: HandleOptions = {}): Promise<Ipvs> {
    const ipvs = new Ipvs(new (native().IpvsHandle)(opts));
    await ipvs.info();
    return ipvs;
  }

  /** IPVS_CMD_GET_INFO: version and connection table size. */
  info(): Promise<IpvsInfo> {
    return this.h.info();
  }

  /** Counters of this handle's socket: how many syscalls and messages it has cost. */
  socketStats(): SocketStats {
    return this.h.stats();
  }
}

/** ipvsadm's wording: "IP Virtual Server version 1.2.1 (size=4096)". */
export function formatInfo(i: IpvsInfo): string {
  return `IP Virtual Server version ${i.version} (size=${i.connTableSize})`;
}
