import pg from 'pg';
import type { ConnectionSpec, ConnectOptions } from '../../src/connect.js';
import { BackendUnavailableError, InvalidArgumentError } from '../../src/errors.js';
import { OwnedLock } from '../../src/ownership.js';
import { BaseLockProvider, type LockRequest, type ProviderDefaults } from '../../src/provider-base.js';
import type { Semaphore, SemaphoreOptions } from '../../src/semaphore/types.js';
import type { LockInfo } from '../../src/types.js';
import { validateKey } from '../../src/validate.js';
import { FenceTable } from './fence-table.js';
import { advisoryKey, lockRowIds } from './keyspace.js';
import { postgresSemaphore } from './semaphore.js';
import { semaphoreTableBeside } from './semaphore-table.js';

export interface PostgresProviderOptions extends ProviderDefaults {
  /** postgres://user:pass@host:port/db, or use `pool` for every pg option. */
  connectionString?: string;
  /** Passed to pg.Pool (host, ssl, password …). `max` is taken from maxConnections. */
  pool?: Omit<pg.PoolConfig, 'max'>;
  /**
   * Connections for holders and waiters: each held or awaited lock uses one (PostgreSQL keeps a
   * session advisory lock on the connection that took it). Acquires beyond this wait their turn in
   * process. Default 10.
   */
  maxConnections?: number;
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
}

/**
 * Session advisory locks (bigint form, see keyspace.ts) with a durable fencing token per name. Each
 * holder and each waiter uses its own pooled connection: waiters block inside PostgreSQL, which
 * queues them in order and wakes one per release, and a holder's lock lives and dies with its
 * connection. A dead connection aborts the lock's signal at once; a silent one within
 * healthCheckIntervalMs + healthCheckTimeoutMs, before the server's keepalive can drop it.
 */
export class PostgresLockProvider extends BaseLockProvider {
  readonly backend = 'postgres' as const;
  readonly pool: pg.Pool;
  /** Two spare connections for inspect() and for ending waits (pg_terminate_backend). */
  readonly #control: pg.Pool;
  readonly #fence: FenceTable;
  readonly #healthIntervalMs: number;
  readonly #healthTimeoutMs: number;
  readonly #holding = new Set<pg.PoolClient>();

  constructor(options: PostgresProviderOptions) {
    super(options);
    const max = options.maxConnections ?? 10;
    if (!Number.isInteger(max) || max < 1)
      throw new InvalidArgumentError('maxConnections', 'must be a positive integer');
    this.#healthIntervalMs = options.healthCheckIntervalMs ?? 5_000;
    this.#healthTimeoutMs = options.healthCheckTimeoutMs ?? 2_000;
    const keepalive = options.serverKeepalive ?? { idle: 10, interval: 5, count: 3 };
    const base: pg.PoolConfig = {
      ...options.pool,
      ...(options.connectionString ? { connectionString: options.connectionString } : {}),
      keepAlive: true,
      connectionTimeoutMillis: options.pool?.connectionTimeoutMillis ?? 10_000,
      application_name: options.pool?.application_name ?? 'fencekit',
      options: `-c tcp_keepalives_idle=${keepalive.idle} -c tcp_keepalives_interval=${keepalive.interval} -c tcp_keepalives_count=${keepalive.count}`,
    };
    this.pool = new pg.Pool({ ...base, max });
    this.#control = new pg.Pool({ ...base, max: 2, idleTimeoutMillis: 5_000 });
    // A pooled connection that errors while idle must not crash the process.
    this.pool.on('error', () => undefined);
    this.#control.on('error', () => undefined);
    this.#fence = new FenceTable(options.table ?? 'fencekit_fencing_tokens');
  }

  async inspect(key: string): Promise<LockInfo | null> {
    validateKey(key);
    this.assertOpen();
    const { classid, objid } = lockRowIds(advisoryKey(key));
    const client = await this.#connect(this.#control);
    try {
      await this.#fence.ensure(client);
      const locks = await client.query<{ granted: boolean }>(
        `SELECT granted FROM pg_locks
          WHERE locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1`,
        [classid, objid],
      );
      const holding = locks.rows.some((r) => r.granted);
      const waiters = locks.rows.filter((r) => !r.granted).length;
      if (!holding && waiters === 0) return null;
      const row = holding
        ? (await client.query(`SELECT token, owner, since FROM ${this.#fence.table} WHERE name = $1`, [key]))
            .rows[0]
        : undefined;
      const holder = row
        ? { owner: row.owner ?? undefined, fencingToken: BigInt(row.token), since: row.since as Date }
        : null;
      return { key, holder, waiters };
    } finally {
      client.release();
    }
  }

