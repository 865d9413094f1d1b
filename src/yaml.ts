// The product's YAML reader and writer (js-yaml, loaded on first use: JSON manifests and a daemon
// without a config file never need it, and loading it costs a long-running process ~6 MB of
// resident memory). Manifests, the daemon's config file, --write-config-to and kubeconfig all go
// through here. js-yaml rather than the `yaml` package: on a 20k-service List (28 MB) it parses in ~1.4 s
// where `yaml` takes ~24 s and 2.5 GB (bench/manifest-input.ts). Tests keep `yaml` as an
// independent parser to check this one against.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** The part of js-yaml 4 (which ships no types) that is used here. */
interface JsYaml {
  loadAll(text: string, iterator: null, options: { schema: unknown }): unknown[];
  dump(value: unknown, options: { schema: unknown; noArrayIndent?: boolean; lineWidth?: number; noRefs?: boolean; quotingType?: '"' | "'" }): string;
  Type: new (tag: string, options: Record<string, unknown>) => unknown;
  FAILSAFE_SCHEMA: { extend(types: { implicit: unknown[] }): unknown };
  types: Record<'null' | 'bool' | 'int' | 'float', Record<string, unknown>>;
}

interface JsYamlException extends Error {
  reason: string;
  mark?: { line: number; column: number };
}

let jsYaml: { lib: JsYaml; schema: unknown } | undefined;

/**
 * js-yaml with YAML 1.2's core schema as the spec (and the `yaml` package) resolve it. js-yaml's
 * own CORE_SCHEMA also reads `0b101` and `+0x1`/`-0x1` as integers and `+.5`, `1.5e400` as
 * strings: a port written `0b101`, which the API server refuses, would become port 5. Its
 * DEFAULT_SCHEMA would further turn `2024-01-01` into a Date and read `<<` as a merge key.
 */
function js(): { lib: JsYaml; schema: unknown } {
  if (jsYaml) return jsYaml;
  const lib = require('js-yaml') as JsYaml;
  const { int, float } = lib.types;
  // dumping a number as js-yaml does (its `styles` option, not used here, is left out)
  const inherit = (t: Record<string, unknown>) => ({ kind: 'scalar', predicate: t.predicate, represent: t.represent, defaultStyle: t.defaultStyle });
  const intType = new lib.Type('tag:yaml.org,2002:int', {
    ...inherit(int),
    resolve: (s: string | null) => s !== null && CORE_INT.test(s),
    construct: (s: string) => (s[1] === 'o' ? parseInt(s.slice(2), 8) : s[1] === 'x' ? parseInt(s.slice(2), 16) : Number(s)),
  });
  const floatType = new lib.Type('tag:yaml.org,2002:float', {
    ...inherit(float),
    resolve: (s: string | null) => s !== null && CORE_FLOAT.test(s),
    construct: (s: string) => (/nan$/i.test(s) ? NaN : /inf$/i.test(s) ? (s[0] === '-' ? -Infinity : Infinity) : Number(s)),
  });
  const schema = lib.FAILSAFE_SCHEMA.extend({ implicit: [lib.types.null, lib.types.bool, intType, floatType] });
  return (jsYaml = { lib, schema });
}

/** YAML 1.2.2 §10.3.2 (core schema): the plain scalars that are integers, and floats. */
const CORE_INT = /^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$/;
const CORE_FLOAT = /^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$/;

/** A YAML text that does not parse: where (1-based) and why. */
export class YamlSyntaxError extends Error {
  constructor(
    readonly reason: string,
    /** 1-based document of the stream. */
    readonly document: number,
    readonly line?: number,
    readonly column?: number,
  ) {
    super(line !== undefined ? `${reason} at line ${line}, column ${column}` : reason);
    this.name = 'YamlSyntaxError';
  }
}

