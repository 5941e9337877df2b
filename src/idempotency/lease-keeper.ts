import { DEFAULT_DRIFT_RATE } from '../clock.js';
import { LockLostError } from '../errors.js';
import { checkedOnRead, type LinkedSignal, linkSignals } from '../signals.js';

/**
 * Keeps a running record's lease alive every leaseMs/3 while fn runs, and gives fn a signal that
 * aborts before the lease can have passed to a repeat: at `sent + lease × (1 − drift)` after the
 * last confirmed renewal (LockLostError 'unconfirmed'), or at once when the store says another
 * request has taken the record over ('revoked'). A paused process cannot notice either: its
 * completion is then refused by the token.
 *
 * Per run it costs one timer, armed for whichever comes first, the next renewal or the deadline;
 * the signal is made only when fn first reads it (most runs end long before any renewal).
 */
export class LeaseKeeper {
  #linked: LinkedSignal | undefined;
  #lost: LockLostError | undefined;
  #timer: NodeJS.Timeout | undefined;
  /** What the armed timer is for: a renewal, or the end of the trusted lease. */
  #armedFor: 'renewal' | 'deadline' = 'renewal';
  #stopped = false;
  /** False once stopRenewing() was called: the lease then runs out at trustedUntil. */
  #renewing = true;
  /** When the lease may last be trusted, by this process's monotonic clock. */
  trustedUntil: number;

  readonly #key: string;
  readonly #token: bigint;
  readonly #leaseMs: number;
  readonly #parent: AbortSignal | undefined;
  readonly #renew: () => Promise<boolean>;

  constructor(
    key: string,
    token: bigint,
    leaseMs: number,
    beganAt: number,
    parent: AbortSignal | undefined,
    renew: () => Promise<boolean>,
  ) {
    this.#key = key;
    this.#token = token;
    this.#leaseMs = leaseMs;
    this.#parent = parent;
    this.#renew = renew;
    this.trustedUntil = beganAt + leaseMs * (1 - DEFAULT_DRIFT_RATE);
    this.#armNext();
  }

  /** Aborts when the lease is lost or the parent aborts; already aborted if that happened before. */
  get signal(): AbortSignal {
    if (!this.#linked) {
      this.#linked = linkSignals([this.#parent]);
      if (this.#lost) this.#linked.abort(this.#lost);
      // Kept aside and read after a stall, it says the lease ran out before its timer does.
      else
        checkedOnRead(this.#linked.signal, () => {
          if (!this.#stopped && performance.now() >= this.trustedUntil) this.#lose('unconfirmed');
        });
    }
    return this.#linked.signal;
  }

  #lose(reason: 'unconfirmed' | 'revoked'): void {
    if (this.#lost) return;
    this.#lost = new LockLostError(`idempotency:${this.#key}`, this.#token, reason);
    this.#linked?.abort(this.#lost);
  }

  /** The next renewal at leaseMs/3 from now, or the deadline if that comes first (or renewals stopped). */
  #armNext(): void {
    const renewAt = performance.now() + this.#leaseMs / 3;
    if (this.#renewing && renewAt < this.trustedUntil) this.#arm('renewal', renewAt);
    else this.#arm('deadline', this.trustedUntil);
  }

  #arm(what: 'renewal' | 'deadline', at: number): void {
    clearTimeout(this.#timer);
    this.#armedFor = what;
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, at - performance.now()));
    this.#timer.unref();
  }

  #fire(): void {
    if (this.#stopped || this.#lost) return;
    // A renewal timer that fires late (a paused process) finds the deadline passed: lost.
    if (this.#armedFor === 'deadline' || performance.now() >= this.trustedUntil) this.#lose('unconfirmed');
    else void this.#renewOnce();
  }

  async #renewOnce(): Promise<void> {
    const sent = performance.now();
    // While the renewal is out, the timer watches the deadline.
    this.#arm('deadline', this.trustedUntil);
    try {
      const ok = await this.#renew();
      if (this.#stopped || this.#lost) return;
      if (!ok) {
        this.#lose('revoked');
        return;
      }
      this.trustedUntil = sent + this.#leaseMs * (1 - DEFAULT_DRIFT_RATE);
    } catch {
      // Not confirmed: the deadline stands unless a later renewal succeeds.
      if (this.#stopped || this.#lost) return;
    }
    this.#armNext();
  }

  /**
   * No more renewals: the lease runs out at trustedUntil (a renewal already sent may still extend
   * it), then the signal aborts ('unconfirmed') unless the run has ended.
   */
  stopRenewing(): void {
    this.#renewing = false;
    if (!this.#stopped && !this.#lost && this.#armedFor === 'renewal')
      this.#arm('deadline', this.trustedUntil);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#linked?.dispose();
  }
}
