import { createHash } from 'node:crypto';
import type { Pool, PoolClient, QueryResult } from 'pg';
import { InvalidArgumentError } from '../errors.js';
import { authenticationError, whereOf } from '../postgres-refusal.js';
import type { BeginRequest, BeginResult, CompleteRequest, CompleteResult, RecordBackend } from './records.js';

const SWEEP_EVERY_MS = 60_000;

/**
 * The begin statement decides on the server and sends four columns: s = started, adopt (our own
 * start), mismatch, takeover (expired or lease over), v/e (done: value or final error), running.
 */
interface BeginRow {
  s: 's' | 'a' | 'm' | 't' | 'v' | 'e' | 'r';
  token: string;
  body: string | null;
  left_ms: number;
}

/** pg's Query (or the native client's): what a pool's Client class carries as `Client.Query`. */
type QueryClass = new (
  text: string,
  values: unknown[],
  callback: (error: Error | null | undefined, result: QueryResult) => void,
) => { name?: string };

type Statement = 'begin' | 'takeover' | 'renew' | 'complete' | 'current' | 'abandon';

/**
 * Records in one table, created on first use on the store's own connections (never inside a
 * caller's transaction). Times are the server's `now()`; tokens come from one sequence, so they are
 * never reused, even when a key expires and is used again. A sequence that has given no token yet
 * (new, or made again after it was dropped while records outlived it) starts at the server's clock
 * in microseconds, as the Redis counters do: above every token an earlier sequence gave, as long as
 * the clock does not go back and fewer than a million runs a second start.
 */
export class PostgresRecords implements RecordBackend {
  readonly name = 'postgres';
  #ready: Promise<void> | undefined;
  #isReady = false; // the table exists: calls skip awaiting setup()
  #lastSweep = 0;
  readonly #sql: ReturnType<typeof statements>;
  // Statement names made once: a name built per call is a fresh string pg must flatten and look up.
  readonly #names: Record<Statement, string>;
  // The Query class of the pool's own pg (JS or native, whichever version the app installed).
  readonly #Query: QueryClass | undefined;
  readonly #pool: Pool;
  readonly #table: string;

