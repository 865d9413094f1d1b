// Memoization for pure per-address work that comes back sync after sync (the same VIPs and
// endpoints), bounded so a long-running daemon with churning endpoints never grows without end.

/** `fn` memoized on its string argument; at most `max` results are kept (all dropped when full). */
export function boundedMemo<T>(fn: (key: string) => T, max: number): (key: string) => T {
  const cache = new Map<string, T>();
  return (key) => {
    let v = cache.get(key);
    if (v === undefined) {
      v = fn(key);
      if (cache.size >= max) cache.clear();
      cache.set(key, v);
    }
    return v;
  };
}
