import { EventEmitter } from 'node:events';
import { InvalidArgumentError, LockTimeoutError } from '../../errors.js';
import { checkedOnRead } from '../../signals.js';
import type { LockProvider } from '../../types.js';
import { isProvider, openProvider } from '../provider-from-clients.js';
import {
  ExecutionError,
  type ExecutionStats,
  failedAttempt,
  grantedAttempt,
  LockError,
  ResourceLockedError,
} from './errors.js';
import { Grant } from './grant.js';
import { Lock, withCallback } from './lock.js';
import {
  checkDuration,
  DEFAULT_SETTINGS,
  expirationOf,
  mergeSettings,
  type Settings,
  waitWindowMs,
} from './settings.js';

/** redlock's signal in `using`: aborted when the lock is lost, with the reason in `error`. */
export type RedlockAbortSignal = AbortSignal & { error?: Error };

/**
 * redlock's API (v5, and v4's names) over any fencekit provider — `new Redlock(provider)` — or over
 * Redis clients as redlock takes them (one client: a Redis lock; three or more: Redlock). A waiter
 * queues for the key for redlock's retry window (retryCount × retryDelay) instead of polling, and
 * each lock carries the fencing token of its grant.
 */
export class Redlock extends EventEmitter {
  static readonly LockError = LockError;
  static readonly Lock = Lock;
  readonly settings: Settings;
  readonly #provider: Promise<LockProvider>;
  /** The clients it was given (quit() quits them, as redlock does); none over a provider. */
  readonly #clients: unknown[];

  constructor(target: LockProvider | Iterable<unknown>, settings: Partial<Settings> = {}) {
    super();
    this.settings = mergeSettings(DEFAULT_SETTINGS, settings);
    this.#clients = isProvider(target) ? [] : [...target];
    this.#provider = isProvider(target) ? Promise.resolve(target) : openProvider(this.#clients);
    this.#provider.catch(() => undefined); // reported by the first call that needs it
  }

  /** The provider the locks are taken on. */
  provider(): Promise<LockProvider> {
    return this.#provider;
  }

