import { afterEach, describe, it } from 'vitest';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
import { describeReadWriteConformance } from '../../src/testing/index.js';
import { proxiedServer } from '../servers/proxied-server.js';

// As for locks: a cut-off holder notices within health interval + callTimeoutMs; the server would
// notice by TCP keepalive, which the fault proxy plays by resetting the connections later.
const HEALTH_MS = 300;
const CALL_TIMEOUT_MS = 1_000;
const SERVER_NOTICES_MS = 2_500;

describe('PostgreSQL read-write locks', () => {
  const server = proxiedServer('postgres');

  describeReadWriteConformance(
    {
      name: 'postgres',
      ttlMs: 1_000,
      holderDeathBoundMs: SERVER_NOTICES_MS + 1_000,
      callTimeoutMs: CALL_TIMEOUT_MS,
      createProvider: async () =>
        server.through(
          (url) =>
            new PostgresLockProvider({
              connectionString: url,
              callTimeoutMs: CALL_TIMEOUT_MS,
              healthCheckIntervalMs: HEALTH_MS,
              healthCheckTimeoutMs: HEALTH_MS,
            }),
        ),
      lockDelay: true,
      faults: {
        crash: async (provider) => (provider as PostgresLockProvider).abandon(),
        partition: server.partition(SERVER_NOTICES_MS),
      },
    },
    { describe, it, afterEach },
  );
});
