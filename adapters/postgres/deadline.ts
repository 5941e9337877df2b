import { BackendUnavailableError } from '../../src/errors.js';

/**
 * Settles like `work`, unless `signal` aborts first (rejects with its reason) or `ms` pass first
 * (rejects with BackendUnavailableError naming `what`). Whoever gives up on `work` owns its
 * clean-up; its late rejection is swallowed here so it can never surface as unhandled.
 */
export function within<T>(work: Promise<T>, ms: number, what: string, signal?: AbortSignal): Promise<T> {
  work.catch(() => undefined);
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const settle = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = () => {
      settle();
      reject(signal?.reason);
    };
    const timer = Number.isFinite(ms)
      ? setTimeout(() => {
          settle();
          reject(new BackendUnavailableError(`postgres: ${what}: no answer within ${ms} ms`));
        }, ms)
      : undefined;
    signal?.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        settle();
        resolve(value);
      },
      (error: unknown) => {
        settle();
        reject(error);
      },
    );
  });
}
