import type { ClientBase } from 'pg';
import { InvalidArgumentError } from '../../src/errors.js';
import { advisoryKey } from './keyspace.js';

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
 * The durable fencing counter: one row per lock name, incremented by every grant in the same
 * statement that records the holder. Created on first use; creating it twice is harmless.
 */
export class FenceTable {
  readonly table: string;
  #ready: Promise<void> | undefined;
  /** True once the table is known to exist: callers can skip getting a connection for ensure(). */
  created = false;

  constructor(tableName: string) {
    this.table = quoteIdentifier(tableName, 'table');
  }

  /** CREATE TABLE IF NOT EXISTS inside the caller's transaction; concurrent creators take turns. */
  async create(client: ClientBase): Promise<void> {
    await client.query('SELECT pg_advisory_xact_lock($1)', [advisoryKey('fencekit/migration').toString()]);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${this.table} (
         name text PRIMARY KEY,
         token bigint NOT NULL,
         owner text,
         since timestamptz NOT NULL DEFAULT now()
       )`,
    );
  }

  /** Creates the table once per provider, in a transaction of its own. */
  ensure(client: ClientBase): Promise<void> {
    this.#ready ??= (async () => {
      await client.query('BEGIN');
      try {
        await this.create(client);
        await client.query('COMMIT');
        this.created = true;
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      }
    })();
    this.#ready.catch(() => {
      this.#ready = undefined;
    });
    return this.#ready;
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

export type LockFunction =
  | 'pg_advisory_lock'
  | 'pg_try_advisory_lock'
  | 'pg_advisory_xact_lock'
  | 'pg_try_advisory_xact_lock';
