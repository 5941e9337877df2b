import { SemaphoreLimitMismatchError } from '../semaphore/errors.js';
import type { DelayedPermits as DelayedPermitsInfo, SemaphoreHolder } from '../semaphore/types.js';
import { grantedNow, type MemoryGrant, restartLease } from './lease.js';
import { joinQueue, type QueuePlace } from './queue-place.js';
import type { MemoryLockServer } from './server.js';

/** One grant of permits as the in-process server keeps it. */
export interface MemoryPermitLease extends MemoryGrant {
  readonly name: string;
  /** Kept out of the limit for lockDelayMs after a loss (expiry), not after a release. */
  readonly permits: number;
}

export interface MemoryPermitRequest {
  clientId: number;
  name: string;
  limit: number;
  permits: number;
  ownerToken: string;
  owner: string | undefined;
  ttlMs: number;
  lockDelayMs: number;
}

interface Waiter {
  readonly req: MemoryPermitRequest;
  readonly granted: (lease: MemoryPermitLease) => void;
}

interface NameState {
  /** Stored with the name while anyone holds or waits; another limit is refused meanwhile. */
  readonly limit: number;
  readonly holders: Map<string, MemoryPermitLease>;
  readonly queue: Waiter[];
  /** Permits of lost grants kept out of the limit by their lock-delay (counted in `used`). */
  readonly delayed: Set<DelayedPermits>;
  used: number;
}

interface DelayedPermits {
  readonly permits: number;
  /** Wall clock, for inspect(). */
  readonly until: Date;
}

/**
 * The semaphore half of the in-process server: per name a limit, leases that really expire, a
 * strict FIFO queue (a waiter for 3 permits is not overtaken by later waiters for 1), and one
 * fencing counter for the server, so tokens rise per name across all its permits.
 */
export class MemorySemaphoreServer {
  readonly #locks: MemoryLockServer;
  #lastToken = 0n;
  readonly #names = new Map<string, NameState>();
  /** Waiters notified of a grant: at most one per permit freed. */
  wakeups = 0;

  constructor(locks: MemoryLockServer) {
    this.#locks = locks;
  }

  tryGrant(req: MemoryPermitRequest): MemoryPermitLease | null {
    this.#reachable(req.clientId);
    const state = this.#state(req);
    if (state.queue.length > 0 || state.used + req.permits > state.limit) {
      this.#forgetIfIdle(req.name, state);
      return null;
    }
    return this.#grant(state, req);
  }

  /** Joins the queue (or is granted at once). `cancel` leaves the queue; false if already granted. */
  enqueue(req: MemoryPermitRequest): QueuePlace<MemoryPermitLease> {
    const immediate = this.tryGrant(req);
    if (immediate) return { granted: Promise.resolve(immediate), cancel: () => false };
    const state = this.#state(req);
    return joinQueue(
      state.queue,
      (granted: (lease: MemoryPermitLease) => void) => ({ req, granted }),
      (index) => {
        // The head left: those behind it may fit now.
        if (index === 0) this.#pump(state);
        this.#forgetIfIdle(req.name, state);
      },
    );
  }

  renew(clientId: number, name: string, ownerToken: string): boolean {
    this.#reachable(clientId);
    const lease = this.#names.get(name)?.holders.get(ownerToken);
    if (!lease) return false;
    restartLease(lease, (renewed) => this.#expiryTimer(renewed));
    return true;
  }

  /** Removes the grant only if it is still there (a late release after expiry removes nothing). */
  release(clientId: number, name: string, ownerToken: string): boolean {
    this.#reachable(clientId);
    return this.#end(name, ownerToken);
  }

  /** Names with a holder now. */
  heldNames(clientId: number): string[] {
    this.#reachable(clientId);
    return [...this.#names].filter(([, state]) => state.holders.size > 0).map(([name]) => name);
  }

  inspect(name: string): { holders: SemaphoreHolder[]; waiters: number; delayed: DelayedPermitsInfo[] } {
    const state = this.#names.get(name);
    if (!state) return { holders: [], waiters: 0, delayed: [] };
    const holders = [...state.holders.values()].map((lease) => ({
      owner: lease.owner,
      fencingToken: lease.fencingToken,
      since: lease.since,
      expiresAt: new Date(lease.expiresAt),
      permits: lease.permits,
    }));
    const delayed = [...state.delayed].map((d) => ({ permits: d.permits, delayedUntil: d.until }));
    return { holders, waiters: state.queue.length, delayed };
  }

  // The lock server keeps its partitions private; a renew of a key nobody can hold ('' is never a
  // valid key) is side-effect free and throws exactly when the client is cut off.
  #reachable(clientId: number): void {
    this.#locks.renew(clientId, '', '');
  }

  #state(req: MemoryPermitRequest): NameState {
    let state = this.#names.get(req.name);
    if (!state) {
      state = { limit: req.limit, holders: new Map(), queue: [], delayed: new Set(), used: 0 };
      this.#names.set(req.name, state);
    }
    if (state.limit !== req.limit) throw new SemaphoreLimitMismatchError(req.name, req.limit, state.limit);
    return state;
  }

