// `ipvsync cleanup`'s work over kernel handles (the real ones, or the in-memory kernel in
// tests): remove what ipvsync owns, by the rule `sync` and `proxy` follow (README "Ownership"),
// and nothing else.
import { NetlinkError } from '../errors.js';
import type { EngineKernel } from '../engine/engine.js';
import { keyToId, serviceKey } from '../engine/ipvs-model.js';
import { readRecord, recordedKeys } from '../engine/ownership.js';
import type { IpSetsApi } from '../kernel/ipsets.js';
import { NftTransaction } from '../kernel/nftables.js';
import { IPVSYNC_ADDRESS_PROTOCOL, IPVSYNC_LINK_ALIAS, type LinksApi } from '../kernel/links.js';
import { IPVSYNC_ROUTE_PROTOCOL, type RoutesApi } from '../kernel/routes.js';
import { GLUE_TABLE } from './ipvs/glue.js';

/** The handles; a kernel without IPVS, nftables or ipsets has none of that kind (nothing of it to remove). */
export interface CleanupKernel extends Pick<EngineKernel, 'ipvs' | 'nft'> {
  links: LinksApi;
  routes: RoutesApi;
  ipsets?: IpSetsApi;
}

export interface CleanupResult {
  services: number;
  /** Sets named with the claimed ipset prefix (the record's two are not counted). */
  ipsets: number;
  addresses: number;
  routes: number;
  tables: number;
  link: boolean;
}

/** The kernel's own addresses (IFAPROT_KERNEL_LO, _RA, _LL): they come and go with the link. */
function kernels(protocol: number | undefined): boolean {
  return protocol !== undefined && protocol >= 1 && protocol <= 3;
}

/**
 * Removes the virtual servers in the engine's record (engine/ownership.ts), the glue tables,
 * the routes carrying IPVSYNC_ROUTE_PROTOCOL, the addresses on the VIP link carrying
 * IPVSYNC_ADDRESS_PROTOCOL, then the record itself (kept while a recorded virtual server could
 * not be deleted, so a retry still knows it); and the VIP link when ipvsync created it (its
 * alias is IPVSYNC_LINK_ALIAS) and nothing but the kernel's own addresses is left on it. Firewall-mark services are recorded in memory only: a cleanup,
 * another process, leaves them. With `ipsetPrefix` (what `proxy --kube-proxy-ipsets` owns:
 * KUBE-), the sets named with it too, after the services (nothing of ipvsync's uses them then;
 * a set something else still references fails with EBUSY and stays).
 */
export async function removeOwned(k: CleanupKernel, vipLink: string, opts: { ipsetPrefix?: string } = {}): Promise<CleanupResult> {
  // the record lives in ipsets: no ipsets, no record (and no virtual server known as ours)
  const record = k.ipsets ? await readRecord(k.ipsets) : [];
  const recorded = recordedKeys(record);
  // A kernel without IPVS has no virtual server to remove.
  const doomed = k.ipvs ? (await k.ipvs.services()).map((s) => serviceKey(s)).filter((key) => recorded.has(key)) : [];
  const r = k.ipvs ? await k.ipvs.apply(doomed.map((key) => ({ op: 'deleteService' as const, service: keyToId(key) })), { stopOnError: false }) : undefined;
  // one gone meanwhile is gone all the same
  const servicesLeft = (r?.errors ?? []).filter((e) => e.code !== 'ESRCH');
  let tables = 0;
  if (k.nft) {
    try {
      const have = (await k.nft.list({ elements: false })).tables.filter((t) => t.name === GLUE_TABLE && (t.family === 'ip' || t.family === 'ip6'));
      if (have.length) {
        const tx = new NftTransaction();
        for (const t of have) tx.deleteTable({ family: t.family, name: t.name });
        (await k.nft.commit(tx)).orThrow();
        tables = have.length;
      }
    } catch (e) {
      // A kernel without nftables (or its ip families) has no glue to remove.
      if (!(e instanceof NetlinkError) || (e.code !== 'EAFNOSUPPORT' && e.code !== 'EOPNOTSUPP' && e.kind !== 'unsupported')) throw e;
    }
  }
  // After the services on them; each delete names the protocol, so only ours can match.
  const owned = await k.routes.list({ protocol: IPVSYNC_ROUTE_PROTOCOL });
  const rr = await k.routes.apply(
    owned.map((o) => ({ op: 'delRoute' as const, dst: o.dst, table: o.table, protocol: IPVSYNC_ROUTE_PROTOCOL, ...(o.metric !== undefined ? { metric: o.metric } : {}) })),
    { stopOnError: false },
  );
  if (!rr.ok) throw rr.errors[0];
  const link = await k.links.get(vipLink);
  const addrs = link ? await k.links.addresses({ link: vipLink }) : [];
  const mine = addrs.filter((a) => a.protocol === IPVSYNC_ADDRESS_PROTOCOL);
  const ar = await k.links.apply(mine.map((a) => ({ op: 'delAddr' as const, link: vipLink, address: `${a.address}/${a.prefixlen}` })), { stopOnError: false });
  if (!ar.ok) throw ar.errors[0];
  if (servicesLeft.length) throw servicesLeft[0];
  const prefix = opts.ipsetPrefix;
  const claimed = prefix && k.ipsets ? (await k.ipsets.headers()).filter((s) => s.name.startsWith(prefix)).map((s) => s.name) : [];
  const dr = await k.ipsets?.apply([...claimed, ...record.map((s) => s.name)].map((name) => ({ op: 'destroy' as const, name })), { stopOnError: false });
  if (dr && !dr.ok) throw dr.errors[0];
  let linkGone = false;
  if (link && link.alias === IPVSYNC_LINK_ALIAS && addrs.every((a) => a.protocol === IPVSYNC_ADDRESS_PROTOCOL || kernels(a.protocol))) {
    const lr = await k.links.apply([{ op: 'delLink', name: vipLink }]);
    if (!lr.ok) throw lr.errors[0];
    linkGone = true;
  }
  return { services: r?.count('ok') ?? 0, ipsets: claimed.length, addresses: ar.count('ok'), routes: rr.count('ok'), tables, link: linkGone };
}
