import type { ClientBase } from 'pg';
import { validateKey } from '../../src/validate.js';
import { FenceTable } from './fence-table.js';
import { advisoryKey } from './keyspace.js';

export interface XactLockOptions {
  /** false: pg_try_advisory_xact_lock, resolve null when busy. Default true (wait). */
  wait?: boolean;
  /** Fencing-token table. Default 'fencekit_fencing_tokens' (the provider's default too). */
  table?: string;
  /** Recorded with the token (shown by inspect()). */
  owner?: string;
}

export interface XactGrant {
  name: string;
  /** From the same durable counter as the provider's session locks. */
  fencingToken: bigint;
}

/** Per connection, the tables already ensured (a connection stays on one database). */
const ensured = new WeakMap<ClientBase, Map<string, Promise<void>>>();

/** CREATE TABLE IF NOT EXISTS inside the caller's transaction, behind a savepoint. */
async function ensureTable(client: ClientBase, table: FenceTable): Promise<void> {
  let tables = ensured.get(client);
  if (!tables) {
    tables = new Map();
    ensured.set(client, tables);
  }
  const where = table.table;
  let done = tables.get(where);
  if (!done) {
    done = (async () => {
      await client.query('SAVEPOINT fencekit_ensure');
      try {
        await table.create(client);
        await client.query('RELEASE SAVEPOINT fencekit_ensure');
      } catch (error) {
        await client.query('ROLLBACK TO SAVEPOINT fencekit_ensure').catch(() => undefined);
        throw error;
      }
    })();
    tables.set(where, done);
    const known = tables;
    done.catch(() => known.delete(where));
  }
  await done;
}

/**
 * Takes a transaction-scoped advisory lock (pg_advisory_xact_lock) and the next fencing token inside
 * the caller's open transaction: both end with its COMMIT or ROLLBACK, atomically with its work.
 * Call it after BEGIN; outside a transaction block the lock would end with the statement.
 */
export async function xactLock(
  client: ClientBase,
  name: string,
  opts: XactLockOptions = {},
): Promise<XactGrant | null> {
  validateKey(name, 'name');
  const table = new FenceTable(opts.table ?? 'fencekit_fencing_tokens');
  await ensureTable(client, table);
  const fn = opts.wait === false ? 'pg_try_advisory_xact_lock' : 'pg_advisory_xact_lock';
  const { rows } = await client.query<{ token: string }>(table.grantSql(fn), [
    name,
    opts.owner ?? null,
    advisoryKey(name).toString(),
  ]);
  return rows[0] ? { name, fencingToken: BigInt(rows[0].token) } : null;
}

/**
 * BEGIN, xactLock, fn, COMMIT (ROLLBACK if fn throws). Resolves with fn's result, or with null
 * without running fn when `wait: false` and another transaction holds the lock.
 */
export async function withXactLock<T>(
  client: ClientBase,
  name: string,
  fn: (grant: XactGrant) => Promise<T>,
  opts: XactLockOptions = {},
): Promise<T | null> {
  await client.query('BEGIN');
  try {
    const grant = await xactLock(client, name, opts);
    if (!grant) {
      await client.query('ROLLBACK');
      return null;
    }
    const result = await fn(grant);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}
