// The suite's capped peers across runs: a peer that hit the cap at some S is not started again at
// a larger S, also when the smaller S is a row kept from an earlier run (`--only qemu
// --qemu-sizes 20000` next to the committed 1k–10k rows).
import type { SizeRow } from './render.js';

/** The capped peers' names (as `--skip` takes them) and the row key of their full run. */
export const CAPPED_PEERS: ReadonlyArray<readonly [name: string, key: string]> = [
  ['iptables-legacy-restore', 'iptables-legacy-restore full'],
  ['iptables-nft-restore', 'iptables-nft-restore full'],
  ['nft -f', 'nft -f'],
];

/** Where a peer hit the cap: the S, and the cap it hit. */
export interface CappedAt {
  S: number;
  capS: number;
}

/** The peers that hit the cap in a row smaller than `S`, by name: the smallest such row, with
 *  the cap it hit (`defaultCapS` when the row does not say). */
export function cappedInRows(rows: readonly SizeRow[], S: number, defaultCapS: number): Map<string, CappedAt> {
  const out = new Map<string, CappedAt>();
  for (const [name, key] of CAPPED_PEERS) {
    const hit = rows.filter((r) => r.services < S && r.peers[key]?.timeout).sort((x, y) => x.services - y.services)[0];
    if (hit) out.set(name, { S: hit.services, capS: Math.round(hit.peers[key]!.timeoutS ?? defaultCapS) });
  }
  return out;
}

/** A `--skip` value (`name=S:capS`). */
export const formatSkip = (name: string, at: CappedAt): string => `${name}=${at.S}:${at.capS}`;

/** A `--skip` value read back: the peer's name, the S it hit the cap at and the cap. */
export function parseSkip(x: string, defaultCapS: number): [name: string, at: CappedAt] {
  const i = x.lastIndexOf('=');
  const [S, capS] = x.slice(i + 1).split(':');
  return [x.slice(0, i), { S: Number(S), capS: capS === undefined ? defaultCapS : Number(capS) }];
}
