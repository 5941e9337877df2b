import { afterAll, afterEach, beforeAll, describe, it } from 'vitest';
import { ZooKeeperLockProvider } from '../../adapters/zookeeper/index.js';
import type { LockProvider } from '../../src/index.js';
import { describeReadWriteConformance } from '../../src/testing/index.js';
import { endpoint, FaultProxy, type ServerGroup, startServers } from '../servers/index.js';

const SESSION_TIMEOUT_MS = 2_000;
const CALL_TIMEOUT_MS = 1_000;

describe('ZooKeeper read-write locks', () => {
  let zk: ServerGroup;
  const proxies = new Map<LockProvider, FaultProxy[]>();
  beforeAll(async () => {
    zk = await startServers('zookeeper');
  });
  afterAll(async () => {
    await Promise.all([...proxies.values()].flat().map((p) => p.close()));
    await zk?.stop();
  });

  describeReadWriteConformance(
    {
      name: 'zookeeper',
      ttlMs: SESSION_TIMEOUT_MS,
      holderDeathBoundMs: SESSION_TIMEOUT_MS + 2_000,
      callTimeoutMs: CALL_TIMEOUT_MS,
      createProvider: async () => {
        const chain = await Promise.all(
          endpoint(zk, 'ZK_CONNECT')
            .split(',')
            .map((address) => {
              const [host = '', port = ''] = address.split(':');
              return FaultProxy.start({ host, port: Number(port) });
            }),
        );
        const provider = new ZooKeeperLockProvider({
          connectString: chain.map((p) => p.address).join(','),
          sessionTimeoutMs: SESSION_TIMEOUT_MS,
          serverTickMs: 200, // the test servers' tickTime
          callTimeoutMs: CALL_TIMEOUT_MS,
        });
        proxies.set(provider, chain);
        return provider;
      },
      lockDelay: true,
      faults: {
        crash: async (provider) => (provider as ZooKeeperLockProvider).abandon(),
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
