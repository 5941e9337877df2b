import { monotonicNow } from '../clock.js';

/**
 * A lease as both in-process servers (locks, permits) keep it: its ttl runs from the grant or the
 * last renewal, a timer ends it when it runs out, and `expiresAt` is the wall-clock expiry
 * inspect() shows.
 */
export interface RunningLease {
  readonly ttlMs: number;
  /** Wall clock, for inspect(). */
  expiresAt: number;
  timer: NodeJS.Timeout | undefined;
}

/** A grant as both in-process servers keep it. */
export interface MemoryGrant extends RunningLease {
  readonly ownerToken: string;
  readonly owner: string | undefined;
  readonly fencingToken: bigint;
  /** Lock-delay this grant asked for: how long its loss keeps what it held from everybody. */
  readonly lockDelayMs: number;
  readonly since: Date;
  /** Monotonic time of the grant: the lease runs from here. */
  readonly grantedAt: number;
}

/** The times of a lease granted now: the lease runs from `grantedAt` (monotonic). */
export function grantedNow(ttlMs: number): { since: Date; grantedAt: number; expiresAt: number } {
  return { since: new Date(), grantedAt: monotonicNow(), expiresAt: Date.now() + ttlMs };
}

/** A renewal: the ttl runs again from now, on a new expiry timer from `expiryTimer`. */
export function restartLease<L extends RunningLease>(
  lease: L,
  expiryTimer: (lease: L) => NodeJS.Timeout,
): void {
  clearTimeout(lease.timer);
  lease.timer = expiryTimer(lease);
  lease.expiresAt = Date.now() + lease.ttlMs;
}
