import { monotonicNow, safeDeadline } from './clock.js';
import { OwnedLock, type OwnedLockInit } from './ownership.js';

/** What {@link keepRenewing} needs to keep a per-lock lease. */
export interface RenewalOptions {
  /** The lease length the backend grants on each renewal. */
  ttlMs: number;
  /** Clock-rate drift to allow for (the provider's `driftRate`). */
  driftRate: number;
  /** When the request that granted the lease was sent (monotonic ms) and how long its answer took. */
  grantedSentAt: number;
  grantedRttMs: number;
  /**
   * Extends the lease on the backend if it is still ours: true = extended by ttlMs, false = the
   * backend says it is no longer ours, 'revoked' = an operator removed it (forceRelease). Throws
   * when the backend cannot be reached.
   */
  renew: () => Promise<boolean | 'revoked'>;
}

/**
 * The watchdog of backends with per-lock leases (memory, Redis): renews every ttl/3 while the lock
 * is held, moves the lock's local deadline after each confirmed renewal, and lets the deadline abort
 * the signal when renewals keep failing. A "no longer yours" answer aborts at once.
 */
export function keepRenewing(lock: OwnedLock, opts: RenewalOptions): void {
  const interval = opts.ttlMs / 3;
  // After a failed attempt, retry sooner so that a short outage does not cost the lease.
  const retryInterval = Math.max(opts.ttlMs / 10, 5);
  let timer: NodeJS.Timeout | undefined;

  lock.confirmUntil(safeDeadline(opts.grantedSentAt, opts.ttlMs, opts.grantedRttMs, opts.driftRate));

  const schedule = (delay: number): void => {
    if (!lock.held) return;
    timer = setTimeout(attempt, delay);
  };

  const attempt = async (): Promise<void> => {
    const sentAt = monotonicNow();
    try {
      const stillOurs = await opts.renew();
      if (!lock.held) return;
      const rttMs = monotonicNow() - sentAt;
      lock.reportRenewal(stillOurs === true ? 'renewed' : 'rejected', rttMs / 1000);
      if (stillOurs !== true) {
        lock.lose(stillOurs === 'revoked' ? 'revoked' : 'expired');
        return;
      }
      lock.confirmUntil(safeDeadline(sentAt, opts.ttlMs, rttMs, opts.driftRate));
      schedule(interval);
    } catch (error) {
      if (!lock.held) return;
      lock.reportRenewal('failed', (monotonicNow() - sentAt) / 1000, error);
      // Unreachable backend: the deadline set by the last confirmation decides; keep trying until then.
      schedule(retryInterval);
    }
  };

  lock.onEnd(() => clearTimeout(timer));
  schedule(interval);
}

/** What {@link leasedLock} needs: the grant, its lease and how to renew it. */
export interface LeasedLockInit extends OwnedLockInit {
  /** The lease length the backend granted. */
  ttlMs: number;
  /** Clock-rate drift to allow for (the provider's `driftRate`). */
  driftRate: number;
  /** When the request that granted the lease was sent (monotonic ms); its round trip ends now. */
  grantedSentAt: number;
  /** The round trip to allow for, when the grant arrived otherwise than as that request's answer. */
  grantedRttMs?: number;
  /** Extends the lease, as {@link RenewalOptions.renew} does. */
  renew: () => Promise<boolean | 'revoked'>;
}

/** The handle of a per-lock lease (memory, Redis, Redlock): the lock, with its watchdog running. */
export function leasedLock(init: LeasedLockInit): OwnedLock {
  const lock = new OwnedLock(init);
  keepRenewing(lock, {
    ttlMs: init.ttlMs,
    driftRate: init.driftRate,
    grantedSentAt: init.grantedSentAt,
    grantedRttMs: init.grantedRttMs ?? monotonicNow() - init.grantedSentAt,
    renew: init.renew,
  });
  return lock;
}
