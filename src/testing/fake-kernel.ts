// In-memory links/addresses, routes, ipsets and nftables with the kernel's semantics, implementing the
// same interfaces as the real handles (LinksApi, RoutesApi, IpSetsApi, NftablesApi, ConntrackApi), each
// with a log of the writes it received — so engine and proxy tests assert exact, minimal deltas.
// FakeIpvs (fake-ipvs.ts) is the IPVS part.
import { NetlinkError } from '../errors.js';
import type { ApplyResult, BatchOptions } from '../kernel/batch.js';
import type { ConntrackApi, DeleteFlowsResult, Flow, FlowFilter } from '../kernel/conntrack.js';
import type { IpSet, IpSetMember, IpSetOp, IpSetsApi, IpSetSpec } from '../kernel/ipsets.js';
import type { Address, Link, LinkOp, LinksApi } from '../kernel/links.js';
import { checkRouteOps, type Route, type RouteFilter, type RouteOp, type RoutesApi } from '../kernel/routes.js';
import { native } from '../native.js';
import { canonicalAddress, familyOf, parseCidr, networkText } from '../net/address.js';
import { elementList, NftCommitResult, NftTransaction, PackedElements, type CommitOptions, type NftablesApi, type NftOp, type NftRuleset, type ListOptions, type SetElement, type SetSpec } from '../kernel/nftables.js';
import { canonicalExprs } from '../kernel/nft-expr.js';
import { memberKey } from '../engine/ipsets-diff.js';
import { elementKey, stableStringify } from '../engine/nft-diff.js';
import { err, runBatch } from './fake-batch.js';
import { FakeIpvs } from './fake-ipvs.js';

// ---- links -----------------------------------------------------------------------------------

export class FakeLinks implements LinksApi {
  private nextIndex = 2;
  /** By name. */
  private readonly links = new Map<string, Link>([['lo', { index: 1, name: 'lo', flags: 0x49, up: true, type: 772, mtu: 65536, operstate: 0 }]]);
  /** By link; `protocol` as IFA_PROTO (0 when added without one, as the kernel keeps it). */
  private readonly addrs = new Map<string, Array<{ address: string; prefixlen: number; protocol: number }>>();
  readonly log: LinkOp[][] = [];
  dumps = 0;

  get writes(): number {
    return this.log.reduce((n, ops) => n + ops.length, 0);
  }

  async list(): Promise<Link[]> {
    this.dumps++;
    return [...this.links.values()].map((l) => ({ ...l }));
  }

  async get(name: string): Promise<Link | null> {
    const l = this.links.get(name);
    return l ? { ...l } : null;
  }

  /** The links as they are now, read without a dump (not counted in `dumps`): what FakeRoutes
   *  resolves a route's dev or index against, as the kernel does when the route is added. */
  current(): Link[] {
    return [...this.links.values()].map((l) => ({ ...l }));
  }

  async addresses(opts: { family?: 'inet' | 'inet6'; link?: string } = {}): Promise<Address[]> {
    this.dumps++;
    if (opts.link && !this.links.has(opts.link)) throw err('ENODEV', 'RTM_GETADDR', 0);
    const out: Address[] = [];
    for (const [link, list] of this.addrs) {
      if (opts.link && link !== opts.link) continue;
      for (const a of list) {
        const family = familyOf(a.address);
        if (opts.family && opts.family !== family) continue;
        out.push({
          link,
          index: this.links.get(link)!.index,
          family,
          address: a.address,
          prefixlen: a.prefixlen,
          scope: a.address.startsWith('fe80:') ? 'link' : 'global',
          flags: 0,
          // as the kernel's dump: IFA_PROTO only when not 0
          ...(a.protocol ? { protocol: a.protocol } : {}),
        });
      }
    }
    return out;
  }

  async apply(ops: LinkOp[], opts: BatchOptions = {}): Promise<ApplyResult> {
    this.log.push(structuredClone(ops));
    return runBatch(ops, opts, (op) => this.one(op), (op) => op.op);
  }

