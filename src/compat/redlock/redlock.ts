import { EventEmitter } from 'node:events';
import { withinGrace } from '../../cancel-grace.js';
import { callWithin } from '../../deadline.js';
import { InvalidArgumentError, LockTimeoutError } from '../../errors.js';
import { checkedOnRead } from '../../signals.js';
import { abortableDelay } from '../../timers.js';
import type { LockProvider } from '../../types.js';
import { isProvider, openProvider, sharedProvider } from '../provider-from-clients.js';
import { ClassicGrant, ClassicRedlock, checkIntegerDuration } from './classic.js';
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
 * Which keys the facade takes over Redis clients. 'redlock' (the default): redlock's own keys and
 * protocol, so replicas still running redlock and replicas running the facade exclude each other
 * during a rolling upgrade. 'fencekit': fencekit's layout (a fair queue, hand-over on release),
 * which redlock's replicas do not see: switch only once the last of them is gone.
 */
export type RedlockLayout = 'redlock' | 'fencekit';

/**
 * redlock's API (v5, and v4's names) over Redis clients as redlock takes them, or over any fencekit
 * provider — `new Redlock(provider)`. Over clients it speaks redlock's protocol (see classic.ts)
 * unless `{ layout: 'fencekit' }`: then one client is a Redis lock, three or more are Redlock, and a
 * waiter queues for redlock's retry window (retryCount × retryDelay) instead of polling. Each lock
 * carries the fencing token of its grant either way.
 */
export class Redlock extends EventEmitter {
  static readonly LockError = LockError;
  static readonly Lock = Lock;
  readonly settings: Settings;
  readonly #provider: Promise<LockProvider> | undefined;
  /** redlock's protocol on the clients (the default over clients); undefined over a provider. */
  readonly #classic: ClassicRedlock | undefined;
  /** The clients it was given (quit() quits them, as redlock does); none over a provider. */
  readonly #clients: unknown[];
  /** Aborted by quit(): ends the calls on redlock's layout still under way. */
  readonly #closing = new AbortController();
  /** Acquires and extensions on redlock's layout under way: quit() lets them give back their keys. */
  readonly #inFlight = new Set<Promise<unknown>>();

