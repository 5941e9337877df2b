import type { Etcd3, IOperation, IRequestOp, ITxnResponse } from 'etcd3';

/** What a guarded etcd transaction answered. */
export interface GuardedTxnResult {
  /** True when the lock key still had our create revision and the operations were applied. */
  committed: boolean;
  response: ITxnResponse;
}

/**
 * Runs `ops` in one etcd Txn that commits only while the lock key still exists with the create
 * revision it was granted at (its fencing token): a holder whose session has expired, even one that
 * has not noticed yet, cannot write.
 */
export async function guardedTxn(
  client: Etcd3,
  lockKey: Buffer,
  createRevision: bigint,
  ops: Array<IRequestOp | IOperation>,
  timeoutMs: number,
): Promise<GuardedTxnResult> {
  const response = await client
    .if(lockKey, 'Create', '==', createRevision.toString())
    .then(...ops)
    .options({ deadline: new Date(Date.now() + timeoutMs) })
    .commit();
  return { committed: response.succeeded, response };
}
