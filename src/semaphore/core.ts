import { jitteredDelays, sleepUnlessWoken } from '../backoff.js';
import { AbortError, BackendUnavailableError, InvalidArgumentError, LockTimeoutError } from '../errors.js';
import type { OwnedLock } from '../ownership.js';
import { linkSignals } from '../signals.js';
import type { ProviderTelemetry } from '../telemetry/telemetry.js';
import { longTimeout } from '../timers.js';
import { withDeadline } from './deadline.js';
import { PermitHandle } from './permit.js';
import type { Permit, PermitOptions, Semaphore, SemaphoreInfo, SemaphoreOptions } from './types.js';
import { validateLimit, validatePermitOptions, validateSemaphoreName } from './validate.js';

/** What an adapter is asked for: `permits` of `name`'s `limit`, waiting in the backend's queue if `wait`. */
export interface PermitRequest {
  name: string;
  limit: number;
  permits: number;
  ttlMs: number;
  /** Whether ttlMs was given (by the acquire or the provider's options) rather than defaulted. */
  ttlGiven: boolean;
  owner: string | undefined;
  /** Unique per request (and so per grant): the backend's id of the grant. */
  ownerToken: string;
  wait: boolean;
}

/**
 * The backend part of a semaphore. `request` contract (as for locks): resolve with the grant, or
 * null when `wait` is false and the permits are not free. `cancel` is the request's one signal
 * (caller, waitMs, provider close): race every backend call against it and callTimeoutMs
 * (withDeadline); when it aborts, leave the queue (and give back a grant that raced in), then reject.
 * An unreachable backend is a BackendUnavailableError, promptly: the wait is retried here.
 * A name stored with another limit is a SemaphoreLimitMismatchError.
 */
export interface SemaphoreAdapter {
  request(req: PermitRequest, cancel: AbortSignal): Promise<OwnedLock | null>;
  /** Holders and waiters; `signal` carries the caller's deadline. */
  inspect(signal: AbortSignal): Promise<Omit<SemaphoreInfo, 'name' | 'limit'>>;
  /** Whether the backend is reachable as far as the adapter knows: a wait that runs out while it
   * is not ends with BackendUnavailableError instead of a timeout. Default: reachable. */
  reachable?(): boolean;
  /** Whether the backend answered before (in process: always). Default: tracked per provider here. */
  reached?(): boolean;
}

/** What the provider lends its semaphores. */
export interface SemaphoreContext {
  backend: string;
  ttlMs: number;
  /** The provider's options gave ttlMs (rather than the built-in default). */
  ttlGiven?: boolean;
  /** Told of a granted request's given ttlMs: the provider says once if it cannot honour it. */
  noteTtl?: (ttlMs: number) => void;
  waitMs: number;
  callTimeoutMs: number;
  /** The provider's close signal: fails waiters, releases permits. */
  closeSignal: AbortSignal;
  /** Hands close() work to wait for (bounded there): pending requests, releases on close. */
  track?: (work: Promise<unknown>) => void;
  /** The provider's metrics, events and logs: permits count as grants of kind 'semaphore'. */
  telemetry?: ProviderTelemetry;
}

const TIMED_OUT = Symbol('timed out');

/**
 * Providers (by their close signal) whose backend answered a semaphore call: from then on, outages
 * are ridden through. Shared by every semaphore of a provider, as the base provider's flag is by
 * its locks.
 */
const reachedProviders = new WeakSet<AbortSignal>();

/**
 * Everything semaphores share across backends: validation, waitMs and signals (one derived signal
 * per request), riding through outages, never handing out a permit already lost, releasing held
 * permits on the provider's close, withPermit. Adapters implement SemaphoreAdapter only.
 */
