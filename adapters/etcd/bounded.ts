import { callWithin } from '../../src/deadline.js';
import { BackendUnavailableError } from '../../src/errors.js';

/**
 * callWithin for etcd's calls, in the argument order its call sites use: `work` (a call already
 * sent) no longer than `timeoutMs` (Infinity: no limit) and no longer than `signal` stays
 * unaborted. `work` itself is not stopped: its caller owns whatever it may still do on the server.
 */
export function bounded<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  timeoutMs: number,
  what: string,
): Promise<T> {
  return callWithin(work, { timeoutMs, signal, what, backend: 'etcd' });
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
