import { randomUUID } from 'node:crypto';
import { AbortError, InvalidArgumentError, LockTimeoutError } from '../../errors.js';
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
 * One object is one holder, as in redis-semaphore, where the object's identifier is the holder.
 * Each successful acquire() is a turn of the object's, and every turn ends with exactly one
 * release(): the first release() after the grant gives back that turn's grant, and only then may the
 * next acquire() on the object take one. A grant that ends without release() (lost, or expired
 * with `refreshInterval: 0`) keeps its turn: its release() is still owed, and a grant taken by
 * another caller meanwhile would be released by it. An acquire() on an object whose turn is taken
 * waits, within its own acquireTimeout: what redis-semaphore does for a Mutex, and for a semaphore
 * with no room left for the same identifier again. Where redis-semaphore would let the second call
 * share the held permit at once (a semaphore with a permit free), the facade waits too: with a
 * shared permit, one caller's release ends the other's while it still works.
 */
export abstract class Lock {
  protected abstract readonly _kind: string;
  protected readonly _key: string;
  readonly #provider: Promise<LockProvider>;
  readonly #options: LockOptions;
  readonly #identifier: string;
  /** The turn whose release() is owed: granted, not yet released (its grant may be lost). */
  #granted: Turn | undefined;
  /** The object's turns: one caller at a time takes and holds its one grant. */
  readonly #turns = new KeyedFifo();

  constructor(target: unknown, key: string, kind: string, options: LockOptions = {}) {
    if (options.identifier !== undefined && (typeof options.identifier !== 'string' || !options.identifier)) {
      throw new Error('identifier must be not empty random string');
    }
    refuseExternalAcquisition(options);
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
    return this.#granted?.grant.held ?? false;
  }

  /** The fencing token of the current grant (fencekit's addition). */
  get fencingToken(): bigint | undefined {
    const grant = this.#granted?.grant;
    return grant?.held ? grant.fencingToken : undefined;
  }

  /** Aborted when the current grant is lost or released (fencekit's addition). */
  get signal(): AbortSignal | undefined {
    return this.#granted?.grant.signal;
  }

  async acquire(abortSignal?: AbortSignal): Promise<void> {
    if (!(await this.tryAcquire(abortSignal)))
      throw new TimeoutError(`Acquire ${this._kind} ${this._key} timeout`);
  }

