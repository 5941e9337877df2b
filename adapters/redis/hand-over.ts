import { monotonicNow, safeDeadline } from '../../src/clock.js';
import type { OwnedLock } from '../../src/ownership.js';
import type { WaiterNotices } from './notices.js';

/** A grant a release handed to this waiter, with where its lease may be counted from. */
export interface HandedGrant {
  token: bigint;
  /** Send time (monotonic ms) of an attempt Redis answered before the grant was made. */
  sentAt: number;
  rttMs: number;
}

/**
 * The fence counter a refusal reported: null when Redis has none (a name whose counter was lost or
 * evicted while its lock key stayed) or sent something that is not a count. A refusal without a
 * fence lets no notice hand the waiter a grant (it cannot tell a stale one): it tries again instead.
 */
export function refusalFence(refusal: readonly [number, string | null | undefined]): bigint | null {
  const fence = refusal[1];
  return typeof fence === 'string' && /^\d{1,30}$/.test(fence) ? BigInt(fence) : null;
}

/**
 * What one waiter has heard: release notices on the name's channel and the answers to its own
 * attempts. In fair mode a release grants the key to the first waiter and publishes
 * "ownerToken token"; the waiter may then hold it without another call. Its lease started after the
 * last attempt Redis answered "not yours", so it is counted from that attempt's send time.
 */
export class WaiterInbox {
  /** A notice came (for us, or for anyone when not fair): the next attempt should not wait. */
  noticed = false;
  #handed: bigint | undefined;
  #answeredSentAt: number | undefined;
  #answeredRttMs = 0;
  /**
   * The fence counter at the last refusal: a grant made after it has a higher token. undefined
   * before any refusal, null after one without a fence (then no notice hands a grant).
   */
  #answeredFence: bigint | null | undefined;

  constructor(
    readonly ownerToken: string,
    readonly fair: boolean,
  ) {}

  /** A release notice; returns whether it is meant for this waiter. */
  notice(message: string): boolean {
    const [next, token] = message.split(' ');
    if (this.fair && next !== this.ownerToken) return false;
    if (next === this.ownerToken && token !== undefined && /^\d+$/.test(token)) {
      // A notice delayed past a later refusal announces a grant made before that refusal, which
      // has ended since (Redis said "not yours" after it): its token is not above the counter.
      const granted = BigInt(token);
      const fence = this.#answeredFence;
      if (typeof fence === 'bigint' && granted <= fence) return false;
      if (fence !== null) this.#handed = granted; // without a fence, a wake-up only: try again
    }
    this.noticed = true;
    return true;
  }

  /**
   * Redis answered an attempt sent at sentAt with "not yours" while its fence counter stood at
   * `fence`. A notice counts only if its token is above `fence`: only then was its grant made after
   * the refusal, so its lease may be counted from sentAt. One heard before this answer (its
   * PUBLISH can overtake the reply, on another connection) counts by the same rule; any other is
   * void (that grant may have expired since), and if it was still ours, the next attempt, made at
   * once, adopts it.
   */
  refused(sentAt: number, fence: bigint | null): void {
    this.#answeredSentAt = sentAt;
    this.#answeredFence = fence;
    this.#answeredRttMs = monotonicNow() - sentAt;
    if (this.#handed === undefined || (fence !== null && this.#handed > fence)) return;
    this.noticed = true;
    this.#handed = undefined;
  }

  /**
   * The grant handed to us, if at most `withinMs` (default ttl/3, the watchdog's first renewal) of
   * its lease has passed; otherwise undefined, and an attempt adopts the grant and restarts its
   * lease. A later `withinMs` suits a holder that extends the grant at once (extendHanded does when
   * ttl/3 has passed).
   */
  handed(ttlMs: number, withinMs = ttlMs / 3): HandedGrant | undefined {
    const sentAt = this.#answeredSentAt;
    if (this.#handed === undefined || sentAt === undefined) return undefined;
    if (monotonicNow() - sentAt >= withinMs) return undefined;
    return { token: this.#handed, sentAt, rttMs: this.#answeredRttMs };
  }
}

/**
 * A waiting request's notices: its inbox, and its listener on the provider's channel. Listening
 * starts before the request's first attempt once notices reach this client: a release just after
 * that attempt queued us publishes on the subscriber connection, and the notice can be read before
 * the attempt's reply (one nobody listens for is lost, and costs the waiter a poll). Before the
 * first subscription it starts after the first refusal, as the waiter then looks once more anyway.
 */
export class WaiterEar {
  readonly inbox: WaiterInbox;
  /** Called for each notice the inbox takes (the sleeping waiter's wake-up). */
  wake: () => void = () => undefined;
  readonly #notices: WaiterNotices;
  readonly #woken: () => void;
  #listening: { subscribed: Promise<void>; stop: () => void } | undefined;

  constructor(notices: WaiterNotices, ownerToken: string, fair: boolean, woken: () => void) {
    this.inbox = new WaiterInbox(ownerToken, fair);
    this.#notices = notices;
    this.#woken = woken;
    if (notices.subscribed) this.listen();
  }

  /** Listens (once); settles `subscribed` when the provider's subscription is in place or failed. */
  listen(): { subscribed: Promise<void> } {
    this.#listening ??= this.#notices.listen(this.inbox.ownerToken, (message) => {
      if (!this.inbox.notice(message)) return;
      this.#woken();
      this.wake();
    });
    return this.#listening;
  }

  stop(): void {
    this.#listening?.stop();
  }
}

/**
 * A grant a release handed us (lock made from `handed`, its lease counted from handed.sentAt): held
 * until sentAt + provisionalMs by the lease rule (the release script caps the grant at the life our
 * place in the queue had left), and extended to ttlMs by one renewal a third of the way into that (a
 * grant released sooner, as most are under contention, never sends it); its confirmation then moves
 * the deadline as usual, and the lock's own watchdog takes over.
 */
export function extendHanded(
  lock: OwnedLock,
  handed: HandedGrant,
  o: {
    provisionalMs: number;
    ttlMs: number;
    driftRate: number;
    /** true: extended; false: the lease is gone; 'revoked': an operator's forceRelease removed it. */
    renew: () => Promise<boolean | 'revoked'>;
  },
): OwnedLock {
  if (o.provisionalMs >= o.ttlMs) return lock;
  lock.confirmUntil(safeDeadline(handed.sentAt, o.provisionalMs, handed.rttMs, o.driftRate));
  const extend = () => {
    if (!lock.held) return;
    const sentAt = monotonicNow();
    o.renew().then(
      (ours) => {
        if (ours !== true) lock.lose(ours === 'revoked' ? 'revoked' : 'expired');
        else lock.confirmUntil(safeDeadline(sentAt, o.ttlMs, monotonicNow() - sentAt, o.driftRate));
      },
      () => undefined, // unanswered: the provisional deadline decides, the watchdog keeps trying
    );
  };
  const timer = setTimeout(extend, Math.max(0, handed.sentAt + o.provisionalMs / 3 - monotonicNow()));
  timer.unref(); // the watchdog keeps the process alive while the lock is held, not this
  lock.onEnd(() => clearTimeout(timer));
  return lock;
}
