import type { LossReason } from '../errors.js';
import type { LockProvider } from '../types.js';

/** What a backend tells every conformance suite (locks, semaphores) about itself. */
export interface BackendTarget {
  /** Shown in test names, e.g. "memory", "etcd 3-member cluster". */
  name: string;
  /** A new client of the same backend, as another process would open. The suite closes it. */
  createProvider(): Promise<LockProvider>;
  /** Lease given to acquires in tests (keep it short: 200–2000 ms). */
  ttlMs: number;
  /** How long after a holder dies what it held must be free again: TTL or session, plus slack. */
  holderDeathBoundMs: number;
  /** Waiters are granted in request order. */
  fifo: boolean;
  /**
   * Waiters the backend has woken so far: a release wakes exactly one waiter of a lock, and at
   * most one per permit it frees of a semaphore.
   */
  wakeups?: () => number;
  /**
   * The backend keeps lock-delay (on what the suite tests): its lock-delay tests then fail when it
   * refuses one, instead of passing as skipped (a provider of your own that refuses it leaves this
   * out).
   */
  lockDelay?: boolean;
  /**
   * What provider.queue(key) shows: 'owners' each waiter's owner text, in the order they will be
   * granted; 'order' the entries in that order, with an owner only where the backend records one
   * (PostgreSQL: a client sees only its own). Left out: the order is not tested, and queue() may be
   * absent, refuse with NotImplementedError (Redlock) or answer [] for a name nobody waits for.
   */
  queue?: 'owners' | 'order';
  /** Fault injection; the tests that need a fault are skipped without it. */
  faults?: {
    /** The client's process dies: it neither renews nor releases anything again. */
    crash(provider: LockProvider): Promise<void>;
    /** Cut (true) or heal (false) the client's connection, without closing it. */
    partition?(provider: LockProvider, cut: boolean): Promise<void>;
  };
}

/** What a backend tells the conformance suite about itself. */
export interface ConformanceTarget extends BackendTarget {
  /**
   * The reason a force-released holder's signal aborts with: 'revoked' (default) where the backend
   * tells the holder why, else what the holder sees (PostgreSQL: its connection is ended).
   */
  revokedReason?: LossReason;
}

/** What a backend tells the semaphore conformance suite about itself. */
export interface SemaphoreConformanceTarget extends BackendTarget {
  /** The backend stores the limit with the name (SemaphoreLimitMismatchError on a different one). */
  limitMismatch: boolean;
  /** The providers' callTimeoutMs: close() of a cut-off provider must end within it + 1 s. */
  callTimeoutMs?: number;
}

/** The slice of a test framework the suite needs: vitest, jest and mocha fit as they are. */
export interface TestApi {
  describe(name: string, body: () => void): void;
  it(name: string, body: () => Promise<void>): void;
  afterEach?(body: () => Promise<void>): void;
}
