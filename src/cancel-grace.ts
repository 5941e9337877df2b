import { callWithin } from './deadline.js';

/**
 * How long a cancelled request still waits for the deletion of its queue entry before answering:
 * enough for a healthy server (a few ms), so "cancellation leaves nothing" holds when the caller
 * hears back; short, so a frozen server cannot stretch waitMs or an abort. The session owns the
 * deletion after that (it retries until confirmed, or its end removes the entry).
 */
export const CANCEL_GRACE_MS = 250;

/**
 * Waits for `work` at most `ms` (default CANCEL_GRACE_MS) and never rejects: a grace period, not a
 * deadline, so its end is no error (callWithin's timeout and `work`'s own failure are both dropped).
 */
export function withinGrace(work: Promise<unknown>, ms = CANCEL_GRACE_MS): Promise<void> {
  return callWithin(work, { timeoutMs: ms, what: 'grace' }).then(
    () => undefined,
    () => undefined, // the grace ran out or the work failed: either way the wait is over
  );
}
