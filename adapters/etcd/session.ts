import { setMaxListeners } from 'node:events';
import type { Etcd3 } from 'etcd3';
import { monotonicNow } from '../../src/clock.js';
import { BackendUnavailableError, type LossReason } from '../../src/errors.js';
import { keepaliveOnce } from '../../src/etcd-keepalive.js';
import { SessionLiveness, type SessionRenewalListener } from '../../src/session-liveness.js';
import { bounded } from './bounded.js';
import { deleteUntilConfirmed, settledRevision } from './cleanup.js';
import type { EnqueueAttempt } from './enqueue-txn.js';
import { leaseHex } from './keys.js';

export interface SessionOptions {
  ttlMs: number;
  driftRate: number;
  /** Deadline of each call to etcd. */
  callTimeoutMs: number;
  /** Told of each keepalive (metrics, renew-failed events). */
  onRenewal?: SessionRenewalListener;
}

/**
 * One etcd lease shared by every lock of a provider, as Go's concurrency.Session: granted once, kept
 * alive every ttl/3 (sooner while the trust left is short), and trusted only until
 * `sent + ttl·(1−drift) − rtt` after the last keepalive answer. When that passes, or etcd answers
 * TTL 0 / lease not found, the session is lost and `signal` aborts (reason: a LossReason); the
 * provider then grants a new one for later acquires.
 * The session owns every key it created: remove() deletes one, guarded by its create revision, and
 * retries until etcd confirms or the session ends. A session written off while etcd may still keep
 * its lease is revoked (best effort), so its keys do not outlive it by a whole TTL.
 */
export class EtcdSession {
  readonly leaseId: string;
  readonly leaseHex: string;
  readonly #client: Etcd3;
  readonly #options: SessionOptions;
  readonly #liveness: SessionLiveness;
  #keepaliveTimer: NodeJS.Timeout | undefined;
  #subscriptions = 0;
  #answering = true;

