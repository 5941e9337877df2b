import { setMaxListeners } from 'node:events';
import { DEFAULT_DRIFT_RATE } from './clock.js';
import { AbortError, LockTimeoutError, ProviderClosedError } from './errors.js';
import type { OwnedLock } from './ownership.js';
import type { AcquireOptions, BackendName, Lock, LockInfo, LockProvider } from './types.js';
import { validateAcquireOptions, validateKey, validateTtlMs, validateWaitMs } from './validate.js';

/** What an adapter is asked for: one grant of `key`, waiting in the backend's queue if `wait`. */
export interface LockRequest {
  key: string;
  ttlMs: number;
  owner: string | undefined;
  ownerToken: string;
  wait: boolean;
  /** Backend-specific value to store with the grant instead of the owner record (election proposals). */
  payload?: string;
}

export interface ProviderDefaults {
  /** Lease length for acquires that give no ttlMs (per-lock-lease backends). Default 15 000 ms. */
  ttlMs?: number;
  /** How long acquire waits when it gives no waitMs. Default: without limit. */
  waitMs?: number;
  /** Clock-rate drift the loss signal allows for (0..0.5). Default 0.01 (1 %). */
  driftRate?: number;
}

const TIMED_OUT = Symbol('timed out');

/** A signal many waiting requests listen to at once is not a leak: no listener-count warning. */
function unlimitedListeners(controller: AbortController): AbortController {
  setMaxListeners(0, controller.signal);
  return controller;
}

/**
 * What every provider shares: validation, waitMs and AbortSignal handling, tracking what it holds so
 * close() releases it, and withLock. An adapter implements `request` and `inspect` only.
 *
 * `request` contract: resolve with the grant, or with null when `wait` is false and the key is busy.
 * When `cancel` aborts, remove the queue entry (and release a grant that raced in), then reject.
 */
export abstract class BaseLockProvider implements LockProvider {
  abstract readonly backend: BackendName;
  protected readonly ttlMs: number;
  protected readonly waitMs: number;
  protected readonly driftRate: number;
  readonly #held = new Set<OwnedLock>();
  /** Requests under way: each promise settles once its request has cleaned up after itself. */
  readonly #pending = new Set<Promise<unknown>>();
  /**
   * Aborted by close(). Requests with neither a signal nor a time limit share it (an
   * AbortController per acquire cost a third of the memory provider's time); the others get
   * their own controller, kept in #cancellers so that close() aborts it too.
   */
  readonly #closeController = unlimitedListeners(new AbortController());
  readonly #cancellers = new Set<AbortController>();
  #closing: Promise<void> | undefined;

  constructor(defaults: ProviderDefaults = {}) {
    this.ttlMs = defaults.ttlMs === undefined ? 15_000 : validateTtlMs(defaults.ttlMs, 'defaults.ttlMs');
    this.waitMs = defaults.waitMs === undefined ? Number.POSITIVE_INFINITY : validateWaitMs(defaults.waitMs);
    this.driftRate = defaults.driftRate ?? DEFAULT_DRIFT_RATE;
    if (!(this.driftRate >= 0 && this.driftRate <= 0.5)) {
      throw new RangeError(`driftRate must be within 0..0.5, got ${defaults.driftRate}`);
    }
  }

  protected abstract request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null>;
  protected abstract shutdown(): Promise<void>;
  abstract inspect(key: string): Promise<LockInfo | null>;

  get closed(): boolean {
    return this.#closing !== undefined;
  }

  async acquire(key: string, opts?: AcquireOptions): Promise<Lock> {
    const lock = await this.#obtain(key, opts, true);
    if (lock === null) throw new LockTimeoutError(key, 0);
    return lock;
  }

  /** acquire() that stores `payload` with the grant: how native elections campaign with a value. */
  protected async acquireWithPayload(
    key: string,
    payload: string,
    opts?: AcquireOptions,
  ): Promise<OwnedLock> {
    const lock = await this.#obtain(key, opts, true, payload);
    if (lock === null) throw new LockTimeoutError(key, 0);
    return lock;
  }

  tryAcquire(key: string, opts?: Omit<AcquireOptions, 'waitMs'>): Promise<Lock | null> {
    return this.#obtain(key, opts, false);
  }

  async withLock<T>(key: string, fn: (lock: Lock) => Promise<T>, opts?: AcquireOptions): Promise<T> {
    const lock = await this.acquire(key, opts);
    try {
      return await fn(lock);
    } finally {
      // A failed release leaves a grant that its lease (or session) ends; fn's outcome matters more.
      await lock.release().catch(() => undefined);
    }
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      const closed = new ProviderClosedError(this.backend);
      this.#closeController.abort(closed);
      for (const cancel of this.#cancellers) cancel.abort(closed);
      // Let cancelled requests take their queue entries back before the connections go.
      await Promise.allSettled(this.#pending);
      await Promise.allSettled([...this.#held].map((lock) => lock.release()));
      await this.shutdown();
    })();
    return this.#closing;
  }

  protected assertOpen(): void {
    if (this.closed) throw new ProviderClosedError(this.backend);
  }

  async #obtain(
    key: string,
    opts: AcquireOptions | undefined,
    wait: boolean,
    payload?: string,
  ): Promise<OwnedLock | null> {
    validateKey(key);
    const options = validateAcquireOptions(opts, { ttlMs: this.ttlMs, waitMs: this.waitMs });
    this.assertOpen();
    const shouldWait = wait && options.waitMs > 0;
    const userSignal = options.signal;
    if (userSignal?.aborted) throw new AbortError(`acquire("${key}")`, userSignal.reason);

    const timeLimited = shouldWait && Number.isFinite(options.waitMs);
    const own = userSignal || timeLimited ? new AbortController() : undefined;
    const cancel = own?.signal ?? this.#closeController.signal;
    const onUserAbort = () => own?.abort(userSignal?.reason);
    userSignal?.addEventListener('abort', onUserAbort, { once: true });
    const timer = timeLimited ? setTimeout(() => own?.abort(TIMED_OUT), options.waitMs) : undefined;
    if (own) this.#cancellers.add(own);
    const requested = this.request(
      {
        key,
        ttlMs: options.ttlMs,
        owner: options.owner,
        ownerToken: crypto.randomUUID(),
        wait: shouldWait,
        ...(payload === undefined ? {} : { payload }),
      },
      cancel,
    );
    this.#pending.add(requested);
    let lock: OwnedLock | null;
    try {
      lock = await requested;
    } catch (error) {
      if (!cancel.aborted) throw error;
      const reason: unknown = cancel.reason;
      if (reason === TIMED_OUT) throw new LockTimeoutError(key, options.waitMs);
      if (reason instanceof ProviderClosedError) throw reason;
      throw new AbortError(`acquire("${key}")`, reason);
    } finally {
      clearTimeout(timer);
      userSignal?.removeEventListener('abort', onUserAbort);
      if (own) this.#cancellers.delete(own);
      this.#pending.delete(requested);
    }
    if (lock === null) return null;
    if (this.closed) {
      await lock.release().catch(() => undefined);
      throw new ProviderClosedError(this.backend);
    }
    this.#track(lock);
    return lock;
  }

  // Its own method so the listener's closure keeps only the lock, not the request's state (signals,
  // options): a provider may hold many thousands of locks.
  #track(lock: OwnedLock): void {
    this.#held.add(lock);
    lock.onEnd(() => this.#held.delete(lock));
  }
}
