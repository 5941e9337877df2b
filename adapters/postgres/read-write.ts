import type pg from 'pg';
import type { KeyedFifo } from '../../src/keyed-fifo.js';
import type { OwnedLock } from '../../src/ownership.js';
import type { AdapterReadWriteInfo, ReadWriteAdapter, ReadWriteRequest } from '../../src/read-write/core.js';
import type { HolderInfo } from '../../src/types.js';
import type { AdvisoryGrant } from './advisory-grant.js';
import { type Checkout, checkOut } from './checkout.js';
import type { FenceTable } from './fence-table.js';
import { advisoryKey, heldBy, lockRowIds } from './keyspace.js';
import type { GrantDelayTable } from './lock-delay.js';
import { FencekitTable } from './table-once.js';

/** The fence row and advisory key name of a read-write lock: a leading '/' no lock name has. */
export const READ_WRITE_PREFIX = '/rwlock/';

/** What a PostgreSQL read-write lock borrows from its provider. */
export interface PostgresReadWriteClient {
  fence: FenceTable;
  grants: ReadWriteTable;
  /** Lock-delay markers of lost grants (lock-delay.ts). */
  markers: GrantDelayTable;
  /**
   * Waits out the delays a grant holding its lock found (lock-delay.ts settleHolding), with the
   * provider's deadline and poll interval: the token, or null (the lock given back) for a try.
   */
  settle(
    conn: Checkout,
    o: { sql: string; values: unknown[]; unlockSql: string; advisory: string; wait: boolean },
    cancel: AbortSignal,
  ): Promise<bigint | null>;
  /** The provider's request path: in-process line, waiting connections, server queue, health. */
  grant(req: AdvisoryGrant, cancel: AbortSignal): Promise<OwnedLock | null>;
  /** The in-process line of read-write requests, one per name, readers and writers together. */
  line: KeyedFifo;
  /** Spare connections: inspect(), table creation. */
  control: pg.Pool;
  callTimeoutMs: number;
  /** This provider's waiters of a fence name that the server does not see (polling, in line). */
  waitingHere(fenceName: string): number;
  /** The server answered. */
  answered(): void;
}

/**
 * Who holds a read-write lock: one row per grant, written by the grant's own statement on the
 * holder's connection and deleted by its release. A row whose pid no longer holds the name's
 * advisory lock is stale (its connection died): the next grant of the name deletes it, and
 * inspect() never shows it.
 */
export class ReadWriteTable extends FencekitTable {
  constructor(quotedName: string) {
    super(
      quotedName,
      'the read-write grants table',
      `
         name text NOT NULL,
         token bigint NOT NULL,
         mode text NOT NULL,
         owner text,
         since timestamptz NOT NULL DEFAULT now(),
         pid integer NOT NULL,
         PRIMARY KEY (name, token)
       `,
    );
  }
}

const tables = new WeakMap<object, ReadWriteTable>();

/** One grants table per fence table (so per provider): "<fence table>_readwrite", created once. */
export function readWriteTableBeside(fence: { table: string }): ReadWriteTable {
  let table = tables.get(fence);
  if (!table) {
    table = new ReadWriteTable(`${fence.table.slice(0, -1)}_readwrite"`);
    tables.set(fence, table);
  }
  return table;
}

/** The grant row's pid still holds the advisory key $3 (bigint form), in either mode. */
const LIVE = heldBy('g.pid', '$3::bigint');

/**
 * A read-write lock on PostgreSQL: the session advisory lock on key("/rwlock/<name>"), shared for a
 * read (`pg_advisory_lock_shared`), exclusive for the write, held by the grant's own connection, so
 * it dies with its holder as a lock does. The order is PostgreSQL's: its lock manager queues a
 * request behind any waiting request it conflicts with, so a shared request (a try too) waits behind
 * a waiting exclusive one, and a writer is not starved. In this process the requests of one name
 * line up first (readers and writers together, in order), and only the first of them waits inside
 * PostgreSQL, as for locks. The token comes from the fence table's durable counter (row
 * "/rwlock/<name>"), taken in the grant's statement after the lock: whatever was granted before a
 * writer had its token and ended before the writer's statement could take the lock.
 *
 * Lock-delay (see GrantDelayTable): a grant that asks for one writes a marker with its token. A
 * write holding the key, or a read, that finds a marker it must respect (any, for a write; a
 * write's, for a read) takes no token in its grant statement and waits out the delay holding the
 * key, as a lock does: a waiting write so keeps later readers behind it, as PostgreSQL's queue does.
 */
export class PostgresReadWriteAdapter implements ReadWriteAdapter {
  readonly keepsLockDelay = true;
  readonly #name: string;
  readonly #fenceName: string;
  readonly #c: PostgresReadWriteClient;

  constructor(name: string, client: PostgresReadWriteClient) {
    this.#name = name;
    this.#fenceName = `${READ_WRITE_PREFIX}${name}`;
    this.#c = client;
  }

