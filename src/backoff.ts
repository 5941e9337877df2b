import { decorrelatedJitterGenerator, ExponentialBackoff, type IBackoff } from 'cockatiel';
import { longTimeout } from './timers.js';

export interface JitterOptions {
  /** First delay around this many ms. */
  initialMs: number;
  /** Never longer than this. */
  maxMs: number;
}

/**
 * Endless delays with decorrelated jitter (cockatiel's generator): retries of many clients spread
 * out instead of arriving together.
 */
export function* jitteredDelays(options: JitterOptions): Generator<number, never> {
  let backoff: IBackoff<unknown> = new ExponentialBackoff({
    generator: decorrelatedJitterGenerator,
    initialDelay: options.initialMs,
    maxDelay: options.maxMs,
  }).next();
  for (;;) {
    yield backoff.duration;
    backoff = backoff.next(undefined);
  }
}

/**
 * Sleeps ms, or less: resolves 'woken' when wake() is called and rejects with signal.reason when
 * signal aborts (cockatiel's own sleeps ignore abort signals).
 */
export function sleepUnlessWoken(
  ms: number,
  signal: AbortSignal | undefined,
): { done: Promise<'slept' | 'woken'>; wake: () => void } {
  let wake: () => void = () => undefined;
  const done = new Promise<'slept' | 'woken'>((resolve, reject) => {
    const finish = (outcome: 'slept' | 'woken' | { aborted: unknown }) => {
      cancelTimer();
      signal?.removeEventListener('abort', onAbort);
      if (typeof outcome === 'object') reject(outcome.aborted);
      else resolve(outcome);
    };
    const onAbort = () => finish({ aborted: signal?.reason });
    // Chained: a delay past 2^31-1 ms (a monthly cron tick) would otherwise fire after 1 ms.
    const cancelTimer = longTimeout(() => finish('slept'), ms);
    wake = () => finish('woken');
    if (signal?.aborted) onAbort();
    else signal?.addEventListener('abort', onAbort, { once: true });
  });
  return { done, wake };
}
