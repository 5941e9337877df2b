import { AuthenticationError } from '../../src/errors.js';
import { zkCode } from './client.js';

/**
 * An AuthenticationError when ZooKeeper refused who we are somewhere down the error's cause chain
 * (NO_AUTH: a node's ACL does not let this client's identities in, e.g. another identity's
 * creatorOnlyAcl), else the error as it is. Retrying does not help, so a wait does not retry it.
 */
export function refusedOr(error: unknown, hosts: string): unknown {
  if (error instanceof AuthenticationError) return error;
  for (let e: unknown = error, depth = 0; e && depth < 5; depth++) {
    if (zkCode(e) === 'NO_AUTH')
      return new AuthenticationError(
        'zookeeper',
        hosts,
        "a node's ACL refuses this client's identities (a name another identity made with creatorOnlyAcl, or an ACL set by hand)",
        { cause: error },
      );
    e = (e as { cause?: unknown }).cause;
  }
  return error;
}
