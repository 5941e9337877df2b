import type pg from 'pg';
import { AuthenticationError, BackendUnavailableError } from '../../src/errors.js';
import type { KeyedFifo } from '../../src/keyed-fifo.js';
import type { OwnedLock } from '../../src/ownership.js';
import type {
  AdapterSemaphoreInfo,
  PermitRequest,
  SemaphoreAdapter,
  SemaphoreContext,
} from '../../src/semaphore/core.js';
import { SemaphoreLimitMismatchError } from '../../src/semaphore/errors.js';
import { type Checkout, checkOut } from './checkout.js';
import { connectionLock, type Holding } from './connection-lock.js';
import { within } from './deadline.js';
import type { FenceTable } from './fence-table.js';
import { advisoryKey } from './keyspace.js';
import type { GrantDelayTable } from './lock-delay.js';
import { LIVE, type SemaphoreTable } from './semaphore-table.js';
import type { Slots } from './slots.js';
import type { WaitingConnections } from './waiting.js';

/** What a PostgreSQL semaphore borrows from its provider. */
export interface PostgresSemaphoreClient {
  fence: FenceTable;
  grants: SemaphoreTable;
  /** Lock-delay markers of lost grants (lock-delay.ts). */
  markers: GrantDelayTable;
  /** Holders' and waiters' connections, within the provider's connection budget (slots). */
  pool: pg.Pool;
  slots: Slots;
  /** Waiting requests per semaphore name: only the first one in this line queues on the server. */
  waitingLine: KeyedFifo;
  /** The connections that may wait in the queue at once; the first waiters beyond them poll. */
  waiting: WaitingConnections;
  /** Spare connections: inspect(), table creation, ending waits. */
  control: pg.Pool;
  /** Connections holding grants, and their health checks. */
  holding: Holding;
  /** How often the head of the queue looks for slots freed without a NOTIFY (a dead holder). */
  pollMs: number;
  /** The server answered (the provider's reachability). */
  answered(): void;
  /** Whether the last call to the server was answered. */
  reachable(): boolean;
}

interface Keys {
  queue: string;
  slots: string[];
  channel: string;
  fenceName: string;
}

/**
 * A semaphore on PostgreSQL, as slots: permit i of name n is the session advisory lock on
 * key("/semaphore/n/slot/i"), held by the holder's own connection, so a dead holder's slots come
 * back the moment PostgreSQL sees its connection close (as its locks do).
 *
 * FIFO without a herd: the waiting requests of one name in this provider line up in process, and
 * the first of them takes the name's queue lock (key("/semaphore/n/queue"), blocking) on a
 * connection of its own: PostgreSQL queues those first waiters of every process in order and lets
 * one through per unlock. A backlog so costs one waiting connection per name and process. Only that
 * head of the queue looks at the slots: it takes `permits` free ones (all or none), or LISTENs on
 * the name's channel, which each release NOTIFYs, and looks again (and every pollMs, for holders
 * that died without a word); once granted it leaves the queue lock to the next. The fencing token
 * comes from the fence table's durable counter (row "/semaphore/n", a name no lock can have); the
 * limit is kept in the grants rows, and checked against live holders under the queue lock.
 */
export class PostgresSemaphoreAdapter implements SemaphoreAdapter {
  /** A lost grant's slots are kept out by its marker (see GrantDelayTable, #takeSlots). */
  readonly keepsLockDelay = true;
  readonly #name: string;
  readonly #ctx: SemaphoreContext;
  readonly #c: PostgresSemaphoreClient;
  #keys: Keys | undefined;

  constructor(name: string, ctx: SemaphoreContext, client: PostgresSemaphoreClient) {
    this.#name = name;
    this.#ctx = ctx;
    this.#c = client;
  }

  reachable(): boolean {
    return this.#c.reachable();
  }

