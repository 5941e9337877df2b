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
): Promise<(HolderInfo & { pids: number[] }) | null> {
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
      `SELECT pid, pg_terminate_backend(pid) AS ended FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND classid::bigint = $1 AND objid::bigint = $2
          AND objsubid = 1 AND pid <> pg_backend_pid()`,
      [classid, objid],
    );
    await run('COMMIT');
    const pids = ended.rows.filter((r) => r.ended === true).map((r) => r.pid as number);
    if (pids.length === 0) return null;
    return { owner: row.owner ?? undefined, fencingToken: BigInt(row.token), since: row.since, pids };
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

/**
 * After a force-release: once the terminated backends are gone (their locks with them), starts the
 * holder's lock-delay with `stampSql` ($1 name, $2 token) by the server's clock, so from a moment
 * after the loss. Best effort within timeoutMs: otherwise the next holder starts it.
 */
export async function stampWhenGone(
  conn: Checkout,
  stampSql: string,
  name: string,
  removed: { fencingToken: bigint; pids: number[] },
  timeoutMs: number,
): Promise<void> {
  const giveUpAt = performance.now() + timeoutMs;
  while (performance.now() < giveUpAt) {
    const { rowCount } = await conn.query(
      'SELECT 1 FROM pg_stat_activity WHERE pid = ANY($1::integer[])',
      [removed.pids],
      timeoutMs,
      'force-release',
    );
    if (rowCount === 0) {
      await conn.query(stampSql, [name, removed.fencingToken.toString()], timeoutMs, 'force-release');
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
