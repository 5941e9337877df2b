import type { ZkSession } from './client.js';
import type { WatchEvent } from './wire/watches.js';

const ARM_RETRY_MS = 100;

/**
 * A watch on our own queue node, set by one exists(): a holder whose node is deleted behind its
 * back (an operator's delete) learns it from the one watch event, not from the next heartbeat.
 * ZooKeeper fires a watch once: another event on the node (its data changed) re-arms it with one
 * more exists(). A waiter sets it while it waits; a lock granted at once sets it just after the
 * grant (armSoon). If that exists finds the node gone, the holder is told at once.
 */
export class OwnNodeWatch {
  readonly #session: ZkSession;
  readonly #path: string;
  #gone = false;
  /** Nobody listens any more (released, lost): no more retries. */
  #stopped = false;
  #armed = false;
  /** The server answered that the node exists, and its watch has not fired since. */
  #watching = false;
  /**
   * Events heard so far. An answer is handled microtasks after an event that may follow it in the
   * same read: one that comes back after an event it was sent before says nothing of now.
   */
  #heard = 0;
  #soon: NodeJS.Immediate | undefined;
  #onDeleted: (() => void) | undefined;

  constructor(session: ZkSession, path: string) {
    this.#session = session;
    this.#path = path;
  }

  /**
   * Sets the watch (once). Not answered (a lost connection, a timeout): tried again while the
   * session lives and someone listens; no watch event could arrive over a broken connection anyway,
   * and the retry's answer tells whether the node went meanwhile.
   */
  arm(): void {
    clearImmediate(this.#soon);
    if (this.#armed) return;
    this.#armed = true;
    this.#send();
  }

  #send(): void {
    if (this.#gone || this.#stopped || !this.#session.alive) return;
    const heard = this.#heard;
    this.#session.client.exists(this.#path, { watch: this.watcher }).then(
      (stat) => {
        if (stat) {
          this.#watching = heard === this.#heard;
          return;
        }
        this.#session.client.unwatch(this.#path, this.watcher); // it would wait for a creation
        this.#end();
      },
      () => setTimeout(() => this.#send(), ARM_RETRY_MS).unref(),
    );
  }

  /**
   * Arms the watch of a lock granted at once, unless released first: in the turn of the event loop
   * after the grant, so a lock taken and released without waiting for anything in between (a
   * short critical section) costs no call for it, as with Curator; any I/O of the holder lets it go
   * out first. A delete before it is found by its answer.
   */
  armSoon(): void {
    if (this.#armed || this.#soon) return;
    this.#soon = setImmediate(() => this.arm());
  }

  #end(): void {
    if (this.#gone) return;
    this.#gone = true;
    this.#onDeleted?.();
    this.#onDeleted = undefined;
  }

  /** The listener to pass to exists(path, { watch }). */
  readonly watcher = (event: WatchEvent): void => {
    this.#heard += 1;
    this.#watching = false;
    if (event.type === 'deleted') {
      this.#end();
      return;
    }
    if (!this.#session.alive || event.type === 'sessionEnded') return;
    const heard = this.#heard;
    this.#session.client.exists(this.#path, { watch: this.watcher }).then(
      (stat) => {
        if (stat) {
          this.#watching = heard === this.#heard;
          return;
        }
        this.#session.client.unwatch(this.#path, this.watcher); // it would wait for a creation
        this.watcher({ type: 'deleted', path: this.#path });
      },
      () => undefined, // not answered: the heartbeat decides whether the session is still ours
    );
  };

  /**
   * The server said the node exists and the watch has not fired since: on one connection, a
   * deletion of ours before a later event would have come first (a waiter granted on the node
   * ahead's deletion, without a listing, relies on it; see mutex.ts).
   */
  get watching(): boolean {
    return this.#watching && !this.#gone;
  }

  /** Calls onDeleted once when the node is gone (at once if it already is); returns the unsubscriber. */
  whenDeleted(onDeleted: () => void): () => void {
    if (this.#gone) {
      onDeleted();
      return () => undefined;
    }
    this.#onDeleted = onDeleted;
    return () => {
      this.#onDeleted = undefined;
      this.#stopped = true;
      clearImmediate(this.#soon);
      // Nobody to tell any more (released, lost): the registration goes, so watches do not pile up.
      this.#session.client.unwatch(this.#path, this.watcher);
    };
  }
}
