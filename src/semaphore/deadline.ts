import { BackendUnavailableError } from '../errors.js';
import { linkSignals } from '../signals.js';

const DEADLINE = Symbol('deadline');

/**
 * Runs one backend call with its own signal (the request's `cancel` plus a `ms` deadline) and settles
 * as soon as that signal aborts, whether or not the call has: a past deadline is an unreachable
 * backend (BackendUnavailableError), a cancel rejects with its reason. A late outcome is dropped.
 */
export async function withDeadline<T>(
  call: (signal: AbortSignal) => Promise<T>,
  ms: number,
  cancel: AbortSignal,
  what: string,
): Promise<T> {
  const linked = linkSignals([cancel]);
  const timer = setTimeout(() => linked.abort(DEADLINE), ms);
  try {
    return await new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        const reason = linked.signal.reason;
        reject(
          reason === DEADLINE ? new BackendUnavailableError(`${what}: no answer within ${ms} ms`) : reason,
        );
      };
      if (linked.signal.aborted) return onAbort();
      linked.signal.addEventListener('abort', onAbort, { once: true });
      let running: Promise<T>;
      try {
        running = call(linked.signal);
      } catch (error) {
        running = Promise.reject(error);
      }
      running.then(
        (value) => {
          linked.signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (error: unknown) => {
          linked.signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      );
    });
  } finally {
    clearTimeout(timer);
    linked.dispose();
  }
}