  private one(op: LinkOp): string | undefined {
    switch (op.op) {
      case 'addLink':
        if (this.links.has(op.name)) return op.exist ? undefined : 'EEXIST';
        this.links.set(op.name, { index: this.nextIndex++, name: op.name, flags: 0, up: false, type: 1, mtu: op.mtu ?? 1500, kind: op.kind, operstate: 2 });
        return undefined;
      case 'delLink': {
        const name = op.name ?? [...this.links.values()].find((l) => l.index === op.index)?.name;
        if (!name || !this.links.delete(name)) return 'ENODEV';
        this.addrs.delete(name);
        return undefined;
      }
      case 'setLink': {
        const l = op.name ? this.links.get(op.name) : [...this.links.values()].find((x) => x.index === op.index);
        if (!l) return 'ENODEV';
        if (op.up !== undefined) l.up = op.up;
        if (op.alias !== undefined) l.alias = op.alias;
        return undefined;
      }
      case 'addAddr':
      case 'delAddr': {
        const name = op.link ?? [...this.links.values()].find((l) => l.index === op.index)?.name;
        if (!name || !this.links.has(name)) return 'ENODEV';
        const [a, p] = op.address.split('/');
        const address = canonicalAddress(a!);
        const prefixlen = p ? Number(p) : familyOf(address) === 'inet6' ? 128 : 32;
        const list = this.addrs.get(name) ?? [];
        // The kernel's identity: an IPv6 address is one whatever its prefix; an IPv4 one is
        // (address, prefix). A delete matches the address, never the protocol.
        const v6 = familyOf(address) === 'inet6';
        const i = list.findIndex((x) => x.address === address && (v6 || x.prefixlen === prefixlen));
        if (op.op === 'addAddr') {
          if (i >= 0) return op.exist ? undefined : 'EEXIST';
          list.push({ address, prefixlen, protocol: op.protocol ?? 0 });
          this.addrs.set(name, list);
        } else {
          if (i < 0) return 'EADDRNOTAVAIL';
          list.splice(i, 1);
        }
        return undefined;
      }
    }
  }
}

// ---- routes ----------------------------------------------------------------------------------

const TABLES: Record<string, number> = { local: 255, main: 254, default: 253 };
const PROTOCOLS: Record<string, number> = { kernel: 2, boot: 3, static: 4, ipvsync: 249 };
const LOCAL_TABLE_TYPES = new Set(['local', 'broadcast', 'anycast', 'nat']);

/**
 * Routes with the kernel's identity and matching rules: (family, table, dst/len, metric) is one
 * route (an add of it again is EEXIST; IPv6 routes default to metric 1024); a delete matches the
 * fields it names (type, protocol, dev, metric) and fails with ESRCH when nothing matches; a
 * route to a link that does not exist fails with ENODEV. Link names come from `links` (lo is
 * index 1 without it). Defaults as iproute2's, like the real codec.
 */
export class FakeRoutes implements RoutesApi {
  private routes: Route[] = [];
  readonly log: RouteOp[][] = [];
  dumps = 0;

  constructor(private readonly links?: FakeLinks) {}

  get writes(): number {
    return this.log.reduce((n, ops) => n + ops.length, 0);
  }

  /** Puts a route in place as another program would (not logged). */
  seed(r: Omit<Route, 'flags'> & { flags?: number }): void {
    this.routes.push({ flags: 0, ...r });
  }

  async list(filter: RouteFilter = {}): Promise<Route[]> {
    this.dumps++;
    const table = filter.table === undefined ? undefined : typeof filter.table === 'number' ? filter.table : TABLES[filter.table];
    const protocol = filter.protocol === undefined ? undefined : typeof filter.protocol === 'number' ? filter.protocol : PROTOCOLS[filter.protocol];
    return this.routes
      .filter((r) => (!filter.family || r.family === filter.family) && (table === undefined || r.table === table) && (protocol === undefined || r.protocol === protocol) && (!filter.type || r.type === filter.type))
      .map((r) => ({ ...r }));
  }

  async apply(ops: RouteOp[], opts: BatchOptions = {}): Promise<ApplyResult> {
    checkRouteOps(ops);
    // The addon's checks of every op, as the real handle's (its encoder takes a link by index).
    native().codec.rtnl.encodeOps(ops.map(({ dev, ...o }) => (dev === undefined ? o : { ...o, index: 1 })));
    this.log.push(structuredClone(ops));
    return runBatch(ops, opts, (op) => this.one(op), (op) => `${op.op === 'addRoute' ? 'RTM_NEWROUTE' : 'RTM_DELROUTE'} ${op.dst}`);
  }

