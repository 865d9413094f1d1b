// Typed reads of wire data. A Kubernetes object from the API server, a YAML manifest or a JSON
// file has the shape its type says only if whoever wrote it agreed: any member may be null, a
// number where a string belongs, a mapping where a list belongs. Every read of such an object
// goes through these accessors, which return the value when it has the asked type and
// undefined otherwise, so a wrong type reads as absent (or is told apart with `field`, to warn)
// and never as a TypeError deep in the translation. No allocation per read: a path is up to
// four fixed arguments, not a rest array.

type Mapping = Record<string, unknown>;

/** `v`'s member `k` when `v` is a mapping (an object, not an array); else undefined. */
export function member(v: unknown, k: string): unknown {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Mapping)[k] : undefined;
}

/** The value at a path of members (undefined where the path breaks). */
export function field(v: unknown, a: string, b?: string, c?: string, d?: string): unknown {
  let x = member(v, a);
  if (b === undefined) return x;
  x = member(x, b);
  if (c === undefined) return x;
  x = member(x, c);
  return d === undefined ? x : member(x, d);
}

export function str(v: unknown, a: string, b?: string, c?: string, d?: string): string | undefined {
  const x = field(v, a, b, c, d);
  return typeof x === 'string' ? x : undefined;
}

/** An integer (a safe one: a huge number is not one, and NaN is none). */
export function int(v: unknown, a: string, b?: string, c?: string, d?: string): number | undefined {
  const x = field(v, a, b, c, d);
  return Number.isSafeInteger(x) ? (x as number) : undefined;
}

export function bool(v: unknown, a: string, b?: string, c?: string, d?: string): boolean | undefined {
  const x = field(v, a, b, c, d);
  return typeof x === 'boolean' ? x : undefined;
}

export function arr(v: unknown, a: string, b?: string, c?: string, d?: string): readonly unknown[] | undefined {
  const x = field(v, a, b, c, d);
  return Array.isArray(x) ? x : undefined;
}

/** A mapping (an object, not an array). */
export function obj(v: unknown, a: string, b?: string, c?: string, d?: string): Mapping | undefined {
  const x = field(v, a, b, c, d);
  return isMapping(x) ? x : undefined;
}

export function isMapping(v: unknown): v is Mapping {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Set to something (not undefined, not null): a present value of the wrong type is warned
 *  about, an absent one is not. */
export function present(v: unknown): boolean {
  return v !== undefined && v !== null;
}

/** A value as a warning shows it: strings as they are, the rest as JSON, at most 64 characters;
 *  never throws (a cycle from YAML aliases, a BigInt, an object without a prototype). */
export function show(v: unknown): string {
  let t: string;
  if (typeof v === 'string') t = v;
  else if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint' || v === null || v === undefined) t = String(v);
  else {
    try {
      t = JSON.stringify(v) ?? typeof v;
    } catch {
      t = Array.isArray(v) ? '[…]' : typeof v === 'object' ? '{…}' : typeof v;
    }
  }
  return t.length > 64 ? `${t.slice(0, 61)}...` : t;
}
