import {
  CompareResult,
  CompareTarget,
  type Etcd3,
  type IRangeRequest,
  type ITxnResponse,
  SortOrder,
  SortTarget,
} from 'etcd3';
import { BackendUnavailableError } from '../../src/errors.js';
import { prefixEnd } from './keys.js';
import type { EtcdSession } from './session.js';

/**
 * The queue of one name, as Go's concurrency.Mutex: every contender puts `<prefix><lease hex>` with
 * its session lease; the smallest create revision holds; each waiter watches only the newest key
 * created before its own, so a release wakes exactly one waiter.
 */
export interface MutexCall {
  client: Etcd3;
  session: EtcdSession;
  prefix: string;
  /** Stored as the key's value: the owner record for locks, the proposal for elections. */
  value: string;
  callTimeoutMs: number;
  /** Counts predecessor deletions this process was woken by (the herd check). */
  onWake: () => void;
  /** After the lease id in our key: lets one session queue several times (semaphore requests). */
  keySuffix?: string;
}

export interface Queued {
  key: Buffer;
  /** Our key's create revision: the fencing token. */
  revision: bigint;
  /** True when no key with a smaller create revision exists. */
  owner: boolean;
}

const callOptions = (timeoutMs: number) => ({ deadline: new Date(Date.now() + timeoutMs) });

export function unavailable(what: string, error: unknown): BackendUnavailableError {
  return new BackendUnavailableError(`etcd: ${what}: ${(error as Error).message}`, { cause: error });
}

/**
 * One Txn: create our key if it does not exist, and read the first key of the queue in the same
 * revision. Lock calls are never replayed by the client, so a key of ours that already exists is
 * left from an earlier grant whose release did not reach etcd: delete it and queue anew, so that
 * every grant gets a new create revision (token).
 */
export async function enqueue(call: MutexCall): Promise<Queued> {
  const key = Buffer.from(call.prefix + call.session.leaseHex + (call.keySuffix ?? ''));
  const first = { request_range: queueRange(call.prefix) };
  for (let attempt = 0; ; attempt++) {
    let res: ITxnResponse;
    try {
      res = await call.client.kv.txn(
        {
          compare: [{ key, target: CompareTarget.Create, result: CompareResult.Equal, create_revision: 0 }],
          success: [
            {
              request_put: {
                key,
                value: Buffer.from(call.value),
                lease: call.session.leaseId,
              },
            },
            first,
          ],
          failure: [{ request_range: { key } }],
        },
        callOptions(call.callTimeoutMs),
      );
    } catch (error) {
      // The put may have happened with its reply lost: remove it so it cannot block the queue.
      await deleteIfOurs(call, key);
      throw unavailable('acquire txn failed', error);
    }
    if (res.succeeded) {
      const revision = BigInt(res.header.revision);
      const head = res.responses[1]?.response_range.kvs[0];
      return { key, revision, owner: head !== undefined && BigInt(head.create_revision) === revision };
    }
    const stale = res.responses[0]?.response_range.kvs[0];
    if (attempt > 0 || !stale) throw new BackendUnavailableError('etcd: could not create the lock key');
    await guardedDelete(call.client, key, BigInt(stale.create_revision), call.callTimeoutMs);
  }
}

async function deleteIfOurs(call: MutexCall, key: Buffer): Promise<void> {
  await call.client.kv
    .txn(
      {
        compare: [
          { key, target: CompareTarget.Lease, result: CompareResult.Equal, lease: call.session.leaseId },
        ],
        success: [{ request_delete_range: { key } }],
        failure: [],
      },
      callOptions(call.callTimeoutMs),
    )
    .catch(() => undefined); // still unreachable: the session's end removes it
}

/** Deletes our key only if it is still the one created at `revision` (never a newer grant). */
export async function guardedDelete(client: Etcd3, key: Buffer, revision: bigint, timeoutMs: number) {
  try {
    await client.kv.txn(
      {
        compare: [
          {
            key,
            target: CompareTarget.Create,
            result: CompareResult.Equal,
            create_revision: revision.toString(),
          },
        ],
        success: [{ request_delete_range: { key } }],
        failure: [],
      },
      callOptions(timeoutMs),
    );
  } catch (error) {
    throw unavailable('release txn failed', error);
  }
}

/**
 * Waits until every key created before ours under the prefix is gone, watching only the newest of
 * them at a time. Each round is one read Txn: the newest predecessor and our own key, so a waiter
 * whose session expired while it waited finds its key gone and does not win. After the watched key
 * is deleted, one light read comes first: the queue's head alone. When that is our key (so it still
 * exists and nobody is before it) we hold the lock; only otherwise the full round follows.
 */
