/**
 * redis-semaphore's Mutex, Semaphore and MultiSemaphore over any fencekit provider.
 * @module fencekit/compat/redis-semaphore
 */
// fencekit/compat/redis-semaphore: redis-semaphore's Mutex, Semaphore and MultiSemaphore over any
// fencekit provider, or over an ioredis / node-redis client as redis-semaphore takes it.
import { InvalidArgumentError, NotImplementedError } from '../../errors.js';
import type { Lock as FencekitLock, LockProvider } from '../../types.js';
import type { Shape } from './classic.js';
import { Lock } from './lock.js';
import type { LockOptions } from './options.js';

export { LostLockError, TimeoutError } from './errors.js';
export { Lock } from './lock.js';
export { defaultTimeoutOptions, type LockOptions, type SemaphoreLayout } from './options.js';

const MUTEX: Shape = Object.freeze({ kind: 'mutex', limit: 1, permits: 1, multi: false });

/** One holder at a time under key. */
export class Mutex extends Lock {
  protected readonly _kind: string = 'mutex';

  constructor(client: unknown, key: string, options?: LockOptions) {
    super(client, key, 'mutex', options);
  }

  protected _shape(): Shape {
    return MUTEX;
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

  #shape: Shape | undefined;

  constructor(client: unknown, key: string, limit: number, options?: LockOptions) {
    super(client, key, 'semaphore', options);
    if (!limit) throw new Error('"limit" is required');
    if (typeof limit !== 'number') throw new Error('"limit" must be a number');
    if (!Number.isInteger(limit) || limit < 1)
      throw new InvalidArgumentError('limit', 'must be a positive integer');
    this._limit = limit;
  }

  protected _shape(): Shape {
    this.#shape ??= {
      kind: 'semaphore',
      limit: this._limit,
      permits: this._permits,
      multi: this._kind.endsWith('multi-semaphore'),
    };
    return this.#shape;
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
  protected override readonly _kind: string = 'multi-semaphore';
  protected override readonly _permits: number;

  constructor(client: unknown, key: string, limit: number, permits: number, options?: LockOptions) {
    super(client, key, limit, options);
    if (!permits) throw new Error('"permits" is required');
    if (typeof permits !== 'number') throw new Error('"permits" must be a number');
    if (!Number.isInteger(permits) || permits < 1 || permits > limit) {
      throw new InvalidArgumentError('permits', `must be an integer from 1 to the limit (${limit})`);
    }
    this._permits = permits;
  }
}

/**
 * redis-semaphore's Redlock classes: the same locks on several independent Redis instances, held
 * while a majority holds them (or, on fencekit's layout, fencekit's Redlock provider).
 */
export class RedlockMutex extends Mutex {
  static override readonly byMajority = true;
  protected override readonly _kind: string = 'redlock-mutex';

  /** Takes an array of clients (or a provider). */
  constructor(clients: unknown[], key: string, options?: LockOptions) {
    super(clients, key, options);
  }
}

/** The Semaphore on several independent Redis instances, held while a majority holds it. */
export class RedlockSemaphore extends Semaphore {
  static override readonly byMajority = true;
  protected override readonly _kind: string = 'redlock-semaphore';

  /** Takes an array of clients (or a provider). */
  constructor(clients: unknown[], key: string, limit: number, options?: LockOptions) {
    super(clients, key, limit, options);
  }
}

/** The MultiSemaphore on several independent Redis instances, held while a majority holds it. */
export class RedlockMultiSemaphore extends MultiSemaphore {
  static override readonly byMajority = true;
  protected override readonly _kind: string = 'redlock-multi-semaphore';

  /** Takes an array of clients (or a provider). */
  constructor(clients: unknown[], key: string, limit: number, permits: number, options?: LockOptions) {
    super(clients, key, limit, permits, options);
  }
}
