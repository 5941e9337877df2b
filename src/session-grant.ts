import { OwnedLock } from './ownership.js';

/** Who a grant is: its key, fencing token and owner token. */
export interface GrantIdentity {
  key: string;
  fencingToken: bigint;
  ownerToken: string;
}

/**
 * A grant held by a session (an etcd lease, a ZooKeeper session): trusted only while the session
 * is alive, since a session past its deadline holds nothing, timer or not, and for as long as the
 * session is confirmed (what the acquire loop's hand-out margin reads). `releaseOnBackend` is
 * the grant's clean release.
 */
export function sessionGrant(
  session: { readonly alive: boolean; readonly trustLeftMs: number },
  grant: GrantIdentity,
  releaseOnBackend: () => Promise<void>,
): OwnedLock {
  return new OwnedLock({
    ...grant,
    trustedWhile: () => session.alive,
    trustLeftMs: () => session.trustLeftMs,
    releaseOnBackend,
  });
}
