import type { OwnedLock } from '../../src/ownership.js';
import type { DeletionSubscription } from './deletion-watch.js';
import type { EtcdSession } from './session.js';

/**
 * How a grant on etcd (a lock, a read or write of a read-write lock, a semaphore permit) is lost:
 * its session ends (reason: the session's), or its key, created at `revision`, is deleted by anyone
 * but its holder (an operator's `etcdctl del`, a force-release, a revoked lease: 'revoked'), seen
 * within one event of the provider's deletion watch rather than at the next keepalive. `deletion`
 * must have been subscribed before the key's enqueue Txn was sent, so that a delete before the
 * grant is seen too: it then loses the grant at once (born lost, never handed out). `onLost` runs
 * after either loss (the plain lock ends its local turn there). Both listeners go when the grant
 * ends, released or lost.
 */
export function loseWithSessionOrKey(
  lock: OwnedLock,
  session: EtcdSession,
  deletion: DeletionSubscription,
  revision: bigint,
  onLost: () => void = () => undefined,
): void {
  const unsubscribe = session.whenLost((reason) => {
    lock.lose(reason);
    onLost();
  });
  deletion.arm(revision, () => {
    lock.lose('revoked');
    onLost();
  });
  lock.onEnd(() => {
    unsubscribe();
    deletion.stop();
  });
}
