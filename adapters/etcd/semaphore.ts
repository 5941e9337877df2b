import { CompareResult, CompareTarget, type Etcd3, type IKeyValue, SortOrder, SortTarget } from 'etcd3';
import { CANCEL_GRACE_MS, withinGrace } from '../../src/cancel-grace.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { decodeHolder, encodeHolder } from '../../src/holder-record.js';
import { OwnedLock } from '../../src/ownership.js';
import {
  type AdapterSemaphoreInfo,
  GenericSemaphore,
  type PermitRequest,
  type SemaphoreAdapter,
  type SemaphoreContext,
} from '../../src/semaphore/core.js';
import { withDeadline } from '../../src/semaphore/deadline.js';
import { SemaphoreLimitMismatchError } from '../../src/semaphore/errors.js';
import type { Semaphore, SemaphoreHolder, SemaphoreOptions } from '../../src/semaphore/types.js';
import { requestSignal } from './bounded.js';
import type { DeletionSubscription } from './deletion-watch.js';
import { loseWithSessionOrKey } from './grant-loss.js';
import { namePrefix, prefixEnd } from './keys.js';
import {
  type GrantDelay,
  grantDelayEnds,
  grantDelays,
  grantMarkerValue,
  type MarkedGrant,
  releaseGrant,
  startGrantDelays,
} from './lock-delay.js';
import { enqueue, type MutexCall, type Queued, sendEnqueue, unavailable, waitForTurn } from './mutex.js';
import type { EtcdSession } from './session.js';

/** What an etcd semaphore borrows from its provider. */
export interface EtcdSemaphoreClient {
  client: Etcd3;
  namespace: string;
  callTimeoutMs: number;
  /**
   * The provider's live session for a lease of ttlMs (undefined: its sessionTtlMs), a new one after
   * a loss.
   */
  session(ttlMs?: number): Promise<EtcdSession>;
  /** Counts a waiter woken: by a released permit, or by the queue handed on after a grant. */
  woken(kind: 'release' | 'handoff'): void;
  /** Listens for key's deletion by anyone (the provider's one deletion watch, deletion-watch.ts). */
  watchDeletion(key: Buffer): DeletionSubscription;
  /** The error as the caller sees it: an AuthenticationError when etcd refused who we are. */
  refused(error: unknown): Promise<unknown>;
}

/**
 * A semaphore on etcd, Curator's InterProcessSemaphoreV2 design with etcd's tools. Under
 * `<namespace>/semaphore/<name>/` (a leading '/' no lock name has, so no lock's prefix covers it):
 * `locks/<lease hex>-<attempt id>` is a FIFO mutex (the lock's queue: each waiter watches only its
 * predecessor), `leases/<lease hex>-<attempt id>` one key per grant, on the session lease
 * of the request's TTL (see sessions.ts), value = holder record with permits and limit. Each attempt at a request (the core retries
 * one after an outage) names its keys afresh, so every key has one owner: the attempt that made
 * it, or the session once that attempt gave it up. Only the head of the mutex looks at the
 * leases: it counts their permits and, if ours fit, creates our lease key and deletes its mutex key
 * in one Txn guarded by that mutex key (so a head whose session expired cannot grant); otherwise it
 * alone watches the leases for a deletion. A released permit so wakes one waiter, and each grant
 * hands the queue to the next one. The lease key's create revision is the token.
 *
 * Lock-delay (lock-delay.ts): a grant that asks for one also puts `lockdelay/<attempt id>` on no
 * lease in its grant Txn; a clean release deletes both in one Txn. The head counts, besides the
 * leases, the permits of every marker whose lease key is gone (a lost grant: it stamps the delay)
 * or that runs on a delay lease, and watches those markers' deletions as it watches the leases'.
 */
export function etcdSemaphore(
  name: string,
  options: SemaphoreOptions,
  ctx: SemaphoreContext,
  client: EtcdSemaphoreClient,
): Semaphore {
  return new GenericSemaphore(name, options, ctx, new EtcdSemaphoreAdapter(name, client));
}

interface LeaseRecord {
  permits: number;
  limit: number;
}