/**
 * Every document of a YAML stream as plain values (an empty document: null), or a
 * YamlSyntaxError naming the first problem. Aliases are shared references, not copies; a
 * document whose aliases would expand it far past what its text writes out (exponential
 * "billion laughs" nesting) is refused: one JSON.stringify of it (a warning quoting a value)
 * would never end.
 */
export function parseYamlDocuments(text: string): unknown[] {
  const { lib, schema } = js();
  let docs: unknown[];
  try {
    docs = lib.loadAll(text, null, { schema });
  } catch (e) {
    const x = e as JsYamlException;
    if (typeof x.reason !== 'string') throw e;
    const line = x.mark ? x.mark.line + 1 : undefined;
    throw new YamlSyntaxError(x.reason, line !== undefined ? documentAt(text, line) : 1, line, x.mark ? x.mark.column + 1 : undefined);
  }
  // an alias is written `*name`: a text without a star has none, and is not walked
  if (text.includes('*'))
    docs.forEach((d, i) => {
      const { written, expanded } = nodeCounts(d);
      if (expanded > 2 * written + MAX_ALIAS_GROWTH)
        throw new YamlSyntaxError(`excessive aliasing: the aliases expand ${written} nodes to more than ${2 * written + MAX_ALIAS_GROWTH} (a resource exhaustion attack?)`, i + 1);
    });
  return docs;
}

/** The nodes aliases may add to a document beyond doubling it. */
const MAX_ALIAS_GROWTH = 10_000;

/**
 * The document's nodes as written (an alias: one) and as a tree (an alias: the nodes it names),
 * in time linear in the written nodes; a cycle (an alias inside its own anchor) counts once.
 */
function nodeCounts(root: unknown): { written: number; expanded: number } {
  const size = new Map<object, number>(); // expanded size of each finished collection
  const open = new Set<object>();
  let written = 1;
  const children = (o: object): unknown[] => (Array.isArray(o) ? o : Object.values(o));
  // iterative post-order: chains of aliases can nest deeper than the stack
  const stack: Array<{ node: object; kids: unknown[]; i: number; total: number }> = [];
  const enter = (v: unknown): number | undefined => {
    if (v === null || typeof v !== 'object') return 1;
    const known = size.get(v);
    if (known !== undefined) return known;
    if (open.has(v)) return 1;
    open.add(v);
    const kids = children(v);
    written += kids.length;
    stack.push({ node: v, kids, i: 0, total: 1 });
    return undefined;
  };
  let last = enter(root);
  while (stack.length) {
    const top = stack[stack.length - 1]!;
    if (last !== undefined && top.i > 0) top.total += last;
    if (top.i < top.kids.length) {
      last = enter(top.kids[top.i++]);
      continue;
    }
    stack.pop();
    open.delete(top.node);
    size.set(top.node, top.total);
    last = top.total;
  }
  return { written, expanded: last ?? 1 };
}

/**
 * The 1-based document of the stream that `line` (1-based) is in: a `---` line starts one, and
 * so does content after a `...` (or at the top) with no `---` before it.
 */
function documentAt(text: string, line: number): number {
  let docs = 0;
  let open = false;
  let start = 0;
  for (let n = 1; n <= line && start <= text.length; n++) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    const l = text.slice(start, end);
    if (/^---(?:\s|$)/.test(l)) {
      docs++;
      open = true;
    } else if (/^\.\.\.(?:\s|$)/.test(l)) open = false;
    else if (!open && !/^\s*(?:#.*)?$/.test(l) && !l.startsWith('%')) {
      docs++;
      open = true;
    }
    start = end + 1;
  }
  return Math.max(docs, 1);
}

/** A value as one YAML document (block style, sequences unindented as kubectl writes them),
 *  read back the same by parseYamlDocuments. A string that would read as something else is
 *  double-quoted, as are YAML 1.1's yes/no/on/off (kube-proxy's reader is YAML 1.1). */
export function renderYaml(value: unknown): string {
  const { lib, schema } = js();
  return lib.dump(value, { schema, noArrayIndent: true, lineWidth: -1, noRefs: true, quotingType: '"' });
}
