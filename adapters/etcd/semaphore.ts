import { CompareResult, CompareTarget, type Etcd3, type IKeyValue, SortOrder, SortTarget } from 'etcd3';
import { CANCEL_GRACE_MS, withinGrace } from '../../src/cancel-grace.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { decodeHolder, encodeHolder } from '../../src/holder-record.js';
import type { OwnedLock } from '../../src/ownership.js';
import type { AdapterSemaphoreInfo, PermitRequest, SemaphoreAdapter } from '../../src/semaphore/core.js';
import { withDeadline } from '../../src/semaphore/deadline.js';
import { SemaphoreLimitMismatchError } from '../../src/semaphore/errors.js';
import type { SemaphoreHolder } from '../../src/semaphore/types.js';
import { sessionGrant } from '../../src/session-grant.js';
import { requestSignal } from './bounded.js';
import type { DeletionSubscription } from './deletion-watch.js';
import type { FolderState, FolderView } from './folder-view.js';
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
import { afterDeletion, enqueue, type MutexCall, type Queued, sendEnqueue, unavailable } from './mutex.js';
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
  /** Counts a waiter woken: one that waited and was told that its permits may fit now. */
  woken(kind: 'release' | 'handoff'): void;
  /** Listens for key's deletion by anyone (the provider's one deletion watch, deletion-watch.ts). */
  watchDeletion(key: Buffer): DeletionSubscription;
  /** The provider's one view of a semaphore's folder (folder-view.ts), shared by its waiters. */
  folder(prefix: Buffer): FolderView;
  /** The error as the caller sees it: an AuthenticationError when etcd refused who we are. */
  refused(error: unknown): Promise<unknown>;
}

interface LeaseRecord {
  permits: number;
  limit: number;
}

/** One attempt (request() call) taking its permits. */
interface PermitTake {
  session: EtcdSession;
  /** Our queue key's call: a request far back in the queue watches its predecessor with it. */
  call: MutexCall;
  queued: Queued;
  /** The lease key this attempt's grant Txn creates (its name is this attempt's alone). */
  permitKey: Buffer;
  /** A grant Txn went out and no answer came: it may have been applied, or may still be. */
  grantUnanswered: boolean;
}

/** The folder of a name at one revision, as a request judges its turn by it. */
interface Folder {
  leases: IKeyValue[];
  markers: IKeyValue[];
  /** Queue keys by create revision: all of them, or (read by the enqueue) the first ones. */
  queue: Iterable<IKeyValue>;
}

/** What a folder says to every request of one limit. */
interface Standing {
  /** Permits of the leases and of the lock-delays. */
  used: number;
  delays: GrantDelay[];
  /** The queue's first key (latin1). */
  head: string | undefined;
  /**
   * For each queue key of the front (latin1): its create revision, the permits queued before it,
   * which are under the limit, and the first limit other than ours recorded on a queue key before
   * it. The walk stops where the permits reach the limit: nobody after can fit before someone
   * ahead leaves the queue.
   */
  ahead: Map<string, { revision: string; permits: number; otherLimit: number | undefined }>;
  /** A lease's limit other than ours: SemaphoreLimitMismatchError. */
  otherLimit: number | undefined;
}

/** A waiting request as its standing is judged: its queue key (latin1) and what it asks. */
interface Waiter {
  id: string;
  revision: bigint;
  permits: number;
  limit: number;
  /** Markers (key@mod revision) this request stamped already: not woken for them again. */
  stamped: Set<string>;
}

const callOptions = (timeoutMs: number) => ({ deadline: new Date(Date.now() + timeoutMs) });

