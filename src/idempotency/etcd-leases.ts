import type { Etcd3 } from 'etcd3';
import { keepaliveOnce } from '../etcd-keepalive.js';

type Deadline = () => { deadline: Date };

/**
 * The etcd leases behind idempotency records. etcd counts lease time in whole seconds on its own
 * clock (and may raise a short TTL to its minimum), so a lease lasts at least the milliseconds asked
 * for, never less: a client that trusts its lease for leaseMs from the moment it asked is safe.
 *
 * A claim (a run in flight) has a lease of its own, renewed by the run. Records share retention
 * leases: one per retention, granted for retention + a tenth (at least 1 s) and given to the
 * records written during that tenth, so each record lives at least its retention and a store
 * grants about ten retention leases per retention period instead of one per record.
 */
export class EtcdLeases {
  readonly #retention = new Map<number, { id: Promise<string>; until: number }>();

  readonly #client: Etcd3;
  readonly #deadline: Deadline;

  constructor(client: Etcd3, deadline: Deadline) {
    this.#client = client;
    this.#deadline = deadline;
  }

  /** A new lease of at least `ms` (whole seconds). */
  async grant(ms: number): Promise<string> {
    const ttl = Math.max(1, Math.ceil(ms / 1000));
    // Our own id: the etcd3 client replays a grant whose answer was lost, and the replay is then
    // refused as "already exists" (ours) instead of granting a second lease.
    const id = randomLeaseId();
    try {
      await this.#client.leaseClient.leaseGrant({ TTL: ttl, ID: id }, this.#deadline());
    } catch (error) {
      if (!/lease already exists/i.test((error as Error).message)) throw error;
    }
    return id;
  }

  /** A lease that outlives `retentionMs` from now, shared by the records written about now. */
  retention(retentionMs: number): Promise<string> {
    const seconds = Math.max(1, Math.ceil(retentionMs / 1000));
    const now = performance.now();
    const current = this.#retention.get(seconds);
    if (current && now < current.until) return current.id;
    const slack = Math.max(1, Math.ceil(seconds / 10));
    // Reused for `slack` seconds from the moment it was asked for: every record given it then has
    // at least `seconds` left.
    const entry = { id: this.grant((seconds + slack) * 1000), until: now + slack * 1000 };
    this.#retention.set(seconds, entry);
    entry.id.catch(() => {
      if (this.#retention.get(seconds) === entry) this.#retention.delete(seconds); // the next call asks again
    });
    return entry.id;
  }

  /** Forgets the shared retention leases (etcd no longer has one: revoked by hand, or etcd restored). */
  forgetRetention(): void {
    this.#retention.clear();
  }

  /** Restarts a lease's TTL; resolves with the TTL (seconds) etcd gave it, 0 when it has ended. */
  keepalive(id: string): Promise<number> {
    return keepaliveOnce(this.#client, id, this.#deadline().deadline);
  }

  /**
   * How long a lease has left, rounded up to the second etcd counts in. A lease that has ended
   * still holds its keys until etcd's next check for ended leases, every 500 ms.
   */
  async leftMs(id: string): Promise<number> {
    const { TTL } = await this.#client.leaseClient.leaseTimeToLive({ ID: id }, this.#deadline());
    const seconds = Number(TTL);
    return seconds < 0 ? 500 : (seconds + 1) * 1000; // etcd truncates what is left to whole seconds
  }
}

/** A random lease id in 1..2⁶³−1 (etcd's ids are positive int64), as the decimal string etcd3 sends. */
function randomLeaseId(): string {
  const bytes = new BigUint64Array(1);
  crypto.getRandomValues(bytes);
  const id = (bytes[0] as bigint) & 0x7fff_ffff_ffff_ffffn;
  return (id === 0n ? 1n : id).toString();
}
