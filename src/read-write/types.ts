import type { AcquireOptions, HolderInfo, Lock } from '../lock-types.js';

/** Options of `acquireRead`, `tryAcquireRead` and `withRead`: those of a lock, and `downgradeFrom`. */
export interface ReadOptions extends AcquireOptions {
  /**
   * The write grant of this name you hold: the read is granted at once and continues that grant, so
   * you may then release the write and keep reading (a downgrade). It carries the write's fencing
   * token, and readers who ask meanwhile wait until it ends, as they would for the write.
   */
  downgradeFrom?: Lock;
}

/** What `readWriteLock.inspect()` shows: the writer or the readers, and the queue. */
export interface ReadWriteInfo {
  /** The read-write lock's name. */
  name: string;
  /** The holder of the write grant, or null. */
  writer: HolderInfo | null;
  /** The holders of read grants, oldest first. */
  readers: HolderInfo[];
  /** Requests queued for a read or a write. */
  waiters: number;
  /**
   * Lost grants still kept by lock-delay (see AcquireOptions.lockDelayMs): a lost write keeps out
   * readers and writers until `delayedUntil`, a lost read keeps out writers. Empty when none.
   */
  delayed: DelayedGrant[];
}

/** A lost read or write grant whose lock-delay runs until `delayedUntil`. */
export interface DelayedGrant {
  mode: 'read' | 'write';
  /** When the delay ends, by the backend's clock. */
  delayedUntil: Date;
}

/**
 * Readers share, a writer excludes readers and writers, across processes. Requests are granted in
 * order: a waiting writer blocks the readers who ask after it, so readers cannot starve a writer
 * (as Curator's InterProcessReadWriteLock). Every grant is a {@link Lock} with a fencing token and a
 * loss signal; a writer's token is greater than every token granted before it, readers' included.
 * Made by `provider.readWriteLock(name)`.
 *
 * A read cannot be upgraded: asking for the write while you hold a read of the same name waits
 * for your own read, for ever (or until waitMs). A write can be downgraded (`downgradeFrom`).
 */
export interface ReadWriteLock {
  /** The read-write lock's name. */
  readonly name: string;
  /** Waits (up to waitMs) until a read is granted: no writer holds, and none asked before us. */
  acquireRead(opts?: ReadOptions): Promise<Lock>;
  /** Never waits: a read, or null when a writer holds or waits. */
  tryAcquireRead(opts?: Omit<ReadOptions, 'waitMs'>): Promise<Lock | null>;
  /** Acquires a read, runs fn with it (watch lock.signal), releases in finally. */
  withRead<T>(fn: (lock: Lock) => Promise<T>, opts?: ReadOptions): Promise<T>;
  /** Waits (up to waitMs) until the write is granted: nobody holds, and nobody asked before us. */
  acquireWrite(opts?: AcquireOptions): Promise<Lock>;
  /** Never waits: the write, or null when anyone holds or waits. */
  tryAcquireWrite(opts?: Omit<AcquireOptions, 'waitMs'>): Promise<Lock | null>;
  /** Acquires the write, runs fn with it (watch lock.signal), releases in finally. */
  withWrite<T>(fn: (lock: Lock) => Promise<T>, opts?: AcquireOptions): Promise<T>;
  /** The writer, the readers and the number of waiters. */
  inspect(): Promise<ReadWriteInfo>;
}
