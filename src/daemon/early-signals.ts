// The first module the command line (src/cli/main.ts) loads: from here on a stop signal is caught, not fatal, so
// one that arrives while the rest loads (the daemon's modules, its configuration) is not lost.
// `proxy` adopts it and stops in order, logging it (Lifecycle.handleSignals); every other
// command gives it back, and a caught signal then ends the process as it would have.
import { STOP_SIGNALS } from './lifecycle.js';

let caught: NodeJS.Signals | undefined;
const record = (signal: NodeJS.Signals) => void (caught ??= signal);
for (const s of STOP_SIGNALS) process.on(s, record);

function remove(): NodeJS.Signals | undefined {
  for (const s of STOP_SIGNALS) process.off(s, record);
  return caught;
}

/** For the daemon, once its own handlers are in place: the first signal caught so far, if any
 *  (the catching stops). */
export function adoptEarlySignal(): NodeJS.Signals | undefined {
  return remove();
}

/** For a command that does not handle signals: the catching stops, and a signal caught so far
 *  ends the process with the signal's default action. */
export function releaseEarlySignals(): void {
  const s = remove();
  if (s) process.kill(process.pid, s);
}