  constructor(
    target: LockProvider | Iterable<unknown>,
    settings: Partial<Settings> & { layout?: RedlockLayout } = {},
  ) {
    super();
    // redlock reports every vote against as 'error' and listens itself, so none crashes the app.
    this.on('error', () => undefined);
    this.settings = mergeSettings(DEFAULT_SETTINGS, settings);
    this.#clients = isProvider(target) ? [] : [...target];
    if (!isProvider(target) && this.#clients.length === 0) {
      throw new Error('Redlock must be instantiated with at least one redis client.');
    }
    const layout = settings.layout ?? 'redlock';
    if (layout !== 'redlock' && layout !== 'fencekit') {
      throw new InvalidArgumentError('settings.layout', "must be 'redlock' or 'fencekit'");
    }
    if (!isProvider(target) && layout === 'redlock') {
      this.#classic = new ClassicRedlock(this.#clients, (error) => this.emit('error', error));
      return;
    }
    // One client: the provider every facade object over it shares, closed when the client ends (an
    // app that quits its client without quit() here keeps no connection or renewal alive).
    this.#provider = isProvider(target)
      ? Promise.resolve(target)
      : this.#clients.length === 1
        ? sharedProvider(this.#clients[0])
        : openProvider(this.#clients);
    this.#provider.catch(() => undefined); // reported by the first call that needs it
  }

  /** The provider the locks are taken on; rejects for redlock's layout, which has none. */
  provider(): Promise<LockProvider> {
    return (
      this.#provider ??
      Promise.reject(new InvalidArgumentError('layout', "redlock's layout takes no fencekit provider"))
    );
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
    const expiresAt = lock.expiration;
    lock.expiration = 0;
    const grant = lock.grant;
    if (grant instanceof ClassicGrant && this.#classic) {
      grant.stop(); // the work stops at once; the keys are deleted below, with redlock's retries
      // Retried until the lock's expiration at most: its keys are gone by then (one attempt at least).
      return this.#classic.release(
        lock.resources,
        lock.value,
        mergeSettings(this.settings, _settings),
        expiresAt,
      );
    }
    const wasHeld = !grant.released && grant.held;
    const failed = await grant.release().then(
      () => undefined,
      (error: unknown) => error,
    );
    const provider = await this.provider();
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
    const grant = existing.grant;
    if (grant instanceof ClassicGrant && this.#classic) {
      checkIntegerDuration(duration);
      const startedAt = Date.now();
      if (existing.expiration < startedAt) {
        throw new ExecutionError('Cannot extend an already-expired lock.', []);
      }
      const { attempts, expiration } = await this.#tracked(
        this.#classic.extend(
          grant,
          existing.resources,
          existing.value,
          duration,
          merged,
          existing.expiration,
          this.#closing.signal,
        ),
      );
      existing.expiration = 0;
      return new Lock(this, existing.resources, existing.value, attempts, expiration, grant);
    }
    checkDuration(duration, merged);
    if (grant.released || !grant.held) {
      const reason = new ResourceLockedError('The lock was lost before it was extended.');
      throw new ExecutionError('The operation was unable to achieve a quorum during its retry window.', [
        failedAttempt(await this.provider(), reason),
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
    if (this.#classic) checkIntegerDuration(duration);
    else checkDuration(duration, settings);
    const routine = maybeRoutine ?? settingsOrRoutine;
    if (typeof routine !== 'function') throw new TypeError('routine is not a function');
    if (settings.automaticExtensionThreshold > duration - 100) {
      throw new Error(
        'A lock `duration` must be at least 100ms greater than the `automaticExtensionThreshold` setting.',
      );
    }
    if (this.#classic) return this.#usingClassic(resources, duration, settings, routine);
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

  /**
   * Closes the provider, as redlock quits its clients: calls under way on redlock's layout end at
   * once (their keys are given back where the clients still answer), and each client gets
   * QUIT_MS to quit before it is disconnected.
   */
  async quit(callback?: (error: Error | null) => void): Promise<void> {
    this.#closing.abort(new ExecutionError('The Redlock was quit while the operation ran.', []));
    const closing = (async () => {
      // The cancelled calls give back their keys before the clients go (else a lock nobody holds
      // stays set for its whole duration), within QUIT_MS.
      await settledWithin([...this.#inFlight], QUIT_MS);
      if (this.#provider) await (await this.#provider).close();
      await Promise.all(this.#clients.map((client) => quitClient(client)));
    })();
    return withCallback(closing, callback);
  }

  /** The one attempt of every successful operation (the same, so none is built per lock). */
  #grantedStats: Promise<ExecutionStats> | undefined;
  #granted(provider: LockProvider): Promise<ExecutionStats> {
    this.#grantedStats ??= grantedAttempt(provider);
    return this.#grantedStats;
  }

  /**
   * redlock's `using` on its own keys: extends the lock automaticExtensionThreshold before it
   * expires, again at once while a failed extension leaves time; the routine's signal aborts, with
   * `signal.error`, when no extension came in time or the grant's deadline passed.
   */
  async #usingClassic<T>(
    resources: string[],
    duration: number,
    settings: Settings,
    routine: (signal: RedlockAbortSignal) => Promise<T>,
  ): Promise<T> {
    let lock = await this.#acquire(resources, duration, settings);
    const controller = new AbortController();
    const signal = controller.signal as RedlockAbortSignal;
    const abort = (error: Error) => {
      if (signal.aborted) return;
      signal.error = error;
      controller.abort(error);
    };
    let finished = false;
    let timer: NodeJS.Timeout | undefined;
    let extension: Promise<void> | undefined;
    const extend = async (): Promise<void> => {
      timer = undefined;
      try {
        lock = await lock.extend(duration);
        if (!finished) schedule();
      } catch (error) {
        // Again after retryDelay while time is left, never at once (a client that fails without
        // answering would spin), and not after quit().
        const closing = this.#closing.signal;
        if (!finished && !closing.aborted && lock.expiration > Date.now() + settings.retryDelay) {
          const paused = await abortableDelay(settings.retryDelay, closing).then(
            () => true,
            () => false,
          );
          if (paused && !finished && lock.expiration > Date.now()) return extend();
        }
        abort(error instanceof Error ? error : new Error(String(error)));
      }
    };
    const schedule = () => {
      timer = setTimeout(
        () => {
          extension = extend();
        },
        lock.expiration - Date.now() - settings.automaticExtensionThreshold,
      );
      timer.unref(); // the routine keeps the process alive while it runs, not this timer
    };
    const onLost = () =>
      abort(
        new ExecutionError('The lock was lost while the routine ran.', [], {
          cause: lock.grant.signal.reason,
        }),
      );
    const grantSignal = lock.grant.signal;
    grantSignal.addEventListener('abort', onLost, { once: true });
    checkedOnRead(signal, () => void lock.grant.signal.aborted);
    if (grantSignal.aborted) onLost();
    schedule();
    try {
      return await routine(signal);
    } finally {
      finished = true;
      clearTimeout(timer);
      grantSignal.removeEventListener('abort', onLost);
      await extension?.catch(() => undefined); // the release below runs either way
      await lock.release();
    }
  }

  /** The call, counted among those quit() waits for until it settles. */
  #tracked<T>(call: Promise<T>): Promise<T> {
    const settled = call.then(
      () => undefined,
      () => undefined,
    );
    this.#inFlight.add(settled);
    void settled.then(() => this.#inFlight.delete(settled));
    return call;
  }

  async #acquire(resources: string | string[], duration: number, settings: Settings): Promise<Lock> {
    const names = Array.isArray(resources) ? resources : [resources];
    if (this.#classic) {
      const { value, grant, attempts, expiration } = await this.#tracked(
        this.#classic.acquire(names, duration, settings, this.#closing.signal),
      );
      return new Lock(this, names, value, attempts, expiration, grant);
    }
    checkDuration(duration, settings);
    const provider = await this.provider();
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

/** How long a client may take to quit (QUIT answered) before it is disconnected. */
const QUIT_MS = 2_000;

/** Quits a client (ioredis quit(), node-redis close() or quit()), bounded: then disconnects it. */
async function quitClient(client: unknown): Promise<void> {
  const c = client as {
    quit?: () => Promise<unknown>;
    close?: () => Promise<unknown>;
    disconnect?: () => unknown;
    destroy?: () => unknown;
  };
  const quitting = Promise.resolve((c.close ?? c.quit)?.call(c)).then(
    () => true,
    () => true, // already closed, or the connection failed: nothing more to wait for
  );
  const quit = await callWithin(quitting, { timeoutMs: QUIT_MS, what: 'quit' }).catch(
    () => false, // no answer within QUIT_MS: disconnected below
  );
  if (!quit) (c.disconnect ?? c.destroy)?.call(c);
}

/** Waits until every call settled, or ms passed. */
async function settledWithin(calls: Promise<unknown>[], ms: number): Promise<void> {
  if (calls.length === 0) return;
  await withinGrace(Promise.all(calls), ms);
}
