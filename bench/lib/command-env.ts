// The environment and node flags the ipvsync command runs with, read from its shebang
// (`#!/usr/bin/env -S NAME=VALUE… node --flag…`): benchmark workers that stand for the command
// run under the same allocator and V8 settings.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** dist/src/cli/main.js, the installed command. */
export const CLI = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'cli', 'main.js');
const SHEBANG = readFileSync(CLI, 'utf8').split('\n', 1)[0]!.split(/\s+/).slice(2);
/** NAME=VALUE words before `node`. */
export const NODE_ENV_VARS = SHEBANG.slice(0, SHEBANG.indexOf('node'));
/** The flags after `node`. */
export const NODE_FLAGS = SHEBANG.slice(SHEBANG.indexOf('node') + 1);
