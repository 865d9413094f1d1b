// Which virtual servers differ between two models: the `changed` set for Engine.sync's
// incremental path (a service that disappeared is in it too, so the engine deletes it).
import { samePlain, serviceKey, type DesiredService } from '../engine/ipvs-model.js';

export function changedServiceKeys(previous: readonly DesiredService[], next: readonly DesiredService[]): Set<string> {
  const before = new Map<string, DesiredService>();
  for (const s of previous) before.set(serviceKey(s), s);
  const changed = new Set<string>();
  for (const s of next) {
    const k = serviceKey(s);
    const was = before.get(k);
    if (was === undefined || !samePlain(was, s)) changed.add(k);
    before.delete(k);
  }
  for (const k of before.keys()) changed.add(k);
  return changed;
}
