import zookeeper from 'node-zookeeper-client';
import type { ZkSession } from './client.js';

const { Event } = zookeeper;

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

  /** The watcher to pass to exists(path, watcher, cb). */
  readonly watcher = (event: zookeeper.Event): void => {
    if (event.getType() === Event.NODE_DELETED) {
      this.#deleted = true;
      this.#onDeleted?.();
      this.#onDeleted = undefined;
      return;
    }
    if (!this.#session.alive) return;
    this.#session.client.exists(this.#path, this.watcher, (error, stat) => {
      if (!error && !stat) this.watcher({ getType: () => Event.NODE_DELETED } as zookeeper.Event);
    });
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
    };
  }
}
