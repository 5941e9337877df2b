import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
import type { LockProvider } from '../../src/index.js';
import { describeSemaphoreConformance } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

// A cut-off holder notices within health interval + callTimeoutMs; the server would notice by TCP
// keepalive, which the fault proxy plays by resetting the connections SERVER_NOTICES_MS later.
const HEALTH_MS = 300;
const CALL_TIMEOUT_MS = 1_000;
const SERVER_NOTICES_MS = 2_500;

describe('PostgreSQL semaphores', () => {
  let postgres: ServerGroup;
  const proxies = new Map<LockProvider, FaultProxy>();
  beforeAll(async () => {
    postgres = await startServers('postgres');
  });
  afterAll(async () => {
    await Promise.all([...proxies.values()].map((p) => p.close()));
    await postgres?.stop();
  });

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
        const url = new URL(endpoint(postgres, 'PG_URL'));
        const proxy = await FaultProxy.start({ host: url.hostname, port: Number(url.port) });
        url.port = String(proxy.port);
        const provider = new PostgresLockProvider({
          connectionString: url.toString(),
          callTimeoutMs: CALL_TIMEOUT_MS,
          healthCheckIntervalMs: HEALTH_MS,
          healthCheckTimeoutMs: HEALTH_MS,
        });
        proxies.set(provider, proxy);
        return provider;
      },
      faults: {
        crash: async (provider) => (provider as PostgresLockProvider).abandon(),
        partition: async (provider, cut) => {
          const proxy = proxies.get(provider);
          if (!proxy) return;
          if (!cut) {
            proxy.setMode({ kind: 'pass' });
            return;
          }
          proxy.setMode({ kind: 'blackhole' });
          setTimeout(() => proxy.cutAll(), SERVER_NOTICES_MS).unref();
        },
      },
    },
    { describe, it, afterEach },
  );
});
