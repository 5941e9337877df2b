import { randomUUID } from 'node:crypto';
import { AbortError, LockTimeoutError } from '../../errors.js';
import { KeyedFifo } from '../../keyed-fifo.js';
import { linkSignals } from '../../signals.js';
import { longTimeout } from '../../timers.js';
import type { Lock as FencekitLock, LockProvider } from '../../types.js';
import { isProvider, sharedProvider } from '../provider-from-clients.js';
import { LostLockError, TimeoutError } from './errors.js';
import { defaultTimeoutOptions, type LockOptions, waitFor } from './options.js';

/**
 * What Mutex, Semaphore and MultiSemaphore share: redis-semaphore's acquire / tryAcquire / release /
 * isAcquired / identifier / onLockLost over a fencekit grant. A lost grant calls onLockLost; its
 * default warns instead of throwing from a timer as redis-semaphore's does (that ends the process).
 *
 * One object is one holder, as in redis-semaphore, where the object's identifier is the holder:
 * it holds at most one grant, and release() gives that grant back, whichever caller calls it. An
 * acquire() on an object that holds a grant (or is taking one) waits, within its own
 * acquireTimeout, until that grant is released or lost, and then takes a grant of its own: what
 * redis-semaphore does for a Mutex, and for a semaphore with no room left for the same identifier
 * again. Where redis-semaphore would let the second call share the held permit at once (a
 * semaphore with a permit free), the facade waits too: with a shared permit, one caller's release
 * ends the other's while it still works. So every grant the object takes is released by the next
 * release(), and none is renewed after it.
 */
export abstract class Lock {
  protected abstract readonly _kind: string;
  protected readonly _key: string;
  readonly #provider: Promise<LockProvider>;
  readonly #options: LockOptions;
  readonly #identifier: string;
  #held: FencekitLock | undefined;
  #expiry: NodeJS.Timeout | undefined;
  /** The object's turns: one caller at a time takes and holds its one grant. */
  readonly #turns = new KeyedFifo();

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
    const deadline = performance.now() + waitFor(this.#options);
    const endTurn = await this.#waitForTurn(deadline, abortSignal);
    if (!endTurn) return false;
    let grant: FencekitLock | null;
    try {
      const waitMs = Math.max(0, deadline - performance.now());
      grant = await this._take(await this.#provider, lockTimeout, waitMs, abortSignal);
    } catch (error) {
      endTurn();
      if (error instanceof LockTimeoutError) return false;
      throw error;
    }
    if (!grant) {
      endTurn();
      return false;
    }
    this.#held = grant;
    whenEnded(grant, () => {
      this.#lost(grant);
      endTurn();
    });
    if (this.#options.refreshInterval === 0) {
      // No refresh asked for: the grant ends after lockTimeout, as an unrefreshed key expires.
      this.#expiry = setTimeout(() => void this.release(), lockTimeout);
      this.#expiry.unref();
    }
    return true;
  }

  /**
   * The object's turn to take a grant (its end function), once the grant held or being taken by an
   * earlier call has ended; undefined when `deadline` passes first. A caller's abort rejects.
   */
  async #waitForTurn(deadline: number, abortSignal?: AbortSignal): Promise<(() => void) | undefined> {
    if (abortSignal?.aborted) throw new AbortError(`acquire("${this._key}")`, abortSignal.reason);
    const now = this.#turns.tryEnter(this._key);
    if (now) return now;
    const left = deadline - performance.now();
    if (left <= 0) return undefined;
    const cancel = linkSignals([abortSignal]);
    const stopTimer = longTimeout(() => cancel.abort(TURN_TIMED_OUT), left);
    try {
      return await this.#turns.enter(this._key, cancel.signal);
    } catch (reason) {
      if (reason === TURN_TIMED_OUT) return undefined;
      throw new AbortError(`acquire("${this._key}")`, reason);
    } finally {
      stopTimer();
      cancel.dispose();
    }
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

/** The reason a wait for the object's turn ends when the caller's time runs out. */
const TURN_TIMED_OUT = Symbol('turn timed out');

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
