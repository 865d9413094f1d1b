// ipset over nfnetlink: typed model, the IpSetsApi interface (an in-memory double implements the
// same), and the real implementation over the addon.
import { NetlinkError } from '../errors.js';
import {
  native,
  type HandleOptions,
  type IpSetFamily,
  type IpSetProto,
  type NativeIpSetHeader,
  type NativeIpSetMember,
  type NativeIpSetOp,
  type NativeIpSetOptions,
  type NativeIpsetHandle,
} from '../native.js';
import { ApplyResult, HandleFacade, checkOpList, redoInterrupted, type BatchOptions } from './batch.js';

export type { IpSetFamily, IpSetProto };

/** Set types ipvsync encodes: elements made of ip / net / port components. */
export const IPSET_TYPES = [
  'hash:ip',
  'hash:ip,port',
  'hash:ip,port,ip',
  'hash:ip,port,net',
  'hash:net',
  'hash:net,port',
  'hash:net,net',
  'hash:net,port,net',
  'bitmap:port',
] as const;
export type IpSetType = (typeof IPSET_TYPES)[number];

/** A member's parts, by type: an address, a network, a port (proto:port). */
export type Dim = 'ip' | 'net' | 'port';

const DIMS: Record<IpSetType, Dim[]> = {
  'hash:ip': ['ip'],
  'hash:ip,port': ['ip', 'port'],
  'hash:ip,port,ip': ['ip', 'port', 'ip'],
  'hash:ip,port,net': ['ip', 'port', 'net'],
  'hash:net': ['net'],
  'hash:net,port': ['net', 'port'],
  'hash:net,net': ['net', 'net'],
  'hash:net,port,net': ['net', 'port', 'net'],
  'bitmap:port': ['port'],
};

/** The parts of a member of a set of this type (undefined: a type ipvsync does not model). */
export function typeDims(type: string): Dim[] | undefined {
  return (DIMS as Record<string, Dim[]>)[type];
}

/**
 * One element. By type:
 * - `hash:ip`: ip · `hash:net`: ip + cidr (or ip 'a.b.c.d/n')
 * - `hash:ip,port` / `hash:net,port`: ip (+cidr), proto (default tcp), port
 * - `hash:ip,port,ip` / `hash:ip,port,net` / `hash:net,port,net`: … + ip2 (+cidr2)
 * - `hash:net,net`: ip/cidr + ip2/cidr2 · `bitmap:port`: port
 * For icmp/icmpv6, `port` is (type << 8) | code, as the kernel stores it.
 * Extensions: timeout (s), packets/bytes (sets with counters), comment, nomatch (net types).
 */
export type IpSetMember = NativeIpSetMember;

/** Create options. */
export interface IpSetSpec extends NativeIpSetOptions {
  name: string;
  type: IpSetType;
}

/** A set as the kernel reports it (header data; members when listed with them). */
export interface IpSet extends IpSetSpec {
  revision: number;
  references: number;
  /** Bytes of kernel memory. */
  memsize: number;
  elements: number;
  members?: IpSetMember[];
}

export type IpSetOp =
  | ({ op: 'create'; exist?: boolean } & IpSetSpec)
  | { op: 'destroy'; name: string }
  | { op: 'flush'; name: string }
  | { op: 'rename'; name: string; to: string }
  | { op: 'swap'; name: string; with: string }
  /** `type`/`family` may be given; otherwise they are learned from a create in the same batch,
   *  from earlier calls, or from one header dump. `exist`: ipset's -exist (no error for members
   *  already present on add / absent on del). */
  | { op: 'add' | 'del'; name: string; members: IpSetMember[]; exist?: boolean; type?: IpSetType; family?: IpSetFamily };

/** What the sync engine needs from ipset; the real class and test doubles implement it. */
export interface IpSetsApi {
  /** Applies ops in order in one batch (add/del of many members become a few ADT messages;
   *  `stopOnError` stops at the failing message, and the kernel inside it at the failing member). */
  apply(ops: IpSetOp[], opts?: BatchOptions): Promise<ApplyResult>;
  /** Every set with its members (one dump), or one set. */
  list(name?: string): Promise<IpSet[]>;
  /** Headers only (no members), one dump. */
  headers(): Promise<IpSet[]>;
  /** Which members are in the set. */
  test(name: string, members: IpSetMember[]): Promise<boolean[]>;
}

/** What add/del ops and a listing need to know of a set by its name. */
export interface IpSetShape {
  type: IpSetType;
  family?: IpSetFamily;
}

// A type that is not a string is carried as it is, for the addon to refuse with the op's index.
function shapeOf(h: { type: string; family?: IpSetFamily }): IpSetShape {
  return { type: h.type as IpSetType, family: typeof h.type === 'string' && h.type.startsWith('bitmap:') ? undefined : (h.family ?? 'inet') };
}

/** ipset over nfnetlink. One handle owns one netlink socket (per network namespace). */
export class IpSets extends HandleFacade<NativeIpsetHandle> implements IpSetsApi {
  /** name -> type/family, learned from creates and dumps, so add/del need no extra request. */
  private readonly shapes = new Map<string, IpSetShape>();

  /** Opens a handle and negotiates the protocol (throws `unsupported` without ip_set). */
  static async open(opts: HandleOptions = {}): Promise<IpSets> {
    const s = new IpSets(new (native().IpsetHandle)(opts));
    await s.h.protocol();
    return s;
  }

