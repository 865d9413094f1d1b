// The proxy daemon on the e2e node, in the background: its JSON log lines, the rest of its
// stderr (for failure messages), and its exit.
import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { ipvsyncBackground } from './kernel.js';
import { CLUSTER_CIDR, NODE_IP, NODE_NAME } from './podnet.js';

export interface RunningProxy {
  child: ChildProcess;
  /** Its JSON log lines (stderr), as they come. */
  log: string[];
  /** The rest of its stderr. */
  stderr: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `ipvsync proxy` over `sourceArgs` (`--manifests DIR`, `--master URL`) for this node, its log
 *  lines as JSON (--logging-format json) for the tests to read. */
export function startProxy(sourceArgs: string[], ...flags: string[]): RunningProxy {
  const child = ipvsyncBackground('proxy', ...sourceArgs, '--hostname-override', NODE_NAME, '--cluster-cidr', CLUSTER_CIDR, '--node-ip', NODE_IP, '--logging-format', 'json', ...flags);
  const log: string[] = [];
  let stderr = '';
  createInterface({ input: child.stderr! }).on('line', (l) => (l.startsWith('{') ? log.push(l) : (stderr += `${l}\n`)));
  child.stdout!.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { child, log, stderr: () => stderr, exited };
}
