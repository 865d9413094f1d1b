// IPVS ops in their packed form (native/ipvs/packed.h): the same objects, values and all, written
// into bytes in one pass in JavaScript, so that the addon converts a batch in one N-API call
// instead of ~15 property reads per op (~3-5 µs an op at real speed; ~114 µs under qemu TCG,
// where converting a 1024-op batch held the event loop for 117 ms). The addon reads the packed
// batch with the very code that reads the objects (native/ipvs/op_parse.h): the same ops, checks
// and error texts. What cannot be packed exactly (a non-ASCII or long string, a number that is
// not a safe integer, null, a value of an unexpected type) is not: packIpvsOps returns undefined
// and the caller sends the objects, whose conversion reports the problem.

/** Property names by key index; native/ipvs/packed.cc has the same list (kPackedKeys). */
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

/** What a property holds: a string, a number, either, an array of strings, or an object of a
 *  role (its own properties). Only the properties the addon reads are listed. */
type Kind = 'str' | 'num' | 'strOrNum' | 'strs' | Role;
interface Role {
  props: Array<[name: Key, id: number, kind: Kind]>;
}

function role(props: Array<[Key, Kind]>): Role {
  return { props: props.map(([k, kind]) => [k, PACKED_KEYS.indexOf(k), kind]) };
}

const SERVICE = role([
  ['fwmark', 'num'], ['protocol', 'str'], ['address', 'str'], ['port', 'num'], ['family', 'str'],
  ['scheduler', 'str'], ['flags', 'strs'], ['timeout', 'num'], ['netmask', 'strOrNum'], ['pe', 'str'],
]);
const TUNNEL = role([['type', 'str'], ['port', 'num'], ['checksum', 'str']]);
const DEST = role([
  ['address', 'str'], ['port', 'num'], ['family', 'str'], ['forward', 'str'], ['weight', 'num'],
  ['upperThreshold', 'num'], ['lowerThreshold', 'num'], ['tunnel', TUNNEL],
]);
const TIMEOUTS = role([['tcp', 'num'], ['tcpFin', 'num'], ['udp', 'num']]);
const DAEMON = role([
  ['state', 'str'], ['interface', 'str'], ['syncId', 'num'], ['syncMaxLen', 'num'],
  ['mcastGroup', 'str'], ['mcastPort', 'num'], ['mcastTtl', 'num'],
]);
const OP = role([['op', 'str'], ['service', SERVICE], ['dest', DEST], ['timeouts', TIMEOUTS], ['daemon', DAEMON]]);
const SERVICE_ID = PACKED_KEYS.indexOf('service');

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

/** The service object of the last op that had one: the next op's same object is a back-reference. */
let lastService: unknown;

function value(v: unknown, kind: Kind, id: number, top: boolean): boolean {
  if (kind === 'str') return typeof v === 'string' && str(v);
  if (kind === 'num') return typeof v === 'number' && num(v);
  if (kind === 'strOrNum') return typeof v === 'string' ? str(v) : typeof v === 'number' && num(v);
  if (kind === 'strs') {
    if (!Array.isArray(v) || v.length > 255) return false;
    room(2);
    buf[pos++] = TAG_ARRAY;
    buf[pos++] = v.length;
    for (let i = 0; i < v.length; i++) {
      const e: unknown = v[i];
      if (typeof e !== 'string' || !str(e)) return false;
    }
    return true;
  }
  if (!isPlainObject(v)) return false;
  if (top && id === SERVICE_ID) {
    if (v === lastService) {
      room(1);
      buf[pos++] = TAG_SAME;
      return true;
    }
    lastService = v;
  }
  return object(v, kind);
}

function object(o: Record<string, unknown>, r: Role): boolean {
  room(2);
  buf[pos++] = TAG_OBJECT;
  const countAt = pos++;
  let count = 0;
  for (const [name, id, kind] of r.props) {
    const v = o[name];
    if (v === undefined) continue;
    room(1);
    buf[pos++] = id;
    if (!value(v, kind, id, r === OP)) return false;
    count++;
  }
  buf[countAt] = count;
  return true;
}

/**
 * The packed form of `ops`, or undefined when some op holds what the form cannot carry exactly
 * (the caller then passes the objects). The bytes are the writer's own, valid until the next
 * call: pass them to the addon at once.
 */
export function packIpvsOps(ops: readonly unknown[]): Uint8Array | undefined {
  pos = 0;
  lastService = undefined;
  let ok = true;
  for (let i = 0; i < ops.length && ok; i++) {
    const op = ops[i];
    ok = isPlainObject(op) && object(op, OP);
  }
  lastService = undefined;
  return ok ? buf.subarray(0, pos) : undefined;
}