  private linkIndex(o: RouteOp): { index?: number; dev?: string } | 'ENODEV' {
    if (o.dev === undefined && o.index === undefined) return {};
    const all = this.links ? this.links.current() : [{ name: 'lo', index: 1 } as Link];
    const l = all.find((x) => (o.dev !== undefined ? x.name === o.dev : x.index === o.index));
    return l ? { index: l.index, dev: l.name } : 'ENODEV';
  }

  private one(o: RouteOp): string | undefined {
    const c = parseCidr(o.dst);
    const family = c.family === 6 ? 'inet6' : 'inet';
    const dst = `${networkText(c)}/${c.bits}`;
    const link = this.linkIndex(o);
    if (link === 'ENODEV') return 'ENODEV';
    const table = o.table === undefined ? undefined : typeof o.table === 'number' ? o.table : TABLES[o.table]!;
    const protocol = o.protocol === undefined ? undefined : typeof o.protocol === 'number' ? o.protocol : PROTOCOLS[o.protocol]!;
    if (o.op === 'addRoute') {
      const type = o.type ?? 'unicast';
      const t = table ?? (LOCAL_TABLE_TYPES.has(type) ? 255 : 254);
      const metric = o.metric ?? (family === 'inet6' ? 1024 : undefined);
      const i = this.routes.findIndex((r) => r.family === family && r.table === t && r.dst === dst && r.metric === metric);
      if (i >= 0 && !o.exist) return 'EEXIST';
      const scope = o.scope ?? (family === 'inet6' ? 'global' : type === 'local' || type === 'nat' ? 'host' : type === 'unicast' && !o.gateway ? 'link' : type === 'unicast' ? 'global' : 'link');
      const r: Route = { family, dst, type, table: t, protocol: protocol ?? 3, scope, flags: 0, ...link };
      if (metric !== undefined) r.metric = metric;
      if (o.prefsrc) r.prefsrc = canonicalAddress(o.prefsrc);
      if (o.gateway) r.gateway = canonicalAddress(o.gateway);
      if (i >= 0) this.routes[i] = r;
      else this.routes.push(r);
      return undefined;
    }
    const type = o.type;
    const t = table ?? (type && LOCAL_TABLE_TYPES.has(type) ? 255 : 254);
    const i = this.routes.findIndex(
      (r) =>
        r.family === family && r.table === t && r.dst === dst &&
        (!type || r.type === type) && (!protocol || r.protocol === protocol) &&
        (link.index === undefined || r.index === link.index) && (o.metric === undefined || r.metric === o.metric),
    );
    if (i < 0) return 'ESRCH';
    this.routes.splice(i, 1);
    return undefined;
  }
}

// ---- ipsets ----------------------------------------------------------------------------------

interface FakeSet {
  spec: IpSetSpec;
  members: Map<string, IpSetMember>;
}

export class FakeIpSets implements IpSetsApi {
  private readonly sets = new Map<string, FakeSet>();
  readonly log: IpSetOp[][] = [];
  dumps = 0;
  /** Sets that are referenced (e.g. by iptables rules): destroy fails with IPSET_ERR_REFERENCED. */
  readonly referenced = new Set<string>();
  /** Fail the next apply's op at this index with this code (one shot), for failure tests. */
  failNext: { index: number; code: string } | undefined;

  get writes(): number {
    return this.log.reduce((n, ops) => n + ops.length, 0);
  }

  async apply(ops: IpSetOp[], opts: BatchOptions = {}): Promise<ApplyResult> {
    this.log.push(structuredClone(ops));
    const inject = this.failNext;
    this.failNext = undefined;
    return runBatch(ops, opts, (op, i) => (inject && inject.index === i ? inject.code : this.one(op)), (op) => `ipset ${op.op} ${op.name}`);
  }

