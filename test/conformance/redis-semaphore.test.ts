import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import type { LockProvider } from '../../src/index.js';
import { describeSemaphoreConformance } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

const TTL_MS = 1_000;
const CALL_TIMEOUT_MS = 500;

describe('Redis semaphores', () => {
  let redis: ServerGroup;
  const proxies = new Map<LockProvider, FaultProxy>();
  const providers: RedisLockProvider[] = [];
  beforeAll(async () => {
    redis = await startServers('redis');
  });
  afterAll(async () => {
    await Promise.all([...proxies.values()].map((p) => p.close()));
    await redis?.stop();
  });

  describeSemaphoreConformance(
    {
      name: 'redis',
      ttlMs: TTL_MS,
      holderDeathBoundMs: TTL_MS + 1_000,
      fifo: true,
      limitMismatch: true,
      callTimeoutMs: CALL_TIMEOUT_MS,
      wakeups: () => providers.reduce((sum, p) => sum + p.wakeups, 0),
      createProvider: async () => {
        const [host = '', port = ''] = endpoint(redis, 'REDIS_HOSTS').split(',')[0]?.split(':') ?? [];
        const proxy = await FaultProxy.start({ host, port: Number(port) });
        const provider = new RedisLockProvider({
          url: `redis://${proxy.address}`,
          callTimeoutMs: CALL_TIMEOUT_MS,
        });
        proxies.set(provider, proxy);
        providers.push(provider);
        return provider;
      },
      faults: {
        crash: async (provider) => (provider as RedisLockProvider).abandon(),
        partition: async (provider, cut) =>
          proxies.get(provider)?.setMode(cut ? { kind: 'blackhole' } : { kind: 'pass' }),
      },
    },
    { describe, it, afterEach },
  );
});
