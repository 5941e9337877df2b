import type pg from 'pg';
import { BackendUnavailableError } from '../../src/errors.js';
import { OwnedLock } from '../../src/ownership.js';
import {
  GenericSemaphore,
  type PermitRequest,
  type SemaphoreAdapter,
  type SemaphoreContext,
} from '../../src/semaphore/core.js';
import { withDeadline } from '../../src/semaphore/deadline.js';
import { SemaphoreLimitMismatchError } from '../../src/semaphore/errors.js';
import type { Semaphore, SemaphoreInfo, SemaphoreOptions } from '../../src/semaphore/types.js';
import type { FenceTable } from './fence-table.js';
import { advisoryKey } from './keyspace.js';
import { LIVE, type SemaphoreTable } from './semaphore-table.js';

/** What a PostgreSQL semaphore borrows from its provider. */
export interface PostgresSemaphoreClient {
  fence: FenceTable;
  grants: SemaphoreTable;
  /** A pooled connection for a waiter or holder (rejects with cancel.reason if cancelled first). */
  connect(cancel: AbortSignal): Promise<pg.PoolClient>;
  /** A spare connection for inspect() and table creation. */
  control(): Promise<pg.PoolClient>;
  /** Runs a blocking query; if cancel aborts first, ends that backend so nothing stays queued. */
  untilCancelled<T>(client: pg.PoolClient, cancel: AbortSignal, query: Promise<T>): Promise<T>;
  /** Connections holding grants (the provider's abandon() drops them, as a crash would). */
  holding: Set<pg.PoolClient>;
  healthIntervalMs: number;
  /** How often the head of the queue looks for slots freed without a NOTIFY (a dead holder). */
  pollMs: number;
}

/**
 * A semaphore on PostgreSQL, as slots: permit i of name n is the session advisory lock on
 * key("/semaphore/n/slot/i"), held by the holder's own connection, so a dead holder's slots come
 * back the moment PostgreSQL sees its connection close (as its locks do).
 *
 * FIFO without a herd: a requester first takes the name's queue lock (key("/semaphore/n/queue"),
 * blocking): PostgreSQL queues those waiters in order and lets one through per unlock. Only that
 * head of the queue looks at the slots: it takes `permits` free ones (all or none), or LISTENs on
 * the name's channel, which each release NOTIFYs, and looks again (and every pollMs, for holders
 * that died without a word); once granted it leaves the queue lock to the next. The fencing token
 * comes from the fence table's durable counter (row "/semaphore/n", a name no lock can have); the
 * limit is kept in the grants rows, and checked against live holders under the queue lock.
 */
export function postgresSemaphore(
  name: string,
  options: SemaphoreOptions,
  ctx: SemaphoreContext,
  client: PostgresSemaphoreClient,
): Semaphore {
  return new GenericSemaphore(name, options, ctx, new PostgresSemaphoreAdapter(name, ctx, client));
}

interface Keys {
  queue: string;
  slots: string[];
  channel: string;
  fenceName: string;
}

class PostgresSemaphoreAdapter implements SemaphoreAdapter {
  readonly #name: string;
  readonly #ctx: SemaphoreContext;
  readonly #client: PostgresSemaphoreClient;
  #keys: Keys | undefined;

  constructor(name: string, ctx: SemaphoreContext, client: PostgresSemaphoreClient) {
    this.#name = name;
    this.#ctx = ctx;
    this.#client = client;
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

  /** One query with the provider's deadline; a connection whose query ran out is not reused. */
  #query<R extends pg.QueryResultRow>(
    client: pg.PoolClient,
    cancel: AbortSignal,
    what: string,
    text: string,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    return withDeadline(
      () => client.query<R>(text, values),
      this.#ctx.callTimeoutMs,
      cancel,
      `postgres: ${what}`,
    );
  }

