// PostgreSQL: fencekit (lock + durable token) against raw advisory-lock round trips and the
// `advisory-lock` package (no token), on one throwaway local cluster; then handoff with 10 contenders.
import advisoryLockModule from 'advisory-lock';
import { PostgresLockProvider } from 'fencekit/postgres';
import pg from 'pg';
import { startServer } from './servers.mjs';
import { measure, printTable } from './table.mjs';

const advisoryLock = advisoryLockModule.default ?? advisoryLockModule;

export async function benchPostgres() {
  const server = await startServer('postgres.sh', [], 'FENCEKIT_PG_URL');
  const url = server.vars.get('PG_URL') ?? server.vars.get('URL');
  try {
    await uncontended(url);
    await handoff(url);
  } finally {
    await server.stop();
  }
}

async function uncontended(url) {
  const raw = new pg.Client({ connectionString: url });
  await raw.connect();
  const provider = new PostgresLockProvider({ connectionString: url });
  const mutex = advisoryLock(url)('bench/advisory-lock');
  const rows = [
    {
      name: 'raw floor: pg_try_advisory_lock + pg_advisory_unlock',
      ...(await measure(async () => {
        await raw.query('SELECT pg_try_advisory_lock(42)');
        await raw.query('SELECT pg_advisory_unlock(42)');
      })),
    },
    {
      name: 'fencekit acquire + release (with durable token)',
      ...(await measure(async () => {
        const lock = await provider.acquire('bench/uncontended');
        await lock.release();
      })),
    },
    {
      name: 'advisory-lock package lock() + unlock() (no token)',
      ...(await measure(async () => {
        const unlock = await mutex.lock();
        await unlock();
      })),
    },
  ];
  printTable('PostgreSQL, uncontended acquire + release (1 client, loopback)', rows);
  await raw.end();
  await provider.close();
}

/** 10 contenders on one key: release() until a *different* client holds. */
async function handoff(url) {
  const clients = Array.from(
    { length: 10 },
    () => new PostgresLockProvider({ connectionString: url, maxConnections: 2 }),
  );
  const samples = [];
  let releasedAt = 0n;
  let lastHolder = -1;
  const deadline = performance.now() + 5_000;
  await Promise.all(
    clients.map(async (client, index) => {
      while (performance.now() < deadline) {
        const lock = await client.acquire('bench/handoff');
        if (releasedAt !== 0n && lastHolder !== index)
          samples.push(Number(process.hrtime.bigint() - releasedAt) / 1_000);
        lastHolder = index;
        await new Promise((r) => setTimeout(r, 1));
        releasedAt = process.hrtime.bigint();
        await lock.release();
      }
    }),
  );
  samples.sort((a, b) => a - b);
  printTable('PostgreSQL, handoff with 10 contenders (release() → another client holds)', [
    {
      name: `fencekit (${samples.length} handoffs in 5 s)`,
      p50: samples[samples.length >> 1],
      p99: samples[Math.floor(samples.length * 0.99)],
    },
  ]);
  await Promise.all(clients.map((c) => c.close()));
}
