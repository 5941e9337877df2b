import type { Lock as FencekitLock } from '../../types.js';
import type { ExecutionStats } from './errors.js';

/** What a Lock stands on: fencekit grants (Grant) or the original's keys (ClassicGrant). */
export interface LockGrant {
  readonly locks: ReadonlyMap<string, FencekitLock>;
  readonly signal: AbortSignal;
  readonly held: boolean;
  readonly released: boolean;
  /** Releases at `at` (ms since the epoch) unless moved or released before; undefined: never. */
  expireAt(at: number | undefined): void;
  release(): Promise<void>;
}

/** What a Lock calls back on (the Redlock that made it). */
export interface LockOwner {
  release(lock: Lock): Promise<unknown>;
  extend(lock: Lock, duration: number): Promise<Lock>;
}

/**
 * redlock's Lock (v5 fields and methods, and v4's `resource`, `unlock`), plus the fencing tokens
 * of its grant: `fencingToken` is that of the first resource asked for, `fencingTokens` has each.
 */
export class Lock {
  /** @internal */
  readonly grant: LockGrant;
  #tokens: ReadonlyMap<string, bigint> | undefined;
  #expiration: number;

  constructor(
    readonly redlock: LockOwner,
    readonly resources: string[],
    readonly value: string,
    readonly attempts: ReadonlyArray<Promise<ExecutionStats>>,
    expiration: number,
    grant: LockGrant,
  ) {
    this.grant = grant;
    this.#expiration = expiration;
  }

  /**
   * ms since the epoch after which the lock is no longer held; 0 once released or extended, and as
   * soon as its grant is lost (an app that checks `expiration > Date.now()` never works on a lost lock).
   */
  get expiration(): number {
    return this.#expiration !== 0 && this.grant.held ? this.#expiration : 0;
  }

  set expiration(at: number) {
    this.#expiration = at;
  }

  /** Each resource's fencing token (built on first read: most callers never read it). */
  get fencingTokens(): ReadonlyMap<string, bigint> {
    this.#tokens ??= new Map([...this.grant.locks].map(([name, lock]) => [name, lock.fencingToken]));
    return this.#tokens;
  }

  /** v4's name for resources. */
  get resource(): string[] {
    return this.resources;
  }

  get fencingToken(): bigint {
    return (this.grant.locks.get(this.resources[0] as string) as { fencingToken: bigint }).fencingToken;
  }

  /** Aborted as soon as the lock is lost or released. */
  get signal(): AbortSignal {
    return this.grant.signal;
  }

  release(): Promise<unknown> {
    return this.redlock.release(this);
  }

  extend(duration: number, callback?: (error: Error | null, lock?: Lock) => void): Promise<Lock> {
    return withCallback(this.redlock.extend(this, duration), callback);
  }

  /** v4 */
  unlock(callback?: (error: Error | null) => void): Promise<unknown> {
    return withCallback(this.redlock.release(this), callback);
  }
}

/** v4's optional node-style callback beside the promise (as its bluebird `nodeify` did). */
export function withCallback<T>(
  promise: Promise<T>,
  callback?: (error: Error | null, value?: T) => void,
): Promise<T> {
  if (callback) {
    promise.then(
      (value) => callback(null, value),
      (error: Error) => callback(error),
    );
  }
  return promise;
}
