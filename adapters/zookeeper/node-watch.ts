import type { ZkSession } from './client.js';
import type { WatchEvent } from './wire/watches.js';

/**
 * A watch on our own queue node, set by the exists() read the queue check makes anyway (no extra
 * round trip). A holder whose node is deleted behind its back (an operator's delete) learns it from
 * the one watch event, not from the next heartbeat. ZooKeeper fires a watch once: another event on
 * the node (its data changed) re-arms it with one more exists().
 */
export class OwnNodeWatch {
  readonly #session: ZkSession;
  readonly #path: string;
  #deleted = false;
  #onDeleted: (() => void) | undefined;

  constructor(session: ZkSession, path: string) {
    this.#session = session;
    this.#path = path;
  }

  /** The listener to pass to exists(path, { watch }). */
  readonly watcher = (event: WatchEvent): void => {
    if (event.type === 'deleted') {
      this.#deleted = true;
      this.#onDeleted?.();
      this.#onDeleted = undefined;
      return;
    }
    if (!this.#session.alive || event.type === 'sessionEnded') return;
    this.#session.client.exists(this.#path, { watch: this.watcher }).then(
      (stat) => {
        if (!stat) this.watcher({ type: 'deleted', path: this.#path });
      },
      () => undefined, // not answered: the heartbeat decides whether the session is still ours
    );
  };

  /** Calls onDeleted once when the node is gone (at once if it already is); returns the unsubscriber. */
  whenDeleted(onDeleted: () => void): () => void {
    if (this.#deleted) {
      onDeleted();
      return () => undefined;
    }
    this.#onDeleted = onDeleted;
    return () => {
      this.#onDeleted = undefined;
      // Nobody to tell any more (released, lost): the registration goes, so watches do not pile up.
      this.#session.client.unwatch(this.#path, this.watcher);
    };
  }
}
