import type { LostLockError } from './errors.js';

/**
 * Which keys the facade takes over clients. 'redis-semaphore' (the default): redis-semaphore's own
 * keys and protocol, so replicas still running redis-semaphore and replicas running the facade
 * exclude each other during a rolling upgrade. 'fencekit': fencekit's layout (fair queue, hand-over
 * on release), unseen by redis-semaphore's replicas: switch only once the last of them is gone.
 */
export type SemaphoreLayout = 'redis-semaphore' | 'fencekit';

/** redis-semaphore's refreshInterval default: 80 % of lockTimeout. */
export const REFRESH_INTERVAL_COEF = 0.8;

/** redis-semaphore's option names, and `layout`. */
export interface LockOptions {
  /** Lease length in ms. Default 10,000. */
  lockTimeout?: number;
  /** How long acquire() waits. Default 10,000 ms. */
  acquireTimeout?: number;
  /** Attempts before giving up (redis-semaphore polls every retryInterval). Default: no limit. */
  acquireAttemptsLimit?: number;
  /** redis-semaphore's poll interval; here it only scales acquireAttemptsLimit to a wait. Default 10 ms. */
  retryInterval?: number;
  /** 0: no renewal, the grant ends after lockTimeout. Default 80 % of lockTimeout (fencekit's layout: the provider renews). */
  refreshInterval?: number;
  identifier?: string;
  /** Appended to the random identifier (`<uuid>-<suffix>`); deprecated in redis-semaphore. */
  identifierSuffix?: string;
  /**
   * With `identifier`: the first acquire adopts the grant another process took under it (by a
   * refresh), as redis-semaphore does. Refused on fencekit's layout (InvalidArgumentError).
   */
  acquiredExternally?: true;
  /** Deprecated in redis-semaphore: `identifier` with `acquiredExternally: true`. */
  externallyAcquiredIdentifier?: string;
  layout?: SemaphoreLayout;
  onLockLost?: (this: unknown, error: LostLockError) => void;
}

/** redis-semaphore's defaults for the lock's timeouts and retries. */
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
