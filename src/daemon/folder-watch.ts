// A folder's change events that outlive the folder: inotify watches an inode, so a watch on
// DIR dies with it (`rm -rf DIR; mkdir DIR` is a new folder no event of the old watch names).
// The parent is watched too, for DIR's own name: when DIR appears, disappears or is replaced
// (deleted and made again, renamed over, a symlink swapped), the watch moves to the folder now
// at that path, and a change is reported, since its contents are new.
import { statSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';

export interface FolderWatchOptions {
  /** Whether an event for this name in the folder can change what is read from it. */
  relevant: (name: string) => boolean;
  /** A relevant name changed, an event named none, or the folder itself changed. */
  onChange: () => void;
  /** A watch failed or could not be set up (it is tried again at the next parent event for
   *  the folder, or recheck()). */
  onError: (e: Error) => void;
}

export class FolderWatch {
  readonly dir: string;
  private readonly name: string;
  private parent: FSWatcher | undefined;
  private folder: FSWatcher | undefined;
  private closed = false;

  constructor(
    dir: string,
    private readonly opts: FolderWatchOptions,
  ) {
    this.dir = resolve(dir);
    this.name = basename(this.dir);
  }

  /** Watches the parent and the folder, if it is there (a watch that cannot be set up goes to
   *  onError: a missing folder is for its reader to report). */
  start(): void {
    this.recheck();
  }

  /** Sets up a watch that failed or could not be set up, and watches what is at the folder's
   *  path now (a change its parent's events did not report: the folder behind a symlink
   *  replaced). */
  recheck(): void {
    if (this.closed) return;
    if (!this.parent) this.watchParent();
    this.rewatch();
  }

  close(): void {
    this.closed = true;
    this.parent?.close();
    this.folder?.close();
    this.parent = this.folder = undefined;
  }

  private watchParent(): void {
    this.parent = this.watch(
      dirname(this.dir),
      (name) => {
        if (name === null || name === this.name) this.folderChanged();
      },
      (w) => {
        if (this.parent === w) this.parent = undefined;
      },
    );
  }

  private folderChanged(): void {
    if (this.closed) return;
    this.rewatch();
    this.opts.onChange();
  }

  /** A new watch of what is at the folder's path now. Not kept when the inode is the same: a
   *  folder deleted and made again often gets its old inode number back, and its watch would be
   *  the dead one. Events in between are covered by the load that follows each rewatch. */
  private rewatch(): void {
    this.folder?.close();
    this.folder = undefined;
    try {
      if (!statSync(this.dir).isDirectory()) return;
    } catch {
      return;
    }
    this.folder = this.watch(
      this.dir,
      (name) => {
        if (name === null || this.opts.relevant(name)) this.opts.onChange();
      },
      (w) => {
        if (this.folder === w) this.folder = undefined;
      },
    );
  }

  /** fs.watch(path), or undefined when it cannot be set up; a watch that fails later is closed
   *  and `forget` drops it. Either failure goes to onError. */
  private watch(path: string, onEvent: (name: string | null) => void, forget: (w: FSWatcher) => void): FSWatcher | undefined {
    try {
      const w = watch(path, (_, name) => {
        if (!this.closed) onEvent(name);
      });
      w.on('error', (e) => {
        w.close();
        forget(w);
        this.opts.onError(e);
      });
      return w;
    } catch (e) {
      this.opts.onError(e as Error);
      return undefined;
    }
  }
}
