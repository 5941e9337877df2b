/**
 * A name's waiter queue for its detail (GET /api/names/:name): read when the detail is asked for,
 * not by every look, with the provider's own queue() (so within its callTimeoutMs). Only a lock's
 * queue is read: semaphores, read-write locks and elections keep theirs elsewhere. A queue that
 * cannot be read leaves the rest of the detail as it is and says why.
 */
import { FencekitError } from '../../errors.js';
import { processSecrets } from '../../secret-mask.js';
import type { LockProvider, QueuedWaiter } from '../../types.js';
import { type QueueRow, queueRows } from '../queue-rows.js';
import type { NameKind } from './snapshot.js';

/** The most entries a detail shows; the count of waiters comes from inspect as before. */
export const DETAIL_QUEUE_LIMIT = 50;

/** `queue` (null when not read) and, when null, `queueNote` saying why. */
export type QueueDetail = { queue: QueueRow[] } | { queue: null; queueNote: string };

export async function nameQueue(
  provider: LockProvider,
  name: string,
  kind: NameKind,
  now: () => number = Date.now,
): Promise<QueueDetail> {
  if (kind !== 'lock') return { queue: null, queueNote: `the queue of a ${kind} is not shown` };
  if (!provider.queue) return { queue: null, queueNote: `the ${provider.backend} provider has no queue()` };
  let waiters: QueuedWaiter[];
  try {
    waiters = await provider.queue(name, { limit: DETAIL_QUEUE_LIMIT });
  } catch (error) {
    const why =
      error instanceof FencekitError ? `${error.message} [${error.code}]` : 'the queue could not be read';
    return { queue: null, queueNote: processSecrets.text(why) };
  }
  return { queue: queueRows(waiters, now()) };
}
