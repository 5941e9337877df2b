import type { Cluster, Redis } from 'ioredis';
import { BackendUnavailableError } from '../../src/errors.js';

/**
 * Whether one ioredis client is known to be unreachable: its latest connection attempt failed
 * (nothing listening, host unreachable) and no connection is ready since. A call then fails at
 * once instead of waiting in ioredis's offline queue for a server that is not there.
 */
export class Reachability {
  #failure: Error | undefined;

  constructor(
    readonly redis: Redis | Cluster,
    readonly label: string,
  ) {
    redis.on('error', (error: Error) => {
      // An error on a live connection (a reset) is not yet unreachable: the reconnect may succeed.
      if (redis.status !== 'ready') this.#failure = error;
    });
    redis.on('ready', () => {
      this.#failure = undefined;
    });
  }

  /**
   * Calls `then` once, as soon as a connection is ready (at once if one is). A backend that
   * accepted a connection and answered its ready check (credentials included) was reached: an
   * answer lost after that is an outage, not a wrong address or password. Without the ready check,
   * "ready" comes before the server judged the credentials: never called then (the first answered
   * call counts instead).
   */
  onceConnected(then: () => void): void {
    if (!readyCheckOn(this.redis)) return;
    if (this.redis.status === 'ready') then();
    else this.redis.once('ready', then);
  }

  /** Whether a connection is ready (not while connecting, reconnecting or never connected). */
  get connected(): boolean {
    return this.redis.status === 'ready';
  }

  /** False while the last connection attempt failed and none is ready. */
  get reachable(): boolean {
    return !(this.#failure && this.redis.status !== 'ready');
  }

  /** Throws BackendUnavailableError when the last connection attempt failed (nothing is sent then). */
  check(what: string): void {
    const failure = this.#failure;
    if (failure && !this.reachable) {
      const error = new BackendUnavailableError(
        `${this.label}: ${what}: cannot connect: ${failure.message}`,
        {
          cause: failure,
        },
      );
      notSent.add(error);
      throw error;
    }
  }
}

/** Whether ioredis checks a connection (AUTH answered, INFO loading: 0) before calling it ready. */
function readyCheckOn(redis: Redis | Cluster): boolean {
  const options = redis.options as
    | { enableReadyCheck?: boolean; redisOptions?: { enableReadyCheck?: boolean } }
    | undefined;
  // A client that does not say is not trusted: its first answered call counts instead.
  if (!options) return false;
  return options.enableReadyCheck !== false && options.redisOptions?.enableReadyCheck !== false;
}

const notSent = new WeakSet<object>();

/** Whether a call failed before anything was sent (so there is nothing to clean up after it). */
export function wasNotSent(error: unknown): boolean {
  return typeof error === 'object' && error !== null && notSent.has(error);
}

/**
 * Runs one backend call with a deadline and a cancellation path: rejects with
 * BackendUnavailableError when `run` fails or has not answered after timeoutMs, and with
 * cancel.reason as soon as `cancel` aborts. The call itself may still complete later (its outcome
 * is then unknown): callers that changed state clean up after any rejection.
 */
export function boundedCall<T>(
  label: string,
  what: string,
  run: () => Promise<T>,
  timeoutMs: number,
  cancel?: AbortSignal,
): Promise<T> {
  if (cancel?.aborted) return Promise.reject(cancel.reason);
  return new Promise<T>((resolve, reject) => {
    const finish = (settle: () => void) => {
      clearTimeout(timer);
      cancel?.removeEventListener('abort', onAbort);
      settle();
    };
    const onAbort = () => finish(() => reject(cancel?.reason));
    const timer = setTimeout(
      () =>
        finish(() =>
          reject(new BackendUnavailableError(`${label}: ${what}: no answer within ${timeoutMs} ms`)),
        ),
      timeoutMs,
    );
    cancel?.addEventListener('abort', onAbort, { once: true });
    let running: Promise<T>;
    try {
      running = run();
    } catch (error) {
      running = Promise.reject(error);
    }
    running.then(
      (value) => finish(() => resolve(value)),
      (error: unknown) =>
        finish(() =>
          reject(
            error instanceof BackendUnavailableError
              ? error
              : new BackendUnavailableError(`${label}: ${what} failed: ${(error as Error).message}`, {
                  cause: error,
                }),
          ),
        ),
    );
  });
}
