import { setTimeout as sleep } from 'node:timers/promises';
// The public types name pg's types one by one: a declaration file's `import pg from 'pg'` fails a
// CommonJS user without esModuleInterop (pg's types have no default export there).
import pg, { type Pool, type PoolConfig } from 'pg';
import type { ConnectOptions } from '../../src/connect-options.js';
import type { ConnectionSpec } from '../../src/connection-url.js';
import { AuthenticationError, BackendUnavailableError, InvalidArgumentError } from '../../src/errors.js';
import { validDate } from '../../src/holder-record.js';
import { KeyedFifo } from '../../src/keyed-fifo.js';
import type { OwnedLock } from '../../src/ownership.js';
import { authenticationError, whereOf } from '../../src/postgres-refusal.js';
import { postgresTls } from '../../src/postgres-tls.js';
import { BaseLockProvider, type LockRequest, type ProviderDefaults } from '../../src/provider-base.js';
import type { ReadWriteAdapter } from '../../src/read-write/core.js';
import { GenericSemaphore } from '../../src/semaphore/core.js';
import type { Semaphore, SemaphoreOptions } from '../../src/semaphore/types.js';
import type { TlsOptions } from '../../src/tls.js';
import type { HolderInfo, LockInfo, QueuedWaiter } from '../../src/types.js';
import { validateKey } from '../../src/validate.js';
import { lineUp } from '../../src/waiter-queue.js';
import { heldNamesJoin, stampWhenGone, terminateHolder } from './admin.js';
import type { AdvisoryGrant } from './advisory-grant.js';
import { type Checkout, checkOut } from './checkout.js';
import { connectionLock, type Holding } from './connection-lock.js';
import { within } from './deadline.js';
import { FenceTable } from './fence-table.js';
import { advisoryKey, lockRowIds } from './keyspace.js';
import {
  grantDelayTableBeside,
  type LockDelayTable,
  lockDelayTableBeside,
  settleHolding,
} from './lock-delay.js';
import { PostgresReadWriteAdapter, READ_WRITE_PREFIX, readWriteTableBeside } from './read-write.js';
import { PostgresSemaphoreAdapter } from './semaphore.js';
import { semaphoreTableBeside } from './semaphore-table.js';
import { Slots } from './slots.js';
import { WaitingConnections } from './waiting.js';

/** Options of `new PostgresLockProvider(options)`, and the PostgreSQL options `connect()` passes on. */
export interface PostgresProviderOptions extends ProviderDefaults {
  /** postgres://user:pass@host:port/db, or use `pool` for every pg option. */
  connectionString?: string;
  /** Passed to pg.Pool (host, ssl, password …). `max` is taken from maxConnections. */
  pool?: Omit<PoolConfig, 'max'>;
  /**
   * Connections for holders and waiters: each held lock or permit uses one (PostgreSQL keeps a
   * session advisory lock on the connection that took it), and so does each name that has waiters
   * in this provider, up to waitingConnections (its first waiter queues on the server, the others
   * in process). Acquires beyond this wait their turn in process. Default 10.
   */
  maxConnections?: number;
  /**
   * How many of those connections may block inside PostgreSQL waiting for a lock or permit at once
   * (0 to maxConnections - 1, so that one is always left for holders and tries). The first waiter
   * of a name beyond that holds no connection: it polls with a try on a briefly checked-out
   * connection. Default maxConnections / 4, at least 1 (0 when maxConnections is 1).
   */
  waitingConnections?: number;
  /** The fencing-token table, created on first use. Default 'fencekit_fencing_tokens'. */
  table?: string;
  /** How often a holding connection is checked with SELECT 1. Default 5 000 ms. */
  healthCheckIntervalMs?: number;
  /** How long that check may take before the lock counts as lost. Default 2 000 ms. */
  healthCheckTimeoutMs?: number;
  /**
   * TCP keepalive the server applies to our connections (seconds), so it drops a silently dead
   * client, and releases its locks, within idle + interval × count. Default 10 + 5 × 3 = 25 s.
   */
  serverKeepalive?: { idle: number; interval: number; count: number };
  /**
   * How often the server checks, during a statement, that our end of the connection is still
   * there (`client_connection_check_interval`, PostgreSQL 14+), so that a waiter whose connection we
   * closed leaves the lock queue. Default 1 000 ms; 0 leaves the server's setting (for PostgreSQL 13).
   */
  serverConnectionCheckMs?: number;
}

