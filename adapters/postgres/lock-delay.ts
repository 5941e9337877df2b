import { sleepUnlessWoken } from '../../src/backoff.js';
import type { Checkout } from './checkout.js';
import type { LockFunction } from './fence-table.js';
import { heldBy } from './keyspace.js';
import { FencekitTable } from './table-once.js';

/**
 * Lock-delay on PostgreSQL: a marker row per name, `<fence table>_lockdelay` (name, delay_ms, token,
 * lost_at). A grant that asks for a delay writes it in its grant statement, with its token; a clean
 * release deletes it in its unlock statement. A marker still there when someone else holds the
 * advisory lock was left by a holder lost without a clean release (connection ended, backend
 * terminated). That next holder, holding the advisory lock (so every other request queues behind it),
 * sets lost_at = coalesce(lost_at, now()) by the server's clock, in a statement that began after it
 * was granted the lock, so after the loss; it takes its token only once now() >= lost_at + delay,
 * asking again at most every poll interval, and deletes the marker in that statement.
 *
 * The grant statement reads the marker in the statement that takes the lock, so a grant without a
 * delay on a name without a marker costs no extra round trip. That read sees the statement's
 * snapshot, which a blocking wait makes old: a marker written by a grant made while it waited would
 * be missed. The marker is written in the same statement as that grant's token, so the statement
 * takes its token only while the token row it saw in its snapshot is still the latest one (ON
 * CONFLICT sees the latest); otherwise, or when it saw a marker, it holds the lock without a token
 * and the next statement (fresh snapshot, an UPDATE that waits for a release still committing)
 * decides.
 */
export class LockDelayTable extends FencekitTable {
  constructor(quotedName: string) {
    super(
      quotedName,
      'the lock-delay table',
      `
         name text PRIMARY KEY,
         delay_ms integer NOT NULL,
         token bigint NOT NULL,
         lost_at timestamptz
       `,
    );
  }

