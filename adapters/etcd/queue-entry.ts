import { CANCEL_GRACE_MS } from '../../src/cancel-grace.js';
import { ProviderClosedError } from '../../src/errors.js';
import { bounded } from './bounded.js';
import type { DeletionSubscription } from './deletion-watch.js';
import type { EnqueueAttempt } from './enqueue-txn.js';
import type { Queued } from './mutex.js';
import type { EtcdSession } from './session.js';

/** What a queue entry is made of, once its enqueue Txn was sent. */
export interface QueueEntryParts {
  session: EtcdSession;
  /** Our queue key: the name's prefix and the session's lease. */
  key: Buffer;
  /** The deletion watch's subscription to our key, made before the enqueue Txn was sent. */
  deletion: DeletionSubscription;
  /** The enqueue Txn, whose outcome says whether (and at which revision) it put our key. */
  attempt: EnqueueAttempt;
  /** Ends the name's local turn (idempotent). */
  leave: () => void;
  callTimeoutMs: number;
}

/**
 * One lock request's key in a name's queue, from its local turn to the end of its grant: the one
 * owner of the request's clean-up. `abandon()` takes the key back whatever failed (timed out,
 * aborted, cut off, refused); the lock a grant makes calls `remove()` on release and `lost()` on a
 * loss. The name's local turn (`leave`) ends only once etcd confirmed the key's deletion or the
 * session ended: the next local acquire would otherwise adopt the key still there.
 */
export class QueueEntry {
  /** Our key and its create revision, once the enqueue Txn answered. */
  #queued: Queued | undefined;

  constructor(readonly parts: QueueEntryParts) {}

  /** The enqueue Txn answered: this is our key. */
  enqueued(queued: Queued): void {
    this.#queued = queued;
  }

  /**
   * Takes our key back after any failure. Before the enqueue answered, the Txn may still put it: the
   * session waits for its outcome and deletes what it made.
   */
  async abandon(signal: AbortSignal): Promise<void> {
    const { session, key, deletion, attempt } = this.parts;
    deletion.stop();
    const queued = this.#queued;
    const removal = queued
      ? session.remove(queued.key, queued.revision)
      : session.removeEnqueued(key, attempt);
    await this.#handOff(removal, signal);
  }

  /** A granted key's release: whether etcd confirmed it in time (else the session goes on trying). */
  remove(): Promise<boolean> {
    const { key, revision } = this.#granted();
    return this.#handOff(this.parts.session.remove(key, revision));
  }

  /** The key went with the grant's loss (its session ended, or someone deleted it). */
  lost(): void {
    this.parts.leave();
  }

  #granted(): Queued {
    if (!this.#queued) throw new Error('etcd: a queue entry granted before its enqueue answered');
    return this.#queued;
  }

  /**
   * Waits for a removal the session owns (it retries until confirmed or the session ends); the
   * name's local turn ends when it settles. A request still running waits up to callTimeoutMs, so
   * on time the entry is gone before the caller hears back; a cancelled one only CANCEL_GRACE_MS,
   * since its caller must be answered at once; a closing provider not at all (the lease's revoke
   * deletes the key with the rest). Late, the session goes on without us.
   */
  async #handOff(removal: Promise<boolean>, signal?: AbortSignal): Promise<boolean> {
    let settled = false;
    const removed = removal.then(() => {
      settled = true;
      this.parts.leave();
    });
    const closing = signal?.reason instanceof ProviderClosedError;
    const waitMs = closing ? 0 : signal?.aborted ? CANCEL_GRACE_MS : this.parts.callTimeoutMs;
    await bounded(removed, undefined, waitMs, 'clean-up').catch(() => undefined);
    // Not confirmed while the session lives: the key is still there (its session keeps trying).
    // A session that ended took the key with its lease.
    return settled || !this.parts.session.alive;
  }
}