/**
 * Session advisory locks (bigint form, see keyspace.ts) with a durable fencing token per name. Each
 * holder uses its own pooled connection, and its lock lives and dies with it. Waiters do not each
 * hold one: the waiting acquires of one name in this provider take turns in process (KeyedFifo),
 * and only the first of them blocks inside PostgreSQL, on a connection of its own, where PostgreSQL
 * queues it in order with the other processes' first waiters and wakes one per release. A backlog
 * so costs one connection per name and process however long it is; once granted, the first waiter
 * hands the turn to the next, which queues on the server at once. Across processes the order is
 * PostgreSQL's queue of those first waiters, so a process with a long line gets one grant per turn
 * of that queue, not one per waiter. Waiters of many names would still take every connection: at
 * most waitingConnections of them block at once, and the first waiters of other names poll with
 * a try instead (waiting.ts), so holders and tries always find a connection.
 *
 * A dead connection aborts the lock's signal at once; a silent one within healthCheckIntervalMs +
 * healthCheckTimeoutMs, before the server's keepalive can drop it. Every call has a deadline (callTimeoutMs); a connection whose call missed it is destroyed, which is what
 * makes the server drop its locks and queue entries.
 */
export class PostgresLockProvider extends BaseLockProvider {
  readonly backend = 'postgres' as const;
  /** A marker row per name, beside the token rows (lock-delay.ts). */
  protected override readonly lockDelaySupported = true;
  readonly pool: Pool;
  /** Spare connections for inspect(), for creating the token table and for ending waits. */
  readonly #control: pg.Pool;

