import type pg from 'pg';
import { checkOut } from './checkout.js';
import { within } from './deadline.js';
import { advisoryKey } from './keyspace.js';

/**
 * Who holds a semaphore's permits: one row per grant, written and deleted by the holder's own
 * connection, which also holds the grant's slot locks. A row whose connection died (its first slot
 * lock no longer held by its pid) is stale: the next granter deletes it.
 */
export class SemaphoreTable {
  readonly table: string;
  #ready: Promise<void> | undefined;
  #created = false;

  constructor(quotedName: string) {
    this.table = quotedName;
  }

  ensure(pool: pg.Pool, callTimeoutMs: number, cancel?: AbortSignal): Promise<void> {
    if (this.#created) return Promise.resolve();
    this.#ready ??= (async () => {
      const conn = await checkOut(pool, callTimeoutMs);
      const run = (sql: string, values: unknown[] = []) =>
        conn.query(sql, values, callTimeoutMs, 'creating the semaphore grants table');
      await run('BEGIN');
      await run('SELECT pg_advisory_xact_lock($1)', [advisoryKey('fencekit/migration').toString()]);
      await run(
        `CREATE TABLE IF NOT EXISTS ${this.table} (
           name text NOT NULL,
           token bigint NOT NULL,
           slots bigint[] NOT NULL,
           "limit" integer NOT NULL,
           owner text,
           since timestamptz NOT NULL DEFAULT now(),
           pid integer NOT NULL,
           PRIMARY KEY (name, token)
         )`,
      );
      await run('COMMIT');
      conn.giveBack();
      this.#created = true;
    })();
    this.#ready.catch(() => {
      this.#ready = undefined;
    });
    return within(this.#ready, Number.POSITIVE_INFINITY, 'creating the semaphore grants table', cancel);
  }
}

/** A row is live while its pid still holds its first slot's advisory lock (bigint form). */
export const LIVE = `EXISTS (SELECT 1 FROM pg_locks l
  WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.pid = g.pid
    AND ((l.classid::bigint << 32) | l.objid::bigint) = g.slots[1])`;

const tables = new WeakMap<object, SemaphoreTable>();

/** One grants table per fence table (so per provider): "<fence table>_semaphores", created once. */
export function semaphoreTableBeside(fence: { table: string }): SemaphoreTable {
  let table = tables.get(fence);
  if (!table) {
    table = new SemaphoreTable(`${fence.table.slice(0, -1)}_semaphores"`);
    tables.set(fence, table);
  }
  return table;
}
