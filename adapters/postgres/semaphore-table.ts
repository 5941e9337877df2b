import type { ClientBase } from 'pg';
import { advisoryKey } from './keyspace.js';

/**
 * Who holds a semaphore's permits: one row per grant, written and deleted by the holder's own
 * connection, which also holds the grant's slot locks. A row whose connection died (its first slot
 * lock no longer held by its pid) is stale: the next granter deletes it.
 */
export class SemaphoreTable {
  readonly table: string;
  #ready: Promise<void> | undefined;

  constructor(quotedName: string) {
    this.table = quotedName;
  }

  ensure(client: ClientBase): Promise<void> {
    this.#ready ??= (async () => {
      await client.query('BEGIN');
      try {
        await client.query('SELECT pg_advisory_xact_lock($1)', [
          advisoryKey('fencekit/migration').toString(),
        ]);
        await client.query(
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
        await client.query('COMMIT');
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