  /** Writes our marker ($4 ms) with the token `bump` returned: a CTE for the statements below. */
  #mark(delayParam: string): string {
    return `, mark AS (
      INSERT INTO ${this.table} AS d (name, delay_ms, token, lost_at)
      SELECT $1, ${delayParam}::integer, token, NULL FROM bump
      ON CONFLICT (name) DO UPDATE SET delay_ms = EXCLUDED.delay_ms, token = EXCLUDED.token, lost_at = NULL)`;
  }

  /**
   * Takes the advisory lock $3 with `lockFunction`, then the next token of name $1 (owner $2) only
   * when the snapshot shows no marker and the latest token row (see above); with a delay, writes our
   * marker ($4 ms). One row: ok (the lock was taken) and token (null: taken, but see settle()).
   */
  grantSql(fence: string, lockFunction: LockFunction, withDelay: boolean): string {
    // pg_advisory_lock returns void: taken once it returns.
    const lock = lockFunction.includes('_try_')
      ? `l AS (SELECT ${lockFunction}($3) AS ok)`
      : `taken AS (SELECT ${lockFunction}($3)), l AS (SELECT true AS ok FROM taken)`;
    return `WITH ${lock},
      seen AS (SELECT (SELECT token FROM ${fence} WHERE name = $1) AS token,
                      EXISTS (SELECT 1 FROM ${this.table} WHERE name = $1) AS marked),
      bump AS (
        INSERT INTO ${fence} AS t (name, token, owner, since)
        SELECT $1, 1, $2, now() FROM l, seen WHERE l.ok AND NOT seen.marked
        ON CONFLICT (name) DO UPDATE SET token = t.token + 1, owner = EXCLUDED.owner, since = now()
          WHERE t.token = (SELECT token FROM seen)
        RETURNING token)${withDelay ? this.#mark('$4') : ''}
      SELECT l.ok, (SELECT token FROM bump) AS token FROM l`;
  }

  /**
   * Run while holding the lock: starts a lost holder's delay (lost_at, if not yet set) and answers
   * the ms it has left; or, with none running, deletes a marker whose delay is over and takes the
   * next token of $1 (owner $2), writing our marker ($3 ms) with a delay.
   */
  #settleSql(fence: string, withDelay: boolean): string {
    const until = `d.lost_at + d.delay_ms * interval '1 millisecond'`;
    return `WITH m AS (
        UPDATE ${this.table} d SET lost_at = coalesce(d.lost_at, now())
         WHERE d.name = $1 AND (d.lost_at IS NULL OR ${until} > now())
        RETURNING ceil(extract(epoch FROM ${until} - now()) * 1000)::bigint AS left_ms),
      bump AS (
        INSERT INTO ${fence} AS t (name, token, owner, since)
        SELECT $1, 1, $2, now() WHERE NOT EXISTS (SELECT 1 FROM m)
        ON CONFLICT (name) DO UPDATE SET token = t.token + 1, owner = EXCLUDED.owner, since = now()
        RETURNING token)${
          withDelay
            ? this.#mark('$3')
            : `, clear AS (DELETE FROM ${this.table} d WHERE d.name = $1 AND NOT EXISTS (SELECT 1 FROM m))`
        }
      SELECT (SELECT token FROM bump) AS token, (SELECT left_ms FROM m) AS left_ms`;
  }

  /**
   * After a grant statement took the lock but no token: waits out the delay on `conn`, holding the
   * lock. Resolves with the token, or null when `wait` is false and a delay runs (the lock is given
   * back and the connection with it). Each statement has the call deadline and races `cancel`; a
   * failure or cancel destroys the connection (which frees the lock), as Checkout.query does.
   */
  async settle(conn: Checkout, o: SettleRequest, cancel: AbortSignal): Promise<bigint | null> {
    return settleHolding(
      conn,
      {
        sql: this.#settleSql(o.fence, o.delayMs > 0),
        values: [o.name, o.owner ?? null, ...(o.delayMs > 0 ? [o.delayMs] : [])],
        unlockSql: 'SELECT pg_advisory_unlock($1)',
        advisory: o.advisory,
        wait: o.wait,
        callTimeoutMs: o.callTimeoutMs,
        pollMs: o.pollMs,
      },
      cancel,
    );
  }

  /** A clean release of a grant that wrote a marker: the marker ($1, token $2) and the lock $3 together. */
  get releaseSql(): string {
    return `WITH d AS (DELETE FROM ${this.table} WHERE name = $1 AND token = $2)
      SELECT pg_advisory_unlock($3)`;
  }

  /** Starts the delay of a force-released holder ($1, token $2): run once its backend is gone. */
  get stampSql(): string {
    return `UPDATE ${this.table} SET lost_at = coalesce(lost_at, now()) WHERE name = $1 AND token = $2`;
  }

  /** The marker of $1 for inspect(): its token, delay, and when a started delay ends (server clock). */
  get inspectSql(): string {
    return `SELECT token, delay_ms, lost_at IS NOT NULL AS lost,
        lost_at + delay_ms * interval '1 millisecond' AS until, now() AS now
      FROM ${this.table} WHERE name = $1`;
  }
}

/**
 * The wait of a grant that holds its advisory lock but no token yet (a lock's, or a read-write
 * lock's): runs `sql` until it answers a token (row token) or, with a delay running, the ms it has
 * left (row left_ms), sleeping at most pollMs in between. Resolves with the token, or null when
 * `wait` is false and a delay runs (unlockSql gives the lock back, and the connection goes back to
 * the pool). Each statement has the call deadline and races `cancel`; a failure or cancel destroys
 * the connection (which frees the lock), as Checkout.query does.
 */
