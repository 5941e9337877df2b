import type { AcquireOptions, HolderInfo, Lock } from '../lock-types.js';

/** Options of `provider.semaphore(name, options)`. */
export interface SemaphoreOptions {
  /** How many permits exist under this name: an integer 1..10,000, the same in every process. */
  limit: number;
}

/** Options of a semaphore's `acquire`, `tryAcquire` and `withPermit`: those of a lock, and `permits`. */
export interface PermitOptions extends AcquireOptions {
  /** How many permits to take at once (all or none). Default 1; at most the semaphore's limit. */
  permits?: number;
}

/** A grant of one or more permits: the Lock shape; `key` is the semaphore's name. */
export interface Permit extends Lock {
  /** How many of the limit this grant takes. */
  readonly permits: number;
}

/** One current grant of a semaphore, as `inspect()` shows it. */
export interface SemaphoreHolder extends HolderInfo {
  /** How many of the limit it takes. */
  permits: number;
}

/** What `semaphore.inspect()` shows: the grants and the queue. */
export interface SemaphoreInfo {
  /** The semaphore's name. */
  name: string;
  /** How many permits exist under the name. */
  limit: number;
  /** Current grants, oldest first. */
  holders: SemaphoreHolder[];
  /** Requests queued for permits. */
  waiters: number;
  /**
   * Permits kept from everybody by lock-delay (see PermitOptions.lockDelayMs): each lost grant
   * that asked for a delay, with how many permits it took and when they come back. Empty when none.
   */
  delayed: DelayedPermits[];
}

/** Permits of a lost grant, kept out of the limit until `delayedUntil` (lock-delay). */
export interface DelayedPermits {
  permits: number;
  /** When the permits come back, by the backend's clock. */
  delayedUntil: Date;
}

/**
 * "At most `limit` at once" under one name, across processes: each grant is a {@link Permit} with
 * a fencing token and a loss signal, as a lock has. Made by `provider.semaphore(name, { limit })`.
 */
export interface Semaphore {
  /** The semaphore's name. */
  readonly name: string;
  /** How many permits exist under the name. */
  readonly limit: number;
  /** Waits (up to waitMs) until the permits are granted. */
  acquire(opts?: PermitOptions): Promise<Permit>;
  /** Never waits: the permits, or null when fewer are free (or others queue before us). */
  tryAcquire(opts?: Omit<PermitOptions, 'waitMs'>): Promise<Permit | null>;
  /** Acquires, runs fn with the permit (watch permit.signal), releases in finally. */
  withPermit<T>(fn: (permit: Permit) => Promise<T>, opts?: PermitOptions): Promise<T>;
  inspect(): Promise<SemaphoreInfo>;
}