  /** `host:port` for error messages (no user info). */
  #where(): string {
    return whereOf(this.pool.options);
  }
  readonly #slots: Slots;
  readonly #waiting: WaitingConnections;
  readonly #fence: FenceTable;
  readonly #markers: LockDelayTable;
  readonly #holding: Holding;
  /** Waiting acquires per name: only the first one in this line queues on the server. */
  readonly #waitingLine = new KeyedFifo();
  /** Per name, the server pid and owner text of this provider's request blocking in the server's queue. */
  readonly #blockingWaiters = new Map<string, { pid: number; owner: string | undefined }>();
  /** The same for semaphores (a semaphore and a lock may share a name). */
  readonly #semaphoreLine = new KeyedFifo();
  /** The same for read-write locks: a name's readers and writers in one line, in order. */
  readonly #readWriteLine = new KeyedFifo();
  /** Every open client of both pools, so that close() can cut them when the server is silent. */
  readonly #clients = new Set<pg.PoolClient>();
  /** The last call to the server got an answer (false until the first one does). */
  #reachable = false;
  /** How long the server takes to drop a silent client's connection, and so its locks (ms). */
  readonly #serverKeepaliveMs: number;

  constructor(options: PostgresProviderOptions) {
    super(options);
    const max = options.maxConnections ?? 10;
    if (!Number.isInteger(max) || max < 1)
      throw new InvalidArgumentError('maxConnections', 'must be a positive integer');
    // At least one connection is never blocked in a wait: holders and tries always find one.
    const waiting = options.waitingConnections ?? Math.min(Math.max(1, Math.floor(max / 4)), max - 1);
    if (!Number.isInteger(waiting) || waiting < 0 || waiting > max - 1)
      throw new InvalidArgumentError(
        'waitingConnections',
        `must be an integer from 0 to maxConnections - 1 (${max - 1})`,
      );
    refuseUnreadTls(options.connectionString);
    this.#holding = {
      connections: new Set<Checkout>(),
      healthIntervalMs: options.healthCheckIntervalMs ?? 5_000,
      healthTimeoutMs: options.healthCheckTimeoutMs ?? 2_000,
    };
    const keepalive = options.serverKeepalive ?? { idle: 10, interval: 5, count: 3 };
    this.#serverKeepaliveMs = (keepalive.idle + keepalive.interval * keepalive.count) * 1000;
    const checkMs = options.serverConnectionCheckMs ?? 1_000;
    const base: pg.PoolConfig = {
      ...options.pool,
      ...(options.connectionString ? { connectionString: options.connectionString } : {}),
      keepAlive: true,
      // pg-pool destroys a connect attempt that hangs longer (a blackholed network).
      connectionTimeoutMillis: options.pool?.connectionTimeoutMillis ?? this.callTimeoutMs,
      application_name: options.pool?.application_name ?? 'fencekit',
      options: [
        `-c tcp_keepalives_idle=${keepalive.idle}`,
        `-c tcp_keepalives_interval=${keepalive.interval}`,
        `-c tcp_keepalives_count=${keepalive.count}`,
        // A backend blocked in a lock wait does not read its socket: without this check it would
        // stay queued (and could even be granted) after we closed the connection.
        ...(checkMs > 0 ? [`-c client_connection_check_interval=${checkMs}`] : []),
      ].join(' '),
    };
    this.pool = new pg.Pool({ ...base, max });
    this.#slots = new Slots(max);
    this.#waiting = new WaitingConnections(waiting);
    this.#control = new pg.Pool({ ...base, max: 3, idleTimeoutMillis: 5_000 });
    for (const pool of [this.pool, this.#control]) {
      // A pooled connection that errors while idle must not crash the process.
      pool.on('error', () => undefined);
      pool.on('connect', (client) => this.#clients.add(client));
      pool.on('remove', (client) => this.#clients.delete(client));
    }
    this.#fence = new FenceTable(options.table ?? 'fencekit_fencing_tokens');
    this.#markers = lockDelayTableBeside(this.#fence);
  }

  /**
   * A lock lives as long as its connection: a crashed holder's closes at once, a silent one is
   * dropped by the server's TCP keepalive (serverKeepalive), whatever ttlMs says.
   */
  protected override ttlGovernedElsewhere(_ttlMs: number) {
    return { governedBy: 'serverKeepalive', boundMs: this.#serverKeepaliveMs };
  }

  async inspect(key: string): Promise<LockInfo | null> {
    validateKey(key, 'key', { allowReserved: true }); // reads only: reaches no semaphore's nodes
    this.assertOpen();
    const { classid, objid } = lockRowIds(advisoryKey(key));
    await this.#fence.ensure(this.#control, this.callTimeoutMs);
    await this.#markers.ensure(this.#control, this.callTimeoutMs);
    const conn = await checkOut(this.#control, this.callTimeoutMs);
    const run = <R extends pg.QueryResultRow>(sql: string, values: unknown[]) =>
      conn.query<R>(sql, values, this.callTimeoutMs, 'inspect');
    const locks = await run<{ granted: boolean }>(
      `SELECT granted FROM pg_locks
        WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1`,
      [classid, objid],
    );
    const holding = locks.rows.some((r) => r.granted);
    // The server sees at most one waiter per process and name (none when it polls); this
    // provider's polling waiter and the ones lined up behind it are counted here.
    const waiters =
      locks.rows.filter((r) => !r.granted).length +
      this.#waiting.polling(key) +
      this.#waitingLine.behind(key);
    const row = holding
      ? (await run(`SELECT token, owner, since FROM ${this.#fence.table} WHERE name = $1`, [key])).rows[0]
      : undefined;
    const marker = (
      await run<{ delay_ms: number; lost: boolean; until: Date | null; now: Date }>(
        this.#markers.inspectSql,
        [key],
      )
    ).rows[0];
    conn.giveBack();
    this.#serverAnswered();
    // A delay runs once its marker's holder is lost: stamped (lost_at), or no one holds the lock.
    // Whoever holds the lock then is the next holder waiting it out.
    if (marker && (marker.lost ? (marker.until as Date) > marker.now : !holding)) {
      const delayedUntil = marker.lost ? (marker.until as Date) : new Date(Date.now() + marker.delay_ms);
      return { key, holder: null, waiters: waiters + (holding ? 1 : 0), delayedUntil };
    }
    if (!holding && waiters === 0) return null;
    const holder = row
      ? { owner: row.owner ?? undefined, fencingToken: BigInt(row.token), since: row.since as Date }
      : null;
    return { key, holder, waiters };
  }

  /**
   * The backends waiting in the server's queue for the name's advisory lock, in the order of their
   * wait's start (PostgreSQL 14+ records it): one per process, the first waiter of its line. The
   * server keeps no owner text for them: ours carries the one we know, others' have none. A line
   * whose first waiter polls (no waiting connection was free) is not in the server's queue: it
   * tries again and again, and an entry at the end stands for it.
   */
  protected override async queuedWaiters(key: string, limit: number): Promise<QueuedWaiter[]> {
    const { classid, objid } = lockRowIds(advisoryKey(key));
    const signal = this.closeSignal; // close() ends the read
    const conn = await checkOut(this.#control, this.callTimeoutMs, signal);
    // waitstart read through to_jsonb, so that a server before 14 (no such column) answers too.
    const waiting = await conn.query<{ pid: number; since: Date | null }>(
      `SELECT pid, (to_jsonb(l) ->> 'waitstart')::timestamptz AS since FROM pg_locks l
        WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1
          AND NOT granted
        ORDER BY since NULLS LAST, pid LIMIT $3`,
      [classid, objid, limit],
      this.callTimeoutMs,
      'queue',
      signal,
    );
    conn.giveBack();
    this.#serverAnswered();
    const ours = this.#blockingWaiters.get(key);
    const entries = waiting.rows.map(({ pid, since }) => {
      const mine = ours !== undefined && pid === ours.pid;
      return { owner: mine ? ours.owner : undefined, since: validDate(since), ours: mine };
    });
    const behind = this.#waitingLine.behind(key) + this.#waiting.polling(key);
    return lineUp(entries, behind, limit);
  }

  /**
   * Ends the holder's session (see admin.ts): its signal aborts with 'connection-lost' as soon as
   * its connection sees the end (at once, or at its next health check), and the server grants the
   * next waiter. Needs the right to signal the holder's backend (same role, or pg_signal_backend).
   */
  protected async removeGrant(key: string, expected: bigint | undefined): Promise<HolderInfo | null> {
    await this.#fence.ensure(this.#control, this.callTimeoutMs);
    await this.#markers.ensure(this.#control, this.callTimeoutMs);
    const conn = await checkOut(this.#control, this.callTimeoutMs);
    const removed = await terminateHolder(conn, this.#fence.table, key, expected, this.callTimeoutMs);
    if (removed) {
      // The holder's lock-delay starts once its backend is gone (else the next holder starts it).
      await stampWhenGone(conn, this.#markers.stampSql, key, removed, this.callTimeoutMs);
    }
    conn.giveBack();
    this.#serverAnswered();
    if (!removed) return null;
    const { pids: _pids, ...holder } = removed;
    return holder;
  }

  /**
   * The token table's names whose advisory lock is held now (pg_locks joined on the name's key):
   * locks, and read-write locks (rows "/rwlock/<name>"; no lock name starts with '/').
   */
  protected async heldNames(prefix: string): Promise<string[]> {
    await this.#fence.ensure(this.#control, this.callTimeoutMs);
    const conn = await checkOut(this.#control, this.callTimeoutMs);
    const locks = await heldNamesJoin(conn, this.#fence.table, prefix, this.callTimeoutMs);
    const readWrite = await heldNamesJoin(
      conn,
      this.#fence.table,
      `${READ_WRITE_PREFIX}${prefix}`,
      this.callTimeoutMs,
    );
    conn.giveBack();
    this.#serverAnswered();
    return [
      ...locks.filter((name) => !name.startsWith('/')),
      ...readWrite.map((name) => name.slice(READ_WRITE_PREFIX.length)),
    ];
  }

  /** Shared and exclusive advisory locks in PostgreSQL's order: see read-write.ts. */
  protected override readWriteAdapter(name: string): ReadWriteAdapter {
    return new PostgresReadWriteAdapter(name, {
      fence: this.#fence,
      grants: readWriteTableBeside(this.#fence),
      markers: grantDelayTableBeside(this.#fence),
      grant: (req, cancel) => this.#grant(req, cancel),
      settle: (conn, o, cancel) =>
        settleHolding(
          conn,
          { ...o, callTimeoutMs: this.callTimeoutMs, pollMs: this.#holding.healthIntervalMs },
          cancel,
        ),
      line: this.#readWriteLine,
      control: this.#control,
      callTimeoutMs: this.callTimeoutMs,
      waitingHere: (fenceName) => this.#waiting.polling(fenceName) + this.#readWriteLine.behind(fenceName),
      answered: () => this.#serverAnswered(),
    });
  }

  /** "At most `limit` at once" under `name`: slots as advisory locks, see semaphore.ts. */
  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    const ctx = this.semaphoreContext();
    const adapter = new PostgresSemaphoreAdapter(name, ctx, {
      ...{ fence: this.#fence, grants: semaphoreTableBeside(this.#fence), pool: this.pool },
      markers: grantDelayTableBeside(this.#fence),
      ...{
        slots: this.#slots,
        waitingLine: this.#semaphoreLine,
        waiting: this.#waiting,
        control: this.#control,
        holding: this.#holding,
        pollMs: 500,
      },
      answered: () => this.#serverAnswered(),
      reachable: () => this.backendReachable(),
    });
    return new GenericSemaphore(name, options, ctx, adapter);
  }

  protected request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    const withDelay = req.lockDelayMs > 0;
    const fence = this.#fence.table;
    const advisory = advisoryKey(req.key).toString();
    return this.#grant(
      {
        key: req.key,
        fenceName: req.key,
        line: this.#waitingLine,
        owner: req.owner,
        ownerToken: req.ownerToken,
        wait: req.wait,
        grantSql: (blocking) =>
          this.#markers.grantSql(fence, blocking ? 'pg_advisory_lock' : 'pg_try_advisory_lock', withDelay),
        moreValues: withDelay ? [req.lockDelayMs] : [],
        settle: (conn, signal) =>
          this.#markers.settle(
            conn,
            {
              ...{ fence, name: req.key, owner: req.owner, advisory, delayMs: req.lockDelayMs },
              ...{
                wait: req.wait,
                callTimeoutMs: this.callTimeoutMs,
                pollMs: this.#holding.healthIntervalMs,
              },
            },
            signal,
          ),
        // A grant that wrote a marker deletes it with its unlock: a clean release starts no delay.
        releaseOf: (token, key) =>
          withDelay
            ? { sql: this.#markers.releaseSql, values: [req.key, token.toString(), key] }
            : { sql: 'SELECT pg_advisory_unlock($1)', values: [key] },
      },
      cancel,
    );
  }

  /** One grant through the request path, noting whether the server answered. */
  async #grant(req: AdvisoryGrant, cancel: AbortSignal): Promise<OwnedLock | null> {
    try {
      const lock = await this.#attempt(req, cancel);
      this.#serverAnswered();
      return lock;
    } catch (error) {
      if (error instanceof BackendUnavailableError) this.#reachable = false;
      throw error;
    }
  }

  /** A wait that runs out while the server is silent (or was never reached) is an outage. */
  protected override backendReachable(): boolean {
    return this.#reachable;
  }

  #serverAnswered(): void {
    if (!this.#reachable) this.noteReached();
    this.#reachable = true;
  }

  /**
   * A waiting acquire first waits its turn among this provider's waiters of the same name, once
   * the server has answered this provider: a wait that runs out in that line is a timeout, not an
   * outage, only if it has.
   */
  async #attempt(req: AdvisoryGrant, cancel: AbortSignal): Promise<OwnedLock | null> {
    // A try waits at most callTimeoutMs for a free connection.
    if (!req.wait) return this.#tryOnServer(req, cancel, this.callTimeoutMs);
    await this.#ensureFenceTable(cancel);
    const leaveLine = await req.line.enter(req.fenceName, cancel);
    try {
      return await this.#waiting.waitFor(
        req.fenceName,
        {
          block: () => this.#waitOnServer(req, cancel),
          // Waiting for a free connection is part of a waiting acquire.
          tryOnce: () => this.#tryOnServer(req, cancel, Number.POSITIVE_INFINITY),
        },
        cancel,
      );
    } finally {
      leaveLine(); // granted or not, the next waiter of this name queues on the server now
    }
  }

  /** The token table exists; when that took a call, the server answered it. */
  async #ensureFenceTable(cancel: AbortSignal): Promise<void> {
    if (this.#fence.created && this.#markers.created) return;
    await this.#fence.ensure(this.#control, this.callTimeoutMs, cancel);
    await this.#markers.ensure(this.#control, this.callTimeoutMs, cancel);
    this.#serverAnswered();
  }

  /** A connection of the provider's budget, waiting at most connectionWaitMs for a free one. */
  async #connection(connectionWaitMs: number, cancel: AbortSignal): Promise<Checkout> {
    await this.#ensureFenceTable(cancel);
    const free = await this.#slots.take(connectionWaitMs, cancel);
    const conn = await checkOut(this.pool, this.callTimeoutMs, cancel, free);
    this.#serverAnswered();
    return conn;
  }

  /** pg_try_advisory_lock with the next token: the lock, or null when the name is taken. */
  async #tryOnServer(
    req: AdvisoryGrant,
    cancel: AbortSignal,
    connectionWaitMs: number,
  ): Promise<OwnedLock | null> {
    const conn = await this.#connection(connectionWaitMs, cancel);
    const key = advisoryKey(req.fenceName).toString();
    const rows = await conn
      .query<{ ok?: boolean; token: string | null }>(
        req.grantSql(false),
        [req.fenceName, req.owner ?? null, key, ...req.moreValues],
        this.callTimeoutMs,
        'try-lock',
        cancel,
      )
      .then(
        (result) => result.rows,
        (error: unknown) => {
          if (
            cancel.aborted ||
            error instanceof BackendUnavailableError ||
            error instanceof AuthenticationError
          )
            throw error;
          const refused = authenticationError(error, this.#where());
          if (refused) throw refused;
          throw new BackendUnavailableError(`postgres: try-lock failed: ${(error as Error).message}`, {
            cause: error,
          });
        },
      );
    return this.#holdIfGranted(conn, req, key, rows, cancel);
  }

  /** pg_advisory_lock with the next token, on a waiting connection: blocks in the server's queue. */
  async #waitOnServer(req: AdvisoryGrant, cancel: AbortSignal): Promise<OwnedLock | null> {
    const conn = await this.#connection(Number.POSITIVE_INFINITY, cancel);
    const key = advisoryKey(req.fenceName).toString();
    const values = [req.fenceName, req.owner ?? null, key, ...req.moreValues];
    const waiter = { pid: conn.pid, owner: req.owner };
    this.#blockingWaiters.set(req.fenceName, waiter);
    let rows: Array<{ ok?: boolean; token: string | null }>;
    try {
      rows = await this.#waitForGrant(conn, req.grantSql(true), values, cancel);
    } finally {
      if (this.#blockingWaiters.get(req.fenceName) === waiter) this.#blockingWaiters.delete(req.fenceName);
    }
    return this.#holdIfGranted(conn, req, key, rows, cancel);
  }

  async #holdIfGranted(
    conn: Checkout,
    req: AdvisoryGrant,
    key: string,
    rows: Array<{ ok?: boolean; token: string | null }>,
    cancel: AbortSignal,
  ): Promise<OwnedLock | null> {
    // A grant that raced in with the cancel: closing the connection gives it back.
    if (cancel.aborted) {
      conn.discard();
      throw cancel.reason;
    }
    const row = rows[0];
    if (row === undefined || row.ok === false) {
      conn.giveBack();
      return null;
    }
    if (row.token !== null) return this.#hold(conn, req, key, BigInt(row.token));
    // Locked without a token: a lock-delay marker to look at, holding the lock (settle gives it
    // back, with the connection, when it answers null or fails).
    const token = req.settle ? await req.settle(conn, cancel) : null;
    if (token === null) {
      if (!req.settle) conn.giveBack();
      return null;
    }
    return this.#hold(conn, req, key, token);
  }

  /**
   * The blocking grant statement. While it waits, the server is asked every healthCheckIntervalMs
   * whether our waiting backend still exists: a silent network or a backend gone ends the wait with
   * BackendUnavailableError (the base retries within waitMs) instead of a hang.
   */
  async #waitForGrant(
    conn: Checkout,
    sql: string,
    values: unknown[],
    cancel: AbortSignal,
  ): Promise<Array<{ ok?: boolean; token: string | null }>> {
    const granted = conn.client.query<{ ok?: boolean; token: string | null }>(sql, values);
    // Ends the wait on cancel or on a failed probe. Built by hand rather than with AbortSignal.any,
    // so that no listener outlives the wait on a long-lived cancel signal.
    const stopWaiting = new AbortController();
    const onCancel = () => stopWaiting.abort(cancel.reason);
    cancel.addEventListener('abort', onCancel, { once: true });
    const stopProbing = new AbortController();
    void this.#probeWhileWaiting(conn.pid, stopProbing.signal, stopWaiting);
    try {
      const result = await within(
        granted,
        Number.POSITIVE_INFINITY,
        'waiting for the lock',
        stopWaiting.signal,
      );
      return result.rows;
    } catch (error) {
      if (cancel.aborted) {
        await this.#endWait(conn, granted);
        throw cancel.reason;
      }
      conn.discard();
      if (error instanceof BackendUnavailableError || error instanceof AuthenticationError) throw error;
      const refused = authenticationError(error, this.#where());
      if (refused) throw refused;
      throw new BackendUnavailableError(`postgres: acquire failed: ${(error as Error).message}`, {
        cause: error,
      });
    } finally {
      cancel.removeEventListener('abort', onCancel);
      stopProbing.abort();
    }
  }

  async #probeWhileWaiting(pid: number, stop: AbortSignal, failed: AbortController): Promise<void> {
    while (!stop.aborted) {
      await sleep(this.#holding.healthIntervalMs, undefined, { signal: stop }).catch(() => undefined);
      if (stop.aborted) return;
      try {
        const conn = await checkOut(this.#control, this.callTimeoutMs, stop);
        const { rowCount } = await conn.query(
          'SELECT 1 FROM pg_stat_activity WHERE pid = $1',
          [pid],
          this.callTimeoutMs,
          'checking a waiting connection',
        );
        conn.giveBack();
        this.#serverAnswered();
        if (rowCount === 0) throw new BackendUnavailableError('postgres: the waiting connection is gone');
      } catch (error) {
        if (!stop.aborted) failed.abort(error);
        return;
      }
    }
  }

  /**
   * Takes a cancelled waiter out of PostgreSQL's queue: pg_terminate_backend on its backend, then
   * its statement ends. The connection is destroyed in every case and never reused, so a terminate
   * that lands late can only hit this connection (a grant that raced in dies with it).
   */
  async #endWait(conn: Checkout, granted: Promise<unknown>): Promise<void> {
    const started = performance.now();
    try {
      const control = await checkOut(this.#control, this.callTimeoutMs);
      await control.query('SELECT pg_terminate_backend($1)', [conn.pid], this.callTimeoutMs, 'ending a wait');
      control.giveBack();
      const left = Math.max(0, this.callTimeoutMs - (performance.now() - started));
      await within(granted, left, 'ending a wait');
    } catch {
      // Unconfirmed: closing the connection below is all that is left; the server drops the entry
      // when it sees the close.
    } finally {
      conn.discard();
    }
  }

  #hold(conn: Checkout, req: AdvisoryGrant, key: string, token: bigint): OwnedLock {
    const { sql, values } = req.releaseOf(token, key);
    return connectionLock(conn, this.#holding, {
      lock: { key: req.key, fencingToken: token, ownerToken: req.ownerToken },
      release: { sql, values, what: 'unlock', timeoutMs: this.callTimeoutMs },
      freed: () => this.#waiting.freed(req.fenceName),
    });
  }

  /** Bounded: with the server silent, waits callTimeoutMs and then cuts every connection. */
  override close(): Promise<void> {
    const wasClosed = this.closed;
    const closing = super.close();
    if (!wasClosed) {
      const cut = setTimeout(() => this.#cutAll(), this.callTimeoutMs);
      void closing.finally(() => clearTimeout(cut)).catch(() => undefined);
    }
    return closing;
  }

  protected async shutdown(): Promise<void> {
    const ending = Promise.allSettled([this.pool.end(), this.#control.end()]);
    await within(ending, this.callTimeoutMs, 'closing connections').catch(() => this.#cutAll());
  }

  /** Destroys every socket: the server releases what they held when it sees them close. */
  #cutAll(): void {
    for (const client of this.#clients) {
      (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    }
  }

  /**
   * For tests of holder death: drops every holding connection without unlocking, as a killed
   * process would; the server releases their locks when it sees the connections close.
   */
  async abandon(): Promise<void> {
    for (const conn of this.#holding.connections) {
      (conn.client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
    }
    this.#holding.connections.clear();
  }
}

/** The provider `connect()` opens for a `postgres://` URL. */
/**
 * fencekit's TLS parameters are read by connect() (src/postgres-tls.ts), not by pg: in a
 * connection string given to the class, pg would ignore them and connect in plain text.
 */
function refuseUnreadTls(connectionString: string | undefined): void {
  if (connectionString === undefined) return;
  const query = connectionString.includes('?')
    ? connectionString.slice(connectionString.indexOf('?') + 1)
    : '';
  const named = ['tls', 'ca', 'cert', 'key', 'servername'].filter((name) =>
    new URLSearchParams(query).has(name),
  );
  if (named.length > 0)
    throw new InvalidArgumentError(
      'connectionString',
      `${named.map((name) => `${name}=`).join(', ')} are read by connect(), not here: use connect(url), or pool: { ssl }`,
    );
}

export async function createProvider(
  spec: ConnectionSpec,
  options: ConnectOptions,
): Promise<PostgresLockProvider> {
  const given = options as Partial<PostgresProviderOptions>;
  const { connectionString, ssl } = await postgresTls(spec, options.tls as TlsOptions | boolean | undefined);
  if (ssl !== undefined && given.pool?.ssl !== undefined)
    throw new InvalidArgumentError('pool', 'ssl cannot go with TLS asked for in the URL or the tls option');
  return new PostgresLockProvider({
    ...given,
    connectionString,
    ...(ssl === undefined ? {} : { pool: { ...given.pool, ssl } }),
  });
}
