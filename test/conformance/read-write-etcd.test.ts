import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { EtcdLockProvider } from '../../adapters/etcd/index.js';
import type { LockProvider } from '../../src/index.js';
import { describeReadWriteConformance } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

const SESSION_TTL_MS = 2_000;
const CALL_TIMEOUT_MS = 1_000;

describe('etcd read-write locks', () => {
  let etcd: ServerGroup;
  const proxies = new Map<LockProvider, FaultProxy[]>();
  beforeAll(async () => {
    etcd = await startServers('etcd');
  });
  afterAll(async () => {
    await Promise.all([...proxies.values()].flat().map((p) => p.close()));
    await etcd?.stop();
  });

  describeReadWriteConformance(
    {
      name: 'etcd',
      ttlMs: SESSION_TTL_MS,
      holderDeathBoundMs: SESSION_TTL_MS + 2_000,
      callTimeoutMs: CALL_TIMEOUT_MS,
      createProvider: async () => {
        const chain = await Promise.all(
          endpoint(etcd, 'ETCD_ENDPOINTS')
            .split(',')
            .map((url) => {
              const { hostname, port } = new URL(url);
              return FaultProxy.start({ host: hostname, port: Number(port) });
            }),
        );
        const provider = new EtcdLockProvider({
          endpoints: chain.map((p) => `http://${p.address}`),
          sessionTtlMs: SESSION_TTL_MS,
          callTimeoutMs: CALL_TIMEOUT_MS,
        });
        proxies.set(provider, chain);
        return provider;
      },
      lockDelay: true,
      faults: {
        crash: async (provider) => (provider as EtcdLockProvider).abandon(),
        partition: async (provider, cut) => {
          for (const proxy of proxies.get(provider) ?? []) {
            proxy.setMode(cut ? { kind: 'blackhole' } : { kind: 'pass' });
          }
        },
      },
    },
    { describe, it, afterEach },
  );
});
