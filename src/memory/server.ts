import { monotonicNow } from '../clock.js';
import { BackendUnavailableError } from '../errors.js';
import type { HolderInfo, LockInfo, QueuedWaiter } from '../types.js';
import { grantedNow, type MemoryGrant, restartLease } from './lease.js';
import { joinQueue } from './queue-place.js';

/** One grant as the in-process "server" keeps it. */
export interface MemoryLease extends MemoryGrant {
  readonly key: string;
  readonly clientId: number;
  timer: NodeJS.Timeout;
}

interface Waiter {
  readonly clientId: number;
  readonly ownerToken: string;
  readonly owner: string | undefined;
  readonly ttlMs: number;
  readonly lockDelayMs: number;
  /** When it joined the queue (wall clock, for queue()). */
  readonly since: Date;
  readonly granted: (lease: MemoryLease) => void;
}

interface KeyState {
  holder: MemoryLease | null;
  readonly queue: Waiter[];
  /** A lost grant's lock-delay runs: nobody is granted the key before it ends. */
  delay: { until: Date; timer: NodeJS.Timeout } | null;
}

export interface MemoryRequest {
  clientId: number;
  key: string;
  ownerToken: string;
  owner: string | undefined;
  ttlMs: number;
  lockDelayMs: number;
}

/**
 * The in-process stand-in for a lock server: per-key FIFO queues, leases that really expire, one
 * fencing counter. Clients (MemoryLockProvider) talk to it only through these methods, the way a
 * network client would, so faults can be injected per client: a crashed client stops renewing, a
 * partitioned client's calls fail.
 *
 * `memoryServer(name)` gives the server shared by every `memory://name` provider of the process;
 * `new MemoryLockServer()` gives one nobody else shares, for a test:
 * `new MemoryLockProvider({ server: new MemoryLockServer() })`. Its methods serve the providers.
 */
export class MemoryLockServer {
  #lastToken = 0n;
  #nextClientId = 1;
  readonly #keys = new Map<string, KeyState>();
  readonly #partitioned = new Set<number>();
  /** ownerToken → what its client runs when an operator removes that grant (its "watch"). */
  readonly #revocationWatches = new Map<string, () => void>();
  /** Waiters notified of a grant, counted so tests can show that a release wakes exactly one. */
  wakeups = 0;

  registerClient(): number {
    return this.#nextClientId++;
  }

  /** Grants at once when the key is free and nobody queues; otherwise null. */
  tryGrant(req: MemoryRequest): MemoryLease | null {
    this.#reachable(req.clientId);
    const state = this.#state(req.key);
    if (state.holder !== null || state.queue.length > 0 || state.delay !== null) {
      this.#forgetIfIdle(req.key, state);
      return null;
    }
    return this.#grant(req.key, state, req);
  }

  /** Joins the queue (or is granted at once). `cancel` leaves the queue; false if already granted. */
  enqueue(req: MemoryRequest): { granted: Promise<MemoryLease>; cancel: () => boolean } {
    const immediate = this.tryGrant(req);
    if (immediate) return { granted: Promise.resolve(immediate), cancel: () => false };
    const state = this.#state(req.key);
    return joinQueue(
      state.queue,
      (granted: (lease: MemoryLease) => void) => ({ ...req, since: new Date(), granted }),
      () => this.#forgetIfIdle(req.key, state),
    );
  }

