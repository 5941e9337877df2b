import type { LostLockError } from './errors.js';

/**
 * redis-semaphore's option names. Its `acquiredExternally` (and `externallyAcquiredIdentifier`)
 * hand-off is refused with InvalidArgumentError: a fencekit grant cannot be adopted by another process.
 */
export interface LockOptions {
  /** Lease length in ms. Default 10,000. */
  lockTimeout?: number;
  /** How long acquire() waits. Default 10,000 ms. */
  acquireTimeout?: number;
  /** Attempts before giving up (redis-semaphore polls every retryInterval). Default: no limit. */
  acquireAttemptsLimit?: number;
  /** redis-semaphore's poll interval; here it only scales acquireAttemptsLimit to a wait. Default 10 ms. */
  retryInterval?: number;
  /** 0: no renewal, the grant ends after lockTimeout. Any other value: the provider renews it. */
  refreshInterval?: number;
  identifier?: string;
  /** Refused (InvalidArgumentError): acquire in the process that releases. */
  acquiredExternally?: never;
  onLockLost?: (this: unknown, error: LostLockError) => void;
}

export const defaultTimeoutOptions = {
  lockTimeout: 10_000,
  acquireTimeout: 10_000,
  acquireAttemptsLimit: Number.POSITIVE_INFINITY,
  retryInterval: 10,
} as const;

/** How long one acquire may wait: acquireTimeout, or less when the attempts would run out first. */
export function waitFor(options: LockOptions): number {
  const timeout = options.acquireTimeout ?? defaultTimeoutOptions.acquireTimeout;
  const attempts = options.acquireAttemptsLimit ?? defaultTimeoutOptions.acquireAttemptsLimit;
  const interval = options.retryInterval ?? defaultTimeoutOptions.retryInterval;
  if (!Number.isFinite(attempts)) return timeout;
  return Math.min(timeout, Math.max(0, attempts - 1) * interval);
}