/**
 * A semaphore on etcd. Under `<namespace>/semaphore/<name>/` (a leading '/' no lock name has, so no
 * lock's prefix covers it): `locks/<lease hex>-<attempt id>` is the FIFO queue, one key per waiting
 * request, `leases/<lease hex>-<attempt id>` one key per grant, both on the session lease of the
 * request's TTL (see sessions.ts), both valued with the holder record and the request's permits and
 * limit. Each attempt at a request (the core retries one after an outage) names its keys afresh, so
 * every key has one owner: the attempt that made it, or the session once that attempt gave it up.
 *
 * Each request grants only itself, and not only the queue's head may: a request takes its permits
 * when, in one consistent state of the folder that holds its own queue key,
 *   used (leases' permits + lock-delay holds) + permits of every queue key created before its own
 *   + its own permits ≤ limit,
 * in one Txn guarded by its queue key's create revision (so a request whose session expired cannot
 * grant) that creates its lease key and deletes its queue key. The lease key's create revision is
 * the token. Why the limit holds: the grant Txn moves a request from the queue to the leases
 * atomically, so every state counts it exactly once, from its enqueue to its release or loss. Take
 * the live grants at any moment and the one among them queued last, G: every other one was queued
 * before G, and is live now, so it was in the queue or the leases in the state G decided on (that
 * state holds G's queue key, so it comes after their enqueues) and G counted its permits. So the
 * live permits never exceed what G's decision allowed: the limit. Counting the requests ahead as
 * taken also keeps FIFO: a request fits only if every request ahead of it fits too, so a small
 * request never passes a big one that waits.
 *
 * The first state is read by the enqueue Txn itself (the first `limit` queue keys, the leases, the
 * markers: past the first `limit` keys nobody fits), so an uncontended request is two Txns. A
 * request that does not fit waits in one of two ways. In the queue's front (fewer than `limit`
 * permits queued ahead of it) it waits on the provider's view of the folder (folder-view.ts: one
 * read, then one watch per name and process, while a request of the process is in the front),
 * judged there on each change without any call: only a request that now fits (or must stamp a
 * lock-delay, or lost its queue key) is woken, so a release wakes the requests it lets in and no
 * others. Further back it cannot fit before requests ahead of it leave: it watches one queue key
 * (see #behind) and reads again when that key leaves. So a change reaches at most the front's
 * processes, whatever the queue's length, and a leaving queue key wakes about one request behind.
 *
 * Lock-delay (lock-delay.ts): a grant that asks for one also puts `lockdelay/<attempt id>` on no
 * lease in its grant Txn; a clean release deletes both in one Txn. Every request counts, besides
 * the leases, the permits of every marker whose lease key is gone (a lost grant) or that runs on a
 * delay lease; the queue's head stamps a lost grant's marker into a delay.
 */
