/**
 * A name's waiter queue for its detail (GET /api/names/:name): read when the detail is asked for,
 * not by every look, with the provider's own queue() (so within its callTimeoutMs). Only a lock's
 * queue is read: semaphores, read-write locks and elections keep theirs elsewhere. A queue that
 * cannot be read leaves the rest of the detail as it is and says why.
 */
import type { LockProvider } from '../../types.js';
import { type QueueDetail, readQueue } from '../queue-rows.js';
import type { NameKind } from './snapshot.js';

/** The most entries a detail shows; the count of waiters comes from inspect as before. */
export const DETAIL_QUEUE_LIMIT = 50;

export async function nameQueue(
  provider: LockProvider,
  name: string,
  kind: NameKind,
  now: () => number = Date.now,
): Promise<QueueDetail> {
  if (kind !== 'lock') return { queue: null, queueNote: `the queue of a ${kind} is not shown` };
  return readQueue(provider, name, DETAIL_QUEUE_LIMIT, now);
}
