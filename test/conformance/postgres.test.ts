import { afterEach, describe, it } from 'vitest';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
import { describeConformance } from '../../src/testing/index.js';
import { proxiedServer } from '../servers/proxied-server.js';

// A cut-off client notices within interval + timeout (0.6 s). The server would notice by TCP
// keepalive; the fault proxy plays that part by resetting the connection SERVER_NOTICES_MS later.
const HEALTH_MS = 300;
const SERVER_NOTICES_MS = 2_000;

describe('PostgreSQL', () => {
  const server = proxiedServer('postgres');

  describeConformance(
    {
      name: 'postgres',
      ttlMs: 1_000,
      holderDeathBoundMs: SERVER_NOTICES_MS + 2_000,
      fifo: true,
      queue: 'order',
      // forceRelease ends the holder's session: the holder sees its connection end.
      revokedReason: 'connection-lost',
      createProvider: async () => {
        return server.through(
          (url) =>
            new PostgresLockProvider({
              connectionString: url,
              healthCheckIntervalMs: HEALTH_MS,
              healthCheckTimeoutMs: HEALTH_MS,
            }),
        );
      },
      lockDelay: true,
      faults: {
        crash: async (provider) => (provider as PostgresLockProvider).abandon(),
        partition: server.partition(SERVER_NOTICES_MS),
      },
    },
    { describe, it, afterEach },
  );
});
