import calculateSlot from 'cluster-key-slot';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fenceKeyOf } from '../../adapters/redis/classic-scripts.js';
import * as semaphores from '../../src/compat/redis-semaphore/index.js';
import { ExecutionError, Redlock } from '../../src/compat/redlock/index.js';
import { LockLostError } from '../../src/errors.js';
import { eventually, uniqueKey } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// What the originals' own suites check, kept here for the facades over Redis clients: the originals'
// keys, their argument checks and messages, their retry accounting, acquiredExternally, and the
// loss signal a lock of the originals' layout still has.

let redisServer: ServerGroup;
let raw: Redis;
const clients: Redis[] = [];
const client = () => {
  const made = new Redis(endpoint(redisServer, 'REDIS_URL'));
  clients.push(made);
  return made;
};
beforeAll(async () => {
  redisServer = await startServers('redis');
  raw = client();
}, 60_000);
afterAll(async () => {
  for (const made of clients) made.disconnect();
  await redisServer?.stop();
});

const key = () => uniqueKey('drop-in').replace(/\//g, ':');

describe("redlock facade on redlock's layout", () => {
  it('sets the resource key to the lock value for the duration, and deletes it on release', async () => {
    const redlock = new Redlock([client()]);
    const resource = key();
    const lock = await redlock.acquire([resource], 60_000);
    expect(await raw.get(resource)).toBe(lock.value);
    expect(await raw.pttl(resource)).toBeGreaterThan(50_000);
    await lock.release();
    expect(await raw.get(resource)).toBeNull();
  });

  it('takes any integer duration (here 2 days and 30 ms), refuses a fraction with redlock message', async () => {
    const redlock = new Redlock([client()]);
    const long = await redlock.acquire([key()], 2 * 86_400_000);
    expect(long.expiration).toBeGreaterThan(Date.now() + 86_400_000);
    await long.release();
    const short = await redlock.acquire([key()], 30);
    await short.release().catch(() => undefined); // it may have expired already
    await expect(redlock.acquire([key()], 1.5)).rejects.toThrow(
      'Duration must be an integer value in milliseconds.',
    );
  });

  it('a refused acquire has retryCount + 1 attempts, each with the vote against', async () => {
    const redlock = new Redlock([client()], { retryCount: 3, retryDelay: 10, retryJitter: 0 });
    const resource = key();
    const held = await redlock.acquire([resource], 10_000);
    const error = await redlock.acquire([resource], 10_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ExecutionError);
    const attempts = await Promise.all((error as ExecutionError).attempts);
    expect(attempts).toHaveLength(4);
    for (const stats of attempts) expect(stats.votesAgainst.size).toBe(1);
    await held.release();
  });

  it('tokens rise per resource; a lock whose duration passed is no longer held (signal aborted)', async () => {
    const redlock = new Redlock([client()]);
    const resource = key();
    const first = await redlock.acquire([resource], 400);
    const aborted = new Promise<unknown>((resolve) =>
      first.signal.addEventListener('abort', () => resolve(first.signal.reason), { once: true }),
    );
    const reason = await aborted; // by the deadline alone: nothing was released
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe('unconfirmed');
    expect(first.expiration).toBe(0);
    await eventually('the key expired', async () => (await raw.exists(resource)) === 0);
    const second = await redlock.acquire([resource], 10_000);
    expect(second.fencingToken).toBeGreaterThan(first.fencingToken);
    await second.release();
  });

  it("layout 'fencekit' takes fencekit's keys instead", async () => {
    const redlock = new Redlock([client()], { layout: 'fencekit' });
    const resource = key();
    const lock = await redlock.acquire([resource], 10_000);
    expect(await raw.exists(resource)).toBe(0);
    await lock.release();
  });
});

describe("redis-semaphore facade on redis-semaphore's layout", () => {
  it('exports the Redlock classes, and they lock on a majority of the clients', async () => {
    const k = key();
    // Three independent keyspaces (databases 0, 1, 2 of one server) stand for three instances.
    const three = [0, 1, 2].map((db) => {
      const made = new Redis(endpoint(redisServer, 'REDIS_URL'), { db });
      clients.push(made);
      return made;
    });
    const mutex = new semaphores.RedlockMutex(three, k);
    await mutex.acquire();
    expect(await raw.get(`mutex:${k}`)).toBe(mutex.identifier);
    await mutex.release();
    const semaphore = new semaphores.RedlockSemaphore(three, k, 2);
    await semaphore.acquire();
    expect(await raw.zrange(`semaphore:${k}`, 0, -1)).toEqual([semaphore.identifier]);
    await semaphore.release();
    const multi = new semaphores.RedlockMultiSemaphore(three, k, 4, 2);
    await multi.acquire();
    expect((await raw.zrange(`semaphore:${k}`, 0, -1)).sort()).toEqual(
      [`${multi.identifier}_0`, `${multi.identifier}_1`].sort(),
    );
    await multi.release();
    for (const instance of three) expect(await instance.exists(`semaphore:${k}`)).toBe(0);
  });

  it('checks its arguments with redis-semaphore messages', () => {
    const c = raw;
    expect(() => new semaphores.Mutex(null, 'k')).toThrow('"client" is required');
    expect(() => new semaphores.Mutex(c, '')).toThrow('"key" is required');
    expect(() => new semaphores.Mutex(c, 1 as unknown as string)).toThrow('"key" must be a string');
    expect(() => new semaphores.Semaphore(c, 'k', 0)).toThrow('"limit" is required');
    expect(() => new semaphores.Semaphore(c, 'k', '2' as unknown as number)).toThrow(
      '"limit" must be a number',
    );
    expect(() => new semaphores.MultiSemaphore(c, 'k', 3, 0)).toThrow('"permits" is required');
    expect(() => new semaphores.RedlockMutex(c as unknown as Redis[], 'k')).toThrow(
      '"clients" array is required',
    );
    expect(() => new semaphores.Mutex(c, 'k', { acquiredExternally: true })).toThrow(
      'acquiredExternally=true meanless without custom identifier',
    );
    expect(
      () => new semaphores.Mutex(c, 'k', { identifier: 'a', externallyAcquiredIdentifier: 'b' }),
    ).toThrow('Invalid usage. Use custom identifier and acquiredExternally: true');
    expect(new semaphores.Mutex(c, 'k', { identifierSuffix: 'abc' }).identifier).toMatch(
      /^[0-9a-f-]{36}-abc$/,
    );
  });

  it('acquiredExternally adopts the grant another object took under its identifier, with a token of its own above it', async () => {
    const k = key();
    const scheduler = new semaphores.Mutex(client(), k, { refreshInterval: 0 });
    await scheduler.acquire();
    const handler = new semaphores.Mutex(client(), k, {
      identifier: scheduler.identifier,
      acquiredExternally: true,
    });
    await handler.acquire();
    expect(handler.isAcquired).toBe(true);
    expect(handler.fencingToken).toBeGreaterThan(scheduler.fencingToken ?? Number.POSITIVE_INFINITY);
    await handler.release();
    expect(await raw.exists(`mutex:${k}`)).toBe(0);
  });

  it("an aborted acquire rejects with the signal's own reason", async () => {
    const k = key();
    const holder = new semaphores.Mutex(client(), k);
    await holder.acquire();
    const reason = new Error('test: the request went away');
    const controller = new AbortController();
    const waiting = new semaphores.Mutex(client(), k).acquire(controller.signal).catch((e: unknown) => e);
    controller.abort(reason);
    expect(await waiting).toBe(reason);
    await holder.release();
  });

  it('a refresh that finds the key taken reports the loss through onLockLost and the signal', async () => {
    const k = key();
    const lost: Error[] = [];
    const mutex = new semaphores.Mutex(client(), k, {
      lockTimeout: 2_000,
      refreshInterval: 50,
      onLockLost: (error) => void lost.push(error),
    });
    await mutex.acquire();
    const signal = mutex.signal as AbortSignal;
    await raw.set(`mutex:${k}`, 'another holder');
    await eventually('the loss was reported', async () => lost.length > 0);
    expect(lost[0]).toBeInstanceOf(semaphores.LostLockError);
    expect(signal.aborted).toBe(true);
    expect(mutex.isAcquired).toBe(false);
    await mutex.release();
    expect(await raw.get(`mutex:${k}`)).toBe('another holder'); // never another holder's key
  });
});

describe('fence counters', () => {
  it('live on the lock key slot, hash tag or not', () => {
    for (const name of ['plain', '{redlock}x', 'mutex:a{b', 'semaphore:{tag}rest', 'a}b{c}d']) {
      expect(calculateSlot(fenceKeyOf(name)), name).toBe(calculateSlot(name));
    }
  });
});
