import { AbortError, BackendUnavailableError, FencekitError } from '../errors.js';

interface PendingCall {
  what: string;
  /** The signal the call was made under. */
  signal: AbortSignal;
  deadline: number;
  fail(error: Error): void;
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
  readonly #pending = new Set<PendingCall>();
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
      let onAbort: (() => void) | undefined;
      const entry: PendingCall = {
        what,
        signal,
        deadline: performance.now() + this.#ms,
        fail: (error) => {
          if (!this.#pending.delete(entry)) return; // settled already
          if (onAbort) signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      };
      if (!this.#own.includes(signal)) {
        onAbort = () => entry.fail(new AbortError(what, signal.reason));
        signal.addEventListener('abort', onAbort, { once: true });
      }
      this.#pending.add(entry);
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
          if (!this.#pending.delete(entry)) return;
          if (onAbort) signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (error: unknown) =>
          entry.fail(
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
    for (const entry of this.#pending) entry.fail(new AbortError(entry.what, reason));
  }

  /** Fails, with AbortError, the pending calls made under `signal`, one of the store's own. */
  failUnder(signal: AbortSignal, reason: unknown): void {
    for (const entry of this.#pending)
      if (entry.signal === signal) entry.fail(new AbortError(entry.what, reason));
  }

  #arm(): NodeJS.Timeout | undefined {
    const oldest = this.#pending.values().next().value;
    if (!oldest) return undefined;
    const timer = setTimeout(() => this.#expire(), Math.max(0, oldest.deadline - performance.now()));
    // Unreferenced: it may outlive the calls it was armed for; a pending call holds its own socket.
    timer.unref();
    return timer;
  }

  #expire(): void {
    this.#timer = undefined;
    const now = performance.now();
    for (const entry of this.#pending) {
      if (entry.deadline > now) break;
      entry.fail(
        new BackendUnavailableError(`${entry.what}: the store did not answer within ${this.#ms} ms`),
      );
    }
    this.#timer = this.#arm();
  }
}
