import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { describeSemaphoreConformance } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

const TTL_MS = 1_000;

describe('Redis semaphores', () => {
  let redis: ServerGroup;
  const providers: RedisLockProvider[] = [];
  beforeAll(async () => {
    redis = await startServers('redis');
  });
  afterAll(async () => {
    await redis?.stop();
  });

  describeSemaphoreConformance(
    {
      name: 'redis',
      ttlMs: TTL_MS,
      holderDeathBoundMs: TTL_MS + 1_000,
      fifo: true,
      limitMismatch: true,
      wakeups: () => providers.reduce((sum, p) => sum + p.wakeups, 0),
      createProvider: async () => {
        const host = endpoint(redis, 'REDIS_HOSTS').split(',')[0];
        const provider = new RedisLockProvider({ url: `redis://${host}`, callTimeoutMs: 1_000 });
        providers.push(provider);
        return provider;
      },
      faults: { crash: async (provider) => (provider as RedisLockProvider).abandon() },
    },
    { describe, it, afterEach },
  );
});
