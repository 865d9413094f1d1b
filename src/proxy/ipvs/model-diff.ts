// Which virtual servers differ between two models: the `changed` set for Engine.sync's
// incremental path (a service that disappeared is in it too, so the engine deletes it).
import { samePlain, serviceKey, type DesiredService } from '../../engine/ipvs-model.js';

export function changedServiceKeys(previous: readonly DesiredService[], next: readonly DesiredService[]): Set<string> {
  return new Set(changedServices(previous, next).keys());
}

/** The virtual servers that differ between two models, by key: the one of `next` (undefined:
 *  not in it), as DesiredChanges.services has them. */
export function changedServices(previous: readonly DesiredService[], next: readonly DesiredService[]): Map<string, DesiredService | undefined> {
  const before = new Map<string, DesiredService>();
  for (const s of previous) before.set(serviceKey(s), s);
  const changed = new Map<string, DesiredService | undefined>();
  for (const s of next) {
    const k = serviceKey(s);
    const was = before.get(k);
    if (was === undefined || !samePlain(was, s)) changed.set(k, s);
    before.delete(k);
  }
  for (const k of before.keys()) changed.set(k, undefined);
  return changed;
}
