import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { uniqueKey, waitersReach } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

// Acquires of one name inside one provider line up in process: Redis queues one waiter per
// provider and name, however many of its requests wait, so the polls of waiters stay few.
describe('Redis: one queued waiter per provider and name', () => {
  let server: ServerGroup;
  let a: RedisLockProvider;
  let b: RedisLockProvider;
  let c: RedisLockProvider;
  let raw: Redis;
  beforeAll(async () => {
    server = await startServers('redis');
    const url = endpoint(server, 'REDIS_URL');
    [a, b, c] = [
      new RedisLockProvider({ url }),
      new RedisLockProvider({ url }),
      new RedisLockProvider({ url }),
    ];
    raw = new Redis(url);
  });
  afterAll(async () => {
    await Promise.allSettled([a?.close(), b?.close(), c?.close()]);
    raw?.disconnect();
    await server?.stop();
  });

  it('waiters of one provider wait in process; inspect counts them; they are granted in order', async () => {
    const key = uniqueKey('line');
    const holder = await b.acquire(key);
    const order: number[] = [];
    const waits = [0, 1, 2, 3, 4].map((i) =>
      a.acquire(key, { waitMs: 30_000 }).then(async (lock) => {
        order.push(i);
        await lock.release();
      }),
    );
    await waitersReach(a, key, 5);
    expect(await raw.zcard(a.keys(key).queue)).toBe(1);
    expect((await b.inspect(key))?.waiters).toBe(1);
    await holder.release();
    await Promise.all(waits);
    expect(order).toEqual([0, 1, 2, 3, 4]);
  });

  it('a try finds the name busy while a request of the same provider waits for it', async () => {
    const key = uniqueKey('try-line');
    const holder = await b.acquire(key);
    const waiting = a.acquire(key, { waitMs: 30_000 });
    await waitersReach(b, key, 1);
    expect(await a.tryAcquire(key)).toBeNull();
    await holder.release();
    await (await waiting).release();
    expect(await a.inspect(key)).toBeNull();
  });

  it("a provider's next request takes its place by when it was asked for, not behind later askers", async () => {
    const key = uniqueKey('arrival');
    const holder = await b.acquire(key);
    const order: string[] = [];
    const granted = (name: string) => async (lock: { release(): Promise<void> }) => {
      order.push(name);
      await lock.release();
    };
    const first = a.acquire(key, { waitMs: 30_000 }).then(granted('a1'));
    await waitersReach(b, key, 1); // a1 queued in Redis
    const second = a.acquire(key, { waitMs: 30_000 }).then(granted('a2'));
    await waitersReach(a, key, 2); // a2 waits in a's line, asked before c1 below
    await new Promise((resolve) => setTimeout(resolve, 20)); // a slower machine only widens the gap
    const third = c.acquire(key, { waitMs: 30_000 }).then(granted('c1'));
    await waitersReach(b, key, 2); // c1 queued in Redis behind a1
    await holder.release();
    await Promise.all([first, second, third]);
    // In a round of providers, a2 would queue only after a1's release, behind c1.
    expect(order).toEqual(['a1', 'a2', 'c1']);
  });
});
