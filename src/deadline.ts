import { BackendUnavailableError } from './errors.js';
import { type LinkedSignal, linkSignals } from './signals.js';
import { longTimeout } from './timers.js';

/**
 * The one deadline helper: every backend call races its request's signal and its call timeout here.
 * It settles like `call`, unless `limits.signal` aborts first (rejects with its reason) or
 * `limits.timeoutMs` pass first (rejects with BackendUnavailableError
 * `${backend}: ${what}: no answer within ${timeoutMs} ms`).
 *
 * `call` is either work already started (a promise) or a function that starts it, given a signal
 * that aborts at the deadline (reason: the BackendUnavailableError) or when `limits.signal` does.
 * Both exist because some callers hand over a request already sent (a gRPC call, a shared session
 * being opened) while others can pass the signal on to the client so it stops the work itself. A
 * function is not called when `limits.signal` has already aborted. Its signal follows
 * `limits.signal` as linkSignals' children do (reads ask the parent first), which costs more than a
 * fast backend call's own client work: a caller whose client takes no signal passes a promise.
 *
 * The work is not stopped by giving up on it (beyond its signal): whoever gave up owns whatever it
 * may still do on the server. Its late rejection is swallowed here, so it never surfaces as an
 * unhandled rejection. A waiter leaves nothing behind: whatever settles first, the timer and the
 * listener on `limits.signal` are gone when the returned promise settles, so a long-lived signal
 * shared by many calls (a session's, a provider's close) keeps no listener per call.
 */
export async function callWithin<T>(
  call: Promise<T> | ((signal: AbortSignal) => Promise<T>),
  limits: CallLimits,
): Promise<T> {
  const { timeoutMs, signal, what, backend } = limits;
  if (typeof call !== 'function') call.catch(() => undefined); // a late rejection is not unhandled
  if (signal?.aborted) throw signal.reason;
  let giveUp: (reason: unknown) => void = () => undefined;
  const givenUp = new Promise<never>((_, reject) => {
    giveUp = reject;
  });
  // A function's work gets a signal of its own that the deadline aborts too; a promise's needs none.
  let linked: LinkedSignal | undefined;
  const cancelTimer = longTimeout(() => {
    const late = new BackendUnavailableError(
      `${backend === undefined ? '' : `${backend}: `}${what}: no answer within ${timeoutMs} ms`,
    );
    linked?.abort(late);
    giveUp(late);
  }, timeoutMs);
  if (typeof call === 'function') linked = linkSignals([signal]);
  const watched = linked?.signal ?? signal;
  const onAbort = () => giveUp(watched?.reason);
  watched?.addEventListener('abort', onAbort, { once: true });
  try {
    let work: Promise<T>;
    if (typeof call === 'function') {
      try {
        work = call((linked as LinkedSignal).signal);
      } catch (error) {
        work = Promise.reject(error);
      }
      work.catch(() => undefined); // a late rejection is not unhandled
    } else {
      work = call;
    }
    return await Promise.race([work, givenUp]);
  } finally {
    cancelTimer();
    watched?.removeEventListener('abort', onAbort);
    linked?.dispose();
  }
}

/** How long a call may take, what ends it early, and the words of its timeout. */
export interface CallLimits {
  /** Milliseconds until the call is given up (any length; Infinity: no limit). */
  timeoutMs: number;
  /** The request's signal: the call is given up as soon as it aborts, with its reason. */
  signal?: AbortSignal | undefined;
  /** What the call does, as the timeout's message names it: 'reading the queue'. */
  what: string;
  /** The backend the timeout's message starts with ('etcd'); without it the message starts with `what`. */
  backend?: string | undefined;
}
