// Public types by name, not as pg.X: see provider.ts.
import pg, { type ClientBase, type Pool } from 'pg';
import { validateKey } from '../../src/validate.js';
import { checkOut } from './checkout.js';
import { FenceTable } from './fence-table.js';
import { advisoryKey } from './keyspace.js';

/** Options of `withXactLock` and `xactLock`. */
export interface XactLockOptions {
  /** false: pg_try_advisory_xact_lock, resolve null when busy. Default true (wait). */
  wait?: boolean;
  /** Fencing-token table. Default 'fencekit_fencing_tokens' (the provider's default too). */
  table?: string;
  /** Recorded with the token (shown by inspect()). */
  owner?: string;
  /**
   * Where the token is taken: a pool on the same database whose connections run the counter's
   * update in a transaction of their own. Default: a small shared pool (2 connections, closed
   * when idle) opened with the caller's connection settings.
   */
  tokenPool?: Pool;
  /** Deadline of the token's update on that pool. Default 5 000 ms. */
  callTimeoutMs?: number;
}

/** A lock held until the end of the transaction, with its fencing token. */
export interface XactGrant {
  /** The lock's name. */
  name: string;
  /** From the same durable counter as the provider's session locks. */
  fencingToken: bigint;
}

/** The connection settings a pg client was made with (what it needs to open a sibling). */
interface ClientSettings {
  connectionParameters?: {
    user?: string;
    password?: unknown;
    host?: string;
    port?: number;
    database?: string;
    ssl?: unknown;
  };
}

/** Shared token pools, one per target database and user; they end their connections when idle. */
const tokenPools = new Map<string, pg.Pool>();
/** Per pool and table: created once, retried after a failure. */
const fences = new WeakMap<pg.Pool, Map<string, FenceTable>>();

function tokenPoolFor(client: pg.ClientBase): pg.Pool {
  const p = (client as unknown as ClientSettings).connectionParameters ?? {};
  const id = JSON.stringify([p.host, p.port, p.database, p.user]);
  let pool = tokenPools.get(id);
  if (!pool) {
    pool = new pg.Pool({
      host: p.host,
      port: p.port,
      database: p.database,
      user: p.user,
      password: p.password as pg.PoolConfig['password'],
      ssl: p.ssl as pg.PoolConfig['ssl'],
      max: 2,
      idleTimeoutMillis: 10_000,
      allowExitOnIdle: true,
      application_name: 'fencekit-tokens',
    });
    pool.on('error', () => undefined); // an idle connection that dies must not crash the process
    tokenPools.set(id, pool);
  }
  return pool;
}

function fenceFor(pool: pg.Pool, table: string): FenceTable {
  let tables = fences.get(pool);
  if (!tables) {
    tables = new Map();
    fences.set(pool, tables);
  }
  let fence = tables.get(table);
  if (!fence) {
    fence = new FenceTable(table);
    tables.set(table, fence);
  }
  return fence;
}

/**
 * Takes a transaction-scoped advisory lock (pg_advisory_xact_lock) inside the caller's open
 * transaction, then the next fencing token in a transaction of its own on another connection: the
 * lock ends with the caller's COMMIT or ROLLBACK, while the token stays used whatever that
 * transaction's fate, so no later holder gets it again. Taken while the lock is held, it follows
 * the same per-name order as the provider's session grants. Call it after BEGIN; outside a
 * transaction block the lock would end with the statement. If the token cannot be taken it throws,
 * and the lock stays until the caller's transaction ends: roll back.
 */
export async function xactLock(
  client: ClientBase,
  name: string,
  opts: XactLockOptions = {},
): Promise<XactGrant | null> {
  validateKey(name, 'name');
  const callMs = opts.callTimeoutMs ?? 5_000;
  const pool = opts.tokenPool ?? tokenPoolFor(client);
  const fence = fenceFor(pool, opts.table ?? 'fencekit_fencing_tokens');
  // The table exists before the lock is taken: no DDL ever runs in the caller's transaction.
  await fence.ensure(pool, callMs);
  const key = advisoryKey(name).toString();
  if (opts.wait === false) {
    const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1) AS ok', [key]);
    if (!rows[0]?.ok) return null;
  } else {
    await client.query('SELECT pg_advisory_xact_lock($1)', [key]);
  }
  const conn = await checkOut(pool, callMs);
  const bumped = await conn.query<{ token: string }>(
    fence.bumpSql,
    [name, opts.owner ?? null],
    callMs,
    'taking a fencing token',
  );
  conn.giveBack();
  const token = bumped.rows[0]?.token;
  if (token === undefined) throw new Error(`postgres: the token update of "${name}" returned no row`);
  return { name, fencingToken: BigInt(token) };
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
