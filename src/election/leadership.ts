import { NotHolderError } from '../errors.js';
import type { OwnedLock } from '../ownership.js';
import type { Leadership } from './types.js';

/**
 * A term as leader, backed by the lock its campaign won: the lock's token is the term, its signal
 * the term's, resigning releases it. `proclaim` is the backend's guarded write of a new value; it
 * answers false when the term has ended.
 */
export function leadershipOf(
  name: string,
  lock: OwnedLock,
  proclaim: (value: string) => Promise<boolean>,
): Leadership {
  lock.markTerm(name);
  return {
    name,
    term: lock.fencingToken,
    signal: lock.signal,
    async proclaim(value: string) {
      if (!lock.held || !(await proclaim(value))) throw new NotHolderError(name, 'the term has ended');
    },
    resign: () => lock.release(),
    [Symbol.asyncDispose]: () => lock.release(),
  };
}