  private one(op: IpSetOp): string | undefined {
    switch (op.op) {
      case 'create': {
        if (this.sets.has(op.name)) return op.exist ? undefined : 'IPSET_ERR_EXIST_SETNAME2';
        const { op: _o, exist: _e, ...spec } = op;
        this.sets.set(op.name, { spec, members: new Map() });
        return undefined;
      }
      case 'destroy':
        if (!this.sets.has(op.name)) return 'ENOENT';
        if (this.referenced.has(op.name)) return 'IPSET_ERR_REFERENCED';
        this.sets.delete(op.name);
        return undefined;
      case 'flush': {
        const s = this.sets.get(op.name);
        if (!s) return 'ENOENT';
        s.members.clear();
        return undefined;
      }
      case 'rename': {
        const s = this.sets.get(op.name);
        if (!s) return 'ENOENT';
        if (this.sets.has(op.to)) return 'IPSET_ERR_EXIST_SETNAME2';
        this.sets.delete(op.name);
        s.spec = { ...s.spec, name: op.to };
        this.sets.set(op.to, s);
        return undefined;
      }
      case 'swap': {
        const a = this.sets.get(op.name);
        const b = this.sets.get(op.with);
        if (!a || !b) return 'ENOENT';
        if (a.spec.type !== b.spec.type || (a.spec.family ?? 'inet') !== (b.spec.family ?? 'inet')) return 'IPSET_ERR_TYPE_MISMATCH';
        this.sets.set(op.name, { spec: { ...b.spec, name: op.name }, members: b.members });
        this.sets.set(op.with, { spec: { ...a.spec, name: op.with }, members: a.members });
        return undefined;
      }
      case 'add':
      case 'del': {
        const s = this.sets.get(op.name);
        if (!s) return 'ENOENT';
        for (const m of op.members) {
          const k = memberKey(s.spec.type, m);
          if (op.op === 'add') {
            if (s.members.has(k) && !op.exist) return 'IPSET_ERR_EXIST';
            s.members.set(k, { ...m });
          } else {
            if (!s.members.has(k) && !op.exist) return 'IPSET_ERR_EXIST';
            s.members.delete(k);
          }
        }
        return undefined;
      }
    }
  }

  async list(name?: string): Promise<IpSet[]> {
    this.dumps++;
    // as the kernel: listing a named set that does not exist is ENOENT
    if (name !== undefined && !this.sets.has(name)) throw err('ENOENT', `IPSET_CMD_LIST ${name}`, 0);
    return [...this.sets.values()]
      .filter((s) => !name || s.spec.name === name)
      .map((s) => ({ ...s.spec, revision: 0, references: this.referenced.has(s.spec.name) ? 1 : 0, memsize: 0, elements: s.members.size, members: [...s.members.values()].map((m) => ({ ...m })) }));
  }

  async headers(): Promise<IpSet[]> {
    return (await this.list()).map(({ members: _m, ...h }) => h);
  }

  async test(name: string, members: IpSetMember[]): Promise<boolean[]> {
    const s = this.sets.get(name);
    if (!s) throw err('ENOENT', `ipset test ${name}`, 0);
    return members.map((m) => s.members.has(memberKey(s.spec.type, m)));
  }
}

// ---- nftables --------------------------------------------------------------------------------

/** Applies each transaction to a copy and commits only if every op succeeded (atomicity),
 *  with add/create/delete/flush semantics per object; keeps the last transaction. */
export class FakeNftables implements NftablesApi {
  private rs: NftRuleset = { genId: 1, tables: [], chains: [], sets: [], rules: [] };
  private handle = 1;
  readonly log: NftOp[][] = [];
  /** list() calls */
  dumps = 0;
  /** listElements() calls */
  elementDumps = 0;

  get writes(): number {
    return this.log.reduce((n, ops) => n + ops.length, 0);
  }

  async genId(): Promise<number> {
    return this.rs.genId;
  }

  async list(opts: ListOptions = {}): Promise<NftRuleset> {
    this.dumps++;
    // as the kernel: listing a named table that does not exist is ENOENT
    if (opts.table && !this.rs.tables.some((t) => t.name === opts.table && (!opts.family || t.family === opts.family)))
      throw err('ENOENT', 'NFT_MSG_GETSET', 0);
    const f = <T extends { family: string }>(x: T, table: string) =>
      (!opts.family || x.family === opts.family) && (!opts.table || table === opts.table);
    const c = structuredClone(this.rs);
    return {
      genId: c.genId,
      tables: c.tables.filter((t) => f(t, t.name)),
      chains: c.chains.filter((x) => f(x, x.table)),
      sets: c.sets.filter((x) => f(x, x.table)).map((s) => (opts.elements === false ? { ...s, elements: [] } : s)),
      rules: c.rules.filter((x) => f(x, x.table)),
    };
  }

