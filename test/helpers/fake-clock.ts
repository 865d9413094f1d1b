import type { Clock } from '../../src/daemon/runner.js';

/** A manual clock: timers fire only when the test advances time. */
export class FakeClock implements Clock {
  private t = 0;
  private seq = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + ms, fn });
    return id;
  }

  clearTimeout(h: unknown): void {
    this.timers.delete(h as number);
  }

  pending(): number {
    return this.timers.size;
  }

  /** Advances time to `to` (absolute), firing due timers in order and letting promises settle. */
  async advanceTo(to: number): Promise<void> {
    for (;;) {
      await flush();
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const e of this.timers) if (e[1].at <= to && (!next || e[1].at < next[1].at)) next = e;
      if (!next) break;
      this.timers.delete(next[0]);
      this.t = next[1].at;
      next[1].fn();
    }
    this.t = to;
    await flush();
  }

  advance(ms: number): Promise<void> {
    return this.advanceTo(this.t + ms);
  }
}

async function flush(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((r) => setImmediate(r));
}
