// IPVS ops in their packed form (native/ipvs/packed.h): the same objects, values and all, written
// into bytes in one pass in JavaScript, so that the addon converts a batch in one N-API call
// instead of ~15 property reads per op (~3-5 µs an op at real speed; ~114 µs under qemu TCG,
// where converting a 1024-op batch held the event loop for 117 ms). The addon reads the packed
// batch with the very code that reads the objects (native/ipvs/op_parse.h): the same ops, checks
// and error texts. What cannot be packed exactly (a non-ASCII or long string, a number that is
// not a safe integer, null, a value of an unexpected type) is not: packIpvsOps returns undefined
// and the caller sends the objects, whose conversion reports the problem.

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

/** A string's bytes, tag and length first; false when it is not ASCII or longer than 255. */
function str(s: string): boolean {
  const n = s.length;
  if (n > 255) return false;
  room(2 + n);
  buf[pos++] = TAG_STRING;
  buf[pos++] = n;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c > 0x7f) return false;
    buf[pos++] = c;
  }
  return true;
}

/** The values of the names an op takes from a small set (its op, protocol, forwarding method
 *  …): their bytes made once (a bounded number of them), copied after. */
const words = new Map<string, Uint8Array>();
const MAX_WORDS = 128;

function word(s: string): boolean {
  const w = words.get(s);
  if (w !== undefined) {
    room(w.length);
    buf.set(w, pos);
    pos += w.length;
    return true;
  }
  const at = pos;
  if (!str(s)) return false;
  if (words.size < MAX_WORDS) words.set(s, buf.slice(at, pos));
  return true;
}

function num(v: number): boolean {
  if (!Number.isSafeInteger(v)) return false;
  room(9);
  buf[pos++] = TAG_NUMBER;
  view.setFloat64(pos, v, true);
  pos += 8;
  return true;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
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
function end(countAt: number): true {
  buf[countAt] = count;
  count = outer.pop()!;
  return true;
}
function key(k: number): void {
  room(1);
  buf[pos++] = k;
  count++;
}

// Each property: skipped when undefined; otherwise its key, then a value of its kind, or false
// (the batch is not packed) when the value is of another kind.
function sProp(k: number, v: unknown): boolean {
  if (v === undefined) return true;
  key(k);
  return typeof v === 'string' && str(v);
}
function wProp(k: number, v: unknown): boolean {
  if (v === undefined) return true;
  key(k);
  return typeof v === 'string' && word(v);
}
function nProp(k: number, v: unknown): boolean {
  if (v === undefined) return true;
  key(k);
  return typeof v === 'number' && num(v);
}
function snProp(k: number, v: unknown): boolean {
  return typeof v === 'number' ? nProp(k, v) : sProp(k, v);
}
function flagsProp(v: unknown): boolean {
  if (v === undefined) return true;
  if (!Array.isArray(v) || v.length > 255) return false;
  key(K.flags);
  room(2);
  buf[pos++] = TAG_ARRAY;
  buf[pos++] = v.length;
  for (let i = 0; i < v.length; i++) {
    const f: unknown = v[i];
    if (typeof f !== 'string' || !word(f)) return false;
  }
  return true;
}
/** An object property: skipped when undefined, false when not a plain object. */
function oProp(k: number, v: unknown, write: (o: Record<string, unknown>) => boolean): boolean {
  if (v === undefined) return true;
  if (!isPlainObject(v)) return false;
  key(k);
  return write(v);
}

function service(o: Record<string, unknown>): boolean {
  const at = begin();
  return (
    nProp(K.fwmark, o.fwmark) && wProp(K.protocol, o.protocol) && sProp(K.address, o.address) && nProp(K.port, o.port) &&
    wProp(K.family, o.family) && wProp(K.scheduler, o.scheduler) && flagsProp(o.flags) && nProp(K.timeout, o.timeout) &&
    snProp(K.netmask, o.netmask) && sProp(K.pe, o.pe) && end(at)
  );
}

function tunnel(o: Record<string, unknown>): boolean {
  const at = begin();
  return wProp(K.type, o.type) && nProp(K.port, o.port) && wProp(K.checksum, o.checksum) && end(at);
}

function dest(o: Record<string, unknown>): boolean {
  const at = begin();
  return (
    sProp(K.address, o.address) && nProp(K.port, o.port) && wProp(K.family, o.family) && wProp(K.forward, o.forward) &&
    nProp(K.weight, o.weight) && nProp(K.upperThreshold, o.upperThreshold) && nProp(K.lowerThreshold, o.lowerThreshold) &&
    oProp(K.tunnel, o.tunnel, tunnel) && end(at)
  );
}

function timeouts(o: Record<string, unknown>): boolean {
  const at = begin();
  return nProp(K.tcp, o.tcp) && nProp(K.tcpFin, o.tcpFin) && nProp(K.udp, o.udp) && end(at);
}

function daemon(o: Record<string, unknown>): boolean {
  const at = begin();
  return (
    wProp(K.state, o.state) && sProp(K.interface, o.interface) && nProp(K.syncId, o.syncId) && nProp(K.syncMaxLen, o.syncMaxLen) &&
    sProp(K.mcastGroup, o.mcastGroup) && nProp(K.mcastPort, o.mcastPort) && nProp(K.mcastTtl, o.mcastTtl) && end(at)
  );
}

/** The service object of the last op that had one: the next op's same object is a back-reference. */
let lastService: unknown;

/** An op's service: a back-reference when it is the last one's very object. */
function serviceProp(v: unknown): boolean {
  if (v === undefined) return true;
  if (!isPlainObject(v)) return false;
  key(K.service);
  if (v === lastService) {
    room(1);
    buf[pos++] = TAG_SAME;
    return true;
  }
  lastService = v;
  return service(v);
}

function op(o: Record<string, unknown>): boolean {
  const at = begin();
  return (
    wProp(K.op, o.op) && serviceProp(o.service) && oProp(K.dest, o.dest, dest) && oProp(K.timeouts, o.timeouts, timeouts) &&
    oProp(K.daemon, o.daemon, daemon) && end(at)
  );
}

/**
 * The packed form of `ops`, or undefined when some op holds what the form cannot carry exactly
 * (the caller then passes the objects). The bytes are the writer's own, valid until the next
 * call: pass them to the addon at once.
 */
export function packIpvsOps(ops: readonly unknown[]): Uint8Array | undefined {
  pos = 0;
  count = 0;
  outer.length = 0;
  lastService = undefined;
  let ok = true;
  for (let i = 0; i < ops.length && ok; i++) {
    const o = ops[i];
    ok = isPlainObject(o) && op(o);
  }
  lastService = undefined;
  return ok ? buf.subarray(0, pos) : undefined;
}