  /** The ipset protocol version in use (6 or 7). */
  protocol(): Promise<number> {
    return this.h.protocol();
  }

  async apply(ops: IpSetOp[], opts: BatchOptions = {}): Promise<ApplyResult> {
    checkOpList(ops, 'ipset apply');
    let native = this.resolve(ops, false);
    if (!native) {
      await this.headers();
      native = this.resolve(ops, true)!;
    }
    const raw = await this.h.apply(native, opts);
    const result = new ApplyResult(raw);
    this.learn(ops, result);
    return result;
  }

  async list(name?: string): Promise<IpSet[]> {
    const sets = (await redoInterrupted(() => this.h.list(name))) as IpSet[];
    for (const s of sets) this.shapes.set(s.name, shapeOf(s));
    return sets;
  }

  async headers(): Promise<IpSet[]> {
    const sets = (await redoInterrupted(() => this.h.list(undefined, { headersOnly: true }))) as IpSet[];
    this.shapes.clear();
    for (const s of sets) this.shapes.set(s.name, shapeOf(s));
    return sets;
  }

  async test(name: string, members: IpSetMember[]): Promise<boolean[]> {
    let shape = this.shapes.get(name);
    if (!shape) {
      await this.headers();
      shape = this.shapes.get(name);
      if (!shape) throw unknownSet('IPSET_CMD_TEST ' + name, name);
    }
    const present = await this.h.test(name, shape.type, shape.family, members);
    return [...present].map((x) => x === 1);
  }


  /** Fills type/family of add/del ops by replaying the batch's creates/renames/swaps over the
   *  known shapes. Returns undefined when a set is unknown and `final` is false. */
  private resolve(ops: IpSetOp[], final: boolean): NativeIpSetOp[] | undefined {
    const view = new Map(this.shapes);
    const out: NativeIpSetOp[] = [];
    for (let i = 0; i < ops.length; i++) {
      try {
        const op = ops[i]!;
        if (typeof op.op !== 'string') throw NetlinkError.invalid(`op ${i}`, 'op must be a string', { index: i });
        switch (op.op) {
          case 'create':
          case 'rename':
          case 'swap':
          case 'destroy':
          case 'flush':
            replayShapes(view, op);
            out.push(op);
            break;
          case 'add':
          case 'del': {
            let shape: IpSetShape | undefined = op.type ? shapeOf({ type: op.type, family: op.family }) : view.get(op.name);
            if (!shape) {
              if (!final) return undefined;
              throw unknownSet(`op ${i} (${op.op} ${String(op.name)})`, String(op.name), i);
            }
            out.push({ op: op.op, name: op.name, members: op.members, type: shape.type, family: shape.family, exist: op.exist, plain: allPlain(op.members) });
            break;
          }
          default:
            throw NetlinkError.invalid(`op ${i}`, `unknown op '${(op as { op: string }).op}'`, { index: i });
        }
      } catch (e) {
        throw NetlinkError.atOp(e, { index: i });
      }
    }
    return out;
  }

  private learn(ops: IpSetOp[], result: ApplyResult): void {
    ops.forEach((op, i) => {
      if (result.status(i) === 'ok') replayShapes(this.shapes, op);
    });
  }
}

/** What one op does to the shapes of the sets by name (create, rename, swap and destroy change
 *  them; add, del and flush do not): resolve replays a batch over a copy, learn the ops the
 *  kernel took over the known shapes, and a restore's parser its input. */
export function replayShapes(shapes: Map<string, IpSetShape>, op: IpSetOp): void {
  switch (op.op) {
    case 'create':
      shapes.set(op.name, shapeOf(op));
      break;
    case 'rename': {
      const s = shapes.get(op.name);
      shapes.delete(op.name);
      if (s) shapes.set(op.to, s);
      break;
    }
    case 'swap': {
      const a = shapes.get(op.name);
      const b = shapes.get(op.with);
      if (a && b) {
        shapes.set(op.name, b);
        shapes.set(op.with, a);
      }
      break;
    }
    case 'destroy':
      shapes.delete(op.name);
      break;
  }
}

/** No member carries a field beyond its key's (an array of objects, each without timeout,
 *  counters, comment, nomatch, skb* or line): what the addon then need not look for. A member
 *  that cannot be read (a throwing getter) is not plain: the addon's reading names it. */
function allPlain(members: unknown): boolean {
  if (!Array.isArray(members)) return false;
  try {
    for (const m of members as Array<Record<string, unknown> | null>) {
      if (m === null || typeof m !== 'object') return false;
      if (
        m.timeout !== undefined || m.packets !== undefined || m.bytes !== undefined || m.comment !== undefined || m.nomatch !== undefined ||
        m.skbmark !== undefined || m.skbmarkmask !== undefined || m.skbprio !== undefined || m.skbqueue !== undefined || m.line !== undefined
      )
        return false;
    }
  } catch {
    return false;
  }
  return true;
}

function unknownSet(op: string, name: string, index?: number): NetlinkError {
  return new NetlinkError({
    message: `${op}: The set with the given name does not exist (${name}); nothing was sent`,
    code: 'ENOENT',
    errno: 2,
    kind: 'invalid',
    op,
    ...(index === undefined ? {} : { index }),
  });
}

export type { NativeIpSetHeader };
