import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { PostgresLockProvider } from '../../adapters/postgres/index.js';
import type { LockProvider } from '../../src/index.js';
import { describeConformance } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

// A cut-off client notices within interval + timeout (0.6 s). The server would notice by TCP
// keepalive; the fault proxy plays that part by resetting the connection SERVER_NOTICES_MS later.
const HEALTH_MS = 300;
const SERVER_NOTICES_MS = 2_000;

describe('PostgreSQL', () => {
  let postgres: ServerGroup;
  const proxies = new Map<LockProvider, FaultProxy>();
  beforeAll(async () => {
    postgres = await startServers('postgres');
  });
  afterAll(async () => {
    await Promise.all([...proxies.values()].map((p) => p.close()));
    await postgres?.stop();
  });

  describeConformance(
    {
      name: 'postgres',
      ttlMs: 1_000,
      holderDeathBoundMs: SERVER_NOTICES_MS + 2_000,
      fifo: true,
      createProvider: async () => {
        const url = new URL(endpoint(postgres, 'PG_URL'));
        const proxy = await FaultProxy.start({ host: url.hostname, port: Number(url.port) });
        url.port = String(proxy.port);
        const provider = new PostgresLockProvider({
          connectionString: url.toString(),
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
