// The plain-data model of nftables objects: what a transaction queues, what a listing returns and
// what the op stream (nft-wire.ts) writes.
import type { Expr, Verdict } from './nft-expr.js';
import type { DataType, KeyValue, NftFamily } from './nft-types.js';

export type HookName = 'prerouting' | 'input' | 'forward' | 'output' | 'postrouting';

export interface TableSpec {
  family: NftFamily;
  name: string;
}

export interface ChainSpec {
  family: NftFamily;
  table: string;
  name: string;
  /** A base chain: attached to a netfilter hook. */
  hook?: {
    type: 'filter' | 'nat' | 'route';
    hook: HookName;
    priority: number;
    policy?: 'accept' | 'drop';
  };
}

export interface SetSpec {
  family: NftFamily;
  table: string;
  name: string;
  /** One datatype, or a concatenation (ipv4_addr . inet_proto . inet_service). */
  key: DataType[];
  /** A map: the element value is a verdict, a datatype, or a concatenation of datatypes
   *  (`ipv4_addr . inet_service`: an address and a port for dnat). */
  map?: 'verdict' | DataType | DataType[];
  /** Interval set: elements are CIDRs / prefixes (single address-type key only). */
  interval?: boolean;
  /** Elements may carry timeouts; default timeout in ms (0: none). */
  timeout?: number;
  /** Allow per-element timeouts without a default. */
  timeoutFlag?: boolean;
  /** Elements added from the packet path (a rule's dynset: `flags dynamic`). */
  dynamic?: boolean;
  comment?: string;
  /** NFTA_SET_DESC_SIZE hint. */
  size?: number;
}

export interface SetElement {
  /** One value per key field; an interval set's element is a CIDR ('10.0.0.0/8'). */
  key: KeyValue[];
  verdict?: Verdict;
  /** Map value (for datatype maps); one value per datatype of a concatenation. */
  data?: KeyValue | KeyValue[];
  /** ms */
  timeout?: number;
  comment?: string;
}

export interface RuleSpec {
  family: NftFamily;
  table: string;
  chain: string;
  exprs: Expr[];
  comment?: string;
  /** Existing rules only (replace / delete), or read back from the kernel. */
  handle?: number;
}

export type NftVerb = 'add' | 'create' | 'delete' | 'destroy' | 'flush';
export type NftOp =
  | { verb: NftVerb; kind: 'table'; table: TableSpec }
  | { verb: NftVerb; kind: 'chain'; chain: ChainSpec }
  | { verb: NftVerb; kind: 'set'; set: SetSpec }
  | { verb: 'add' | 'create' | 'delete' | 'destroy'; kind: 'elements'; set: SetSpec; elements: SetElement[] | ElementBytes }
  | { verb: 'add' | 'insert' | 'replace' | 'delete' | 'destroy'; kind: 'rule'; rule: RuleSpec; position?: number };

/**
 * A plain set's elements as the bytes the kernel holds (PackedElements): element i's key and
 * value (a data map's) are `keyLength(i)` and `dataLength(i)` bytes of `bytes`. What a builder
 * that encodes its elements once keeps instead of an object per element; written as they are.
 */
export interface ElementBytes {
  readonly length: number;
  readonly bytes: Uint8Array;
  keyAt(i: number): number;
  keyLength(i: number): number;
  dataAt(i: number): number;
  dataLength(i: number): number;
  /** Elements start to end (exclusive), sharing these bytes. */
  slice(start: number, end: number): ElementBytes;
  /** The elements as objects. */
  decode(): SetElement[];
}
