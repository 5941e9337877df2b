import { monotonicNow } from './clock.js';
import { LockLostError, type LossReason } from './errors.js';
import { checkedOnRead } from './signals.js';
import { longTimeout } from './timers.js';
import type { Lock } from './types.js';

/** What an {@link OwnedLock} is made from: the grant as the backend made it, and how to release it. */
export interface OwnedLockInit {
  /** The lock's key. */
  key: string;
  /** The grant's fencing token, from the backend (a revision, a zxid, a counter). */
  fencingToken: bigint;
  /** The request's unique id (`LockRequest.ownerToken`). */
  ownerToken: string;
  /** Deletes the grant on the backend, guarded by ownerToken/fencingToken. Called at most once. */
  releaseOnBackend: () => Promise<void>;
  /**
   * For grants that live as long as a session (etcd, ZooKeeper): false once the session cannot be
   * trusted. Checked whenever `held` or `signal` is read, so a stalled event loop cannot make a
   * lost grant look held before the session's timer fires.
   */
  trustedWhile?: () => boolean;
  /**
   * For the same grants: how long (ms) the session's last confirmation still vouches for it.
   * `heldFor` reads it, so the hand-out margin applies to a session's trust as to a lease's.
   */
  trustLeftMs?: () => number;
}

/** How a renewal went: extended, refused by the backend (not ours any more), or not answered. */
export type RenewalOutcome = 'renewed' | 'rejected' | 'failed';

/** Telemetry of one grant (metrics, events, logs), attached by the provider when it hands it out. */
export interface GrantObserver {
  ended(reason: LossReason, cause: unknown): void;
  renewed(outcome: RenewalOutcome, seconds: number, error?: unknown): void;
  /** The grant is a leader's term of `election`. */
  becameTerm(election: string): void;
}

/**
 * The Lock handle every backend returns. It owns the `signal`: the backend reports what it learns
 * (confirmed until a deadline, lost), and the handle turns that into one abort with a LockLostError
 * reason, before ownership can have passed to anybody else.
 */
export class OwnedLock implements Lock {
  readonly key: string;
  readonly fencingToken: bigint;
  readonly ownerToken: string;
  /** Made on the first read of `signal`: most handles are released without anyone listening. */
  #controller: AbortController | undefined;
  #loss: { reason: LossReason; cause: unknown } | undefined;
  readonly #releaseOnBackend: () => Promise<void>;
  readonly #endListeners: Array<() => void> = [];
  #releaseListener: (() => void) | undefined;
  #cancelDeadline: (() => void) | undefined;
  /** The last confirmed deadline (monotonic): checked on read as well as by its timer. */
  #deadline = Number.POSITIVE_INFINITY;
  readonly #trustedWhile: (() => boolean) | undefined;
  readonly #trustLeftMs: (() => number) | undefined;
  #released: Promise<void> | undefined;
  #observer: GrantObserver | undefined;

  constructor(init: OwnedLockInit) {
    this.key = init.key;
    this.fencingToken = init.fencingToken;
    this.ownerToken = init.ownerToken;
    this.#releaseOnBackend = init.releaseOnBackend;
    this.#trustedWhile = init.trustedWhile;
    this.#trustLeftMs = init.trustLeftMs;
  }

  get signal(): AbortSignal {
    this.#checkTrust();
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#loss) this.#controller.abort(this.#lossError(this.#loss));
      // Kept aside and read later, the signal checks the deadline as `held` does.
      else checkedOnRead(this.#controller.signal, () => this.#checkTrust());
    }
    return this.#controller.signal;
  }

  get held(): boolean {
    this.#checkTrust();
    return this.#loss === undefined;
  }

  /** Held, and confirmed for at least `ms` more (by its own deadline and by its session's). */
  heldFor(ms: number): boolean {
    if (!this.held || this.#deadline - monotonicNow() < ms) return false;
    return (this.#trustLeftMs?.() ?? Number.POSITIVE_INFINITY) >= ms;
  }

  /** A deadline passed or the session went while timers could not run: lost now, not later. */
  #checkTrust(): void {
    if (this.#loss !== undefined) return;
    if (monotonicNow() >= this.#deadline) this.lose('unconfirmed');
    else if (this.#trustedWhile && !this.#trustedWhile()) this.lose('session-lost');
  }

  /**
   * The backend confirmed ownership until `deadline` (monotonic ms, see safeDeadline). If no later
   * confirmation arrives by then, the signal aborts with reason "unconfirmed".
   */
  confirmUntil(deadline: number): void {
    if (this.#loss !== undefined) return;
    this.#deadline = deadline;
    this.#cancelDeadline?.();
    const remaining = deadline - monotonicNow();
    if (remaining <= 0) {
      this.lose('unconfirmed');
      return;
    }
    // longTimeout: a lease past 2^31 ms (redlock takes any duration) must not fire after 1 ms.
    // The deadline must not keep the process alive on its own; the renewal loop decides that.
    this.#cancelDeadline = longTimeout(() => this.lose('unconfirmed'), remaining, { unref: true });
  }

  /** Ownership is gone (or can no longer be trusted): abort the signal once. */
  lose(reason: LossReason, cause?: unknown): void {
    if (this.#loss !== undefined) return;
    this.#loss = { reason, cause };
    this.#cancelDeadline?.();
    this.#controller?.abort(this.#lossError(this.#loss));
    for (const listener of this.#endListeners.splice(0)) listener();
    // Told last: the work has been stopped by then.
    this.#observer?.ended(reason, cause);
  }

  /** Attaches the grant's telemetry (once, at grant time); told at once if already lost. */
  observe(observer: GrantObserver): void {
    this.#observer = observer;
    if (this.#loss !== undefined) observer.ended(this.#loss.reason, this.#loss.cause);
  }

  /** The grant's telemetry, if the provider attached one. */
  get observer(): GrantObserver | undefined {
    return this.#observer;
  }

  /** The renewal watchdog (or session) reports each attempt: counted and, when failed, announced. */
  reportRenewal(outcome: RenewalOutcome, seconds: number, error?: unknown): void {
    this.#observer?.renewed(outcome, seconds, error);
  }

  /** This grant is a term of `election` (leadershipOf): counted as a term, its loss as a failover. */
  markTerm(election: string): void {
    this.#observer?.becameTerm(election);
  }

  #lossError(loss: { reason: LossReason; cause: unknown }): LockLostError {
    return new LockLostError(this.key, this.fencingToken, loss.reason, { cause: loss.cause });
  }

  /** Runs once when the handle stops being held (lost or released). */
  onEnd(listener: () => void): void {
    if (this.#loss === undefined) this.#endListeners.push(listener);
    else listener();
  }

  /** Runs once when release() is first called (the provider stops tracking the grant then). */
  onRelease(listener: () => void): void {
    if (this.#released) listener();
    else this.#releaseListener = listener;
  }

  /**
   * Aborts the signal first (the work must stop before anyone else can be granted), then deletes the
   * grant on the backend. The backend delete is guarded and runs once, even if ownership was already
   * lost: a lock that could not be confirmed may still be ours there, and deleting it frees waiters
   * sooner than its expiry would.
   */
  release(): Promise<void> {
    this.#released ??= (async () => {
      this.#releaseListener?.();
      this.#releaseListener = undefined;
      this.lose('released');
      await this.#releaseOnBackend();
    })();
    return this.#released;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  toJSON(): Record<string, unknown> {
    return { key: this.key, fencingToken: this.fencingToken.toString(), held: this.held };
  }
}
