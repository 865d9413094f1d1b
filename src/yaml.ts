// The YAML library, loaded on first use: JSON manifests and a daemon without a config file never
// need it, and loading it costs a long-running process ~4 MB of resident memory.
import { createRequire } from 'node:module';

type Yaml = typeof import('yaml');
const require = createRequire(import.meta.url);
let loaded: Yaml | undefined;

export function yaml(): Yaml {
  return (loaded ??= require('yaml') as Yaml);
}