  constructor(pool: Pool, table = 'fencekit_idempotency') {
    this.#pool = pool;
    this.#table = table;
    if (!/^[a-z_][a-z0-9_]{0,50}$/.test(table))
      throw new InvalidArgumentError('table', `"${table}" is not a plain lower-case SQL name (a-z, 0-9, _)`);
    this.#sql = statements(table);
    this.#names = Object.fromEntries(
      (['begin', 'takeover', 'renew', 'complete', 'current', 'abandon'] as const).map((n) => [
        n,
        // The text's hash in the name: processes of two versions on one server connection (a
        // rolling deploy through a pooler) never meet a prepared statement of the same name
        // with other text.
        `${table}-${n}-${createHash('sha256').update(this.#sql[n]).digest('hex').slice(0, 8)}`,
      ]),
    ) as Record<Statement, string>;
    this.#Query = (pool as unknown as { Client?: { Query?: QueryClass } }).Client?.Query;
    // An idle client's error (server gone) must not crash the process; the next query reports it.
    pool.on('error', () => undefined);
  }

  #setup(): Promise<void> {
    this.#ready ??= (async () => {
      // A connection error while the client is out fails the query in flight (below); pg also
      // emits it on the client, which must have a listener then or the process crashes. Added in
      // the step the pool hands the client over, as named() does.
      const onError = () => undefined;
      const client = await new Promise<PoolClient>((resolve, reject) =>
        this.#pool.connect((error, connected) => {
          if (error || !connected)
            return reject(this.#refused(error ?? new Error('pool.connect gave no client')));
          connected.on('error', onError);
          resolve(connected);
        }),
      );
      let failed: Error | undefined;
      try {
        // Serialized: two processes running CREATE … IF NOT EXISTS at once can still collide.
        await client.query('BEGIN');
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`fencekit:${this.#table}`]);
        await client.query(this.#sql.create);
        await client.query('COMMIT');
        this.#isReady = true;
      } catch (error) {
        failed = error as Error;
        await client.query('ROLLBACK').catch(() => undefined);
        throw this.#refused(error); // a role that may not create the table (42501)
      } finally {
        client.removeListener('error', onError);
        client.release(failed); // a failed connection is ended, not pooled
      }
    })().catch((error) => {
      this.#ready = undefined; // retried by the next call
      throw error;
    });
    return this.#ready;
  }

  async begin({ key, hash, leaseMs, retentionMs, attempt }: BeginRequest): Promise<BeginResult> {
    if (!this.#isReady) await this.#setup();
    this.#sweepNowAndThen();
    // An INSERT that lost a race to a concurrent insert of the same key sees neither its own row nor
    // the other's in this statement's snapshot, and a takeover can lose to another: then ask again.
    for (let i = 0; i < 10; i++) {
      const { rows } = await this.#named('begin', [key, hash, leaseMs, retentionMs, attempt]);
      const row = rows[0] as BeginRow | undefined;
      if (!row) continue;
      switch (row.s) {
        case 's':
          return { state: 'started', token: BigInt(row.token) };
        case 'a':
          // Our own start, whose reply was lost: adopt it, restarting its lease from now.
          if (await this.renew(key, BigInt(row.token), leaseMs))
            return { state: 'started', token: BigInt(row.token) };
          continue;
        case 'm':
          return { state: 'mismatch' };
        case 't': {
          // Compare-and-set on the token we saw: of several repeats, one takes the record over.
          const took = await this.#named('takeover', [key, row.token, hash, leaseMs, retentionMs, attempt]);
          const token = (took.rows[0] as { token: string } | undefined)?.token;
          if (token !== undefined) return { state: 'started', token: BigInt(token) };
          continue;
        }
        case 'v':
        case 'e':
          return {
            state: 'completed',
            outcome: { kind: row.s === 'e' ? 'final-error' : 'value', body: row.body ?? '' },
          };
        default:
          return { state: 'in-flight', retryAfterMs: Math.max(1, Math.ceil(Number(row.left_ms))) };
      }
    }
    throw new Error('the record kept changing under ten attempts to begin');
  }

  async renew(key: string, token: bigint, leaseMs: number): Promise<boolean> {
    const { rowCount } = await this.#named('renew', [key, String(token), leaseMs]);
    return rowCount === 1;
  }

  async complete({ key, token, outcome, retentionMs }: CompleteRequest): Promise<CompleteResult> {
    const kind = outcome.kind === 'final-error' ? 'e' : 'v';
    const done = await this.#named('complete', [key, String(token), kind, outcome.body, retentionMs]);
    if (done.rowCount === 1) return { stored: true };
    // Not stored by this statement. Read afresh (a new snapshot): a done record under our token is
    // our own earlier attempt, whose reply was lost (or which committed while this one waited for
    // the row); any other token is the run that took the record over.
    const { rows } = await this.#named('current', [key]);
    const row = rows[0] as { token: string; state: string } | undefined;
    if (row && BigInt(row.token) === token && row.state === 'done') return { stored: true };
    return { stored: false, current: row ? BigInt(row.token) : null };
  }

  async abandon(key: string, token: bigint): Promise<void> {
    await this.#named('abandon', [key, String(token)]);
  }

  // Named: each connection plans a statement once (unnamed, planning is most of the begin
  // statement's time on the server). Sent as a pg.Query given its callback at construction, on a
  // client checked out here, as pool.query would do it: pg then does not copy a config object
  // property by property (a visible share of a replay's client time), and pg before 8.19 honours
  // that callback too (it ignores pool.query's callback for a query object).
  #named(statement: Statement, values: unknown[]): Promise<QueryResult> {
    const name = this.#names[statement];
    const text = this.#sql[statement];
    if (!this.#Query)
      return this.#pool.query({ name, text, values }).catch((error: unknown) => {
        throw this.#refused(error);
      });
    const Query = this.#Query;
    return new Promise<QueryResult>((resolve, reject) => {
      // The callback form, as pool.query uses it: the error listener is on the client in the same
      // step the pool hands it over (after a promise's microtask hops, an error the server sent
      // with the connection's first answer would find no listener and crash the process).
      this.#pool.connect((connectError, client) => {
        if (connectError || !client) {
          reject(this.#refused(connectError ?? new Error('pool.connect gave no client')));
          return;
        }
        let settled = false;
        const finish = (error: Error | null | undefined, result?: QueryResult) => {
          if (settled) return;
          settled = true;
          client.removeListener('error', finish);
          // As pool.query: an error (the query's or the connection's) ends this connection.
          client.release(error ?? undefined);
          if (error) reject(this.#refused(error));
          else resolve(result as QueryResult);
        };
        client.on('error', finish); // a connection error while checked out must not crash the process
        const query = new Query(text, values, finish);
        query.name = name;
        try {
          client.query(query as Parameters<PoolClient['query']>[0]);
        } catch (error) {
          finish(error as Error);
        }
      });
    });
  }

  /**
   * A refusal of our role or certificates (wrong password, pg_hba.conf, a missing grant) as
   * AuthenticationError, which the store does not retry as it does an outage; else the error.
   */
  #refused(error: unknown): unknown {
    return authenticationError(error, whereOf(this.#pool.options)) ?? error;
  }

  /** Expired rows are deleted in small batches about once a minute, by whichever store is busy. */
  #sweepNowAndThen(): void {
    const now = Date.now();
    if (now - this.#lastSweep < SWEEP_EVERY_MS) return;
    this.#lastSweep = now;
    this.#pool.query(this.#sql.sweep).catch(() => undefined); // the next sweep retries
  }

  async close(): Promise<void> {
    await this.#pool.end();
  }
}

