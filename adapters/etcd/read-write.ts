import { type Etcd3, type IKeyValue, SortOrder, SortTarget } from 'etcd3';
import { CANCEL_GRACE_MS, withinGrace } from '../../src/cancel-grace.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { decodeHolder, encodeHolder } from '../../src/holder-record.js';
import { OwnedLock } from '../../src/ownership.js';
import type { AdapterReadWriteInfo, ReadWriteAdapter, ReadWriteRequest } from '../../src/read-write/core.js';
import { withDeadline } from '../../src/semaphore/deadline.js';
import type { HolderInfo } from '../../src/types.js';
import { namePrefix, prefixEnd } from './keys.js';
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
  /** The error as the caller sees it: an AuthenticationError when etcd refused who we are. */
  refused(error: unknown): Promise<unknown>;
}

/** The folder of every read-write lock: a leading '/' no lock name has, so no lock's prefix covers it. */
export function readWriteFolder(namespace: string): string {
  return `${namespace}/rwlock/`;
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
 */
export class EtcdReadWriteAdapter implements ReadWriteAdapter {
  readonly #c: EtcdReadWriteClient;
  /** `<namespace>/rwlock/<escaped name>/` */
  readonly #queue: string;

  constructor(name: string, client: EtcdReadWriteClient) {
    this.#c = client;
    this.#queue = namePrefix(readWriteFolder(client.namespace), name);
  }

  async inspect(signal: AbortSignal): Promise<AdapterReadWriteInfo> {
    const queue = Buffer.from(this.#queue);
    const { kvs } = await withDeadline(
      () =>
        this.#c.client.kv.range(
          {
            key: queue,
            range_end: prefixEnd(queue),
            sort_order: SortOrder.Ascend,
            sort_target: SortTarget.Create,
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
    const info: AdapterReadWriteInfo = { writer: null, readers: [], waiters: 0 };
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

  async request(req: ReadWriteRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    try {
      return await this.#request(req, cancel);
    } catch (error) {
      // A refusal of who we are is not an outage: the core does not retry it for waitMs.
      throw await this.#c.refused(error);
    }
  }

  async #request(req: ReadWriteRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const { client, callTimeoutMs } = this.#c;
    const session = await withDeadline(
      () => this.#c.session(req.ttlGiven ? req.ttlMs : undefined),
      callTimeoutMs,
      cancel,
      'etcd: session',
    );
    const key = Buffer.from(`${this.#queue}${req.mode}-${session.leaseHex}-${crypto.randomUUID()}`);
    const call: MutexCall = {
      client,
      session,
      prefix: this.#queue,
      key,
      value: encodeHolder(req.owner),
      callTimeoutMs,
      onWake: () => this.#c.woken(),
    };
    const attempt = sendEnqueue(call);
    let queued: Queued;
    try {
      queued = await enqueue(call, attempt, cancel);
    } catch (error) {
      // The Txn may still put our key: the session waits for its outcome and deletes what it made.
      void session.removeEnqueued(key, attempt);
      throw error;
    }
    let granted = false;
    try {
      if (!queued.owner) {
        const blockedBy = req.mode === 'read' ? `${this.#queue}write-` : this.#queue;
        if (!(await waitForTurn(call, queued, cancel, { blockedBy, wait: req.wait }))) return null;
      }
      granted = true;
      return hold(req, session, queued, callTimeoutMs);
    } finally {
      // Not granted (busy, cancelled, failed): the session deletes our key, retrying until etcd
      // confirms; a cancelled caller waits for that only CANCEL_GRACE_MS (see semaphore.ts).
      if (!granted) {
        const removing = session.remove(queued.key, queued.revision);
        await withinGrace(removing, cancel.aborted ? CANCEL_GRACE_MS : callTimeoutMs);
      }
    }
  }
}

function hold(req: ReadWriteRequest, session: EtcdSession, queued: Queued, callTimeoutMs: number): OwnedLock {
  const lock = new OwnedLock({
    key: req.name,
    fencingToken: queued.revision,
    ownerToken: req.ownerToken,
    trustedWhile: () => session.alive, // a session past its deadline holds nothing, timer or not
    // Bounded by callTimeoutMs: unconfirmed by then, the session goes on deleting the key.
    releaseOnBackend: () => session.release(queued.key, queued.revision, callTimeoutMs),
  });
  lock.onEnd(session.whenLost((reason) => lock.lose(reason)));
  return lock;
}

function holderOf(kv: IKeyValue): HolderInfo {
  const stored = decodeHolder(kv.value);
  return { owner: stored.owner, since: stored.since, fencingToken: BigInt(kv.create_revision) };
}
