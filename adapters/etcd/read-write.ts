import { type Etcd3, type IKeyValue, SortOrder, SortTarget } from 'etcd3';
import { CANCEL_GRACE_MS, withinGrace } from '../../src/cancel-grace.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { decodeHolder, encodeHolder } from '../../src/holder-record.js';
import type { OwnedLock } from '../../src/ownership.js';
import type { AdapterReadWriteInfo, ReadWriteAdapter, ReadWriteRequest } from '../../src/read-write/core.js';
import { withDeadline } from '../../src/semaphore/deadline.js';
import { sessionGrant } from '../../src/session-grant.js';
import type { HolderInfo } from '../../src/types.js';
import { requestSignal } from './bounded.js';
import type { DeletionSubscription } from './deletion-watch.js';
import { loseWithSessionOrKey } from './grant-loss.js';
import { namePrefix, prefixEnd } from './keys.js';
import {
  clearGrantDelays,
  grantDelayEnds,
  grantDelays,
  type MarkedGrant,
  releaseGrant,
} from './lock-delay.js';
import { enqueue, type MutexCall, type Queued, sendEnqueue, unavailable, waitForTurn } from './mutex.js';
import type { EtcdSession } from './session.js';

/** What an etcd read-write lock borrows from its provider. */
export interface EtcdReadWriteClient {
  client: Etcd3;
  namespace: string;
  callTimeoutMs: number;
  /** The provider's live session for a lease of ttlMs (undefined: its sessionTtlMs). */
  session(ttlMs?: number): Promise<EtcdSession>;
  /** Counts a waiter woken by the deletion of the key it watched. */
  woken(): void;
  /** Listens for key's deletion by anyone (the provider's one deletion watch, deletion-watch.ts). */
  watchDeletion(key: Buffer): DeletionSubscription;
  /** The error as the caller sees it: an AuthenticationError when etcd refused who we are. */
  refused(error: unknown): Promise<unknown>;
}

/** The folder of every read-write lock: a leading '/' no lock name has, so no lock's prefix covers it. */
export function readWriteFolder(namespace: string): string {
  return `${namespace}/rwlock/`;
}

/** The folder of the read-write locks' lock-delay markers (outside every queue; see lock-delay.ts). */
function readWriteDelayFolder(namespace: string): string {
  return `${namespace}/rwlock-delay/`;
}

const callOptions = (timeoutMs: number) => ({ deadline: new Date(Date.now() + timeoutMs) });

/**
 * A read-write lock on etcd: one queue per name under `<namespace>/rwlock/<name>/`, each request a
 * key `read-<lease hex>-<attempt id>` or `write-<lease hex>-<attempt id>` on the session lease of its
 * TTL, in create-revision order (the lock's enqueue Txn, mutex.ts). A writer holds when no key is
 * before its own and watches only the key just before it; a reader holds when no write key is before
 * its own and watches only the newest such key, so a waiting writer blocks every reader behind it and
 * a release wakes only those it frees. The token is the key's create revision: everything before a
 * writer is gone when it is granted, so its token is greater than all of theirs. Each attempt names
 * its key afresh (as semaphores do), so a retry never claims a key a given-up attempt still owns.
 * Lock-delay: a grant that asks for one puts a marker `<namespace>/rwlock-delay/<name>/<its key's
 * name>` before it is handed out; a lost write's marker keeps out every grant, a lost read's the
 * writes (lock-delay.ts, clearGrantDelays).
 */
export class EtcdReadWriteAdapter implements ReadWriteAdapter {
  readonly #c: EtcdReadWriteClient;
  /** `<namespace>/rwlock/<escaped name>/` */
  readonly #queue: string;
  /** `<namespace>/rwlock-delay/<escaped name>/`: the grants' lock-delay markers. */
  readonly #markers: Buffer;
  readonly keepsLockDelay = true;

