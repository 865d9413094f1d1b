// Module-loading hooks (node:module register) for tests that check what a module graph loads:
// every URL loaded from node_modules (or containing `data.match`) is appended to the file in
// `data.file`.
import { appendFileSync } from 'node:fs';

let file = '';
let match = '/node_modules/';

export function initialize(data: { file: string; match?: string }): void {
  file = data.file;
  if (data.match) match = data.match;
}

export async function load(
  url: string,
  context: unknown,
  next: (url: string, context: unknown) => Promise<unknown>,
): Promise<unknown> {
  if (url.includes(match)) appendFileSync(file, `${url}\n`);
  return next(url, context);
}