  async #ensureTables(cancel: AbortSignal): Promise<void> {
    await withDeadline(
      async () => {
        const control = await this.#client.control();
        try {
          await this.#client.fence.ensure(control);
          await this.#client.grants.ensure(control);
        } finally {
          control.release();
        }
      },
      this.#ctx.callTimeoutMs,
      cancel,
      'postgres: create tables',
    );
  }

  async inspect(signal: AbortSignal): Promise<Omit<SemaphoreInfo, 'name' | 'limit'>> {
    await this.#ensureTables(signal);
    const queue = advisoryKey(`/semaphore/${this.#name}/queue`).toString();
    const control = await this.#client.control();
    try {
      const { rows } = await this.#query<{
        token: string;
        slots: string[];
        owner: string | null;
        since: Date;
        waiting: string;
      }>(
        control,
        signal,
        'inspect',
        `SELECT g.token, g.slots, g.owner, g.since, NULL AS waiting FROM ${this.#client.grants.table} g
          WHERE g.name = $1 AND ${LIVE}
         UNION ALL
         SELECT NULL, NULL, NULL, NULL, count(*) FROM pg_locks l
          WHERE l.locktype = 'advisory' AND l.objsubid = 1
            AND ((l.classid::bigint << 32) | l.objid::bigint) = $2::bigint`,
        [this.#name, queue],
      );
      const holders = rows
        .filter((r) => r.token !== null)
        .map((r) => ({
          owner: r.owner ?? undefined,
          fencingToken: BigInt(r.token),
          since: r.since,
          permits: r.slots.length,
        }))
        .sort((a, b) => (a.fencingToken < b.fencingToken ? -1 : 1));
      // Everyone at the queue lock, granted (the head, looking at slots) or not, is waiting.
      const waiting = Number(rows.find((r) => r.token === null)?.waiting ?? 0);
      return { holders, waiters: waiting };
    } finally {
      control.release();
    }
  }

  async request(req: PermitRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    await this.#ensureTables(cancel);
    const keys = this.#keysFor(req.limit);
    const client = await withDeadline(
      (signal) => this.#client.connect(signal),
      this.#ctx.callTimeoutMs,
      cancel,
      'postgres: connect',
    );
    let kept = false;
    try {
      const entered = req.wait
        ? await this.#client.untilCancelled(
            client,
            cancel,
            client.query('SELECT pg_advisory_lock($1) AS ok', [keys.queue]),
          )
        : await this.#query<{ ok: boolean }>(
            client,
            cancel,
            'try queue',
            'SELECT pg_try_advisory_lock($1) AS ok',
            [keys.queue],
          );
      if (!req.wait && !entered.rows[0]?.ok) return null;
      const token = await this.#takeSlots(client, req, keys, cancel);
      if (token === null) return null;
      kept = true;
      return this.#hold(client, req, keys, token.token, token.slots);
    } catch (error) {
      if (cancel.aborted) throw cancel.reason;
      if (error instanceof SemaphoreLimitMismatchError || error instanceof BackendUnavailableError)
        throw error;
      throw new BackendUnavailableError(`postgres: semaphore acquire failed: ${(error as Error).message}`, {
        cause: error,
      });
    } finally {
      // Closing the connection ends the queue lock and any slot taken before a failure: nothing
      // is left behind however the request ended. A granted request keeps it (it holds the slots).
      if (!kept) client.release(true);
    }
  }

  /** As the head of the queue: the token once all permits are ours, or null (not waiting). */
  async #takeSlots(
    client: pg.PoolClient,
    req: PermitRequest,
    keys: Keys,
    cancel: AbortSignal,
  ): Promise<{ token: bigint; slots: string[] } | null> {
    const table = this.#client.grants.table;
    let notified: () => void = () => undefined;
    let listening = false;
    const onNotification = () => notified();
    client.on('notification', onNotification);
    try {
      for (;;) {
        // Stale rows of dead holders go; a live holder with another limit is a mismatch.
        const other = await this.#query<{ limit: number }>(
          client,
          cancel,
          'check limit',
          `WITH stale AS (DELETE FROM ${table} g WHERE g.name = $1 AND NOT ${LIVE})
           SELECT g."limit" FROM ${table} g WHERE g.name = $1 AND g."limit" <> $2 AND ${LIVE} LIMIT 1`,
          [req.name, req.limit],
        );
        const stored = other.rows[0]?.limit;
        if (stored !== undefined) throw new SemaphoreLimitMismatchError(req.name, req.limit, stored);
        // The filter calls pg_try_advisory_lock row by row and LIMIT stops it at `permits` locks.
        const got = await this.#query<{ k: string }>(
          client,
          cancel,
          'take slots',
          'SELECT k::text FROM unnest($1::bigint[]) k WHERE pg_try_advisory_lock(k) LIMIT $2',
          [keys.slots, req.permits],
        );
        const slots = got.rows.map((r) => r.k);
        if (slots.length === req.permits) {
          const granted = await this.#query<{ token: string }>(
            client,
            cancel,
            'grant',
            `WITH f AS (
               INSERT INTO ${this.#client.fence.table} AS t (name, token, owner, since)
               VALUES ($1, 1, $3, now())
               ON CONFLICT (name) DO UPDATE SET token = t.token + 1, owner = EXCLUDED.owner, since = now()
               RETURNING token)
             INSERT INTO ${table} (name, token, slots, "limit", owner, pid)
             SELECT $2, f.token, $4::bigint[], $5, $3, pg_backend_pid() FROM f
             RETURNING token::text`,
            [keys.fenceName, req.name, req.owner ?? null, slots, req.limit],
          );
          await this.#query(client, cancel, 'leave queue', 'SELECT pg_advisory_unlock($1)', [keys.queue]);
          if (listening) await this.#query(client, cancel, 'unlisten', `UNLISTEN ${keys.channel}`, []);
          return { token: BigInt(granted.rows[0]?.token ?? '0'), slots };
        }
        // All or none: give back what we took.
        if (slots.length > 0) {
          await this.#query(
            client,
            cancel,
            'give back',
            'SELECT pg_advisory_unlock(k) FROM unnest($1::bigint[]) k',
            [slots],
          );
        }
        if (!req.wait) {
          await this.#query(client, cancel, 'leave queue', 'SELECT pg_advisory_unlock($1)', [keys.queue]);
          return null;
        }
        if (!listening) {
          await this.#query(client, cancel, 'listen', `LISTEN ${keys.channel}`, []);
          listening = true;
          continue; // a release between our look and LISTEN sent no notice we could hear: look again
        }
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
          }, this.#client.pollMs);
          notified = () => {
            done();
            resolve();
          };
          if (cancel.aborted) onAbort();
          else cancel.addEventListener('abort', onAbort, { once: true });
        });
      }
    } finally {
      client.off('notification', onNotification);
    }
  }

  #hold(client: pg.PoolClient, req: PermitRequest, keys: Keys, token: bigint, slots: string[]): OwnedLock {
    const holding = this.#client.holding;
    let healthTimer: NodeJS.Timeout | undefined;
    let returned = false;
    const giveBack = (destroy: boolean) => {
      if (returned) return;
      returned = true;
      holding.delete(client);
      client.release(destroy);
    };
    const lock = new OwnedLock({
      key: req.name,
      fencingToken: token,
      ownerToken: req.ownerToken,
      releaseOnBackend: async () => {
        if (returned) return; // the connection is gone, and the slots with it
        try {
          await withDeadline(
            () =>
              client.query(
                // One statement: row gone, slots free, then the head of the queue told (at commit).
                `WITH d AS (DELETE FROM ${this.#client.grants.table} WHERE name = $1 AND token = $2),
                      u AS (SELECT pg_advisory_unlock(k) FROM unnest($3::bigint[]) k)
                 SELECT pg_notify($4, '') FROM (SELECT count(*) FROM u) x`,
                [req.name, token.toString(), slots, keys.channel],
              ),
            this.#ctx.callTimeoutMs,
            new AbortController().signal,
            'postgres: release',
          );
          giveBack(false);
        } catch {
          giveBack(true); // closing the connection frees the slots too
        }
      },
    });
    const lost = () => {
      if (!lock.held) return;
      lock.lose('connection-lost');
      giveBack(true);
    };
    client.on('error', lost);
    client.on('end', lost);
    holding.add(client);
    const check = async () => {
      try {
        await withDeadline(
          () => client.query('SELECT 1'),
          this.#ctx.callTimeoutMs,
          new AbortController().signal,
          'health',
        );
        if (lock.held) healthTimer = setTimeout(check, this.#client.healthIntervalMs);
      } catch {
        lost();
      }
    };
    healthTimer = setTimeout(check, this.#client.healthIntervalMs);
    lock.onEnd(() => {
      clearTimeout(healthTimer);
      client.off('error', lost);
      client.off('end', lost);
    });
    return lock;
  }
}
