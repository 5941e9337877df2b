/** The public contract every backend implements (docs/design.md). */

import type { ProviderEventListener, ProviderEventName } from './events.js';
import type { ReadWriteLock } from './read-write/types.js';
import type { Semaphore, SemaphoreOptions } from './semaphore/types.js';

/** The backend a provider runs on: `provider.backend`. */
export type BackendName = 'memory' | 'etcd' | 'zookeeper' | 'redis' | 'redlock' | 'postgres';

/** Options of `acquire`, `tryAcquire` and `withLock`. */
export interface AcquireOptions {
  /**
   * How long a dead holder's lock stays held: a per-lock lease on memory and Redis, the TTL of the
   * etcd session the lock uses (rounded up to whole seconds). ZooKeeper and PostgreSQL cannot honour
   * it (their session or connection governs) and say so once per provider ('ttl-ignored').
   */
  ttlMs?: number;
  /** Give up after this long with LockTimeoutError; 0 = try once. Default: wait without limit. */
  waitMs?: number;
  /** Cancels waiting with AbortError; the queue entry is removed from the backend. */
  signal?: AbortSignal;
  /** Free text stored with the grant (host/pid), shown by inspect(). */
  owner?: string;
  /**
   * Lock-delay, as in Chubby and Consul (0..60 000 ms, default 0): when this grant is lost rather
   * than released (its lease expired, its session was lost, an operator force-released it), the
   * name is granted to nobody until this long after the loss, so that work the lost holder still
   * has in flight drains first. A clean release frees the name at once. Counted by the backend's
   * clock where it has one, from a moment after the loss (never shorter). On a semaphore the lost
   * grant's permits stay taken for the delay; on a read-write lock a lost write keeps out readers
   * and writers, a lost read keeps out writers. Redlock refuses a delay above 0 with
   * NotImplementedError.
   */
  lockDelayMs?: number;
}

/**
 * A held lock: its fencing token, and a signal that aborts before the lock can have passed to
 * anybody else. `await using` releases it at the end of the block.
 */
export interface Lock extends AsyncDisposable {
  /** The lock's key. */
  readonly key: string;
  /** Strictly greater than every earlier holder's token for this key. */
  readonly fencingToken: bigint;
  /** Unique id of this grant. */
  readonly ownerToken: string;
  /** Aborted when ownership is lost, cannot be confirmed, or released; reason is a LockLostError. */
  readonly signal: AbortSignal;
  /** Whether the lock is still held, as far as this process can confirm. */
  readonly held: boolean;
  /** Idempotent; never removes another holder's grant. */
  release(): Promise<void>;
}

/** Who holds a lock, as `inspect()` shows it. */
export interface HolderInfo {
  /** The `owner` text given at acquire, if any. */
  owner: string | undefined;
  /** The holder's fencing token. */
  fencingToken: bigint;
  /** When the grant was made (wall clock of the granting process); undefined when another tool made it. */
  since: Date | undefined;
  /** When the lease runs out unless renewed, where the backend has per-lock leases. */
  expiresAt?: Date;
}

/** What `provider.inspect(key)` shows: the holder and the queue. */
export interface LockInfo {
  /** The lock's key. */
  key: string;
  /** null while the key is between holders. */
  holder: HolderInfo | null;
  /** Requests queued for this key (not counting the holder). */
  waiters: number;
  /**
   * Set while a lock-delay runs (see AcquireOptions.lockDelayMs): a grant was lost, and nobody is
   * granted the key before this time. Where the delay has not started on the backend yet (it starts
   * when the next waiter notices the loss), the earliest time it can end: now + the delay.
   */
  delayedUntil?: Date;
}

/**
 * Locks over one backend: what `connect()` resolves with, and what a provider of your own
 * implements. `semaphore`, `readWriteLock`, `on`/`off`, `forceRelease` and `list` are optional
 * here; every built-in provider has the last five, and all but Redlock's have `semaphore` (see
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
