import type pg from 'pg';
import { TableOnce } from './table-once.js';

/**
 * Who holds a semaphore's permits: one row per grant, written and deleted by the holder's own
 * connection, which also holds the grant's slot locks. A row whose connection died (its first slot
 * lock no longer held by its pid) is stale: the next granter deletes it.
 */
export class SemaphoreTable {
  readonly table: string;
  readonly #creation: TableOnce;

  constructor(quotedName: string) {
    this.table = quotedName;
    this.#creation = new TableOnce(
      'the semaphore grants table',
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
  }

  /** True once the table is known to exist. */
  get created(): boolean {
    return this.#creation.created;
  }

  /** Creates the table on first use (see TableOnce). */
  ensure(pool: pg.Pool, callTimeoutMs: number, cancel?: AbortSignal): Promise<void> {
    return this.#creation.ensure(pool, callTimeoutMs, cancel);
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
