import type { Pool } from 'pg';
import type { BeginResult, CompleteResult, RecordBackend, StoredOutcome } from './records.js';

const SWEEP_EVERY_MS = 60_000;

/**
 * Records in one table, created on first use on the store's own connections (never inside a
 * caller's transaction). Times are the server's `now()`; tokens come from one sequence, so they are
 * never reused, even when a key expires and is used again.
 */
export class PostgresRecords implements RecordBackend {
  readonly name = 'postgres';
  private ready: Promise<void> | undefined;
  private lastSweep = 0;
  private readonly sql: ReturnType<typeof statements>;

  constructor(
    private readonly pool: Pool,
    private readonly table = 'fencekit_idempotency',
  ) {
    if (!/^[a-z_][a-z0-9_]{0,50}$/.test(table)) throw new Error(`bad table name "${table}"`);
    this.sql = statements(table);
    // An idle client's error (server gone) must not crash the process; the next query reports it.
    pool.on('error', () => undefined);
  }

  private setup(): Promise<void> {
    this.ready ??= (async () => {
      const client = await this.pool.connect();
      try {
        // Serialized: two processes running CREATE … IF NOT EXISTS at once can still collide.
        await client.query('BEGIN');
        await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`fencekit:${this.table}`]);
        await client.query(this.sql.create);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw error;
      } finally {
        client.release();
      }
    })().catch((error) => {
      this.ready = undefined; // retried by the next call
      throw error;
    });
    return this.ready;
  }

  async begin(key: string, hash: string, leaseMs: number, retentionMs: number): Promise<BeginResult> {
    await this.setup();
    this.sweepNowAndThen();
    // An INSERT that lost a race to a concurrent insert of the same key sees neither its own row nor
    // the other's in this statement's snapshot: then the statement is simply asked again.
    for (let attempt = 0; ; attempt++) {
      const { rows } = await this.pool.query(this.sql.begin, [key, hash, leaseMs, retentionMs]);
      const row = rows[0] as
        | {
            started: boolean;
            token: string;
            payload_hash: string;
            state: string;
            outcome: string | null;
            body: string | null;
            left_ms: number;
          }
        | undefined;
      if (!row) {
        if (attempt < 5) continue;
        throw new Error('the record could neither be inserted nor read');
      }
      if (row.started) return { state: 'started', token: BigInt(row.token) };
      if (row.payload_hash !== hash) return { state: 'mismatch' };
      if (row.state === 'done')
        return {
          state: 'completed',
          outcome: { kind: row.outcome === 'e' ? 'final-error' : 'value', body: row.body ?? '' },
        };
      return { state: 'in-flight', retryAfterMs: Math.max(1, Math.ceil(Number(row.left_ms))) };
    }
  }

  async renew(key: string, token: bigint, leaseMs: number): Promise<boolean> {
    const { rowCount } = await this.pool.query(this.sql.renew, [key, String(token), leaseMs]);
    return rowCount === 1;
  }

  async complete(
    key: string,
    token: bigint,
    outcome: StoredOutcome,
    retentionMs: number,
  ): Promise<CompleteResult> {
    const kind = outcome.kind === 'final-error' ? 'e' : 'v';
    const { rows } = await this.pool.query(this.sql.complete, [
      key,
      String(token),
      kind,
      outcome.body,
      retentionMs,
    ]);
    const row = rows[0] as { stored: boolean; current: string | null } | undefined;
    if (row?.stored) return { stored: true };
    return { stored: false, current: row?.current ? BigInt(row.current) : null };
  }

  async abandon(key: string, token: bigint): Promise<void> {
    await this.pool.query(this.sql.abandon, [key, String(token)]);
  }

  /** Expired rows are deleted in small batches about once a minute, by whichever store is busy. */
  private sweepNowAndThen(): void {
    const now = Date.now();
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    this.pool.query(this.sql.sweep).catch(() => undefined); // the next sweep retries
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

function statements(t: string) {
  return {
    create: `CREATE TABLE IF NOT EXISTS ${t} (
        key text PRIMARY KEY,
        payload_hash text NOT NULL,
        state text NOT NULL,
        token bigint NOT NULL,
        lease_until timestamptz NOT NULL,
        outcome text,
        body text,
        created_at timestamptz NOT NULL,
        completed_at timestamptz,
        expires_at timestamptz NOT NULL);
      CREATE INDEX IF NOT EXISTS ${t}_expires ON ${t} (expires_at);
      CREATE SEQUENCE IF NOT EXISTS ${t}_tokens;`,
    begin: `WITH started AS (
        INSERT INTO ${t} AS r (key, payload_hash, state, token, lease_until, created_at, expires_at)
        VALUES ($1, $2, 'running', nextval('${t}_tokens'), now() + $3 * interval '1 ms', now(),
                now() + $4 * interval '1 ms')
        ON CONFLICT (key) DO UPDATE SET
          payload_hash = EXCLUDED.payload_hash, state = 'running', token = EXCLUDED.token,
          lease_until = EXCLUDED.lease_until, outcome = NULL, body = NULL, completed_at = NULL,
          created_at = CASE WHEN r.expires_at <= now() THEN now() ELSE r.created_at END,
          expires_at = EXCLUDED.expires_at
        WHERE r.expires_at <= now()
           OR (r.state = 'running' AND r.lease_until <= now() AND r.payload_hash = EXCLUDED.payload_hash)
        RETURNING true AS started, token::text, payload_hash, state, outcome, body, 0::float8 AS left_ms)
      SELECT * FROM started
      UNION ALL
      SELECT false, token::text, payload_hash, state, outcome, body,
             extract(epoch FROM lease_until - now()) * 1000
      FROM ${t} WHERE key = $1 AND NOT EXISTS (SELECT 1 FROM started)`,
    renew: `UPDATE ${t} SET lease_until = now() + $3 * interval '1 ms',
        expires_at = greatest(expires_at, now() + $3 * interval '1 ms')
      WHERE key = $1 AND token = $2 AND state = 'running'`,
    complete: `WITH done AS (
        UPDATE ${t} SET state = 'done', outcome = $3, body = $4, completed_at = now(),
          expires_at = now() + $5 * interval '1 ms'
        WHERE key = $1 AND token = $2 AND state = 'running' RETURNING 1)
      SELECT EXISTS (SELECT 1 FROM done) AS stored, (SELECT token::text FROM ${t} WHERE key = $1) AS current`,
    abandon: `UPDATE ${t} SET lease_until = '-infinity' WHERE key = $1 AND token = $2 AND state = 'running'`,
    sweep: `DELETE FROM ${t} WHERE ctid IN (SELECT ctid FROM ${t} WHERE expires_at < now() LIMIT 1000)`,
  };
}
