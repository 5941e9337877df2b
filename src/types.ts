/** The public contract every backend implements (docs/design.md). */

import type { ProviderEventListener, ProviderEventName } from './events.js';
import type {
  AcquireOptions,
  BackendName,
  HolderInfo,
  Lock,
  LockInfo,
  QueuedWaiter,
  QueueOptions,
} from './lock-types.js';
import type { ReadWriteLock } from './read-write/types.js';
import type { Semaphore, SemaphoreOptions } from './semaphore/types.js';

export type {
  AcquireOptions,
  BackendName,
  HolderInfo,
  Lock,
  LockInfo,
  QueuedWaiter,
  QueueOptions,
} from './lock-types.js';

/**
 * Locks over one backend: what `connect()` resolves with, and what a provider of your own
 * implements. `semaphore`, `readWriteLock`, `on`/`off`, `forceRelease`, `list` and `queue` are
 * optional here; every built-in provider has the last six, and all but Redlock's have `semaphore` (see
 * `ConnectedProvider`).
 */
export interface LockProvider {
  /** The backend it runs on. */
  readonly backend: BackendName;
  /** Waits (up to waitMs) until granted. */
  acquire(key: string, opts?: AcquireOptions): Promise<Lock>;
  /** Never waits: the lock, or null when someone else holds it. */
  tryAcquire(key: string, opts?: Omit<AcquireOptions, 'waitMs'>): Promise<Lock | null>;
  /** Acquires, runs fn with the lock (watch lock.signal), releases in finally. */
  withLock<T>(key: string, fn: (lock: Lock) => Promise<T>, opts?: AcquireOptions): Promise<T>;
  /** The holder and the number of waiters, or null when nobody holds or waits. */
  inspect(key: string): Promise<LockInfo | null>;
  /** Releases everything it holds and fails its waiters with ProviderClosedError. */
  close(): Promise<void>;
  /** "At most `limit` at once" under `name`; optional for custom providers. */
  semaphore?(name: string, options: SemaphoreOptions): Semaphore;
  /**
   * Readers share, a writer excludes everyone, in request order, under `name`; optional for custom
   * providers. On ZooKeeper and Redis it throws NotImplementedError for now, on Redlock for good.
   */
  readWriteLock?(name: string): ReadWriteLock;
  /** Operator events (grant, loss, renew-failed, release, force-release); optional for custom providers. */
  on?<E extends ProviderEventName>(event: E, listener: ProviderEventListener<E>): void;
  /** Removes a listener added with `on`. */
  off?<E extends ProviderEventName>(event: E, listener: ProviderEventListener<E>): void;
  /**
   * Removes the current grant of `key` whoever holds it (an operator's tool); `reason` is
   * required and recorded. Resolves with the removed holder, or null when nobody held it.
   */
  forceRelease?(key: string, options: ForceReleaseOptions): Promise<HolderInfo | null>;
  /** Held names under `prefix`, where the backend can enumerate them. */
  list?(prefix?: string): Promise<string[]>;
  /**
   * The requests waiting for `key`, in the order they will be granted, as far as the backend
   * records them: the first `limit` (default 100), [] when nobody waits. An entry is one request,
   * or one process's line on backends that line up a process's requests first (see QueuedWaiter).
   * Redlock refuses it with NotImplementedError.
   */
  queue?(key: string, options?: QueueOptions): Promise<QueuedWaiter[]>;
}

/** Options of `provider.forceRelease(key, options)`. */
export interface ForceReleaseOptions {
  /** Why, in words: recorded in the event and the log line. Required. */
  reason: string;
  /** Who asked (user@host); defaults to this process (user@host pid N). */
  by?: string;
  /**
   * Remove the grant only while it still has this token (the one inspect() showed): an operator who
   * looked first never removes a grant made after the look. Default: whichever grant holds it now.
   */
  fencingToken?: bigint;
}
