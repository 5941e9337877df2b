import type { Lock, Redlock } from 'fencekit/compat/redlock';

/** The part of Redlock the facades workload drives. */
export type RedlockCalls = Pick<Redlock, 'acquire' | 'using' | 'quit'>;

/**
 * Control (--unsafe expiry-from-call-start): the redlock facade as it was before its expiration
 * counted from the grant. acquire() sets the lock's expiration, and the release it schedules, to
 * the call's start + duration − the drift allowance, so a lock that waited in the queue longer than
 * that is handed out already expired and gives itself back at once, under its holder. using() is
 * left as it is: it kept its lock for the routine, then as now. Built on the shipped facade from
 * outside; nothing of the library is changed.
 */
export function expiryFromCallStart(redlock: Redlock): RedlockCalls {
  const acquire = async (resources: string[], duration: number): Promise<Lock> => {
    const start = Date.now();
    const lock = await redlock.acquire(resources, duration);
    const drift = Math.round(redlock.settings.driftFactor * duration) + 2;
    const expiration = start + duration - drift;
    lock.expiration = expiration;
    lock.grant.expireAt(expiration);
    return lock;
  };
  return {
    acquire: acquire as RedlockCalls['acquire'],
    using: redlock.using.bind(redlock) as RedlockCalls['using'],
    quit: redlock.quit.bind(redlock),
  };
}