  private constructor(client: Etcd3, leaseId: string, options: SessionOptions) {
    this.#client = client;
    this.leaseId = leaseId;
    this.leaseHex = leaseHex(leaseId);
    this.#options = options;
    this.#liveness = new SessionLiveness(options.driftRate, () => clearTimeout(this.#keepaliveTimer));
    // Every retried deletion waits on it (close() may release thousands at once): not a leak.
    setMaxListeners(0, this.#liveness.signal);
    // Lost locally (no keepalive answer in time) but maybe alive on the server: end it there too.
    this.#liveness.whenLost((reason) => {
      if (reason === 'unconfirmed') void this.#revoke();
    });
  }

  static async open(client: Etcd3, options: SessionOptions): Promise<EtcdSession> {
    const sentAt = monotonicNow();
    const ttlSeconds = Math.max(1, Math.ceil(options.ttlMs / 1000));
    // We choose the lease id: the etcd3 client replays a grant whose answer was lost, and with our
    // id the replay is refused as "already exists" (ours) instead of granting a second lease.
    const id = randomLeaseId();
    let granted: { ID: string; TTL: string };
    try {
      granted = await client.leaseClient.leaseGrant(
        { TTL: ttlSeconds, ID: id },
        { deadline: new Date(Date.now() + options.callTimeoutMs) },
      );
    } catch (error) {
      if (!/lease already exists/i.test((error as Error).message)) {
        throw new BackendUnavailableError(
          `etcd: could not grant a session lease: ${(error as Error).message}`,
          {
            cause: error,
          },
        );
      }
      granted = { ID: id, TTL: String(ttlSeconds) }; // our first attempt was granted
    }
    const session = new EtcdSession(client, granted.ID, options);
    session.#liveness.confirmed(sentAt, Number(granted.TTL) * 1000);
    session.#scheduleKeepalive(session.#nextKeepaliveIn());
    return session;
  }

  /** Aborts when the session is lost; reason is the LossReason. */
  get signal(): AbortSignal {
    return this.#liveness.signal;
  }

  /** Calls onLost once if the session is lost; returns the function that unsubscribes. */
  whenLost(onLost: (reason: LossReason) => void): () => void {
    if (!this.alive) return this.#liveness.whenLost(onLost);
    this.#subscriptions += 1;
    const unsubscribe = this.#liveness.whenLost(onLost);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#subscriptions -= 1;
      unsubscribe();
    };
  }

  /** whenLost subscriptions not yet unsubscribed (a leak check: each held lock keeps one). */
  get subscriptions(): number {
    return this.#subscriptions;
  }

  get alive(): boolean {
    return this.#liveness.alive;
  }

  /** How long (ms) the last keepalive answer still vouches for the session; 0 once it is lost. */
  get trustLeftMs(): number {
    return this.#liveness.trustLeftMs;
  }

  /** Alive, and its last keepalive was answered (false while etcd does not answer it). */
  get answering(): boolean {
    return this.alive && this.#answering;
  }

  get #interval(): number {
    return this.#options.ttlMs / 3;
  }

  /**
   * Every ttl/3, or sooner when a slow answer left less trust than that: a third of what is left,
   * so the next answer has the rest to arrive in. (An answer that took r leaves ttl − 2r: after a
   * lease grant slower than ttl/3, the next keepalive at ttl/3 could only come back too late.)
   */
  #nextKeepaliveIn(): number {
    return Math.min(this.#interval, this.#liveness.trustLeftMs / 3);
  }

  /** etcd answered that our lease does not exist (revoked, expired): lost now, not at the next keepalive. */
  leaseNotFound(): void {
    this.#lose('session-lost');
  }

  /** Ends the session. revoke=true deletes its keys at once; false lets them expire (a crash). */
  async close(revoke: boolean): Promise<void> {
    this.#lose('closed');
    if (revoke) await this.#revoke();
  }

  /**
   * Deletes a key of this session (created at `revision`; undefined when the put's answer was lost),
   * retrying until confirmed: resolves true then, false when the session ended first (its keys
   * go with its lease). A session that cannot confirm within its TTL is ended (and revoked).
   */
  remove(key: Buffer, revision: bigint | undefined): Promise<boolean> {
    return deleteUntilConfirmed(this.#client, key, revision, {
      timeoutMs: this.#options.callTimeoutMs,
      sessionSignal: this.signal,
      giveUpAfterMs: this.#options.ttlMs,
      giveUp: () => this.#lose('unconfirmed'),
    });
  }

  /**
   * A grant's release: remove(), waited for at most waitMs (the caller's callTimeoutMs), as a lock's
   * release waits. Resolves once etcd confirmed the delete; rejects with BackendUnavailableError when
   * it did not in time or the session ended first. Either way the session owns the delete from then
   * on (it retries until confirmed, or its lease takes the key): an unreachable etcd must not hold
   * release(), withRead/withWrite or a born-lost grant's clean-up for the session's whole TTL.
   */
  async release(key: Buffer, revision: bigint, waitMs: number): Promise<void> {
    const confirmed = await bounded(this.remove(key, revision), undefined, waitMs, 'release').catch(
      () => false,
    );
    if (!confirmed) {
      throw new BackendUnavailableError('etcd: release not confirmed in time; the session retries it');
    }
  }

  /**
   * Deletes the key an enqueue Txn may have put after its caller gave up on it (cancelled, timed
   * out): waits for the Txn's own outcome (see settledRevision), then removes the key as remove()
   * does. Resolves true once confirmed, false when the session ended first.
   */
  async removeEnqueued(key: Buffer, attempt: EnqueueAttempt): Promise<boolean> {
    const revision = await settledRevision(attempt, this.signal);
    if (revision === 'ended') return false;
    return this.remove(key, revision);
  }

  /** Revokes the lease, bounded by callTimeoutMs; unreachable: it expires by itself within its TTL. */
  async #revoke(): Promise<void> {
    const timeout = this.#options.callTimeoutMs;
    try {
      const revoking = this.#client.leaseClient.leaseRevoke(
        { ID: this.leaseId },
        { deadline: new Date(Date.now() + timeout) },
      );
      await bounded(revoking, undefined, timeout, 'lease revoke');
    } catch {
      // Unreachable or closed: the lease expires by itself within its TTL.
    }
  }

  #scheduleKeepalive(delay: number): void {
    if (!this.alive) return;
    this.#keepaliveTimer = setTimeout(() => void this.#keepalive(), delay);
  }

  async #keepalive(): Promise<void> {
    const sentAt = monotonicNow();
    try {
      const ttl = await this.#keepaliveOnce();
      if (!this.alive) return;
      this.#options.onRenewal?.(ttl > 0 ? 'renewed' : 'rejected', (monotonicNow() - sentAt) / 1000);
      if (ttl <= 0) {
        this.#lose('session-lost'); // etcd says the lease is gone
        return;
      }
      this.#liveness.confirmed(sentAt, ttl * 1000);
      this.#answering = true;
      this.#scheduleKeepalive(this.#nextKeepaliveIn());
    } catch (error) {
      this.#answering = false;
      if (this.alive) this.#options.onRenewal?.('failed', (monotonicNow() - sentAt) / 1000, error);
      // No answer in time: the deadline set by the last answer decides; retry sooner meanwhile.
      this.#scheduleKeepalive(Math.max(this.#options.ttlMs / 10, 50));
    }
  }

  /** One keepalive on its own short stream, bounded by callTimeoutMs; resolves with the new TTL. */
  #keepaliveOnce(): Promise<number> {
    const timeout = Math.min(this.#options.callTimeoutMs, this.#interval);
    return keepaliveOnce(this.#client, this.leaseId, new Date(Date.now() + timeout));
  }

  #lose(reason: LossReason): void {
    this.#liveness.lose(reason);
  }
}

/** A random lease id in 1..2⁶³−1 (etcd's ids are positive int64), as the decimal string etcd3 sends. */
function randomLeaseId(): string {
  const bytes = new BigUint64Array(1);
  crypto.getRandomValues(bytes);
  const id = (bytes[0] as bigint) & 0x7fff_ffff_ffff_ffffn;
  return (id === 0n ? 1n : id).toString();
}