  constructor(name: string, client: EtcdReadWriteClient) {
    this.#c = client;
    this.#queue = namePrefix(readWriteFolder(client.namespace), name);
    this.#markers = Buffer.from(namePrefix(readWriteDelayFolder(client.namespace), name));
  }

  async inspect(signal: AbortSignal): Promise<AdapterReadWriteInfo> {
    const queue = Buffer.from(this.#queue);
    const markers = this.#markers;
    const { responses } = await withDeadline(
      () =>
        this.#c.client.kv.txn(
          {
            compare: [],
            success: [
              {
                request_range: {
                  key: queue,
                  range_end: prefixEnd(queue),
                  sort_order: SortOrder.Ascend,
                  sort_target: SortTarget.Create,
                },
              },
              { request_range: { key: markers, range_end: prefixEnd(markers) } },
            ],
            failure: [],
          },
          callOptions(this.#c.callTimeoutMs),
        ),
      this.#c.callTimeoutMs,
      signal,
      'etcd: read-write lock inspect',
    ).catch(async (error: unknown) => {
      throw await this.#c.refused(
        error instanceof BackendUnavailableError ? error : unavailable('read-write inspect failed', error),
      );
    });
    const kvs = responses[0]?.response_range.kvs ?? [];
    const live = new Set(kvs.map((kv) => kv.key.subarray(queue.length).toString('utf8')));
    const delays = grantDelays(markers, responses[1]?.response_range.kvs ?? [], (id) => live.has(id));
    const ends = await grantDelayEnds(this.#c.client, delays, this.#c.callTimeoutMs, signal).catch(
      async (error: unknown) => {
        throw await this.#c.refused(error);
      },
    );
    const delayed = delays.map((delay, i) => ({ mode: modeOf(delay.id), delayedUntil: ends[i] as Date }));
    const info: AdapterReadWriteInfo = { writer: null, readers: [], waiters: 0, delayed };
    let writeSeen = false;
    for (const [index, kv] of kvs.entries()) {
      const isWrite = kv.key.subarray(queue.length).toString('utf8').startsWith('write-');
      if (isWrite && index === 0) info.writer = holderOf(kv);
      else if (!isWrite && !writeSeen) info.readers.push(holderOf(kv));
      else info.waiters += 1;
      writeSeen ||= isWrite;
    }
    return info;
  }

