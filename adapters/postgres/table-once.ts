import type pg from 'pg';
import { authenticationError, whereOf } from '../../src/postgres-refusal.js';
import { checkOut } from './checkout.js';
import { within } from './deadline.js';
import { advisoryKey } from './keyspace.js';

/**
 * A table fencekit creates on first use: once per process, on a connection of its own in a
 * transaction of its own (never inside a caller's), concurrent creators taking turns on an advisory
 * lock. A failure is not remembered: the next call tries again.
 */
export class TableOnce {
  #ready: Promise<void> | undefined;
  /** True once the table is known to exist: callers can skip getting a connection for ensure(). */
  created = false;

  constructor(
    /** What the error messages call it ("the fencing-token table"). */
    private readonly what: string,
    /** CREATE TABLE IF NOT EXISTS … */
    private readonly ddl: string,
  ) {}

  ensure(pool: pg.Pool, callTimeoutMs: number, cancel?: AbortSignal): Promise<void> {
    if (this.created) return Promise.resolve();
    this.#ready ??= (async () => {
      const conn = await checkOut(pool, callTimeoutMs);
      const run = (sql: string, values: unknown[] = []) =>
        conn.query(sql, values, callTimeoutMs, `creating ${this.what}`);
      try {
        await run('BEGIN');
        await run('SELECT pg_advisory_xact_lock($1)', [advisoryKey('fencekit/migration').toString()]);
        await run(this.ddl);
        await run('COMMIT');
      } catch (error) {
        conn.discard();
        // A role that may not create the table (42501) is refused, not an outage to retry.
        throw authenticationError(error, whereOf(pool.options)) ?? error;
      }
      conn.giveBack();
      this.created = true;
    })();
    this.#ready.catch(() => {
      this.#ready = undefined;
    });
    return within(this.#ready, Number.POSITIVE_INFINITY, `creating ${this.what}`, cancel);
  }
}

/**
 * A table of fencekit's under its quoted name, created on first use (see TableOnce) with
 * `columns`, the body of its CREATE TABLE.
 */
export class FencekitTable {
  readonly table: string;
  readonly #creation: TableOnce;

  constructor(quotedName: string, what: string, columns: string) {
    this.table = quotedName;
    this.#creation = new TableOnce(what, `CREATE TABLE IF NOT EXISTS ${quotedName} (${columns})`);
  }

  /** True once the table is known to exist: callers can skip getting a connection for ensure(). */
  get created(): boolean {
    return this.#creation.created;
  }

  /** Creates the table on first use. */
  ensure(pool: pg.Pool, callTimeoutMs: number, cancel?: AbortSignal): Promise<void> {
    return this.#creation.ensure(pool, callTimeoutMs, cancel);
  }
}
