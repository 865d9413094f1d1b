// Which virtual servers differ between two models: the `changed` set for Engine.sync's
// incremental path (a service that disappeared is in it too, so the engine deletes it).
import { serviceKey, type DesiredService } from '../engine/ipvs-model.js';

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

/** Deep equality of plain data (objects, arrays, primitives); undefined members count as
 *  absent, as they would in JSON. No serialisation: this runs on every service every sync. */
export function samePlain(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!samePlain(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  let n = 0;
  for (const k in x) {
    if (x[k] === undefined) continue;
    n++;
    if (!samePlain(x[k], y[k])) return false;
  }
  for (const k in y) if (y[k] !== undefined) n--;
  return n === 0;
}
