import pgInstalled from 'pg';
// The oldest pg the peer range (^8.11.0) allows, installed under another name (a dev dependency).
import pgFloor from 'pg-floor';
import { describe, expect, it } from 'vitest';
import { BackendUnavailableError } from '../../src/errors.js';
import { IdempotencyMismatchError } from '../../src/idempotency/errors.js';
import { PostgresRecords } from '../../src/idempotency/postgres-records.js';
import { IdempotencyStore } from '../../src/idempotency/store.js';
import { FaultProxy } from '../servers/index.js';
import { useStoreServers } from './backends.js';

// The PostgreSQL store sends its statements through the pool's own pg (its Client.Query, on a client
// it checks out): every pg version the peer range allows must run it, drop a connection stuck on a
// hung server, and never leave a call unanswered. (pg before 8.19 ignores pool.query's callback for
// a query object: such a call never ends, and with query_timeout the process crashed.)
const servers = useStoreServers();

const CALL_TIMEOUT_MS = 600;

function storeOver(pg: typeof pgInstalled, url: string) {
  const pool = new pg.Pool({
    connectionString: url,
    max: 2,
    connectionTimeoutMillis: CALL_TIMEOUT_MS,
    query_timeout: CALL_TIMEOUT_MS,
  });
  return { pool, store: new IdempotencyStore(new PostgresRecords(pool), { callTimeoutMs: CALL_TIMEOUT_MS }) };
}

const versions = [
  ['installed', pgInstalled],
  ['8.11.0', pgFloor as unknown as typeof pgInstalled],
] as const;

describe.each(versions)('idempotency store on pg %s', (_version, pg) => {
  it('runs a new key once, replays it, refuses another payload', async () => {
    const { store } = storeOver(pg, servers.urls.postgres);
    const key = `k-${crypto.randomUUID()}`;
    let runs = 0;
    try {
      expect(await store.execute(key, { a: 1 }, () => ++runs)).toEqual({ value: 1, replayed: false });
      expect(await store.execute(key, { a: 1 }, () => ++runs)).toEqual({ value: 1, replayed: true });
      await expect(store.run(key, { a: 2 }, () => ++runs)).rejects.toBeInstanceOf(IdempotencyMismatchError);
      expect(runs).toBe(1);
    } finally {
      await store.close();
    }
  });

  it('partitioned: each call fails within the deadline, the stuck connections are dropped, and after healing a key runs once', async () => {
    const target = new URL(servers.urls.postgres);
    const proxy = await FaultProxy.start({ host: target.hostname, port: Number(target.port) });
    const { pool, store } = storeOver(pg, servers.urls.postgres.replace(`:${target.port}`, `:${proxy.port}`));
    let removed = 0;
    pool.on('remove', () => removed++);
    const key = `k-${crypto.randomUUID()}`;
    let runs = 0;
    try {
      await store.run(`warm-${key}`, 'p', () => 0); // a connection is open before the partition
      proxy.setMode({ kind: 'partition' });
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        const error = await store.run(key, 'p', () => ++runs, { leaseMs: 1_000 }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BackendUnavailableError);
        expect(performance.now() - started).toBeLessThan(CALL_TIMEOUT_MS + 500);
      }
      // query_timeout ended the connections that were stuck, so the pool is not left full of them.
      await expect.poll(() => removed, { timeout: 3_000 }).toBeGreaterThan(0);
      proxy.setMode({ kind: 'pass' });
      expect(await store.run(key, 'p', () => ++runs, { waitMs: 5_000 })).toBe(1);
      expect(runs).toBe(1);
    } finally {
      await store.close();
      await proxy.close();
    }
  }, 20_000);
});
