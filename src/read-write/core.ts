import { InvalidArgumentError, LockLostError, LockTimeoutError } from '../errors.js';
import {
  adapterAttempt,
  assertOpen,
  type GrantContext,
  type GrantRequest,
  grantTerms,
  HeldGrants,
  handOutMarginMs,
  inspectRecipe,
  obtainGrant,
  type RecipeAdapter,
  refuseUnkeptLockDelay,
} from '../grant-loop.js';
import type { AcquireOptions, Lock } from '../types.js';
import { validateAcquireOptions, validateKey } from '../validate.js';
import { ContinuedGrant } from './continuation.js';
import type { ReadOptions, ReadWriteInfo, ReadWriteLock } from './types.js';

/** Which grant a request asks for. */
export type ReadWriteMode = 'read' | 'write';

/** What an adapter is asked for: a read or the write of `name`, waiting in the backend's queue if `wait`. */
export interface ReadWriteRequest extends GrantRequest {
  name: string;
  mode: ReadWriteMode;
  /**
   * Lock-delay of the grant (0 = none): a lost grant is kept this long after the loss, a write
   * against everybody, a read against writers.
   */
  lockDelayMs: number;
}

/**
 * The backend part of a read-write lock: all an adapter writes. Its `request` contract is the
 * shared loop's (RecipeAdapter, src/grant-loop.ts, which also handles outages, born-lost grants,
 * close and telemetry); `inspect` answers the writer, the readers, the waiters and delays
 * (default none).
 *
 * What the backend must keep: one queue per name in request order; a read is granted when no write
 * request is before it, a write when no request at all is before it; a read `tryAcquire` answers
 * null while a write holds or waits. The fencing token is unique per name and a write's token is
 * greater than every token granted before it (a counter taken at grant time, or a queue position
 * such as a create revision, since everything before a write has ended when it is granted).
 * Downgrades are done here, above the adapter (ContinuedGrant): adapters never see them.
 */
export interface ReadWriteAdapter extends RecipeAdapter<ReadWriteRequest, AdapterReadWriteInfo> {}

/** What an adapter's inspect answers: the info without the name; `delayed` may be left out. */
export type AdapterReadWriteInfo = Omit<ReadWriteInfo, 'name' | 'delayed'> &
  Partial<Pick<ReadWriteInfo, 'delayed'>>;

/** Write handles this process handed out, and the grant each continues (for downgradeFrom). */
const writes = new WeakMap<
  Lock,
  { name: string; closeSignal: AbortSignal; grant: ContinuedGrant; ttlMs: number }
>();

/**
 * Everything read-write locks share across backends: validation, the shared acquire loop, close,
 * downgrades, withRead and withWrite. Adapters implement ReadWriteAdapter only.
 */
export class GenericReadWriteLock implements ReadWriteLock {
  readonly name: string;
  readonly #ctx: GrantContext;
  readonly #adapter: ReadWriteAdapter;
  /** Granted handles, not yet released: released when the provider closes. */
  readonly #held: HeldGrants;

  constructor(name: string, ctx: GrantContext, adapter: ReadWriteAdapter) {
    this.name = validateKey(name, 'name');
    this.#ctx = ctx;
    this.#adapter = adapter;
    this.#held = new HeldGrants(ctx);
  }