export async function waitForTurn(call: MutexCall, queued: Queued, cancel: AbortSignal): Promise<void> {
  for (;;) {
    cancel.throwIfAborted();
    let res: ITxnResponse;
    try {
      res = await call.client.kv.txn(
        {
          compare: [],
          success: [
            { request_range: queueRange(call.prefix, queued.revision) },
            { request_range: { key: queued.key } },
          ],
          failure: [],
        },
        callOptions(call.callTimeoutMs),
      );
    } catch (error) {
      throw unavailable('reading the queue failed', error);
    }
    const mine = res.responses[1]?.response_range.kvs[0];
    if (!mine || BigInt(mine.create_revision) !== queued.revision) {
      throw new BackendUnavailableError('etcd: the session expired while waiting; the queue entry is gone');
    }
    const predecessor = res.responses[0]?.response_range.kvs[0];
    if (!predecessor) return;
    const first = await afterDeletion(
      call,
      predecessor.key,
      BigInt(res.header.revision) + 1n,
      cancel,
      (deleted) => (deleted ? firstCreateRevision(call) : Promise.resolve(undefined)),
    );
    if (first === queued.revision) return;
  }
}

/** The create revision of the queue's head (the holder): the lightest read there is. */
async function firstCreateRevision(call: MutexCall): Promise<bigint | undefined> {
  try {
    const head = (await call.client.kv.range(queueRange(call.prefix), callOptions(call.callTimeoutMs)))
      .kvs[0];
    return head === undefined ? undefined : BigInt(head.create_revision);
  } catch (error) {
    throw unavailable('reading the queue failed', error);
  }
}

/**
 * One key of the queue under prefix, keys only: its head (the smallest create revision), or with
 * `before`, the newest key created before that revision (the one a waiter watches).
 */
function queueRange(prefix: string, before?: bigint): IRangeRequest {
  const key = Buffer.from(prefix);
  return {
    key,
    range_end: prefixEnd(key),
    sort_target: SortTarget.Create,
    sort_order: before === undefined ? SortOrder.Ascend : SortOrder.Descend,
    ...(before === undefined ? {} : { max_create_revision: (before - 1n).toString() }),
    limit: 1,
    keys_only: true,
  };
}

/**
 * Waits until key is deleted at or after fromRevision (deleted = true) or the watch ends otherwise
 * (false: compacted start revision, read the queue again), then runs next(deleted) before the watch
 * is cancelled: a cancel sent first delays that read by ~1.7 ms here. Rejects when cancel or the
 * session aborts.
 */
async function afterDeletion<T>(
  call: MutexCall,
  key: Buffer,
  fromRevision: bigint,
  cancel: AbortSignal,
  next: (deleted: boolean) => Promise<T>,
): Promise<T> {
  const watcher = await call.client
    .watch()
    .key(key)
    .only('delete')
    .startRevision(fromRevision.toString())
    .create()
    .catch((error: unknown) => {
      // Compacted past our start revision before the watch was created: read the queue again.
      if (/compacted/i.test((error as Error).message)) return undefined;
      throw unavailable('watch failed', error);
    });
  if (!watcher) return next(false);
  try {
    const deleted = await new Promise<boolean>((resolve, reject) => {
      const stop = (reason: unknown) => reject(reason);
      const onCancel = () => stop(cancel.reason);
      const onSessionLost = () =>
        stop(new BackendUnavailableError('etcd: the session was lost while waiting for the lock'));
      if (cancel.aborted) return onCancel();
      if (call.session.signal.aborted) return onSessionLost();
      cancel.addEventListener('abort', onCancel, { once: true });
      call.session.signal.addEventListener('abort', onSessionLost, { once: true });
      const done = () => {
        cancel.removeEventListener('abort', onCancel);
        call.session.signal.removeEventListener('abort', onSessionLost);
      };
      watcher.on('delete', () => {
        done();
        call.onWake();
        resolve(true);
      });
      // A watch cancelled later (compaction, …): re-read the queue instead of waiting forever.
      watcher.on('error', () => {
        done();
        resolve(false);
      });
    });
    cancel.throwIfAborted();
    return await next(deleted);
  } finally {
    // Not awaited: the cancel's round trip must not delay the grant.
    void watcher.cancel().catch(() => undefined);
  }
}
