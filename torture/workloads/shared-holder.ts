import { type Lock as HolderObject, type LostLockError, TimeoutError } from 'fencekit/compat/redis-semaphore';
import { Belief } from './belief.js';
import { describeReason } from './grants.js';

/** One turn of a shared object, as its caller sees it: the token it was given and its belief. */
export interface HeldTurn {
  token: bigint;
  belief: Belief;
}

/**
 * A redis-semaphore object (Mutex, Semaphore, MultiSemaphore) shared by a worker's concurrent
 * calls, as an app shares one: each call acquire()s, works, release()s; the object lets one call in
 * at a time. Its user learns of a loss through the object's one onLockLost option, which speaks of
 * the turn granted now; a loss reported before the caller's acquire() returned counts for that turn.
 * A careful caller also reads `isAcquired` before it acts: the belief ends at whichever says lost first.
 */
export class SharedHolder {
  readonly object: HolderObject;
  /** onLockLost was called since the current turn began (reset when a turn is released). */
  #lostInTurn = false;
  /** Why the grant of the current turn ended, as onLockLost's error names it (for the history). */
  #lostBecause = '';
  #belief: Belief | undefined;

  constructor(
    make: (onLockLost: (error: LostLockError) => void) => HolderObject,
    /** The permits one turn takes (1 for a Mutex). */
    readonly permits: number,
  ) {
    this.object = make((error) => {
      this.#lostInTurn = true;
      this.#lostBecause = describeReason(error.cause);
      this.#belief?.end(`onLockLost (${this.#lostBecause})`);
    });
  }

  /** acquire() as an app calls it (`stop` cancels the wait); undefined when it timed out (TimeoutError). */
  async acquire(stop?: AbortSignal): Promise<HeldTurn | undefined> {
    try {
      await this.object.acquire(stop);
    } catch (error) {
      if (error instanceof TimeoutError) return undefined;
      throw error;
    }
    // The facade's fencing token reads undefined once the grant is lost; its loss names it then.
    const token =
      this.object.fencingToken ??
      (this.object.signal?.reason as { fencingToken?: bigint } | undefined)?.fencingToken ??
      -1n;
    const belief = new Belief({ reads: () => this.object.isAcquired });
    if (this.#lostInTurn) belief.end(`onLockLost before acquire() returned (${this.#lostBecause})`);
    this.#belief = belief;
    return { token, belief };
  }

  /** release() as an app calls it at the end of its turn (rejections are the app's to log). */
  async release(): Promise<void> {
    this.#belief?.end('released');
    this.#belief = undefined;
    this.#lostInTurn = false; // no onLockLost follows a release: the next turn starts clean
    await this.object.release().catch(() => undefined); // a lost grant's delete may fail: its lease ends it
  }
}
