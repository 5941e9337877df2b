import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import type { NodeRedisClient } from '../../adapters/redis/node-redis.js';
import { lockKeys } from '../../adapters/redis/scripts.js';
import * as semaphores from '../../src/compat/redis-semaphore/index.js';
import { Redlock } from '../../src/compat/redlock/index.js';
import type { LockProvider } from '../../src/index.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// Issue #18: the facades add no round trip. Each case runs N acquire + release cycles through the
// native API and through a facade on a private Redis, and compares the server's own count of every
// command run meanwhile (INFO commandstats). Only the commands a client sends are compared: the
// EVALSHAs (every fencekit call is one script) and PUBLISHes. Commands inside a script can take a
// time-dependent branch (a PEXPIRE run or not: seen 9 vs 10 in CI), so they are not compared; the
// round trips are deterministic, so the two must be equal, not close.

const CYCLES = 10;
/** Commands only a client sends (a script's own calls are counted under their own names). */
const ROUND_TRIPS = new Set(['evalsha', 'eval', 'evalsha_ro', 'eval_ro', 'publish', 'spublish']);

let server: ServerGroup;
let url: string;
/** Reads INFO and probes the queue; its own commands are left out of the counts. */
let probe: Redis;
const closers: Array<() => unknown> = [];

beforeAll(async () => {
  // faults: a private server even when the environment names a shared one, whose other clients'
  // commands would be counted too.
  server = await startServers('redis', { faults: true });
  url = endpoint(server, 'REDIS_URL');
  probe = new Redis(url);
}, 90_000);
afterAll(async () => {
  await Promise.allSettled(closers.map((close) => close()));
  probe?.disconnect();
  await server?.stop();
});

type Counts = Record<string, number>;

async function commandStats(): Promise<Counts> {
  const text = await probe.info('commandstats');
  const counts: Counts = {};
  for (const [, name, calls] of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    counts[name as string] = Number(calls);
  }
  return counts;
}

/** The commands Redis ran while `run` ran, without the probe's own (INFO, and `probeCalls`). */
async function commandsDuring(
  run: () => Promise<void>,
  probeCalls: () => Counts = () => ({}),
): Promise<Counts> {
  const before = await commandStats();
  await run();
  const after = await commandStats();
  const delta: Counts = {};
  const probed = probeCalls();
  for (const [name, calls] of Object.entries(after)) {
    const ran = calls - (before[name] ?? 0) - (probed[name] ?? 0) - (name === 'info' ? 1 : 0);
    if (ran !== 0 && ROUND_TRIPS.has(name)) delta[name] = ran;
  }
  return delta;
}

/** `cycle` once to warm up (scripts loaded, connections open), then the commands of CYCLES more. */
async function commandsOfCycles(cycle: () => Promise<void>): Promise<Counts> {
  await cycle();
  return commandsDuring(async () => {
    for (let i = 0; i < CYCLES; i++) await cycle();
  });
}

async function ioredisClient(): Promise<Redis> {
  const client = new Redis(url);
  closers.push(() => client.disconnect());
  await client.ping(); // connected (and its ready check done) before anything is counted
  return client;
}

async function nodeRedisClient(): Promise<NodeRedisClient> {
  const client = (await createClient({ url }).connect()) as unknown as NodeRedisClient;
  closers.push(() => client.close?.() ?? client.quit?.());
  return client;
}

function nativeOver(client: Redis | NodeRedisClient, options: { maxPollMs?: number } = {}): LockProvider {
  const provider = new RedisLockProvider({ client, ...options });
  closers.push(() => provider.close());
  return provider;
}

