// IPVS ops in their packed form (native/ipvs/packed.h): the op objects, values and all, written
// into bytes in one pass in JavaScript, so that the addon reads a batch in one N-API call
// instead of ~15 property reads per op (~3-5 µs an op at real speed, far more under emulation).
// It is the only form apply() hands the addon, so it carries every value an op can hold: a
// value of an unexpected type is written as what it is (null, or "another type"), and the
// addon's checks (native/ipvs/op_parse.h) report it with the op's index, as for any bad value.

import { NetlinkError } from '../errors.js';

/** Property names by key index; native/ipvs/op_parse.h has the same list (ipvs::K, kKeyNames). */
export const PACKED_KEYS = [
  'op', 'service', 'dest', 'timeouts', 'daemon', 'fwmark', 'protocol',
  'address', 'port', 'family', 'scheduler', 'flags', 'timeout', 'netmask',
  'pe', 'forward', 'weight', 'upperThreshold', 'lowerThreshold', 'tunnel', 'type',
  'checksum', 'tcp', 'tcpFin', 'udp', 'state', 'interface', 'syncId',
  'syncMaxLen', 'mcastGroup', 'mcastPort', 'mcastTtl',
] as const;
type Key = (typeof PACKED_KEYS)[number];

const TAG_STRING = 0x01;
const TAG_NUMBER = 0x02;
const TAG_OBJECT = 0x03;
const TAG_ARRAY = 0x04;
const TAG_SAME = 0x05;
const TAG_NULL = 0x06;
const TAG_OTHER = 0x07;

const K = Object.fromEntries(PACKED_KEYS.map((k, i) => [k, i])) as Record<Key, number>;

/** The writer's bytes, kept between calls: the addon reads a packed batch before apply()
 *  returns, so the next batch may reuse them. */
let buf = new Uint8Array(64 * 1024);
let view = new DataView(buf.buffer);
let pos = 0;

function room(n: number): void {
  if (pos + n <= buf.length) return;
  const bigger = new Uint8Array(Math.max(buf.length * 2, pos + n));
  bigger.set(buf.subarray(0, pos));
  buf = bigger;
  view = new DataView(buf.buffer);
}

// The writer is straight-line code, property by property (no tables walked, no iterators): it
// runs cold at first, and under emulation the interpreter's cost of a generic walk held the event
// loop ~4x longer for a daemon's first batches.

const utf8 = new TextEncoder();

/** A string: tag, u32 byte length, its UTF-8 bytes. */
function str(s: string): void {
  const n = s.length;
  room(5 + n);
  let i = 0;
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x7f) break;
    buf[pos + 5 + i] = c;
  }
  let len = i;
  if (i < n) {
    room(5 + n * 3);
    len = utf8.encodeInto(s, buf.subarray(pos + 5)).written;
  }
  buf[pos] = TAG_STRING;
  view.setUint32(pos + 1, len, true);
  pos += 5 + len;
}

/** The values of the names an op takes from a small set (its op, protocol, forwarding method
 *  …): their bytes made once (a bounded number of them), copied after. */
const words = new Map<string, Uint8Array>();
const MAX_WORDS = 128;

function word(s: string): void {
  const w = words.get(s);
  if (w !== undefined) {
    room(w.length);
    buf.set(w, pos);
    pos += w.length;
    return;
  }
  const at = pos;
  str(s);
  if (words.size < MAX_WORDS) words.set(s, buf.slice(at, pos));
}

function num(v: number): void {
  room(9);
  buf[pos++] = TAG_NUMBER;
  view.setFloat64(pos, v, true);
  pos += 8;
}

/** A value where the op takes a string or a number: any other type as null or "another type"
 *  (the addon reports it: "port must be a number"). */
function any(v: unknown): void {
  if (typeof v === 'string') return str(v);
  if (typeof v === 'number') return num(v);
  room(1);
  buf[pos++] = v === null ? TAG_NULL : TAG_OTHER;
}

/** An object where one goes; an array is not one (the addon refuses it as it refuses any other
 *  value there). */
function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Properties written into the object being written; the enclosing objects' counts. */
let count = 0;
const outer: number[] = [];

/** Starts an object: its tag, and its count patched by end(). */
function begin(): number {
  room(2);
  buf[pos++] = TAG_OBJECT;
  outer.push(count);
  count = 0;
  return pos++;
}
function end(countAt: number): void {
  buf[countAt] = count;
  count = outer.pop()!;
}
function key(k: number): void {
  room(1);
  buf[pos++] = k;
  count++;
}