/** One attempt (request() call) taking permits as the head of the queue. */
interface PermitTake {
  session: EtcdSession;
  queued: Queued;
  /** The lease key this attempt's grant Txn creates (its name is this attempt's alone). */
  permitKey: Buffer;
  /** A grant Txn went out and no answer came: it may have been applied, or may still be. */
  grantUnanswered: boolean;
}

const callOptions = (timeoutMs: number) => ({ deadline: new Date(Date.now() + timeoutMs) });

class EtcdSemaphoreAdapter implements SemaphoreAdapter {
  readonly #c: EtcdSemaphoreClient;
  readonly #locks: string;
  readonly #leases: Buffer;
  /** The grants' lock-delay markers (see lock-delay.ts). */
  readonly #markers: Buffer;
  /** `<namespace>/semaphore/<escaped name>/`: leases, markers and queue. */
  readonly #base: string;
  readonly keepsLockDelay = true;

  constructor(name: string, client: EtcdSemaphoreClient) {
    this.#c = client;
    const base = namePrefix(`${client.namespace}/semaphore/`, name);
    this.#base = base;
    this.#locks = `${base}locks/`;
    this.#leases = Buffer.from(`${base}leases/`);
    this.#markers = Buffer.from(`${base}lockdelay/`);
  }

  async inspect(signal: AbortSignal): Promise<AdapterSemaphoreInfo> {
    const locks = Buffer.from(this.#locks);
    const res = await withDeadline(
      () =>
        this.#c.client.kv.txn(
          {
            compare: [],
            success: [
              { request_range: this.#leaseRange() },
              { request_range: { key: locks, range_end: prefixEnd(locks), count_only: true } },
              { request_range: this.#markerRange() },
            ],
            failure: [],
          },
          callOptions(this.#c.callTimeoutMs),
        ),
      this.#c.callTimeoutMs,
      signal,
      'etcd: semaphore inspect',
    ).catch(async (error: unknown) => {
      throw await this.#c.refused(
        error instanceof BackendUnavailableError ? error : unavailable('semaphore inspect failed', error),
      );
    });
    const kvs = res.responses[0]?.response_range.kvs ?? [];
    const holders: SemaphoreHolder[] = kvs.map((kv) => {
      const stored = decodeHolder(kv.value);
      return {
        owner: stored.owner,
        since: stored.since,
        fencingToken: BigInt(kv.create_revision),
        permits: readRecord(kv).permits,
      };
    });
    const delays = this.#delays(kvs, res.responses[2]?.response_range.kvs ?? []);
    const ends = await grantDelayEnds(this.#c.client, delays, this.#c.callTimeoutMs, signal).catch(
      async (error: unknown) => {
        throw await this.#c.refused(error);
      },
    );
    return {
      holders,
      waiters: Number(res.responses[1]?.response_range.count ?? 0),
      delayed: delays.map((delay, i) => ({ permits: delay.weight, delayedUntil: ends[i] as Date })),
    };
  }

  /** The markers that are delays now: their lease key gone (lost) or on a delay lease. */
  #delays(leases: IKeyValue[], markers: IKeyValue[]): GrantDelay[] {
    const live = new Set(leases.map((kv) => kv.key.subarray(this.#leases.length).toString('utf8')));
    return grantDelays(this.#markers, markers, (id) => live.has(id));
  }

  async request(req: PermitRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    try {
      return await this.#request(req, cancel);
    } catch (error) {
      // A refusal of who we are is not an outage: the core does not retry it for waitMs.
      throw await this.#c.refused(error);
    }
  }

  async #request(req: PermitRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const session = await withDeadline(
      () => this.#c.session(req.ttlGiven ? req.ttlMs : undefined),
      this.#c.callTimeoutMs,
      cancel,
      'etcd: session',
    );
    // Keys of this attempt alone (`<lease hex>-<attempt id>`): a retry of the request makes its own,
    // so a key is never claimed both by a retry and by the clean-up of the attempt it retries.
    const attemptId = `${session.leaseHex}-${crypto.randomUUID()}`;
    const key = Buffer.from(`${this.#locks}${attemptId}`);
    const call: MutexCall = {
      client: this.#c.client,
      session,
      prefix: this.#locks,
      key,
      value: encodeHolder(req.owner),
      callTimeoutMs: this.#c.callTimeoutMs,
      onWake: () => this.#c.woken('handoff'),
    };
    let queued: Queued;
    const permitKey = Buffer.from(`${this.#leases.toString()}${attemptId}`);
    // Subscribed before the Txn is sent: a delete of our permit key (put by us, or by a head that
    // grants us) before the grant is seen too, and makes the grant born lost.
    const deletion = this.#c.watchDeletion(permitKey);
    const attempt = sendEnqueue(call);
    try {
      queued = await enqueue(call, attempt, cancel);
    } catch (error) {
      deletion.stop();
      // The Txn may still put our key: the session waits for its outcome and deletes what it made.
      void session.removeEnqueued(key, attempt);
      throw error;
    }
    const taking: PermitTake = { session, queued, permitKey, grantUnanswered: false };
    let inQueue = true;
    let held = false;
    // The wait in the queue ends at once when the session is lost (BackendUnavailableError: the
    // shared loop re-enqueues on a new session within waitMs), as the lock's and read-write's do.
    const waiting = requestSignal(cancel, (onLost) => session.whenLost(onLost));
    try {
      if (!queued.owner) {
        if (!req.wait) return null;
        await waitForTurn(call, queued, waiting.signal);
      }
      const grant = await this.#takePermits(req, taking, cancel);
      if (!grant) return null;
      inQueue = false; // the granting Txn deleted our mutex key
      held = true;
      return this.#hold(req, session, grant, deletion);
    } finally {
      waiting.dispose();
      if (!held) deletion.stop();
      // Not granted (busy, cancelled, failed): the session deletes our queue key, retrying until
      // etcd confirms. The caller waits for that at most callTimeoutMs (a cut-off client would
      // otherwise wait a whole TTL), so that a refused try leaves no waiter behind when it answers.
      // A cancelled caller (waitMs, abort) waits only CANCEL_GRACE_MS: a frozen etcd must not
      // stretch its deadline.
      if (inQueue) {
        const removing = session.remove(queued.key, queued.revision);
        if (taking.grantUnanswered) void this.#removeUnansweredGrant(taking, removing);
        await withinGrace(removing, cancel.aborted ? CANCEL_GRACE_MS : this.#c.callTimeoutMs);
      }
    }
  }

  /**
   * A grant Txn sent without an answer may have created our permit key, or may still: it commits
   * only while our queue key has the create revision it compares, so once the session confirmed
   * that key gone the Txn can no longer apply. Then the permit key, if there, is that Txn's (no
   * other attempt uses its name, and this one granted nothing), and the session removes it by its
   * create revision. The session ending first takes the key with its lease.
   */
  async #removeUnansweredGrant(taking: PermitTake, queueKeyRemoved: Promise<boolean>): Promise<void> {
    if (await queueKeyRemoved) await taking.session.remove(taking.permitKey, undefined);
  }

  /** As the head of the queue: our lease key once our permits fit, or null when not waiting. */
  async #takePermits(
    req: PermitRequest,
    taking: PermitTake,
    cancel: AbortSignal,
  ): Promise<{ key: Buffer; revision: bigint } | null> {
    const { client, callTimeoutMs } = this.#c;
    for (;;) {
      cancel.throwIfAborted();
      let read: Awaited<ReturnType<Etcd3['kv']['txn']>>;
      try {
        // The leases and the lock-delay markers at one revision.
        read = await withDeadline(
          () =>
            client.kv.txn(
              {
                compare: [],
                success: [{ request_range: this.#leaseRange() }, { request_range: this.#markerRange() }],
                failure: [],
              },
              callOptions(callTimeoutMs),
            ),
          callTimeoutMs,
          cancel,
          'etcd: reading the semaphore',
        );
      } catch (error) {
        if (cancel.aborted || error instanceof BackendUnavailableError) throw error;
        throw unavailable('reading the semaphore failed', error);
      }
      const leases = read.responses[0]?.response_range.kvs ?? [];
      const markers = read.responses[1]?.response_range.kvs ?? [];
      // Lost grants' permits stay taken for their delay: started here when nobody has yet.
      const delays = this.#delays(leases, markers);
      const leaseKey = (id: string) => Buffer.concat([this.#leases, Buffer.from(id)]);
      await startGrantDelays(client, delays, leaseKey, callTimeoutMs, cancel);
      let used = delays.reduce((sum, delay) => sum + delay.weight, 0);
      for (const kv of leases) {
        const record = readRecord(kv);
        if (!Number.isNaN(record.limit) && record.limit !== req.limit)
          throw new SemaphoreLimitMismatchError(req.name, req.limit, record.limit);
        used += record.permits;
      }
      if (used + req.permits <= req.limit) return await this.#grant(req, taking, cancel);
      if (!req.wait) return null;
      const watched = markers.length > 0 ? Buffer.from(this.#base) : this.#leases;
      await this.#nextRelease(BigInt(read.header.revision) + 1n, watched, taking.session, cancel);
    }
  }

  /** One Txn: while our mutex key is still ours (we head the queue), create the lease, leave the queue. */
  async #grant(
    req: PermitRequest,
    taking: PermitTake,
    cancel: AbortSignal,
  ): Promise<{ key: Buffer; revision: bigint }> {
    const { session, queued, permitKey: key } = taking;
    const value = JSON.stringify({
      ...JSON.parse(encodeHolder(req.owner)),
      permits: req.permits,
      limit: req.limit,
    });
    let res: Awaited<ReturnType<Etcd3['kv']['txn']>>;
    try {
      const txn = {
        compare: [
          {
            key: queued.key,
            target: CompareTarget.Create,
            result: CompareResult.Equal,
            create_revision: queued.revision.toString(),
          },
          { key, target: CompareTarget.Create, result: CompareResult.Equal, create_revision: 0 },
        ],
        success: [
          { request_put: { key, value: Buffer.from(value), lease: session.leaseId } },
          { request_delete_range: { key: queued.key } },
          ...(req.lockDelayMs > 0
            ? [
                {
                  request_put: {
                    key: this.#markerOf(key),
                    value: grantMarkerValue(req.lockDelayMs, req.permits),
                  },
                },
              ]
            : []),
        ],
        failure: [{ request_range: { key } }, { request_range: { key: queued.key, keys_only: true } }],
      };
      res = await withDeadline(
        () => this.#c.client.kv.txn(txn, callOptions(this.#c.callTimeoutMs)),
        this.#c.callTimeoutMs,
        cancel,
        'etcd: semaphore grant',
      );
    } catch (error) {
      // Applied or not, we cannot tell: request() hands the permit key to the session.
      taking.grantUnanswered = true;
      if (cancel.aborted || error instanceof BackendUnavailableError) throw error;
      throw unavailable('semaphore grant txn failed', error);
    }
    if (res.succeeded) return { key, revision: BigInt(res.header.revision) };
    // The etcd3 client replays a Txn whose answer was lost. Our permit key there means this Txn was
    // applied (no other attempt uses its name): the replay adopts it, and takes over what the Txn
    // deleted too, our queue key, should a stray replay of our enqueue have put it back since.
    const existing = res.responses[0]?.response_range.kvs[0];
    if (existing && existing.lease === session.leaseId) {
      const queueKeyBack = res.responses[1]?.response_range.kvs[0];
      if (queueKeyBack) void session.remove(queued.key, BigInt(queueKeyBack.create_revision));
      return { key, revision: BigInt(existing.create_revision) };
    }
    throw new BackendUnavailableError('etcd: the session expired while waiting; the queue entry is gone');
  }

  /**
   * Waits for any lease under the name to be deleted at or after fromRevision (or the watch to end),
   * or a lock-delay marker when `watched` is the name's whole folder (the queue's deletions are
   * passed over).
   */
  async #nextRelease(
    fromRevision: bigint,
    watched: Buffer,
    session: EtcdSession,
    cancel: AbortSignal,
  ): Promise<void> {
    const queue = Buffer.from(this.#locks);
    const creating = this.#c.client
      .watch()
      .prefix(watched.toString())
      .only('delete')
      .startRevision(fromRevision.toString())
      .create();
    const watcher = await withDeadline(() => creating, this.#c.callTimeoutMs, cancel, 'etcd: watch').catch(
      (error: unknown) => {
        // A watch that comes after we stopped waiting for it is cancelled then.
        void creating.then((late) => late.cancel()).catch(() => undefined);
        if (/compacted/i.test((error as Error).message)) return undefined; // read again
        if (cancel.aborted || error instanceof BackendUnavailableError) throw error;
        throw unavailable('watch failed', error);
      },
    );
    if (!watcher) return;
    try {
      await new Promise<void>((resolve, reject) => {
        const done = () => {
          cancel.removeEventListener('abort', onCancel);
          session.signal.removeEventListener('abort', onSessionLost);
        };
        const onCancel = () => {
          done();
          reject(cancel.reason);
        };
        const onSessionLost = () => {
          done();
          reject(new BackendUnavailableError('etcd: the session was lost while waiting for a permit'));
        };
        if (cancel.aborted) return onCancel();
        if (session.signal.aborted) return onSessionLost();
        cancel.addEventListener('abort', onCancel, { once: true });
        session.signal.addEventListener('abort', onSessionLost, { once: true });
        watcher.on('delete', (kv: IKeyValue) => {
          if (kv.key.subarray(0, queue.length).equals(queue)) return; // a waiter left: frees nothing
          done();
          if (kv.key.subarray(0, this.#leases.length).equals(this.#leases)) this.#c.woken('release');
          resolve();
        });
        watcher.on('error', () => {
          done();
          resolve();
        });
      });
    } finally {
      void watcher.cancel().catch(() => undefined);
    }
  }

  #hold(
    req: PermitRequest,
    session: EtcdSession,
    grant: { key: Buffer; revision: bigint },
    deletion: DeletionSubscription,
  ): OwnedLock {
    const lock = new OwnedLock({
      key: req.name,
      fencingToken: grant.revision,
      ownerToken: req.ownerToken,
      trustedWhile: () => session.alive, // a session past its deadline holds nothing, timer or not
      // With a lock-delay, lease key and marker go in one Txn (lock-delay.ts). Bounded by
      // callTimeoutMs: unconfirmed by then, the session goes on deleting the key.
      releaseOnBackend: () =>
        releaseGrant(this.#marked(req, grant), () =>
          session.release(grant.key, grant.revision, this.#c.callTimeoutMs),
        ),
    });
    // Lost with its session, or when its key is deleted by anyone but us ('revoked').
    loseWithSessionOrKey(lock, session, deletion, grant.revision);
    return lock;
  }

  /** A grant's marker for its release, if it asked for a delay. */
  #marked(req: PermitRequest, grant: { key: Buffer; revision: bigint }): MarkedGrant | undefined {
    if (req.lockDelayMs === 0) return undefined;
    const { client, callTimeoutMs: timeoutMs } = this.#c;
    return { client, ...grant, marker: this.#markerOf(grant.key), timeoutMs };
  }

  /** A lease key's lock-delay marker: the same attempt id under `lockdelay/`. */
  #markerOf(leaseKey: Buffer): Buffer {
    return Buffer.concat([this.#markers, leaseKey.subarray(this.#leases.length)]);
  }

  #markerRange() {
    return { key: this.#markers, range_end: prefixEnd(this.#markers) };
  }

  #leaseRange() {
    return {
      key: this.#leases,
      range_end: prefixEnd(this.#leases),
      sort_order: SortOrder.Ascend,
      sort_target: SortTarget.Create,
    };
  }
}

/** permits and limit from a lease key's value (a key another tool wrote counts as 1 permit). */
function readRecord(kv: IKeyValue): LeaseRecord {
  try {
    const parsed = JSON.parse(kv.value.toString('utf8')) as Partial<LeaseRecord>;
    return { permits: Number(parsed.permits ?? 1), limit: Number(parsed.limit ?? Number.NaN) };
  } catch {
    return { permits: 1, limit: Number.NaN };
  }
}
