import { BackendUnavailableError } from '../../src/errors.js';

/**
 * The provider's connection budget (maxConnections), counted here rather than in pg-pool's queue
 * so that waiting for a free connection honours the request's signal and deadline: pg-pool's own
 * queue can only time out with the same limit as a hung connect.
 */
export class Slots {
  #free: number;
  readonly #queue: Array<() => void> = [];

  constructor(readonly size: number) {
    this.#free = size;
  }

  /** Resolves with a release function (idempotent) once a slot is free. */
  take(timeoutMs: number, cancel: AbortSignal): Promise<() => void> {
    if (cancel.aborted) return Promise.reject(cancel.reason);
    if (this.#free > 0) {
      this.#free -= 1;
      return Promise.resolve(this.#releaser());
    }
    return new Promise((resolve, reject) => {
      const giveUp = (error: unknown) => {
        const index = this.#queue.indexOf(turn);
        if (index >= 0) this.#queue.splice(index, 1);
        clearTimeout(timer);
        cancel.removeEventListener('abort', onAbort);
        reject(error);
      };
      const onAbort = () => giveUp(cancel.reason);
      const turn = () => {
        clearTimeout(timer);
        cancel.removeEventListener('abort', onAbort);
        resolve(this.#releaser());
      };
      const timer = Number.isFinite(timeoutMs)
        ? setTimeout(
            () =>
              giveUp(
                new BackendUnavailableError(
                  `postgres: all ${this.size} connections (maxConnections) stayed in use for ${timeoutMs} ms`,
                ),
              ),
            timeoutMs,
          )
        : undefined;
      cancel.addEventListener('abort', onAbort, { once: true });
      this.#queue.push(turn);
    });
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#queue.shift();
      if (next) next();
      else this.#free += 1;
    };
  }
}
