import { DEFAULT_DRIFT_RATE } from '../clock.js';
import { LockLostError } from '../errors.js';
import { type LinkedSignal, linkSignals } from '../signals.js';

/**
 * Keeps a running record's lease alive every leaseMs/3 while fn runs, and gives fn a signal that
 * aborts before the lease can have passed to a repeat: at `sent + lease × (1 − drift)` after the
 * last confirmed renewal (LockLostError 'unconfirmed'), or at once when the store says another
 * request has taken the record over ('revoked'). A paused process cannot notice either: its
 * completion is then refused by the token.
 */
export class LeaseKeeper {
  private readonly linked: LinkedSignal;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** When the lease may last be trusted, by this process's monotonic clock. */
  trustedUntil: number;

  constructor(
    private readonly key: string,
    private readonly token: bigint,
    private readonly leaseMs: number,
    beganAt: number,
    parent: AbortSignal | undefined,
    private readonly renew: () => Promise<boolean>,
  ) {
    this.linked = linkSignals([parent]);
    this.trustedUntil = beganAt + leaseMs * (1 - DEFAULT_DRIFT_RATE);
    this.armDeadline();
    this.scheduleRenewal();
  }

  get signal(): AbortSignal {
    return this.linked.signal;
  }

  private lose(reason: 'unconfirmed' | 'revoked'): void {
    this.linked.abort(new LockLostError(`idempotency:${this.key}`, this.token, reason));
  }

  private armDeadline(): void {
    clearTimeout(this.deadlineTimer);
    this.deadlineTimer = setTimeout(
      () => this.lose('unconfirmed'),
      Math.max(0, this.trustedUntil - performance.now()),
    );
    this.deadlineTimer.unref();
  }

  private scheduleRenewal(): void {
    if (this.stopped || this.linked.signal.aborted) return;
    this.renewTimer = setTimeout(() => void this.renewOnce(), this.leaseMs / 3);
    this.renewTimer.unref();
  }

  private async renewOnce(): Promise<void> {
    const sent = performance.now();
    try {
      const ok = await this.renew();
      if (this.stopped) return;
      if (!ok) return this.lose('revoked');
      this.trustedUntil = sent + this.leaseMs * (1 - DEFAULT_DRIFT_RATE);
      this.armDeadline();
    } catch {
      // Not confirmed: the deadline timer aborts the signal if no later renewal succeeds.
    }
    this.scheduleRenewal();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.renewTimer);
    clearTimeout(this.deadlineTimer);
    this.linked.dispose();
  }
}
