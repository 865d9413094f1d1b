// List, then watch from the list's resourceVersion, for one resource: the loop of
// @kubernetes/client-node's ListWatch (the same re-list on 410 Gone, re-watch from the last
// resourceVersion when a watch ends cleanly, stop and report on any other error, the same
// de-duplication: an object whose resourceVersion did not change is not delivered again), but
// keeping only each object's key and resourceVersion. ListWatch keeps every object whole (at
// 10k Services and their EndpointSlices that is tens of MB of parsed JSON, held beside the
// proxy's own slimmed copies), and a list is delivered a page at a time, so a re-list does not
// hold the whole list either; what vanished is deleted once the last page is in.
import type { KubernetesObject } from './api-types.js';

/** One page of a list; `resourceVersion` is the list's (the same on every page). */
export interface ListPage<T> {
  items: readonly T[];
  resourceVersion: string;
}

export type WatchCallback = (phase: string, obj: any, raw?: any) => void; // eslint-disable-line @typescript-eslint/no-explicit-any
export type DoneCallback = (err: any) => void; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Starts one watch (the client's Watch.watch signature). */
export interface Watcher {
  watch(path: string, query: Record<string, string>, callback: WatchCallback, done: DoneCallback): Promise<{ abort(): void }>;
}

export interface ListWatchHandlers<T> {
  /** Added, or changed (a new resourceVersion). */
  update(obj: T): void;
  /** Deleted: the watch's object, or (an object gone from a re-list) its name and namespace. */
  delete(obj: KubernetesObject): void;
  /** A complete list has been delivered. */
  listed?(): void;
  /** The loop stopped on an error; start() resumes it (with a list when the resourceVersion was
   *  reset by a 410, else with a watch from the last resourceVersion). */
  error(err: unknown): void;
}

const keyOf = (o: KubernetesObject): string => `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

export class KeyedListWatch<T extends KubernetesObject> {
  /** key ("namespace/name", namespace '' when cluster-scoped) -> resourceVersion (null: none) */
  private readonly versions = new Map<string, string | null>();
  private rv = '';
  private stopped = true;
  private request: { abort(): void } | undefined;
  /** Bumped by every (re)start of the loop: a watch that resolves after a newer one started is
   *  aborted, not kept. */
  private generation = 0;

  constructor(
    private readonly path: string,
    private readonly watcher: Watcher,
    private readonly listPages: () => AsyncIterable<ListPage<T>>,
    private readonly on: ListWatchHandlers<T>,
    private readonly fieldSelector?: string,
  ) {}

  async start(): Promise<void> {
    this.stopped = false;
    await this.next(null);
  }

  stop(): void {
    this.stopped = true;
    this.abort();
  }

  private abort(): void {
    this.request?.abort();
    this.request = undefined;
  }

  /** After a watch ended (err null: cleanly), or to start. */
  private async next(err: unknown): Promise<void> {
    this.abort();
    const gen = ++this.generation;
    const status = err as { statusCode?: number; code?: number } | null;
    if (status && (status.statusCode === 410 || status.code === 410)) {
      this.rv = '';
    } else if (err) {
      this.on.error(err);
      return;
    }
    if (this.stopped) return;
    if (!this.rv) {
      try {
        await this.list();
      } catch (e) {
        this.on.error(e);
        return;
      }
    }
    const query: Record<string, string> = { resourceVersion: this.rv };
    if (this.fieldSelector !== undefined) query.fieldSelector = this.fieldSelector;
    const req = await this.watcher.watch(this.path, query, (phase, obj) => this.event(phase, obj), (e) => void this.next(e));
    if (gen !== this.generation || this.stopped) req.abort();
    else this.request = req;
  }

  private async list(): Promise<void> {
    const seen = new Set<string>();
    let rv = '';
    for await (const page of this.listPages()) {
      rv ||= page.resourceVersion;
      for (const o of page.items) {
        const key = keyOf(o);
        seen.add(key);
        this.upsert(key, o);
      }
    }
    for (const key of this.versions.keys()) {
      if (seen.has(key)) continue;
      this.versions.delete(key);
      const slash = key.indexOf('/');
      const namespace = key.slice(0, slash);
      this.on.delete({ metadata: { name: key.slice(slash + 1), ...(namespace ? { namespace } : {}) } });
    }
    this.rv = rv;
    this.on.listed?.();
  }

  private upsert(key: string, o: T): void {
    const v = o.metadata?.resourceVersion ?? null;
    const had = this.versions.get(key);
    if (had !== undefined && had !== null && had === v) return;
    this.versions.set(key, v);
    this.on.update(o);
  }

  private event(phase: string, obj: T & { code?: number }): void {
    switch (phase) {
      case 'ERROR':
        // The watch ends after it; a 410 makes the next start list again.
        if (obj?.code === 410) this.rv = '';
        return;
      case 'ADDED':
      case 'MODIFIED':
        this.upsert(keyOf(obj), obj);
        break;
      case 'DELETED':
        if (this.versions.delete(keyOf(obj))) this.on.delete(obj);
        break;
      case 'BOOKMARK':
        break;
    }
    this.rv = obj?.metadata?.resourceVersion || '';
  }
}
