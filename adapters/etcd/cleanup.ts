import { CompareResult, CompareTarget, type Etcd3, type ITxnResponse } from 'etcd3';
import { jitteredDelays, sleepUnlessWoken } from '../../src/backoff.js';
import { monotonicNow } from '../../src/clock.js';
import { BackendUnavailableError } from '../../src/errors.js';
import { bounded } from './bounded.js';
import { type EnqueueAttempt, enqueuedRevision } from './enqueue-txn.js';

const deadline = (timeoutMs: number) => ({ deadline: new Date(Date.now() + timeoutMs) });

/**
 * Deletes key only while it is still the one created at `revision`: a late or replayed delete can
 * never remove a newer grant. With no revision (a put whose answer was lost), the key is read first
 * and that revision guards the delete. Resolves once etcd confirmed; throws when it did not answer.
 */
export async function guardedDelete(
  client: Etcd3,
  key: Buffer,
  revision: bigint | undefined,
  timeoutMs: number,
): Promise<void> {
  let created = revision;
  if (created === undefined) {
    const { kvs } = await bounded(
      client.kv.range({ key }, deadline(timeoutMs)),
      undefined,
      timeoutMs,
      'read',
    );
    const found = kvs[0];
    if (!found) return;
    created = BigInt(found.create_revision);
  }
  const txn = client.kv.txn(
    {
      compare: [
        {
          key,
          target: CompareTarget.Create,
          result: CompareResult.Equal,
          create_revision: created.toString(),
        },
      ],
      success: [{ request_delete_range: { key } }],
      failure: [],
    },
    deadline(timeoutMs),
  );
  await bounded(txn, undefined, timeoutMs, 'guarded delete');
}

export interface RetryOptions {
  timeoutMs: number;
  /** The owning session's signal: once it aborts, the key goes with the lease and retries stop. */
  sessionSignal: AbortSignal;
  /** Past this many ms without a confirmation, giveUp() runs (the session is ended and replaced). */
  giveUpAfterMs: number;
  giveUp: () => void;
}

/**
 * guardedDelete, retried with jittered backoff until etcd confirms it (true) or the session ends
 * (false). Never rejects: whoever started a clean-up may go away, the session owns it.
 */
export async function deleteUntilConfirmed(
  client: Etcd3,
  key: Buffer,
  revision: bigint | undefined,
  options: RetryOptions,
): Promise<boolean> {
  const startedAt = monotonicNow();
  const delays = jitteredDelays({ initialMs: 50, maxMs: 1_000 });
  while (!options.sessionSignal.aborted) {
    try {
      await guardedDelete(client, key, revision, options.timeoutMs);
      return true;
    } catch {
      if (monotonicNow() - startedAt > options.giveUpAfterMs) {
        options.giveUp();
        return false;
      }
      try {
        await sleepUnlessWoken(delays.next().value, options.sessionSignal).done;
      } catch {
        return false; // the session ended while we waited to retry
      }
    }
  }
  return false;
}

/**
 * Once a Txn's promise has settled the etcd3 client sends no more copies of it, but etcd may still
 * apply one whose raft proposal outlived the call. "Our key is not there" is believed only this long
 * after the Txn failed (or after its deadline, when it never settles).
 */
export const REPLAY_WINDOW_MS = 1_000;

/**
 * The create revision of the key an enqueue Txn may have put (a caller gave up on it): read from its
 * answer when it comes; when it fails or never answers, undefined, but only REPLAY_WINDOW_MS after
 * that, so a read made then sees any late put. 'ended' when the session ended first (its lease took
 * the key).
 */
export async function settledRevision(
  attempt: EnqueueAttempt,
  sessionSignal: AbortSignal,
): Promise<bigint | undefined | 'ended'> {
  const untilDeadline = Math.max(0, attempt.deadline.getTime() - Date.now());
  let res: ITxnResponse | undefined;
  try {
    res = await bounded(attempt.txn, sessionSignal, untilDeadline + REPLAY_WINDOW_MS, 'enqueue txn');
  } catch (error) {
    if (sessionSignal.aborted) return 'ended';
    // Failed before its window ran out: a late apply is still possible for REPLAY_WINDOW_MS.
    const timedOut = error instanceof BackendUnavailableError;
    if (!timedOut) {
      try {
        await sleepUnlessWoken(REPLAY_WINDOW_MS, sessionSignal).done;
      } catch {
        return 'ended';
      }
    }
    return undefined;
  }
  return enqueuedRevision(res);
}
