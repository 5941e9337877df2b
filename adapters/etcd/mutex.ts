import {
  CompareResult,
  CompareTarget,
  type Etcd3,
  type IKeyValue,
  type IRangeRequest,
  type IRangeResponse,
  type ITxnResponse,
  SortOrder,
  SortTarget,
} from 'etcd3';
import { BackendUnavailableError } from '../../src/errors.js';
import { bounded } from './bounded.js';
import { type EnqueueAttempt, enqueuedRevision } from './enqueue-txn.js';
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
  /** Our key: `<prefix><lease hex>`. */
  key: Buffer;
  /** Stored as the key's value: the owner record for locks, the proposal for elections. */
  value: string;
  callTimeoutMs: number;
  /** Counts predecessor deletions this process was woken by (the herd check). */
  onWake: () => void;
  /**
   * A key the enqueue Txn reads too, in the same revision (a lock's lock-delay marker), or a range
   * of which it reads the first key (a read-write lock's markers).
   */
  alsoRead?: Buffer | IRangeRequest;
  /** Ranges the enqueue Txn reads too, whole, at its revision (a semaphore's folder): Queued.reads. */
  reads?: IRangeRequest[];
}

export interface Queued {
  key: Buffer;
  /** Our key's create revision: the fencing token. */
  revision: bigint;
  /** True when no key with a smaller create revision exists. */
  owner: boolean;
  /** MutexCall.alsoRead as the enqueue Txn found it (undefined: absent), and that Txn's revision. */
  alsoRead?: { kv: IKeyValue | undefined; revision: bigint };
  /** MutexCall.reads as the enqueue Txn answered them, in order, and that Txn's revision. */
  reads?: { ranges: IRangeResponse[]; revision: bigint };
}

const callOptions = (timeoutMs: number) => ({ deadline: new Date(Date.now() + timeoutMs) });

export function unavailable(what: string, error: unknown): BackendUnavailableError {
  if (error instanceof BackendUnavailableError) return error;
  return new BackendUnavailableError(`etcd: ${what}: ${(error as Error).message}`, { cause: error });
}

/**
 * Sends the enqueue Txn: create our key if it does not exist, and read the queue's head in the same
 * revision. When our key exists already, it is this very request's put, replayed by the etcd3
 * client's retry after a lost answer: the caller holds the name's local turn, which ends only once
 * an earlier key of this session for the name is confirmed deleted (or the session is gone, and with
 * it the lease hex in the key). So we adopt it, as Go's concurrency.Mutex does: the replay is harmless.
 */
export function sendEnqueue(call: MutexCall): EnqueueAttempt {
  const key = call.key;
  const head = { request_range: queueRange(call.prefix) };
  const alsoRead = Buffer.isBuffer(call.alsoRead) ? { key: call.alsoRead } : { ...call.alsoRead, limit: 1 };
  const also: Array<{ request_range: IRangeRequest }> = call.alsoRead ? [{ request_range: alsoRead }] : [];
  for (const range of call.reads ?? []) also.push({ request_range: range });
  const options = callOptions(call.callTimeoutMs);
  const txn = call.client.kv.txn(
    {
      compare: [{ key, target: CompareTarget.Create, result: CompareResult.Equal, create_revision: 0 }],
      success: [
        { request_put: { key, value: Buffer.from(call.value), lease: call.session.leaseId } },
        head,
        ...also,
      ],
      failure: [{ request_range: { key } }, head, ...also],
    },
    options,
  );
  txn.catch(() => undefined); // read by enqueue, or by the session's clean-up after a cancel
  return { txn, deadline: options.deadline };
}

/**
 * Awaits an enqueue Txn (raced against signal and callTimeoutMs). Throws (signal's reason, or
 * BackendUnavailableError) with the outcome unknown to the caller: it must then hand the attempt to
 * the session (EtcdSession.removeEnqueued), which waits for the Txn's real outcome.
 */
export async function enqueue(
  call: MutexCall,
  attempt: EnqueueAttempt,
  signal: AbortSignal,
): Promise<Queued> {
  const key = call.key;
  let res: ITxnResponse;
  try {
    res = await bounded(attempt.txn, signal, call.callTimeoutMs, 'acquire txn');
  } catch (error) {
    // Our lease is gone (revoked, expired): the session is lost now, and with it this request.
    if (/lease not found/i.test((error as Error).message)) call.session.leaseNotFound();
    if (signal.aborted) throw signal.reason;
    throw unavailable('acquire txn failed', error);
  }
  const revision = enqueuedRevision(res);
  if (revision === undefined) throw new BackendUnavailableError('etcd: could not create the lock key');
  const first = res.responses[1]?.response_range.kvs[0];
  const owner = first !== undefined && BigInt(first.create_revision) === revision;
  const queued: Queued = { key, revision, owner };
  const at = BigInt(res.header.revision);
  if (call.alsoRead) queued.alsoRead = { kv: res.responses[2]?.response_range.kvs[0], revision: at };
  if (call.reads) {
    const ranges = res.responses.slice(res.responses.length - call.reads.length).map((r) => r.response_range);
    queued.reads = { ranges, revision: at };
  }
  return queued;
}