  #keysFor(limit: number): Keys {
    this.#keys ??= {
      queue: advisoryKey(`/semaphore/${this.#name}/queue`).toString(),
      slots: Array.from({ length: limit }, (_, i) =>
        advisoryKey(`/semaphore/${this.#name}/slot/${i}`).toString(),
      ),
      channel: `fk_sem_${BigInt.asUintN(64, advisoryKey(`/semaphore/${this.#name}`)).toString(16)}`,
      fenceName: `/semaphore/${this.#name}`,
    };
    return this.#keys;
  }

  /** Both tables exist; when that took a call, the server answered it. */
  async #ensureTables(cancel: AbortSignal): Promise<void> {
    const { control } = this.#c;
    if (this.#c.fence.created && this.#c.grants.created && this.#c.markers.created) return;
    await this.#c.fence.ensure(control, this.#ctx.callTimeoutMs, cancel);
    await this.#c.grants.ensure(control, this.#ctx.callTimeoutMs, cancel);
    await this.#c.markers.ensure(control, this.#ctx.callTimeoutMs, cancel);
    this.#c.answered();
  }

  async inspect(signal: AbortSignal): Promise<AdapterSemaphoreInfo> {
    await this.#ensureTables(signal);
    const queue = advisoryKey(`/semaphore/${this.#name}/queue`).toString();
    const conn = await checkOut(this.#c.control, this.#ctx.callTimeoutMs, signal);
    const { rows } = await conn.query<{
      token: string | null;
      slots: string[];
      owner: string | null;
      since: Date;
      waiting: string | null;
    }>(
      `SELECT g.token, g.slots, g.owner, g.since, NULL AS waiting FROM ${this.#c.grants.table} g
        WHERE g.name = $1 AND ${LIVE}
       UNION ALL
       SELECT NULL, NULL, NULL, NULL, count(*) FROM pg_locks l
        WHERE l.locktype = 'advisory' AND l.objsubid = 1
          AND ((l.classid::bigint << 32) | l.objid::bigint) = $2::bigint`,
      [this.#name, queue],
      this.#ctx.callTimeoutMs,
      'semaphore inspect',
      signal,
    );
    const delays = await conn.query<{ permits: number; until: Date }>(
      this.#c.markers.inspectSql,
      [`/semaphore/${this.#name}`],
      this.#ctx.callTimeoutMs,
      'semaphore inspect',
      signal,
    );
    conn.giveBack();
    this.#c.answered();
    const delayed = delays.rows.map((r) => ({ permits: Number(r.permits), delayedUntil: new Date(r.until) }));
    const holders = rows
      .filter((r): r is typeof r & { token: string } => r.token !== null)
      .map((r) => ({
        owner: r.owner ?? undefined,
        fencingToken: BigInt(r.token),
        since: r.since,
        permits: r.slots.length,
      }))
      .sort((a, b) => (a.fencingToken < b.fencingToken ? -1 : 1));
    // Everyone at the queue lock, granted (the head, looking at slots) or not, is waiting, and so
    // are this provider's polling first waiter and the requests lined up behind it.
    const waiting =
      Number(rows.find((r) => r.token === null)?.waiting ?? 0) +
      this.#c.waiting.polling(`/semaphore/${this.#name}`) +
      this.#c.waitingLine.behind(this.#name);
    return { holders, waiters: waiting, delayed };
  }

  /**
   * A waiting request first waits its turn among this provider's waiters of the same name, once
   * the server has answered (so that a wait running out in that line is a timeout, not an outage).
   */
  async request(req: PermitRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    if (!req.wait) return this.#requestOnServer(req, cancel, 'try');
    await this.#ensureTables(cancel);
    const leaveLine = await this.#c.waitingLine.enter(this.#name, cancel);
    try {
      return await this.#c.waiting.waitFor(
        this.#keysFor(req.limit).fenceName,
        {
          block: () => this.#requestOnServer(req, cancel, 'queue'),
          tryOnce: () => this.#requestOnServer(req, cancel, 'poll'),
        },
        cancel,
      );
    } finally {
      leaveLine(); // granted or not, the next waiter of this name queues on the server now
    }
  }

  /**
   * One request on the server. 'queue' waits in the name's queue and, at its head, for the slots;
   * 'try' and 'poll' take the queue lock and the slots only if they are free now ('poll' is a
   * waiting request without a waiting connection: it waits for a free connection, a try does not).
   */
  async #requestOnServer(
    req: PermitRequest,
    cancel: AbortSignal,
    mode: 'try' | 'poll' | 'queue',
  ): Promise<OwnedLock | null> {
    await this.#ensureTables(cancel);
    const keys = this.#keysFor(req.limit);
    const { callTimeoutMs } = this.#ctx;
    // Waiting for a free connection is part of a waiting acquire; a try gets callTimeoutMs.
    const free = await this.#c.slots.take(mode === 'try' ? callTimeoutMs : Number.POSITIVE_INFINITY, cancel);
    const conn = await checkOut(this.#c.pool, callTimeoutMs, cancel, free);
    this.#c.answered();
    // What the session holds when the request ends: the grant's slots, nothing, or unknown.
    let left: 'grant' | 'nothing' | 'unknown' = 'unknown';
    try {
      if (mode === 'queue') {
        await this.#enterQueue(conn, keys, cancel);
      } else {
        const entered = await conn.query<{ ok: boolean }>(
          'SELECT pg_try_advisory_lock($1) AS ok',
          [keys.queue],
          callTimeoutMs,
          'semaphore queue',
          cancel,
        );
        if (!entered.rows[0]?.ok) {
          left = 'nothing'; // the try took no lock
          return null;
        }
      }
      const grant = await this.#takeSlots(conn, req, keys, { untilFree: mode === 'queue' }, cancel);
      if (grant === null) {
        left = 'nothing'; // #takeSlots let go of every advisory lock of the session
        return null;
      }
      // A grant that raced in with the cancel: closing the connection (below) gives it back.
      if (cancel.aborted) throw cancel.reason;
      left = 'grant';
      return this.#hold(conn, req, keys, grant);
    } catch (error) {
      if (cancel.aborted) throw cancel.reason;
      if (
        error instanceof SemaphoreLimitMismatchError ||
        error instanceof BackendUnavailableError ||
        error instanceof AuthenticationError
      )
        throw error;
      throw new BackendUnavailableError(`postgres: semaphore acquire failed: ${(error as Error).message}`, {
        cause: error,
      });
    } finally {
      // A granted request keeps its connection (it holds the slots). One that found nothing free
      // holds no lock any more: its connection goes back to the pool, so that a polling waiter does
      // not open a new backend at every look. After a failure the session's state is unknown:
      // closing the connection ends the queue lock and any slot taken, so nothing is left behind.
      if (left === 'nothing') conn.giveBack();
      else if (left === 'unknown') conn.discard();
    }
  }

  /**
   * The blocking queue-lock statement; on cancel its backend is terminated (the server would also
   * drop it once it sees the closed connection, within client_connection_check_interval).
   */
  async #enterQueue(conn: Checkout, keys: Keys, cancel: AbortSignal): Promise<void> {
    const entering = conn.client.query('SELECT pg_advisory_lock($1)', [keys.queue]);
    try {
      await within(entering, Number.POSITIVE_INFINITY, 'semaphore queue', cancel);
    } catch (error) {
      if (cancel.aborted) void this.#terminate(conn.pid);
      throw error;
    }
  }

  async #terminate(pid: number): Promise<void> {
    try {
      const control = await checkOut(this.#c.control, this.#ctx.callTimeoutMs);
      await control.query('SELECT pg_terminate_backend($1)', [pid], this.#ctx.callTimeoutMs, 'ending a wait');
      control.giveBack();
    } catch {
      // The closed connection ends the wait on the server too.
    }
  }

  /**
   * As the head of the queue: the token once all permits are ours, or null when they are not free
   * and it was not asked to wait untilFree.
   */
  async #takeSlots(
    conn: Checkout,
    req: PermitRequest,
    keys: Keys,
    { untilFree }: { untilFree: boolean },
    cancel: AbortSignal,
  ): Promise<{ token: bigint; slots: string[]; withDelay: boolean } | null> {
    const table = this.#c.grants.table;
    const markers = this.#c.markers;
    const run = <R extends pg.QueryResultRow>(what: string, sql: string, values: unknown[]) =>
      conn.query<R>(sql, values, this.#ctx.callTimeoutMs, `semaphore ${what}`, cancel);
    let notified: () => void = () => undefined;
    let listening = false;
    const onNotification = () => notified();
    conn.client.on('notification', onNotification);
    try {
      for (;;) {
        // Stale rows of dead holders go; a live holder with another limit is a mismatch. Lost
        // grants' markers start their delay (lock-delay.ts): their slots are not to be taken.
        const other = await run<{ limit: number | null; delayed: string[] | null; left_ms: string | null }>(
          'limit check',
          `WITH stale AS (DELETE FROM ${table} g WHERE g.name = $1 AND NOT ${LIVE}),
             ${markers.lookSql('$3')}
           SELECT (SELECT g."limit" FROM ${table} g
                    WHERE g.name = $1 AND g."limit" <> $2 AND ${LIVE} LIMIT 1) AS "limit",
                  (SELECT array_agg(k)::text[] FROM delays, unnest(delays.held) k) AS delayed,
                  (SELECT min(left_ms) FROM delays) AS left_ms`,
          [req.name, req.limit, keys.fenceName],
        );
        const stored = other.rows[0]?.limit;
        if (stored != null) throw new SemaphoreLimitMismatchError(req.name, req.limit, stored);
        const delayed = other.rows[0]?.delayed ?? [];
        const leftMs = Number(other.rows[0]?.left_ms ?? Number.NaN);
        // The filter calls pg_try_advisory_lock row by row and LIMIT stops it at `permits` locks.
        const got = await run<{ k: string }>(
          'slots',
          `SELECT k::text FROM unnest($1::bigint[]) k
            WHERE k <> ALL ($3::bigint[]) AND pg_try_advisory_lock(k) LIMIT $2`,
          [keys.slots, req.permits, delayed],
        );
        const slots = got.rows.map((r) => r.k);
        if (slots.length === req.permits) {
          // No token while a marker not seen above claims a slot we took: its grant was lost since
          // (we hold its slot), and the next look starts its delay.
          const withDelay = req.lockDelayMs > 0;
          const granted = await run<{ token: string }>(
            'grant',
            `WITH f AS (
               INSERT INTO ${this.#c.fence.table} AS t (name, token, owner, since)
               SELECT $1, 1, $3, now()
                WHERE NOT ${markers.markedSql('$1', 'd.held && $4::bigint[]')}
               ON CONFLICT (name) DO UPDATE SET token = t.token + 1, owner = EXCLUDED.owner, since = now()
               RETURNING token)${
                 withDelay
                   ? `, ${markers.markSql({ name: '$1', from: 'f', mode: "'permits'", held: '$4::bigint[]', delay: '$6' })}`
                   : ''
               }
             INSERT INTO ${table} (name, token, slots, "limit", owner, pid)
             SELECT $2, f.token, $4::bigint[], $5, $3, pg_backend_pid() FROM f
             RETURNING token::text`,
            [
              keys.fenceName,
              req.name,
              req.owner ?? null,
              slots,
              req.limit,
              ...(withDelay ? [req.lockDelayMs] : []),
            ],
          );
          const token = granted.rows[0]?.token;
          if (token !== undefined) {
            await run('leave queue', 'SELECT pg_advisory_unlock($1)', [keys.queue]);
            if (listening) await run('unlisten', `UNLISTEN ${keys.channel}`, []);
            return { token: BigInt(token), slots, withDelay };
          }
          await run('give back', 'SELECT pg_advisory_unlock(k) FROM unnest($1::bigint[]) k', [slots]);
          continue; // look again at once
        }
        if (!untilFree) {
          // All or none: the slots we took and the queue lock go, and with them every advisory
          // lock of the session, so that its connection can go back to the pool holding none.
          await run('leave queue', 'SELECT pg_advisory_unlock_all()', []);
          return null;
        }
        // All or none: give back what we took.
        if (slots.length > 0) {
          await run('give back', 'SELECT pg_advisory_unlock(k) FROM unnest($1::bigint[]) k', [slots]);
        }
        if (!listening) {
          await run('listen', `LISTEN ${keys.channel}`, []);
          listening = true;
          continue; // a release between our look and LISTEN sent no notice we could hear: look again
        }
        // A delay ends without a notice: look again when the server says it does, or sooner.
        const sleepMs = Number.isFinite(leftMs)
          ? Math.min(this.#c.pollMs, Math.max(1, leftMs))
          : this.#c.pollMs;
        await new Promise<void>((resolve, reject) => {
          const done = () => {
            clearTimeout(timer);
            cancel.removeEventListener('abort', onAbort);
            notified = () => undefined;
          };
          const onAbort = () => {
            done();
            reject(cancel.reason);
          };
          const timer = setTimeout(() => {
            done();
            resolve();
          }, sleepMs);
          notified = () => {
            done();
            resolve();
          };
          if (cancel.aborted) onAbort();
          else cancel.addEventListener('abort', onAbort, { once: true });
        });
      }
    } finally {
      conn.client.off('notification', onNotification);
    }
  }

  #hold(
    conn: Checkout,
    req: PermitRequest,
    keys: Keys,
    { token, slots, withDelay }: { token: bigint; slots: string[]; withDelay: boolean },
  ): OwnedLock {
    // One statement: row (and marker: a clean release starts no delay) gone, slots free, then the
    // head of the queue told (at commit).
    const sql = `WITH d AS (DELETE FROM ${this.#c.grants.table} WHERE name = $1 AND token = $2),
                  u AS (SELECT pg_advisory_unlock(k) FROM unnest($3::bigint[]) k)${
                    withDelay
                      ? `, m AS (DELETE FROM ${this.#c.markers.table} WHERE name = $5 AND token = $2)`
                      : ''
                  }
             SELECT pg_notify($4, '') FROM (SELECT count(*) FROM u) x`;
    const values = [req.name, token.toString(), slots, keys.channel, ...(withDelay ? [keys.fenceName] : [])];
    return connectionLock(conn, this.#c.holding, {
      lock: { key: req.name, fencingToken: token, ownerToken: req.ownerToken },
      release: { sql, values, what: 'semaphore release', timeoutMs: this.#ctx.callTimeoutMs },
      freed: () => this.#c.waiting.freed(keys.fenceName),
    });
  }
}
