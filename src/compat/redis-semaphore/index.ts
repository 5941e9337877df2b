/**
 * redis-semaphore's Mutex, Semaphore and MultiSemaphore over any fencekit provider.
 * @module fencekit/compat/redis-semaphore
 */
// fencekit/compat/redis-semaphore: redis-semaphore's Mutex, Semaphore and MultiSemaphore over any
// fencekit provider, or over an ioredis / node-redis client as redis-semaphore takes it.
import { InvalidArgumentError, NotImplementedError } from '../../errors.js';
import type { Lock as FencekitLock, LockProvider } from '../../types.js';
import { Lock } from './lock.js';
import type { LockOptions } from './options.js';

export { LostLockError, TimeoutError } from './errors.js';
export { Lock } from './lock.js';
export { defaultTimeoutOptions, type LockOptions } from './options.js';

/** One holder at a time under key. */
export class Mutex extends Lock {
  protected readonly _kind = 'mutex';

  constructor(client: unknown, key: string, options?: LockOptions) {
    super(client, key, 'mutex', options);
  }

  protected _take(provider: LockProvider, ttlMs: number, waitMs: number, signal?: AbortSignal) {
    return provider.acquire(this._key, { ttlMs, waitMs, ...(signal ? { signal } : {}) });
  }
}

/** At most `limit` holders at once under key (needs a provider with semaphores). */
export class Semaphore extends Lock {
  protected readonly _kind: string = 'semaphore';
  protected readonly _limit: number;
  protected readonly _permits: number = 1;

  constructor(client: unknown, key: string, limit: number, options?: LockOptions) {
    super(client, key, 'semaphore', options);
    if (!Number.isInteger(limit) || limit < 1)
      throw new InvalidArgumentError('limit', 'must be a positive integer');
    this._limit = limit;
  }

  protected async _take(
    provider: LockProvider,
    ttlMs: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<FencekitLock | null> {
    if (!provider.semaphore) throw new NotImplementedError(`semaphores on the ${provider.backend} provider`);
    return provider
      .semaphore(this._key, { limit: this._limit })
      .acquire({ ttlMs, waitMs, permits: this._permits, ...(signal ? { signal } : {}) });
  }
}

/** Takes `permits` of the `limit` at once, all or none. */
export class MultiSemaphore extends Semaphore {
  protected override readonly _kind = 'multi-semaphore';
  protected override readonly _permits: number;

  constructor(client: unknown, key: string, limit: number, permits: number, options?: LockOptions) {
    super(client, key, limit, options);
    if (!Number.isInteger(permits) || permits < 1 || permits > limit) {
      throw new InvalidArgumentError('permits', `must be an integer from 1 to the limit (${limit})`);
    }
    this._permits = permits;
  }
}
