import { randomUUID } from 'node:crypto';
import { LockTimeoutError } from '../../errors.js';
import type { Lock as FencekitLock, LockProvider } from '../../types.js';
import { isProvider, sharedProvider } from '../provider-from-clients.js';
import { LostLockError, TimeoutError } from './errors.js';
import { defaultTimeoutOptions, type LockOptions, waitFor } from './options.js';

/**
 * What Mutex, Semaphore and MultiSemaphore share: redis-semaphore's acquire / tryAcquire / release /
 * isAcquired / identifier / onLockLost over a fencekit grant. A lost grant calls onLockLost; its
 * default warns instead of throwing from a timer as redis-semaphore's does (that ends the process).
 */
export abstract class Lock {
  protected abstract readonly _kind: string;
  protected readonly _key: string;
  readonly #provider: Promise<LockProvider>;
  readonly #options: LockOptions;
  readonly #identifier: string;
  #held: FencekitLock | undefined;
  #expiry: NodeJS.Timeout | undefined;

  constructor(target: unknown, key: string, kind: string, options: LockOptions = {}) {
    if (options.identifier !== undefined && (typeof options.identifier !== 'string' || !options.identifier)) {
      throw new Error('identifier must be not empty random string');
    }
    this._key = `${kind}:${key}`;
    this.#options = options;
    this.#identifier = options.identifier ?? randomUUID();
    this.#provider = isProvider(target) ? Promise.resolve(target) : sharedProvider(target);
    this.#provider.catch(() => undefined); // reported by the first call that needs it
  }

  /** Takes the grant on the provider (waiting up to waitMs), or null when it stays taken. */
  protected abstract _take(
    provider: LockProvider,
    ttlMs: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<FencekitLock | null>;

  get identifier(): string {
    return this.#identifier;
  }

  get isAcquired(): boolean {
    return this.#held?.held ?? false;
  }

  /** The fencing token of the current grant (fencekit's addition). */
  get fencingToken(): bigint | undefined {
    return this.#held?.held ? this.#held.fencingToken : undefined;
  }

  /** Aborted when the current grant is lost or released (fencekit's addition). */
  get signal(): AbortSignal | undefined {
    return this.#held?.signal;
  }

  async acquire(abortSignal?: AbortSignal): Promise<void> {
    if (!(await this.tryAcquire(abortSignal)))
      throw new TimeoutError(`Acquire ${this._kind} ${this._key} timeout`);
  }

  /** Waits like acquire() but answers false when the time runs out. */
  async tryAcquire(abortSignal?: AbortSignal): Promise<boolean> {
    const lockTimeout = this.#options.lockTimeout ?? defaultTimeoutOptions.lockTimeout;
    let grant: FencekitLock | null;
    try {
      grant = await this._take(await this.#provider, lockTimeout, waitFor(this.#options), abortSignal);
    } catch (error) {
      if (error instanceof LockTimeoutError) return false;
      throw error;
    }
    if (!grant) return false;
    this.#held = grant;
    whenEnded(grant, () => this.#lost(grant));
    if (this.#options.refreshInterval === 0) {
      // No refresh asked for: the grant ends after lockTimeout, as an unrefreshed key expires.
      this.#expiry = setTimeout(() => void this.release(), lockTimeout);
      this.#expiry.unref();
    }
    return true;
  }

  async release(): Promise<void> {
    clearTimeout(this.#expiry);
    const held = this.#held;
    this.#held = undefined;
    await held?.release();
  }

  /** Kept for redis-semaphore's API: renewals belong to the provider, which stops them on release. */
  stopRefresh(): void {}

  #lost(grant: FencekitLock): void {
    if (this.#held !== grant) return; // released on purpose
    this.#held = undefined;
    clearTimeout(this.#expiry);
    const error = new LostLockError(`Lost ${this._kind} for key ${this._key}`, {
      cause: grant.signal.reason,
    });
    try {
      if (!this.#options.onLockLost) throw error;
      this.#options.onLockLost.call(this, error);
    } catch (thrown) {
      // Thrown from an abort listener it would end the process (redis-semaphore's default throws
      // from its refresh timer): a warning says it instead.
      process.emitWarning(thrown as Error);
    }
  }
}

/**
 * Calls onEnd once the grant is lost or released. fencekit's own locks say so through onEnd without
 * making their signal, which, once made, is aborted with a LockLostError on every release (a cost
 * per grant, issue #18); a lock of another provider is watched through its signal.
 */
function whenEnded(grant: FencekitLock, onEnd: () => void): void {
  const owned = grant as FencekitLock & { onEnd?: (listener: () => void) => void };
  if (typeof owned.onEnd === 'function') owned.onEnd(onEnd);
  else grant.signal.addEventListener('abort', onEnd, { once: true });
}