const key = () => uniqueKey('round-trips').replace(/\//g, ':');

describe('uncontended acquire + release: a facade sends what the native API sends', () => {
  it('redlock v5 acquire / release over an ioredis client = provider.acquire / lock.release', async () => {
    const native = nativeOver(await ioredisClient());
    const nativeKey = key();
    const expected = await commandsOfCycles(async () => {
      const lock = await native.acquire(nativeKey, { ttlMs: 5_000, waitMs: 2_000 });
      await lock.release();
    });
    const redlock = new Redlock([await ioredisClient()]);
    const facadeKey = key();
    const actual = await commandsOfCycles(async () => {
      const lock = await redlock.acquire([facadeKey], 5_000);
      await lock.release();
    });
    expect(expected.evalsha).toBeGreaterThanOrEqual(2 * CYCLES); // the acquire and release scripts
    expect(actual).toEqual(expected);
    await redlock.quit();
  });

  it('redlock v4 lock / unlock and v5 using = provider.acquire / lock.release', async () => {
    const native = nativeOver(await ioredisClient());
    const nativeKey = key();
    const expected = await commandsOfCycles(async () => {
      const lock = await native.acquire(nativeKey, { ttlMs: 5_000, waitMs: 2_000 });
      await lock.release();
    });
    const redlock = new Redlock([await ioredisClient()]);
    const v4Key = key();
    const v4 = await commandsOfCycles(async () => {
      const lock = await redlock.lock(v4Key, 5_000);
      await lock.unlock();
    });
    const usingKey = key();
    const using = await commandsOfCycles(() => redlock.using([usingKey], 5_000, async () => undefined));
    expect(v4).toEqual(expected);
    expect(using).toEqual(expected);
    await redlock.quit();
  });

  it('redis-semaphore Mutex over an ioredis client (a new Mutex per use) = provider.acquire / lock.release', async () => {
    const native = nativeOver(await ioredisClient());
    const nativeKey = key();
    const expected = await commandsOfCycles(async () => {
      const lock = await native.acquire(nativeKey, { ttlMs: 10_000, waitMs: 10_000 });
      await lock.release();
    });
    const client = await ioredisClient();
    const facadeKey = key();
    const actual = await commandsOfCycles(async () => {
      const mutex = new semaphores.Mutex(client, facadeKey);
      await mutex.acquire();
      await mutex.release();
    });
    expect(actual).toEqual(expected);
  });

  it('redis-semaphore Mutex over a node-redis client = the native API over that client', async () => {
    const native = nativeOver(await nodeRedisClient());
    const nativeKey = key();
    const expected = await commandsOfCycles(async () => {
      const lock = await native.acquire(nativeKey, { ttlMs: 10_000, waitMs: 10_000 });
      await lock.release();
    });
    const client = await nodeRedisClient();
    const facadeKey = key();
    const actual = await commandsOfCycles(async () => {
      const mutex = new semaphores.Mutex(client, facadeKey);
      await mutex.acquire();
      await mutex.release();
    });
    expect(actual).toEqual(expected);
  });

  it('redis-semaphore Semaphore and MultiSemaphore = provider.semaphore(…).acquire / permit.release', async () => {
    const native = nativeOver(await ioredisClient());
    const nativeName = key();
    const one = await commandsOfCycles(async () => {
      const permit = await native.semaphore?.(nativeName, { limit: 3 }).acquire({ ttlMs: 10_000 });
      await permit?.release();
    });
    const two = await commandsOfCycles(async () => {
      const permit = await native
        .semaphore?.(nativeName, { limit: 3 })
        .acquire({ ttlMs: 10_000, permits: 2 });
      await permit?.release();
    });
    const client = await ioredisClient();
    const facadeName = key();
    const semaphore = await commandsOfCycles(async () => {
      const s = new semaphores.Semaphore(client, facadeName, 3);
      await s.acquire();
      await s.release();
    });
    const multi = await commandsOfCycles(async () => {
      const s = new semaphores.MultiSemaphore(client, facadeName, 3, 2);
      await s.acquire();
      await s.release();
    });
    expect(one.evalsha).toBeGreaterThanOrEqual(2 * CYCLES);
    expect(semaphore).toEqual(one);
    expect(multi).toEqual(two);
  });
});

describe('a hand-over (one holder, one queued waiter): a facade sends what the native API sends', () => {
  /**
   * Holder takes the key, waiter queues behind it (seen in the queue by the probe), holder releases
   * (handing the key over), waiter gets it and releases. The providers poll only every 60 s, so the
   * only commands are those of the hand-over itself, whatever the machine's speed.
   */
  async function handOverCommands(
    name: string,
    take: (side: 'holder' | 'waiter') => Promise<() => Promise<unknown>>,
  ): Promise<Counts> {
    const queue = lockKeys('fencekit:', name).queue;
    let probes = 0;
    const handOver = async () => {
      const releaseHolder = await take('holder');
      const waiting = take('waiter');
      // Queued: the waiter's first attempt ran (bounded: 2,000 probes, 5 ms apart).
      for (let i = 0; i < 2_000 && (await probe.zcard(queue)) === 0; i++) {
        probes += 1;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      probes += 1;
      // Its reply reached the waiter before the probe's (one server, in order); a few ms more let
      // it start listening for the release notice.
      await new Promise((resolve) => setTimeout(resolve, 20));
      await releaseHolder();
      const releaseWaiter = await waiting;
      await releaseWaiter();
    };
    await handOver(); // warm-up: scripts loaded, notice subscriptions open
    probes = 0;
    return commandsDuring(
      async () => {
        for (let i = 0; i < 3; i++) await handOver();
      },
      () => ({ llen: probes }),
    );
  }

  async function providers(): Promise<Record<'holder' | 'waiter', LockProvider>> {
    return {
      holder: nativeOver(await ioredisClient(), { maxPollMs: 60_000 }),
      waiter: nativeOver(await ioredisClient(), { maxPollMs: 60_000 }),
    };
  }

  it('redlock and redis-semaphore Mutex over the providers = provider.acquire / lock.release', async () => {
    const native = await providers();
    const nativeKey = key();
    const expected = await handOverCommands(nativeKey, async (side) => {
      const lock = await native[side].acquire(nativeKey, { ttlMs: 30_000, waitMs: 20_000 });
      return () => lock.release();
    });

    const overRedlock = await providers();
    const redlock = {
      holder: new Redlock(overRedlock.holder, { retryCount: 100, retryDelay: 200 }),
      waiter: new Redlock(overRedlock.waiter, { retryCount: 100, retryDelay: 200 }),
    };
    const redlockKey = key();
    const viaRedlock = await handOverCommands(redlockKey, async (side) => {
      const lock = await redlock[side].acquire([redlockKey], 30_000);
      return () => lock.release();
    });

    const overMutex = await providers();
    const mutexKey = key();
    const viaMutex = await handOverCommands(`mutex:${mutexKey}`, async (side) => {
      const mutex = new semaphores.Mutex(overMutex[side], mutexKey, {
        lockTimeout: 30_000,
        acquireTimeout: 20_000,
      });
      await mutex.acquire();
      return () => mutex.release();
    });

    expect(expected.publish).toBeGreaterThan(0); // the release notice: a real hand-over was counted
    expect(viaRedlock).toEqual(expected);
    expect(viaMutex).toEqual(expected);
  });
});