export class GenericSemaphore implements Semaphore {
  readonly name: string;
  readonly limit: number;
  readonly #ctx: SemaphoreContext;
  readonly #adapter: SemaphoreAdapter;
  /** Granted, not yet released: released when the provider closes. */
  readonly #held = new Set<OwnedLock>();
  readonly #onClose = (): void => {
    for (const lock of this.#held) {
      const released = lock.release().catch(() => undefined);
      this.#ctx.track?.(released); // close() waits for it before the connections go
    }
  };

  constructor(name: string, options: SemaphoreOptions, ctx: SemaphoreContext, adapter: SemaphoreAdapter) {
    this.name = validateSemaphoreName(name);
    this.limit = validateLimit(options);
    this.#ctx = ctx;
    this.#adapter = adapter;
  }

  async acquire(opts?: PermitOptions): Promise<Permit> {
    const permit = await this.#observed(opts, true);
    if (permit === null) throw new LockTimeoutError(this.name, 0);
    return permit;
  }

  tryAcquire(opts?: Omit<PermitOptions, 'waitMs'>): Promise<Permit | null> {
    return this.#observed(opts, false);
  }

  async withPermit<T>(fn: (permit: Permit) => Promise<T>, opts?: PermitOptions): Promise<T> {
    if (typeof fn !== 'function') {
      throw new InvalidArgumentError('fn', `withPermit needs the function to run, got ${typeof fn}`);
    }
    const permit = await this.acquire(opts);
    try {
      return await fn(permit);
    } finally {
      // A failed release leaves a lease that expires; fn's outcome matters more.
      await permit.release().catch(() => undefined);
    }
  }

  async inspect(): Promise<SemaphoreInfo> {
    this.#assertOpen();
    const info = await withDeadline(
      (signal) => this.#adapter.inspect(signal),
      this.#ctx.callTimeoutMs,
      this.#ctx.closeSignal,
      `inspect semaphore "${this.name}"`,
    );
    reachedProviders.add(this.#ctx.closeSignal);
    return { name: this.name, limit: this.limit, ...info };
  }

  #reached(): boolean {
    return this.#adapter.reached?.() ?? reachedProviders.has(this.#ctx.closeSignal);
  }

  #assertOpen(): void {
    if (this.#ctx.closeSignal.aborted) throw this.#ctx.closeSignal.reason;
  }

  /** #obtain, timed and counted when the provider has telemetry (no extra await). */
  #observed(opts: PermitOptions | undefined, wait: boolean): Promise<Permit | null> {
    const telemetry = this.#ctx.telemetry;
    if (!telemetry) return this.#obtain(opts, wait);
    const done = telemetry.waitStarted(
      'semaphore',
      this.name,
      wait && (opts?.waitMs ?? this.#ctx.waitMs) !== 0,
    );
    const obtaining = this.#obtain(opts, wait);
    obtaining.then(done, done);
    return obtaining;
  }

  async #obtain(opts: PermitOptions | undefined, wait: boolean): Promise<Permit | null> {
    const options = validatePermitOptions(opts, this.limit, this.#ctx);
    this.#assertOpen();
    const what = `acquire permit of "${this.name}"`;
    if (options.signal?.aborted) throw new AbortError(what, options.signal.reason);
    const shouldWait = wait && options.waitMs > 0;
    const linked = linkSignals([options.signal, this.#ctx.closeSignal]);
    const cancelTimer =
      shouldWait && Number.isFinite(options.waitMs)
        ? longTimeout(() => linked.abort(TIMED_OUT), options.waitMs)
        : undefined;
    const cancel = linked.signal;
    const request: PermitRequest = {
      name: this.name,
      limit: this.limit,
      permits: options.permits,
      ttlMs: options.ttlMs,
      ttlGiven: options.ttlGiven,
      owner: options.owner,
      ownerToken: crypto.randomUUID(),
      wait: shouldWait,
    };
    const delays = jitteredDelays({ initialMs: 50, maxMs: Math.max(50, this.#ctx.callTimeoutMs / 2) });
    let unavailable: BackendUnavailableError | undefined;
    const cancelled = (): Error => {
      const reason: unknown = cancel.reason;
      if (reason === this.#ctx.closeSignal.reason) return reason as Error;
      if (reason !== TIMED_OUT) return new AbortError(what, reason);
      if (unavailable) return unavailable;
      if (this.#adapter.reachable?.() === false) {
        return new BackendUnavailableError(
          `the ${this.#ctx.backend} backend did not answer within ${options.waitMs} ms (${what})`,
        );
      }
      return new LockTimeoutError(this.name, options.waitMs);
    };
    try {
      for (;;) {
        let lock: OwnedLock | null;
        try {
          const requested = this.#adapter.request(request, cancel);
          this.#ctx.track?.(requested); // close() lets it take its queue entry back first
          lock = await requested;
        } catch (error) {
          if (cancel.aborted) throw cancelled();
          // Ride through an outage while there is time to wait, once the backend was reached at all.
          if (error instanceof BackendUnavailableError && shouldWait && this.#reached()) {
            unavailable = error;
            await sleepUnlessWoken(delays.next().value, cancel).done.catch(() => undefined);
            if (cancel.aborted) throw cancelled();
            continue;
          }
          throw error;
        }
        reachedProviders.add(this.#ctx.closeSignal);
        unavailable = undefined;
        if (lock === null) return null;
        if (!lock.held) {
          // Born lost (its answer came after the lease could have passed on): not a grant.
          await lock.release().catch(() => undefined);
          if (!shouldWait) return null;
          if (cancel.aborted) throw cancelled();
          continue;
        }
        if (this.#ctx.closeSignal.aborted) {
          await lock.release().catch(() => undefined);
          throw this.#ctx.closeSignal.reason;
        }
        this.#track(lock);
        this.#ctx.telemetry?.granted(lock, 'semaphore', this.name, options.owner);
        if (options.ttlGiven) this.#ctx.noteTtl?.(options.ttlMs);
        return new PermitHandle(lock, options.permits);
      }
    } finally {
      cancelTimer?.();
      linked.dispose();
    }
  }

  // Listens to the provider's close only while something is held: semaphores are cheap to create.
  #track(lock: OwnedLock): void {
    if (this.#held.size === 0) {
      this.#ctx.closeSignal.addEventListener('abort', this.#onClose, { once: true });
    }
    this.#held.add(lock);
    lock.onRelease(() => {
      this.#held.delete(lock);
      if (this.#held.size === 0) this.#ctx.closeSignal.removeEventListener('abort', this.#onClose);
    });
  }
}
