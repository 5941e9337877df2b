import { fencedUpdate } from 'fencekit/postgres';
import pg from 'pg';

export type WriteResult = 'accepted' | 'rejected' | 'error';

const TABLE = 'torture_register';

/**
 * The protected storage: one PostgreSQL row per key on a server of its own (never the lock
 * backend's), written through the package's fencedUpdate. With fencing off (the control run) it is
 * a plain UPDATE, so the checker must see stale writes accepted.
 */
export class FencedStorage {
  #client: pg.Client | undefined;

  constructor(
    readonly url: string,
    readonly fencing: boolean,
  ) {}

  /** Creates the table and one row per key (idempotent; the runner calls it once). */
  async setup(keys: readonly string[]): Promise<void> {
    const client = await this.#connect();
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${TABLE} (key text PRIMARY KEY, value text, fence_token bigint)`,
    );
    for (const key of keys) {
      await client.query(`INSERT INTO ${TABLE} (key) VALUES ($1) ON CONFLICT DO NOTHING`, [key]);
    }
  }

  async write(key: string, token: bigint, value: string): Promise<WriteResult> {
    try {
      const client = await this.#connect();
      if (!this.fencing) {
        await client.query(`UPDATE ${TABLE} SET value = $2, fence_token = $3 WHERE key = $1`, [
          key,
          value,
          token.toString(),
        ]);
        return 'accepted';
      }
      const applied = await fencedUpdate(client, { table: TABLE, set: { value }, where: { key }, token });
      return applied ? 'accepted' : 'rejected';
    } catch {
      // A failed write is recorded as 'error' (neither accepted nor rejected); reconnect next time.
      this.#drop();
      return 'error';
    }
  }

  /** A plain read of `key`'s row: its token (null: never written); throws when the storage fails. */
  async read(key: string): Promise<{ value: string | null; token: string | null }> {
    try {
      const client = await this.#connect();
      const { rows } = await client.query(
        `SELECT value, fence_token::text AS token FROM ${TABLE} WHERE key = $1`,
        [key],
      );
      return rows[0] ?? { value: null, token: null };
    } catch (error) {
      this.#drop();
      throw error;
    }
  }

  /** The rows whose key starts with `prefix`: who wrote each last, with which token (null: never). */
  async rows(prefix: string): Promise<{ key: string; value: string | null; token: string | null }[]> {
    const client = await this.#connect();
    const { rows } = await client.query(
      `SELECT key, value, fence_token::text AS token FROM ${TABLE} WHERE starts_with(key, $1) ORDER BY key`,
      [prefix],
    );
    return rows;
  }

  async close(): Promise<void> {
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }

  async #connect(): Promise<pg.Client> {
    if (this.#client) return this.#client;
    // Every query has a deadline: a stuck write becomes an 'error', never a hung worker.
    const client = new pg.Client({
      connectionString: this.url,
      query_timeout: 3_000,
      statement_timeout: 3_000,
      connectionTimeoutMillis: 3_000,
    });
    client.on('error', () => this.#drop());
    this.#client = client;
    try {
      await client.connect();
    } catch (error) {
      this.#drop();
      throw error;
    }
    return client;
  }

  #drop(): void {
    const client = this.#client;
    this.#client = undefined;
    client?.end().catch(() => undefined);
  }
}
