import type { ClientBase } from 'pg';
import { InvalidArgumentError, StaleFencingTokenError } from '../../src/errors.js';
import { quoteIdentifier } from './fence-table.js';

/** One fenced write: {@link fencedUpdate} sets `set` on the `where` row(s) unless a higher token wrote there. */
export interface FencedUpdate {
  /** The table, with its fencing-token column. */
  table: string;
  /** Columns to set. */
  set: Record<string, unknown>;
  /** Equality conditions that pick the row(s), e.g. { id: 42 }. */
  where: Record<string, unknown>;
  /** The writer's fencing token. */
  token: bigint;
  /** Column that remembers the highest token written. Default 'fence_token' (bigint, NULL = never). */
  tokenColumn?: string;
  /** true: reject a token equal to the stored one too (`<` instead of `<=`). Default false. */
  strict?: boolean;
  /** Throw StaleFencingTokenError instead of resolving false when the token is stale. */
  throwIfStale?: boolean;
}

/**
 * The storage side of fencing for a user table:
 *
 *   UPDATE t SET col = $1, …, fence_token = $t
 *    WHERE id = $2 AND (fence_token IS NULL OR fence_token <= $t)
 *
 * Resolves true when it applied. By default an equal token is accepted: it is the same grant
 * writing again (the same holder may update a row twice); `strict: true` gives `<`.
 */
export async function fencedUpdate(client: ClientBase, update: FencedUpdate): Promise<boolean> {
  const table = quoteIdentifier(update.table, 'table');
  const tokenColumn = quoteIdentifier(update.tokenColumn ?? 'fence_token', 'tokenColumn');
  const whereEntries = Object.entries(update.where);
  if (whereEntries.length === 0)
    throw new InvalidArgumentError('where', 'give at least one column to pick the row');
  if (typeof update.token !== 'bigint')
    throw new InvalidArgumentError('token', 'expected a bigint fencing token');
  // $1 is the token, then the where values, then the set values.
  const token = update.token.toString();
  const whereValues = whereEntries.map(([, value]) => value);
  const whereSql = (firstParam: number) =>
    whereEntries
      .map(([column], i) => `${quoteIdentifier(column, 'where')} = $${i + firstParam}`)
      .join(' AND ');
  const setEntries = Object.entries(update.set);
  const sets = setEntries.map(
    ([column], i) => `${quoteIdentifier(column, 'set')} = $${i + 2 + whereEntries.length}`,
  );
  sets.push(`${tokenColumn} = $1::bigint`);
  const comparison = update.strict ? '<' : '<=';
  const result = await client.query(
    `UPDATE ${table} SET ${sets.join(', ')}
      WHERE ${whereSql(2)} AND (${tokenColumn} IS NULL OR ${tokenColumn} ${comparison} $1::bigint)`,
    [token, ...whereValues, ...setEntries.map(([, value]) => value)],
  );
  const applied = (result.rowCount ?? 0) > 0;
  if (applied || !update.throwIfStale) return applied;
  const current = await client.query<{ token: string | null; rows: string }>(
    `SELECT max(${tokenColumn})::text AS token, count(*)::text AS rows FROM ${table} WHERE ${whereSql(1)}`,
    whereValues,
  );
  const found = current.rows[0];
  if (!found || found.rows === '0') {
    throw new InvalidArgumentError(
      'where',
      `no row of ${update.table} matches ${JSON.stringify(update.where)}`,
    );
  }
  throw new StaleFencingTokenError(
    `${update.table} ${JSON.stringify(update.where)}`,
    update.token,
    BigInt(found.token ?? '0'),
  );
}
