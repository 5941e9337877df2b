import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { RedlockProvider } from '../../adapters/redis/index.js';
import type { LockProvider } from '../../src/index.js';
import { describeConformance } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

const TTL_MS = 1_000;

describe('Redlock on 3 independent Redis instances', () => {
  let redis: ServerGroup;
  const proxies = new Map<LockProvider, FaultProxy[]>();
  beforeAll(async () => {
    redis = await startServers('redis', { size: 3 });
  });
  afterAll(async () => {
    await Promise.all([...proxies.values()].flat().map((p) => p.close()));
    await redis?.stop();
  });

  describeConformance(
    {
      name: 'redlock (3 instances)',
      ttlMs: TTL_MS,
      holderDeathBoundMs: TTL_MS + 2_000,
      fifo: false,
      createProvider: async () => {
        const chain = await Promise.all(
          endpoint(redis, 'REDIS_HOSTS')
            .split(',')
            .map((address) => {
              const [host = '', port = ''] = address.split(':');
              return FaultProxy.start({ host, port: Number(port) });
            }),
        );
        const provider = new RedlockProvider({ instances: chain.map((p) => `redis://${p.address}`) });
        proxies.set(provider, chain);
        return provider;
      },
      faults: {
        crash: async (provider) => (provider as RedlockProvider).abandon(),
        partition: async (provider, cut) => {
          for (const proxy of proxies.get(provider) ?? [])
            proxy.setMode(cut ? { kind: 'blackhole' } : { kind: 'pass' });
        },
      },
    },
    { describe, it, afterEach },
  );
});
