import { now } from '../history.js';

export interface BeliefSources {
  /** A lease the user counts on (a redlock Lock's expiration), as a monotonic time; none: no end. */
  until?: number;
  /** Signals whose abort tells the user the grant is lost (using()'s signal, a Lock's signal). */
  lost?: readonly AbortSignal[];
  /** What the user reads just before acting (redlock: `lock.expiration > Date.now()`). */
  reads?: () => boolean;
}

/**
 * What a facade's user believes of a grant: held from the moment it was handed out until the
 * first of its release, a loss notification (a signal, onLockLost) and the end of the lease the
 * user counts on. `signal` aborts then (the grant recorder logs that end); `live()` is the check
 * a careful user makes just before each write, and it reads the clock rather than waiting for a
 * timer, as `Date.now() < lock.expiration` does.
 */
export class Belief {
  readonly #controller = new AbortController();
  #until: number;
  readonly #reads: (() => boolean) | undefined;
  #timer: NodeJS.Timeout | undefined;
  readonly #unlisten: Array<() => void> = [];

  constructor({ until = Number.POSITIVE_INFINITY, lost = [], reads }: BeliefSources) {
    this.#until = until;
    this.#reads = reads;
    for (const signal of lost) {
      if (signal.aborted) {
        this.end('lost');
        return;
      }
      const onAbort = () => this.end('lost');
      signal.addEventListener('abort', onAbort, { once: true });
      this.#unlisten.push(() => signal.removeEventListener('abort', onAbort));
    }
    this.#schedule();
  }

  /** The lease the user counts on was extended (redlock's extend()): the belief lasts until `until`. */
  moveUntil(until: number): void {
    if (!this.live()) return;
    this.#until = until;
    this.#schedule();
  }

  /** Ends the belief when the lease passes, even if nobody checks. */
  #schedule(): void {
    clearTimeout(this.#timer);
    if (!this.live() || !Number.isFinite(this.#until)) return;
    this.#timer = setTimeout(() => this.live(), Math.max(0, this.#until - now()));
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Whether the user still believes the grant held, checked now. */
  live(): boolean {
    if (!this.#controller.signal.aborted) {
      if (now() >= this.#until) this.end('expiration passed');
      else if (this.#reads && !this.#reads()) this.end('the lock reads as expired');
    }
    return !this.#controller.signal.aborted;
  }

  /** The belief ends (release, a loss notification, the lease's end); idempotent. */
  end(reason: string): void {
    clearTimeout(this.#timer);
    for (const unlisten of this.#unlisten.splice(0)) unlisten();
    if (!this.#controller.signal.aborted) this.#controller.abort(reason);
  }
}
