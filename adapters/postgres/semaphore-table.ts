import { heldBy } from './keyspace.js';
import { FencekitTable } from './table-once.js';

/**
 * Who holds a semaphore's permits: one row per grant, written and deleted by the holder's own
 * connection, which also holds the grant's slot locks. A row whose connection died (its first slot
 * lock no longer held by its pid) is stale: the next granter deletes it.
 */
export class SemaphoreTable extends FencekitTable {
  constructor(quotedName: string) {
    super(
      quotedName,
      'the semaphore grants table',
      `
         name text NOT NULL,
         token bigint NOT NULL,
         slots bigint[] NOT NULL,
         "limit" integer NOT NULL,
         owner text,
         since timestamptz NOT NULL DEFAULT now(),
         pid integer NOT NULL,
         PRIMARY KEY (name, token)
       `,
    );
  }
}

/** A row is live while its pid still holds its first slot's advisory lock (bigint form). */
export const LIVE = heldBy('g.pid', 'g.slots[1]');

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
