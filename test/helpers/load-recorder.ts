// Module-loading hooks (node:module register) for tests that check what a module graph loads:
// every URL loaded from node_modules is appended to the file in `data.file`.
import { appendFileSync } from 'node:fs';

let file = '';

export function initialize(data: { file: string }): void {
  file = data.file;
}

export async function load(
  url: string,
  context: unknown,
  next: (url: string, context: unknown) => Promise<unknown>,
): Promise<unknown> {
  if (url.includes('/node_modules/')) appendFileSync(file, `${url}\n`);
  return next(url, context);
}