  /** Waits like acquire() but answers false when the time runs out. */
  async tryAcquire(abortSignal?: AbortSignal): Promise<boolean> {
    const lockTimeout = this.#options.lockTimeout ?? defaultTimeoutOptions.lockTimeout;
    const deadline = performance.now() + waitFor(this.#options);
    const leave = await this.#waitForTurn(deadline, abortSignal);
    if (!leave) return false;
    let grant: FencekitLock | null;
    try {
      const waitMs = Math.max(0, deadline - performance.now());
      grant = await this._take(await this.#provider, lockTimeout, waitMs, abortSignal);
    } catch (error) {
      leave();
      if (error instanceof LockTimeoutError) return false;
      throw error;
    }
    if (!grant) {
      leave();
      return false;
    }
    const turn = new Turn(grant, leave);
    this.#granted = turn;
    whenEnded(grant, () => this.#lost(turn));
    // No refresh asked for: the grant ends after lockTimeout, as an unrefreshed key expires.
    if (this.#options.refreshInterval === 0) turn.expireAfter(lockTimeout);
    return true;
  }

  /**
   * The object's turn to take a grant (its leave function), once the turn of every earlier call has
   * ended; undefined when `deadline` passes first. A caller's abort rejects.
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

  /**
   * Gives back the grant of the turn granted now (nothing when no acquire() has succeeded since the
   * last release(), as in redis-semaphore) and then lets the next acquire() on the object in.
   */
  async release(): Promise<void> {
    const turn = this.#granted;
    this.#granted = undefined;
    await turn?.release();
  }

  /**
   * redis-semaphore stops refreshing, and the key expires lockTimeout after the last refresh: here the
   * grant is no longer kept past lockTimeout from now. Its release() is still owed.
   */
  stopRefresh(): void {
    this.#granted?.expireAfter(this.#options.lockTimeout ?? defaultTimeoutOptions.lockTimeout);
  }

  /** Reports the loss of `turn`'s grant once; never throws (it runs inside the grant's loss). */
  #lost(turn: Turn): void {
    if (turn.endedOnPurpose) return; // released, or expired without refresh
    turn.stopExpiry();
    const error = new LostLockError(`Lost ${this._kind} for key ${this._key}`, {
      cause: turn.grant.signal.reason,
    });
    try {
      if (!this.#options.onLockLost) throw error;
      this.#options.onLockLost.call(this, error);
    } catch (thrown) {
      // Thrown from an abort listener it would end the process (redis-semaphore's default throws
      // from its refresh timer): a warning says it instead. emitWarning takes only an Error (or a
      // string), so anything else an onLockLost throws travels as the cause of the loss's error.
      process.emitWarning(
        thrown instanceof Error
          ? thrown
          : new LostLockError(`${error.message} (onLockLost threw a value that is not an Error)`, {
              cause: thrown,
            }),
      );
    }
  }
}

/**
 * One successful acquire(): its grant and its place in the object's turns, which it keeps until its
 * own release() (never until the grant merely ends), so that release() gives back this grant and no
 * later one. Its expiry (refreshInterval 0, stopRefresh) releases this grant, never another's.
 */
class Turn {
  /** The grant was given back on purpose (release() or expiry): its end is not a loss. */
  endedOnPurpose = false;
  #cancelExpiry: (() => void) | undefined;
  /** The expiry's give-back: its failure is not the owed release()'s (the provider retries the delete). */
  #expired: Promise<void> | undefined;
  #released: Promise<void> | undefined;

  constructor(
    readonly grant: FencekitLock,
    readonly leave: () => void,
  ) {}

  /** Gives the grant back `ms` from now unless released first (an earlier expiry is replaced). */
  expireAfter(ms: number): void {
    if (this.#released || this.#expired) return;
    this.stopExpiry();
    // longTimeout: a plain setTimeout fires after 1 ms for a delay past 2^31 ms. Like a key's TTL,
    // a pending expiry keeps no process alive.
    this.#cancelExpiry = longTimeout(
      () => {
        this.endedOnPurpose = true;
        this.#expired = this.grant.release().catch(() => undefined); // the lease ends by itself; the provider retries the delete
      },
      ms,
      { unref: true },
    );
  }

  stopExpiry(): void {
    this.#cancelExpiry?.();
    this.#cancelExpiry = undefined;
  }

  /** Idempotent: gives the grant back, then the turn (also when the delete failed). */
  release(): Promise<void> {
    this.#released ??= (async () => {
      this.stopExpiry();
      this.endedOnPurpose = true;
      try {
        await (this.#expired ?? this.grant.release());
      } finally {
        this.leave();
      }
    })();
    return this.#released;
  }
}

/**
 * redis-semaphore's `acquiredExternally` (and its older `externallyAcquiredIdentifier`) adopts a lock
 * another process took, by identifier. A fencekit grant is the request that won it (its fencing
 * token, its renewals, its queue place): nothing a second process could adopt and keep safe, so
 * such an object is refused rather than silently taking a grant of its own beside the adopted one.
 */
function refuseExternalAcquisition(options: LockOptions): void {
  const given = options as { acquiredExternally?: unknown; externallyAcquiredIdentifier?: unknown };
  for (const name of ['acquiredExternally', 'externallyAcquiredIdentifier'] as const) {
    if (given[name] !== undefined && given[name] !== false) {
      throw new InvalidArgumentError(
        name,
        'a grant cannot be adopted from another process: acquire in the process that releases',
      );
    }
  }
}

/** The reason a wait for the object's turn ends when the caller's time runs out. */
const TURN_TIMED_OUT = Symbol('turn timed out');

/**
 * Calls onEnd once the grant is lost or released. fencekit's own locks say so through onEnd without
 * making their signal, which, once made, is aborted with a LockLostError on every release (a cost
 * per grant); a lock of another provider is watched through its signal.
 */
function whenEnded(grant: FencekitLock, onEnd: () => void): void {
  const owned = grant as FencekitLock & { onEnd?: (listener: () => void) => void };
  if (typeof owned.onEnd === 'function') owned.onEnd(onEnd);
  else grant.signal.addEventListener('abort', onEnd, { once: true });
}
