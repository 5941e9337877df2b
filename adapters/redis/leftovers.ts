import { jitteredDelays } from '../../src/backoff.js';
import { wasNotSent } from './bounded-call.js';

/**
 * Clean-ups that must happen even though the call that should have made them failed: the guarded
 * leave or release after a request whose outcome is unknown (timed out in flight, aborted, lost
 * reply). Each is keyed by the grant's ownerToken and retried with jittered backoff until one
 * attempt succeeds or the provider closes. The scripts are guarded by ownerToken, so a late or
 * repeated clean-up never touches another grant.
 */
export class Leftovers {
  readonly #pending = new Map<string, () => Promise<unknown>>();
  #delays = this.#freshDelays();
  #timer: NodeJS.Timeout | undefined;
  #closed = false;

  /** Owns `cleanUp` (idempotent, bounded by its own deadline): tries it now, and again until it succeeds. */
  add(id: string, cleanUp: () => Promise<unknown>): void {
    if (this.#closed) return;
    this.#pending.set(id, cleanUp);
    void this.#try(id, cleanUp);
  }

  /**
   * Drops the clean-up of id (a new request with that ownerToken takes over; one in flight runs).
   * Returns whether one was pending: a request that then sends nothing owes it again (add).
   */
  forget(id: string): boolean {
    return this.#pending.delete(id);
  }

  get size(): number {
    return this.#pending.size;
  }

  /** One more attempt at everything still pending (close() does it before the connections go). */
  async flush(): Promise<void> {
    await Promise.all([...this.#pending].map(([id, cleanUp]) => this.#try(id, cleanUp)));
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#pending.clear();
  }

  async #try(id: string, cleanUp: () => Promise<unknown>): Promise<void> {
    try {
      await cleanUp();
      if (this.#pending.get(id) === cleanUp) this.#pending.delete(id);
      if (this.#pending.size === 0) this.#delays = this.#freshDelays();
    } catch {
      this.#schedule();
    }
  }

  #schedule(): void {
    if (this.#closed || this.#timer !== undefined) return;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      for (const [id, cleanUp] of this.#pending) void this.#try(id, cleanUp);
    }, this.#delays.next().value);
    this.#timer.unref(); // pending clean-ups must not keep a process alive that is otherwise done
  }

  #freshDelays(): Generator<number, never> {
    return jitteredDelays({ initialMs: 100, maxMs: 2_000 });
  }
}

/**
 * What one request owes the leftovers if it fails. A retry of a request (same ownerToken)
 * supersedes the clean-up of the failed try before it until it fails: then the clean-up is owed
 * again, also when this try sent nothing. A clean-up already sent runs first (one connection keeps
 * the order).
 */
export class CleanUpDue {
  readonly #owed: boolean;
  /** Whether any attempt may have reached Redis (then there is something to clean up). */
  #sent = false;

  constructor(leftovers: Leftovers, ownerToken: string) {
    this.#owed = leftovers.forget(ownerToken);
  }

  /** One attempt: answered, it reached Redis; failed, it may have unless it was never sent. */
  attempt<T>(call: Promise<T>): Promise<T> {
    return call.then(
      (answer) => {
        this.#sent = true;
        return answer;
      },
      (error: unknown) => {
        this.#sent ||= !wasNotSent(error);
        throw error;
      },
    );
  }

  /** Whether the request's failure leaves a clean-up to the leftovers. */
  get due(): boolean {
    return this.#sent || this.#owed;
  }
}