export async function settleHolding(
  conn: Checkout,
  o: {
    sql: string;
    values: unknown[];
    unlockSql: string;
    advisory: string;
    wait: boolean;
    callTimeoutMs: number;
    pollMs: number;
  },
  cancel: AbortSignal,
): Promise<bigint | null> {
  for (;;) {
    const { rows } = await conn.query<{ token: string | null; left_ms: string | null }>(
      o.sql,
      o.values,
      o.callTimeoutMs,
      'lock-delay',
      cancel,
    );
    const row = rows[0];
    if (row?.token != null) return BigInt(row.token);
    if (!o.wait) {
      await conn.query(o.unlockSql, [o.advisory], o.callTimeoutMs, 'unlock', cancel);
      conn.giveBack();
      return null;
    }
    // By the server's clock: asked again when it says the delay is over, or sooner.
    const left = Number(row?.left_ms ?? 0);
    const leftMs = Number.isFinite(left) ? Math.max(1, left) : o.pollMs;
    await sleepUnlessWoken(Math.min(leftMs, o.pollMs), cancel).done.catch((error: unknown) => {
      conn.discard(); // cancelled: closing the connection gives the lock back
      throw error;
    });
  }
}

export interface SettleRequest {
  fence: string;
  name: string;
  owner: string | undefined;
  advisory: string;
  delayMs: number;
  wait: boolean;
  callTimeoutMs: number;
  /** Longest sleep between two looks at the delay (a dead connection is noticed by the next). */
  pollMs: number;
}

const tables = new WeakMap<object, LockDelayTable>();

/** One marker table per fence table (so per provider): "<fence table>_lockdelay", created once. */
export function lockDelayTableBeside(fence: { table: string }): LockDelayTable {
  let table = tables.get(fence);
  if (!table) {
    table = new LockDelayTable(`${fence.table.slice(0, -1)}_lockdelay"`);
    tables.set(fence, table);
  }
  return table;
}

/** The end of marker `d`'s delay once started (null before), by the server's clock. */
const until = (d: string) => `${d}.lost_at + ${d}.delay_ms * interval '1 millisecond'`;

/**
 * Lock-delay of semaphore and read-write grants on PostgreSQL: a marker row per grant that asked
 * for a delay, `<fence table>_grantdelay` (name, token, mode, held, pid, delay_ms, lost_at), name
 * being the recipe's fence name ("/semaphore/n", "/rwlock/n"). The grant's statement writes it with
 * its token; a clean release deletes it in the statement that unlocks. While `pid` holds the
 * advisory key held[1] (a slot; the read-write key) the grant is live; once not, it was lost
 * without a clean release, and the first request of the name to look (holding the lock or queue
 * lock that lets it grant) stamps lost_at = clock_timestamp(), read after it saw the grant gone, so
 * after the loss. Until lost_at + delay_ms (server clock) the marker's permits (held) are kept out
 * of a semaphore, a write's marker keeps out readers and writers, a read's writers. inspect()
 * shows a lost marker not yet stamped as delayed from the server's now().
 *
 * Cleaning: the look that finds a delay over deletes its marker; and every grant that writes a
 * marker also stamps the lost markers of other names and deletes their finished ones (SKIP LOCKED:
 * it never waits for them). A marker left behind so only ever turns into a delay that ends.
 */
export class GrantDelayTable extends FencekitTable {
  constructor(quotedName: string) {
    super(
      quotedName,
      'the grant lock-delay table',
      `
         name text NOT NULL,
         token bigint NOT NULL,
         mode text NOT NULL,
         held bigint[] NOT NULL,
         pid integer NOT NULL,
         delay_ms integer NOT NULL,
         lost_at timestamptz,
         PRIMARY KEY (name, token)
       `,
    );
  }

  /** Whether marker `d`'s grant is live: its pid (not ours: a reused pid) holds its first key. */
  live(d: string): string {
    return `(${d}.pid <> pg_backend_pid() AND ${heldBy(`${d}.pid`, `${d}.held[1]`)})`;
  }

