import { AbortError, BackendUnavailableError, FencekitError } from '../errors.js';

/** A call not yet settled, linked into the list of such calls in start order. */
class PendingCall {
  previous: PendingCall | undefined;
  next: PendingCall | undefined;
  /** Listens to a caller's own signal; undefined for the store's signals. */
  onAbort: (() => void) | undefined;

  constructor(
    readonly what: string,
    /** The signal the call was made under. */
    readonly signal: AbortSignal,
    readonly deadline: number,
    readonly reject: (error: unknown) => void,
  ) {}
}

/**
 * callWithin (src/deadline.ts) for the many calls of one store, which all share one timeout, in the
 * store's own words (AbortError; "the store did not answer"). Not callWithin itself: instead of a timer and an
 * abort listener per call (a large part of a call's client work here), one timer armed at the
 * oldest pending deadline (calls are kept in start order, so the oldest expires first), and the
 * store's own signals (those of its close) handled once by failUnder() and failAll(). Only a
 * caller's own signal is listened to per call.
 */
export class CallDeadlines {
  /**
   * Pending calls, oldest first, as a list linked through the calls themselves: a Set that empties
   * after each call reallocates its table every time.
   */
  #oldest: PendingCall | undefined;
  #newest: PendingCall | undefined;
  #timer: NodeJS.Timeout | undefined;
  readonly #own: readonly AbortSignal[];
  readonly #ms: number;

  constructor(
    ms: number,
    /** The store's own signals: its close() calls failUnder() or failAll(), so calls need not listen. */
    ...own: AbortSignal[]
  ) {
    this.#ms = ms;
    this.#own = own;
  }

  run<T>(what: string, signal: AbortSignal, call: () => Promise<T>): Promise<T> {
    if (signal.aborted) return Promise.reject(new AbortError(what, signal.reason));
    return new Promise<T>((resolve, reject) => {
      const entry = new PendingCall(what, signal, performance.now() + this.#ms, reject);
      if (!this.#own.includes(signal)) {
        entry.onAbort = () => this.#fail(entry, new AbortError(what, signal.reason));
        signal.addEventListener('abort', entry.onAbort, { once: true });
      }
      this.#add(entry);
      this.#timer ??= this.#arm();
      let attempt: Promise<T>;
      try {
        attempt = call();
      } catch (error) {
        attempt = Promise.reject(error);
      }
      // A call given up on (deadline, abort) may still end later: its outcome is then ignored.
      attempt.then(
        (value) => {
          if (this.#settle(entry)) resolve(value);
        },
        (error: unknown) =>
          this.#fail(
            entry,
            error instanceof FencekitError
              ? error
              : new BackendUnavailableError(`${what}: ${(error as Error)?.message ?? String(error)}`, {
                  cause: error,
                }),
          ),
      );
    });
  }

  /** Fails every pending call with AbortError (the store is closed). */
  failAll(reason: unknown): void {
    for (let entry = this.#oldest; entry; ) {
      const next = entry.next;
      this.#fail(entry, new AbortError(entry.what, reason));
      entry = next;
    }
  }

  /** Fails, with AbortError, the pending calls made under `signal`, one of the store's own. */
  failUnder(signal: AbortSignal, reason: unknown): void {
    for (let entry = this.#oldest; entry; ) {
      const next = entry.next;
      if (entry.signal === signal) this.#fail(entry, new AbortError(entry.what, reason));
      entry = next;
    }
  }

  #add(entry: PendingCall): void {
    entry.previous = this.#newest;
    if (this.#newest) this.#newest.next = entry;
    else this.#oldest = entry;
    this.#newest = entry;
  }

  /** Takes a pending call off the list; false if it was settled already. */
  #settle(entry: PendingCall): boolean {
    if (entry.previous === undefined && this.#oldest !== entry) return false;
    if (entry.previous) entry.previous.next = entry.next;
    else this.#oldest = entry.next;
    if (entry.next) entry.next.previous = entry.previous;
    else this.#newest = entry.previous;
    entry.previous = entry.next = undefined;
    if (entry.onAbort) entry.signal.removeEventListener('abort', entry.onAbort);
    return true;
  }

  #fail(entry: PendingCall, error: Error): void {
    if (this.#settle(entry)) entry.reject(error);
  }

  #arm(): NodeJS.Timeout | undefined {
    const oldest = this.#oldest;
    if (!oldest) return undefined;
    const timer = setTimeout(() => this.#expire(), Math.max(0, oldest.deadline - performance.now()));
    // Unreferenced: it may outlive the calls it was armed for; a pending call holds its own socket.
    timer.unref();
    return timer;
  }

  #expire(): void {
    this.#timer = undefined;
    const now = performance.now();
    while (this.#oldest && this.#oldest.deadline <= now) {
      const entry = this.#oldest;
      this.#fail(
        entry,
        new BackendUnavailableError(`${entry.what}: the store did not answer within ${this.#ms} ms`),
      );
    }
    this.#timer = this.#arm();
  }
}
