import { monotonicNow, safeDeadline } from './clock.js';
import type { LossReason } from './errors.js';
import type { RenewalOutcome } from './ownership.js';

/** Told of every heartbeat of a session (etcd keepalive, ZooKeeper ping): the provider's telemetry. */
export type SessionRenewalListener = (outcome: RenewalOutcome, seconds: number, error?: unknown) => void;

/**
 * How far a backend session (an etcd lease, a ZooKeeper session) can be trusted: each answered
 * heartbeat confirms it until `sent + ttl × (1 − drift) − rtt`; past that, or when the backend says
 * so, it is lost, once, and every lock that depends on it is told. Holders register callbacks in a
 * Set, not as AbortSignal listeners: a session may carry thousands of locks.
 */
export class SessionLiveness {
  readonly #lost = new AbortController();
  readonly #holders = new Set<(reason: LossReason) => void>();
  readonly #driftRate: number;
  readonly #onLost: () => void;
  #deadlineTimer: NodeJS.Timeout | undefined;
  /** Until when (monotonic) the last confirmation vouches for the session. */
  #deadline = Number.POSITIVE_INFINITY;
  #losing = false;

  /** onLost: the session's own clean-up (stop its heartbeat), run before holders are told. */
  constructor(driftRate: number, onLost: () => void) {
    this.#driftRate = driftRate;
    this.#onLost = onLost;
  }

  /**
   * Also checks the deadline itself: after a stalled event loop, an answer can be handled before the
   * deadline's timer has had a chance to fire, and a session past its deadline is not alive.
   */
  get alive(): boolean {
    if (this.#losing) return false;
    if (!this.#lost.signal.aborted && monotonicNow() >= this.#deadline) this.lose('unconfirmed');
    return !this.#lost.signal.aborted;
  }

  /** How long the last confirmation still vouches for the session (ms; Infinity before the first, 0 once lost). */
  get trustLeftMs(): number {
    if (!this.alive) return 0;
    return Math.max(0, this.#deadline - monotonicNow());
  }

  /** Aborts when the session is lost; reason is the LossReason. */
  get signal(): AbortSignal {
    return this.#lost.signal;
  }

  /**
   * A heartbeat sent at `sentAt` (monotonic) was answered: trusted for ttlMs from then, less the
   * margin. rttMs, when the backend's clock started from an earlier moment than the answered
   * request (a ZooKeeper touch), is the round trip of the request itself.
   */
  confirmed(sentAt: number, ttlMs: number, rttMs?: number): void {
    if (!this.alive) return;
    const now = monotonicNow();
    const deadline = safeDeadline(sentAt, ttlMs, rttMs ?? now - sentAt, this.#driftRate);
    // Each answer proves the session lives until its own deadline: a later one that proves less
    // (its anchor further back) does not shorten the trust an earlier one gave.
    if (Number.isFinite(this.#deadline) && deadline <= this.#deadline) return;
    if (deadline <= now) {
      this.lose('unconfirmed'); // the answer itself came too late to vouch for anything
      return;
    }
    this.#deadline = deadline;
    clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = setTimeout(() => this.lose('unconfirmed'), Math.max(0, deadline - now));
    this.#deadlineTimer.unref();
  }

  /** Calls onLost once if the session is lost; returns the function that unsubscribes. */
  whenLost(onLost: (reason: LossReason) => void): () => void {
    if (!this.alive) {
      onLost(this.#lost.signal.reason as LossReason);
      return () => undefined;
    }
    this.#holders.add(onLost);
    return () => this.#holders.delete(onLost);
  }

  lose(reason: LossReason): void {
    if (this.#lost.signal.aborted || this.#losing) return;
    this.#losing = true; // onLost and holders may read `alive` again meanwhile
    clearTimeout(this.#deadlineTimer);
    this.#onLost();
    this.#lost.abort(reason);
    for (const onLost of this.#holders) onLost(reason);
    this.#holders.clear();
  }
}