  /** A queue key's lock-delay marker: the key's name under the marker folder. */
  #markerOf(key: Buffer): Buffer {
    return Buffer.concat([this.#markers, key.subarray(Buffer.byteLength(this.#queue))]);
  }

  async request(req: ReadWriteRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    try {
      return await this.#request(req, cancel);
    } catch (error) {
      // A refusal of who we are is not an outage: the core does not retry it for waitMs.
      throw await this.#c.refused(error);
    }
  }

  async #request(req: ReadWriteRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const session = await withDeadline(
      () => this.#c.session(req.ttlGiven ? req.ttlMs : undefined),
      this.#c.callTimeoutMs,
      cancel,
      'etcd: session',
    );
    // The request's one signal, as the lock's: the caller's cancel, or the session lost while we
    // wait (in the queue, or for a lock-delay), which ends the wait at once as a
    // BackendUnavailableError (the grant loop re-enqueues on a new session within waitMs).
    const { signal, dispose } = requestSignal(cancel, (onLost) => session.whenLost(onLost));
    try {
      return await this.#attempt(req, session, signal, cancel);
    } finally {
      dispose();
    }
  }

  /** One attempt on `session`: `signal` is the request's, `cancel` the caller's alone. */
  async #attempt(
    req: ReadWriteRequest,
    session: EtcdSession,
    signal: AbortSignal,
    cancel: AbortSignal,
  ): Promise<OwnedLock | null> {
    const { client, callTimeoutMs } = this.#c;
    const key = Buffer.from(`${this.#queue}${req.mode}-${session.leaseHex}-${crypto.randomUUID()}`);
    const call: MutexCall = {
      client,
      session,
      prefix: this.#queue,
      key,
      value: encodeHolder(req.owner),
      callTimeoutMs,
      onWake: () => this.#c.woken(),
      // The lock-delay markers, read in the enqueue's revision (see #clearDelays).
      alsoRead: { key: this.#markers, range_end: prefixEnd(this.#markers), keys_only: true },
    };
    // Subscribed before the Txn is sent: a delete of our key before the grant is seen too.
    const deletion = this.#c.watchDeletion(key);
    const attempt = sendEnqueue(call);
    let queued: Queued;
    try {
      queued = await enqueue(call, attempt, signal);
    } catch (error) {
      deletion.stop();
      // The Txn may still put our key: the session waits for its outcome and deletes what it made.
      void session.removeEnqueued(key, attempt);
      throw error;
    }
    let granted = false;
    try {
      if (!queued.owner) {
        const blockedBy = req.mode === 'read' ? `${this.#queue}write-` : this.#queue;
        if (!(await waitForTurn(call, queued, signal, { blockedBy, wait: req.wait }))) return null;
      }
      if (!(await this.#clearDelays(call, queued, req, signal))) return null;
      granted = true;
      const { key, revision } = queued;
      const marked =
        req.lockDelayMs > 0
          ? { client, key, revision, marker: this.#markerOf(key), timeoutMs: callTimeoutMs }
          : undefined;
      return hold(req, session, queued, deletion, marked, callTimeoutMs);
    } finally {
      // Not granted (busy, cancelled, failed, session lost): the session deletes our key, retrying
      // until etcd confirms (or its lease took it); a cancelled caller waits for that only
      // CANCEL_GRACE_MS (see semaphore.ts).
      if (!granted) {
        deletion.stop();
        const removing = session.remove(queued.key, queued.revision);
        await withinGrace(removing, cancel.aborted ? CANCEL_GRACE_MS : callTimeoutMs);
      }
    }
  }

  /**
   * Lock-delays of lost grants (lock-delay.ts): a write waits out every one, a read a write's; then
   * the grant's own marker if it asks for a delay. Headed at once with no marker in the enqueue's
   * revision and no delay asked: nothing to read (no grant before ours can have put one since).
   */
  #clearDelays(
    call: MutexCall,
    queued: Queued,
    req: ReadWriteRequest,
    signal: AbortSignal,
  ): Promise<boolean> {
    if (queued.owner && queued.alsoRead?.kv === undefined && req.lockDelayMs === 0)
      return Promise.resolve(true);
    return clearGrantDelays(call, queued, {
      markers: this.#markers,
      blocks: (delay) => req.mode === 'write' || modeOf(delay.id) === 'write',
      delayMs: req.lockDelayMs,
      wait: req.wait,
      signal,
    });
  }
}

function hold(
  req: ReadWriteRequest,
  session: EtcdSession,
  queued: Queued,
  deletion: DeletionSubscription,
  marked: MarkedGrant | undefined,
  callTimeoutMs: number,
): OwnedLock {
  // With a lock-delay, key and marker go in one Txn (lock-delay.ts). Bounded by callTimeoutMs:
  // unconfirmed by then, the session goes on deleting the key.
  const lock = sessionGrant(
    session,
    { key: req.name, fencingToken: queued.revision, ownerToken: req.ownerToken },
    () => releaseGrant(marked, () => session.release(queued.key, queued.revision, callTimeoutMs)),
  );
  // Lost with its session, or with its key deleted by anyone else (`etcdctl del`): at once, as a lock.
  loseWithSessionOrKey(lock, session, deletion, queued.revision);
  return lock;
}

/** The mode of a grant by its key's name (`read-…`, `write-…`); anything else counts as a write. */
function modeOf(id: string): 'read' | 'write' {
  return id.startsWith('read-') ? 'read' : 'write';
}

function holderOf(kv: IKeyValue): HolderInfo {
  const stored = decodeHolder(kv.value);
  return { owner: stored.owner, since: stored.since, fencingToken: BigInt(kv.create_revision) };
}
