import { InvalidArgumentError } from './errors.js';

/** Node clamps a setTimeout delay above this to 1 ms (with a warning): longer waits are chained. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * setTimeout for any delay up to Number.MAX_SAFE_INTEGER ms: a delay Node would clamp to 1 ms (a
 * weekly cron tick, a month-long waitMs) is waited in steps. Infinity never fires; NaN is refused. Returns the
 * function that cancels it. `unref`: the timer alone does not keep the process alive.
 */
export function longTimeout(fn: () => void, ms: number, options: { unref?: boolean } = {}): () => void {
  let timer: NodeJS.Timeout | undefined;
  let cancelled = false;
  // setTimeout runs a NaN delay at once: a computed delay gone wrong must not fire a deadline early.
  if (Number.isNaN(ms))
    throw new InvalidArgumentError('timer delay', 'must be a number of milliseconds, not NaN');
  if (ms === Number.POSITIVE_INFINITY) return () => undefined;
  const due = performance.now() + Math.max(0, ms);
  const arm = (): void => {
    const remaining = due - performance.now();
    if (remaining > MAX_TIMER_MS) {
      timer = setTimeout(arm, MAX_TIMER_MS);
    } else {
      timer = setTimeout(
        () => {
          if (!cancelled) fn();
        },
        Math.max(0, remaining),
      );
    }
    if (options.unref) timer.unref();
  };
  arm();
  return () => {
    cancelled = true;
    clearTimeout(timer);
  };
}

/** Waits ms; rejects with the signal's reason as soon as it aborts (at once if it has). */
export function abortableDelay(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
