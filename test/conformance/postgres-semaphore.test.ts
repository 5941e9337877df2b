import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
import { describeSemaphoreConformance } from '../../src/testing/index.js';
import { endpoint, type ServerGroup, startServers } from '../servers/index.js';

describe('PostgreSQL semaphores', () => {
  let postgres: ServerGroup;
  beforeAll(async () => {
    postgres = await startServers('postgres');
  });
  afterAll(async () => {
    await postgres?.stop();
  });

  describeSemaphoreConformance(
    {
      name: 'postgres',
      ttlMs: 1_000,
      // A crashed holder's connection closes: PostgreSQL frees its slots at once; the head of the
      // queue finds them at its next look (every 500 ms).
      holderDeathBoundMs: 2_000,
      fifo: true,
      limitMismatch: true,
      createProvider: async () =>
        new PostgresLockProvider({ connectionString: endpoint(postgres, 'PG_URL'), callTimeoutMs: 2_000 }),
      faults: { crash: async (provider) => (provider as PostgresLockProvider).abandon() },
    },
    { describe, it, afterEach },
  );
});
