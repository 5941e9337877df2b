import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import { describeSemaphoreConformance } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

const SESSION_TTL_MS = 2_000;

describe('etcd semaphores', () => {
  let etcd: ServerGroup;
  const providers: EtcdLockProvider[] = [];
  beforeAll(async () => {
    etcd = await startServers('etcd');
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  describeSemaphoreConformance(
    {
      name: 'etcd',
      ttlMs: SESSION_TTL_MS,
      holderDeathBoundMs: SESSION_TTL_MS + 2_000,
      fifo: true,
      limitMismatch: true,
      // A released permit wakes the head of the queue only (its grant then wakes the next waiter,
      // counted apart as a handoff, as in Curator's InterProcessSemaphoreV2).
      wakeups: () => providers.reduce((sum, p) => sum + p.semaphoreWakeups, 0),
      createProvider: async () => {
        const provider = new EtcdLockProvider({
          endpoints: endpoint(etcd, 'ETCD_ENDPOINTS').split(','),
          sessionTtlMs: SESSION_TTL_MS,
          callTimeoutMs: 1_000,
        });
        providers.push(provider);
        return provider;
      },
      faults: { crash: async (provider) => (provider as EtcdLockProvider).abandon() },
    },
    { describe, it, afterEach },
  );
});
