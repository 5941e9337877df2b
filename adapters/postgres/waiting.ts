import { jitteredDelays, sleepUnlessWoken } from '../../src/backoff.js';

/** The two ways a waiting request can look for its grant: one resolves with it, one may find none. */
export interface WaitingRequest<T> {
  /**
   * Blocks inside PostgreSQL on a connection of its own until granted (or fails, or is cancelled);
   * null, which it should not answer, counts as a try that found nothing.
   */
  block(): Promise<T | null>;
  /** One try on a briefly checked-out connection: the grant, or null when it is not free yet. */
  tryOnce(): Promise<T | null>;
}

/**
 * The provider's connections for waiting (`waitingConnections`): at most `size` of its requests
 * block inside PostgreSQL at once (in pg_advisory_lock, or in a semaphore's queue), so that a
 * backlog spread over many names cannot take the connections that holders and tries need. A
 * waiting request beyond that holds no connection while it waits: it tries, gives the connection
 * back and sleeps, a few tens of ms at first and growing to 500 ms, with jitter. It tries again
 * at once when a waiting connection comes free (the oldest sleeper is woken, and takes it) or when
 * this process frees the name it waits for. Nothing wakes it when another process frees the name: its next try finds
 * it, so a polling request can be overtaken by one that blocks in the server's queue.
 *
 * Names here are the provider's own (a lock's key, a semaphore's fence name "/semaphore/n"), so a
 * lock and a semaphore that share a name never wake each other.
 */
export class WaitingConnections {
  #free: number;
  /** Sleeping requests in the order they went to sleep. */
  readonly #sleepers: Array<{ name: string; wake: () => void }> = [];
  /** Per name, how many requests poll for it (the server does not see them wait). */
  readonly #polling = new Map<string, number>();

  constructor(readonly size: number) {
    this.#free = size;
  }

  /** How many requests of this provider poll for `name` now. */
  polling(name: string): number {
    return this.#polling.get(name) ?? 0;
  }

  /**
   * The grant of `name`: blocking on a waiting connection whenever one is free, polling otherwise.
   * Errors of either way end the wait (the caller retries an outage); cancel ends the sleeps.
   */
  async waitFor<T>(name: string, request: WaitingRequest<T>, cancel: AbortSignal): Promise<T> {
    const delays = jitteredDelays({ initialMs: 50, maxMs: 500 });
    let stopCounting: (() => void) | undefined;
    try {
      for (;;) {
        const turn = this.#tryTake();
        let granted: T | null;
        if (turn) {
          stopCounting?.();
          stopCounting = undefined;
          try {
            granted = await request.block();
          } finally {
            turn(); // granted or not, this connection waits no more
          }
        } else {
          stopCounting ??= this.#countPolling(name);
          granted = await request.tryOnce();
        }
        if (granted !== null) return granted;
        await this.#sleep(name, delays.next().value, cancel);
      }
    } finally {
      stopCounting?.();
    }
  }

  /** This process freed `name` (a grant released or lost): its sleeping requests try at once. */
  freed(name: string): void {
    for (const sleeper of this.#sleepers.filter((s) => s.name === name)) sleeper.wake();
  }

  /** A waiting connection's turn (its release is idempotent), or null when all are in use. */
  #tryTake(): (() => void) | null {
    if (this.#free === 0) return null;
    this.#free -= 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#free += 1;
      this.#sleepers[0]?.wake();
    };
  }

  #countPolling(name: string): () => void {
    this.#polling.set(name, this.polling(name) + 1);
    let stopped = false;
    return () => {
      if (stopped) return;
      stopped = true;
      const left = this.polling(name) - 1;
      if (left > 0) this.#polling.set(name, left);
      else this.#polling.delete(name);
    };
  }

  /** Sleeps ms, or less when woken (see above); rejects with cancel's reason when it aborts. */
  async #sleep(name: string, ms: number, cancel: AbortSignal): Promise<void> {
    const sleep = sleepUnlessWoken(ms, cancel);
    const sleeper = {
      name,
      // Leaves the list at once, so that the next wake-up goes to the next sleeper.
      wake: () => {
        this.#leave(sleeper);
        sleep.wake();
      },
    };
    this.#sleepers.push(sleeper);
    try {
      await sleep.done;
    } finally {
      this.#leave(sleeper);
    }
  }

  #leave(sleeper: { name: string; wake: () => void }): void {
    const index = this.#sleepers.indexOf(sleeper);
    if (index >= 0) this.#sleepers.splice(index, 1);
  }
}
