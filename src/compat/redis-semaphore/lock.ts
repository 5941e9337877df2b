import { randomUUID } from 'node:crypto';
import { monotonicNow } from '../../clock.js';
import { InvalidArgumentError, LockTimeoutError } from '../../errors.js';
import { KeyedFifo } from '../../keyed-fifo.js';
import { OwnedLock } from '../../ownership.js';
import { linkSignals } from '../../signals.js';
import { abortableDelay, longTimeout } from '../../timers.js';
import type { Lock as FencekitLock, LockProvider } from '../../types.js';
import { isProvider, openProvider, sharedProvider } from '../provider-from-clients.js';
import { ClassicLocks, type Round, type Shape } from './classic.js';
import { LostLockError, TimeoutError } from './errors.js';
import { defaultTimeoutOptions, type LockOptions, REFRESH_INTERVAL_COEF, waitFor } from './options.js';

/**
 * What Mutex, Semaphore and MultiSemaphore share: redis-semaphore's acquire / tryAcquire / release /
 * isAcquired / identifier / onLockLost, on redis-semaphore's keys (the default over clients) or on a
 * fencekit grant. A lost grant calls onLockLost; what it throws (its default throws the
 * LostLockError) becomes an unhandled rejection, as redis-semaphore documents.
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
  /** The Redlock classes: several clients, a majority decides. */
  static readonly byMajority: boolean = false;
  protected abstract readonly _kind: string;
  protected readonly _key: string;
  /** fencekit's layout (a provider was given, or `layout: 'fencekit'`); else undefined. */
  readonly #provider: Promise<LockProvider> | undefined;
  /** redis-semaphore's layout on the clients (the default over clients); else undefined. */
  readonly #classic: ClassicLocks | undefined;
  readonly #options: LockOptions;
  readonly #identifier: string;
  /** `acquiredExternally`: the next acquire adopts the grant held under the identifier. */
  #adoptNext: boolean;
  /** The turn whose release() is owed: granted, not yet released (its grant may be lost). */
  #granted: Turn | undefined;
  /** The object's turns: one caller at a time takes and holds its one grant. */
  readonly #turns = new KeyedFifo();

  constructor(target: unknown, key: string, kind: string, options: LockOptions = {}) {
    const byMajority = (new.target as unknown as typeof Lock).byMajority;
    const { identifier, adopt } = checkOptions(options);
    checkTarget(target, key, byMajority);
    this._key = `${kind}:${key}`;
    this.#options = options;
    this.#identifier = identifier;
    const layout = options.layout ?? 'redis-semaphore';
    if (layout !== 'redis-semaphore' && layout !== 'fencekit') {
      throw new InvalidArgumentError('layout', "must be 'redis-semaphore' or 'fencekit'");
    }
    const clients = byMajority ? (target as unknown[]) : [target];
    if (!isProvider(target) && layout === 'redis-semaphore') {
      this.#classic = new ClassicLocks(clients, byMajority);
      this.#adoptNext = adopt;
      return;
    }
    if (adopt) refuseExternalAcquisition();
    this.#adoptNext = false;
    this.#provider = isProvider(target)
      ? Promise.resolve(target)
      : byMajority
        ? openProvider(clients)
        : sharedProvider(target);
    this.#provider.catch(() => undefined); // reported by the first call that needs it
  }

  /** What this object locks on redis-semaphore's layout. */
  protected abstract _shape(): Shape;

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

  get #lockTimeout(): number {
    return this.#options.lockTimeout ?? defaultTimeoutOptions.lockTimeout;
  }

  get #refreshInterval(): number {
    return this.#options.refreshInterval ?? Math.round(this.#lockTimeout * REFRESH_INTERVAL_COEF);
  }

  async acquire(abortSignal?: AbortSignal): Promise<void> {
    if (!(await this.tryAcquire(abortSignal)))
      throw new TimeoutError(`Acquire ${this._kind} ${this._key} timeout`);
  }

  /** Waits like acquire() but answers false when the time runs out. */
  async tryAcquire(abortSignal?: AbortSignal): Promise<boolean> {
    abortSignal?.throwIfAborted(); // the signal's own reason, as redis-semaphore rejects
    const lockTimeout = this.#lockTimeout;
    const waitMs = this.#classic
      ? (this.#options.acquireTimeout ?? defaultTimeoutOptions.acquireTimeout)
      : waitFor(this.#options);
    const deadline = performance.now() + waitMs;
    const leave = await this.#waitForTurn(deadline, abortSignal);
    if (!leave) return false;
    let grant: FencekitLock | null;
    try {
      const left = Math.max(0, deadline - performance.now());
      grant = this.#classic
        ? await this.#takeClassic(this.#classic, left, abortSignal)
        : await this._take(await (this.#provider as Promise<LockProvider>), lockTimeout, left, abortSignal);
    } catch (error) {
      leave();
      abortSignal?.throwIfAborted();
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
    if (this.#classic) {
      // redis-semaphore reports a loss only when a refresh finds the key gone: without refreshes,
      // the key expires unreported (the grant's signal still aborts by its deadline).
      if (this.#refreshInterval > 0) this.#keepRefreshing(turn);
      else turn.endedOnPurpose = true;
      return true;
    }
    // No refresh asked for: the grant ends after lockTimeout, as an unrefreshed key expires.
    if (this.#options.refreshInterval === 0) turn.expireAfter(lockTimeout);
    return true;
  }

  /**
   * redis-semaphore's acquire on its own keys: an attempt every retryInterval ms while waitMs and
   * acquireAttemptsLimit last; `acquiredExternally` adopts the identifier's grant by refreshing it.
   */
  async #takeClassic(
    classic: ClassicLocks,
    waitMs: number,
    abortSignal?: AbortSignal,
  ): Promise<OwnedLock | null> {
    if (this.#adoptNext) {
      // An adoption gets a token of its own: the counter's value is the previous grant's token.
      const round = await classic.refresh(
        this._key,
        this._shape(),
        this.#identifier,
        this.#lockTimeout,
        true,
      );
      if (!round.agreed || monotonicNow() >= round.deadline) return null; // none, or born lost
      this.#adoptNext = false;
      return this.#owned(classic, round);
    }
    const limit = this.#options.acquireAttemptsLimit ?? defaultTimeoutOptions.acquireAttemptsLimit;
    const interval = this.#options.retryInterval ?? defaultTimeoutOptions.retryInterval;
    const end = Date.now() + waitMs;
    for (let attempt = 1; Date.now() < end && attempt <= limit; attempt++) {
      abortSignal?.throwIfAborted();
      const round = await classic.acquire(
        this._key,
        this._shape(),
        this.#identifier,
        this.#lockTimeout,
        abortSignal,
      );
      if (round.agreed) return this.#owned(classic, round);
      await abortableDelay(interval, abortSignal); // as redis-semaphore's delay
    }
    return null;
  }

  /** The grant of a round that agreed: aborted by its deadline unless a refresh moves it. */
  #owned(classic: ClassicLocks, round: Round): OwnedLock {
    const shape = this._shape();
    const lock = new OwnedLock({
      key: this._key,
      fencingToken: round.token,
      ownerToken: this.#identifier,
      releaseOnBackend: () => classic.release(this._key, shape, this.#identifier),
    });
    lock.confirmUntil(round.deadline);
    return lock;
  }

  /**
   * Refreshes every refreshInterval ms (skipping a tick while one is under way) until the grant
   * ends; a refresh that finds the key no longer ours loses it. An unanswered refresh loses
   * nothing by itself: the grant's deadline does, if no refresh lands before it.
   */
  #keepRefreshing(turn: Turn): void {
    let refreshing = false;
    const timer = setInterval(async () => {
      if (refreshing) return;
      refreshing = true;
      try {
        const refreshed = await this._refresh().catch(() => true); // unanswered: the deadline decides
        if (!refreshed) (turn.grant as OwnedLock).lose('expired');
      } finally {
        refreshing = false;
      }
    }, this.#refreshInterval);
    timer.unref(); // as redis-semaphore's: a held lock alone does not keep the process alive
    turn.stopRefreshing = () => clearInterval(timer);
    whenEnded(turn.grant, turn.stopRefreshing);
  }

  /** One refresh of the current grant on redis-semaphore's layout: false once it is not ours. */
  protected async _refresh(): Promise<boolean> {
    const grant = this.#granted?.grant as OwnedLock | undefined;
    if (!this.#classic || !grant) return false;
    const round = await this.#classic.refresh(this._key, this._shape(), this.#identifier, this.#lockTimeout);
    if (round.agreed) grant.confirmUntil(round.deadline);
    return round.agreed;
  }

  /**
   * The object's turn to take a grant (its leave function), once the turn of every earlier call has
   * ended; undefined when `deadline` passes first. A caller's abort rejects.
   */
  async #waitForTurn(deadline: number, abortSignal?: AbortSignal): Promise<(() => void) | undefined> {
    abortSignal?.throwIfAborted();
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
      throw reason; // the caller's signal's reason, as redis-semaphore rejects
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
    if (!turn && this.#adoptNext && this.#classic) {
      // acquiredExternally, never acquired here: redis-semaphore releases the identifier's grant.
      this.#adoptNext = false;
      await this.#classic.release(this._key, this._shape(), this.#identifier);
      return;
    }
    await turn?.release();
  }

  /**
   * redis-semaphore stops refreshing, and the key expires lockTimeout after the last refresh: here the
   * grant is no longer kept past lockTimeout from now. Its release() is still owed.
   */
  stopRefresh(): void {
    const turn = this.#granted;
    if (!turn) return;
    if (this.#classic) {
      // The key expires by itself lockTimeout after the last refresh, unreported, as in redis-semaphore.
      turn.endedOnPurpose = true;
      turn.stopRefreshing?.();
      return;
    }
    turn.expireAfter(this.#lockTimeout);
  }

  /** Reports the loss of `turn`'s grant once; never throws (it runs inside the grant's loss). */
  #lost(turn: Turn): void {
    if (turn.endedOnPurpose) return; // released, or expired without refresh
    // Ended by the app, not lost: its client quit (the provider over it closed, releasing its grants).
    const ended = (turn.grant.signal.reason as { reason?: string } | undefined)?.reason;
    if (ended === 'released' || ended === 'closed') return;
    turn.stopExpiry();
    const error = new LostLockError(`Lost ${this._kind} for key ${this._key}`, {
      cause: turn.grant.signal.reason,
    });
    const onLockLost = this.#options.onLockLost ?? throwLostLock;
    try {
      onLockLost.call(this, error);
    } catch (thrown) {
      // As in redis-semaphore, whose onLockLost runs in its refresh timer's promise: what it throws
      // (the default throws the LostLockError) is an unhandled rejection, which ends the process
      // unless the app listens for 'unhandledRejection' — the work stops with the lock.
      void Promise.reject(thrown);
    }
  }
}

/** redis-semaphore's default onLockLost. */
function throwLostLock(error: LostLockError): never {
  throw error;
}

/**
 * One successful acquire(): its grant and its place in the object's turns, which it keeps until its
 * own release() (never until the grant merely ends), so that release() gives back this grant and no
 * later one. Its expiry (refreshInterval 0, stopRefresh) releases this grant, never another's.
 */
class Turn {
  /** The grant was given back on purpose (release() or expiry): its end is not a loss. */
  endedOnPurpose = false;
  /** Ends the refresh loop on redis-semaphore's layout. */
  stopRefreshing: (() => void) | undefined;
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
 * redis-semaphore's option checks, with its messages: the identifier (a given one, the deprecated
 * externallyAcquiredIdentifier, or a random UUID with identifierSuffix after it) and whether the
 * first acquire adopts a grant another process took under that identifier.
 */
function checkOptions(options: LockOptions): { identifier: string; adopt: boolean } {
  const { identifier, acquiredExternally, externallyAcquiredIdentifier, identifierSuffix } = options;
  if (identifier !== undefined && (!identifier || typeof identifier !== 'string')) {
    throw new Error('identifier must be not empty random string');
  }
  if (acquiredExternally && !identifier) {
    throw new Error('acquiredExternally=true meanless without custom identifier');
  }
  if (externallyAcquiredIdentifier && (identifier || acquiredExternally)) {
    throw new Error('Invalid usage. Use custom identifier and acquiredExternally: true');
  }
  const random = randomUUID();
  return {
    identifier:
      identifier ||
      externallyAcquiredIdentifier ||
      (identifierSuffix ? `${random}-${identifierSuffix}` : random),
    adopt: !!acquiredExternally || !!externallyAcquiredIdentifier,
  };
}

/** redis-semaphore's argument checks, with its messages. */
function checkTarget(target: unknown, key: unknown, byMajority: boolean): void {
  if (byMajority && !isProvider(target) && (!target || !Array.isArray(target))) {
    throw new Error('"clients" array is required');
  }
  if (!target) throw new Error('"client" is required');
  if (!key) throw new Error('"key" is required');
  if (typeof key !== 'string') throw new Error('"key" must be a string');
}

/**
 * On fencekit's layout a grant is the request that won it (its queue place, its renewals): nothing
 * another process could adopt and keep safe. redis-semaphore's layout adopts (see #takeClassic).
 */
function refuseExternalAcquisition(): never {
  throw new InvalidArgumentError(
    'acquiredExternally',
    "a grant on fencekit's layout cannot be adopted from another process: acquire in the process that releases",
  );
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
