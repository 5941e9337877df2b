import { InvalidArgumentError, LockTimeoutError } from '../errors.js';
import {
  adapterAttempt,
  assertOpen,
  type GrantContext,
  type GrantRequest,
  grantTerms,
  HeldGrants,
  inspectRecipe,
  obtainGrant,
  type RecipeAdapter,
  refuseUnkeptLockDelay,
} from '../grant-loop.js';
import { PermitHandle } from './permit.js';
import type { Permit, PermitOptions, Semaphore, SemaphoreInfo, SemaphoreOptions } from './types.js';
import { validateLimit, validatePermitOptions, validateSemaphoreName } from './validate.js';

/** What an adapter is asked for: `permits` of `name`'s `limit`, waiting in the backend's queue if `wait`. */
export interface PermitRequest extends GrantRequest {
  name: string;
  limit: number;
  permits: number;
  /** Lock-delay of the grant (0 = none): a lost grant keeps its permits this long after the loss. */
  lockDelayMs: number;
}

/**
 * The backend part of a semaphore: its `request` contract is the shared loop's (RecipeAdapter),
 * with the permits not free as the busy answer. `inspect` answers the holders, waiters and
 * delayed permits (default none). A name stored with another limit is a
 * SemaphoreLimitMismatchError.
 */
export interface SemaphoreAdapter extends RecipeAdapter<PermitRequest, AdapterSemaphoreInfo> {}

/** What an adapter's inspect answers: the info without the name and limit; `delayed` may be left out. */
export type AdapterSemaphoreInfo = Omit<SemaphoreInfo, 'name' | 'limit' | 'delayed'> &
  Partial<Pick<SemaphoreInfo, 'delayed'>>;

/** What the provider lends its semaphores: the context of the shared acquire loop. */
export type SemaphoreContext = GrantContext;

/**
 * Everything semaphores share across backends: validation and withPermit here; waitMs, signals,
 * outages, born-lost grants and close in the shared acquire loop (src/grant-loop.ts). Adapters
 * implement SemaphoreAdapter only.
 */
export class GenericSemaphore implements Semaphore {
  readonly name: string;
  readonly limit: number;
  readonly #ctx: SemaphoreContext;
  readonly #adapter: SemaphoreAdapter;
  /** Granted, not yet released: released when the provider closes. */
  readonly #held: HeldGrants;

  constructor(name: string, options: SemaphoreOptions, ctx: SemaphoreContext, adapter: SemaphoreAdapter) {
    this.name = validateSemaphoreName(name);
    this.limit = validateLimit(options);
    this.#ctx = ctx;
    this.#adapter = adapter;
    this.#held = new HeldGrants(ctx);
  }

  async acquire(opts?: PermitOptions): Promise<Permit> {
    const permit = await this.#obtain(opts, true);
    if (permit === null) throw new LockTimeoutError(this.name, 0);
    return permit;
  }

  tryAcquire(opts?: Omit<PermitOptions, 'waitMs'>): Promise<Permit | null> {
    return this.#obtain(opts, false);
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
    const info = await inspectRecipe(this.#ctx, this.#adapter, `inspect semaphore "${this.name}"`);
    return { name: this.name, limit: this.limit, ...info, delayed: info.delayed ?? [] };
  }

  async #obtain(opts: PermitOptions | undefined, wait: boolean): Promise<Permit | null> {
    const options = validatePermitOptions(opts, this.limit, this.#ctx);
    refuseUnkeptLockDelay(
      options.lockDelayMs,
      this.#adapter.keepsLockDelay,
      `${this.#ctx.backend} semaphores`,
    );
    assertOpen(this.#ctx);
    const request: PermitRequest = {
      name: this.name,
      limit: this.limit,
      permits: options.permits,
      ...grantTerms(options),
    };
    const lock = await obtainGrant(this.#ctx, {
      name: this.name,
      what: `acquire permit of "${this.name}"`,
      kind: 'semaphore',
      options,
      wait,
      ...adapterAttempt(this.#adapter, request),
    });
    if (lock === null) return null;
    this.#held.add(lock);
    return new PermitHandle(lock, options.permits);
  }
}