// Each property: skipped when undefined; otherwise its key, then its value (of the expected
// kind, or as any() writes it).
function sProp(k: number, v: unknown): void {
  if (v === undefined) return;
  key(k);
  any(v);
}
function wProp(k: number, v: unknown): void {
  if (v === undefined) return;
  key(k);
  if (typeof v === 'string') word(v);
  else any(v);
}
const nProp = sProp;
function flagsProp(v: unknown): void {
  if (v === undefined) return;
  key(K.flags);
  if (!Array.isArray(v)) return any(v);
  room(5);
  buf[pos] = TAG_ARRAY;
  view.setUint32(pos + 1, v.length, true);
  pos += 5;
  for (let i = 0; i < v.length; i++) {
    const f: unknown = v[i];
    if (typeof f === 'string') word(f);
    else any(f);
  }
}
/** An object property: skipped when undefined. */
function oProp(k: number, v: unknown, write: (o: Record<string, unknown>) => void): void {
  if (v === undefined) return;
  key(k);
  if (isObject(v)) write(v);
  else any(v);
}

function service(o: Record<string, unknown>): void {
  const at = begin();
  nProp(K.fwmark, o.fwmark);
  wProp(K.protocol, o.protocol);
  sProp(K.address, o.address);
  nProp(K.port, o.port);
  wProp(K.family, o.family);
  wProp(K.scheduler, o.scheduler);
  flagsProp(o.flags);
  nProp(K.timeout, o.timeout);
  sProp(K.netmask, o.netmask);
  sProp(K.pe, o.pe);
  end(at);
}

function tunnel(o: Record<string, unknown>): void {
  const at = begin();
  wProp(K.type, o.type);
  nProp(K.port, o.port);
  wProp(K.checksum, o.checksum);
  end(at);
}

function dest(o: Record<string, unknown>): void {
  const at = begin();
  sProp(K.address, o.address);
  nProp(K.port, o.port);
  wProp(K.family, o.family);
  wProp(K.forward, o.forward);
  nProp(K.weight, o.weight);
  nProp(K.upperThreshold, o.upperThreshold);
  nProp(K.lowerThreshold, o.lowerThreshold);
  oProp(K.tunnel, o.tunnel, tunnel);
  end(at);
}

function timeouts(o: Record<string, unknown>): void {
  const at = begin();
  nProp(K.tcp, o.tcp);
  nProp(K.tcpFin, o.tcpFin);
  nProp(K.udp, o.udp);
  end(at);
}

function daemon(o: Record<string, unknown>): void {
  const at = begin();
  wProp(K.state, o.state);
  sProp(K.interface, o.interface);
  nProp(K.syncId, o.syncId);
  nProp(K.syncMaxLen, o.syncMaxLen);
  sProp(K.mcastGroup, o.mcastGroup);
  nProp(K.mcastPort, o.mcastPort);
  nProp(K.mcastTtl, o.mcastTtl);
  end(at);
}

/** The service object of the last op that had one: the next op's same object is a back-reference. */
let lastService: unknown;

/** An op's service: a back-reference when it is the last one's very object. */
function serviceProp(v: unknown): void {
  if (v === undefined) return;
  key(K.service);
  if (!isObject(v)) return any(v);
  if (v === lastService) {
    room(1);
    buf[pos++] = TAG_SAME;
    return;
  }
  lastService = v;
  service(v);
}

function op(o: Record<string, unknown>): void {
  const at = begin();
  wProp(K.op, o.op);
  serviceProp(o.service);
  oProp(K.dest, o.dest, dest);
  oProp(K.timeouts, o.timeouts, timeouts);
  oProp(K.daemon, o.daemon, daemon);
  end(at);
}

/**
 * The packed form of `ops`. The bytes are the writer's own, valid until the next call: pass
 * them to the addon at once.
 */
export function packIpvsOps(ops: readonly unknown[]): Uint8Array {
  let i = 0;
  pos = 0;
  count = 0;
  outer.length = 0;
  lastService = undefined;
  try {
    for (i = 0; i < ops.length; i++) {
      const o = ops[i];
      if (isObject(o)) op(o);
      else any(o);
    }
  } catch (e) {
    // A throwing getter (or a value JavaScript cannot read as it stands): the op it was read
    // from is refused, as the addon refuses a bad value.
    lastService = undefined;
    throw NetlinkError.atOp(e, { index: i });
  }
  lastService = undefined;
  return buf.subarray(0, pos);
}
