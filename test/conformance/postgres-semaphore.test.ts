import { afterEach, describe, it } from 'vitest';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
import { describeSemaphoreConformance } from '../../src/testing/index.js';
import { proxiedServer } from '../servers/proxied-server.js';

// A cut-off holder notices within health interval + callTimeoutMs; the server would notice by TCP
// keepalive, which the fault proxy plays by resetting the connections SERVER_NOTICES_MS later.
const HEALTH_MS = 300;
const CALL_TIMEOUT_MS = 1_000;
const SERVER_NOTICES_MS = 2_500;

describe('PostgreSQL semaphores', () => {
  const server = proxiedServer('postgres');

  describeSemaphoreConformance(
    {
      name: 'postgres',
      ttlMs: 1_000,
      // A crashed holder's connection closes: PostgreSQL frees its slots at once; the head of the
      // queue finds them at its next look (every 500 ms). A cut-off one: when the server notices.
      holderDeathBoundMs: SERVER_NOTICES_MS + 1_000,
      fifo: true,
      limitMismatch: true,
      callTimeoutMs: CALL_TIMEOUT_MS,
      createProvider: async () => {
        return server.through(
          (url) =>
            new PostgresLockProvider({
              connectionString: url,
              callTimeoutMs: CALL_TIMEOUT_MS,
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
