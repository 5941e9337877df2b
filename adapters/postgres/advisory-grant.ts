import type { KeyedFifo } from '../../src/keyed-fifo.js';
import type { Checkout } from './checkout.js';

/**
 * One session advisory grant as the provider's request path takes it (in-process line, waiting
 * connections, the server's queue, health checks): a lock's, or a read or write of a read-write
 * lock. The statements are the recipe's; the path is the same.
 */
export interface AdvisoryGrant {
  /** The key the grant is handed out with (a lock's key, a read-write lock's name). */
  key: string;
  /**
   * The grant's name inside PostgreSQL: its fence row, its advisory key (keyspace.ts) and its
   * place in the waiting line. A lock's key, or a name no lock can have ("/rwlock/<name>").
   */
  fenceName: string;
  /** The in-process line of this kind of grant (a lock and a read-write lock may share a name). */
  line: KeyedFifo;
  owner: string | undefined;
  ownerToken: string;
  wait: boolean;
  /**
   * The statement that takes the advisory lock ($3), blocking or as a try, and only then takes
   * the next token of $1 recording owner $2: one row (token), or none when a try found it busy.
   */
  grantSql(blocking: boolean): string;
  /** Values after $1..$3 in grantSql. */
  moreValues: unknown[];
  /**
   * With it, grantSql answers a row (ok, token) even when it took the lock without a token (a
   * lock-delay marker to look at): settle then runs on the lock's connection, holding the lock, and
   * resolves with the token, or null once it gave lock and connection back (lock-delay.ts).
   */
  settle?: (conn: Checkout, cancel: AbortSignal) => Promise<bigint | null>;
  /** The statement that gives the grant back on its own connection, and its values. */
  releaseOf(token: bigint, advisory: string): { sql: string; values: unknown[] };
}
