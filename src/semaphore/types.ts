import type { AcquireOptions, HolderInfo, Lock } from '../types.js';

/** The semaphore contract: "at most `limit` at once" under one name. */
export interface SemaphoreOptions {
  /** How many permits exist under this name: an integer 1..10,000, the same in every process. */
  limit: number;
}

export interface PermitOptions extends AcquireOptions {
  /** How many permits to take at once (all or none). Default 1; at most the semaphore's limit. */
  permits?: number;
}

/** A grant of one or more permits: the Lock shape; `key` is the semaphore's name. */
export interface Permit extends Lock {
  /** How many of the limit this grant takes. */
  readonly permits: number;
}

export interface SemaphoreHolder extends HolderInfo {
  permits: number;
}

export interface SemaphoreInfo {
  name: string;
  limit: number;
  /** Current grants, oldest first. */
  holders: SemaphoreHolder[];
  /** Requests queued for permits. */
  waiters: number;
}

export interface Semaphore {
  readonly name: string;
  readonly limit: number;
  /** Waits (up to waitMs) until the permits are granted. */
  acquire(opts?: PermitOptions): Promise<Permit>;
  /** Never waits: the permits, or null when fewer are free (or others queue before us). */
  tryAcquire(opts?: Omit<PermitOptions, 'waitMs'>): Promise<Permit | null>;
  /** Acquires, runs fn with the permit (watch permit.signal), releases in finally. */
  withPermit<T>(fn: (permit: Permit) => Promise<T>, opts?: PermitOptions): Promise<T>;
  inspect(): Promise<SemaphoreInfo>;
}
