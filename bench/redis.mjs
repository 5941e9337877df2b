// Redis: fencekit (fair and not) against `redlock@4` and `redis-semaphore`'s Mutex on one local
// Redis: uncontended acquire + release, then 10 contenders for 3 s each: handoff latency (release →
// a *different* client holds), handoffs/s, and how evenly the acquisitions spread over the clients.
// Contenders release as soon as they hold the key, so the figures measure the locks, not a sleep.
import { Mutex as FacadeMutex } from 'fencekit/compat/redis-semaphore';
import { Redlock as FacadeRedlock } from 'fencekit/compat/redlock';
import { RedisLockProvider } from 'fencekit/redis';
import { Redis } from 'ioredis';
import { Mutex } from 'redis-semaphore';
import Redlock from 'redlock';
import { benchFacadeOverhead } from './facade-overhead.mjs';
import { startServer } from './servers.mjs';
import { measureSideBySide, printTable } from './table.mjs';

const COMPARE_AND_DELETE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

export async function benchRedis() {
  const server = await startServer('redis.sh', ['1'], 'FENCEKIT_REDIS_URL');
  const url = server.vars.get('REDIS_URL') ?? server.vars.get('URL');
  try {
    await uncontended(url);
    await contention(url);
    await benchFacadeOverhead(url);
  } finally {
    await server.stop();
  }
}

/** `npm run bench facade`: only the facades' overhead against the native API (bench/facade-overhead.mjs). */
export async function benchFacade() {
  const server = await startServer('redis.sh', ['1'], 'FENCEKIT_REDIS_URL');
  try {
    await benchFacadeOverhead(server.vars.get('REDIS_URL') ?? server.vars.get('URL'));
  } finally {
    await server.stop();
  }
}

function fencekit(options) {
  const p = new RedisLockProvider(options);
  return {
    acquire: async (key) => {
      const l = await p.acquire(key, { ttlMs: 5_000 });
      return () => l.release();
    },
    close: () => p.close(),
  };
}

/** Each contender: { acquire(key) → release function }. */
const contenders = {
  'fencekit (fair, default)': (url) => fencekit({ url }),
  'fencekit (fair: false)': (url) => fencekit({ url, fair: false }),
  // The facades over an ioredis client, as a migrating app calls them: they must add no round trip.
  'fencekit/compat/redlock (v5 acquire)': (url) => {
    const client = new Redis(url);
    const redlock = new FacadeRedlock([client], { retryCount: -1 });
    return {
      acquire: async (key) => {
        const l = await redlock.acquire([key], 5_000);
        return () => l.release();
      },
      close: () => redlock.quit(),
    };
  },
  'fencekit/compat/redis-semaphore Mutex': (url) => {
    const client = new Redis(url);
    return {
      acquire: async (key) => {
        const m = new FacadeMutex(client, key, { lockTimeout: 5_000, acquireTimeout: 60_000 });
        await m.acquire();
        return () => m.release();
      },
      close: async () => client.disconnect(),
    };
  },
  'redlock@4 (retryDelay 10 ms)': (url) => {
    const client = new Redis(url);
    const redlock = new Redlock([client], { retryCount: -1, retryDelay: 10, retryJitter: 5 });
    return {
      acquire: async (key) => {
        const l = await redlock.lock(key, 5_000);
        return () => l.unlock();
      },
      close: async () => client.disconnect(),
    };
  },
  'redis-semaphore Mutex (retryInterval 10 ms)': (url) => {
    const client = new Redis(url);
    return {
      acquire: async (key) => {
        const m = new Mutex(client, key, { lockTimeout: 5_000, acquireTimeout: 60_000, retryInterval: 10 });
        await m.acquire();
        return () => m.release();
      },
      close: async () => client.disconnect(),
    };
  },
};

async function uncontended(url) {
  const raw = new Redis(url);
  raw.defineCommand('compareAndDelete', { numberOfKeys: 1, lua: COMPARE_AND_DELETE });
  const cases = {
    'raw floor: SET NX PX + compare-and-delete': async () => {
      await raw.set('bench:floor', 'me', 'PX', 5_000, 'NX');
      await raw.compareAndDelete('bench:floor', 'me');
    },
  };
  const opened = [];
  for (const [name, make] of Object.entries(contenders)) {
    const c = make(url);
    opened.push(c);
    cases[name] = async () => (await c.acquire(`bench:uncontended:${name}`))();
  }
  const rows = await measureSideBySide(cases);
  await Promise.all(opened.map((c) => c.close()));
  printTable('Redis, uncontended acquire + release (1 client, loopback)', rows);
  raw.disconnect();
}

async function contention(url) {
  console.log('\nRedis, 10 contenders on one key for 3 s each (no hold: release at once)');
  console.log(
    `${'client'.padEnd(44)} ${'handoff p50 µs'.padStart(15)} ${'p99 µs'.padStart(9)} ${'handoffs/s'.padStart(11)} ${'acq/s'.padStart(7)} ${'min..max per client'.padStart(20)}`,
  );
  for (const [name, make] of Object.entries(contenders)) {
    const clients = Array.from({ length: 10 }, () => make(url));
    const counts = new Array(10).fill(0);
    const handoffs = [];
    let releasedAt = 0n;
    let last = -1;
    let acquisitions = 0;
    const key = `bench:contended:${name}`;
    const deadline = performance.now() + 3_000;
    await Promise.all(
      clients.map(async (client, index) => {
        while (performance.now() < deadline) {
          const release = await client.acquire(key);
          acquisitions += 1;
          counts[index] += 1;
          if (last !== index && releasedAt !== 0n)
            handoffs.push(Number(process.hrtime.bigint() - releasedAt) / 1_000);
          last = index;
          releasedAt = process.hrtime.bigint();
          await release();
        }
      }),
    );
    handoffs.sort((a, b) => a - b);
    const p50 = handoffs[handoffs.length >> 1] ?? Number.NaN;
    const p99 = handoffs[Math.floor(handoffs.length * 0.99)] ?? Number.NaN;
    console.log(
      `${name.padEnd(44)} ${p50.toFixed(0).padStart(15)} ${p99.toFixed(0).padStart(9)} ${(handoffs.length / 3).toFixed(0).padStart(11)} ${(acquisitions / 3).toFixed(0).padStart(7)} ${`${Math.min(...counts)}..${Math.max(...counts)}`.padStart(20)}`,
    );
    await Promise.all(clients.map((c) => c.close()));
  }
}