  /** Extends the lease if it is still this grant's. */
  renew(clientId: number, key: string, ownerToken: string): boolean {
    this.#reachable(clientId);
    const holder = this.#keys.get(key)?.holder;
    if (!holder || holder.ownerToken !== ownerToken) return false;
    restartLease(holder, (lease) => this.#expiryTimer(lease));
    return true;
  }

  /** Compare-and-delete: removes the grant only if it is still this one. */
  release(clientId: number, key: string, ownerToken: string): boolean {
    this.#reachable(clientId);
    const state = this.#keys.get(key);
    if (!state?.holder || state.holder.ownerToken !== ownerToken) return false;
    this.#endLease(key, state, 'released');
    return true;
  }

  /**
   * An operator removes the grant holding `key` (only the one with token `expected`, when given):
   * its holder hears at once, then the next waiter is granted. null when no such grant holds it.
   */
  forceRelease(clientId: number, key: string, expected: bigint | undefined): HolderInfo | null {
    this.#reachable(clientId);
    const state = this.#keys.get(key);
    const lease = state?.holder;
    if (!state || !lease || (expected !== undefined && lease.fencingToken !== expected)) return null;
    this.#revocationWatches.get(lease.ownerToken)?.();
    this.#endLease(key, state, 'lost');
    return {
      owner: lease.owner,
      fencingToken: lease.fencingToken,
      since: lease.since,
      expiresAt: new Date(lease.expiresAt),
    };
  }

  /** Tells a client when an operator removes its grant; returns the way to stop listening. */
  watchRevocation(ownerToken: string, revoked: () => void): () => void {
    this.#revocationWatches.set(ownerToken, revoked);
    return () => {
      if (this.#revocationWatches.get(ownerToken) === revoked) this.#revocationWatches.delete(ownerToken);
    };
  }

  /** Names with a holder now. */
  heldNames(clientId: number): string[] {
    this.#reachable(clientId);
    return [...this.#keys].filter(([, state]) => state.holder !== null).map(([key]) => key);
  }

  inspect(key: string): LockInfo | null {
    const state = this.#keys.get(key);
    if (!state) return null;
    const holder = state.holder && {
      owner: state.holder.owner,
      fencingToken: state.holder.fencingToken,
      since: state.holder.since,
      expiresAt: new Date(state.holder.expiresAt),
    };
    return {
      key,
      holder,
      waiters: state.queue.length,
      ...(state.delay ? { delayedUntil: state.delay.until } : {}),
    };
  }

  /** The first `limit` waiters of `key`, in the order they will be granted: one entry per request. */
  queue(clientId: number, key: string, limit: number): QueuedWaiter[] {
    this.#reachable(clientId);
    const waiters = this.#keys.get(key)?.queue ?? [];
    return waiters.slice(0, limit).map(({ owner, since }) => ({ owner, since, requests: 1 }));
  }

  /** Fault injection: the client's process died. Its waiters leave; its leases run out unrenewed. */
  crashClient(clientId: number): void {
    for (const [key, state] of this.#keys) {
      const kept = state.queue.filter((w) => w.clientId !== clientId);
      state.queue.splice(0, state.queue.length, ...kept);
      this.#forgetIfIdle(key, state);
    }
  }

  /** Fault injection: the client's calls fail as if the network were cut (or heal it). */
  partitionClient(clientId: number, cut: boolean): void {
    if (cut) this.#partitioned.add(clientId);
    else this.#partitioned.delete(clientId);
  }

  #reachable(clientId: number): void {
    if (this.#partitioned.has(clientId)) {
      throw new BackendUnavailableError('memory backend unreachable (simulated partition)');
    }
  }

  #state(key: string): KeyState {
    let state = this.#keys.get(key);
    if (!state) {
      state = { holder: null, queue: [], delay: null };
      this.#keys.set(key, state);
    }
    return state;
  }

  #grant(key: string, state: KeyState, req: Omit<MemoryRequest, 'key'>): MemoryLease {
    this.#lastToken += 1n;
    const lease: MemoryLease = {
      key,
      clientId: req.clientId,
      ownerToken: req.ownerToken,
      owner: req.owner,
      fencingToken: this.#lastToken,
      ttlMs: req.ttlMs,
      lockDelayMs: req.lockDelayMs,
      ...grantedNow(req.ttlMs),
      timer: undefined as unknown as NodeJS.Timeout,
    };
    lease.timer = this.#expiryTimer(lease);
    state.holder = lease;
    return lease;
  }

  #expiryTimer(lease: MemoryLease): NodeJS.Timeout {
    const timer = setTimeout(() => {
      const state = this.#keys.get(lease.key);
      if (state?.holder === lease) this.#endLease(lease.key, state, 'lost');
    }, lease.ttlMs);
    return timer;
  }

  /**
   * Ends the current lease and hands the key to the first waiter only: no herd. A lease that is
   * lost (expired, force-released) rather than released starts its lock-delay first: the hand-over
   * waits for it.
   */
  #endLease(key: string, state: KeyState, how: 'released' | 'lost'): void {
    const ended = state.holder;
    if (ended) clearTimeout(ended.timer);
    state.holder = null;
    if (how === 'lost' && ended && ended.lockDelayMs > 0) {
      state.delay = {
        until: new Date(Date.now() + ended.lockDelayMs),
        timer: this.#delayTimer(key, state, monotonicNow() + ended.lockDelayMs),
      };
      return;
    }
    this.#handOver(key, state);
  }

  /** Ends the delay at `endsAt` (monotonic): a timer that fires early (ms granularity) is set again. */
  #delayTimer(key: string, state: KeyState, endsAt: number): NodeJS.Timeout {
    const timer = setTimeout(
      () => {
        if (!state.delay) return;
        if (monotonicNow() < endsAt) {
          state.delay.timer = this.#delayTimer(key, state, endsAt);
          return;
        }
        state.delay = null;
        this.#handOver(key, state);
      },
      Math.max(1, Math.ceil(endsAt - monotonicNow())),
    );
    return timer; // ref'd: a waiter's process stays up for the delay (at most a minute)
  }

  #handOver(key: string, state: KeyState): void {
    const next = state.queue.shift();
    if (next) {
      const lease = this.#grant(key, state, next);
      this.wakeups += 1;
      next.granted(lease);
    }
    this.#forgetIfIdle(key, state);
  }

  #forgetIfIdle(key: string, state: KeyState): void {
    if (state.holder === null && state.queue.length === 0 && state.delay === null) this.#keys.delete(key);
  }
}
