// The product's YAML reader (js-yaml under YAML 1.2's core schema): scalars resolved as the
// `yaml` package (the reader before it, kept here as an independent parser) resolves them, errors
// naming the document and line, aliases bounded, and YAML and JSON of the same objects loading the same.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { MANIFEST_FORMATS, manifestFiles } from '../../bench/lib/manifests.js';
import { workload } from '../../bench/lib/workload.js';
import { loadManifests, parseManifests } from '../../src/kube/manifests.js';
import { parseYamlDocuments, renderYaml, YamlSyntaxError } from '../../src/yaml.js';

const byYamlPackage = (text: string) => parseAllDocuments(text).map((d) => d.toJS() as unknown);

// YAML 1.1 (kubectl's go-yaml) reads yes/on/y as true and 0777 as octal; 1.2's core schema, this
// reader's and the `yaml` package's, does not: a manifest means what it meant before.
const SCALARS: Array<[string, unknown]> = [
  ['8080', 8080],
  ['"8080"', '8080'],
  ['"08"', '08'],
  ['08', 8],
  ['0777', 777],
  ['0o17', 15],
  ['0x1F', 31],
  ['0b101', '0b101'], // js-yaml's own core schema: 5 (a port the API server refuses would be port 5)
  ['+0x1', '+0x1'], // js-yaml's own: 1
  ['-0x1', '-0x1'],
  ['+12', 12],
  ['-0', -0],
  ['1e3', 1000],
  ['+.5', 0.5], // js-yaml's own: a string
  ['1.5e400', Infinity], // js-yaml's own: a string
  ['.inf', Infinity],
  ['-.Inf', -Infinity],
  ['1_000', '1_000'],
  ['65536', 65536],
  ['true', true],
  ['True', true],
  ['FALSE', false],
  ['tRue', 'tRue'],
  ['yes', 'yes'],
  ['no', 'no'],
  ['on', 'on'],
  ['off', 'off'],
  ['y', 'y'],
  ['n', 'n'],
  ['~', null],
  ['null', null],
  ['NULL', null],
  ['', null],
  ['2024-01-01', '2024-01-01'], // js-yaml's default schema: a Date
  ['12:30:00', '12:30:00'], // YAML 1.1: sexagesimal 45000
  ['0O17', '0O17'],
  ['0x', '0x'],
];

test('scalars: YAML 1.2 core schema, as the yaml package reads them (ports, numeric strings, booleans)', () => {
  for (const [text, want] of SCALARS) {
    const doc = `v: ${text}\n`;
    assert.deepEqual(parseYamlDocuments(doc), [{ v: want }], text);
    assert.deepEqual(parseYamlDocuments(doc), byYamlPackage(doc), `${text}: as the yaml package`);
    if (typeof want === 'string') assert.deepEqual(parseYamlDocuments(renderYaml({ v: want })), [{ v: want }], `${text}: rendered as a string`);
  }
  // `<<` is no merge key in the core schema
  assert.deepEqual(parseYamlDocuments('a: &a {x: 1}\nb: {<<: *a}\n'), [{ a: { x: 1 }, b: { '<<': { x: 1 } } }]);
});

test('a Service port written as a YAML 1.1 number or a numeric string is not read as a port', () => {
  const svc = (port: string) => `apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec: {clusterIP: 10.96.0.1, ports: [{port: ${port}}]}\n`;
  assert.equal(parseManifests(svc('0b1010000'), 'x.yaml').services.length, 0, '0b1010000 is a string');
  assert.equal(parseManifests(svc('"80"'), 'x.yaml').services.length, 0, '"80" is a string');
  assert.equal(parseManifests(svc('0x50'), 'x.yaml').services[0]!.spec!.ports![0]!.port, 80);
  assert.equal(parseManifests(svc('080'), 'x.yaml').services[0]!.spec!.ports![0]!.port, 80, 'decimal, not YAML 1.1 octal');
});

test('documents: empty ones are null, and an error names the document and line it is in', () => {
  assert.deepEqual(parseYamlDocuments(''), []);
  assert.deepEqual(parseYamlDocuments('---\n---\nb: 1\n'), [null, { b: 1 }]);
  assert.deepEqual(parseYamlDocuments('a: 1\n---\n# c\n'), [{ a: 1 }, null]);
  const cases: Array<[string, number, number]> = [
    ['a: [1\n', 1, 2],
    ['# head\n%YAML 1.2\n---\na: 1\n---\n---\nb: {\n', 3, 8],
    ['a: 1\n...\nb: 2\n...\n---\nc: [\n', 3, 7],
    ['---\na: 1\n--- {x: [}\n', 2, 3],
    ['a: 1\na: 2\n', 1, 2],
  ];
  for (const [text, document, line] of cases) {
    assert.throws(
      () => parseYamlDocuments(text),
      (e: unknown) => e instanceof YamlSyntaxError && e.document === document && e.line === line && e.message.endsWith(`at line ${line}, column ${e.column}`),
      JSON.stringify(text),
    );
    assert.equal(byYamlPackage(text).length >= document, true, `${JSON.stringify(text)}: the yaml package counts document ${document} too`);
  }
});

test('aliases: shared and cyclic ones are read, an exponential or quadratic expansion is refused (a long chain without exhausting the stack)', () => {
  const [shared] = parseYamlDocuments('labels: &l {app: web}\na: *l\nb: *l\n') as [Record<string, unknown>];
  assert.deepEqual(shared, { labels: { app: 'web' }, a: { app: 'web' }, b: { app: 'web' } });
  const [cyclic] = parseYamlDocuments('spec: &s {ports: [{port: 80}], self: *s}\n') as [{ spec: { self: unknown } }];
  assert.equal(cyclic.spec.self, cyclic.spec);
  const bomb = `a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [${'*a,'.repeat(9)}]\nc: &c [${'*b,'.repeat(9)}]\nd: &d [${'*c,'.repeat(9)}]\ne: [${'*d,'.repeat(9)}]\n`;
  assert.throws(() => parseYamlDocuments(`ok: 1\n---\n${bomb}`), (e: unknown) => e instanceof YamlSyntaxError && e.document === 2 && /^excessive aliasing/.test(e.message));
  const chain = ['a0: &a0 [1]', ...Array.from({ length: 20_000 }, (_, i) => `a${i + 1}: &a${i + 1} [*a${i}]`)].join('\n') + '\n';
  // a(n) holds a(n-1): 20k lines expand to 200M nodes
  assert.throws(() => parseYamlDocuments(chain), (e: unknown) => e instanceof YamlSyntaxError && /^excessive aliasing/.test(e.message));
  assert.equal(parseYamlDocuments(chain.split('\n').slice(0, 100).join('\n')).length, 1, 'a short chain');
});

test('the same objects as JSON, a YAML List and YAML documents load the same', async () => {
  const services = workload(60).services;
  const sets = [];
  for (const format of MANIFEST_FORMATS) {
    const dir = mkdtempSync(join(tmpdir(), `ipvsync-${format}-`));
    try {
      for (const [name, text] of Object.entries(manifestFiles(services, format))) writeFileSync(join(dir, name), text);
      sets.push(await loadManifests([dir]));
    } finally {
      rmSync(dir, { recursive: true });
    }
  }
  const [json, ...others] = sets;
  assert.equal(json!.services.length, 60);
  assert.equal(json!.endpointSlices.length, 60);
  assert.deepEqual(json!.warnings, []);
  for (const s of others) {
    assert.deepStrictEqual(s.services, json!.services);
    assert.deepStrictEqual(s.endpointSlices, json!.endpointSlices);
    assert.deepEqual(s.warnings, []);
  }
});
