// The ```ts blocks of README.md and docs/*.md as TypeScript modules: each page's blocks in order
// as one user's module (a page's later blocks use the first one's imports), each block at its
// own line of the page, so a compiler error's line is the page's.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The ```ts blocks of a Markdown file, with the line each starts at. */
function blocks(root: string, file: string): Array<{ line: number; code: string }> {
  const out: Array<{ line: number; code: string }> = [];
  const lines = readFileSync(join(root, file), 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i]!.trim() !== '```ts') continue;
    const start = i + 1;
    while (++i < lines.length && lines[i]!.trim() !== '```');
    out.push({ line: start + 1, code: lines.slice(start, i).join('\n') });
  }
  return out;
}

export interface DocExamples {
  /** The modules written, `example-N.ts`, one per page with blocks. */
  names: string[];
  /** Puts the page's name where a module's name stands in a compiler's output. */
  report(text: string): string;
}

/** Writes one module per page of `root` (README.md, docs/*.md) with TypeScript blocks into `dir`. */
export function writeDocExamples(root: string, dir: string): DocExamples {
  const files = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const names: string[] = [];
  const origin = new Map<string, string>();
  for (const f of files) {
    const bs = blocks(root, f);
    if (!bs.length) continue;
    const name = `example-${names.length}.ts`;
    names.push(name);
    origin.set(name, f);
    const lines: string[] = [];
    for (const b of bs) {
      while (lines.length < b.line - 1) lines.push('');
      lines.push(...b.code.split('\n'));
    }
    writeFileSync(join(dir, name), `${lines.join('\n')}\nexport {};\n`);
  }
  return { names, report: (text) => text.replace(/example-\d+\.ts/g, (n) => origin.get(n) ?? n) };
}