export class EtcdSemaphoreAdapter implements SemaphoreAdapter {
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
    if (markers.length === 0) return [];
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
      value: permitValue(req),
      callTimeoutMs: this.#c.callTimeoutMs,
      onWake: () => this.#c.woken('handoff'), // a request far back woken by its predecessor's leaving
      // The folder at the enqueue's revision: past the first `limit` queue keys nobody fits.
      reads: [this.#queueRange(req.limit), this.#leaseRange(), this.#markerRange()],
    };
    let queued: Queued;
    const permitKey = Buffer.from(`${this.#leases.toString()}${attemptId}`);
    // Subscribed before the Txn is sent: a delete of our permit key before the grant is seen too,
    // and makes the grant born lost.
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
    const taking: PermitTake = { session, call, queued, permitKey, grantUnanswered: false };
    let inQueue = true;
    let held = false;
    // The wait ends at once when the session is lost (BackendUnavailableError: the shared loop
    // re-enqueues on a new session within waitMs), as the lock's and read-write's do.
    const waiting = requestSignal(cancel, (onLost) => session.whenLost(onLost));
    try {
      const grant = await this.#await(req, taking, waiting.signal);
      if (!grant) return null;
      inQueue = false; // the granting Txn deleted our queue key
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

  /**
   * Our lease key once our permits fit (see EtcdSemaphoreAdapter), or null when they do not and we do not
   * wait. Judged first on the enqueue's own reads, then on each state of the provider's view that
   * wakes us. The queue's head also stamps lost grants' markers into delays.
   */
  async #await(
    req: PermitRequest,
    taking: PermitTake,
    signal: AbortSignal,
  ): Promise<{ key: Buffer; revision: bigint } | null> {
    const { queued } = taking;
    const me: Waiter = {
      id: queued.key.toString('latin1'),
      revision: queued.revision,
      permits: req.permits,
      limit: req.limit,
      stamped: new Set(),
    };
    let standing = this.#enqueueStanding(queued, req.limit);
    for (;;) {
      signal.throwIfAborted();
      const otherLimit = mismatch(standing, me);
      if (otherLimit !== undefined) throw new SemaphoreLimitMismatchError(req.name, req.limit, otherLimit);
      const unstamped = this.#toStamp(standing, me);
      if (unstamped.length > 0) {
        for (const delay of unstamped) me.stamped.add(stampId(delay));
        const leaseKey = (id: string) => Buffer.concat([this.#leases, Buffer.from(id)]);
        await startGrantDelays(this.#c.client, unstamped, leaseKey, this.#c.callTimeoutMs, signal);
      }
      if (fits(standing, me)) return await this.#grant(req, taking, signal);
      if (!req.wait) return null;
      if (inFront(standing, me)) {
        standing = await this.#park(me, signal);
        this.#c.woken('release');
      } else {
        standing = await this.#behind(me, taking.call, signal);
      }
    }
  }

  /**
   * A request behind the front (the permits queued before it reach the limit) cannot fit before
   * requests ahead of it leave the queue. It reads the newest `limit` queue keys before its own and
   * watches the one whose leaving (with those before it) brings it into the front: walking back
   * from its own key, the key at which the permits reach the limit. When that key leaves it reads
   * again, until it is in the front. Each leaving wakes the requests that watch that key (about
   * one, the one `limit` permits behind it; a few with mixed permit counts, never more than
   * `limit`), and only the front, at most `limit` requests, follows the folder's every change.
   * Known limit: grants in the front can be made out of queue order, so keys in the window of
   * such a request can leave before the one it watches; it then waits on until that key leaves
   * (never longer than when only the queue's head was granted, as that key had to leave first).
   */
  async #behind(me: Waiter, call: MutexCall, signal: AbortSignal): Promise<Standing> {
    const { client, callTimeoutMs } = this.#c;
    const key = Buffer.from(me.id, 'latin1');
    for (;;) {
      const reads = [
        { request_range: { key } },
        { request_range: this.#aheadRange(me.revision, me.limit) },
        { request_range: this.#leaseRange() },
        { request_range: this.#markerRange() },
      ];
      let res: Awaited<ReturnType<Etcd3['kv']['txn']>>;
      try {
        res = await withDeadline(
          () => client.kv.txn({ compare: [], success: reads, failure: [] }, callOptions(callTimeoutMs)),
          callTimeoutMs,
          signal,
          'etcd: reading the semaphore',
        );
      } catch (error) {
        if (signal.aborted || error instanceof BackendUnavailableError) throw error;
        throw unavailable('reading the semaphore failed', error);
      }
      const [own, ahead = [], leases = [], markers = []] = res.responses.map((r) => r.response_range.kvs);
      const mine = own?.[0];
      if (mine?.create_revision !== me.revision.toString()) throw queueKeyGone();
      // A queue key ahead of ours with another limit: the request fails now, as in the front.
      for (const kv of ahead) {
        const otherLimit = otherLimitOf(kv, me.limit);
        if (otherLimit !== undefined)
          return { used: 0, delays: [], head: undefined, ahead: new Map(), otherLimit };
      }
      // Fewer than `limit` keys ahead: all of them, so the whole front is known.
      if (ahead.length < me.limit) {
        const standing = this.#standing(
          { queue: [...ahead].reverse().concat(mine), leases, markers },
          me.limit,
        );
        if (inFront(standing, me)) return standing;
      }
      const target = frontGate(ahead, me.limit);
      if (!target) throw new BackendUnavailableError('etcd: the semaphore queue could not be read'); // never: see frontGate
      await afterDeletion(call, target.key, BigInt(res.header.revision) + 1n, signal, async () => undefined);
    }
  }

  /** The standing in the folder the enqueue Txn read (our queue key is in it: it put or found it). */
  #enqueueStanding(queued: Queued, limit: number): Standing {
    const [queue, leases, markers] = (queued.reads?.ranges ?? []).map((range) => range.kvs);
    return this.#standing({ queue: queue ?? [], leases: leases ?? [], markers: markers ?? [] }, limit);
  }

  /** Lost grants' markers not yet stamped into a delay: the queue's head stamps them. */
  #toStamp(standing: Standing, me: Waiter): GrantDelay[] {
    if (standing.head !== me.id) return [];
    return standing.delays.filter((delay) => !delay.started && !me.stamped.has(stampId(delay)));
  }

  /**
   * Waits on the provider's view of the folder until a state in which our permits fit, or we must
   * stamp a delay, or a lease has another limit, or our queue key is gone (the session expired; the
   * request's signal usually says so first): BackendUnavailableError then. While the view cannot
   * be built (an outage) we keep waiting, and our place: the signal ends the wait (waitMs, the
   * caller's abort, our session's loss); the view fails it only when the provider closes.
   */
  #park(me: Waiter, signal: AbortSignal): Promise<Standing> {
    const view = this.#c.folder(Buffer.from(this.#base));
    return new Promise<Standing>((resolve, reject) => {
      let done = false;
      let unlisten: () => void = () => undefined;
      const finish = () => {
        done = true;
        unlisten();
        signal.removeEventListener('abort', onAbort);
      };
      const onAbort = () => {
        finish();
        reject(signal.reason);
      };
      const judge = (state: FolderState) => {
        if (done) return;
        if (gone(state, me)) {
          finish();
          reject(queueKeyGone());
          return;
        }
        const standing = this.#viewStanding(state, me.limit);
        if (
          mismatch(standing, me) === undefined &&
          !fits(standing, me) &&
          this.#toStamp(standing, me).length === 0
        )
          return;
        finish();
        resolve(standing);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      unlisten = view.listen({
        changed: (state) => judge(state),
        failed: (error) => {
          if (done) return;
          finish();
          reject(error);
        },
      });
      if (signal.aborted) onAbort();
      // A state the view had before we listened: judged now, no event may come for a while.
      const now = view.state;
      if (now) judge(now);
    });
  }

  /** The standing in a view's state, computed once per state (every waiter of the view reads it). */
  #viewStanding(state: FolderState, limit: number): Standing {
    const memo = this.#memo;
    if (memo?.state === state && memo.limit === limit) return memo.standing;
    const group = (name: string) => state.groups.get(name)?.values() ?? [];
    const folder: Folder = {
      queue: group('locks/'),
      leases: [...group('leases/')],
      markers: [...group('lockdelay/')],
    };
    const standing = this.#standing(folder, limit);
    this.#memo = { state, limit, standing };
    return standing;
  }

  #memo: { state: FolderState; limit: number; standing: Standing } | undefined;

  /** What a folder says to requests of `limit` (see Standing). */
  #standing(folder: Folder, limit: number): Standing {
    const delays = this.#delays(folder.leases, folder.markers);
    let used = delays.reduce((sum, delay) => sum + delay.weight, 0);
    let otherLimit: number | undefined;
    for (const kv of folder.leases) {
      const record = readRecord(kv);
      if (!Number.isNaN(record.limit) && record.limit !== limit) otherLimit ??= record.limit;
      used += record.permits;
    }
    const ahead = new Map<string, { revision: string; permits: number; otherLimit: number | undefined }>();
    let head: string | undefined;
    let queued = 0;
    // A queue key judges by its own limit: one ahead of us with another would count our permits
    // against its limit while we count its permits against ours, and both could be granted
    // (limit 2 taking 2 beside limit 4 taking 2). So a request with a queue key of another limit
    // ahead of it fails as against a lease of another limit. A key with none (an older fencekit's)
    // is not compared, as a lease key with none is not.
    let queuedLimit: number | undefined;
    for (const kv of folder.queue) {
      head ??= kv.key.toString('latin1');
      if (queued >= limit) break;
      const entry = { revision: kv.create_revision, permits: queued, otherLimit: queuedLimit };
      ahead.set(kv.key.toString('latin1'), entry);
      queued += queuedPermits(kv, limit);
      queuedLimit ??= otherLimitOf(kv, limit);
    }
    return { used, delays, head, ahead, otherLimit };
  }

