/** Input refused before anything was applied — a configuration, flag or manifest value (the
 *  CLI exits 2 for it). */
export class BadInputError extends Error {}

/** An error as JSON (`--json` output): its name and message, and its own fields (a
 *  NetlinkError's code, kind, op, index…; a ConfigError's issues; a ManifestError's file). */
export function errorJson(e: unknown): Record<string, unknown> {
  if (!(e instanceof Error)) return { message: String(e) };
  const own = Object.entries(e).filter(([, v]) => v !== undefined && typeof v !== 'function');
  return { name: e.name, message: e.message, ...Object.fromEntries(own) };
}

/** A message quoting input, bounded: at most about `max` characters, its head and tail kept
 *  and what is between counted (a 100 MB bad line is not echoed whole). */
export function excerpt(text: string, max = 240): string {
  if (text.length <= max) return text;
  const tail = Math.floor(max / 4);
  return `${text.slice(0, max - tail)} … (${text.length - max} characters left out) … ${text.slice(-tail)}`;
}

/** The kind of failure, so callers can react without parsing messages. */
export type NetlinkErrorKind =
  | 'kernel' // the kernel rejected a request
  | 'nobufs' // replies were dropped (ENOBUFS): outcome unknown, resync
  | 'dump-interrupted' // NLM_F_DUMP_INTR: the object set changed during a dump, redo it
  | 'decode' // a reply did not parse
  | 'system' // a socket syscall failed
  | 'invalid' // input rejected before anything was sent
  | 'unsupported'; // the kernel lacks the feature (missing module or family)

export interface NetlinkErrorFields {
  message: string;
  code: string;
  errno: number;
  kind: NetlinkErrorKind;
  op: string;
  extack?: string;
  extackOffset?: number;
  index?: number;
  member?: number;
}

/**
 * Every error ipvsync raises for a kernel conversation or invalid input. `code` is the errno
 * name ('EEXIST', 'ESRCH', 'EPERM' …) or a family-specific name ('IPSET_ERR_EXIST');
 * `index` is the failing request's position in its batch; `extack` is the kernel's own text.
 */
export class NetlinkError extends Error {
  readonly code: string;
  readonly errno: number;
  readonly kind: NetlinkErrorKind;
  readonly op: string;
  readonly extack?: string;
  readonly extackOffset?: number;
  readonly index?: number;
  /** Within a multi-element op (ipset add/del of many members): the member that failed. */
  readonly member?: number;

  constructor(f: NetlinkErrorFields) {
    super(f.message);
    this.name = 'NetlinkError';
    this.code = f.code;
    this.errno = f.errno;
    this.kind = f.kind;
    this.op = f.op;
    if (f.extack !== undefined) this.extack = f.extack;
    if (f.extackOffset !== undefined) this.extackOffset = f.extackOffset;
    if (f.index !== undefined) this.index = f.index;
    if (f.member !== undefined) this.member = f.member;
  }

  /** Input validation failure raised in TypeScript before anything reaches the addon. */
  static invalid(op: string, why: string, at?: { index?: number; member?: number }): NetlinkError {
    return new NetlinkError({ message: `${op}: ${why}`, code: 'EINVAL', errno: 22, kind: 'invalid', op, ...at });
  }

  /**
   * What was thrown while op `at.index` (its member `at.member`) was read, as the 'invalid'
   * error that names it: a NetlinkError keeps its text and gains the position it lacks; anything
   * else (a TypeError from a value of the wrong shape, a throwing getter) becomes one, so no raw
   * JavaScript error leaves a batch call.
   */
  static atOp(e: unknown, at: { index?: number; member?: number }): NetlinkError {
    if (e instanceof NetlinkError) {
      const index = e.index ?? at.index;
      const member = e.member ?? at.member;
      if (index === e.index && member === e.member) return e;
      const f: NetlinkErrorFields = { message: e.message, code: e.code, errno: e.errno, kind: e.kind, op: e.op };
      if (e.extack !== undefined) f.extack = e.extack;
      if (e.extackOffset !== undefined) f.extackOffset = e.extackOffset;
      if (index !== undefined) f.index = index;
      if (member !== undefined) f.member = member;
      return new NetlinkError(f);
    }
    const where = [at.index === undefined ? '' : `op ${at.index}`, at.member === undefined ? '' : `member ${at.member}`].filter(Boolean).join(' ');
    return NetlinkError.invalid(where || 'input', `malformed (${e instanceof Error ? e.message : String(e)})`, at);
  }
}
