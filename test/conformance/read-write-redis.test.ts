import { afterEach, describe, it } from 'vitest';
import { RedisLockProvider } from '../../adapters/redis/index.js';
import { describeReadWriteConformance } from '../../src/testing/index.js';
import { proxiedServer } from '../servers/proxied-server.js';

const TTL_MS = 1_000;
const CALL_TIMEOUT_MS = 500;

describe('Redis read-write locks', () => {
  const server = proxiedServer('redis');

  describeReadWriteConformance(
    {
      name: 'redis',
      ttlMs: TTL_MS,
      holderDeathBoundMs: TTL_MS + 1_000,
      callTimeoutMs: CALL_TIMEOUT_MS,
      createProvider: async () =>
        server.through((url) => new RedisLockProvider({ url, callTimeoutMs: CALL_TIMEOUT_MS })),
      lockDelay: true,
      faults: {
        crash: async (provider) => (provider as RedisLockProvider).abandon(),
        partition: server.partition(),
      },
    },
    { describe, it, afterEach },
  );
});