function statements(t: string) {
  return {
    create: `CREATE TABLE IF NOT EXISTS ${t} (
        key text PRIMARY KEY,
        payload_hash text NOT NULL,
        attempt text NOT NULL,
        state text NOT NULL,
        token bigint NOT NULL,
        lease_until timestamptz NOT NULL,
        outcome text,
        body text,
        created_at timestamptz NOT NULL,
        completed_at timestamptz,
        expires_at timestamptz NOT NULL);
      CREATE INDEX IF NOT EXISTS ${t}_expires ON ${t} (expires_at);
      CREATE SEQUENCE IF NOT EXISTS ${t}_tokens;
      SELECT setval('${t}_tokens', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
        FROM ${t}_tokens WHERE NOT is_called;`,
    // A replay only reads: the record is looked up first, and the INSERT (with its nextval) runs
    // only when there is none. A concurrent insert of the same key makes it a no-op (no row: asked
    // again). The decision is made here, in the order begin() documents: our own start (adopt),
    // another payload while unexpired (mismatch), expired or lease over (takeover), done, running.
    begin: `WITH found AS (
        SELECT token, payload_hash, attempt, state, outcome, body, lease_until, expires_at
        FROM ${t} WHERE key = $1),
      started AS (
        INSERT INTO ${t} (key, payload_hash, attempt, state, token, lease_until, created_at, expires_at)
        SELECT $1, $2, $5, 'running', nextval('${t}_tokens'), now() + $3 * interval '1 ms', now(),
               now() + $4 * interval '1 ms'
        WHERE NOT EXISTS (SELECT 1 FROM found)
        ON CONFLICT (key) DO NOTHING
        RETURNING token)
      SELECT 's' AS s, token::text AS token, NULL::text AS body, 0::float8 AS left_ms FROM started
      UNION ALL
      SELECT CASE
          WHEN attempt = $5 AND state = 'running' THEN 'a'
          WHEN expires_at > now() AND payload_hash <> $2 THEN 'm'
          WHEN expires_at <= now() OR (state = 'running' AND lease_until <= now()) THEN 't'
          WHEN state = 'done' THEN CASE WHEN outcome = 'e' THEN 'e' ELSE 'v' END
          ELSE 'r' END,
        token::text, CASE WHEN state = 'done' THEN body END,
        extract(epoch FROM lease_until - now()) * 1000
      FROM found`,
    takeover: `UPDATE ${t} SET payload_hash = $3, attempt = $6, state = 'running', token = nextval('${t}_tokens'),
        lease_until = now() + $4 * interval '1 ms', outcome = NULL, body = NULL, completed_at = NULL,
        created_at = CASE WHEN expires_at <= now() THEN now() ELSE created_at END,
        expires_at = now() + $5 * interval '1 ms'
      WHERE key = $1 AND token = $2
        AND (expires_at <= now() OR (state = 'running' AND lease_until <= now() AND payload_hash = $3))
      RETURNING token::text`,
    renew: `UPDATE ${t} SET lease_until = now() + $3 * interval '1 ms',
        expires_at = greatest(expires_at, now() + $3 * interval '1 ms')
      WHERE key = $1 AND token = $2 AND state = 'running'`,
    // The fenced completion's usual case is one indexed UPDATE; `current` explains a refusal.
    complete: `UPDATE ${t} SET state = 'done', outcome = $3, body = $4, completed_at = now(),
        expires_at = now() + $5 * interval '1 ms'
      WHERE key = $1 AND token = $2 AND state = 'running'`,
    current: `SELECT token::text, state FROM ${t} WHERE key = $1`,
    abandon: `UPDATE ${t} SET lease_until = now() WHERE key = $1 AND token = $2 AND state = 'running'`,
    sweep: `DELETE FROM ${t} WHERE ctid IN (SELECT ctid FROM ${t} WHERE expires_at < now() LIMIT 1000)`,
  };
}
