import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { lockKeys } from '../../adapters/redis/scripts.js';
import { semaphoreKeys } from '../../adapters/redis/semaphore-scripts.js';
import { uniqueKey } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

/**
 * A request whose answer is lost leaves a clean-up (give back what the script granted) to the
 * provider's leftovers. A retry of the request supersedes it; when that retry sends nothing (Redis
 * refuses connections), the clean-up must still be owed, not dropped until the grant's TTL.
 */
describe('Redis: a clean-up superseded by a retry that sends nothing', () => {
  let server: ServerGroup;
  let target: { host: string; port: number };
  let raw: Redis;
  const providers: RedisLockProvider[] = [];
  const proxies: FaultProxy[] = [];
  beforeAll(async () => {
    server = await startServers('redis');
    const [host = '', port = ''] = endpoint(server, 'REDIS_HOSTS').split(',')[0]?.split(':') ?? [];
    target = { host, port: Number(port) };
    raw = new Redis(endpoint(server, 'REDIS_URL'));
  });
  afterAll(async () => {
    await Promise.allSettled(providers.map((p) => p.close()));
    await Promise.allSettled(proxies.map((p) => p.close()));
    raw?.disconnect();
    await server?.stop();
  });

  /**
   * The first request that names `name` reaches Redis and is applied, its answer is lost and Redis
   * refuses connections from then on, until the request has given up (waitMs). Then Redis is
   * reachable again: returns how long the grant the script made stays, at most `boundMs`.
   */
  const grantLeftBehind = async (
    name: string,
    acquire: (provider: RedisLockProvider) => Promise<unknown>,
    granted: () => Promise<boolean>,
    boundMs: number,
  ) => {
    const proxy = await FaultProxy.start(target);
    proxies.push(proxy);
    const provider = new RedisLockProvider({ url: `redis://${proxy.address}`, callTimeoutMs: 300 });
    providers.push(provider);
    // Connected before the fault, locks and semaphores alike (a backend never reached is not waited for).
    await provider.inspect(uniqueKey('warm-up'));
    await provider.semaphore(uniqueKey('warm-up'), { limit: 1 }).inspect();
    proxy.cutAfterRequest(
      (chunk) => chunk.includes(name),
      () => proxy.setMode({ kind: 'refuse' }),
    );
    const outcome = await acquire(provider).then(
      () => 'granted',
      (error: { code?: string }) => error.code,
    );
    expect(await granted()).toBe(true); // the lost request did grant
    proxy.setMode({ kind: 'pass' });
    const reachable = performance.now();
    while ((await granted()) && performance.now() - reachable < boundMs) {
      await new Promise((r) => setTimeout(r, 50));
    }
    return { outcome, leftMs: Math.round(performance.now() - reachable) };
  };

  it('a semaphore permit is given back once Redis is reachable again, not at its TTL', async () => {
    const name = uniqueKey('sem-leftover');
    const [holders] = semaphoreKeys('fencekit:', name) as [string];
    const { outcome, leftMs } = await grantLeftBehind(
      name,
      (p) => p.semaphore(name, { limit: 1 }).acquire({ ttlMs: 60_000, waitMs: 2_000 }),
      async () => (await raw.zcard(holders)) > 0,
      15_000,
    );
    console.log(
      `semaphore: the request ended ${outcome}; its permit stayed ${leftMs} ms once Redis was back (TTL 60 s)`,
    );
    expect(outcome).not.toBe('granted');
    expect(leftMs).toBeLessThan(15_000);
  }, 60_000);

  it('a lock is given back once Redis is reachable again, not at its TTL', async () => {
    const name = uniqueKey('lock-leftover');
    const { outcome, leftMs } = await grantLeftBehind(
      name,
      (p) => p.acquire(name, { ttlMs: 60_000, waitMs: 2_000 }),
      async () => (await raw.exists(lockKeys('fencekit:', name).lock)) > 0,
      15_000,
    );
    console.log(
      `lock: the request ended ${outcome}; its key stayed ${leftMs} ms once Redis was back (TTL 60 s)`,
    );
    expect(outcome).not.toBe('granted');
    expect(leftMs).toBeLessThan(15_000);
  }, 60_000);
});
