import type { ITxnResponse } from 'etcd3';

/**
 * What the session needs to know of a queue's enqueue Txn (sent by sendEnqueue in mutex.ts) to
 * remove the key it may have put. The Txn creates our key only if it does not exist; on failure its
 * first response reads our key, so either answer names the key's create revision.
 */

/** An enqueue Txn sent to etcd: its own promise (it may settle after the caller gave up) and deadline. */
export interface EnqueueAttempt {
  txn: Promise<ITxnResponse>;
  deadline: Date;
}

/** The create revision of our key after an answered enqueue Txn (put now, or adopted). */
export function enqueuedRevision(res: ITxnResponse): bigint | undefined {
  if (res.succeeded) return BigInt(res.header.revision);
  const mine = res.responses[0]?.response_range.kvs[0];
  return mine === undefined ? undefined : BigInt(mine.create_revision);
}