  async request(req: ReadWriteRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const { grants, fence, markers, control, callTimeoutMs } = this.#c;
    await grants.ensure(control, callTimeoutMs, cancel);
    await markers.ensure(control, callTimeoutMs, cancel);
    const shared = req.mode === 'read' ? '_shared' : '';
    const withDelay = req.lockDelayMs > 0;
    // The markers a grant must wait for: a read, a lost write's; a write, every lost grant's.
    const which = req.mode === 'read' ? "d.mode = 'write'" : 'true';
    // $1 name, $2 owner, $3 advisory key, $4 mode, $5 delay. Data-modifying CTEs all run once; the
    // token's INSERT reads l, so it runs after the lock is taken.
    const rest = `stale AS (DELETE FROM ${grants.table} g WHERE g.name = $1 AND NOT ${LIVE}),
      g AS (INSERT INTO ${grants.table} (name, token, mode, owner, since, pid)
        SELECT $1, t.token, $4, $2, now(), pg_backend_pid() FROM t
        RETURNING token)${
          withDelay
            ? `, ${markers.markSql({ name: '$1', from: 't', mode: '$4', held: 'ARRAY[$3::bigint]', delay: '$5' })}`
            : ''
        }`;
    const bump = `INSERT INTO ${fence.table} AS t (name, token, owner, since)`;
    const next =
      'ON CONFLICT (name) DO UPDATE SET token = t.token + 1, owner = EXCLUDED.owner, since = now()';
    const advisory = advisoryKey(this.#fenceName).toString();
    const values = [
      this.#fenceName,
      req.owner ?? null,
      advisory,
      req.mode,
      ...(withDelay ? [req.lockDelayMs] : []),
    ];
    return this.#c.grant(
      {
        key: req.name,
        fenceName: this.#fenceName,
        line: this.#c.line,
        owner: req.owner,
        ownerToken: req.ownerToken,
        wait: req.wait,
        // The token only when the snapshot shows no marker to wait for and its token row is still
        // the latest (a blocking wait makes the snapshot old: see LockDelayTable); otherwise the
        // lock is held without a token and settle (a fresh snapshot) decides.
        grantSql: (blocking) => {
          const lock = blocking
            ? `taken AS (SELECT pg_advisory_lock${shared}($3::bigint)), l AS (SELECT true AS ok FROM taken)`
            : `l AS (SELECT pg_try_advisory_lock${shared}($3::bigint) AS ok)`;
          return `WITH ${lock},
            seen AS (SELECT (SELECT token FROM ${fence.table} WHERE name = $1) AS token,
                            ${markers.markedSql('$1', which)} AS marked),
            t AS (${bump} SELECT $1, 1, $2, now() FROM l, seen WHERE l.ok AND NOT seen.marked
              ${next} WHERE t.token = (SELECT token FROM seen)
              RETURNING token),
            ${rest}
            SELECT l.ok, (SELECT token FROM g) AS token FROM l`;
        },
        moreValues: values.slice(3),
        settle: (conn, signal) =>
          this.#c.settle(
            conn,
            {
              sql: `WITH ${markers.lookSql('$1', which)},
                t AS (${bump} SELECT $1, 1, $2, now() WHERE NOT EXISTS (SELECT 1 FROM delays)
                  ${next} RETURNING token),
                ${rest}
                SELECT (SELECT token FROM g) AS token, (SELECT max(left_ms) FROM delays) AS left_ms`,
              values,
              unlockSql: `SELECT pg_advisory_unlock${shared}($1::bigint)`,
              advisory,
              wait: req.wait,
            },
            signal,
          ),
        // A grant that wrote a marker deletes it with its unlock: a clean release starts no delay.
        releaseOf: (token, key) => ({
          sql: `WITH gone AS (DELETE FROM ${grants.table} WHERE name = $1 AND token = $2)${
            withDelay ? `, ${markers.releaseCte}` : ''
          }
            SELECT pg_advisory_unlock${shared}($3::bigint)`,
          values: [this.#fenceName, token.toString(), key],
        }),
      },
      cancel,
    );
  }

  async inspect(signal: AbortSignal): Promise<AdapterReadWriteInfo> {
    const { grants, markers, control, callTimeoutMs } = this.#c;
    await grants.ensure(control, callTimeoutMs, signal);
    await markers.ensure(control, callTimeoutMs, signal);
    const advisory = advisoryKey(this.#fenceName);
    const { classid, objid } = lockRowIds(advisory);
    const conn = await checkOut(control, callTimeoutMs, signal);
    try {
      const run = <R extends pg.QueryResultRow>(sql: string, values: unknown[]) =>
        conn.query<R>(sql, values, callTimeoutMs, 'inspect');
      const waiting = await run<{ count: string }>(
        `SELECT count(*) AS count FROM pg_locks
          WHERE locktype = 'advisory' AND NOT granted AND classid::bigint = $1 AND objid::bigint = $2
            AND objsubid = 1`,
        [classid, objid],
      );
      const holders = await run<{ token: string; mode: string; owner: string | null; since: Date }>(
        `SELECT g.token, g.mode, g.owner, g.since FROM ${grants.table} g
          WHERE g.name = $1 AND ${heldBy('g.pid', '$2::bigint')} ORDER BY g.token`,
        [this.#fenceName, advisory.toString()],
      );
      const delays = await run<{ mode: string; until: Date }>(markers.inspectSql, [this.#fenceName]);
      conn.giveBack();
      this.#c.answered();
      const holder = (row: (typeof holders.rows)[number]): HolderInfo => ({
        owner: row.owner ?? undefined,
        fencingToken: BigInt(row.token),
        since: row.since,
      });
      const writer = holders.rows.find((row) => row.mode === 'write');
      return {
        writer: writer ? holder(writer) : null,
        readers: holders.rows.filter((row) => row.mode === 'read').map(holder),
        waiters: Number(waiting.rows[0]?.count ?? 0) + this.#c.waitingHere(this.#fenceName),
        delayed: delays.rows.map((row) => ({
          mode: row.mode === 'write' ? ('write' as const) : ('read' as const),
          delayedUntil: new Date(row.until),
        })),
      };
    } catch (error) {
      conn.discard();
      throw error;
    }
  }
}
