/**
 * How long a cancelled request still waits for the deletion of its queue entry before answering:
 * enough for a healthy server (a few ms), so "cancellation leaves nothing" holds when the caller
 * hears back; short, so a frozen server cannot stretch waitMs or an abort. The session owns the
 * deletion after that (it retries until confirmed, or its end removes the entry).
 */
export const CANCEL_GRACE_MS = 250;

/** Waits for `work` at most `ms` (default CANCEL_GRACE_MS); never rejects. */
export function withinGrace(work: Promise<unknown>, ms = CANCEL_GRACE_MS): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const grace = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
  });
  return Promise.race([
    work.then(
      () => undefined,
      () => undefined,
    ),
    grace,
  ]).finally(() => clearTimeout(timer));
}