  async listElements(set: SetSpec): Promise<PackedElements> {
    this.elementDumps++;
    const s = this.rs.sets.find((x) => x.family === set.family && x.table === set.table && x.name === set.name);
    if (!s) throw err('ENOENT', 'NFT_MSG_GETSETELEM', 0);
    return PackedElements.of(set, structuredClone(s.elements));
  }

  async commit(tx: NftTransaction, opts: CommitOptions = {}): Promise<NftCommitResult> {
    const ops = tx.keptOps('FakeNftables');
    this.log.push(structuredClone(ops));
    const work = structuredClone(this.rs);
    const statuses = new Uint8Array(ops.length);
    let failed: NetlinkError | undefined;
    for (let i = 0; i < ops.length && !failed; i++) {
      const code = this.one(work, ops[i]!);
      if (code) failed = err(code, `${ops[i]!.verb} ${ops[i]!.kind}`, i);
      else statuses[i] = 1;
    }
    if (failed) {
      // rolled back: ok ops become 'rolled-back' (4), the failing one 'error' (2)
      for (let i = 0; i < ops.length; i++) statuses[i] = i === failed.index ? 2 : statuses[i] === 1 ? 4 : 0;
    } else {
      work.genId++;
      this.rs = work;
    }
    return new NftCommitResult({
      statuses,
      errors: failed ? [failed] : [],
      transactions: [{ firstOp: 0, endOp: ops.length, sent: true, committed: !failed }],
      sendmsgCalls: 1,
    });
    void opts;
  }

  private one(rs: NftRuleset, op: NftOp): string | undefined {
    const sameT = (x: { family: string; table: string }, f: string, t: string) => x.family === f && x.table === t;
    switch (op.kind) {
      case 'table': {
        const t = op.table;
        const i = rs.tables.findIndex((x) => x.family === t.family && x.name === t.name);
        if (op.verb === 'add' || op.verb === 'create') {
          if (i >= 0) return op.verb === 'create' ? 'EEXIST' : undefined;
          rs.tables.push({ ...t, handle: this.handle++, flags: 0 });
        } else if (op.verb === 'delete' || op.verb === 'destroy') {
          if (i < 0) return op.verb === 'delete' ? 'ENOENT' : undefined;
          rs.tables.splice(i, 1);
          rs.chains = rs.chains.filter((x) => !sameT(x, t.family, t.name));
          rs.sets = rs.sets.filter((x) => !sameT(x, t.family, t.name));
          rs.rules = rs.rules.filter((x) => !sameT(x, t.family, t.name));
        } else {
          if (i < 0) return 'ENOENT';
          rs.rules = rs.rules.filter((x) => !sameT(x, t.family, t.name));
        }
        return undefined;
      }
      case 'chain': {
        const c = op.chain;
        if (!rs.tables.some((x) => x.family === c.family && x.name === c.table)) return 'ENOENT';
        const i = rs.chains.findIndex((x) => sameT(x, c.family, c.table) && x.name === c.name);
        if (op.verb === 'add' || op.verb === 'create') {
          if (i >= 0) return op.verb === 'create' ? 'EEXIST' : undefined;
          rs.chains.push({ ...c, handle: this.handle++ });
        } else if (op.verb === 'flush') {
          if (i < 0) return 'ENOENT';
          rs.rules = rs.rules.filter((x) => !(sameT(x, c.family, c.table) && x.chain === c.name));
        } else {
          if (i < 0) return op.verb === 'delete' ? 'ENOENT' : undefined;
          if (rs.rules.some((x) => sameT(x, c.family, c.table) && x.chain === c.name)) return 'EBUSY';
          rs.chains.splice(i, 1);
        }
        return undefined;
      }
      case 'set': {
        const s = op.set;
        if (!rs.tables.some((x) => x.family === s.family && x.name === s.table)) return 'ENOENT';
        const i = rs.sets.findIndex((x) => sameT(x, s.family, s.table) && x.name === s.name);
        if (op.verb === 'add' || op.verb === 'create') {
          if (i >= 0) return op.verb === 'create' ? 'EEXIST' : undefined;
          rs.sets.push({ ...s, handle: this.handle++, elements: [] });
        } else if (op.verb === 'flush') {
          if (i < 0) return 'ENOENT';
          rs.sets[i]!.elements = [];
        } else {
          if (i < 0) return op.verb === 'delete' ? 'ENOENT' : undefined;
          rs.sets.splice(i, 1);
        }
        return undefined;
      }
      case 'elements': {
        const s = rs.sets.find((x) => sameT(x, op.set.family, op.set.table) && x.name === op.set.name);
        if (!s) return 'ENOENT';
        // by key, in the set's order (adds at the end); a failure rolls the whole commit back
        const have = new Map<string, SetElement>();
        for (const x of s.elements) have.set(elementKey(s, x), x);
        for (const e of elementList(op.elements)) {
          const k = elementKey(s, e);
          const x = have.get(k);
          if (op.verb === 'add' || op.verb === 'create') {
            if (x) {
              if (op.verb === 'create') return 'EEXIST';
              // the kernel refuses to change an element's value with a plain add
              if (JSON.stringify(x.verdict ?? x.data ?? null) !== JSON.stringify(e.verdict ?? e.data ?? null)) return 'EEXIST';
              continue;
            }
            have.set(k, structuredClone(e));
          } else {
            if (!x) {
              if (op.verb === 'delete') return 'ENOENT';
              continue;
            }
            have.delete(k);
          }
        }
        s.elements = [...have.values()];
        return undefined;
      }
      case 'rule': {
        const r = op.rule;
        if (!rs.chains.some((x) => sameT(x, r.family, r.table) && x.name === r.chain)) return 'ENOENT';
        if (op.verb === 'add' || op.verb === 'insert') {
          // stored as a listing returns it: canonical, and with keys in another order than the
          // builders use (sorted), so a diff that compares key order is caught here too
          const info = { ...r, exprs: JSON.parse(stableStringify(canonicalExprs(r.exprs))) as typeof r.exprs, handle: this.handle++ };
          if (op.verb === 'add') rs.rules.push(info);
          else {
            const first = rs.rules.findIndex((x) => sameT(x, r.family, r.table) && x.chain === r.chain);
            rs.rules.splice(first < 0 ? rs.rules.length : first, 0, info);
          }
          return undefined;
        }
        const handle = (r as { handle?: number }).handle;
        const i = rs.rules.findIndex((x) => x.handle === handle);
        if (i < 0) return op.verb === 'destroy' ? undefined : 'ENOENT';
        if (op.verb === 'replace') rs.rules[i] = { ...r, exprs: JSON.parse(stableStringify(canonicalExprs(r.exprs))) as typeof r.exprs, handle: handle! };
        else rs.rules.splice(i, 1);
        return undefined;
      }
    }
  }
}