  /** "At most `limit` at once" under `name` (DESIGN §6): slots as advisory locks, see semaphore.ts. */
  semaphore(name: string, options: SemaphoreOptions): Semaphore {
    const { backend, ttlMs, waitMs, callTimeoutMs, closeSignal } = this;
    return postgresSemaphore(
      name,
      options,
      { backend, ttlMs, waitMs, callTimeoutMs, closeSignal },
      {
        fence: this.#fence,
        grants: semaphoreTableBeside(this.#fence),
        connect: (cancel) => this.#connectCancellable(cancel),
        control: () => this.#connect(this.#control),
        untilCancelled: (client, cancel, query) => this.#untilCancelled(client, cancel, query),
        ...{ holding: this.#holding, healthIntervalMs: this.#healthIntervalMs, pollMs: 500 },
      },
    );
  }

  protected async request(req: LockRequest, cancel: AbortSignal): Promise<OwnedLock | null> {
    if (!this.#fence.created) {
      const control = await this.#connect(this.#control);
      try {
        await this.#fence.ensure(control);
      } finally {
        control.release();
      }
    }
    const client = await this.#connectCancellable(cancel);
    const key = advisoryKey(req.key).toString();
    const sql = this.#fence.grantSql(req.wait ? 'pg_advisory_lock' : 'pg_try_advisory_lock');
    let token: bigint | undefined;
    try {
      const result = await this.#untilCancelled(
        client,
        cancel,
        client.query<{ token: string }>(sql, [req.key, req.owner ?? null, key]),
      );
      token = result.rows[0] === undefined ? undefined : BigInt(result.rows[0].token);
    } catch (error) {
      client.release(true); // its state is unknown (terminated, cancelled): never reuse it
      if (cancel.aborted) throw cancel.reason;
      throw new BackendUnavailableError(`postgres: acquire failed: ${(error as Error).message}`, {
        cause: error,
      });
    }
    if (token === undefined) {
      client.release();
      return null;
    }
    return this.#hold(client, req, key, token);
  }

  /** Runs query; if cancel aborts first, ends the waiting backend so nothing stays queued. */
  async #untilCancelled<T>(client: pg.PoolClient, cancel: AbortSignal, query: Promise<T>): Promise<T> {
    const pid = (client as unknown as { processID: number }).processID;
    const onCancel = () => {
      void this.#connect(this.#control)
        .then(async (control) => {
          try {
            await control.query('SELECT pg_terminate_backend($1)', [pid]);
          } finally {
            control.release();
          }
        })
        .catch(() => undefined);
    };
    if (cancel.aborted) onCancel();
    else cancel.addEventListener('abort', onCancel, { once: true });
    try {
      return await query;
    } finally {
      cancel.removeEventListener('abort', onCancel);
    }
  }

  #hold(client: pg.PoolClient, req: LockRequest, key: string, token: bigint): OwnedLock {
    let healthTimer: NodeJS.Timeout | undefined;
    let returned = false;
    /** Back to the pool once; destroy=true closes it (the server then releases its locks). */
    const giveBack = (destroy: boolean) => {
      if (returned) return;
      returned = true;
      this.#holding.delete(client);
      client.release(destroy);
    };
    const lock = new OwnedLock({
      key: req.key,
      fencingToken: token,
      ownerToken: req.ownerToken,
      releaseOnBackend: async () => {
        if (returned) return; // the connection is gone, and the lock with it
        try {
          await client.query('SELECT pg_advisory_unlock($1)', [key]);
          giveBack(false);
        } catch {
          giveBack(true);
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
    this.#holding.add(client);
    const check = async () => {
      try {
        await client.query({ text: 'SELECT 1', query_timeout: this.#healthTimeoutMs } as pg.QueryConfig);
        if (lock.held) healthTimer = setTimeout(check, this.#healthIntervalMs);
      } catch {
        lost();
      }
    };
    healthTimer = setTimeout(check, this.#healthIntervalMs);
    lock.onEnd(() => {
      clearTimeout(healthTimer);
      client.off('error', lost);
      client.off('end', lost);
    });
    return lock;
  }

  async #connect(pool: pg.Pool): Promise<pg.PoolClient> {
    try {
      return await pool.connect();
    } catch (error) {
      throw new BackendUnavailableError(`postgres: cannot connect: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  /** A pooled connection; if cancel aborts while waiting for one, it goes back unused. */
  async #connectCancellable(cancel: AbortSignal): Promise<pg.PoolClient> {
    const connecting = this.#connect(this.pool);
    if (cancel.aborted) {
      void connecting.then(
        (c) => c.release(),
        () => undefined,
      );
      throw cancel.reason;
    }
    return await new Promise<pg.PoolClient>((resolve, reject) => {
      const onCancel = () => {
        void connecting.then(
          (c) => c.release(),
          () => undefined,
        );
        reject(cancel.reason);
      };
      cancel.addEventListener('abort', onCancel, { once: true });
      connecting.then(
        (c) => {
          cancel.removeEventListener('abort', onCancel);
          if (cancel.aborted) c.release();
          else resolve(c);
        },
        (error) => {
          cancel.removeEventListener('abort', onCancel);
          reject(error);
        },
      );
    });
  }

  protected async shutdown(): Promise<void> {
    await Promise.allSettled([this.pool.end(), this.#control.end()]);
  }

  /**
   * For tests of holder death: drops every holding connection without unlocking, as a killed
   * process would; the server releases their locks when it sees the connections close.
   */
  async abandon(): Promise<void> {
    for (const client of this.#holding) {
      (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
    }
    this.#holding.clear();
  }
}

export async function createProvider(
  spec: ConnectionSpec,
  options: ConnectOptions,
): Promise<PostgresLockProvider> {
  return new PostgresLockProvider({
    ...(options as Partial<PostgresProviderOptions>),
    connectionString: spec.url,
  });
}
