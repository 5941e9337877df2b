import type { HolderInfo } from '../../src/types.js';
import type { Checkout } from './checkout.js';
import { advisoryKey, lockRowIds } from './keyspace.js';

/**
 * The advisory key of a name in SQL, as keyspace.ts computes it: the first 8 bytes of
 * SHA-256('fencekit:' || name) as a signed big-endian bigint (PostgreSQL 11+).
 */
const ADVISORY_KEY_SQL = `('x' || left(encode(sha256(convert_to('fencekit:' || t.name, 'UTF8')), 'hex'), 16))::bit(64)::bigint`;

/**
 * Ends the session that holds `name`, in one transaction that first locks the name's token row:
 * no grant can record a new token meanwhile, so the row's token is the holder's (checked against
 * `expected`) and whichever backend holds the advisory lock holds that grant, or is a waiter just
 * granted whose token is not recorded yet (its grant fails with its session and is never handed
 * out). A session advisory lock cannot be released from another session: pg_terminate_backend
 * ends the holder's connection, the server frees the lock and grants the next waiter.
 */
export async function terminateHolder(
  conn: Checkout,
  table: string,
  name: string,
  expected: bigint | undefined,
  timeoutMs: number,
): Promise<HolderInfo | null> {
  const run = (sql: string, values: unknown[] = []) => conn.query(sql, values, timeoutMs, 'force-release');
  await run('BEGIN');
  try {
    const row = (await run(`SELECT token, owner, since FROM ${table} WHERE name = $1 FOR UPDATE`, [name]))
      .rows[0] as { token: string; owner: string | null; since: Date } | undefined;
    if (!row || (expected !== undefined && BigInt(row.token) !== expected)) {
      await run('ROLLBACK');
      return null;
    }
    const { classid, objid } = lockRowIds(advisoryKey(name));
    const ended = await run(
      `SELECT pg_terminate_backend(pid) AS ended FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND classid::bigint = $1 AND objid::bigint = $2
          AND objsubid = 1 AND pid <> pg_backend_pid()`,
      [classid, objid],
    );
    await run('COMMIT');
    if (!ended.rows.some((r) => r.ended === true)) return null;
    return { owner: row.owner ?? undefined, fencingToken: BigInt(row.token), since: row.since };
  } catch (error) {
    conn.discard(); // the transaction's state is unknown: the connection goes, and its row lock with it
    throw error;
  }
}

/** Names in the token table under `prefix` whose advisory lock some session holds now. */
export async function heldNamesJoin(
  conn: Checkout,
  table: string,
  prefix: string,
  timeoutMs: number,
): Promise<string[]> {
  const likePrefix = `${prefix.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const { rows } = await conn.query<{ name: string }>(
    `SELECT t.name FROM ${table} t
       JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
        AND ((l.classid::bigint << 32) | l.objid::bigint) = ${ADVISORY_KEY_SQL}
      WHERE t.name LIKE $1`,
    [likePrefix],
    timeoutMs,
    'list',
  );
  return rows.map((r) => r.name);
}
