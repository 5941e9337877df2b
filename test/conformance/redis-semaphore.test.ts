import { afterEach, describe, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { describeSemaphoreConformance } from '../../src/testing/index.js';
import { proxiedServer } from '../servers/proxied-server.js';

const TTL_MS = 1_000;
const CALL_TIMEOUT_MS = 500;

describe('Redis semaphores', () => {
  const server = proxiedServer('redis');
  const providers: RedisLockProvider[] = [];

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
        const provider = await server.through(
          (url) =>
            new RedisLockProvider({
              url: url,
              callTimeoutMs: CALL_TIMEOUT_MS,
            }),
        );
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