  /** One Txn: while our queue key is still ours, create the lease, leave the queue. */
  async #grant(
    req: PermitRequest,
    taking: PermitTake,
    cancel: AbortSignal,
  ): Promise<{ key: Buffer; revision: bigint }> {
    const { session, queued, permitKey: key } = taking;
    const value = permitValue(req);
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

  #hold(
    req: PermitRequest,
    session: EtcdSession,
    grant: { key: Buffer; revision: bigint },
    deletion: DeletionSubscription,
  ): OwnedLock {
    // With a lock-delay, lease key and marker go in one Txn (lock-delay.ts). Bounded by
    // callTimeoutMs: unconfirmed by then, the session goes on deleting the key.
    const lock = sessionGrant(
      session,
      { key: req.name, fencingToken: grant.revision, ownerToken: req.ownerToken },
      () =>
        releaseGrant(this.#marked(req, grant), () =>
          session.release(grant.key, grant.revision, this.#c.callTimeoutMs),
        ),
    );
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

  /** The newest `limit` queue keys created before ours, newest first. */
  #aheadRange(revision: bigint, limit: number) {
    const key = Buffer.from(this.#locks);
    return {
      key,
      range_end: prefixEnd(key),
      sort_order: SortOrder.Descend,
      sort_target: SortTarget.Create,
      max_create_revision: (revision - 1n).toString(),
      limit,
    };
  }

  /** The queue's first `limit` keys, by create revision. */
  #queueRange(limit: number) {
    const key = Buffer.from(this.#locks);
    return {
      key,
      range_end: prefixEnd(key),
      sort_order: SortOrder.Ascend,
      sort_target: SortTarget.Create,
      limit,
    };
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

/** A queue key's or lease key's value: the holder record with the request's permits and limit. */
function permitValue(req: PermitRequest): string {
  return JSON.stringify({ ...JSON.parse(encodeHolder(req.owner)), permits: req.permits, limit: req.limit });
}

/**
 * The permits a queue key asks for. One without them (an older fencekit's, which only its head
 * granted) counts as the whole limit: nobody passes it, as nobody did then.
 */
function queuedPermits(kv: IKeyValue, limit: number): number {
  try {
    const permits = Number((JSON.parse(kv.value.toString('utf8')) as { permits?: unknown }).permits);
    return Number.isInteger(permits) && permits >= 1 ? permits : limit;
  } catch {
    return limit;
  }
}

/** Whether our permits fit in the standing: used + the permits queued ahead of us + ours ≤ our limit. */
function fits(standing: Standing, me: Waiter): boolean {
  const mine = standing.ahead.get(me.id);
  return (
    mine !== undefined &&
    mine.revision === me.revision.toString() &&
    standing.used + mine.permits + me.permits <= me.limit
  );
}

/**
 * Of the queue keys just ahead of a request (newest first), the one at which their permits reach
 * the limit: once it and every key before it have left, the request is in the front. Undefined
 * when they stay under the limit (the request is in the front already, if they are all).
 */
function frontGate(ahead: IKeyValue[], limit: number): IKeyValue | undefined {
  let permits = 0;
  for (const kv of ahead) {
    permits += queuedPermits(kv, limit);
    if (permits >= limit) return kv;
  }
  return undefined;
}

/** A limit other than ours on a lease key, or on a queue key ahead of ours; undefined if none. */
function mismatch(standing: Standing, me: Waiter): number | undefined {
  if (standing.otherLimit !== undefined) return standing.otherLimit;
  const mine = standing.ahead.get(me.id);
  return mine?.revision === me.revision.toString() ? mine.otherLimit : undefined;
}

/** The limit recorded on a key if it is not `limit`; undefined if it is, or if none is recorded. */
function otherLimitOf(kv: IKeyValue, limit: number): number | undefined {
  const recorded = readRecord(kv).limit;
  return Number.isNaN(recorded) || recorded === limit ? undefined : recorded;
}

/** Whether we are in the queue's front: the permits queued before ours are under the limit. */
function inFront(standing: Standing, me: Waiter): boolean {
  return standing.ahead.get(me.id)?.revision === me.revision.toString();
}

function queueKeyGone(): BackendUnavailableError {
  return new BackendUnavailableError('etcd: the session expired while waiting; the queue entry is gone');
}

/** Our queue key is not in a state that is past its creation: it was deleted (session, operator). */
function gone(state: FolderState, me: Waiter): boolean {
  const mine = state.groups.get('locks/')?.get(me.id);
  return state.revision >= me.revision && mine?.create_revision !== me.revision.toString();
}

function stampId(delay: GrantDelay): string {
  return `${delay.kv.key.toString('latin1')}@${delay.kv.mod_revision}`;
}
