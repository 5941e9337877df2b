import { callWithin } from '../deadline.js';

/**
 * Runs one backend call with its own signal (the request's `cancel` plus a `ms` deadline) and settles
 * as soon as that signal aborts, whether or not the call has: a past deadline is an unreachable
 * backend (BackendUnavailableError `${what}: no answer within ${ms} ms`), a cancel rejects with its
 * reason. A late outcome is dropped. `ms` may be Infinity (no limit).
 */
export function withDeadline<T>(
  call: (signal: AbortSignal) => Promise<T>,
  ms: number,
  cancel: AbortSignal,
  what: string,
): Promise<T> {
  return callWithin(call, { timeoutMs: ms, signal: cancel, what });
}
