// Structured logs, one line each: klog's text form, as kube-proxy writes it
// (`I1206 22:20:02.123456   12345 ipvsync] "sync" trigger="periodic" writes=0`), or one JSON object
// ({ts, level, msg, ...fields}); a level filter, child loggers with bound fields. Errors keep
// their name, message and own fields (a NetlinkError's code, errno, kind, op, extack, index), so
// a line carries what the error value carries.
import type { LogFormat } from './config.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type Fields = Record<string, unknown>;

export interface Logger {
  readonly level: LogLevel;
  debug(msg: string, fields?: Fields): void;
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  enabled(level: LogLevel): boolean;
  /** A logger that adds `fields` to every line. */
  child(fields: Fields): Logger;
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
const RESERVED = new Set(['ts', 'level', 'msg']);

export interface LoggerOptions {
  level?: LogLevel;
  /** text (klog's, the default) or json. */
  format?: LogFormat;
  /** Where lines go (default: stderr). */
  write?: (line: string) => void;
  now?: () => number;
  fields?: Fields;
}

/** Plain JSON-safe form of a value: errors as objects, bigints as strings, cycles cut. */
export function toLogValue(v: unknown, seen = new WeakSet<object>()): unknown {
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'function' || typeof v === 'symbol') return String(v);
  if (v === undefined) return undefined;
  if (v === null || typeof v !== 'object') return typeof v === 'number' && !Number.isFinite(v) ? String(v) : v;
  if (seen.has(v)) return '[Circular]';
  seen.add(v);
  if (v instanceof Error) {
    const out: Fields = { name: v.name, message: v.message };
    for (const [k, x] of Object.entries(v)) if (k !== 'stack') out[k] = toLogValue(x, seen);
    if (v.cause !== undefined) out.cause = toLogValue(v.cause, seen);
    return out;
  }
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? 'Invalid Date' : v.toISOString();
  if (v instanceof Map) return toLogValue(Object.fromEntries(v), seen);
  if (v instanceof Set) return toLogValue([...v], seen);
  if (Array.isArray(v)) return v.map((x) => toLogValue(x, seen) ?? null);
  const out: Fields = {};
  for (const [k, x] of Object.entries(v)) {
    const y = toLogValue(x, seen);
    if (y !== undefined) out[k] = y;
  }
  return out;
}

/** klog's severity letters (debug lines are its V(4) info lines). */
const KLOG_SEVERITY: Record<LogLevel, string> = { debug: 'I', info: 'I', warn: 'W', error: 'E' };
const pad = (n: number, w = 2) => String(n).padStart(w, '0');

/**
 * A line in klog's text form: `Lmmdd hh:mm:ss.uuuuuu <pid, 7 wide> ipvsync] "msg" key=value…`
 * (UTC; klog's file:line is the program's name). Strings are quoted, numbers and booleans bare,
 * other values as JSON, as klog's structured lines.
 */
export function klogLine(level: LogLevel, at: Date, pid: number, msg: string, fields: Fields): string {
  const ts = `${pad(at.getUTCMonth() + 1)}${pad(at.getUTCDate())} ${pad(at.getUTCHours())}:${pad(at.getUTCMinutes())}:${pad(at.getUTCSeconds())}.${pad(at.getUTCMilliseconds(), 3)}000`;
  let line = `${KLOG_SEVERITY[level]}${ts} ${String(pid).padStart(7)} ipvsync] ${JSON.stringify(msg)}`;
  for (const [k, v] of Object.entries(fields)) line += ` ${k}=${typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v)}`;
  return line;
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  const level = opts.level ?? 'info';
  if (!(level in RANK)) throw new RangeError(`unknown log level ${level}`);
  const format = opts.format ?? 'text';
  const write = opts.write ?? ((line: string) => void process.stderr.write(line + '\n'));
  const now = opts.now ?? Date.now;
  const bound = opts.fields ?? {};

  const emit = (lvl: LogLevel, msg: string, fields?: Fields) => {
    if (RANK[lvl] < RANK[level]) return;
    const values: Fields = {};
    for (const src of [bound, fields ?? {}]) {
      for (const [k, v] of Object.entries(src)) {
        const x = toLogValue(v);
        if (x === undefined) continue;
        values[RESERVED.has(k) ? `field_${k}` : k] = x;
      }
    }
    const at = new Date(now());
    write(format === 'json' ? JSON.stringify({ ts: at.toISOString(), level: lvl, msg, ...values }) : klogLine(lvl, at, process.pid, msg, values));
  };

  return {
    level,
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    enabled: (l) => RANK[l] >= RANK[level],
    child: (fields) => createLogger({ level, format, write, now, fields: { ...bound, ...fields } }),
  };
}