/** Which keys a waiter waits for, and whether it waits at all. */
export interface TurnOptions {
  /**
   * The prefix of the keys that must all be gone before ours: by default the whole queue (a lock,
   * a writer); a reader of a read-write lock waits for the writers' keys only.
   */
  blockedBy?: string;
  /** false: one look, no watch; resolves false when such a key remains. Default true. */
  wait?: boolean;
}

/**
 * Waits until every key created before ours under the prefix (or `blockedBy`) is gone, watching
 * only the newest of them at a time; resolves true then. Each round is one read Txn: the newest
 * predecessor and our own key, so a waiter whose session expired while it waited finds its key
 * gone and does not win. After the watched key is deleted, one light read comes first: the queue's
 * head alone. When that is our key (so it still exists and nobody is before it) we hold the lock;
 * only otherwise the full round follows (always, with `blockedBy`: the head says nothing about a
 * subset). `signal` is the request's one signal (caller's cancel, timeout, close, session): every
 * await races it, and each call also has its callTimeoutMs deadline.
 */
export async function waitForTurn(
  call: MutexCall,
  queued: Queued,
  signal: AbortSignal,
  { blockedBy = call.prefix, wait = true }: TurnOptions = {},
): Promise<boolean> {
  const whole = blockedBy === call.prefix;
  for (;;) {
    signal.throwIfAborted();
    const read = call.client.kv.txn(
      {
        compare: [],
        success: [
          { request_range: queueRange(blockedBy, queued.revision) },
          { request_range: { key: queued.key } },
        ],
        failure: [],
      },
      callOptions(call.callTimeoutMs),
    );
    const res = await raced(read, signal, call.callTimeoutMs, 'reading the queue');
    const mine = res.responses[1]?.response_range.kvs[0];
    if (!mine || BigInt(mine.create_revision) !== queued.revision) {
      throw new BackendUnavailableError('etcd: the session expired while waiting; the queue entry is gone');
    }
    const predecessor = res.responses[0]?.response_range.kvs[0];
    if (!predecessor) return true;
    if (!wait) return false;
    const first = await afterDeletion(
      call,
      predecessor.key,
      BigInt(res.header.revision) + 1n,
      signal,
      (deleted) => (deleted && whole ? firstCreateRevision(call, signal) : Promise.resolve(undefined)),
    );
    if (first === queued.revision) return true;
  }
}

/** A call raced against the request's signal and its deadline; errors become BackendUnavailableError. */
async function raced<T>(work: Promise<T>, signal: AbortSignal, timeoutMs: number, what: string): Promise<T> {
  try {
    return await bounded(work, signal, timeoutMs, what);
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    throw unavailable(`${what} failed`, error);
  }
}

/** The create revision of the queue's head (the holder): the lightest read there is. */
async function firstCreateRevision(call: MutexCall, signal: AbortSignal): Promise<bigint | undefined> {
  const read = call.client.kv.range(queueRange(call.prefix), callOptions(call.callTimeoutMs));
  const head = (await raced(read, signal, call.callTimeoutMs, 'reading the queue')).kvs[0];
  return head === undefined ? undefined : BigInt(head.create_revision);
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
 * (false: compacted start revision, cancelled by etcd; read the queue again), then runs
 * next(deleted) before the watch is cancelled: a cancel sent first delays that read, and with it
 * every handoff. The watch must be created (etcd answered) within callTimeoutMs: the etcd3 client
 * would retry its creation forever while etcd is unreachable. Rejects when signal aborts. The
 * cancel is not awaited: its round trip must not delay the grant.
 */
export async function afterDeletion<T>(
  call: MutexCall,
  key: Buffer,
  fromRevision: bigint,
  signal: AbortSignal,
  next: (deleted: boolean) => Promise<T>,
): Promise<T> {
  const watcher = call.client
    .watch()
    .key(key)
    .only('delete')
    .startRevision(fromRevision.toString())
    .watcher();
  // Always listened to: an 'error' emitted with no listener would throw inside the etcd3 client.
  // etcd ended this watch itself (compaction): the client dropped it; cancelling it again would
  // send a cancel whose answer that client cannot place, and it throws.
  let endedByServer = false;
  const ended = new Promise<false>((resolve) =>
    watcher.on('error', () => {
      endedByServer = true;
      resolve(false);
    }),
  );
  const deleted = new Promise<true>((resolve) =>
    watcher.once('delete', () => {
      call.onWake();
      resolve(true);
    }),
  );
  const created = new Promise<void>((resolve) => watcher.once('connected', () => resolve()));
  try {
    await raced(Promise.race([created, ended]), signal, call.callTimeoutMs, 'creating a watch');
    const outcome = await bounded(Promise.race([deleted, ended]), signal, Number.POSITIVE_INFINITY, 'watch');
    signal.throwIfAborted();
    return await next(outcome);
  } finally {
    if (!endedByServer) void watcher.cancel().catch(() => undefined);
  }
}