  #grant(state: NameState, req: MemoryPermitRequest): MemoryPermitLease {
    this.#lastToken += 1n;
    const lease: MemoryPermitLease = {
      name: req.name,
      ownerToken: req.ownerToken,
      owner: req.owner,
      permits: req.permits,
      fencingToken: this.#lastToken,
      ttlMs: req.ttlMs,
      lockDelayMs: req.lockDelayMs,
      ...grantedNow(req.ttlMs),
      timer: undefined,
    };
    lease.timer = this.#expiryTimer(lease);
    state.holders.set(lease.ownerToken, lease);
    state.used += lease.permits;
    return lease;
  }

  #expiryTimer(lease: MemoryPermitLease): NodeJS.Timeout {
    return setTimeout(() => this.#end(lease.name, lease.ownerToken, 'lost'), lease.ttlMs);
  }

  #end(name: string, ownerToken: string, how: 'released' | 'lost' = 'released'): boolean {
    const state = this.#names.get(name);
    const lease = state?.holders.get(ownerToken);
    if (!state || !lease) return false;
    clearTimeout(lease.timer);
    state.holders.delete(ownerToken);
    if (how === 'lost' && lease.lockDelayMs > 0) {
      // Lock-delay: the permits stay taken (still in `used`) until the delay has passed.
      const delayed = { permits: lease.permits, until: new Date(Date.now() + lease.lockDelayMs) };
      state.delayed.add(delayed);
      setTimeout(() => {
        state.delayed.delete(delayed);
        state.used -= delayed.permits;
        this.#pump(state);
        this.#forgetIfIdle(name, state);
      }, lease.lockDelayMs);
      return true;
    }
    state.used -= lease.permits;
    this.#pump(state);
    this.#forgetIfIdle(name, state);
    return true;
  }

  /** Grants queue heads while they fit: only as many wake-ups as permits were freed, no herd. */
  #pump(state: NameState): void {
    for (;;) {
      const next = state.queue[0];
      if (!next || state.used + next.req.permits > state.limit) return;
      state.queue.shift();
      const lease = this.#grant(state, next.req);
      this.wakeups += 1;
      next.granted(lease);
    }
  }

  #forgetIfIdle(name: string, state: NameState): void {
    if (state.holders.size === 0 && state.queue.length === 0 && state.delayed.size === 0) {
      this.#names.delete(name);
    }
  }
}

const servers = new WeakMap<MemoryLockServer, MemorySemaphoreServer>();
const readWriteServers = new WeakMap<MemoryLockServer, MemorySemaphoreServer>();

/** The semaphore server that lives beside a lock server (one per `memory://` world). */
export function semaphoreServerOf(locks: MemoryLockServer): MemorySemaphoreServer {
  return besides(servers, locks);
}

/**
 * The read-write locks' server beside a lock server: a semaphore server of its own, so that a
 * read-write lock and a semaphore may share a name (src/memory/read-write.ts).
 */
export function readWriteServerOf(locks: MemoryLockServer): MemorySemaphoreServer {
  return besides(readWriteServers, locks);
}

function besides(
  of: WeakMap<MemoryLockServer, MemorySemaphoreServer>,
  locks: MemoryLockServer,
): MemorySemaphoreServer {
  let server = of.get(locks);
  if (!server) {
    server = new MemorySemaphoreServer(locks);
    of.set(locks, server);
  }
  return server;
}
