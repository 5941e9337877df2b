import { BackendUnavailableError } from '../../src/errors.js';

/**
 * Awaits `work` no longer than `timeoutMs` (Infinity: no limit) and no longer than `signal` stays unaborted: rejects with
 * the signal's reason, or with BackendUnavailableError naming `what` when the time is up. The
 * listener and the timer are gone whatever settles first (a waiter must leave nothing behind).
 * `work` itself is not stopped: its caller owns whatever it may still do on the server.
 */
export function bounded<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  what: string,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const finish = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = () => {
      finish();
      reject(signal?.reason);
    };
    const timer = Number.isFinite(timeoutMs)
      ? setTimeout(() => {
          finish();
          reject(new BackendUnavailableError(`etcd: ${what}: no answer within ${timeoutMs} ms`));
        }, timeoutMs)
      : undefined;
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        finish();
        resolve(value);
      },
      (error: unknown) => {
        finish();
        reject(error);
      },
    );
  });
}

/**
 * The one signal of a request, as Go passes ctx: aborts when the caller cancels (reason kept: the
 * base tells timeout, abort and close apart) or when the session ends (BackendUnavailableError).
 * The session is followed through its whenLost callbacks (a Set, not AbortSignal listeners: many
 * requests at once would trip the listener-count warning). dispose() unsubscribes from both; call
 * it when the request is over.
 */
export function requestSignal(
  cancel: AbortSignal,
  whenSessionLost: (onLost: () => void) => () => void,
): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const onCancel = () => controller.abort(cancel.reason);
  if (cancel.aborted) {
    onCancel();
    return { signal: controller.signal, dispose: () => undefined };
  }
  const unsubscribe = whenSessionLost(() =>
    controller.abort(new BackendUnavailableError('etcd: the session was lost during the request')),
  );
  cancel.addEventListener('abort', onCancel, { once: true });
  const dispose = () => {
    cancel.removeEventListener('abort', onCancel);
    unsubscribe();
  };
  return { signal: controller.signal, dispose };
}