// ---- conntrack -------------------------------------------------------------------------------

export class FakeConntrack implements ConntrackApi {
  flows: Flow[] = [];
  readonly deletes: FlowFilter[] = [];

  private match(f: Flow, q: FlowFilter): boolean {
    const o = f.orig as unknown as Record<string, unknown>;
    const r = f.reply as unknown as Record<string, unknown>;
    return (
      (!q.proto || f.proto === q.proto) &&
      (!q.origDst || o.dst === q.origDst) &&
      (q.origDport === undefined || o.dport === q.origDport) &&
      (!q.replySrc || r.src === q.replySrc) &&
      (q.replySport === undefined || r.sport === q.replySport)
    );
  }

  async list(filter: FlowFilter = {}): Promise<Flow[]> {
    return this.flows.filter((f) => this.match(f, filter));
  }

  async count(filter: FlowFilter = {}): Promise<number> {
    return (await this.list(filter)).length;
  }

  async delete(filter: FlowFilter): Promise<DeleteFlowsResult> {
    this.deletes.push(filter);
    const before = this.flows.length;
    this.flows = this.flows.filter((f) => !this.match(f, filter));
    const n = before - this.flows.length;
    return { matched: n, deleted: n, gone: 0, errors: [], sendmsgCalls: 1 };
  }
}

/** Every fake, wired as an EngineKernel. */
export function fakeKernel() {
  const links = new FakeLinks();
  return { ipvs: new FakeIpvs(), links, routes: new FakeRoutes(links), ipsets: new FakeIpSets(), nft: new FakeNftables(), conntrack: new FakeConntrack() };
}