  async acquireRead(opts?: ReadOptions): Promise<Lock> {
    return granted(this.name, await this.#read(opts, true));
  }

  tryAcquireRead(opts?: Omit<ReadOptions, 'waitMs'>): Promise<Lock | null> {
    return this.#read(opts, false);
  }

  withRead<T>(fn: (lock: Lock) => Promise<T>, opts?: ReadOptions): Promise<T> {
    return this.#with('withRead', fn, () => this.acquireRead(opts));
  }

  async acquireWrite(opts?: AcquireOptions): Promise<Lock> {
    return granted(this.name, await this.#obtain('write', opts, true));
  }

  tryAcquireWrite(opts?: Omit<AcquireOptions, 'waitMs'>): Promise<Lock | null> {
    return this.#obtain('write', opts, false);
  }

  withWrite<T>(fn: (lock: Lock) => Promise<T>, opts?: AcquireOptions): Promise<T> {
    return this.#with('withWrite', fn, () => this.acquireWrite(opts));
  }

  async inspect(): Promise<ReadWriteInfo> {
    const info = await inspectRecipe(this.#ctx, this.#adapter, `inspect read-write lock "${this.name}"`);
    return { name: this.name, ...info, delayed: info.delayed ?? [] };
  }

  #read(opts: ReadOptions | undefined, wait: boolean): Promise<Lock | null> {
    if (opts?.downgradeFrom === undefined) return this.#obtain('read', opts, wait);
    const { downgradeFrom, ...rest } = opts;
    return this.#downgrade(downgradeFrom, rest);
  }

  async #with<T>(method: string, fn: (lock: Lock) => Promise<T>, acquire: () => Promise<Lock>): Promise<T> {
    if (typeof fn !== 'function') {
      throw new InvalidArgumentError('fn', `${method} needs the function to run, got ${typeof fn}`);
    }
    const lock = await acquire();
    try {
      return await fn(lock);
    } finally {
      // A failed release leaves a grant that its lease (or session) ends; fn's outcome matters more.
      await lock.release().catch(() => undefined);
    }
  }

  async #obtain(
    mode: 'read' | 'write',
    opts: AcquireOptions | undefined,
    wait: boolean,
  ): Promise<Lock | null> {
    const options = validateAcquireOptions(opts, this.#ctx);
    refuseUnkeptLockDelay(
      options.lockDelayMs,
      this.#adapter.keepsLockDelay,
      `${this.#ctx.backend} read-write locks`,
    );
    assertOpen(this.#ctx);
    const request: ReadWriteRequest = { name: this.name, mode, ...grantTerms(options) };
    const lock = await obtainGrant(this.#ctx, {
      name: this.name,
      what: `acquire ${mode} of "${this.name}"`,
      kind: mode === 'read' ? 'read-lock' : 'write-lock',
      options,
      wait,
      ...adapterAttempt(this.#adapter, request),
    });
    if (lock === null) return null;
    if (mode === 'read') {
      this.#held.add(lock);
      return lock;
    }
    // A write is handed out through a ContinuedGrant, so that a read can continue it.
    const grant = new ContinuedGrant(lock);
    const handle = grant.handle(lock.ownerToken);
    writes.set(handle, { name: this.name, closeSignal: this.#ctx.closeSignal, grant, ttlMs: options.ttlMs });
    this.#held.add(handle);
    return handle;
  }

  /** A read that continues a write grant we hold: granted at once, nothing asked of the backend. */
  async #downgrade(write: Lock, opts: AcquireOptions): Promise<Lock> {
    const options = validateAcquireOptions(opts, this.#ctx);
    if (options.lockDelayMs > 0) {
      // Nothing new is granted on the backend: if the grant is lost, the write's delay applies.
      throw new InvalidArgumentError('lockDelayMs', 'a downgrade continues the write: give the delay to it');
    }
    assertOpen(this.#ctx);
    const origin = writes.get(write);
    if (!origin || origin.name !== this.name || origin.closeSignal !== this.#ctx.closeSignal) {
      throw new InvalidArgumentError(
        'downgradeFrom',
        `expected a write grant of "${this.name}" from this provider`,
      );
    }
    if (!write.held) {
      const loss = write.signal.reason as LockLostError;
      // A released write handle may have ended the grant already: nothing to continue.
      if (loss.reason === 'released') {
        throw new InvalidArgumentError('downgradeFrom', `the write grant of "${this.name}" is not held`);
      }
      throw loss;
    }
    // About to be lost, as the acquire loop judges a new grant (by the write's own TTL): the read
    // would reach the caller already lost. The write stays the caller's to release.
    if (!origin.grant.heldFor(handOutMarginMs(origin.ttlMs))) {
      throw new LockLostError(write.key, write.fencingToken, 'unconfirmed');
    }
    const handle = origin.grant.handle(crypto.randomUUID());
    this.#held.add(handle);
    this.#ctx.telemetry?.granted(handle, 'read-lock', this.name, options.owner);
    return handle;
  }
}

function granted(name: string, lock: Lock | null): Lock {
  if (lock === null) throw new LockTimeoutError(name, 0);
  return lock;
}
