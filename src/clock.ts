/** Monotonic milliseconds: immune to wall-clock jumps (NTP steps, manual changes). */
export const monotonicNow = (): number => performance.now();

/** Default clock-rate drift the loss signal tolerates: the local clock may run 1 % slow. */
export const DEFAULT_DRIFT_RATE = 0.01;

/**
 * The last moment (monotonic) at which we may still believe we own a lease that the backend
 * confirmed in answer to a request sent at `sentAt`.
 *
 * The backend started (or extended) the lease no earlier than `sentAt`, so it runs out no earlier
 * than `sentAt + ttlMs` by the backend's clock. Our clock may run slow by `driftRate`, so we stop
 * `ttlMs * driftRate` sooner, and one more round trip sooner so that the work we stop has time to
 * notice before another holder's grant can reach it.
 */
export function safeDeadline(sentAt: number, ttlMs: number, rttMs: number, driftRate: number): number {
  return sentAt + ttlMs * (1 - driftRate) - Math.max(0, rttMs);
}
