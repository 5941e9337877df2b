/**
 * One lock as its caller sees it: the backends, the options of an acquire, the held grant and what
 * inspect() shows. The semaphore, read-write and event types build on these; LockProvider
 * (types.ts) ties them all together, so nothing here imports them.
 */

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

/** Options of `provider.queue(key, options)`. */
export interface QueueOptions {
  /** Give at most this many entries, the first in line (an integer 1..10 000). Default 100. */
  limit?: number;
}

/**
 * One entry of a name's queue, as `provider.queue(key)` shows it. An entry is what the backend's
 * queue holds: one request on memory, one process's line for the name on etcd, ZooKeeper, Redis
 * and PostgreSQL, whose providers line up their own requests of a name before one of them queues
 * on the server (docs/api.md, "queue").
 */
export interface QueuedWaiter {
  /**
   * The `owner` text of the request the entry is (for a line: the one queued on the server).
   * undefined when none was given, when the backend does not record it for waiters (PostgreSQL,
   * for other processes' entries) or when what it recorded cannot be read.
   */
  owner: string | undefined;
  /** When the entry joined the queue, where the backend records it (etcd, ZooKeeper, PostgreSQL, memory). */
  since: Date | undefined;
  /**
   * How many requests the entry stands for: 1 for a single request; for this provider's own line,
   * the requests in it; undefined for another process's line, whose length only it knows.
   */
  requests: number | undefined;
}