  /**
   * v5: acquire(resources, duration, settings?). v4: acquire/lock(resource, ttl, callback?), where
   * resource may be a string.
   */
  acquire(
    resources: string | string[],
    duration: number,
    settingsOrCallback?: Partial<Settings> | ((error: Error | null, lock?: Lock) => void),
  ): Promise<Lock> {
    const callback = typeof settingsOrCallback === 'function' ? settingsOrCallback : undefined;
    const settings = typeof settingsOrCallback === 'object' ? settingsOrCallback : undefined;
    let merged: Settings;
    try {
      merged = mergeSettings(this.settings, settings);
    } catch (error) {
      return withCallback(Promise.reject(error), callback); // a refused setting rejects, as a bad duration does
    }
    return withCallback(this.#acquire(resources, duration, merged), callback);
  }

  /** v4 */
  lock(
    resource: string | string[],
    ttl: number,
    callback?: (error: Error | null, lock?: Lock) => void,
  ): Promise<Lock> {
    return this.acquire(resource, ttl, callback);
  }

  /**
   * Releases the lock's grant; rejects with ExecutionError when it was no longer held, or when the
   * backend did not confirm the delete (as redlock's release without a quorum: the lease then runs
   * out by itself, and the provider keeps retrying the delete).
   */
  async release(
    lock: Lock,
    _settings?: Partial<Settings>,
  ): Promise<{ attempts: ReadonlyArray<Promise<unknown>> }> {
    lock.expiration = 0;
    const grant = lock.grant;
    const wasHeld = !grant.released && grant.held;
    const failed = await grant.release().then(
      () => undefined,
      (error: unknown) => error,
    );
    const provider = await this.#provider;
    if (!wasHeld) {
      const against = new ResourceLockedError('The lock was no longer held (released, expired or lost).');
      throw new ExecutionError('The operation was unable to achieve a quorum during its retry window.', [
        failedAttempt(provider, against),
      ]);
    }
    if (failed !== undefined) {
      const against = failed instanceof Error ? failed : new Error('The delete failed.', { cause: failed });
      throw new ExecutionError(
        'The operation was unable to achieve a quorum during its retry window.',
        [failedAttempt(provider, against)],
        { cause: failed },
      );
    }
    return { attempts: [this.#granted(provider)] };
  }

  /** v4 */
  unlock(lock: Lock, callback?: (error: Error | null) => void): Promise<unknown> {
    return withCallback(this.release(lock), callback);
  }

  /**
   * A new Lock on the same grant that expires `duration` from now; the old one's expiration turns 0
   * (v5). Rejects when the lock has expired or was lost.
   */
  async extend(existing: Lock, duration: number, settings?: Partial<Settings>): Promise<Lock> {
    const merged = mergeSettings(this.settings, settings);
    checkDuration(duration, merged);
    const grant = existing.grant;
    if (grant.released || !grant.held) {
      const reason = new ResourceLockedError('The lock was lost before it was extended.');
      throw new ExecutionError('The operation was unable to achieve a quorum during its retry window.', [
        failedAttempt(await this.#provider, reason),
      ]);
    }
    // Nothing is asked of the server (the provider renews the grant while it is held): the new
    // expiration counts from now, and everything from here to the return runs without a pause.
    const now = Date.now();
    if (existing.expiration < now) throw new ExecutionError('Cannot extend an already-expired lock.', []);
    existing.expiration = 0;
    const expiration = expirationOf(now, duration, merged);
    grant.expireAt(expiration);
    return new Lock(this, existing.resources, existing.value, existing.attempts, expiration, grant);
  }

  /**
   * Runs routine while holding the resources, then releases them. The lock is kept (renewed by the
   * provider) for as long as routine runs; `signal` aborts, with `signal.error`, if it is lost. When
   * the final delete of a lock still held fails, it rejects with that ExecutionError, as redlock's
   * release in its `finally` does; a lock lost meanwhile is released quietly (its routine was told).
   */
  using<T>(
    resources: string[],
    duration: number,
    routine: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T>;
  using<T>(
    resources: string[],
    duration: number,
    settings: Partial<Settings>,
    routine: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T>;
  async using<T>(
    resources: string[],
    duration: number,
    settingsOrRoutine: Partial<Settings> | ((signal: RedlockAbortSignal) => Promise<T>),
    maybeRoutine?: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T> {
    const settings = mergeSettings(
      this.settings,
      typeof settingsOrRoutine === 'function' ? undefined : settingsOrRoutine,
    );
    checkDuration(duration, settings);
    const routine = maybeRoutine ?? settingsOrRoutine;
    if (typeof routine !== 'function') throw new TypeError('routine is not a function');
    if (settings.automaticExtensionThreshold > duration - 100) {
      throw new InvalidArgumentError(
        'duration',
        'must be at least 100 ms greater than the `automaticExtensionThreshold` setting',
      );
    }
    const lock = await this.#acquire(resources, duration, settings);
    lock.grant.expireAt(undefined); // held while the routine runs, as redlock's auto-extension does
    const controller = new AbortController();
    const signal = controller.signal as RedlockAbortSignal;
    const onLost = () => {
      if (lock.grant.released) return;
      signal.error = new ExecutionError('The lock was lost while the routine ran.', [], {
        cause: lock.grant.signal.reason,
      });
      controller.abort(signal.error);
    };
    lock.grant.signal.addEventListener('abort', onLost, { once: true });
    // A read of the routine's signal reads the grant's, which checks the deadline: see checkedOnRead.
    checkedOnRead(signal, () => void lock.grant.signal.aborted);
    if (lock.grant.signal.aborted) onLost(); // lost before we listened: the routine sees it at once
    try {
      return await routine(signal);
    } finally {
      lock.grant.signal.removeEventListener('abort', onLost);
      if (lock.grant.held) await this.release(lock);
      else await lock.grant.release().catch(() => undefined); // lost: the routine was told through its signal
    }
  }

  /** Closes the provider, as redlock quits its clients. */
  async quit(callback?: (error: Error | null) => void): Promise<void> {
    const closing = this.#provider.then(async (provider) => {
      await provider.close();
      await Promise.all(this.#clients.map((client) => quitClient(client)));
    });
    return withCallback(closing, callback);
  }

  /** The one attempt of every successful operation (the same, so none is built per lock). */
  #grantedStats: Promise<ExecutionStats> | undefined;
  #granted(provider: LockProvider): Promise<ExecutionStats> {
    this.#grantedStats ??= grantedAttempt(provider);
    return this.#grantedStats;
  }

  async #acquire(resources: string | string[], duration: number, settings: Settings): Promise<Lock> {
    checkDuration(duration, settings);
    const names = Array.isArray(resources) ? resources : [resources];
    const provider = await this.#provider;
    let grant: Grant;
    try {
      grant = await Grant.take(provider, names, duration, waitWindowMs(settings));
    } catch (error) {
      const reason =
        error instanceof LockTimeoutError
          ? new ResourceLockedError(`The resource was held by another lock: ${error.message}`)
          : (error as Error);
      throw new ExecutionError(
        'The operation was unable to achieve a quorum during its retry window.',
        [failedAttempt(provider, reason)],
        { cause: error },
      );
    }
    // From the grant, not from the call: time spent queued is not taken out of the lock's duration
    // (else a wait longer than `duration` hands out a lock that releases itself at once). redlock's
    // key likewise lives `duration` from the attempt that set it. The grant's own lease started
    // earlier, with the request that won it; the provider renews it while it is held, and `held`
    // (so `expiration`, which reads 0 once the grant is gone) turns false by that lease's deadline.
    const expiration = expirationOf(Date.now(), duration, settings);
    grant.expireAt(expiration);
    const value = [...grant.locks.values()][0]?.ownerToken ?? '';
    return new Lock(this, names, value, [this.#granted(provider)], expiration, grant);
  }
}

async function quitClient(client: unknown): Promise<void> {
  const c = client as { quit?: () => Promise<unknown>; close?: () => Promise<unknown> };
  await (c.close ?? c.quit)?.call(c).catch(() => undefined);
}