  /**
   * Whether marker `d`'s grant is lost: stamped already (a lost grant never comes back, and its pid
   * may since be another session's that holds the same shared key), or not live now.
   */
  lost(d: string): string {
    return `(${d}.lost_at IS NOT NULL OR NOT ${this.live(d)})`;
  }

  /**
   * CTEs (to follow a WITH): `delays` stamps the lost markers of name `name` matching `which`
   * (SQL on d) whose delay has not ended, answering (held, mode, left_ms) for each; `ended` deletes
   * those whose delay has. Run by a request holding what lets it grant the name: a marker whose
   * release is still committing is waited for (UPDATE) and then skipped.
   */
  lookSql(name: string, which = 'true'): string {
    return `delays AS (
        UPDATE ${this.table} d SET lost_at = coalesce(d.lost_at, clock_timestamp())
         WHERE d.name = ${name} AND (${which}) AND ${this.lost('d')}
           AND (d.lost_at IS NULL OR ${until('d')} > now())
        RETURNING d.held, d.mode,
          ceil(extract(epoch FROM ${until('d')} - now()) * 1000)::bigint AS left_ms),
      ended AS (
        DELETE FROM ${this.table} d
         WHERE d.name = ${name} AND (${which}) AND d.lost_at IS NOT NULL AND ${until('d')} <= now())`;
  }

  /** Whether the snapshot shows a marker of `name` matching `which` whose delay may not be over. */
  markedSql(name: string, which = 'true'): string {
    return `(EXISTS (SELECT 1 FROM ${this.table} d WHERE d.name = ${name} AND (${which})
      AND (d.lost_at IS NULL OR ${until('d')} > now())))`;
  }

  /**
   * CTEs (to follow a comma) that write our marker from `from` (a CTE with a token column) and
   * clean other names' markers, never waiting for a row another transaction holds.
   */
  markSql(o: { name: string; from: string; mode: string; held: string; delay: string }): string {
    const others = (cond: string) =>
      `(d.name, d.token) IN (SELECT x.name, x.token FROM ${this.table} x
         WHERE x.name <> ${o.name} AND ${cond} FOR UPDATE SKIP LOCKED)`;
    return `mark AS (
        INSERT INTO ${this.table} (name, token, mode, held, pid, delay_ms)
        SELECT ${o.name}, f.token, ${o.mode}, ${o.held}, pg_backend_pid(), ${o.delay}::integer FROM ${o.from} f),
      swept AS (DELETE FROM ${this.table} d
         WHERE ${others(`x.lost_at IS NOT NULL AND ${until('x')} <= now()`)}),
      stamped AS (UPDATE ${this.table} d SET lost_at = clock_timestamp()
         WHERE ${others(`x.lost_at IS NULL AND NOT ${this.live('x')}`)})`;
  }

  /** A CTE (to follow a comma) deleting the marker of name $1, token $2: a clean release. */
  get releaseCte(): string {
    return `unmarked AS (DELETE FROM ${this.table} WHERE name = $1 AND token = $2)`;
  }

  /** The running delays of name $1 for inspect(): mode, permits and end (server clock). */
  get inspectSql(): string {
    return `SELECT d.mode, cardinality(d.held) AS permits,
        coalesce(${until('d')}, now() + d.delay_ms * interval '1 millisecond') AS until
      FROM ${this.table} d
      WHERE d.name = $1 AND ${this.lost('d')} AND (d.lost_at IS NULL OR ${until('d')} > now())
      ORDER BY until`;
  }
}

const grantTables = new WeakMap<object, GrantDelayTable>();

/** One grant marker table per fence table (so per provider): "<fence table>_grantdelay". */
export function grantDelayTableBeside(fence: { table: string }): GrantDelayTable {
  let table = grantTables.get(fence);
  if (!table) {
    table = new GrantDelayTable(`${fence.table.slice(0, -1)}_grantdelay"`);
    grantTables.set(fence, table);
  }
  return table;
}
