// What the restore commands read: stdin or a file, bounded. An input that cannot be read, or
// is larger than the bound, is refused as bad input (exit 2) before anything is applied —
// never taken as empty, never read until memory runs out (`-f /dev/zero`).
import { createReadStream, fstatSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { BadInputError } from '../errors.js';

/** The most a restore reads: far beyond any real table (a million ipset members is ~40 MiB),
 *  and well under the longest string V8 makes (~512 Mi characters). */
export const INPUT_LIMIT = 256 * 1024 * 1024;

/** The whole of `file` (stdin when absent) as UTF-8 text. */
export async function readInput(file: string | undefined, limit = INPUT_LIMIT): Promise<string> {
  const what = file ?? 'stdin';
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    // process.stdin ends at once, as if empty, on a descriptor it cannot read (a directory)
    if (file === undefined && fstatSync(0).isDirectory()) throw Object.assign(new Error('EISDIR: illegal operation on a directory, read'), { code: 'EISDIR' });
    const stream: Readable = file === undefined ? process.stdin : createReadStream(file);
    for await (const c of stream) {
      const chunk = typeof c === 'string' ? Buffer.from(c) : (c as Buffer);
      size += chunk.length;
      if (size > limit) {
        stream.destroy();
        throw new BadInputError(`${what}: more than ${limit / (1024 * 1024)} MiB of input; nothing was applied`);
      }
      chunks.push(chunk);
    }
  } catch (e) {
    if (e instanceof BadInputError) throw e;
    throw new BadInputError(`cannot read ${what}: ${(e as Error).message}; nothing was applied`);
  }
  return Buffer.concat(chunks, size).toString('utf8');
}
