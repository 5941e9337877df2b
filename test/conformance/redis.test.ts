import { afterEach, describe, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { describeConformance } from '../../src/testing/index.js';
import { proxiedServer } from '../servers/proxied-server.js';

const TTL_MS = 1_000;

describe('Redis', () => {
  const server = proxiedServer('redis');
  const providers: RedisLockProvider[] = [];

  describeConformance(
    {
      name: 'redis (fair)',
      ttlMs: TTL_MS,
      holderDeathBoundMs: TTL_MS + 2_000,
      fifo: true,
      queue: 'owners',
      wakeups: () => providers.reduce((sum, p) => sum + p.wakeups, 0),
      createProvider: async () => {
        const provider = await server.through((url) => new RedisLockProvider({ url, callTimeoutMs: 500 }));
        providers.push(provider);
        return provider;
      },
      lockDelay: true,
      faults: {
        crash: async (provider) => (provider as RedisLockProvider).abandon(),
        partition: server.partition(),
      },
    },
    { describe, it, afterEach },
  );
});
