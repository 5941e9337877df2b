// Idempotency keys: what store.run costs per request (a new key: begin + fn + fenced completion; a
// replay: one begin that finds the result) against the bare writes any idempotency store must make
// on the same server: INSERT + UPDATE of a record (new key), one write attempt that finds it (replay).
import { createIdempotencyStore } from 'fencekit/idempotency';
import { Redis } from 'ioredis';
import pg from 'pg';
import { startServer } from './servers.mjs';
import { measureSideBySide, printTable } from './table.mjs';

const fn = async () => ({ charge: 'ch_1', amountCents: 4200 });
const payload = { order: 42, amountCents: 4200, card: '4242' };
const body = JSON.stringify({ charge: 'ch_1', amountCents: 4200 });
const options = { rounds: 5, iterations: 300, warmup: 200 };

export async function benchIdempotency() {
  const [postgres, redis] = await Promise.all([
    startServer('postgres.sh', [], 'FENCEKIT_PG_URL'),
    startServer('redis.sh', ['1'], 'FENCEKIT_REDIS_URL'),
  ]);
  try {
    await benchPostgres(postgres.vars.get('PG_URL') ?? postgres.vars.get('URL'));
    await benchRedis(redis.vars.get('REDIS_URL') ?? redis.vars.get('URL'));
  } finally {
    await Promise.all([postgres.stop(), redis.stop()]);
  }
}

async function benchPostgres(url) {
  const raw = new pg.Client({ connectionString: url });
  await raw.connect();
  await raw.query(`CREATE TABLE IF NOT EXISTS bench_bare (key text PRIMARY KEY, payload_hash text, state text,
    token bigint, lease_until timestamptz, body text, expires_at timestamptz)`);
  const store = await createIdempotencyStore(url, { maxConnections: 1 });
  await store.run('warm', payload, fn); // creates the table
  const replayKey = `replay-${crypto.randomUUID()}`;
  await store.run(replayKey, payload, fn);
  const hash = store.hash(payload);
  await raw.query(`INSERT INTO bench_bare VALUES ($1, $2, 'done', 1, now(), $3, now() + interval '1 day')`, [
    replayKey,
    hash,
    body,
  ]);
  const insert = `INSERT INTO bench_bare VALUES ($1, $2, 'running', 1, now() + interval '30 s', NULL,
    now() + interval '1 day') ON CONFLICT (key) DO NOTHING RETURNING key`;
  const rows = await measureSideBySide(
    {
      'bare INSERT + UPDATE of a record (new key)': async () => {
        const key = crypto.randomUUID();
        await raw.query(insert, [key, hash]);
        await raw.query(`UPDATE bench_bare SET state = 'done', body = $2 WHERE key = $1 AND token = 1`, [
          key,
          body,
        ]);
      },
      'fencekit store.run, new key': () => store.run(crypto.randomUUID(), payload, fn),
      'bare INSERT … ON CONFLICT finding the record': () => raw.query(insert, [replayKey, hash]),
      'fencekit store.run, replay': () => store.run(replayKey, payload, fn),
    },
    options,
  );
  printPairs('PostgreSQL', rows);
  await raw.query('DROP TABLE bench_bare');
  await raw.end();
  await store.close();
}

async function benchRedis(url) {
  const raw = new Redis(url);
  const store = await createIdempotencyStore(url);
  const replayKey = `replay-${crypto.randomUUID()}`;
  await store.run(replayKey, payload, fn);
  const hash = store.hash(payload);
  // The least a script-based store does: create the hash with an expiry, later fill in the result.
  raw.defineCommand('bareBegin', {
    numberOfKeys: 1,
    lua: `if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HMGET', KEYS[1], 'h', 's', 'b') end
      redis.call('HSET', KEYS[1], 'h', ARGV[1], 's', 'r', 't', 1)
      redis.call('PEXPIRE', KEYS[1], 86400000) return 1`,
  });
  raw.defineCommand('bareComplete', {
    numberOfKeys: 1,
    lua: `redis.call('HSET', KEYS[1], 's', 'd', 'b', ARGV[1]) return 1`,
  });
  await raw.bareBegin(`bare:${replayKey}`, hash);
  const rows = await measureSideBySide(
    {
      'bare begin + complete scripts (new key)': async () => {
        const key = `bare:${crypto.randomUUID()}`;
        await raw.bareBegin(key, hash);
        await raw.bareComplete(key, body);
      },
      'fencekit store.run, new key': () => store.run(crypto.randomUUID(), payload, fn),
      'bare begin script finding the record': () => raw.bareBegin(`bare:${replayKey}`, hash),
      'fencekit store.run, replay': () => store.run(replayKey, payload, fn),
    },
    options,
  );
  printPairs('Redis', rows);
  raw.disconnect();
  await store.close();
}

/** Rows come as (floor, fencekit) pairs: each pair is its own table, the ratio against its floor. */
function printPairs(backend, rows) {
  printTable(`${backend}, idempotency: new key (1 client, loopback)`, rows.slice(0, 2));
  printTable(`${backend}, idempotency: replay (1 client, loopback)`, rows.slice(2, 4));
}
