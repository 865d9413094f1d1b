// Seeded mutation of op lists (issue 44): valid op lists with one value somewhere in them (an
// op, a field, a member, an element, the list itself) replaced by a hostile one or deleted, and
// a campaign that holds a batch call to "succeed, or fail as invalid input naming the op".
// test/unit/api-ops-campaign.test.ts runs it over the addon's op readers, test/host/api-errors
// over the real handles.
import assert from 'node:assert/strict';
import { NetlinkError } from '../../src/errors.js';
import { NftTransaction, type NftOp } from '../../src/kernel/nftables.js';
import { prng } from './bytes.js';

const throwing = Object.defineProperty({}, 'x', { enumerable: true, get: () => { throw new Error('getter'); } });
const HOSTILE: unknown[] = [
  null, undefined, 0, -1, -0.5, 1.5, NaN, Infinity, -Infinity, 2 ** 53, 2 ** 32, 65536, 1e308, 10n, -1n,
  '', ' ', 'x'.repeat(70_000), '\u0000', 'ﬀ', '10.0.0.1/99', '::ffff:1.2.3.4', 'tcp', 'add', 'inet7',
  true, false, {}, [], [null], [[]], { a: { b: [null, {}] } }, () => 1, Symbol('s'), new Date(0), Buffer.alloc(3),
  new Proxy({}, { get: () => { throw new Error('proxy'); } }), throwing,
];

export type Path = (string | number)[];

/** Every path to a value inside `v` (objects and arrays, depth-first). */
function paths(v: unknown, at: Path = [], out: Path[] = []): Path[] {
  out.push(at);
  if (v !== null && typeof v === 'object' && !Buffer.isBuffer(v)) {
    for (const k of Object.keys(v)) paths((v as Record<string, unknown>)[k], [...at, Array.isArray(v) ? Number(k) : k], out);
  }
  return out;
}

/** A deep copy sharing nothing (the valid lists are JSON data). */
export function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** `ops` with one value replaced (or deleted); returns the mutated list and the path touched. */
export function mutate(ops: unknown[], rand: () => number): { ops: unknown; path: Path } {
  const copy = clone(ops);
  const all = paths(copy);
  const path = all[Math.floor(rand() * all.length)]!;
  const value = HOSTILE[Math.floor(rand() * HOSTILE.length)];
  if (path.length === 0) return { ops: rand() < 0.5 ? value : [value], path };
  let parent: Record<string | number, unknown> = copy as never;
  for (const k of path.slice(0, -1)) parent = parent[k] as never;
  const last = path[path.length - 1]!;
  if (rand() < 0.15 && !Array.isArray(parent)) delete parent[last];
  else parent[last] = value;
  return { ops: copy, path };
}

/** Runs `call` over `runs` mutants of `valid`: each must succeed or fail as invalid input that
 *  names the mutated op (and the member, for `memberKeys`). */
export async function campaign(
  seed: number,
  valid: unknown[],
  call: (ops: unknown) => Promise<unknown> | unknown,
  memberKeys: string[] = [],
  runs = 1500,
): Promise<void> {
  await call(clone(valid)); // the unmutated list is valid
  const rand = prng(seed);
  let ok = 0;
  let refused = 0;
  const bad: string[] = [];
  for (let i = 0; i < runs; i++) {
    const { ops, path } = mutate(valid, rand);
    try {
      await call(ops);
      ok++;
    } catch (e) {
      const where = `path ${JSON.stringify(path)}: ${String(e)}`;
      if (!(e instanceof NetlinkError) || e.kind !== 'invalid') {
        if (bad.length < 8) bad.push(`raw: ${where}`);
        continue;
      }
      refused++;
      if (!Array.isArray(ops)) continue; // the list itself: nothing to index
      // The mutated op is named; earlier ops are whole, later ones may depend on it (an add to
      // the set a mutated create no longer makes): the index is the mutated op's or later.
      const op = path.length === 0 ? 0 : (path[0] as number);
      if (!(Number.isInteger(e.index) && e.index! >= op && e.index! < ops.length)) {
        if (bad.length < 8) bad.push(`index ${e.index} (want >= ${op}): ${where}`);
        continue;
      }
      if (e.index === op && path.length >= 3 && memberKeys.includes(String(path[1])) && e.member !== path[2]) {
        if (bad.length < 8) bad.push(`member ${e.member} (want ${path[2]}): ${where}`);
      }
    }
  }
  assert.deepEqual(bad, [], `${bad.length} bad outcomes`);
  assert.ok(ok > 0 && refused > 0, `${ok} ok, ${refused} refused: the campaign reaches both outcomes`);
}

/** A mutated nftables op list queued op by op into a transaction (a bad op throws from
 *  queue); undefined when the list itself is no list (a transaction is built from ops). */
export function queued(ops: unknown): NftTransaction | undefined {
  if (!Array.isArray(ops)) return undefined;
  const tx = new NftTransaction();
  for (const op of ops) tx.queue(op as NftOp);
  return tx;
}

const T = { family: 'ip', name: 't' } as const;
const SET = { family: 'ip', table: 't', name: 's', key: ['ipv4_addr', 'inet_service'], map: 'verdict', timeoutFlag: true } as const;
const IV = { family: 'ip', table: 't', name: 'iv', key: ['ipv4_addr'], interval: true } as const;
export const NFT_OPS = [
  { verb: 'add', kind: 'table', table: T },
  { verb: 'add', kind: 'chain', chain: { family: 'ip', table: 't', name: 'pre', hook: { type: 'nat', hook: 'prerouting', priority: -100, policy: 'accept' } } },
  { verb: 'add', kind: 'chain', chain: { family: 'ip', table: 't', name: 'svc' } },
  { verb: 'add', kind: 'set', set: SET },
  { verb: 'add', kind: 'set', set: IV },
  { verb: 'add', kind: 'elements', set: SET, elements: [{ key: ['10.96.0.1', 80], verdict: { code: 'goto', chain: 'svc' }, timeout: 5000 }, { key: ['10.96.0.2', 53], verdict: { code: 'accept' }, comment: 'x' }] },
  { verb: 'add', kind: 'elements', set: IV, elements: [{ key: ['10.0.0.0/8'] }, { key: ['192.168.1.0/24'] }] },
  {
    verb: 'add', kind: 'rule', rule: {
      family: 'ip', table: 't', chain: 'pre', comment: 'c', exprs: [
        { type: 'payload', base: 'network', offset: 16, len: 4, dreg: 1 },
        { type: 'cmp', sreg: 1, op: 'eq', data: '0a600001' },
        { type: 'counter' },
        { type: 'immediate', dreg: 0, verdict: { code: 'jump', chain: 'svc' } },
      ],
    },
  },
  { verb: 'delete', kind: 'rule', rule: { family: 'ip', table: 't', chain: 'pre', handle: 4, exprs: [] } },
];

