import { InvalidArgumentError } from '../../src/errors.js';
import { FencekitTable } from './table-once.js';

/** A validated, quoted SQL identifier (optionally schema-qualified: "schema"."table"). */
export function quoteIdentifier(name: string, argument: string): string {
  const parts = name.split('.');
  if (parts.length > 2 || parts.some((p) => !/^[A-Za-z_][A-Za-z0-9_$]{0,62}$/.test(p))) {
    throw new InvalidArgumentError(
      argument,
      `"${name}" is not a plain SQL identifier (letters, digits, _ and $)`,
    );
  }
  return parts.map((p) => `"${p}"`).join('.');
}

/**
 * The durable fencing counter: one row per lock name, incremented by every grant, session or
 * transaction-scoped, always in a transaction of its own (autocommit), so a token once handed out
 * stays used whatever happens to the holder's transaction. Created on first use, never inside a
 * caller's transaction; creating it twice is harmless.
 */
export class FenceTable extends FencekitTable {
  constructor(tableName: string) {
    super(
      quoteIdentifier(tableName, 'table'),
      'the fencing-token table',
      `
         name text PRIMARY KEY,
         token bigint NOT NULL,
         owner text,
         since timestamptz NOT NULL DEFAULT now()
       `,
    );
  }

  /** The next token of `name` ($1), recording owner $2, as its own statement (autocommit). */
  get bumpSql(): string {
    return `INSERT INTO ${this.table} AS t (name, token, owner, since) VALUES ($1, 1, $2, now())
      ON CONFLICT (name) DO UPDATE SET token = t.token + 1, owner = EXCLUDED.owner, since = now()
      RETURNING token`;
  }

  /**
   * One statement that takes the advisory lock $3 with `lockFunction`, then, only if it was taken,
   * the next token for name $1 recording owner $2; it returns one row (token) or, when a try-lock
   * found the key busy, none. The CTE runs its volatile lock call exactly once, before the insert.
   */
  grantSql(lockFunction: LockFunction): string {
    const tries = lockFunction.includes('_try_');
    return `WITH l AS (SELECT ${lockFunction}($3) AS ok)
      INSERT INTO ${this.table} AS t (name, token, owner, since)
      SELECT $1, 1, $2, now() FROM l${tries ? ' WHERE l.ok' : ''}
      ON CONFLICT (name) DO UPDATE SET token = t.token + 1, owner = EXCLUDED.owner, since = now()
      RETURNING token`;
  }
}

/** Session locks only: a transaction's token is bumped apart from its lock (see xact.ts). */
export type LockFunction = 'pg_advisory_lock' | 'pg_try_advisory_lock';
